//! Parsing caller JSON with path-bearing errors, and the limits on what one record may hold.

use serde_json::Value;

use crate::error::{Error, Result};

/// The largest record accepted, in bytes of JSON: the Anthropic API's own request size limit, so
/// nothing stored is too large to send back.
pub const MAX_RECORD_BYTES: usize = 32 * 1024 * 1024;

/// `v` as compact JSON text in ASCII: characters outside it as `\\uXXXX` escapes (as the store
/// keeps text), for a JS one-byte string that V8 neither checks nor decodes as UTF-8.
pub fn to_ascii<T: serde::Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) -> Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, Ascii);
    v.serialize(&mut ser)
        .map_err(|e| Error::StoreIo(e.to_string()))
}

/// serde_json's compact format, with what is outside ASCII escaped.
struct Ascii;

impl serde_json::ser::Formatter for Ascii {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        if fragment.is_ascii() {
            return w.write_all(fragment.as_bytes());
        }
        let mut from = 0;
        for (i, c) in fragment.char_indices().filter(|(_, c)| !c.is_ascii()) {
            w.write_all(&fragment.as_bytes()[from..i])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(w, "\\u{unit:04x}")?;
            }
            from = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[from..])
    }
}

/// Parses JSON text into a value that keeps key order and number text exactly.
/// Errors name the path where parsing stopped (lone surrogates, nesting deeper than 128, ...).
pub fn parse(text: &str) -> Result<Value> {
    crate::model::number_text::parse_text(text).map_err(|_| parse_error(text))
}

/// The slow path: parse again, tracking the path, to say where the text is wrong.
fn parse_error(text: &str) -> Error {
    let mut de = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, Value>(&mut de) {
        Ok(_) => Error::InvalidInput("invalid JSON".into()),
        Err(e) => {
            let inner = e.inner().to_string();
            let reason = inner
                .split(" at line ")
                .next()
                .unwrap_or(&inner)
                .to_string();
            let reason = if reason.contains("recursion limit") {
                "nested deeper than 128 levels".to_string()
            } else if reason.contains("surrogate") || reason.contains("end of hex escape") {
                // JSON.stringify writes a lone surrogate as a \uD800-style escape; serde_json
                // reports it either way, depending on what follows it.
                "a string holds a lone UTF-16 surrogate, which is not valid Unicode text"
                    .to_string()
            } else {
                reason
            };
            let mut path = e.path().to_string();
            if path == "." {
                return Error::InvalidInput(format!("not valid JSON: {reason}"));
            }
            // By characters: a byte cut could fall inside a multi-byte key (a panic).
            if let Some((cut, _)) = path.char_indices().nth(120) {
                path.truncate(cut);
                path.push_str("...");
            }
            Error::InvalidInput(format!("{path}: {reason}"))
        }
    }
}

/// The JSON type of a value, as an error message names it.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_non_ascii_path_in_a_cut_line_is_an_error_not_a_panic() {
        // A line cut short by a crash, under keys of two-byte characters longer than 60 of them.
        let key = "ключ".repeat(40);
        let text = format!(r#"{{"message":{{"content":[{{"input":{{"{key}":"#);
        let e = parse(&text).unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT");
        assert!(e.message().contains("..."), "{}", e.message());
    }
}
