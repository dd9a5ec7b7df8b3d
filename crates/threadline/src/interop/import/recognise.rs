//! Whether a JSONL file is of the format it is imported as. Each reader keeps what it does not
//! know as events, so without this check a Codex rollout given to `import claude-code` would
//! become a session of nothing but events, reported as a success. A file is of a format when one
//! of its lines is a record only that format writes; else it is refused by name, with the
//! format it looks like when it looks like another.

use serde_json::{Map, Value};

use super::lines::JsonLine;
use super::Format;

/// The record types Claude Code writes (besides them, any line with a `sessionId` is one).
const CLAUDE_CODE_TYPES: [&str; 8] = [
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "custom-title",
];

/// The line types of a Codex rollout (`{timestamp, type, payload}`).
const CODEX_TYPES: [&str; 5] = [
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

/// Why `lines` (not empty) are not a file of `format`, or None when they are.
pub(crate) fn not_of(format: Format, lines: &[JsonLine]) -> Option<String> {
    if is(format, lines) {
        return None;
    }
    let first = &lines[0];
    let looked_for = match format {
        Format::ClaudeCode => "no sessionId and no type of a Claude Code record",
        Format::Codex => "no type of a Codex rollout line (session_meta, response_item, ...) and no legacy header",
        Format::Pi => "no type of a pi session entry (a session header, a message)",
        Format::Fspec => "not an fspec codelet record",
    };
    let seen = match first.value.get("type").and_then(Value::as_str) {
        Some(t) => format!("type '{t}'"),
        None => format!("keys {}", keys(&first.value)),
    };
    let mut reason = format!(
        "not a {} session file: line {} has {looked_for} (it has {seen})",
        format.title(),
        first.number
    );
    let other = [Format::ClaudeCode, Format::Codex, Format::Pi]
        .into_iter()
        .find(|f| *f != format && is(*f, lines));
    if let Some(other) = other {
        reason.push_str(&format!(
            "; it looks like a {} file: import it as '{}'",
            other.title(),
            other.as_str()
        ));
    }
    Some(reason)
}

fn is(format: Format, lines: &[JsonLine]) -> bool {
    let ty = |v: &Map<String, Value>| v.get("type").and_then(Value::as_str).map(str::to_string);
    match format {
        Format::ClaudeCode => lines.iter().any(|l| {
            let v = &l.value;
            v.get("sessionId").is_some_and(Value::is_string)
                || (!v.contains_key("payload")
                    && ty(v).is_some_and(|t| CLAUDE_CODE_TYPES.contains(&t.as_str())))
        }),
        Format::Codex => {
            let legacy = {
                let v = &lines[0].value;
                !v.contains_key("type")
                    && v.get("id").is_some_and(Value::is_string)
                    && v.contains_key("timestamp")
            };
            legacy
                || lines.iter().any(|l| {
                    l.value.get("payload").is_some_and(Value::is_object)
                        && ty(&l.value).is_some_and(|t| CODEX_TYPES.contains(&t.as_str()))
                })
        }
        Format::Pi => lines.iter().any(|l| {
            let v = &l.value;
            !v.contains_key("sessionId")
                && match ty(v).as_deref() {
                    Some("session") => v.get("id").is_some_and(Value::is_string),
                    Some("message") => v
                        .get("message")
                        .and_then(|m| m.get("role"))
                        .is_some_and(Value::is_string),
                    _ => false,
                }
        }),
        // fspec's files are read by a reader of their own
        Format::Fspec => true,
    }
}

/// The first few keys of a record, for a message.
fn keys(v: &Map<String, Value>) -> String {
    let mut shown: Vec<String> = v.keys().take(4).map(|k| format!("'{k}'")).collect();
    if v.len() > 4 {
        shown.push("...".into());
    }
    if shown.is_empty() {
        "none".into()
    } else {
        shown.join(", ")
    }
}
