//! The one append-only segment log on local disk, under both users of
//! one: the spool ([`crate::sink::spool`], records waiting for Kafka) and
//! the dedupe id log ([`crate::dedupe::journal`], ids decided). Each keeps
//! its own record body; this module owns everything about the file:
//!
//! ```text
//! segment := header frame*                (the header is fixed per user, maybe empty)
//! frame   := magic | len u32 | crc32 u32 | payload      (little endian)
//!            len counts the payload; the CRC-32 covers the payload
//! ```
//!
//! - framing and checksums ([`Format::frame`]), many records to one buffer
//!   so a group is appended with one write ([`Appender::append`]), fsynced
//!   once when the user asks for durability (the spool does, the id log
//!   does not);
//! - all or nothing per group: a failed write (a full disk) is cut back to
//!   the last whole group, so no partial record stays for a reader;
//! - recovery ([`scan`], [`SegmentReader`], [`read_segment`]): a torn tail
//!   or a corrupt frame is reported as a [`Damage`] span and stepped over to
//!   the next frame whose checksum holds, so one bad record costs that
//!   record, not the rest of its file; read a bounded chunk at a time;
//! - segment files: creation (header written, directory fsynced), listing
//!   by name, cutting a torn file back.
//!
//! It uses nothing of the crate: a leaf below `sink` and `dedupe`.

mod frame;
mod reader;
mod segment;

pub use frame::{Damage, Format, Scan, scan, scan_part};
pub use reader::{READ_CHUNK, SegmentReader, read_segment};
pub use segment::{AppendError, Appender, SegmentFile, cut_back, list, sync_dir};
