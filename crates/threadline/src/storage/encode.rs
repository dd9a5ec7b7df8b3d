//! The stored form of a record: ASCII-only JSON text (every non-ASCII character written as a
//! `\u` escape of four hex digits, so a reader can hand it to V8 as a one-byte string), with long strings moved
//! out to the blob table and the message cut out of the envelope.
//!
//! Two raw control bytes mark what was moved out. The encoder escapes every control character,
//! so neither can occur in the JSON text itself:
//! - `0x01 <64 hex> 0x01` stands where a long string was: the blob with that SHA-256;
//! - `0x02` stands in the envelope body where the message object was.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{Error, Path, Result};
use crate::model::json::MAX_RECORD_BYTES;
use crate::storage::scratch;

pub const BLOB_MARK: u8 = 0x01;
pub const MESSAGE_MARK: u8 = 0x02;

/// A long string moved out of a record, by the SHA-256 of its UTF-8 bytes.
pub struct Blob {
    pub hash: String,
    /// The string as a JSON literal (quotes included), ASCII-escaped.
    pub literal: Vec<u8>,
}

/// A record ready to be stored.
pub struct Encoded {
    /// The envelope, with `MESSAGE_MARK` where the message was.
    pub body: Vec<u8>,
    /// The message, when the record has one.
    pub message: Option<Vec<u8>>,
    /// Bytes of the message's JSON with its long strings in place.
    pub message_bytes: usize,
    pub blobs: Vec<Blob>,
}

impl Encoded {
    /// Gives its buffers back for the next record (`scratch.rs`).
    pub fn recycle(self) {
        scratch::give(self.body);
        if let Some(m) = self.message {
            scratch::give(m);
        }
    }

    pub fn has_blobs(&self) -> bool {
        !self.blobs.is_empty()
    }

    /// Appends the whole envelope as JSON text to `out`: the message in its place, each long
    /// string in place of its mark.
    pub fn write_text(&self, out: &mut Vec<u8>) {
        let (head, tail) = match self.body.iter().position(|&b| b == MESSAGE_MARK) {
            Some(at) => (&self.body[..at], &self.body[at + 1..]),
            None => (&self.body[..], &[][..]),
        };
        self.splice(out, head);
        if let Some(m) = &self.message {
            self.splice(out, m);
        }
        self.splice(out, tail);
    }

    fn splice(&self, out: &mut Vec<u8>, mut text: &[u8]) {
        if self.blobs.is_empty() {
            out.extend_from_slice(text);
            return;
        }
        // Marks are `0x01 <64 hex> 0x01`; the encoder escapes every control byte in the text.
        while let Some(at) = text.iter().position(|&b| b == BLOB_MARK) {
            out.extend_from_slice(&text[..at]);
            let hash = text.get(at + 1..at + 65).unwrap_or_default();
            match self.blobs.iter().find(|b| b.hash.as_bytes() == hash) {
                Some(b) => out.extend_from_slice(&b.literal),
                None => out.extend_from_slice(&text[at..(at + 66).min(text.len())]),
            }
            text = text.get(at + 66..).unwrap_or_default();
        }
        out.extend_from_slice(text);
    }
}

struct Encoder<'a> {
    threshold: usize,
    blobs: Vec<Blob>,
    total: usize,
    /// Bytes the blob marks written so far stand for, beyond their own size.
    moved: usize,
    /// Where the encoder is, as borrowed segments; formatted into a `Path` only on error.
    at: Vec<Seg<'a>>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Encodes an envelope whose top-level `message` (if any) is stored on its own. Error paths inside
/// the message start with `message.` only if the caller gave an envelope (`message_in_path`).
pub fn encode_envelope(
    env: &Map<String, Value>,
    threshold: usize,
    message_in_path: bool,
) -> Result<Encoded> {
    let mut enc = Encoder {
        threshold,
        blobs: Vec::new(),
        total: 0,
        moved: 0,
        at: Vec::new(),
    };
    let mut body = scratch::take(256);
    let mut message = None;
    let mut message_bytes = 0;
    body.push(b'{');
    for (i, (k, v)) in env.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        write_str(&mut body, k);
        body.push(b':');
        let is_message = k == "message";
        if !is_message || message_in_path {
            enc.at.push(Seg::Key(k));
        }
        if is_message {
            let mut m = scratch::take(1024);
            let before = enc.moved;
            enc.value(&mut m, v)?;
            message_bytes = m.len() + enc.moved - before;
            message = Some(m);
            body.push(MESSAGE_MARK);
        } else {
            enc.value(&mut body, v)?;
        }
        if !is_message || message_in_path {
            enc.at.pop();
        }
    }
    body.push(b'}');
    let total = body.len() + message.as_ref().map_or(0, Vec::len) + enc.total;
    if total > MAX_RECORD_BYTES {
        return Err(Error::InvalidInput(format!(
            "record of {total} bytes exceeds the {MAX_RECORD_BYTES}-byte limit"
        )));
    }
    Ok(Encoded {
        body,
        message,
        message_bytes,
        blobs: enc.blobs,
    })
}

impl<'a> Encoder<'a> {
    fn value(&mut self, out: &mut Vec<u8>, v: &'a Value) -> Result<()> {
        match v {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Number(n) => out.extend_from_slice(n.as_str().as_bytes()),
            Value::String(s) => self.string(out, s)?,
            Value::Array(a) => {
                out.push(b'[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.at.push(Seg::Index(i));
                    self.value(out, x)?;
                    self.at.pop();
                }
                out.push(b']');
            }
            Value::Object(m) => {
                out.push(b'{');
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_str(out, k);
                    out.push(b':');
                    self.at.push(Seg::Key(k));
                    self.value(out, x)?;
                    self.at.pop();
                }
                out.push(b'}');
            }
        }
        Ok(())
    }

    fn path(&self) -> Path {
        self.at.iter().fold(Path::root(), |p, s| match s {
            Seg::Key(k) => p.key(k),
            Seg::Index(i) => p.index(*i),
        })
    }

    fn string(&mut self, out: &mut Vec<u8>, s: &str) -> Result<()> {
        if s.len() > MAX_RECORD_BYTES {
            return Err(Error::invalid(
                &self.path(),
                format!(
                    "string of {} bytes exceeds the {MAX_RECORD_BYTES}-byte record limit",
                    s.len()
                ),
            ));
        }
        if s.len() <= self.threshold {
            write_str(out, s);
            return Ok(());
        }
        let hash = hex(&Sha256::digest(s.as_bytes()));
        out.push(BLOB_MARK);
        out.extend_from_slice(hash.as_bytes());
        out.push(BLOB_MARK);
        let literal_len = match self.blobs.iter().find(|b| b.hash == hash) {
            Some(b) => b.literal.len(),
            None => {
                let mut literal = Vec::with_capacity(s.len() + 2);
                write_str(&mut literal, s);
                self.total += literal.len();
                let len = literal.len();
                self.blobs.push(Blob { hash, literal });
                len
            }
        };
        self.moved += literal_len.saturating_sub(66);
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Bytes that cannot be copied as they are: control characters, `"`, `\\`, and every byte of a
/// non-ASCII character.
static SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i < 0x20 || i == b'"' as usize || i == b'\\' as usize || i >= 0x80;
        i += 1;
    }
    t
};

/// Writes `s` as a JSON string literal using only ASCII.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Runs of plain ASCII are copied in one go: most text is such runs.
        while i < bytes.len() && !SPECIAL[bytes[i] as usize] {
            i += 1;
        }
        out.extend_from_slice(&bytes[start..i]);
        if i == bytes.len() {
            break;
        }
        let b = bytes[i];
        let len = match b {
            b'"' => push(out, b"\\\""),
            b'\\' => push(out, b"\\\\"),
            b'\n' => push(out, b"\\n"),
            b'\r' => push(out, b"\\r"),
            b'\t' => push(out, b"\\t"),
            0x08 => push(out, b"\\b"),
            0x0c => push(out, b"\\f"),
            0..=0x1f => {
                push_u16_escape(out, b as u16);
                1
            }
            _ => {
                let ch = s[i..].chars().next().unwrap_or('\u{fffd}');
                let mut units = [0u16; 2];
                for u in ch.encode_utf16(&mut units) {
                    push_u16_escape(out, *u);
                }
                ch.len_utf8()
            }
        };
        i += len;
        start = i;
    }
    out.push(b'"');
}

/// Appends an escape for one input byte; returns 1 (the bytes consumed).
fn push(out: &mut Vec<u8>, escape: &[u8]) -> usize {
    out.extend_from_slice(escape);
    1
}

fn push_u16_escape(out: &mut Vec<u8>, u: u16) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(DIGITS[((u >> shift) & 15) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_outside_printable_ascii() {
        let mut out = Vec::new();
        write_str(&mut out, "a\u{0}\"\\\n→😀é\u{7f}");
        let text = String::from_utf8(out).unwrap();
        assert!(text.is_ascii());
        assert_eq!(
            text,
            "\"a\\u0000\\\"\\\\\\n\\u2192\\ud83d\\ude00\\u00e9\u{7f}\""
        );
        let back: String = serde_json::from_str(&text).unwrap();
        assert_eq!(back, "a\u{0}\"\\\n→😀é\u{7f}");
    }

    #[test]
    fn every_character_class_round_trips_through_ascii() {
        let mut all: String = (0u32..0x800).filter_map(char::from_u32).collect();
        all.push_str("\u{fffd}\u{ffff}\u{10000}\u{10ffff}😀 CJK 你好 é→✓ \\\"");
        for s in [
            all.as_str(),
            "",
            "plain",
            "\u{0}",
            "a\u{1f}b",
            "😀",
            "x\"y\\z",
        ] {
            let mut out = Vec::new();
            write_str(&mut out, s);
            assert!(out.is_ascii() && !out.iter().any(|&b| b < 0x20));
            let back: String = serde_json::from_slice(&out).unwrap();
            assert_eq!(back, s);
        }
    }

    #[test]
    fn the_text_of_an_encoded_envelope_is_the_envelope() {
        let long = "é".repeat(40);
        let env = serde_json::json!({
            "type": "user", "uuid": "u",
            "message": {"role": "user", "content": [{"type": "text", "text": long}, {"type": "text", "text": long}]},
            "after": [long, 1.50]
        });
        let env = env.as_object().unwrap();
        for threshold in [16, 1 << 20] {
            let enc = encode_envelope(env, threshold, false).unwrap();
            assert_eq!(enc.has_blobs(), threshold == 16);
            let mut text = Vec::new();
            enc.write_text(&mut text);
            assert!(text.is_ascii());
            let back: Value = serde_json::from_slice(&text).unwrap();
            assert_eq!(&back, &Value::Object(env.clone()));
        }
    }

    #[test]
    fn long_strings_become_blob_marks_and_repeat_once() {
        let big = "x".repeat(20_000);
        let env: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"a": big, "b": [big], "c": "short"}))
                .unwrap();
        let e = encode_envelope(&env, 10_240, true).unwrap();
        assert_eq!(e.blobs.len(), 1);
        assert_eq!(e.body.iter().filter(|&&b| b == BLOB_MARK).count(), 4);
        assert!(e.body.len() < 300);
    }
}
