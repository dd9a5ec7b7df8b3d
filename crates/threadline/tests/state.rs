//! Turns and token state, kept incrementally, checked against the real Claude Code sessions.

mod common;

use std::path::PathBuf;

use serde_json::{json, Value};
use threadline::{SessionOptions, Store, StoreOptions, TokenPatch, TurnStatus};

fn fixture(name: &str) -> Option<Vec<String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/claude-code")
        .join(name);
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../__test__/fixtures")
        .join(name);
    let text = std::fs::read_to_string(path)
        .or_else(|_| std::fs::read_to_string(local))
        .ok()?;
    Some(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// Messages and cumulative output tokens computed from the raw records, independently of the
/// library.
fn expected(lines: &[String]) -> (u64, u64) {
    let mut messages = 0;
    let mut seen = std::collections::HashMap::<String, u64>::new();
    for l in lines {
        let r: Value = serde_json::from_str(l).unwrap();
        let Some(m) = r.get("message") else { continue };
        messages += 1;
        if let (Some(id), Some(out)) = (m["id"].as_str(), m["usage"]["output_tokens"].as_u64()) {
            seen.insert(id.to_string(), out);
        }
    }
    (messages, seen.values().sum())
}

/// The prompts a person typed in each file, read off it by hand: interruptions, the `/mcp` local
/// command with its caveat and output, a background task's notification and the compaction
/// summary are not prompts. One turn per prompt.
const HUMAN_PROMPTS: &[(&str, u64)] = &[
    ("short.jsonl", 1),
    ("tool_heavy.jsonl", 2),
    ("compacted-session.jsonl", 2),
];

#[test]
fn real_sessions_give_the_turns_and_tokens_counted_from_their_records() {
    for &(name, turns) in HUMAN_PROMPTS {
        let Some(lines) = fixture(name) else {
            panic!("fixture {name} not found")
        };
        let dir = tempfile::tempdir().unwrap();
        let path = common::location(dir.path(), "t.db");
        let id = {
            let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
            let s = store.create_session(SessionOptions::default()).unwrap();
            for l in &lines {
                s.append(threadline::parse(l).unwrap(), None).unwrap();
            }
            s.id().to_string()
        };
        let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
        let s = store.open_session(&id, None).unwrap();
        let (messages, output) = expected(&lines);
        assert_eq!(s.all_messages().unwrap().len() as u64, messages, "{name}");
        let t = s.turns().unwrap();
        assert_eq!(t.len() as u64, turns, "{name}");
        assert_eq!(
            t.iter().map(|t| t.message_count).sum::<u64>(),
            messages,
            "{name}"
        );
        assert_eq!(
            s.token_tracker().unwrap().cumulative_output_tokens,
            output,
            "{name}"
        );
        assert_eq!(s.envelopes(0, None).unwrap().len(), lines.len(), "{name}");

        let fresh = store.create_session(SessionOptions::default()).unwrap();
        let report = fresh
            .restore_messages(lines.iter().map(|l| Value::String(l.clone())).collect())
            .unwrap();
        assert!(report.skipped.is_empty(), "{name}: {:?}", report.skipped);
        assert_eq!(
            (report.message_count, report.turn_count),
            (messages, turns),
            "{name}"
        );
        assert_eq!(fresh.messages().unwrap(), s.messages().unwrap(), "{name}");
    }
}

#[test]
fn an_interrupted_turn_waits_for_tool_results() {
    let store = Store::memory().unwrap();
    let s = store.create_session(SessionOptions::default()).unwrap();
    s.append(json!("run the tests"), None).unwrap();
    s.append(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]}), None).unwrap();
    s.append(json!("never mind"), None).unwrap();
    let t = s.turns().unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].status, TurnStatus::AwaitingToolResults);
    assert_eq!(
        (t[0].start_index, t[0].end_index, t[0].tool_use_count),
        (0, 1, 1)
    );
    assert_eq!(t[1].status, TurnStatus::AwaitingResponse);
}

#[test]
fn restored_token_state_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::location(dir.path(), "t.db");
    let id = {
        let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
        let s = store
            .create_session(SessionOptions {
                context_window: Some(1000),
                ..Default::default()
            })
            .unwrap();
        s.restore_token_state(TokenPatch {
            cumulative_input_tokens: Some(500),
            context_tokens: Some(250),
            ..Default::default()
        })
        .unwrap();
        s.id().to_string()
    };
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = store.open_session(&id, None).unwrap();
    let t = s.token_tracker().unwrap();
    assert_eq!((t.cumulative_input_tokens, t.context_tokens), (500, 250));
    assert_eq!(s.context_fill().unwrap().fraction, Some(0.25));
    assert!(s.messages().unwrap().is_empty());
}
