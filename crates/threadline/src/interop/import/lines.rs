//! The lines of a JSONL file as JSON objects, each with its line number; a line that is not a
//! JSON object is reported, and the rest are read. The file is read line by line, a line at most
//! [`MAX_LINE_BYTES`] long, and only as far as it reached when it was opened.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read as _};
use std::rc::Rc;

use serde_json::{Map, Value};

use super::files::{open, Found};
use super::SkippedLine;

/// The longest line an import reads: a line holds one record, and a record with a large image
/// or document in it can be tens of MB; past this the line is skipped, not held in memory.
pub(crate) const MAX_LINE_BYTES: usize = 256 << 20;
const MAX_LINE_SHOWN: &str = "256 MiB";

pub(crate) struct JsonLine {
    /// 1-based
    pub number: u64,
    pub text: Rc<str>,
    pub value: Map<String, Value>,
    /// how many lines with exactly this text came before it in the file
    pub nth: u64,
}

#[derive(Default)]
pub(crate) struct Lines {
    pub lines: Vec<JsonLine>,
    /// lines that were not blank, read or not
    pub nonblank: u64,
}

impl Lines {
    /// Lines were there, and none of them was a JSON object: not a JSONL file at all (a binary
    /// file, a text file under the wrong name).
    pub fn foreign(&self) -> bool {
        self.nonblank > 0 && self.lines.is_empty()
    }
}

/// Reads the JSON lines of a found file; `Err` holds why it could not be read.
pub(crate) fn read(f: &Found, skipped: &mut Vec<SkippedLine>) -> Result<Lines, String> {
    let (file, len) = open(f)?;
    let input = BufReader::with_capacity(1 << 16, file.take(len));
    json_lines(&super::display(&f.path), input, skipped).map_err(|e| format!("cannot read: {e}"))
}

pub(crate) fn json_lines(
    file: &str,
    mut input: impl BufRead,
    skipped: &mut Vec<SkippedLine>,
) -> std::io::Result<Lines> {
    let mut state = State {
        file,
        seen: HashMap::new(),
        out: Lines::default(),
        skipped,
        number: 0,
    };
    let mut buf: Vec<u8> = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            if !buf.is_empty() || too_long {
                state.line(&buf, too_long);
            }
            break;
        }
        let (part, used, end) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (&chunk[..i], i + 1, true),
            None => (chunk, chunk.len(), false),
        };
        if !too_long && buf.len() + part.len() > MAX_LINE_BYTES {
            too_long = true;
            buf = Vec::new();
        }
        if !too_long {
            buf.extend_from_slice(part);
        }
        input.consume(used);
        if end {
            state.line(&buf, too_long);
            buf.clear();
            too_long = false;
        }
    }
    Ok(state.out)
}

struct State<'a> {
    file: &'a str,
    seen: HashMap<Rc<str>, u64>,
    out: Lines,
    skipped: &'a mut Vec<SkippedLine>,
    number: u64,
}

impl State<'_> {
    fn line(&mut self, raw: &[u8], too_long: bool) {
        self.number += 1;
        let number = self.number;
        if too_long {
            self.out.nonblank += 1;
            self.skip(format!(
                "longer than {MAX_LINE_SHOWN} (the longest line an import reads): not read"
            ));
            return;
        }
        // A byte order mark some editors write is not part of the first line.
        let raw = match number {
            1 => raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw),
            _ => raw,
        };
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        // bytes that are not UTF-8 become U+FFFD: the line is still read, and reported if it no
        // longer parses
        let line = String::from_utf8_lossy(raw);
        if line.trim().is_empty() {
            return;
        }
        self.out.nonblank += 1;
        match crate::model::json::parse(&line) {
            Ok(Value::Object(value)) => {
                let text: Rc<str> = Rc::from(line.as_ref());
                let n = self.seen.entry(text.clone()).or_default();
                self.out.lines.push(JsonLine {
                    number,
                    text,
                    value,
                    nth: *n,
                });
                *n += 1;
            }
            Ok(other) => self.skip(format!(
                "not a record: the line is {}, not a JSON object",
                crate::model::json::kind(&other)
            )),
            // the parser's message starts with where in the value it failed (`?` for a key)
            Err(e) => {
                let m = e.message();
                let m = m.strip_prefix("?: ").unwrap_or(m);
                self.skip(format!("not JSON ({m}): the line is cut or damaged"))
            }
        }
    }

    fn skip(&mut self, reason: String) {
        self.skipped.push(SkippedLine {
            file: self.file.to_string(),
            line: Some(self.number),
            reason,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (number, text, nth) of each line read, (line, reason) of each skipped, lines not blank
    type Read = (Vec<(u64, String, u64)>, Vec<(Option<u64>, String)>, u64);

    fn read(bytes: &[u8]) -> Read {
        let mut skipped = Vec::new();
        let lines = json_lines("f", bytes, &mut skipped).unwrap();
        (
            lines
                .lines
                .iter()
                .map(|l| (l.number, l.text.to_string(), l.nth))
                .collect(),
            skipped.into_iter().map(|s| (s.line, s.reason)).collect(),
            lines.nonblank,
        )
    }

    #[test]
    fn lines_keep_their_numbers_and_count_repeats_across_chunk_ends() {
        let (lines, skipped, nonblank) =
            read(b"\xEF\xBB\xBF{\"a\":1}\r\n\n[1]\n{\"a\":1}\n{\"b\":2}");
        assert_eq!(
            lines,
            [
                (1, "{\"a\":1}".to_string(), 0),
                (4, "{\"a\":1}".to_string(), 1),
                (5, "{\"b\":2}".to_string(), 0)
            ]
        );
        assert_eq!(
            skipped,
            [(
                Some(3),
                "not a record: the line is an array, not a JSON object".to_string()
            )]
        );
        assert_eq!(nonblank, 4);
        // a reader giving one byte at a time reads the same
        let text = b"{\"a\":1}\n{\"b\":2}\n";
        let mut skipped = Vec::new();
        let slow = BufReader::with_capacity(1, &text[..]);
        let lines = json_lines("f", slow, &mut skipped).unwrap();
        assert_eq!(lines.lines.len(), 2);
        assert!(skipped.is_empty());
    }
}
