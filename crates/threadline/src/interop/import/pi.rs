//! pi's sessions (`~/.pi/agent/sessions/<cwd>/<time>_<id>.jsonl`): a `session` header, then
//! entries: `message` (roles user, assistant, toolResult, and pi's own bashExecution),
//! `compaction`, `model_change`, `thinking_level_change`, ... Newer files give every entry an
//! `id` and a `parentId` (the session is a tree); older ones are a list, and a compaction names
//! the first entry it keeps by its index.
//!
//! Messages become Anthropic-shaped messages: `toolCall` blocks `tool_use`, `thinking` keeps its
//! signature, a `toolResult` a user message with a `tool_result` block; what has no place there
//! (the api, pi's usage and cost, the stop reason, a result's details) rides along in the record
//! as `pi`. A compaction becomes a Threadline compaction (the entry kept beside it). A
//! bashExecution (a command the user ran) is an event with its message kept whole as `pi`; every
//! other entry is kept as it is, an event.
//!
//! pi appends every entry with the entry it continues as `parentId`; going back in the tree makes
//! the next entry continue an earlier one. There the import writes a Threadline rewind to that
//! entry first, so the session's branches are pi's, and the last entry's branch (where pi
//! resumes) is current.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use super::files::Found;
use super::lines::JsonLine;
use super::{
    derived_uuid, display, imported_from, mark_filled, rewind_record, Format, ImportOptions,
    Incoming, Line, Read,
};
use crate::error::Result;
use crate::model::options::SessionOptions;

pub(crate) fn read(f: &Found, lines: Vec<JsonLine>, options: &ImportOptions) -> Result<Read> {
    let file = display(&f.path);
    let mut read = Read::default();
    let header = lines
        .iter()
        .find(|l| l.value.get("type").and_then(Value::as_str) == Some("session"))
        .map(|l| l.value.clone())
        .unwrap_or_default();
    let s = |k: &str| header.get(k).and_then(Value::as_str).map(str::to_string);
    let id = s("id").unwrap_or_else(|| {
        f.path
            .file_stem()
            .and_then(|x| x.to_str())
            .unwrap_or_default()
            .to_string()
    });
    // The uuid of each entry: its own id, or one derived from its line; a compaction of an older
    // file names the entry it keeps by its index among the lines.
    let uuids: Vec<String> = lines
        .iter()
        .map(|l| match l.value.get("id").and_then(Value::as_str) {
            Some(own) if l.value.get("type").and_then(Value::as_str) != Some("session") => {
                own.to_string()
            }
            _ => derived_uuid(&id, &l.text, l.nth),
        })
        .collect();
    let mut records = Vec::with_capacity(lines.len());
    let mut leaf: Option<&str> = None;
    let mut seen: HashSet<&str> = HashSet::new();
    for (l, uuid) in lines.iter().zip(&uuids) {
        if l.value.get("type").and_then(Value::as_str) == Some("session") {
            records.push(Line {
                line: Some(l.number),
                record: record_of(l, uuid, &uuids),
            });
            continue;
        }
        if let Some(to) = branch_point(l, leaf, &seen) {
            records.push(Line {
                line: Some(l.number),
                record: rewind_record(&id, to, uuid, l.value.get("timestamp")),
            });
        }
        records.push(Line {
            line: Some(l.number),
            record: record_of(l, uuid, &uuids),
        });
        leaf = Some(uuid);
        seen.insert(uuid);
    }
    let mut o = SessionOptions {
        project: options.project.clone().or_else(|| s("cwd")),
        provider: s("provider"),
        model: s("modelId"),
        ..SessionOptions::default()
    };
    let m = imported_from(&mut o, Format::Pi, &file);
    if let Some(from) = s("branchedFrom") {
        m.insert("branchedFrom".into(), Value::String(from));
    }
    read.sessions.push(Incoming {
        id,
        options: o,
        file,
        records,
        forked_from: None,
    });
    Ok(read)
}

/// The earlier entry this one continues from when it is not the entry before it: pi went back
/// in its tree (`/tree`, a branch) and the session continues a new branch from there.
fn branch_point<'a>(l: &'a JsonLine, leaf: Option<&str>, seen: &HashSet<&str>) -> Option<&'a str> {
    let parent = l.value.get("parentId").and_then(Value::as_str)?;
    (parent != leaf? && seen.contains(parent)).then_some(parent)
}

/// One entry as the record stored for it.
fn record_of(l: &JsonLine, uuid: &str, uuids: &[String]) -> Map<String, Value> {
    let v = &l.value;
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
    let mut r = match ty {
        "message" => match v.get("message").and_then(message) {
            Some((message, rest)) => {
                let mut r = Map::new();
                copy(v, &mut r, &["type", "id", "parentId", "timestamp"]);
                r.shift_remove("type");
                r.insert("message".into(), message);
                if !rest.is_empty() {
                    r.insert("pi".into(), Value::Object(rest));
                }
                r
            }
            // pi's own roles (bashExecution, ...): an event, the message kept whole as `pi`
            // (under `message` it would have to be a provider's message)
            None => {
                let mut r = v.clone();
                if let Some(m) = r.shift_remove("message") {
                    r.insert("pi".into(), m);
                }
                r
            }
        },
        "compaction" => compaction(v, uuids),
        "" => {
            let mut r = v.clone();
            r.insert("type".into(), json!("unknown"));
            r
        }
        _ => v.clone(),
    };
    // The tree: pi's id and parentId (kept as they are) are also the record's uuid and
    // parentUuid.
    if let Some(p) = v.get("parentId").filter(|_| ty != "session") {
        r.insert("parentUuid".into(), p.clone());
    }
    mark_filled(&mut r);
    r.insert("uuid".into(), Value::String(uuid.to_string()));
    r
}

fn copy(from: &Map<String, Value>, to: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k) {
            to.insert((*k).to_string(), v.clone());
        }
    }
}

/// A pi message as an Anthropic-shaped one, and the fields that have no place there.
fn message(m: &Value) -> Option<(Value, Map<String, Value>)> {
    let Value::Object(m) = m else { return None };
    let role = m.get("role").and_then(Value::as_str)?;
    let mut rest = m.clone();
    rest.shift_remove("role");
    let content = rest.shift_remove("content").unwrap_or(Value::Null);
    let out = match role {
        "user" => json!({"role": "user", "content": blocks(content)}),
        "assistant" => {
            let mut a = Map::new();
            a.insert("role".into(), json!("assistant"));
            if let Some(model) = rest.shift_remove("model") {
                a.insert("model".into(), model);
            }
            a.insert("content".into(), blocks(content));
            if let Some(reason) = m.get("stopReason").and_then(Value::as_str) {
                let r = match reason {
                    "toolUse" => "tool_use",
                    "stop" => "end_turn",
                    "length" => "max_tokens",
                    _ => "",
                };
                if !r.is_empty() {
                    a.insert("stop_reason".into(), json!(r));
                }
            }
            if let Some(u) = m.get("usage") {
                let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                a.insert(
                    "usage".into(),
                    json!({"input_tokens": n("input"), "output_tokens": n("output"),
                           "cache_read_input_tokens": n("cacheRead"), "cache_creation_input_tokens": n("cacheWrite")}),
                );
            }
            Value::Object(a)
        }
        "toolResult" => {
            let id = rest.shift_remove("toolCallId").unwrap_or(Value::Null);
            let mut b = Map::new();
            b.insert("type".into(), json!("tool_result"));
            b.insert("tool_use_id".into(), id);
            b.insert("content".into(), blocks(content));
            if rest.shift_remove("isError") == Some(Value::Bool(true)) {
                b.insert("is_error".into(), json!(true));
            }
            json!({"role": "user", "content": [Value::Object(b)]})
        }
        _ => return None,
    };
    Some((out, rest))
}

/// pi's content blocks as Anthropic's; fields without a place are kept on the block.
fn blocks(content: Value) -> Value {
    let list = match content {
        Value::String(s) => return json!([{"type": "text", "text": s}]),
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    Value::Array(list.into_iter().map(block).collect())
}

fn block(b: Value) -> Value {
    let Value::Object(mut b) = b else { return b };
    let rename = |b: &mut Map<String, Value>, from: &str, to: &str| {
        if let Some(v) = b.shift_remove(from) {
            b.insert(to.into(), v);
        }
    };
    match b.get("type").and_then(Value::as_str) {
        Some("toolCall") => {
            b.insert("type".into(), json!("tool_use"));
            rename(&mut b, "arguments", "input");
            if !b.contains_key("input") {
                b.insert("input".into(), json!({}));
            }
        }
        Some("thinking") => rename(&mut b, "thinkingSignature", "signature"),
        Some("image") => {
            let data = b.shift_remove("data").unwrap_or(Value::Null);
            let media = b.shift_remove("mimeType").unwrap_or(Value::Null);
            b.insert(
                "source".into(),
                json!({"type": "base64", "media_type": media, "data": data}),
            );
        }
        _ => {}
    }
    Value::Object(b)
}

/// A compaction entry with the Threadline compaction beside it: the summary, and the first
/// entry it keeps (by id in newer files, by index among the lines in older ones).
fn compaction(v: &Map<String, Value>, uuids: &[String]) -> Map<String, Value> {
    let mut r = v.clone();
    let kept = v
        .get("firstKeptEntryId")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            let i = v.get("firstKeptEntryIndex")?.as_u64()? as usize;
            uuids.get(i).cloned()
        });
    let mut c = Map::new();
    c.insert(
        "summary".into(),
        v.get("summary").cloned().unwrap_or(json!("")),
    );
    if let Some(k) = kept {
        c.insert("firstKeptUuid".into(), Value::String(k));
    }
    if let Some(t) = v.get("tokensBefore") {
        c.insert("tokensBefore".into(), t.clone());
    }
    c.insert("trigger".into(), json!("auto"));
    r.insert("compaction".into(), Value::Object(c));
    r
}
