//! The on-disk format: a segment is an 8-byte header then framed records,
//! each checksummed, so a torn tail (a crash mid-write) or a flipped byte
//! is found, reported and stepped over, and everything else still reads.
//!
//! ```text
//! segment := "EVGWSPL1" frame*
//! frame   := magic u32 | len u32 | crc32 u32 | seq u64 | stamp u64 | body      (little endian)
//!            len counts seq..end of body; crc32 covers the same bytes
//! stamp   := appended_at_ms (bits 0-62) | in_flight (bit 63: the record's first
//!            send was still in flight when it was spooled)
//! body    := topic (u16 len, bytes) | key (u32 len, bytes)
//!            | header count u16, each (u16 len, name)(u32 len, value) | payload (u32 len, bytes)
//! ```
//!
//! The header, the frames, their checksums and the scan that steps over
//! damage are [`crate::storage`]'s (magic `SPOL` is `0x4c4f5053` as a
//! little-endian u32, as it always was); this module holds what a frame's
//! payload says (`seq | stamp | body`), so spools written before the
//! storage module existed replay unchanged.

use crate::sink::OutRecord;
pub use crate::storage::Damage;
use crate::storage::{self, Format};

/// The first bytes of every segment file.
pub const SEGMENT_HEADER: &[u8; 8] = b"EVGWSPL1";
/// seq + appended_at_ms, at the start of every payload.
const FRAME_FIXED: usize = 16;
/// A frame claiming more than this is damage, not a record.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;
/// The spool's segment format.
pub const SPOOL: Format =
    Format { header: SEGMENT_HEADER, magic: b"SPOL", min_payload: FRAME_FIXED, max_payload: MAX_FRAME };

/// One record read back from the spool, with everything Kafka needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpooledRecord {
    /// Position in the spool; increases by one per record, across segments and restarts.
    pub seq: u64,
    /// When it was appended, in milliseconds since the epoch.
    pub appended_at_ms: u64,
    /// Its first send was still in flight when it was spooled: after a
    /// crash nobody knows whether that send landed, so replay looks for the
    /// record in Kafka before sending it.
    pub in_flight: bool,
    /// Destination topic.
    pub topic: String,
    /// Its original partition key.
    pub key: String,
    /// Its original headers (event id, schema, source...).
    pub headers: Vec<(String, String)>,
    /// The enriched event as produced to Kafka.
    pub payload: Vec<u8>,
}

/// What a scan of a segment (or part of one) found.
pub type Scan = storage::Scan<SpooledRecord>;

/// Encodes what a frame carries after seq and time: done on the request's
/// thread so the writer thread only frames, checksums and writes.
pub fn encode_body(record: &OutRecord, out: &mut Vec<u8>) {
    put_bytes16(out, record.topic.as_bytes());
    put_bytes32(out, record.key.as_bytes());
    let count = u16::try_from(record.headers.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&count.to_le_bytes());
    for (name, value) in record.headers.iter().take(usize::from(count)) {
        put_bytes16(out, name.as_bytes());
        put_bytes32(out, value.as_bytes());
    }
    put_bytes32(out, &record.payload);
}

/// The stamp's bit saying the record's first send was in flight.
const IN_FLIGHT: u64 = 1 << 63;

/// Appends one frame around `body` to `out`; returns its length.
#[cfg(test)]
pub fn frame(seq: u64, appended_at_ms: u64, body: &[u8], out: &mut Vec<u8>) -> usize {
    frame_flagged(seq, appended_at_ms, false, body, out)
}

/// [`frame`], saying whether the record's first send is still in flight.
pub fn frame_flagged(seq: u64, appended_at_ms: u64, in_flight: bool, body: &[u8], out: &mut Vec<u8>) -> usize {
    let stamp = (appended_at_ms & !IN_FLIGHT) | if in_flight { IN_FLIGHT } else { 0 };
    SPOOL.frame(out, |payload| {
        payload.extend_from_slice(&seq.to_le_bytes());
        payload.extend_from_slice(&stamp.to_le_bytes());
        payload.extend_from_slice(body);
    })
}

fn put_bytes16(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&bytes[..usize::from(len)]);
}

fn put_bytes32(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads every frame of `bytes`, which start at file offset `base`.
/// Damage is recorded and stepped over.
pub fn scan(bytes: &[u8], base: u64) -> Scan {
    storage::scan(&SPOOL, bytes, base, decode)
}

/// The record inside a frame whose checksum holds.
pub(super) fn decode(checked: &[u8]) -> Option<SpooledRecord> {
    let mut r = Reader { bytes: checked, at: 0 };
    let seq = r.u64()?;
    let stamp = r.u64()?;
    let (appended_at_ms, in_flight) = (stamp & !IN_FLIGHT, stamp & IN_FLIGHT != 0);
    let topic = r.text16()?;
    let key = r.text32()?;
    let count = r.u16()?;
    let mut headers = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        headers.push((r.text16()?, r.text32()?));
    }
    let payload_len = r.u32()? as usize;
    let payload = r.take(payload_len)?.to_vec();
    (r.at == checked.len()).then_some(())?;
    Some(SpooledRecord { seq, appended_at_ms, in_flight, topic, key, headers, payload })
}

/// Bounds-checked little-endian reads.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn text16(&mut self) -> Option<String> {
        let n = usize::from(self.u16()?);
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn text32(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Vec<u8> {
        let record = OutRecord {
            topic: "web.tracking".into(),
            key: "user-1".into(),
            payload: b"{}".to_vec().into(),
            headers: vec![("event-id", "id-1".into())],
        };
        let mut body = Vec::new();
        encode_body(&record, &mut body);
        body
    }

    #[test]
    fn the_in_flight_flag_survives_the_disk_and_leaves_the_time_alone() {
        let mut bytes = Vec::new();
        frame_flagged(7, 1_700_000_000_123, true, &body(), &mut bytes);
        frame_flagged(8, 1_700_000_000_456, false, &body(), &mut bytes);
        frame(9, 1_700_000_000_789, &body(), &mut bytes);
        let scan = scan(&bytes, 0);
        assert!(scan.damage.is_empty());
        let read: Vec<(u64, u64, bool)> = scan.records.iter().map(|r| (r.seq, r.appended_at_ms, r.in_flight)).collect();
        assert_eq!(
            read,
            vec![(7, 1_700_000_000_123, true), (8, 1_700_000_000_456, false), (9, 1_700_000_000_789, false)]
        );
    }

    /// A frame laid out by hand as the spool wrote it before the storage
    /// module existed: written the same way, and read.
    #[test]
    fn a_frame_of_the_previous_version_reads_and_is_written_the_same() {
        let body = body();
        let mut checked = 5u64.to_le_bytes().to_vec();
        checked.extend_from_slice(&(1_700_000_000_000u64 | 1 << 63).to_le_bytes());
        checked.extend_from_slice(&body);
        let mut old = 0x4c4f_5053u32.to_le_bytes().to_vec();
        old.extend_from_slice(&(checked.len() as u32).to_le_bytes());
        old.extend_from_slice(&crc32fast::hash(&checked).to_le_bytes());
        old.extend_from_slice(&checked);
        let mut ours = Vec::new();
        frame_flagged(5, 1_700_000_000_000, true, &body, &mut ours);
        assert_eq!(ours, old, "the same bytes as before");
        let scan = scan(&old, SEGMENT_HEADER.len() as u64);
        assert!(scan.damage.is_empty());
        let r = &scan.records[0];
        assert_eq!((r.seq, r.appended_at_ms, r.in_flight, r.key.as_str()), (5, 1_700_000_000_000, true, "user-1"));
    }
}
