//! The lines of a JSONL file as JSON objects, each with its line number; a line that is not a
//! JSON object is reported, and the rest are read.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::SkippedLine;

pub(crate) struct JsonLine<'a> {
    /// 1-based
    pub number: u64,
    pub text: &'a str,
    pub value: Map<String, Value>,
    /// how many lines with exactly this text came before it in the file
    pub nth: u64,
}

pub(crate) fn json_lines<'a>(
    file: &str,
    text: &'a str,
    skipped: &mut Vec<SkippedLine>,
) -> Vec<JsonLine<'a>> {
    let mut seen: HashMap<&str, u64> = HashMap::new();
    let mut out = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            continue;
        }
        let number = i as u64 + 1;
        match crate::model::json::parse(line) {
            Ok(Value::Object(value)) => {
                let n = seen.entry(line).or_default();
                out.push(JsonLine {
                    number,
                    text: line,
                    value,
                    nth: *n,
                });
                *n += 1;
            }
            Ok(other) => skipped.push(SkippedLine {
                file: file.to_string(),
                line: Some(number),
                reason: format!(
                    "expected a JSON object, got {}",
                    crate::model::json::kind(&other)
                ),
            }),
            Err(e) => skipped.push(SkippedLine {
                file: file.to_string(),
                line: Some(number),
                reason: format!("not JSON: {}", e.message()),
            }),
        }
    }
    out
}
