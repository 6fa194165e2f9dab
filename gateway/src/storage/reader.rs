//! Reading segment files a bounded chunk at a time: the spool's replay,
//! recovery and `gateway spool inspect` walk segments of up to
//! `spool.segment_bytes` (64 MiB by default), and the id log reads its
//! files back at start, each holding one chunk and one round of records.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::{Damage, Format, scan_part};

/// Bytes read from disk per step: what the reader holds at most, besides
/// one frame larger than this.
pub const READ_CHUNK: usize = 256 * 1024;

/// Reads the frames of a segment file between two offsets a bounded chunk
/// at a time, so reading a 64 MiB segment never holds it in memory.
pub struct SegmentReader {
    format: Format,
    file: File,
    /// File offset of `buf[0]`: everything before it is consumed.
    offset: u64,
    /// Where reading stops (the committed length).
    end: u64,
    /// Read and not yet consumed; at most one chunk plus one frame.
    buf: Vec<u8>,
    /// Start of a damaged span that may continue in the next chunk.
    damaged_from: Option<u64>,
    /// Damage found so far.
    damage: Vec<Damage>,
    /// The file ended before `end`: it is shorter than what was committed.
    cut: bool,
}

impl SegmentReader {
    /// Reads `path`, a segment of `format`, from offset `from` up to `end`.
    pub fn open(format: Format, path: &Path, from: u64, end: u64) -> std::io::Result<Self> {
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(from))?;
        Ok(Self {
            format,
            file,
            offset: from,
            end: end.max(from),
            buf: Vec::new(),
            damaged_from: None,
            damage: Vec::new(),
            cut: false,
        })
    }

    /// Up to `max` records whose payload `decode` accepts (at least one
    /// unless the end is reached): empty only when everything up to the
    /// end is read.
    pub fn next<T>(&mut self, max: usize, mut decode: impl FnMut(&[u8]) -> Option<T>) -> std::io::Result<Vec<T>> {
        loop {
            let at_end = self.offset + self.buf.len() as u64 >= self.end;
            let (scan, used) =
                scan_part(&self.format, &self.buf, self.offset, at_end, max, &mut self.damaged_from, &mut decode);
            self.buf.drain(..used);
            self.offset += used as u64;
            self.damage.extend(scan.damage);
            if !scan.records.is_empty() || (at_end && self.buf.is_empty()) {
                return Ok(scan.records);
            }
            self.read_more()?;
        }
    }

    /// Appends the next chunk (or the rest of a frame larger than a chunk).
    fn read_more(&mut self) -> std::io::Result<()> {
        let head = self.format.head();
        let frame = self.format.claimed(&self.buf).map_or(0, |len| head.saturating_add(len));
        let want = READ_CHUNK.max(frame.min(head + self.format.max_payload));
        let left = self.end - self.offset - self.buf.len() as u64;
        let take = usize::try_from(left).unwrap_or(usize::MAX).min(want.saturating_sub(self.buf.len()).max(1));
        let start = self.buf.len();
        self.buf.resize(start + take, 0);
        let read = self.file.read(&mut self.buf[start..]);
        let read = read.inspect_err(|_| self.buf.truncate(start))?;
        self.buf.truncate(start + read);
        if read == 0 {
            // The file is shorter than `end`: what is there is all there is.
            self.end = self.offset + self.buf.len() as u64;
            self.cut = true;
        }
        Ok(())
    }

    /// The file offset up to which frames were consumed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// True when the file turned out shorter than the end it was opened
    /// with (for a live segment: truncated under the gateway).
    pub fn short(&self) -> bool {
        self.cut
    }

    /// Damaged spans found so far.
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }
}

/// Reads a whole segment file of `format` a chunk at a time, handing each
/// record `decode` accepts to `each`; returns the file's length and its
/// damage (a bad header first).
pub fn read_segment<T>(
    format: Format,
    path: &Path,
    mut decode: impl FnMut(&[u8]) -> Option<T>,
    mut each: impl FnMut(T),
) -> std::io::Result<(u64, Vec<Damage>)> {
    let len = std::fs::metadata(path)?.len();
    let mut header = vec![0; format.header.len()];
    let got = File::open(path)?.read(&mut header)?;
    let mut damage = Vec::new();
    if header[..got] != *format.header {
        damage.push(Damage { offset: 0, len: got as u64, torn_tail: false });
    }
    let mut reader = SegmentReader::open(format, path, format.header.len() as u64, len)?;
    loop {
        let records = reader.next(1024, &mut decode)?;
        if records.is_empty() {
            break;
        }
        records.into_iter().for_each(&mut each);
    }
    damage.extend_from_slice(reader.damage());
    Ok((len, damage))
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
