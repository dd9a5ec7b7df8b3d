//! The batch of appends on a SQLite store (storage/batch.rs): an append takes no SQLite lock, this
//! process reads its own appends at once, and a failed append leaves the batch as it was. The
//! rules across processes are tested with real processes in __test__/append-log-rules.test.js.

use serde_json::json;
use threadline::{SessionOptions, Store, StoreOptions};

fn temp_store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db").to_string_lossy().into_owned();
    (dir, path)
}

fn session(store: &Store, id: &str) -> threadline::Session {
    store
        .create_session(SessionOptions {
            id: Some(id.into()),
            ..Default::default()
        })
        .unwrap()
}

fn count(path: &str) -> i64 {
    let db = rusqlite::Connection::open(path).unwrap();
    db.query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn an_acknowledged_append_holds_no_write_lock() {
    let (_dir, path) = temp_store();
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = session(&store, "s");
    s.append(json!("claims the session, committed on its own"), None)
        .unwrap();
    s.append(json!("staged in the batch"), None).unwrap();
    // Another connection takes the write lock at once: the batch does not hold it between
    // appends (a writer stopped there would block every other writer).
    let other = rusqlite::Connection::open(&path).unwrap();
    other.busy_timeout(std::time::Duration::ZERO).unwrap();
    other.execute_batch("BEGIN IMMEDIATE; COMMIT;").unwrap();
    // The batch is flushed within a few milliseconds by the flusher thread.
    let start = std::time::Instant::now();
    while count(&path) < 2 && start.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(count(&path), 2);
}

#[test]
fn this_process_reads_its_appends_at_once() {
    let (_dir, path) = temp_store();
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = session(&store, "s");
    for i in 0..5 {
        s.append(json!(format!("prompt {i}")), None).unwrap();
    }
    assert_eq!(s.envelopes(0, None).unwrap().len(), 5);
    let again = store.open_session("s", None).unwrap();
    assert_eq!(again.messages().unwrap().len(), 5);
    let listed = store.list_sessions(&Default::default()).unwrap();
    assert_eq!(listed[0].message_count, 5);
}

#[test]
fn a_tool_result_appended_in_the_batch_of_its_call_settles_it() {
    let (_dir, path) = temp_store();
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = session(&store, "s");
    s.append(json!("list src"), None).unwrap();
    let call = json!({"role": "assistant", "id": "msg_1", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "src"}}]});
    let result = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.rs"}]});
    s.append(call.clone(), None).unwrap();
    // The call's journal row is in the batch, not in SQLite: the result's read of it sees it.
    s.append(result.clone(), None).unwrap();
    assert!(s.pending_repairs().unwrap().is_empty());
    assert_eq!(s.messages().unwrap().len(), 3);
    // And within one appendMany, the call and its result together.
    let t = session(&store, "t");
    t.append(json!("list src"), None).unwrap();
    t.append_many(vec![call, result]).unwrap();
    assert!(t.pending_repairs().unwrap().is_empty());
    drop(store);
    let reopened = Store::open(Some(&path), StoreOptions::default()).unwrap();
    for id in ["s", "t"] {
        let r = reopened.open_session(id, None).unwrap();
        assert_eq!(r.messages().unwrap().len(), 3);
        assert!(r.pending_repairs().unwrap().is_empty());
    }
}

#[test]
fn a_failed_append_leaves_the_batch_as_it_was() {
    let (_dir, path) = temp_store();
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = session(&store, "s");
    let a = s.append(json!("a"), None).unwrap();
    s.append(json!("b"), None).unwrap();
    // The same uuid with other content: refused halfway through the append's work.
    let mut env = serde_json::Map::new();
    env.insert("uuid".into(), a["uuid"].clone());
    let refused = s.append(json!("other content"), Some(env)).unwrap_err();
    assert_eq!(refused.code(), "INVALID_INPUT");
    // An appendMany whose second record is refused writes nothing of the first.
    let mut dup = serde_json::Map::new();
    dup.insert("uuid".into(), a["uuid"].clone());
    dup.insert("message".into(), json!({"role": "user", "content": "x"}));
    assert!(s
        .append_many(vec![json!("c?"), serde_json::Value::Object(dup)])
        .is_err());
    s.append(json!("c"), None).unwrap();
    let seen: Vec<u64> = s
        .envelopes(0, None)
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seen, vec![0, 1, 2]);
    drop(s);
    drop(store);
    let reopened = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let texts: Vec<String> = reopened
        .open_session("s", None)
        .unwrap()
        .messages()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts, ["a", "b", "c"]);
    assert!(reopened.verify(&Default::default()).unwrap().ok);
}

#[test]
fn a_session_number_is_never_given_twice() {
    let (_dir, path) = temp_store();
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    session(&store, "a").append(json!("first a"), None).unwrap();
    store.delete_session("a").unwrap();
    session(&store, "a");
    drop(store);
    let db = rusqlite::Connection::open(&path).unwrap();
    let nums: Vec<i64> = db
        .prepare("SELECT num FROM sessions UNION ALL SELECT num FROM deleted_sessions ORDER BY 1")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(nums.len(), 2);
    assert_ne!(
        nums[0], nums[1],
        "the new 'a' took the deleted one's number"
    );
}
