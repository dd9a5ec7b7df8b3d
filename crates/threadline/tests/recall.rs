//! Search and the recall tools from Rust, without Node: a real Claude Code session restored,
//! found by a phrase and an identifier, and a model's call answered.

mod common;

use serde_json::json;
use threadline::{RecallOptions, SearchOptions, SessionOptions, Store, StoreOptions};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = common::location(dir.path(), "recall.db");
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = store
        .create_session(SessionOptions {
            id: Some("tools".into()),
            project: Some("spotter".into()),
            ..SessionOptions::default()
        })
        .unwrap();
    s.restore_messages(common::fixture_lines("tool_heavy.jsonl"))
        .unwrap();
    (dir, store)
}

#[test]
fn a_phrase_and_an_identifier_are_found_in_their_records() {
    let (_dir, store) = store();
    let page = store
        .search("\"start phoenix\"", &SearchOptions::default())
        .unwrap();
    // the prompt, and the description of the command the model ran for it
    let mut snippets: Vec<&str> = page.hits.iter().map(|h| h.snippet.as_str()).collect();
    snippets.sort();
    assert_eq!(
        snippets,
        [
            "**start** **phoenix** in background",
            "Bash command: mix phx.server description: **Start** **Phoenix** server in background run_in_background: true",
        ]
    );
    let page = store
        .search("run_in_background", &SearchOptions::default())
        .unwrap();
    assert!(!page.hits.is_empty());
    assert!(page
        .hits
        .iter()
        .all(|h| h.field == threadline::Field::ToolInput));
    let e = store
        .search("\"open", &SearchOptions::default())
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
}

#[test]
fn a_models_call_is_answered_and_its_mistakes_are_is_error_results() {
    let (_dir, store) = store();
    let tools = store.recall_tools(RecallOptions::default()).unwrap();
    let r = tools
        .handle(&json!({"type": "tool_use", "id": "t1", "name": "session_search", "input": {"query": "phoenix"}}))
        .unwrap();
    assert_eq!(r["tool_use_id"], "t1");
    assert!(r.get("is_error").is_none(), "{r}");
    assert!(r["content"].as_str().unwrap().contains("session tools"));
    let r = tools
        .handle(&json!({"name": "session_read", "input": {"session_id": 7}}))
        .unwrap();
    assert_eq!(r["is_error"], true);
    assert_eq!(r["content"], "session_id: expected a string, got a number");
}

#[test]
fn a_search_behind_a_large_backlog_answers_in_its_time_and_says_what_it_did_not_see() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::location(dir.path(), "backlog.db");
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = store
        .create_session(SessionOptions {
            id: Some("long".into()),
            ..SessionOptions::default()
        })
        .unwrap();
    let role = |i: usize| {
        if i.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        }
    };
    s.append_many(
        (0..1600)
            .map(|i| json!({"role": role(i), "content": [{"type": "text", "text": format!("common marker{i}")}]}))
            .collect(),
    )
    .unwrap();
    let found = |q: &str| {
        let page = store.search(q, &SearchOptions::default()).unwrap();
        (page.hits.len(), page.unindexed)
    };
    // No time to index: each search indexes one batch (500 records, oldest first) and answers
    // from what is indexed, saying how many records it did not search.
    threadline::testing::set_index_budget(Some(std::time::Duration::ZERO));
    assert_eq!(found("marker1599"), (0, 1100));
    assert_eq!(found("marker10"), (1, 600));
    assert_eq!(found("marker999"), (1, 100));
    assert_eq!(found("marker1599"), (1, 0));
    assert_eq!(found("marker1599"), (1, 0));
    // With the usual budget, what was appended since is found at the next search, whole.
    threadline::testing::set_index_budget(None);
    s.append_many(
        (1600..2400)
            .map(|i| json!({"role": role(i), "content": [{"type": "text", "text": format!("common marker{i}")}]}))
            .collect(),
    )
    .unwrap();
    assert_eq!(found("marker2399"), (1, 0));
    assert_eq!(found("marker1600 OR marker2000 OR marker5"), (3, 0));
}
