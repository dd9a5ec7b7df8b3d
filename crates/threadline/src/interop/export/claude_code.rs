//! Claude Code JSONL: the records as Claude Code writes them. A record imported from Claude Code
//! comes back as it was (the keys the store filled in are taken out again). Any other record is
//! given what Claude Code always writes (its readers need it): the uuid chain and sessionId, a
//! millisecond time, an assistant message's id and requestId. An assistant message of several
//! content blocks is written one block per line, as Claude Code does, chained by uuid/parentUuid
//! and sharing the message's id and requestId.

use serde_json::{Map, Value};

use super::Transcript;
use crate::model::envelope::REWIND;

pub fn render(t: &Transcript) -> String {
    let cwd = t.info.project.clone().unwrap_or_else(|| ".".into());
    let from_claude_code = imported_from(t) == Some("claude-code");
    let mut out = String::new();
    for r in t.records {
        let Value::Object(r) = r else { continue };
        // Claude Code marks a rewind by the next prompt's parent alone; the import's rewind
        // record has no line of its own there.
        if from_claude_code && r.get("type").and_then(Value::as_str) == Some(REWIND) {
            continue;
        }
        let mut r = as_imported(r.clone(), from_claude_code);
        if !from_claude_code {
            as_claude_code_writes(&mut r, t.info.model.as_deref());
        }
        for line in lines(r, &cwd) {
            out.push_str(&serde_json::to_string(&Value::Object(line)).unwrap_or_default());
            out.push('\n');
        }
    }
    out
}

/// The format a session was imported from (`info.metadata.importedFrom.format`).
fn imported_from<'a>(t: &Transcript<'a>) -> Option<&'a str> {
    t.info
        .metadata
        .as_ref()?
        .get("importedFrom")?
        .get("format")?
        .as_str()
}

/// The record without what the store added: `seq`, and (for a Claude Code file given back as it
/// was) the keys named in `importedWithout`.
pub(crate) fn as_imported(mut r: Map<String, Value>, strip_filled: bool) -> Map<String, Value> {
    r.shift_remove("seq");
    if let Some(Value::Array(keys)) = r.shift_remove("importedWithout") {
        for k in keys
            .iter()
            .filter_map(Value::as_str)
            .filter(|_| strip_filled)
        {
            r.shift_remove(k);
        }
    }
    // A message whose content was a string (a mirror marks it; the store keeps one text block).
    if strip_filled && r.shift_remove(STRING_CONTENT).is_some() {
        if let Some(Value::Object(m)) = r.get_mut("message") {
            let text = m
                .get("content")
                .and_then(|c| c.get(0))
                .and_then(|b| b.get("text"))
                .cloned();
            if let Some(text) = text {
                m.insert("content".into(), text);
            }
        }
    }
    r
}

/// Set on a record whose message content was a string, by the Claude Agent SDK's mirror
/// (`interop/mirror.rs`): the store keeps it as one text block, the export gives the string back.
pub(crate) const STRING_CONTENT: &str = "importedStringContent";

/// What Claude Code always writes and a record from elsewhere may lack or write otherwise (its
/// readers require it: claude-code-log skips a line without `version`, ccusage one whose time has
/// more than milliseconds):
/// - the time in milliseconds (`2026-01-02T03:04:05.678Z`);
/// - on a message, `version`: the version of the program that wrote the line (Claude Code
///   writes its own; this is Threadline's);
/// - on an assistant message, `type: "message"`, a `model` (the session's, else `unknown`), and
///   an id and a requestId, derived from the record's uuid when it has none (readers count a
///   response's usage once per pair; the lines of one message share them).
fn as_claude_code_writes(r: &mut Map<String, Value>, session_model: Option<&str>) {
    let time = r
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(crate::model::clock::parse_ms);
    if let Some(ms) = time {
        r.insert(
            "timestamp".into(),
            Value::String(crate::model::clock::iso_from_ms(ms)),
        );
    }
    let uuid = r
        .get("uuid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let derived = |what: &str| {
        crate::model::derived_uuid::from_parts(&[what.as_bytes(), b" ", uuid.as_bytes()])
            .replace('-', "")
    };
    if !r.contains_key("message") {
        return;
    }
    if !r.contains_key("version") {
        r.insert("version".into(), Value::String(VERSION.into()));
    }
    let is_assistant = r
        .get("message")
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        == Some("assistant");
    if !is_assistant {
        return;
    }
    if !r.get("requestId").is_some_and(Value::is_string) {
        r.insert(
            "requestId".into(),
            Value::String(format!("req_{}", derived("request id"))),
        );
    }
    if let Some(Value::Object(m)) = r.get_mut("message") {
        if !m.contains_key("id") {
            let id = format!("msg_{}", derived("message id"));
            m.shift_insert(0, "id".into(), Value::String(id));
        }
        if !m.contains_key("type") {
            m.shift_insert(1, "type".into(), Value::String("message".into()));
        }
        if !m.get("model").is_some_and(Value::is_string) {
            let model = session_model.unwrap_or("unknown");
            m.insert("model".into(), Value::String(model.into()));
        }
    }
}

/// What a line written here says in `version`.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One record as Claude Code's lines: a `tool_result` record is a `user` record there, and an
/// assistant message is split into one line per block.
fn lines(mut r: Map<String, Value>, cwd: &str) -> Vec<Map<String, Value>> {
    if r.get("type").and_then(Value::as_str) == Some("tool_result") {
        r.insert("type".into(), Value::String("user".into()));
    }
    if r.contains_key("message") {
        for (k, v) in [
            ("isSidechain", Value::Bool(false)),
            ("userType", Value::String("external".into())),
            ("cwd", Value::String(cwd.into())),
        ] {
            if !r.contains_key(k) {
                r.insert(k.into(), v);
            }
        }
    }
    let blocks = match r.get("message") {
        Some(m) if m.get("role").and_then(Value::as_str) == Some("assistant") => m
            .get("content")
            .and_then(Value::as_array)
            .filter(|b| b.len() > 1)
            .cloned(),
        _ => None,
    };
    match blocks {
        Some(blocks) => split(r, blocks),
        None => vec![r],
    }
}

/// Line i holds block i; the last line keeps the record's uuid (later records name it as their
/// parent), the others get one derived from it.
fn split(r: Map<String, Value>, blocks: Vec<Value>) -> Vec<Map<String, Value>> {
    let uuid = r
        .get("uuid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let n = blocks.len();
    let mut parent = r.get("parentUuid").cloned().unwrap_or(Value::Null);
    let mut out = Vec::with_capacity(n);
    for (i, block) in blocks.into_iter().enumerate() {
        let mut line = r.clone();
        let id = if i + 1 == n {
            uuid.clone()
        } else {
            crate::interop::import::derived_uuid(&uuid, "block", i as u64)
        };
        line.insert("parentUuid".into(), parent);
        line.insert("uuid".into(), Value::String(id.clone()));
        if let Some(Value::Object(m)) = line.get_mut("message") {
            m.insert("content".into(), Value::Array(vec![block]));
        }
        parent = Value::String(id);
        out.push(line);
    }
    out
}
