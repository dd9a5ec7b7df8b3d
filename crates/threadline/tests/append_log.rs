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

/// The journal rows of session `id`, with whether each has ended instead of when, and without
/// the calls' record uuids (made anew by each run).
fn journal(store: &Store, id: &str) -> Vec<serde_json::Value> {
    let s = store.open_session(id, None).unwrap();
    let mut rows = s.tool_calls(None).unwrap();
    for r in &mut rows {
        let o = r.as_object_mut().unwrap();
        let ended = !o["endedAt"].is_null();
        for k in ["requestedAt", "startedAt", "endedAt", "callUuid"] {
            o.remove(k).unwrap();
        }
        o.insert("ended".into(), json!(ended));
    }
    rows
}

#[test]
fn calls_answered_in_the_batch_that_requested_them_leave_the_journal_a_commit_per_append_leaves() {
    let use_ = |ids: &[&str]| {
        let blocks: Vec<_> = ids
            .iter()
            .map(|id| json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": id}}))
            .collect();
        json!({"role": "assistant", "content": blocks})
    };
    let result = |id: &str, is_error: bool| {
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": format!("out {id}"), "is_error": is_error}]})
    };
    let run = |durability: threadline::Durability| {
        let (dir, path) = temp_store();
        let store = Store::open(
            Some(&path),
            StoreOptions {
                durability,
                ..Default::default()
            },
        )
        .unwrap();
        let s = session(&store, "s");
        s.append(json!("go"), None).unwrap();
        // requested and answered (one failed, two at once) while the batch holds the requests
        s.append(use_(&["a", "b"]), None).unwrap();
        s.append(result("a", false), None).unwrap();
        s.append(result("b", true), None).unwrap();
        s.append(result("a", false), None).unwrap();
        s.append_many(vec![use_(&["c"]), result("c", false)])
            .unwrap();
        // a request refused with its append (the next record is too large): its result answers
        // nothing
        let too_large = json!("x".repeat(33 << 20));
        let refused = s.append_many(vec![use_(&["d"]), too_large]).unwrap_err();
        assert_eq!(refused.code(), "INVALID_INPUT");
        s.append(result("d", false), None).unwrap();
        // a call id stored before the batch, repeated by a later response: the first row holds
        s.append(use_(&["e"]), None).unwrap();
        assert_eq!(s.messages().unwrap().len(), 8, "a read flushes the batch");
        s.append(use_(&["e", "f"]), None).unwrap();
        s.append(result("e", false), None).unwrap();
        s.append(result("f", false), None).unwrap();
        let messages = s.messages().unwrap().len();
        drop(s);
        drop(store);
        let reopened = Store::open(Some(&path), StoreOptions::default()).unwrap();
        (dir, messages, journal(&reopened, "s"))
    };
    let (_a, batched_messages, batched) = run(threadline::Durability::Process);
    let (_b, alone_messages, alone) = run(threadline::Durability::Power);
    assert_eq!(batched, alone);
    assert_eq!(batched_messages, alone_messages);
    let ids: Vec<_> = batched.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["a", "b", "c", "e", "f"],
        "no row of the refused request"
    );
    let states: Vec<_> = batched
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["completed", "failed", "completed", "completed", "completed"]
    );
    assert_eq!(
        batched[3]["callSeq"],
        json!(8),
        "the first request of e holds its row"
    );
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
