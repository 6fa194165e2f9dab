//! What clients send, turned into values the pipeline can use: the body
//! read within its limit, and a Segment-style batch decoded from it. Pure
//! functions apart from reading the body stream.

mod batch;
mod body;
mod budget;
mod error;
pub mod ga4;
mod json;
mod json_errors;
pub mod posthog;
pub mod snowplow;
mod tracker;

pub use batch::{BatchRequest, SEGMENT, Undecodable, decode_batch, decode_single};
pub use body::{GZIP_MAGIC, UnreadBody, check_media_type, decode, gunzip, read_body};
pub use budget::{BodyBudget, BodyBuffer, FIRST_BUFFER_BYTES, Refused, StreamSlot, StreamSlots};
pub use error::WireError;
pub use json::{JsonLimits, MAX_NUMBER_CHARS, parse};
