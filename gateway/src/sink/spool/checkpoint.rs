//! Replay's checkpoint file (`replayed`): every record below `replayed` is
//! in Kafka, and no record at or above `sent` was ever handed to a producer
//! by replay. Replay raises `sent` before it produces a round and moves
//! `replayed` once Kafka acknowledged it, so after a crash the records in
//! between (a round that was in flight, or acknowledged just before the
//! process died) are looked up in Kafka by `event-id` before they are sent
//! again, like those of a producer replaced as wedged.
//!
//! The file has a fixed size and is overwritten in place: a write needs no
//! new block, so a full disk (the spool's own segments filled it) does not
//! stop the checkpoint from moving. Layout, little-endian:
//! `replayed u64 | sent u64 | check u64` where `check = replayed ^ sent ^ MAGIC`.
//! A file of 8 bytes is the older format (`replayed` alone, nothing sent
//! beyond it). A file that is neither says nothing: every record is
//! replayed, each looked up in Kafka first.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The file's name in the spool directory.
pub const CHECKPOINT_FILE: &str = "replayed";

const MAGIC: u64 = 0x4556_4757_5350_434b;
const LEN: usize = 24;

/// What the checkpoint says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marks {
    /// Every record below this sequence number is in Kafka.
    pub replayed: u64,
    /// No record at or above this sequence number was handed to Kafka by
    /// replay (`u64::MAX` when the file was unreadable: any may have been).
    pub sent: u64,
}

impl Marks {
    fn encode(self) -> [u8; LEN] {
        let mut out = [0; LEN];
        out[..8].copy_from_slice(&self.replayed.to_le_bytes());
        out[8..16].copy_from_slice(&self.sent.to_le_bytes());
        out[16..].copy_from_slice(&(self.replayed ^ self.sent ^ MAGIC).to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Self {
        let word = |i: usize| bytes.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        match (bytes.len(), word(0), word(1), word(2)) {
            (0, ..) => Self { replayed: 0, sent: 0 },
            (8, Some(replayed), ..) => Self { replayed, sent: replayed },
            (LEN, Some(replayed), Some(sent), Some(check)) if check == replayed ^ sent ^ MAGIC && sent >= replayed => {
                Self { replayed, sent }
            }
            _ => Self { replayed: 0, sent: u64::MAX },
        }
    }
}

/// Reads the checkpoint of `dir` (none: nothing replayed, nothing sent).
pub fn read(dir: &Path) -> Marks {
    match std::fs::read(dir.join(CHECKPOINT_FILE)) {
        Ok(bytes) => Marks::decode(&bytes),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Marks::decode(&[]),
        Err(_) => Marks::decode(b"unreadable"),
    }
}

/// The checkpoint, open for writing in place.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    file: Option<File>,
    marks: Marks,
}

impl Checkpoint {
    /// Opens the checkpoint of `dir` with what `read` found there, and
    /// gives the file its full size now, while that is a write like any
    /// other (a failure here is retried at the next write). `next_seq` is
    /// the spool's next sequence number: no record from it on exists, so
    /// none was sent.
    pub fn open(dir: &Path, marks: Marks, next_seq: u64) -> Self {
        let marks = Marks { sent: marks.sent.min(next_seq.max(marks.replayed)), ..marks };
        let mut me = Self { path: dir.join(CHECKPOINT_FILE), file: None, marks };
        if let Err(error) = me.write(marks) {
            tracing::warn!(%error, path = %me.path.display(), "Cannot write the spool replay checkpoint");
        }
        me
    }

    /// What the checkpoint says now.
    pub fn marks(&self) -> Marks {
        self.marks
    }

    /// Before replay hands records below `seq` to a producer.
    pub fn sending(&mut self, seq: u64) -> std::io::Result<()> {
        if seq <= self.marks.sent {
            return Ok(());
        }
        self.write(Marks { sent: seq, ..self.marks })
    }

    /// Every record below `seq` is in Kafka.
    pub fn replayed(&mut self, seq: u64) -> std::io::Result<()> {
        self.write(Marks { replayed: seq, sent: self.marks.sent.max(seq) })
    }

    fn write(&mut self, marks: Marks) -> std::io::Result<()> {
        if self.file.is_none() {
            let file = File::options().create(true).truncate(false).read(true).write(true).open(&self.path)?;
            self.file = Some(file);
        }
        let file = self.file.as_ref().expect("opened above");
        file.write_all_at(&marks.encode(), 0)?;
        self.marks = marks;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("eventgw-checkpoint-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[test]
    fn marks_survive_the_file_and_sent_never_goes_below_replayed() {
        let dir = dir("roundtrip");
        assert_eq!(read(&dir), Marks { replayed: 0, sent: 0 }, "no file: nothing replayed, nothing sent");
        let mut checkpoint = Checkpoint::open(&dir, read(&dir), 20);
        checkpoint.sending(10).expect("sending");
        assert_eq!(read(&dir), Marks { replayed: 0, sent: 10 });
        checkpoint.sending(4).expect("lower is a no-op");
        checkpoint.replayed(6).expect("replayed");
        assert_eq!(read(&dir), Marks { replayed: 6, sent: 10 }, "a round in flight above the checkpoint");
        checkpoint.replayed(12).expect("replayed");
        assert_eq!(read(&dir), Marks { replayed: 12, sent: 12 });
        assert_eq!(std::fs::metadata(dir.join(CHECKPOINT_FILE)).expect("meta").len(), LEN as u64);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_older_format_means_nothing_was_sent_beyond_it() {
        let dir = dir("old");
        std::fs::write(dir.join(CHECKPOINT_FILE), 42u64.to_le_bytes()).expect("write");
        assert_eq!(read(&dir), Marks { replayed: 42, sent: 42 });
        let mut checkpoint = Checkpoint::open(&dir, read(&dir), 60);
        checkpoint.sending(50).expect("sending");
        assert_eq!(read(&dir), Marks { replayed: 42, sent: 50 }, "rewritten in the new format");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_damaged_file_says_any_record_may_have_been_sent() {
        let dir = dir("damaged");
        let mut bytes = Marks { replayed: 7, sent: 9 }.encode();
        bytes[3] ^= 0x10;
        std::fs::write(dir.join(CHECKPOINT_FILE), bytes).expect("write");
        assert_eq!(read(&dir), Marks { replayed: 0, sent: u64::MAX });
        std::fs::write(dir.join(CHECKPOINT_FILE), b"12345").expect("write");
        assert_eq!(read(&dir), Marks { replayed: 0, sent: u64::MAX });
        let checkpoint = Checkpoint::open(&dir, read(&dir), 30);
        assert_eq!(checkpoint.marks(), Marks { replayed: 0, sent: 30 }, "no record from the next one on was sent");
        assert_eq!(read(&dir), Marks { replayed: 0, sent: 30 });
        let _ = std::fs::remove_dir_all(dir);
    }
}
