use std::path::{Path, PathBuf};

use super::*;
use crate::storage::frame::tests::{NARROW, WIDE, payload, segment, whole};
use crate::storage::scan;

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("eventgw-storage-reader-{name}-{}.seg", std::process::id()));
    std::fs::write(&path, bytes).expect("write segment");
    path
}

/// Sizes with some frames larger than a read chunk, so frames straddle chunks.
fn varied(seq: usize) -> usize {
    if seq % 7 == 3 { READ_CHUNK + 1000 } else { 100 + seq * 37 % 5000 }
}

/// Reads `path` step by step, `max` records at a time.
fn stream(format: Format, path: &Path, max: usize) -> (Vec<Vec<u8>>, Vec<Damage>) {
    let len = std::fs::metadata(path).expect("meta").len();
    let mut reader = SegmentReader::open(format, path, format.header.len() as u64, len).expect("open");
    let mut all = Vec::new();
    loop {
        let records = reader.next(max, whole).expect("read");
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
fn streaming_reads_what_a_whole_scan_reads_with_damage_across_chunks() {
    for (name, format) in [("wide", WIDE), ("narrow", NARROW)] {
        let (mut bytes, starts) = segment(&format, 30, varied);
        let h = format.header.len();
        // A flipped byte inside a record larger than a chunk, and a torn tail.
        bytes[starts[10] + format.head() + 5000] ^= 0x40;
        bytes.truncate(bytes.len() - 50);
        let path = write(name, &bytes);
        let expected = scan(&format, &bytes[h..], h as u64, whole);
        assert_eq!(expected.damage.len(), 2, "{:?}", expected.damage);
        assert_eq!(expected.records.len(), 28);
        for max in [1, 7, 500] {
            let (records, damage) = stream(format, &path, max);
            assert!(records == expected.records, "{name} max {max}");
            assert_eq!(damage, expected.damage, "{name} max {max}");
        }
        let (mut count, mut seen) = (0, 0);
        let (len, damage) = read_segment(format, &path, whole, |p| {
            count += 1;
            seen += p.len();
        })
        .expect("read");
        assert_eq!((len, count, damage), (bytes.len() as u64, 28, expected.damage.clone()));
        assert_eq!(seen, expected.records.iter().map(Vec::len).sum::<usize>());
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn a_torn_tail_at_every_byte_of_the_last_frame_is_read_from_the_file() {
    let (bytes, starts) = segment(&NARROW, 4, |seq| 30 + seq);
    let last = starts[3];
    for cut in last..bytes.len() {
        let path = write("torn", &bytes[..cut]);
        let mut read = Vec::new();
        let (_, damage) = read_segment(NARROW, &path, whole, |p| read.push(p)).expect("read");
        assert_eq!(read, (0..3).map(|seq| payload(seq, 30 + seq)).collect::<Vec<_>>(), "cut at {cut}");
        assert_eq!(damage.len(), usize::from(cut > last), "cut at {cut}");
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn a_file_shorter_than_its_committed_length_is_said_short() {
    let (bytes, _) = segment(&WIDE, 10, |seq| 200 + seq);
    let path = write("short", &bytes);
    let committed = bytes.len() as u64;
    std::fs::OpenOptions::new().write(true).open(&path).expect("open").set_len(committed / 2).expect("cut");
    let mut reader = SegmentReader::open(WIDE, &path, WIDE.header.len() as u64, committed).expect("open");
    while !reader.next(3, whole).expect("read").is_empty() {}
    assert!(reader.short(), "the cut is seen");
    assert_eq!(reader.offset(), committed / 2, "read to where the file ends, not beyond");
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_bad_header_is_reported_first_and_no_header_is_never_bad() {
    let (mut bytes, _) = segment(&WIDE, 3, |_| 10);
    bytes[0] = b'X';
    let path = write("header", &bytes);
    let mut read = 0;
    let (_, damage) = read_segment(WIDE, &path, whole, |_| read += 1).expect("read");
    assert_eq!((read, damage), (3, vec![Damage { offset: 0, len: 8, torn_tail: false }]));
    let (bytes, _) = segment(&NARROW, 3, |_| 10);
    std::fs::write(&path, &bytes).expect("write");
    let (_, damage) = read_segment(NARROW, &path, whole, |_| {}).expect("read");
    assert!(damage.is_empty());
    let _ = std::fs::remove_file(path);
}
