//! Reading spool segments a bounded chunk at a time (replay, recovery and
//! `gateway spool inspect`): [`crate::storage`]'s reader, decoding each
//! frame's payload into a [`SpooledRecord`].

use std::path::Path;

use super::format::{Damage, SPOOL, SpooledRecord, decode};
use crate::storage;

/// Reads the records of a spool segment between two offsets a bounded
/// chunk at a time, so replaying or recovering a 64 MiB segment never
/// holds it in memory.
pub struct SegmentReader(storage::SegmentReader);

impl SegmentReader {
    /// Reads `path` from offset `from` up to `end`.
    pub fn open(path: &Path, from: u64, end: u64) -> std::io::Result<Self> {
        storage::SegmentReader::open(SPOOL, path, from, end).map(Self)
    }

    /// Up to `max` records (at least one unless the end is reached): empty
    /// only when everything up to the end is read.
    pub fn next(&mut self, max: usize) -> std::io::Result<Vec<SpooledRecord>> {
        self.0.next(max, decode)
    }

    /// The file offset up to which frames were consumed.
    pub fn offset(&self) -> u64 {
        self.0.offset()
    }

    /// True when the file turned out shorter than the end it was opened
    /// with (for a live segment: truncated under the gateway).
    pub fn short(&self) -> bool {
        self.0.short()
    }

    /// Damaged spans found so far.
    pub fn damage(&self) -> &[Damage] {
        self.0.damage()
    }
}

/// Reads a whole segment file a chunk at a time, handing each valid record
/// to `each`; returns the file's length and its damage (a bad header first).
pub fn read_segment(path: &Path, each: impl FnMut(SpooledRecord)) -> std::io::Result<(u64, Vec<Damage>)> {
    storage::read_segment(SPOOL, path, decode, each)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::OutRecord;
    use crate::sink::spool::format::{SEGMENT_HEADER, encode_body, frame, scan};
    use crate::storage::READ_CHUNK;

    /// A segment of `n` records with payloads of varied sizes (some larger
    /// than a read chunk), so frames straddle chunk boundaries.
    fn segment(n: u64) -> Vec<u8> {
        let mut bytes = SEGMENT_HEADER.to_vec();
        for seq in 0..n {
            let size = if seq % 7 == 3 { READ_CHUNK + 1000 } else { 100 + (seq as usize * 37) % 5000 };
            let record = OutRecord {
                topic: "web.tracking".into(),
                key: format!("user-{seq}"),
                payload: vec![b'a' + (seq % 26) as u8; size].into(),
                headers: vec![("event-id", format!("id-{seq}").into())],
            };
            let mut body = Vec::new();
            encode_body(&record, &mut body);
            frame(seq, 1_000 + seq, &body, &mut bytes);
        }
        bytes
    }

    fn write(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("eventgw-reader-{name}-{}.seg", std::process::id()));
        std::fs::write(&path, bytes).expect("write segment");
        path
    }

    /// Reads `path` step by step, `max` records at a time.
    fn stream(path: &Path, max: usize) -> (Vec<SpooledRecord>, Vec<Damage>) {
        let len = std::fs::metadata(path).expect("meta").len();
        let mut reader = SegmentReader::open(path, SEGMENT_HEADER.len() as u64, len).expect("open");
        let mut all = Vec::new();
        loop {
            let records = reader.next(max).expect("read");
            assert!(records.len() <= max);
            if records.is_empty() {
                break;
            }
            all.extend(records);
        }
        assert_eq!(reader.offset(), len, "read to the end");
        (all, reader.damage().to_vec())
    }

    #[test]
    fn streaming_reads_what_a_whole_file_scan_reads() {
        let bytes = segment(40);
        let path = write("whole", &bytes);
        let whole = scan(&bytes[SEGMENT_HEADER.len()..], SEGMENT_HEADER.len() as u64);
        for max in [1, 3, 500] {
            let (records, damage) = stream(&path, max);
            assert_eq!(records, whole.records, "max {max}");
            assert!(damage.is_empty());
        }
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn damage_across_chunks_is_found_once_and_the_rest_read() {
        let mut bytes = segment(40);
        let whole_len = bytes.len();
        // A flipped byte inside a large record (the record is lost) and a torn tail.
        let clean = scan(&bytes[SEGMENT_HEADER.len()..], SEGMENT_HEADER.len() as u64).records;
        let big = clean.iter().find(|r| r.seq == 10).expect("record 10").payload.len();
        assert!(big > READ_CHUNK);
        let at = bytes.windows(5).position(|w| w == b"id-10").expect("record 10 is there") + 5000;
        bytes[at] ^= 0x40;
        bytes.truncate(whole_len - 50);
        let path = write("damage", &bytes);
        let expected = scan(&bytes[SEGMENT_HEADER.len()..], SEGMENT_HEADER.len() as u64);
        assert_eq!(expected.damage.len(), 2, "{:?}", expected.damage);
        for max in [1, 7, 500] {
            let (records, damage) = stream(&path, max);
            assert_eq!(records, expected.records, "max {max}");
            assert_eq!(damage, expected.damage, "max {max}");
        }
        let seqs: Vec<u64> = expected.records.iter().map(|r| r.seq).collect();
        assert!(!seqs.contains(&10) && !seqs.contains(&39) && seqs.contains(&11) && seqs.contains(&38));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_file_shorter_than_its_committed_length_is_said_short_and_read_to_its_end() {
        let bytes = segment(10);
        let path = write("short", &bytes);
        let committed = bytes.len() as u64;
        std::fs::OpenOptions::new().write(true).open(&path).expect("open").set_len(committed / 2).expect("cut");
        let mut reader = SegmentReader::open(&path, SEGMENT_HEADER.len() as u64, committed).expect("open");
        let mut read = 0;
        loop {
            let records = reader.next(3).expect("read");
            if records.is_empty() {
                break;
            }
            read += records.len();
        }
        assert!(reader.short(), "the cut is seen");
        assert!(read > 0 && read < 10, "what is left is read: {read}");
        assert_eq!(reader.offset(), committed / 2, "read to where the file ends, not beyond");
        let mut whole = SegmentReader::open(&path, SEGMENT_HEADER.len() as u64, committed / 2).expect("open");
        while !whole.next(3).expect("read").is_empty() {}
        assert!(!whole.short(), "a file as long as its committed length is not short");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn read_segment_reports_a_bad_header_first() {
        let mut bytes = segment(3);
        bytes[0] = b'X';
        let path = write("header", &bytes);
        let mut seen = Vec::new();
        let (len, damage) = read_segment(&path, |r| seen.push(r.seq)).expect("read");
        assert_eq!((len, seen), (bytes.len() as u64, vec![0, 1, 2]));
        assert_eq!(damage, vec![Damage { offset: 0, len: 8, torn_tail: false }]);
        let _ = std::fs::remove_file(path);
    }
}
