//! Live watch's wake-up: on PostgreSQL a listener hears each commit to its session (records,
//! status, deletion) from another connection, only its own session's, and a cancel from another
//! thread ends a wait; on SQLite there is no listener (the Node binding watches the file).

mod common;

use serde_json::json;
use threadline::{SessionOptions, Status, Store, StoreOptions, Wake};

fn open(path: &str) -> Store {
    Store::open(Some(path), StoreOptions::default()).unwrap()
}

/// The records counts a wake reports (None: deleted); panics on anything but changes.
fn counts(w: Wake) -> Vec<Option<u64>> {
    match w {
        Wake::Changes(c) => c.iter().map(|c| c.records).collect(),
        other => panic!("expected changes, got {other:?}"),
    }
}

#[test]
fn a_listener_hears_its_sessions_commits_from_another_connection() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "listen_commits") {
        let writer = open(&path);
        let a = writer.create_session(SessionOptions::default()).unwrap();
        let b = writer.create_session(SessionOptions::default()).unwrap();
        let watcher = open(&path);
        let listener = watcher
            .open_session(a.id(), None)
            .unwrap()
            .listener()
            .unwrap();
        if engine == "sqlite" {
            assert!(listener.is_none(), "SQLite has no listener");
            continue;
        }
        let listener = listener.expect("a listener on PostgreSQL");

        a.append(json!("one"), None).unwrap();
        assert_eq!(counts(listener.wait().unwrap()), vec![Some(1)], "{engine}");

        // Another session's commit is not this listener's: the next wake is a's second record.
        b.append(json!("elsewhere"), None).unwrap();
        a.append(json!("two"), None).unwrap();
        assert_eq!(counts(listener.wait().unwrap()), vec![Some(2)], "{engine}");

        a.set_status(Status::Completed).unwrap();
        assert_eq!(counts(listener.wait().unwrap()), vec![Some(2)], "{engine}");

        writer.delete_session(a.id()).unwrap();
        assert_eq!(counts(listener.wait().unwrap()), vec![None], "{engine}");
    }
}

#[test]
fn a_store_listener_hears_every_session() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "listen_store") {
        let watcher = open(&path);
        let listener = watcher.listener().unwrap();
        if engine == "sqlite" {
            assert!(listener.is_none(), "SQLite has no listener");
            continue;
        }
        let listener = listener.expect("a listener on PostgreSQL");
        let writer = open(&path);
        let a = writer.create_session(SessionOptions::default()).unwrap();
        assert_eq!(
            counts(listener.wait().unwrap()),
            vec![Some(0)],
            "{engine}: created"
        );
        a.append(json!("one"), None).unwrap();
        assert_eq!(counts(listener.wait().unwrap()), vec![Some(1)], "{engine}");
    }
}

#[test]
fn a_cancel_from_another_thread_ends_a_wait_and_every_later_one() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "listen_cancel") {
        let store = open(&path);
        let s = store.create_session(SessionOptions::default()).unwrap();
        let Some(listener) = s.listener().unwrap() else {
            assert_eq!(engine, "sqlite");
            continue;
        };
        let listener = std::sync::Arc::new(listener);
        let waiting = {
            let l = listener.clone();
            std::thread::spawn(move || l.wait().unwrap())
        };
        listener.cancel();
        assert_eq!(waiting.join().unwrap(), Wake::Cancelled, "{engine}");
        // Cancelled for good: a commit after it does not wake it.
        s.append(json!("after"), None).unwrap();
        assert_eq!(listener.wait().unwrap(), Wake::Cancelled, "{engine}");
    }
}
