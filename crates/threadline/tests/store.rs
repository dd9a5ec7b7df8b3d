//! The core crate through its public API: storage, reopening, blobs, errors.

use serde_json::{json, Value};
use threadline::{Error, SessionFilter, SessionOptions, Status, Store, StoreOptions};

fn temp_store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").to_string_lossy().into_owned();
    (dir, path)
}

fn open(path: &str) -> Store {
    Store::open(Some(path), StoreOptions::default()).unwrap()
}

#[test]
fn records_come_back_exactly_after_reopening() {
    let (_dir, path) = temp_store();
    let text = r#"{"zeta":1,"role":"assistant","content":[{"type":"text","text":"→ 你好 😀 \u0000 end","citations":null},
        {"type":"thinking","thinking":"hmm","signature":"c2ln"},{"type":"future","payload":{"b":1,"a":2}}],
        "id":"msg_1","usage":{"input_tokens":3,"output_tokens":4,"service_tier":"standard"},
        "numbers":[1e-7,9007199254740993,1.0,-0.5,12345678901234567890123]}"#;
    let given = threadline::parse(text).unwrap();
    let id = {
        let store = open(&path);
        let s = store.create_session(SessionOptions::default()).unwrap();
        s.append(given.clone(), None).unwrap();
        s.id().to_string()
    };
    let store = open(&path);
    let s = store.open_session(&id, None).unwrap();
    let back = s.messages().unwrap();
    assert_eq!(back, vec![given.clone()]);
    // Key order and number text are kept exactly: the same bytes go back to the provider.
    assert_eq!(back[0].to_string(), given.to_string());
    assert!(back[0].to_string().contains("9007199254740993"));
    assert!(back[0].to_string().contains("1.0,"));
}

#[test]
fn envelopes_get_defaults_in_order_and_chain_parents() {
    let store = Store::memory().unwrap();
    let s = store
        .create_session(SessionOptions {
            id: Some("s1".into()),
            ..Default::default()
        })
        .unwrap();
    let a = s.append(json!("hello"), None).unwrap();
    let b = s
        .append(json!({"role": "assistant", "content": "hi"}), None)
        .unwrap();
    let keys: Vec<&str> = a.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "type",
            "uuid",
            "parentUuid",
            "sessionId",
            "seq",
            "timestamp",
            "message"
        ]
    );
    assert_eq!(a["parentUuid"], Value::Null);
    assert_eq!(b["parentUuid"], a["uuid"]);
    assert_eq!(b["seq"], 1);
    assert_eq!(b["sessionId"], "s1");
    assert_eq!(
        b["message"]["content"],
        json!([{"type": "text", "text": "hi"}])
    );
    let envs = s.envelopes(0, None).unwrap();
    assert_eq!(envs, vec![Value::Object(a), Value::Object(b)]);
}

#[test]
fn long_strings_are_stored_once() {
    let (_dir, path) = temp_store();
    let big = "output line ✓\n".repeat(4000);
    {
        let store = open(&path);
        let s = store.create_session(SessionOptions::default()).unwrap();
        for i in 0..3 {
            let call = json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("t{i}"), "name": "Bash", "input": {}}]});
            s.append(call, None).unwrap();
            let m = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{i}"), "content": big}]});
            s.append(m, None).unwrap();
        }
        let back = s.messages().unwrap();
        assert_eq!(back[5]["content"][0]["content"], Value::String(big.clone()));
        store.close().unwrap();
    }
    let db = rusqlite::Connection::open(&path).unwrap();
    let blobs: i64 = db
        .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(blobs, 1);
}

#[test]
fn append_many_is_all_or_nothing() {
    let store = Store::memory().unwrap();
    let s = store.create_session(SessionOptions::default()).unwrap();
    s.append(json!("first"), None).unwrap();
    let err = s
        .append_many(vec![
            json!("ok"),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x"}]}),
        ])
        .unwrap_err();
    assert_eq!(err.code(), "INVALID_INPUT");
    assert_eq!(err.message(), "appendMany: [1].content[0].input: required");
    assert_eq!(s.envelopes(0, None).unwrap().len(), 1);
    s.append(json!("after"), None).unwrap();
    assert_eq!(s.envelopes(0, None).unwrap()[1]["seq"], 1);
}

#[test]
fn the_same_uuid_cannot_be_stored_twice_in_a_session() {
    let store = Store::memory().unwrap();
    let s = store.create_session(SessionOptions::default()).unwrap();
    s.append(
        json!({"uuid": "u1", "message": {"role": "user", "content": "a"}}),
        None,
    )
    .unwrap();
    let err = s
        .append(
            json!({"uuid": "u1", "message": {"role": "user", "content": "b"}}),
            None,
        )
        .unwrap_err();
    assert_eq!(
        err.message(),
        "append: uuid: 'u1' is already used by record seq 0, with other content"
    );
}

#[test]
fn appending_the_same_record_again_is_a_no_op_that_returns_it() {
    let store = Store::memory().unwrap();
    let s = store.create_session(SessionOptions::default()).unwrap();
    let record = json!({"uuid": "u1", "requestId": "r1", "message": {"role": "user", "content": "retry me"}});
    let first = s.append(record.clone(), None).unwrap();
    s.append(json!("in between"), None).unwrap();
    let again = s.append(record, None).unwrap();
    assert_eq!(again, first);
    assert_eq!(s.envelopes(0, None).unwrap().len(), 2);
    // The whole envelope as returned, timestamp and seq included, is the same record too.
    assert_eq!(s.append(Value::Object(first.clone()), None).unwrap(), first);
    assert_eq!(s.append(json!("after"), None).unwrap()["seq"], 2);
}

#[test]
fn files_that_are_not_stores_are_refused_untouched() {
    let (dir, _) = temp_store();
    let garbage = dir.path().join("garbage.db");
    let bytes: Vec<u8> = (0..8192u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&garbage, &bytes).unwrap();
    let err = Store::open(Some(garbage.to_str().unwrap()), StoreOptions::default())
        .err()
        .unwrap();
    assert_eq!(err.code(), "STORE_CORRUPT");
    assert_eq!(std::fs::read(&garbage).unwrap(), bytes);

    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    let err = Store::open(Some(other.to_str().unwrap()), StoreOptions::default())
        .err()
        .unwrap();
    assert_eq!(err.code(), "STORE_CORRUPT");
}

#[test]
fn a_store_from_a_newer_schema_is_refused() {
    let (_dir, path) = temp_store();
    open(&path).close().unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let err = Store::open(Some(&path), StoreOptions::default())
        .err()
        .unwrap();
    assert_eq!(err.code(), "STORE_VERSION");
}

#[test]
fn closed_stores_and_sessions_say_closed() {
    let store = Store::memory().unwrap();
    let s = store.create_session(SessionOptions::default()).unwrap();
    s.close();
    assert_eq!(s.append(json!("x"), None).unwrap_err().code(), "CLOSED");
    let s2 = store.create_session(SessionOptions::default()).unwrap();
    store.close().unwrap();
    assert!(matches!(s2.messages(), Err(Error::Closed(_))));
    assert_eq!(
        store
            .list_sessions(&SessionFilter::default())
            .unwrap_err()
            .code(),
        "CLOSED"
    );
}

#[test]
fn sessions_are_listed_most_recent_first_and_deleted_with_their_blobs() {
    let (_dir, path) = temp_store();
    let store = open(&path);
    let opts = |id: &str, project: &str| SessionOptions {
        id: Some(id.into()),
        project: Some(project.into()),
        ..Default::default()
    };
    let a = store.create_session(opts("a", "p1")).unwrap();
    let b = store.create_session(opts("b", "p2")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    a.append(
        json!({"role": "user", "content": [{"type": "text", "text": "x".repeat(20_000)}]}),
        None,
    )
    .unwrap();
    b.set_status(Status::Completed).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    a.append(json!("later"), None).unwrap();
    let ids: Vec<String> = store
        .list_sessions(&SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(ids, ["a", "b"]);
    let only = store
        .list_sessions(&SessionFilter {
            status: Some(Status::Completed),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].id, "b");
    store.delete_session("a").unwrap();
    assert_eq!(
        store.open_session("a", None).err().unwrap().code(),
        "NOT_FOUND"
    );
    store.close().unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    let blobs: i64 = db
        .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(blobs, 0);
}

#[test]
fn a_new_store_file_is_private_to_its_owner() {
    let (_dir, path) = temp_store();
    open(&path);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

#[test]
fn prompt_keys_must_match() {
    let store = Store::memory().unwrap();
    store
        .create_session(SessionOptions {
            id: Some("s".into()),
            prompt_key: Some("v1".into()),
            ..Default::default()
        })
        .unwrap();
    assert!(store.open_session("s", Some("v1")).is_ok());
    assert_eq!(
        store.open_session("s", Some("v2")).err().unwrap().code(),
        "PROMPT_MISMATCH"
    );
}

/// The bound docs/recovery.md gives for the -wal file.
const WAL_BOUND: u64 = 32 << 20;

fn wal_bytes(path: &str) -> u64 {
    std::fs::metadata(format!("{path}-wal")).map_or(0, |m| m.len())
}

#[test]
fn the_write_ahead_log_stays_bounded_under_a_steady_stream_of_appends() {
    let (_dir, path) = temp_store();
    let store = open(&path);
    let s = store.create_session(SessionOptions::default()).unwrap();
    // Another handle on the store reads the session again and again, from another thread: a
    // reader still on the log when it is due to start over must not keep it from doing so.
    let reader = open(&path);
    let id = s.id().to_string();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_reading = stop.clone();
    let reading = std::thread::spawn(move || {
        let r = reader.open_session(&id, None).unwrap();
        let mut reads = 0;
        while !stop_reading.load(std::sync::atomic::Ordering::Relaxed) {
            r.messages().unwrap();
            reads += 1;
        }
        reads
    });
    let text = "checkpoint me ".repeat(150);
    let n = 8000;
    let mut max = 0;
    for i in 0..n {
        s.append(
            json!({"role": "user", "content": [{"type": "text", "text": format!("{i} {text}")}]}),
            None,
        )
        .unwrap();
        max = max.max(wal_bytes(&path));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reading.join().unwrap() > 0);
    // Each append writes 4 or 5 pages of 4 KiB to the log: never started over, it would hold
    // about 140 MiB by now. It starts over from about 16 MiB on.
    assert!(max < WAL_BOUND, "the -wal file grew to {max} bytes");
    assert_eq!(s.messages().unwrap().len(), n);
}

#[test]
fn a_store_left_with_a_long_log_is_checkpointed_and_the_log_emptied_when_opened() {
    let (_dir, path) = temp_store();
    let text = "left in the log ".repeat(150);
    let first = open(&path);
    let s = first.create_session(SessionOptions::default()).unwrap();
    for i in 0..1500 {
        s.append(json!(format!("{i} {text}")), None).unwrap();
    }
    let id = s.id().to_string();
    drop(s);
    first.close().unwrap();
    // Another process that wrote a long log and was killed: a connection of its own (the stores
    // of one process share theirs), with no checkpoints, never closed.
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .execute_batch(
            "PRAGMA wal_autocheckpoint = 0; CREATE TABLE scratch(x BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
             INSERT INTO scratch SELECT randomblob(4000) FROM n; DROP TABLE scratch;",
        )
        .unwrap();
    std::mem::forget(other);
    let left = wal_bytes(&path);
    assert!(left > 4 << 20, "the log holds {left} bytes");
    let store = open(&path);
    let t0 = std::time::Instant::now();
    while wal_bytes(&path) > 0 && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(wal_bytes(&path), 0, "the log was emptied after the open");
    let s = store.open_session(&id, None).unwrap();
    let messages = s.messages().unwrap();
    assert_eq!(messages.len(), 1500);
    assert_eq!(
        messages[1499]["content"][0]["text"],
        json!(format!("1499 {text}"))
    );
}

/// Connections creating the same new store at the same moment (here threads; the Node suite does
/// it with processes) all open it: one makes the schema, the others wait for it, and the switch to
/// WAL mode, which SQLite refuses at once while another connection holds the file, is retried.
#[test]
fn connections_creating_one_new_store_at_once_all_open_it() {
    for _ in 0..20 {
        let (_dir, path) = temp_store();
        let go = std::sync::Arc::new(std::sync::Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (path, go) = (path.clone(), go.clone());
                std::thread::spawn(move || {
                    go.wait();
                    let store = Store::open(Some(&path), StoreOptions::default())?;
                    let s = store.create_session(SessionOptions {
                        id: Some(format!("t{i}")),
                        ..SessionOptions::default()
                    })?;
                    s.append(json!("hi"), None)?;
                    store.close()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
        assert_eq!(
            store
                .list_sessions(&SessionFilter::default())
                .unwrap()
                .len(),
            8
        );
    }
}

#[test]
fn two_handles_on_one_session_append_in_turn_and_the_rows_stay_true() {
    let (_dir, path) = temp_store();
    let (a_id, last_id) = {
        let store = open(&path);
        let a = store.create_session(SessionOptions::default()).unwrap();
        let last = store.create_session(SessionOptions::default()).unwrap();
        let b = store.open_session(a.id(), None).unwrap();
        // Appends in one batch (storage/batch.rs) update the session's row at the commit: a
        // handle that reads the tail before then compares it with the count the commit will
        // write, not with the row's old one (which would look like lost records).
        for i in 0..10 {
            let h = if i % 2 == 0 { &a } else { &b };
            let env = h.append(json!(format!("prompt {i}")), None).unwrap();
            assert_eq!(env["seq"], json!(i));
        }
        last.append(json!("the most recent write"), None).unwrap();
        let report = store.verify(&Default::default()).unwrap();
        assert!(report.ok, "{report:?}");
        assert_eq!(report.records, 11);
        let listed = store.list_sessions(&SessionFilter::default()).unwrap();
        let ids: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [last.id(), a.id()]);
        (a.id().to_string(), last.id().to_string())
    };
    let store = open(&path);
    let a = store.open_session(&a_id, None).unwrap();
    assert_eq!(a.envelopes(0, None).unwrap().len(), 10);
    let listed = store.list_sessions(&SessionFilter::default()).unwrap();
    assert_eq!(listed[0].id, last_id);
    assert!(store.verify(&Default::default()).unwrap().ok);
}
