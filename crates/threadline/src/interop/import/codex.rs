//! Codex rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, lines of
//! `{timestamp, type, payload}`. A `response_item` is a Responses API item: it goes through the
//! Responses converter and becomes a message (the item itself kept beside it when the converter
//! could not say everything). `compacted` becomes a compaction, a `token_count` event token
//! state; every other line (session_meta, turn_context, other events, unknown types) is kept as
//! it is, an event.
//!
//! Rollout lines have no ids: each record's id is derived from its line, so a second import of a
//! grown rollout adds only its new lines.

use serde_json::{json, Map, Value};

use super::files::Found;
use super::lines::JsonLine;
use super::{derived_uuid, display, imported_from, Format, ImportOptions, Incoming, Line, Read};
use crate::error::Result;
use crate::model::convert::from_openai_responses;
use crate::model::options::SessionOptions;

pub(crate) fn read(f: &Found, lines: Vec<JsonLine>, options: &ImportOptions) -> Result<Read> {
    let file = display(&f.path);
    let mut read = Read::default();
    let meta = lines
        .iter()
        .find_map(|l| match l.value.get("type").and_then(Value::as_str) {
            Some("session_meta") => l.value.get("payload").cloned(),
            None if is_legacy_header(&l.value) => Some(Value::Object(l.value.clone())),
            _ => None,
        })
        .unwrap_or(Value::Null);
    let id = meta
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| id_from_name(&f.path));
    let mut records = Vec::with_capacity(lines.len());
    for l in &lines {
        for (i, r) in records_of(l).into_iter().enumerate() {
            let mut r = r;
            let key = if i == 0 {
                l.text.to_string()
            } else {
                format!("{}#{i}", l.text)
            };
            r.insert("uuid".into(), Value::String(derived_uuid(&id, &key, l.nth)));
            records.push(Line {
                line: Some(l.number),
                record: r,
            });
        }
    }
    let mut o = SessionOptions {
        project: options
            .project
            .clone()
            .or_else(|| meta.get("cwd").and_then(Value::as_str).map(str::to_string)),
        provider: Some("openai".into()),
        model: first_model(&lines),
        ..SessionOptions::default()
    };
    let m = imported_from(&mut o, Format::Codex, &file);
    // A subagent's thread names the thread and the call that spawned it.
    let spawn = meta.pointer("/source/subagent/thread_spawn");
    if let Some(parent) = spawn
        .and_then(|s| s.get("parent_thread_id"))
        .and_then(Value::as_str)
    {
        m.insert("parentSessionId".into(), Value::String(parent.into()));
        m.insert("agentKind".into(), Value::String("subagent".into()));
        if let Some(call) = spawn
            .and_then(|s| s.get("spawn_call_id"))
            .and_then(Value::as_str)
        {
            m.insert("parentToolUseId".into(), Value::String(call.into()));
        }
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

/// The records one line becomes: usually one.
fn records_of(l: &JsonLine) -> Vec<Map<String, Value>> {
    let v = &l.value;
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
    let payload = v.get("payload").cloned().unwrap_or(Value::Null);
    let ts = v.get("timestamp").cloned();
    let with_ts = |mut m: Map<String, Value>| {
        if let Some(t) = ts.clone() {
            m.shift_insert(0, "timestamp".into(), t);
        }
        m
    };
    match ty {
        "response_item" => messages(&payload).into_iter().map(with_ts).collect(),
        // Rollouts before the `{timestamp, type, payload}` lines (2025): a header, then bare
        // items. Each is kept whole: the header as the session_meta payload, an item as a message.
        "" if is_legacy_header(v) => {
            let mut m = Map::new();
            if let Some(t) = ts.clone() {
                m.insert("timestamp".into(), t);
            }
            m.insert("type".into(), json!("session_meta"));
            m.insert("payload".into(), Value::Object(v.clone()));
            vec![m]
        }
        t if !v.contains_key("payload") && ITEM_TYPES.contains(&t) => {
            messages(&Value::Object(v.clone()))
        }
        "compacted" => {
            let summary = payload.get("message").and_then(Value::as_str).unwrap_or("");
            let mut m = Map::new();
            m.insert("type".into(), json!("compaction"));
            m.insert(
                "compaction".into(),
                json!({"summary": summary, "trigger": "auto"}),
            );
            m.insert("codex".into(), payload);
            vec![with_ts(m)]
        }
        "event_msg" if payload.get("type").and_then(Value::as_str) == Some("token_count") => {
            match token_patch(&payload) {
                Some(patch) => {
                    let mut m = Map::new();
                    m.insert("type".into(), json!("token_state"));
                    m.insert("data".into(), patch);
                    m.insert("codex".into(), payload);
                    vec![with_ts(m)]
                }
                None => vec![v.clone()],
            }
        }
        // Kept as it is: a line with a type is an event as it stands.
        _ if !ty.is_empty() => vec![v.clone()],
        _ => {
            let mut m = v.clone();
            m.insert("type".into(), json!("unknown"));
            vec![m]
        }
    }
}

/// The Responses item types a legacy rollout writes as bare lines.
const ITEM_TYPES: [&str; 9] = [
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "web_search_call",
];

/// The first line of a legacy rollout: `{id, timestamp, ...}` with no type.
fn is_legacy_header(v: &Map<String, Value>) -> bool {
    !v.contains_key("type") && v.get("id").is_some_and(Value::is_string)
}

/// A Responses item as messages. What the converter cannot say, or an item that is no message
/// (a system or developer prompt), is kept: the item rides along as `codex`.
fn messages(item: &Value) -> Vec<Map<String, Value>> {
    let converted = match from_openai_responses(std::slice::from_ref(item), None) {
        Ok(c) if !c.messages.is_empty() && c.system.is_none() => c,
        _ => {
            let mut m = Map::new();
            m.insert("type".into(), json!("response_item"));
            m.insert("payload".into(), item.clone());
            return vec![m];
        }
    };
    let lossy = !converted.warnings.is_empty();
    converted
        .messages
        .into_iter()
        .map(|message| {
            let mut m = Map::new();
            if harness_text(&message) {
                m.insert("isMeta".into(), Value::Bool(true));
            }
            m.insert("provider".into(), json!("openai"));
            m.insert("message".into(), message);
            if lossy {
                m.insert("codex".into(), item.clone());
            }
            m
        })
        .collect()
}

/// Codex puts its environment and the project's instructions in user messages: they are not
/// prompts a person typed.
fn harness_text(message: &Value) -> bool {
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return false;
    }
    let first = message
        .get("content")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|b| b.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let t = first.trim_start();
    [
        "<environment_context>",
        "<user_instructions>",
        "# AGENTS.md instructions",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// Token state from a `token_count` event: the last response's usage and the session's totals.
/// OpenAI counts cached input inside `input_tokens`; the tracker counts it apart, as Anthropic does.
fn token_patch(payload: &Value) -> Option<Value> {
    let info = payload.get("info").filter(|i| !i.is_null())?;
    let n = |u: &Value, k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let last = info.get("last_token_usage")?;
    let total = info.get("total_token_usage").unwrap_or(last);
    Some(json!({
        "inputTokens": n(last, "input_tokens").saturating_sub(n(last, "cached_input_tokens")),
        "outputTokens": n(last, "output_tokens"),
        "cacheReadInputTokens": n(last, "cached_input_tokens"),
        "cacheCreationInputTokens": 0,
        "contextTokens": n(last, "input_tokens") + n(last, "output_tokens"),
        "cumulativeInputTokens": n(total, "input_tokens").saturating_sub(n(total, "cached_input_tokens")),
        "cumulativeOutputTokens": n(total, "output_tokens"),
        "cumulativeCacheReadTokens": n(total, "cached_input_tokens"),
        "cumulativeCacheCreationTokens": 0,
    }))
}

fn first_model(lines: &[JsonLine]) -> Option<String> {
    lines
        .iter()
        .filter(|l| l.value.get("type").and_then(Value::as_str) == Some("turn_context"))
        .find_map(|l| l.value.get("payload")?.get("model")?.as_str())
        .map(str::to_string)
}

/// `rollout-2025-09-01T10-00-00-<uuid>.jsonl`: the id is the last five dash-separated groups.
fn id_from_name(path: &std::path::Path) -> String {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() > 5 {
        parts[parts.len() - 5..].join("-")
    } else {
        stem.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::super::lines::json_lines;
    use super::*;

    // Lines in the shape Codex 0.4x writes (written here, shortened; the real rollouts are in
    // fixtures/codex when present and tested in tests/interop.rs).
    const ROLLOUT: &str = r#"{"timestamp":"2025-10-01T10:00:00.000Z","type":"session_meta","payload":{"id":"0199a000-0000-7000-8000-000000000001","timestamp":"2025-10-01T10:00:00.000Z","cwd":"/home/u/app","originator":"codex_cli_rs","cli_version":"0.42.0"}}
{"timestamp":"2025-10-01T10:00:00.100Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/u/app</cwd>\n</environment_context>"}]}}
{"timestamp":"2025-10-01T10:00:01.000Z","type":"turn_context","payload":{"cwd":"/home/u/app","approval_policy":"on-request","model":"gpt-5-codex","effort":"medium","summary":"auto"}}
{"timestamp":"2025-10-01T10:00:01.100Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"list the files"}]}}
{"timestamp":"2025-10-01T10:00:02.000Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"Listing"}],"content":null,"encrypted_content":"gAAAA"}}
{"timestamp":"2025-10-01T10:00:02.100Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"}}
{"timestamp":"2025-10-01T10:00:02.500Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"{\"output\":\"a.rs\\n\"}"}}
{"timestamp":"2025-10-01T10:00:03.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1200,"cached_input_tokens":1000,"output_tokens":50,"reasoning_output_tokens":20,"total_tokens":1250},"last_token_usage":{"input_tokens":700,"cached_input_tokens":600,"output_tokens":30,"reasoning_output_tokens":10,"total_tokens":730},"model_context_window":272000}}}
{"timestamp":"2025-10-01T10:00:03.100Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"One file: a.rs"}]}}
{"timestamp":"2025-10-01T10:00:04.000Z","type":"compacted","payload":{"message":"The user listed the files."}}
{"timestamp":"2025-10-01T10:00:05.000Z","type":"mystery","payload":{}}
"#;

    #[test]
    fn a_rollout_becomes_messages_events_token_state_and_a_compaction() {
        let f = Found::named(
            "rollout-2025-10-01T10-00-00-0199a000-0000-7000-8000-000000000001.jsonl".as_ref(),
        );
        let lines = || {
            let mut skipped = Vec::new();
            let lines = json_lines("rollout", ROLLOUT.as_bytes(), &mut skipped).unwrap();
            assert!(skipped.is_empty());
            lines.lines
        };
        let read = read(&f, lines(), &ImportOptions::default()).unwrap();
        assert!(read.skipped.is_empty());
        let s = &read.sessions[0];
        assert_eq!(s.id, "0199a000-0000-7000-8000-000000000001");
        assert_eq!(s.options.project.as_deref(), Some("/home/u/app"));
        assert_eq!(s.options.model.as_deref(), Some("gpt-5-codex"));
        let types: Vec<String> = s
            .records
            .iter()
            .map(|l| {
                let r = &l.record;
                match r.get("message") {
                    Some(m) => format!(
                        "{}:{}",
                        m["role"].as_str().unwrap(),
                        r.contains_key("isMeta")
                    ),
                    None => r["type"].as_str().unwrap().to_string(),
                }
            })
            .collect();
        assert_eq!(
            types,
            [
                "session_meta",
                "user:true",
                "turn_context",
                "user:false",
                "assistant:false",
                "assistant:false",
                "user:false",
                "token_state",
                "assistant:false",
                "compaction",
                "mystery"
            ]
        );
        let tokens = &s.records[7].record["data"];
        assert_eq!(tokens["inputTokens"], 100);
        assert_eq!(tokens["cacheReadInputTokens"], 600);
        assert_eq!(tokens["cumulativeOutputTokens"], 50);
        assert_eq!(
            s.records[9].record["compaction"]["summary"],
            "The user listed the files."
        );
        // ids are derived from the lines: the same on a second read, all distinct
        let again = super::read(&f, lines(), &ImportOptions::default()).unwrap();
        let ids = |r: &Read| -> Vec<Value> {
            r.sessions[0]
                .records
                .iter()
                .map(|l| l.record["uuid"].clone())
                .collect()
        };
        assert_eq!(ids(&read), ids(&again));
        let mut unique = ids(&read);
        unique.dedup();
        assert_eq!(unique.len(), s.records.len());
    }
}
