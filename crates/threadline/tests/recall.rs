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

/// Issue 23, finding 10: a cursor's offset was not covered by its key (an offset of 2^63 gave
/// page 1 on SQLite and STORE_IO on PostgreSQL).
#[test]
fn a_cursor_is_refused_unless_it_is_one_this_search_gave() {
    let (_dir, store) = store();
    let with = |cursor: &str, limit: u64| SearchOptions {
        limit: Some(limit),
        cursor: (!cursor.is_empty()).then(|| cursor.to_string()),
        ..SearchOptions::default()
    };
    let first = store.search("phoenix", &with("", 1)).unwrap();
    let c = first.next_cursor.clone().unwrap();
    let second = store.search("phoenix", &with(&c, 1)).unwrap();
    assert_eq!(second.hits.len(), 1);
    assert_ne!(second.hits[0].uuid, first.hits[0].uuid);
    let refused = |query: &str, options: &SearchOptions| {
        let e = store.search(query, options).unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT", "{query} {options:?}: {e}");
        assert!(e.message().contains("cursor"), "{e}");
    };
    // altered anywhere, cut short, made longer, empty
    let mut bad: Vec<String> = (0..c.len())
        .map(|i| {
            let mut b = c.clone().into_bytes();
            b[i] = if b[i] == b'0' { b'1' } else { b'0' };
            String::from_utf8(b).unwrap()
        })
        .collect();
    bad.extend([
        c[..c.len() - 1].to_string(),
        c[1..].to_string(),
        format!("{c}0"),
        " ".into(),
    ]);
    // the offset replaced by one beyond any page (2^63, u64::MAX), the rest kept
    let rest = &c[c.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(c.len())..];
    for huge in ["9223372036854775808", "18446744073709551615", "1"] {
        bad.push(format!("{huge}{rest}"));
    }
    for b in &bad {
        refused("phoenix", &with(b, 1));
    }
    // made for another query or other options
    refused("phoenix server", &with(&c, 1));
    refused("phoenix", &with(&c, 2));
    // made by another store holding the same records
    let (_other_dir, other) = self::store();
    assert_eq!(other.search("phoenix", &with("", 1)).unwrap().hits.len(), 1);
    let e = other.search("phoenix", &with(&c, 1)).unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT", "{e}");
    // and the cursor as given still leads to the second page
    assert_eq!(
        store.search("phoenix", &with(&c, 1)).unwrap().hits[0].uuid,
        second.hits[0].uuid
    );
}
