//! Number text kept exactly. serde_json (arbitrary_precision) keeps a number's digits but writes
//! its exponent its own way: `1E+2` becomes `1e+2` and `1e5` becomes `1e+5`. The contract keeps
//! numbers as written, so after a parse the numbers whose exponent serde_json rewrote get their
//! text back from the source.

use serde_json::{Number, Value};

/// Parses JSON text, numbers as written.
pub fn parse_text(text: &str) -> serde_json::Result<Value> {
    let mut v = serde_json::from_str(text)?;
    restore(text, &mut v);
    Ok(v)
}

/// Parses stored JSON text (written from a parse that kept its numbers), numbers as stored.
pub fn parse_stored(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut v = serde_json::from_slice(bytes)?;
    // Stored text is valid UTF-8 JSON whenever the parse succeeded.
    if let Ok(text) = std::str::from_utf8(bytes) {
        restore(text, &mut v);
    }
    Ok(v)
}

/// Gives the numbers of `value` (parsed from `text`) the text they have in `text`.
pub fn restore(text: &str, value: &mut Value) {
    // Only a number with an exponent is written differently, and serde_json writes every
    // exponent with an `e`: without one in the tree, the text need not be scanned (the scan was
    // a sixth of an append's parse).
    if !has_exponent(value) {
        return;
    }
    let rewritten = rewritten_numbers(text.as_bytes());
    if rewritten.is_empty() {
        return;
    }
    // Numbers are met in document order in both (objects keep their key order). Duplicate keys
    // drop a value, and so a number, from the parse: then the two orders do not match and the
    // text is left as serde_json wrote it.
    if count(value) != rewritten.total {
        return;
    }
    let mut next = rewritten.list.into_iter().peekable();
    let mut ordinal = 0;
    visit(value, &mut |n| {
        if let Some((_, original)) = next.next_if(|(at, _)| *at == ordinal) {
            *n = Number::from_string_unchecked(original.to_string());
        }
        ordinal += 1;
    });
}

struct Rewritten<'t> {
    /// (ordinal among all numbers, text) of each number with an `E` or an unsigned exponent
    list: Vec<(usize, &'t str)>,
    total: usize,
}

impl Rewritten<'_> {
    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// The numbers of JSON text `t` whose exponent serde_json writes differently: one pass, strings
/// skipped.
fn rewritten_numbers(t: &[u8]) -> Rewritten<'_> {
    let mut out = Rewritten {
        list: Vec::new(),
        total: 0,
    };
    let mut i = 0;
    while i < t.len() {
        match t[i] {
            b'"' => i = string_end(t, i + 1),
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < t.len() && matches!(t[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let number = &t[start..i];
                if let Some(e) = number.iter().position(|&b| b == b'e' || b == b'E') {
                    let signed = matches!(number.get(e + 1), Some(b'+' | b'-'));
                    if number[e] == b'E' || !signed {
                        // The slice is ASCII: a number token of valid JSON.
                        let s = std::str::from_utf8(number).unwrap_or_default();
                        out.list.push((out.total, s));
                    }
                }
                out.total += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The index after the closing quote of the string whose text starts at `i`.
fn string_end(t: &[u8], mut i: usize) -> usize {
    while let Some(at) = t
        .get(i..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        match t[i + at] {
            b'"' => return i + at + 1,
            _ => i += at + 2,
        }
    }
    t.len()
}

fn has_exponent(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_str().contains('e'),
        Value::Array(a) => a.iter().any(has_exponent),
        Value::Object(o) => o.values().any(has_exponent),
        _ => false,
    }
}

fn count(v: &Value) -> usize {
    match v {
        Value::Number(_) => 1,
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

fn visit(v: &mut Value, f: &mut impl FnMut(&mut Number)) {
    match v {
        Value::Number(n) => f(n),
        Value::Array(a) => a.iter_mut().for_each(|x| visit(x, f)),
        Value::Object(o) => o.values_mut().for_each(|x| visit(x, f)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::model::json::parse;

    fn round_trip(text: &str) -> String {
        serde_json::to_string(&parse(text).unwrap()).unwrap()
    }

    #[test]
    fn exponents_are_kept_as_written() {
        for text in [
            r#"{"a":1E+2,"b":1e5,"c":-2.50E-3,"d":1e400,"e":[1E2,{"f":0e0}],"g":12345678901234567890123}"#,
            r#"[1.0,-0,1e+2,1e-2,100]"#,
            r#"{"s":"1E5 \" 2e3","n":3E3}"#,
        ] {
            assert_eq!(round_trip(text), text);
        }
    }

    #[test]
    fn duplicate_keys_leave_the_parse_as_it_is() {
        // serde_json keeps the last of duplicate keys; the numbers no longer line up.
        assert_eq!(round_trip(r#"{"a":1E1,"a":2E1}"#), r#"{"a":2e+1}"#);
    }
}
