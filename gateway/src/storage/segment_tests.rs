use std::cell::Cell;
use std::io::Write;

use super::*;
use crate::storage::frame::tests::{NARROW, WIDE, payload, whole};
use crate::storage::{Damage, read_segment};

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-storage-segment-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// A disk that takes `room` more bytes (then fails as a full disk does,
/// ENOSPC, with what fitted written), counts writes and fsyncs, and can
/// refuse to truncate.
struct Disk {
    file: File,
    room: Option<usize>,
    writes: usize,
    syncs: Cell<usize>,
    refuse_cut: bool,
}

impl Disk {
    fn open(path: &Path) -> Self {
        let file = File::options().append(true).open(path).expect("open");
        Self { file, room: None, writes: 0, syncs: Cell::new(0), refuse_cut: false }
    }
}

impl Write for Disk {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writes += 1;
        let take = self.room.map_or(buf.len(), |room| room.min(buf.len()));
        if take == 0 && !buf.is_empty() {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        let wrote = self.file.write(&buf[..take])?;
        self.room = self.room.map(|room| room - wrote);
        Ok(wrote)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl SegmentFile for Disk {
    fn sync_data(&self) -> std::io::Result<()> {
        self.syncs.set(self.syncs.get() + 1);
        self.file.sync_data()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        if self.refuse_cut {
            return Err(std::io::Error::other("the disk refuses"));
        }
        self.file.set_len(len)
    }
}

/// `n` frames of `format` from `first` on, as one group.
fn group(format: &Format, first: usize, n: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    for seq in first..first + n {
        format.frame(&mut buf, |out| out.extend_from_slice(&payload(seq, 40)));
    }
    buf
}

/// Every record of the file, and its damage.
fn read(format: Format, path: &Path) -> (Vec<Vec<u8>>, Vec<Damage>) {
    let mut records = Vec::new();
    let (_, damage) = read_segment(format, path, whole, |p| records.push(p)).expect("read");
    (records, damage)
}

fn expected(seqs: impl Iterator<Item = usize>) -> Vec<Vec<u8>> {
    seqs.map(|seq| payload(seq, 40)).collect()
}

/// A new segment of `format` in `dir`, appended to through a [`Disk`].
fn appender(format: &Format, dir: &Path, fsync: bool) -> Appender<Disk> {
    let path = dir.join("1.seg");
    let created = Appender::create(format, &path, fsync).expect("create");
    Appender::new(Disk::open(&path), path, created.committed(), fsync)
}

#[test]
fn create_writes_the_header_and_never_replaces_a_file() {
    let dir = dir("create");
    let path = dir.join("1.seg");
    let created = Appender::create(&WIDE, &path, true).expect("create");
    assert_eq!((created.committed(), std::fs::read(&path).expect("read")), (8, WIDE.header.to_vec()));
    std::fs::write(&path, b"kept").expect("write");
    assert!(Appender::create(&WIDE, &path, true).is_err(), "an existing segment is never replaced");
    assert_eq!(std::fs::read(&path).expect("read"), b"kept");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_group_is_one_write_and_one_fsync_or_none() {
    for (format, fsync) in [(WIDE, true), (NARROW, false)] {
        let dir = dir("group");
        let mut log = appender(&format, &dir, fsync);
        for first in [0, 100] {
            log.append(&group(&format, first, 100)).expect("append");
        }
        assert_eq!(log.file().writes, 2, "one write per group of 100 records");
        assert_eq!(log.file().syncs.get(), if fsync { 2 } else { 0 }, "fsync per group only when asked");
        let len = std::fs::metadata(log.path()).expect("meta").len();
        assert_eq!(log.committed(), len);
        assert_eq!(read(format, log.path()), (expected(0..200), vec![]));
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn a_full_disk_keeps_nothing_of_the_group_it_refused() {
    for fsync in [true, false] {
        let dir = dir("full");
        let mut log = appender(&WIDE, &dir, fsync);
        log.append(&group(&WIDE, 0, 3)).expect("append");
        let committed = log.committed();
        let refused = group(&WIDE, 3, 3);
        for room in [0, 1, refused.len() / 2, refused.len() - 1] {
            log.file.room = Some(room);
            let failed = log.append(&refused).expect_err("the disk is full");
            assert_eq!(failed.error.raw_os_error(), Some(28));
            assert!(failed.cut_back, "room {room}");
            assert_eq!(std::fs::metadata(log.path()).expect("meta").len(), committed, "room {room}: cut back");
            assert_eq!(read(WIDE, log.path()), (expected(0..3), vec![]), "room {room}: no partial record");
        }
        log.file.room = None;
        log.append(&group(&WIDE, 6, 2)).expect("the disk has room again");
        assert_eq!(read(WIDE, log.path()), (expected((0..3).chain(6..8)), vec![]));
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn a_failed_cut_back_refuses_groups_until_the_cut_succeeds() {
    let dir = dir("torn");
    let mut log = appender(&NARROW, &dir, false);
    log.append(&group(&NARROW, 0, 2)).expect("append");
    let committed = log.committed();
    (log.file.room, log.file.refuse_cut) = (Some(30), true);
    assert!(!log.append(&group(&NARROW, 2, 2)).expect_err("full").cut_back);
    log.file.room = None;
    let refused = log.append(&group(&NARROW, 4, 1)).expect_err("still torn");
    assert!(!refused.cut_back);
    let torn_len = std::fs::metadata(log.path()).expect("meta").len();
    assert_eq!(torn_len, committed + 30, "nothing was appended behind the torn bytes");
    log.file.refuse_cut = false;
    log.append(&group(&NARROW, 5, 1)).expect("cut back, then appended");
    assert_eq!(read(NARROW, log.path()), (expected([0, 1, 5].into_iter()), vec![]));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn cut_back_shortens_a_file_and_a_missing_file_needs_none() {
    let dir = dir("cut");
    let path = dir.join("1.seg");
    std::fs::write(&path, b"0123456789").expect("write");
    cut_back(&path, 4, true).expect("cut");
    assert_eq!(std::fs::read(&path).expect("read"), b"0123");
    cut_back(&dir.join("gone.seg"), 4, true).expect("nothing to cut");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn list_keeps_the_names_it_reads_sorted_by_them() {
    let dir = dir("list");
    for name in ["10.seg", "9.seg", "x.seg", "11.log", "000.seg"] {
        std::fs::write(dir.join(name), b"").expect("write");
    }
    let files = list(&dir, |name| name.strip_suffix(".seg")?.parse::<u64>().ok()).expect("list");
    let seqs: Vec<u64> = files.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, vec![0, 9, 10]);
    assert!(files[2].1.ends_with("10.seg"));
    sync_dir(&dir).expect("a directory fsyncs");
    let _ = std::fs::remove_dir_all(dir);
}
