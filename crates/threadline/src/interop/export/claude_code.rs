//! Claude Code JSONL: the records as Claude Code writes them. A record imported from Claude Code
//! comes back as it was (the keys the store filled in are taken out again); an assistant message
//! of several content blocks is written one block per line, as Claude Code does, chained by
//! uuid/parentUuid and sharing the message's id and requestId.

use serde_json::{Map, Value};

use super::Transcript;

pub fn render(t: &Transcript) -> String {
    let cwd = t.info.project.clone().unwrap_or_else(|| ".".into());
    let mut out = String::new();
    for r in t.records {
        let Value::Object(r) = r else { continue };
        for line in lines(as_imported(r.clone()), &cwd) {
            out.push_str(&serde_json::to_string(&Value::Object(line)).unwrap_or_default());
            out.push('\n');
        }
    }
    out
}

/// The record without what the store added: `seq`, and the keys named in `importedWithout`.
fn as_imported(mut r: Map<String, Value>) -> Map<String, Value> {
    r.shift_remove("seq");
    if let Some(Value::Array(keys)) = r.shift_remove("importedWithout") {
        for k in keys.iter().filter_map(Value::as_str) {
            r.shift_remove(k);
        }
    }
    r
}

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
