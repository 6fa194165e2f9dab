//! What clients send, turned into values the pipeline can use: the body
//! read within its limit, and a Segment-style batch decoded from it. Pure
//! functions apart from reading the body stream.

mod batch;
mod body;

pub use batch::{BatchRequest, decode_batch};
pub use body::read_body;
