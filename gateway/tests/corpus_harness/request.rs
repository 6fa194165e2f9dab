//! The corpus file format. A file `gateway/tests/corpus/NAME.req` is:
//!
//! ```text
//! # class: body-abuse                  (the class it is counted under)
//! # what: a lone surrogate in a string (why it is in the corpus)
//! # stall-after: 10                    (optional: send the head and this many
//! #                                     body bytes, then hold the connection open;
//! #                                     `head`: send the head without its end)
//! # codec: why                         (optional: HTTP framing that actix's HTTP/1
//! #                                     codec refuses before the application runs; a
//! #                                     close, or a 4xx without a body, is acceptable)
//! # expect: gif                        (optional: a pixel; every answer is the GIF)
//! POST /v1/batch HTTP/1.1              (the request head, one header per line,
//! Content-Length: <<len>>               sent with CRLF line ends)
//!
//! {"batch": ...}                       (the body, sent as is, without the file's last newline)
//! ```
//!
//! Placeholders (`<<`...`>>`, which JSON never contains), expanded innermost
//! first: `<<id:NAME>>` a messageId unique to this replay (the same NAME
//! gives the same id within a request), `<<repeat:N:TEXT>>`, `<<nul>>`,
//! `<<byte:HH>>`, `<<crlf>>`, `<<gzip:TEXT>>`, `<<gzip-repeat:N:TEXT>>`,
//! `<<b64url:TEXT>>`, `<<b64:TEXT>>`, `<<chunked:TEXT>>` (TEXT as one chunk
//! and the last chunk), and in the head `<<len>>` (the body's length, after
//! expansion and mutation).

use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;

#[derive(Debug, Clone)]
pub struct CorpusEntry {
    pub name: String,
    pub class: String,
    pub what: String,
    pub stall_after: Option<Stall>,
    pub codec: Option<String>,
    pub expect_gif: bool,
    head: Vec<String>,
    body: Vec<u8>,
}

/// Where a stalled client stops sending.
#[derive(Debug, Clone, Copy)]
pub enum Stall {
    /// Before the blank line that ends the head.
    InHead,
    /// After this many body bytes.
    AfterBodyBytes(usize),
}

/// A request ready to send, and the ids it carries.
#[derive(Debug, Clone)]
pub struct BuiltRequest {
    pub head: Vec<u8>,
    pub body: Vec<u8>,
    pub ids: Vec<String>,
}

/// Every `.req` file of `dir`, sorted by name. A file that does not parse
/// fails the test, naming it.
pub fn load_corpus(dir: &Path) -> Vec<CorpusEntry> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "req"))
        .collect();
    files.sort();
    files.iter().map(|p| parse(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).collect()
}

fn parse(path: &Path) -> Result<CorpusEntry, String> {
    let text = std::fs::read(path).map_err(|e| e.to_string())?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut entry = CorpusEntry {
        name,
        class: String::new(),
        what: String::new(),
        stall_after: None,
        codec: None,
        expect_gif: false,
        head: Vec::new(),
        body: Vec::new(),
    };
    let mut rest = &text[..];
    let mut in_head = false;
    while !rest.is_empty() {
        let end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
        let line = String::from_utf8_lossy(&rest[..end]).trim_end_matches('\r').to_owned();
        rest = rest.get(end + 1..).unwrap_or_default();
        if !in_head {
            if let Some(directive) = line.strip_prefix("# ") {
                let (key, value) = directive.split_once(':').ok_or(format!("directive without a colon: {line}"))?;
                let value = value.trim().to_owned();
                match key.trim() {
                    "class" => entry.class = value,
                    "what" => entry.what = value,
                    "stall-after" if value == "head" => entry.stall_after = Some(Stall::InHead),
                    "stall-after" => {
                        let n = value.parse().map_err(|_| "stall-after: a number or `head`")?;
                        entry.stall_after = Some(Stall::AfterBodyBytes(n));
                    }
                    "codec" => entry.codec = Some(value),
                    "expect" if value == "gif" => entry.expect_gif = true,
                    other => return Err(format!("unknown directive `{other}`")),
                }
                continue;
            }
            in_head = true;
        }
        if line.is_empty() {
            break;
        }
        entry.head.push(line);
    }
    entry.body = rest.strip_suffix(b"\n").unwrap_or(rest).to_vec();
    if entry.class.is_empty() || entry.head.is_empty() {
        return Err("needs a `# class:` directive and a request line".into());
    }
    Ok(entry)
}

impl CorpusEntry {
    /// Body mutations make sense for complete requests with a body whose
    /// length the head takes from `<<len>>`.
    pub fn mutable(&self) -> bool {
        self.stall_after.is_none()
            && self.codec.is_none()
            && !self.body.is_empty()
            && self.head.iter().any(|h| h.contains("<<len>>"))
    }

    /// Expands the placeholders with ids prefixed `prefix`, then applies the
    /// seeded mutation `seed` to the body, if any.
    pub fn build(&self, prefix: &str, seed: Option<u64>) -> BuiltRequest {
        let mut ids = Vec::new();
        let mut body = expand(&self.body, prefix, &mut ids);
        if let Some(seed) = seed {
            mutate(&mut body, seed);
        }
        let mut head = Vec::new();
        for line in &self.head {
            let line = line.replace("<<len>>", &body.len().to_string());
            head.extend(expand(line.as_bytes(), prefix, &mut ids));
            head.extend(b"\r\n");
        }
        head.extend(b"\r\n");
        BuiltRequest { head, body, ids }
    }
}

/// Expands placeholders innermost first, so they nest
/// (`<<b64url:{"messageId":"<<id:a>>"}>>`): the last `<<` is closed by the
/// first `>>` after it. Expanded text is not scanned again.
fn expand(input: &[u8], prefix: &str, ids: &mut Vec<String>) -> Vec<u8> {
    let mut out = input.to_vec();
    let mut cursor = out.len();
    while let Some(open) = rfind(&out[..cursor], b"<<") {
        let Some(close) = find(&out, b">>", open + 2) else { break };
        let inner = String::from_utf8_lossy(&out[open + 2..close]).into_owned();
        let Some(value) = placeholder(&inner, prefix, ids) else {
            panic!("unknown placeholder <<{inner}>>");
        };
        out.splice(open..close + 2, value);
        cursor = open;
    }
    out
}

fn placeholder(inner: &str, prefix: &str, ids: &mut Vec<String>) -> Option<Vec<u8>> {
    let (kind, arg) = inner.split_once(':').unwrap_or((inner, ""));
    let repeat = |arg: &str| -> Option<Vec<u8>> {
        let (n, text) = arg.split_once(':')?;
        Some(text.repeat(n.parse().ok()?).into_bytes())
    };
    Some(match kind {
        "id" => {
            let id = format!("{prefix}-{arg}");
            if !ids.contains(&id) {
                ids.push(id.clone());
            }
            id.into_bytes()
        }
        "repeat" => repeat(arg)?,
        "nul" => vec![0],
        "crlf" => b"\r\n".to_vec(),
        "byte" => vec![u8::from_str_radix(arg, 16).ok()?],
        "gzip" => gzip(arg.as_bytes()),
        "gzip-repeat" => gzip(&repeat(arg)?),
        "b64url" => base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(arg).into_bytes(),
        "b64" => base64::engine::general_purpose::STANDARD.encode(arg).into_bytes(),
        "chunked" => format!("{:x}\r\n{arg}\r\n0\r\n\r\n", arg.len()).into_bytes(),
        _ => return None,
    })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("gzip in memory");
    encoder.finish().expect("gzip in memory")
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// Deterministic mutations (xorshift from `seed`): a byte flipped, a
/// truncation, a hostile byte inserted (NUL, quote, brace, 0xFF, a high
/// surrogate escape's start), or a slice duplicated.
fn mutate(body: &mut Vec<u8>, seed: u64) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let len = body.len().max(1) as u64;
    let at = (next() % len) as usize;
    match next() % 4 {
        0 => {
            if let Some(b) = body.get_mut(at) {
                *b ^= 1 << (next() % 8);
            }
        }
        1 => body.truncate(at),
        2 => {
            let hostile: [&[u8]; 6] = [b"\0", b"\"", b"{", b"\xff", b"\\ud800", b"9999999999999999999999"];
            let pick = hostile[(next() % hostile.len() as u64) as usize];
            let at = at.min(body.len());
            body.splice(at..at, pick.iter().copied());
        }
        _ => {
            let end = (at + 1 + (next() % 64) as usize).min(body.len());
            let slice = body.get(at..end).unwrap_or_default().to_vec();
            body.splice(at..at, slice);
        }
    }
}
