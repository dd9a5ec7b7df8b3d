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

/// The test's own connection to the server of the store at `path` (a `postgres://` URL with
/// `schema=`), the store's schema on its search path, and that schema's name.
fn raw(path: &str) -> (postgres::Client, String) {
    let (base, schema) = path.rsplit_once("schema=").unwrap();
    let schema = schema.split('&').next().unwrap().to_string();
    let base = base.trim_end_matches(['?', '&']);
    let mut c = postgres::Client::connect(base, postgres::NoTls).unwrap();
    c.batch_execute(&format!("SET search_path TO {schema}"))
        .unwrap();
    (c, schema)
}

/// The payloads of `schema`'s notifications a raw `LISTEN` connection has heard so far. A NOTIFY
/// of its own, sent now, marks the end: a channel delivers in commit order, so whatever the
/// store's writes committed before it comes first (no wait, no timeout).
fn heard(c: &mut postgres::Client, schema: &str) -> Vec<String> {
    use postgres::fallible_iterator::FallibleIterator;
    c.batch_execute("NOTIFY threadline, 'end of test'").unwrap();
    let mut out = Vec::new();
    let mut notes = c.notifications();
    let mut it = notes.blocking_iter();
    while let Some(n) = it.next().unwrap() {
        if n.payload() == "end of test" {
            break;
        }
        if n.payload().split(' ').next() == Some(schema) {
            out.push(n.payload().to_string());
        }
    }
    out
}

/// Session `id`'s number (what notifications name it by).
fn num_of(c: &mut postgres::Client, id: &str) -> i64 {
    c.query_one("SELECT num FROM sessions WHERE id = $1", &[&id])
        .unwrap()
        .get(0)
}

/// The server processes registered as listeners of the store.
fn registered(c: &mut postgres::Client) -> Vec<i32> {
    c.query(
        "SELECT backend_pid FROM listeners ORDER BY backend_pid",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[test]
fn without_a_registered_listener_writes_send_no_notify() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "listen_none") {
        if engine == "sqlite" {
            continue; // no NOTIFY there
        }
        let store = open(&path);
        let a = store.create_session(SessionOptions::default()).unwrap();
        let gone = store.create_session(SessionOptions::default()).unwrap();
        // A connection that listens without registering: what writers send when no watch
        // is registered, it hears.
        let (mut c, schema) = raw(&path);
        c.batch_execute("LISTEN threadline").unwrap();

        a.append(json!("one"), None).unwrap();
        a.append_many(vec![json!("two"), json!("three")]).unwrap();
        a.set_status(Status::Completed).unwrap();
        store.delete_session(gone.id()).unwrap();
        assert_eq!(heard(&mut c, &schema), Vec::<String>::new());

        let num = num_of(&mut c, a.id());
        // Once a listener is registered, the same writes notify (the raw connection hears them
        // too: one channel).
        let listener = a.listener().unwrap().unwrap();
        assert_eq!(registered(&mut c).len(), 1);
        a.append(json!("four"), None).unwrap();
        a.set_status(Status::Active).unwrap();
        assert_eq!(
            heard(&mut c, &schema),
            vec![format!("{schema} {num} 4"), format!("{schema} {num} 4")]
        );
        let mut woke = Vec::new();
        while woke.len() < 2 {
            woke.extend(counts(listener.wait().unwrap()));
        }
        assert_eq!(woke, vec![Some(4), Some(4)]);

        // A cancelled listener takes its row away: writes are silent again.
        listener.cancel();
        assert_eq!(listener.wait().unwrap(), Wake::Cancelled);
        assert_eq!(registered(&mut c), Vec::<i32>::new());
        a.append(json!("five"), None).unwrap();
        assert_eq!(heard(&mut c, &schema), Vec::<String>::new());
    }
}

#[test]
fn a_listener_registered_while_writers_run_hears_every_commit_its_first_read_missed() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "listen_race") {
        if engine == "sqlite" {
            continue;
        }
        const WRITERS: usize = 4;
        const APPENDS: u64 = 150;
        let started = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (path, started) = (path.clone(), started.clone());
                let store = open(&path);
                let s = store.create_session(SessionOptions::default()).unwrap();
                let id = s.id().to_string();
                let t = std::thread::spawn(move || {
                    for i in 0..APPENDS {
                        s.append(json!(format!("m{i}")), None).unwrap();
                        started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    drop(store);
                });
                (id, t)
            })
            .collect();
        // Registered while every writer is mid-run.
        while started.load(std::sync::atomic::Ordering::SeqCst) < WRITERS as u64 * 10 {
            std::thread::yield_now();
        }
        let watcher = open(&path);
        let listener = watcher.listener().unwrap().unwrap();
        // The catch-up read a watch makes once its listener is registered.
        let first: Vec<u64> = writers
            .iter()
            .map(|(id, _)| {
                let s = watcher.open_session(id, None).unwrap();
                s.envelopes(0, None).unwrap().len() as u64
            })
            .collect();
        let (mut c, schema) = raw(&path);
        let nums: Vec<i64> = writers.iter().map(|(id, _)| num_of(&mut c, id)).collect();
        for (_, t) in writers {
            t.join().unwrap();
        }
        // The end mark: a notification of this store for no session, after every write.
        c.batch_execute(&format!("NOTIFY threadline, '{schema} -1 0'"))
            .unwrap();
        let mut got: Vec<Vec<u64>> = vec![Vec::new(); WRITERS];
        'wait: loop {
            match listener.wait().unwrap() {
                Wake::Changes(changes) => {
                    for ch in changes {
                        if ch.num == -1 {
                            break 'wait;
                        }
                        let w = nums.iter().position(|n| *n == ch.num).unwrap();
                        got[w].push(ch.records.unwrap());
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        for w in 0..WRITERS {
            // Every record the first read did not see was announced, in order.
            let missed: Vec<u64> = (first[w] + 1..=APPENDS).collect();
            let announced: Vec<u64> = got[w].iter().copied().filter(|n| *n > first[w]).collect();
            assert_eq!(
                announced, missed,
                "writer {w} (first read saw {})",
                first[w]
            );
        }
    }
}

#[test]
fn a_listener_gone_without_cancel_leaves_a_row_the_next_registration_removes() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "listen_dead") {
        if engine == "sqlite" {
            continue;
        }
        let store = open(&path);
        let a = store.create_session(SessionOptions::default()).unwrap();
        let (mut c, schema) = raw(&path);
        let dead = a.listener().unwrap().unwrap();
        let pid = registered(&mut c);
        assert_eq!(pid.len(), 1);
        // Dropped without cancel: the connection closes, as a killed process's would.
        drop(dead);
        loop {
            let alive: bool = c
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)",
                    &[&pid[0]],
                )
                .unwrap()
                .get(0);
            if !alive {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(registered(&mut c), pid, "its row is left");
        // Until then writers keep notifying: a cost, never a loss.
        c.batch_execute("LISTEN threadline").unwrap();
        a.append(json!("one"), None).unwrap();
        assert_eq!(heard(&mut c, &schema).len(), 1);

        let next = a.listener().unwrap().unwrap();
        let now = registered(&mut c);
        assert_eq!(now.len(), 1, "the dead one's row was removed");
        assert_ne!(now, pid);
        a.append(json!("two"), None).unwrap();
        assert_eq!(counts(next.wait().unwrap()), vec![Some(2)]);
    }
}
