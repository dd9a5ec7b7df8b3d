//! Sessions changed after creation (`update`), context windows of known models, and the
//! store's upkeep: `stats`, `vacuum`, `backup`, on both engines.

mod common;

use serde_json::{json, Value};
use threadline::{Error, SessionFilter, SessionOptions, SessionUpdate, Store, StoreOptions};

fn open(path: &str) -> Store {
    Store::open(Some(path), StoreOptions::default()).unwrap()
}

fn update(v: Value) -> SessionUpdate {
    SessionUpdate::from_json(v).unwrap()
}

#[test]
fn update_changes_the_session_and_another_handle_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "update") {
        let store = open(&path);
        let s = store
            .create_session(SessionOptions {
                id: Some("u".into()),
                title: Some("first".into()),
                metadata: Some(json!({"a": 1, "b": 2}).as_object().unwrap().clone()),
                ..Default::default()
            })
            .unwrap();
        let info = s
            .update(update(json!({"title": "second", "metadata": {"c": 3},
                "contextWindow": 1000, "model": "m-1"})))
            .unwrap();
        assert_eq!(info.title.as_deref(), Some("second"), "{engine}");
        // metadata is replaced whole, not merged
        assert_eq!(info.metadata, json!({"c": 3}).as_object().cloned());
        assert_eq!(info.context_window, Some(1000));
        assert_eq!(info.model.as_deref(), Some("m-1"));
        assert_eq!(s.info().unwrap(), info);

        let other = open(&path);
        let listed = other.list_sessions(&SessionFilter::default()).unwrap();
        assert_eq!(listed[0].title.as_deref(), Some("second"), "{engine}");
        assert_eq!(listed[0].context_window, Some(1000));

        // null clears; a field not given is kept
        let info = s
            .update(update(json!({"title": null, "contextWindow": null})))
            .unwrap();
        assert_eq!(info.title, None);
        assert_eq!(info.context_window, None);
        assert_eq!(info.model.as_deref(), Some("m-1"));
        assert_eq!(info.metadata, json!({"c": 3}).as_object().cloned());
        let back = other.open_session("u", None).unwrap().info().unwrap();
        assert_eq!(back.title, None, "{engine}");
    }
}

#[test]
fn update_refuses_bad_values_naming_the_field_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "update_bad") {
        let store = open(&path);
        let s = store
            .create_session(SessionOptions {
                title: Some("kept".into()),
                context_window: Some(500),
                ..Default::default()
            })
            .unwrap();
        let before = s.info().unwrap();
        for (input, says) in [
            (
                json!({"contextWindow": 0}),
                "contextWindow: expected a positive integer",
            ),
            (
                json!({"contextWindow": -5}),
                "contextWindow: expected a positive integer",
            ),
            (
                json!({"contextWindow": 1.5}),
                "contextWindow: expected a positive integer",
            ),
            (
                json!({"contextWindow": "big"}),
                "contextWindow: expected a positive integer",
            ),
            (json!({"title": 7}), "title: expected a string or null"),
            (
                json!({"metadata": [1]}),
                "metadata: expected an object or null",
            ),
            (
                json!({"title": "x", "colour": "red"}),
                "colour: unknown field",
            ),
        ] {
            let e = SessionUpdate::from_json(input.clone()).unwrap_err();
            assert_eq!(e.code(), "INVALID_INPUT", "{engine} {input}");
            assert!(
                e.message().contains(says),
                "{engine} {input}: {}",
                e.message()
            );
        }
        let e = s
            .update(SessionUpdate {
                title: Some(Some("changed".into())),
                context_window: Some(Some(0)),
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT");
        assert!(
            e.message().starts_with("update: contextWindow:"),
            "{}",
            e.message()
        );
        assert_eq!(s.info().unwrap(), before, "{engine}");
    }
}

#[test]
fn update_of_a_deleted_session_or_on_a_closed_store_fails_with_the_usual_codes() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "update_gone") {
        let store = open(&path);
        let s = store.create_session(SessionOptions::default()).unwrap();
        let id = s.id().to_string();
        let other = open(&path);
        s.close();
        other.delete_session(&id).unwrap();
        let s = store.create_session(SessionOptions::default()).unwrap();
        store.close().unwrap();
        let e = s.update(update(json!({"title": "t"}))).unwrap_err();
        assert!(matches!(e, Error::Closed(_)), "{engine}: {e:?}");
        let store = open(&path);
        let e = store.open_session(&id, None).err().unwrap();
        assert_eq!(e.code(), "NOT_FOUND", "{engine}");
    }
}

#[test]
fn context_fill_knows_the_window_of_current_models() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "windows") {
        let store = open(&path);
        let fill = |model: Option<&str>, window: Option<u64>, reply_model: Option<&str>| {
            let s = store
                .create_session(SessionOptions {
                    model: model.map(String::from),
                    context_window: window,
                    ..Default::default()
                })
                .unwrap();
            s.append(json!("hi"), None).unwrap();
            let mut reply = json!({"role": "assistant", "content": [{"type": "text", "text": "hello"}],
                "usage": {"input_tokens": 1000, "output_tokens": 0}});
            if let Some(m) = reply_model {
                reply["model"] = json!(m);
            }
            s.append(reply, None).unwrap();
            s.context_fill().unwrap()
        };
        let f = fill(Some("claude-sonnet-4-5-20250929"), None, None);
        assert_eq!(f.context_window, Some(200_000), "{engine}");
        assert_eq!(f.fraction, Some(f.used_tokens as f64 / 200_000.0));
        // no model on the session: the latest assistant message's
        assert_eq!(
            fill(None, None, Some("gpt-4o-2024-08-06")).context_window,
            Some(128_000)
        );
        assert_eq!(
            fill(None, None, Some("gpt-5")).context_window,
            Some(400_000)
        );
        // a window given always wins
        assert_eq!(
            fill(Some("gpt-4.1"), Some(5000), None).context_window,
            Some(5000)
        );
        // unknown models: no window, no fraction
        let f = fill(Some("my-local-model"), None, None);
        assert_eq!((f.context_window, f.fraction), (None, None));
        assert_eq!(fill(None, None, None).context_window, None);
        assert_eq!(
            threadline::known_context_window("gpt-4.1-mini"),
            Some(1_047_576)
        );
    }
}

/// Two sessions with blobs, a tool call and its result, a fork.
fn fill_store(store: &Store) {
    let a = store
        .create_session(SessionOptions {
            id: Some("a".into()),
            title: Some("A".into()),
            metadata: Some(json!({"k": [1, 2]}).as_object().unwrap().clone()),
            ..Default::default()
        })
        .unwrap();
    a.append(json!("hello"), None).unwrap();
    let long = "ζ".repeat(20_000);
    let env = a
        .append(
            json!({"role": "assistant", "content": [{"type": "text", "text": long},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}],
                "usage": {"input_tokens": 10, "output_tokens": 3}}),
            None,
        )
        .unwrap();
    a.append(
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
        None,
    )
    .unwrap();
    let b = store
        .create_session(SessionOptions {
            id: Some("b".into()),
            ..Default::default()
        })
        .unwrap();
    for i in 0..50 {
        b.append(json!(format!("message {i}")), None).unwrap();
    }
    store
        .fork_session("a", env["uuid"].as_str(), Some("fork".into()))
        .unwrap();
}

fn everything(store: &Store) -> Vec<(threadline::SessionInfo, Vec<Value>)> {
    store
        .list_sessions(&SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|info| {
            let s = store.open_session(&info.id, None).unwrap();
            let envs = s.envelopes(0, None).unwrap();
            (info, envs)
        })
        .collect()
}

#[test]
fn a_backup_opens_as_a_store_holding_every_session_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "backup") {
        let store = open(&path);
        fill_store(&store);
        let dest = dir.path().join(format!("copy-{engine}.db"));
        let dest = dest.to_string_lossy().into_owned();
        let report = store.backup(&dest).unwrap();
        assert_eq!(report.path, dest);
        assert_eq!(report.sessions, 3, "{engine}");
        let want = everything(&store);
        let records: usize = want.iter().map(|(_, e)| e.len()).sum();
        assert_eq!(report.records as usize, records, "{engine}");
        assert_eq!(report.bytes, std::fs::metadata(&dest).unwrap().len());

        let copy = open(&dest);
        let got = everything(&copy);
        assert_eq!(got.len(), want.len(), "{engine}");
        for ((gi, ge), (wi, we)) in got.iter().zip(&want) {
            assert_eq!(gi, wi, "{engine}");
            assert_eq!(ge.len(), we.len(), "{engine} {}", wi.id);
            for (g, w) in ge.iter().zip(we) {
                // compared as text: the same keys in the same order, the same number text
                let short = |v: &Value| v.to_string().chars().take(400).collect::<String>();
                let (g_text, w_text) = (g.to_string(), w.to_string());
                assert!(
                    g_text == w_text,
                    "{engine} {}:\n{}\n{}",
                    wi.id,
                    short(g),
                    short(w)
                );
            }
        }
        assert!(copy.verify(&Default::default()).unwrap().ok, "{engine}");
        // the copy is held by no one: it takes writes
        let a = copy.open_session("a", None).unwrap();
        a.append(json!("after the backup"), None).unwrap();
        assert_eq!(a.tool_calls(None).unwrap().len(), 1, "{engine}");
        // nothing but the copy was left in the directory
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn a_backup_never_replaces_a_file() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "backup_exists") {
        let store = open(&path);
        store.create_session(SessionOptions::default()).unwrap();
        let dest = dir.path().join(format!("there-{engine}.db"));
        std::fs::write(&dest, b"mine").unwrap();
        let e = store.backup(&dest.to_string_lossy()).unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT", "{engine}");
        assert!(e.message().contains("already exists"), "{}", e.message());
        assert!(
            e.message().contains(&*dest.to_string_lossy()),
            "{}",
            e.message()
        );
        assert_eq!(std::fs::read(&dest).unwrap(), b"mine");
        let missing = dir.path().join("no-such-dir").join("x.db");
        let e = store.backup(&missing.to_string_lossy()).unwrap_err();
        assert_eq!(e.code(), "STORE_IO", "{engine}");
    }
}

#[test]
fn stats_report_the_size_and_vacuum_gives_free_pages_back() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "vacuum") {
        let store = open(&path);
        let s = store.create_session(SessionOptions::default()).unwrap();
        for i in 0..200 {
            s.append(json!(format!("{i} {}", "text ".repeat(400))), None)
                .unwrap();
        }
        let id = s.id().to_string();
        s.close();
        let stats = store.stats().unwrap();
        assert_eq!(stats.engine, engine);
        assert!(stats.bytes > 200 * 1000, "{engine}: {stats:?}");
        store.delete_session(&id).unwrap();
        let after_delete = store.stats().unwrap();
        let report = store.vacuum().unwrap();
        let after = store.stats().unwrap();
        assert_eq!(report.bytes_after, after.bytes);
        if engine == "sqlite" {
            assert!(after_delete.free_bytes > 200 * 1000, "{after_delete:?}");
            assert_eq!(
                after_delete.free_bytes,
                after_delete.page_size.unwrap() * after_delete.free_pages.unwrap()
            );
            assert_eq!(report.bytes_before, after_delete.bytes);
            assert!(report.bytes_after < report.bytes_before, "{report:?}");
            assert_eq!(after.free_bytes, 0);
        } else {
            assert_eq!(after.free_bytes, 0);
            assert_eq!(after.page_size, None);
        }
        let ro = Store::open(
            Some(&path),
            StoreOptions {
                readonly: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(ro.vacuum().unwrap_err().code(), "STORE_IO", "{engine}");
    }
}
