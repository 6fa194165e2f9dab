//! Frames: a magic, the payload's length and its CRC-32 before each
//! payload; and the scan that reads them back, stepping over damage.

/// How one user's segment files look. Both users' formats predate this
/// module and are kept byte for byte, so files left by a previous version
/// still read: the spool's (`EVGWSPL1` header, magic `SPOL`) and the id
/// log's (no header, magic byte `0xE7`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// The first bytes of every segment file (may be empty).
    pub header: &'static [u8],
    /// The first bytes of every frame, where a reader resynchronises after
    /// damage; 1 to 4 bytes (longer is rarer inside a payload by chance).
    pub magic: &'static [u8],
    /// A frame claiming a shorter payload is damage.
    pub min_payload: usize,
    /// A frame claiming a longer payload is damage, not a record.
    pub max_payload: usize,
}

/// Bytes that do not form a valid frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damage {
    /// Offset in the segment file.
    pub offset: u64,
    /// How many bytes were stepped over.
    pub len: u64,
    /// True when nothing valid follows: a torn tail, typically a crash mid-write.
    pub torn_tail: bool,
}

/// What a scan of a segment (or part of one) found.
#[derive(Debug)]
pub struct Scan<T> {
    /// Valid records, in file order.
    pub records: Vec<T>,
    /// Damaged spans, in file order.
    pub damage: Vec<Damage>,
    /// Bytes of valid frames.
    pub valid_bytes: u64,
}

impl<T> Default for Scan<T> {
    fn default() -> Self {
        Self { records: Vec::new(), damage: Vec::new(), valid_bytes: 0 }
    }
}

impl Format {
    /// Bytes before a frame's payload: magic, length, CRC.
    pub const fn head(&self) -> usize {
        self.magic.len() + 8
    }

    /// Appends one frame to `out` around what `payload` appends (so a
    /// user encodes its body straight into the group's buffer); returns
    /// the frame's length.
    pub fn frame(&self, out: &mut Vec<u8>, payload: impl FnOnce(&mut Vec<u8>)) -> usize {
        let start = out.len();
        out.extend_from_slice(self.magic);
        out.extend_from_slice(&[0; 8]);
        let body = out.len();
        payload(out);
        let len = u32::try_from(out.len() - body).unwrap_or(u32::MAX);
        let crc = crc32fast::hash(&out[body..]);
        let at = start + self.magic.len();
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
        out[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        out.len() - start
    }

    /// The payload length a frame head at the start of `bytes` claims.
    pub(super) fn claimed(&self, bytes: &[u8]) -> Option<usize> {
        let at = self.magic.len();
        let len = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
        usize::try_from(len).ok()
    }
}

/// Reads every frame of `bytes`, which start at file offset `base`,
/// keeping those whose payload `decode` accepts. Damage is recorded and
/// stepped over.
pub fn scan<'a, T>(
    format: &Format,
    bytes: &'a [u8],
    base: u64,
    mut decode: impl FnMut(&'a [u8]) -> Option<T>,
) -> Scan<T> {
    scan_part(format, bytes, base, true, usize::MAX, &mut None, &mut decode).0
}

/// Reads up to `max` frames of `bytes` (file offset `base`); returns them
/// and how many bytes were consumed. Unless `at_end`, a frame cut off by the
/// end of `bytes` is left unconsumed for the next call (it may be whole in
/// the file), and so is damage that may go on: `damaged_from` carries an
/// open damaged span from one call to the next. A frame whose checksum
/// holds but whose payload `decode` refuses is damage too.
pub fn scan_part<'a, T>(
    format: &Format,
    bytes: &'a [u8],
    base: u64,
    at_end: bool,
    max: usize,
    damaged_from: &mut Option<u64>,
    decode: &mut impl FnMut(&'a [u8]) -> Option<T>,
) -> (Scan<T>, usize) {
    let mut scan = Scan::default();
    let mut at = 0;
    while at < bytes.len() && scan.records.len() < max {
        match read_frame(format, &bytes[at..], decode) {
            Frame::Whole(record, used) => {
                if let Some(from) = damaged_from.take() {
                    let len = base + at as u64 - from;
                    scan.damage.push(Damage { offset: from, len, torn_tail: false });
                }
                scan.records.push(record);
                scan.valid_bytes += used as u64;
                at += used;
            }
            Frame::Short if !at_end => break,
            Frame::Short | Frame::Bad => {
                damaged_from.get_or_insert(base + at as u64);
                at = resync(format.magic, bytes, at + 1, at_end);
            }
        }
    }
    if at_end
        && at >= bytes.len()
        && let Some(from) = damaged_from.take()
    {
        scan.damage.push(Damage { offset: from, len: base + bytes.len() as u64 - from, torn_tail: true });
    }
    (scan, at)
}

/// Where the next frame may start: the next magic at or after `from`; with
/// none, the end, or (unless `at_end`) the last bytes that could begin one.
fn resync(magic: &[u8], bytes: &[u8], from: usize, at_end: bool) -> usize {
    match bytes.get(from..).and_then(|rest| rest.windows(magic.len()).position(|w| w == magic)) {
        Some(p) => from + p,
        None if at_end => bytes.len(),
        None => from.max(bytes.len().saturating_sub(magic.len() - 1)).min(bytes.len()),
    }
}

/// What the bytes at a position hold.
enum Frame<T> {
    /// A whole frame whose checksum holds, its decoded payload and its length.
    Whole(T, usize),
    /// The start of a frame whose end is not in the bytes.
    Short,
    /// Not a frame.
    Bad,
}

/// One frame at the start of `bytes`, if it is whole, its checksum holds
/// and `decode` accepts its payload.
fn read_frame<'a, T>(format: &Format, bytes: &'a [u8], decode: &mut impl FnMut(&'a [u8]) -> Option<T>) -> Frame<T> {
    let (magic, head) = (format.magic, format.head());
    if bytes.len() < head {
        let prefix = bytes.len().min(magic.len());
        return if bytes[..prefix] == magic[..prefix] { Frame::Short } else { Frame::Bad };
    }
    let Some(len) = format.claimed(bytes) else { return Frame::Bad };
    if &bytes[..magic.len()] != magic || !(format.min_payload..=format.max_payload).contains(&len) {
        return Frame::Bad;
    }
    if bytes.len() < head + len {
        return Frame::Short;
    }
    let at = magic.len() + 4;
    let crc = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let payload = &bytes[head..head + len];
    if crc32fast::hash(payload) != crc {
        return Frame::Bad;
    }
    match decode(payload) {
        Some(record) => Frame::Whole(record, head + len),
        None => Frame::Bad,
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
pub(crate) mod tests;
