use super::*;

/// A format like the spool's: a header and a 4-byte magic.
pub(crate) const WIDE: Format = Format { header: b"TESTSEG1", magic: b"TSTF", min_payload: 1, max_payload: 1 << 20 };
/// A format like the id log's: no header and a 1-byte magic.
pub(crate) const NARROW: Format = Format { header: b"", magic: &[0xE7], min_payload: 0, max_payload: 1 << 20 };

/// A payload of `len` lowercase letters (never a magic byte).
pub(crate) fn payload(seq: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + ((seq + i) % 26) as u8).collect()
}

/// A segment of `n` frames of varied sizes: its bytes and where each frame starts.
pub(crate) fn segment(format: &Format, n: usize, size: impl Fn(usize) -> usize) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = format.header.to_vec();
    let mut starts = Vec::new();
    for seq in 0..n {
        starts.push(bytes.len());
        let body = payload(seq, size(seq));
        let len = format.frame(&mut bytes, |out| out.extend_from_slice(&body));
        assert_eq!(len, format.head() + body.len());
    }
    (bytes, starts)
}

fn small(seq: usize) -> usize {
    20 + seq * 13 % 90
}

pub(crate) fn whole(payload: &[u8]) -> Option<Vec<u8>> {
    Some(payload.to_vec())
}

/// Scans a segment's frames (after its header).
fn read(format: &Format, bytes: &[u8]) -> Scan<Vec<u8>> {
    let h = format.header.len();
    scan(format, &bytes[h..], h as u64, whole)
}

fn payloads(n: usize, except: Option<usize>) -> Vec<Vec<u8>> {
    (0..n).filter(|seq| Some(*seq) != except).map(|seq| payload(seq, small(seq))).collect()
}

#[test]
fn frames_read_back_in_both_layouts() {
    for format in [WIDE, NARROW] {
        let (bytes, _) = segment(&format, 20, small);
        let scan = read(&format, &bytes);
        assert_eq!(scan.records, payloads(20, None));
        assert!(scan.damage.is_empty());
        assert_eq!(scan.valid_bytes, (bytes.len() - format.header.len()) as u64);
    }
}

#[test]
fn a_last_frame_torn_at_every_byte_costs_that_frame_only() {
    for format in [WIDE, NARROW] {
        let (bytes, starts) = segment(&format, 5, small);
        let last = starts[4];
        for cut in last..bytes.len() {
            let scan = read(&format, &bytes[..cut]);
            assert_eq!(scan.records, payloads(4, None), "cut at {cut}");
            let torn = Damage { offset: last as u64, len: (cut - last) as u64, torn_tail: true };
            let expected = if cut == last { vec![] } else { vec![torn] };
            assert_eq!(scan.damage, expected, "cut at {cut}");
        }
    }
}

#[test]
fn a_flipped_byte_anywhere_in_a_frame_costs_that_frame_only() {
    for format in [WIDE, NARROW] {
        let (bytes, starts) = segment(&format, 5, small);
        let (from, to) = (starts[2], starts[3]);
        for at in from..to {
            for flip in [0x01, 0x80, 0xFF] {
                let mut damaged = bytes.clone();
                damaged[at] ^= flip;
                let scan = read(&format, &damaged);
                assert_eq!(scan.records, payloads(5, Some(2)), "byte {at} ^ {flip:#x}");
                let span = Damage { offset: from as u64, len: (to - from) as u64, torn_tail: false };
                assert_eq!(scan.damage, vec![span], "byte {at} ^ {flip:#x}");
            }
        }
    }
}

#[test]
fn a_frame_whose_checksum_holds_but_whose_payload_is_refused_is_damage() {
    let (bytes, starts) = segment(&WIDE, 3, small);
    let h = WIDE.header.len();
    let refuse_second = |p: &[u8]| (p != payload(1, small(1)).as_slice()).then(|| p.to_vec());
    let scan = scan(&WIDE, &bytes[h..], h as u64, refuse_second);
    assert_eq!(scan.records, payloads(3, Some(1)));
    let span = Damage { offset: starts[1] as u64, len: (starts[2] - starts[1]) as u64, torn_tail: false };
    assert_eq!(scan.damage, vec![span]);
}

#[test]
fn a_claimed_length_past_the_limit_or_below_the_least_is_damage() {
    let tight = Format { max_payload: 40, min_payload: 30, ..WIDE };
    let mut bytes = tight.header.to_vec();
    for len in [30, 40, 41, 29] {
        tight.frame(&mut bytes, |out| out.extend_from_slice(&payload(0, len)));
    }
    let scan = read(&tight, &bytes);
    assert_eq!(scan.records, vec![payload(0, 30), payload(0, 40)], "at the limits: read; one past: damage");
    assert_eq!(scan.damage.len(), 1);
    assert!(scan.damage[0].torn_tail, "nothing valid follows");
}

#[test]
fn a_part_scan_leaves_a_frame_cut_by_its_buffer_for_the_next_call() {
    for format in [WIDE, NARROW] {
        let (bytes, starts) = segment(&format, 4, small);
        let h = format.header.len();
        for cut in starts[2]..starts[3] {
            let mut open = None;
            let (first, used) = scan_part(&format, &bytes[h..cut], h as u64, false, usize::MAX, &mut open, &mut whole);
            assert_eq!((first.records.len(), h + used), (2, starts[2]), "cut at {cut}");
            assert!(first.damage.is_empty() && open.is_none(), "a cut frame is not damage: {cut}");
            let rest = &bytes[h + used..];
            let (second, _) = scan_part(&format, rest, (h + used) as u64, true, usize::MAX, &mut open, &mut whole);
            assert_eq!(second.records, payloads(4, None)[2..].to_vec());
        }
    }
}

#[test]
fn a_part_scan_stops_at_max_records() {
    let (bytes, starts) = segment(&NARROW, 6, small);
    let (scan, used) = scan_part(&NARROW, &bytes, 0, true, 4, &mut None, &mut whole);
    assert_eq!((scan.records.len(), used), (4, starts[4]));
}
