//! The same operations on both engines: a SQLite file and a PostgreSQL schema (when the suite
//! has a server; see `common::engines`) give the same results, and a session moves from one to
//! the other and back with its snapshot unchanged.

mod common;

use serde_json::{json, Value};
use threadline::{
    ContextOptions, Error, SessionFilter, SessionOptions, Status, Store, StoreOptions, Target,
};

fn open(path: &str) -> Store {
    Store::open(Some(path), StoreOptions::default()).unwrap()
}

/// Everything a user reads back of a session, as one value to compare across engines.
fn readout(store: &Store, id: &str) -> Value {
    let s = store.open_session(id, None).unwrap();
    let mut contexts = Vec::new();
    for target in [
        Target::Anthropic,
        Target::OpenAiChat,
        Target::OpenAiResponses,
    ] {
        let c = s
            .build_context(&ContextOptions {
                target,
                max_tokens: None,
                max_messages: None,
                system: None,
                tool_result_preview_chars: None,
                reasoning: Default::default(),
                model: None,
            })
            .unwrap();
        contexts.push(serde_json::to_value(&c.messages).unwrap());
    }
    let mut info = serde_json::to_value(s.info().unwrap()).unwrap();
    // Ids (uuid v7) and times are each run's own.
    for key in ["id", "createdAt", "updatedAt"] {
        info.as_object_mut().unwrap().remove(key);
    }
    json!({
        "messages": s.messages().unwrap(),
        "allMessages": s.all_messages().unwrap(),
        "envelopes": s.envelopes(0, None).unwrap().len(),
        "turns": serde_json::to_value(s.turns().unwrap()).unwrap(),
        "tokens": serde_json::to_value(s.token_tracker().unwrap()).unwrap(),
        "toolCalls": s.tool_calls(None).unwrap().len(),
        "repairs": serde_json::to_value(s.pending_repairs().unwrap()).unwrap(),
        "info": info,
        "contexts": contexts,
        "verify": serde_json::to_value(s.verify().unwrap()).unwrap(),
    })
}

#[test]
fn real_sessions_read_back_the_same_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen: Vec<(&str, Vec<Value>)> = Vec::new();
    for (engine, path) in common::engines(dir.path(), "readback") {
        let mut outs = Vec::new();
        for name in ["short.jsonl", "tool_heavy.jsonl", "compacted-session.jsonl"] {
            let id = {
                let store = open(&path);
                let s = store
                    .create_session(SessionOptions {
                        project: Some("p".into()),
                        ..Default::default()
                    })
                    .unwrap();
                s.restore_messages(common::fixture_lines(name)).unwrap();
                s.id().to_string()
            };
            // In a new store handle: what was acknowledged is what is read.
            let store = open(&path);
            outs.push(readout(&store, &id));
            store.close().unwrap();
        }
        seen.push((engine, outs));
    }
    let (_, first) = &seen[0];
    for (engine, outs) in &seen[1..] {
        for (i, (out, want)) in outs.iter().zip(first).enumerate() {
            for (key, value) in want.as_object().unwrap() {
                assert!(
                    out[key] == *value,
                    "{engine}, fixture {i}: {key} differs from SQLite's"
                );
            }
        }
    }
}

#[test]
fn appends_lists_and_retries_behave_the_same_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "appends") {
        let store = open(&path);
        let a = store
            .create_session(SessionOptions {
                id: Some("a".into()),
                project: Some("x".into()),
                ..Default::default()
            })
            .unwrap();
        let b = store
            .create_session(SessionOptions {
                id: Some("b".into()),
                project: Some("y".into()),
                ..Default::default()
            })
            .unwrap();
        let long = "z".repeat(20_000);
        a.append(json!("hello"), None).unwrap();
        let env = a
            .append(
                json!({"role": "assistant", "content": [
                    {"type": "text", "text": long},
                    {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}]}),
                None,
            )
            .unwrap();
        // A retry with the same uuid is stored once.
        let uuid = env["uuid"].as_str().unwrap().to_string();
        let again = a
            .append(
                json!({"role": "assistant", "content": [
                    {"type": "text", "text": long},
                    {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}]}),
                Some(serde_json::from_value(json!({"uuid": uuid})).unwrap()),
            )
            .unwrap();
        assert_eq!(again["seq"], env["seq"], "{engine}");
        b.append(json!("later"), None).unwrap();
        let ids: Vec<String> = store
            .list_sessions(&SessionFilter::default())
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect();
        assert_eq!(ids, ["b", "a"], "{engine}: newest written first");
        let only_x = store
            .list_sessions(&SessionFilter {
                project: Some("x".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(only_x.len(), 1, "{engine}");
        assert_eq!(a.messages().unwrap().len(), 2, "{engine}");
        assert_eq!(
            a.pending_repairs().unwrap().len(),
            1,
            "{engine}: the call has no result"
        );
        a.set_status(Status::Completed).unwrap();
        assert_eq!(a.info().unwrap().status, Status::Completed, "{engine}");
        store.delete_session("b").unwrap();
        assert!(matches!(
            store.open_session("b", None),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            store.create_session(SessionOptions {
                id: Some("a".into()),
                ..Default::default()
            }),
            Err(Error::InvalidInput(_))
        ));
        store.close().unwrap();
        assert!(matches!(a.messages(), Err(Error::Closed(_))), "{engine}");
    }
}

#[test]
fn a_session_moves_sqlite_to_postgres_to_sqlite_with_the_same_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let engines = common::engines(dir.path(), "moves");
    let Some((_, pg)) = engines.iter().find(|(e, _)| *e == "postgres") else {
        return; // said by common::engines (and a failure where CI requires the server)
    };
    let first = open(&dir.path().join("first.db").to_string_lossy());
    let s = first.create_session(SessionOptions::default()).unwrap();
    s.restore_messages(common::fixture_lines("tool_heavy.jsonl"))
        .unwrap();
    let snapshot = s.snapshot().unwrap();
    let on_pg = open(pg).import_snapshot(&snapshot).unwrap();
    assert_eq!(on_pg.snapshot().unwrap(), snapshot);
    let last = open(&dir.path().join("last.db").to_string_lossy());
    let back = last.import_snapshot(&on_pg.snapshot().unwrap()).unwrap();
    assert_eq!(back.snapshot().unwrap(), snapshot);
    assert_eq!(back.messages().unwrap(), s.messages().unwrap());
}

#[test]
fn damage_on_the_server_is_found_by_reads_and_verify_as_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let engines = common::engines(dir.path(), "damage");
    let Some((_, url)) = engines.iter().find(|(e, _)| *e == "postgres") else {
        return; // said by common::engines (and a failure where CI requires the server)
    };
    let store = open(url);
    let s = store
        .create_session(SessionOptions {
            id: Some("hurt".into()),
            ..Default::default()
        })
        .unwrap();
    s.restore_messages(common::fixture_lines("short.jsonl"))
        .unwrap();
    let report = store.verify(&Default::default()).unwrap();
    assert!(report.ok, "{report:?}");
    assert!(report.records > 0);
    // One byte of one record's body changed behind the store's back.
    let (base, schema) = url.split_once("?schema=").unwrap();
    let mut c = postgres::Client::connect(base, postgres::NoTls).unwrap();
    let n = c
        .execute(
            &format!(
                "UPDATE {schema}.records SET body = overlay(body placing '#'::bytea from 3 for 1)
                 WHERE id = (SELECT min(id) + 2 FROM {schema}.records)"
            ),
            &[],
        )
        .unwrap();
    assert_eq!(n, 1);
    let fresh = open(url);
    let err = fresh
        .open_session("hurt", None)
        .unwrap()
        .envelopes(0, None)
        .unwrap_err();
    assert!(matches!(err, Error::StoreCorrupt(_)), "{err:?}");
    assert!(err.to_string().contains("seq 2"), "{err}");
    let report = fresh.verify(&Default::default()).unwrap();
    assert!(!report.ok);
    assert_eq!(report.damaged.len(), 1, "{report:?}");
    assert_eq!(report.damaged[0].seq, Some(2));
    assert_eq!(report.damaged[0].session_id.as_deref(), Some("hurt"));
}

/// Every hit of a search, all pages read, as what identifies it (ranking is each engine's own:
/// bm25 on SQLite, ts_rank on PostgreSQL, so the order is not compared).
fn all_hits(store: &Store, text: &str, options: &threadline::SearchOptions) -> Vec<String> {
    let mut out = Vec::new();
    let mut o = options.clone();
    loop {
        let page = store.search(text, &o).unwrap();
        for h in &page.hits {
            out.push(format!(
                "{} {} {:?} {}",
                h.session_id, h.seq, h.field, h.snippet
            ));
        }
        match page.next_cursor {
            Some(c) => o.cursor = Some(c),
            None => break,
        }
    }
    out.sort();
    out
}

#[test]
fn search_finds_the_same_records_on_both_engines() {
    use threadline::{Field, Role, SearchOptions};
    let dir = tempfile::tempdir().unwrap();
    let queries: Vec<(&str, SearchOptions)> = vec![
        ("phoenix server", SearchOptions::default()),
        ("\"mix phx.server\"", SearchOptions::default()),
        ("compil*", SearchOptions::default()),
        ("postgrex OR credo", SearchOptions::default()),
        ("test -phoenix", SearchOptions::default()),
        (
            "error",
            SearchOptions {
                fields: Some(vec![Field::ToolOutput]),
                limit: Some(7),
                ..Default::default()
            },
        ),
        (
            "the",
            SearchOptions {
                roles: Some(vec![Role::User]),
                project: Some("p".into()),
                since: Some("2020-01-01T00:00:00Z".into()),
                limit: Some(50),
                ..Default::default()
            },
        ),
        (
            "file",
            SearchOptions {
                fields: Some(vec![Field::Text, Field::Thinking, Field::ToolInput]),
                session_id: Some("tool_heavy.jsonl".into()),
                ..Default::default()
            },
        ),
    ];
    let mut seen: Vec<(&str, Vec<Vec<String>>)> = Vec::new();
    for (engine, path) in common::engines(dir.path(), "search") {
        let store = open(&path);
        for name in ["short.jsonl", "tool_heavy.jsonl", "compacted-session.jsonl"] {
            let s = store
                .create_session(SessionOptions {
                    id: Some(name.into()),
                    project: Some("p".into()),
                    ..Default::default()
                })
                .unwrap();
            s.restore_messages(common::fixture_lines(name)).unwrap();
        }
        let found: Vec<Vec<String>> = queries
            .iter()
            .map(|(q, o)| all_hits(&store, q, o))
            .collect();
        seen.push((engine, found));
    }
    let (_, first) = &seen[0];
    for (i, hits) in first.iter().enumerate() {
        assert!(!hits.is_empty(), "query {:?} finds something", queries[i].0);
    }
    for (engine, found) in &seen[1..] {
        for (i, hits) in found.iter().enumerate() {
            assert_eq!(hits, &first[i], "{engine}: query {:?}", queries[i].0);
        }
    }
}

/// On PostgreSQL an append's writes are held back and sent with its COMMIT in one round trip, so
/// the server refuses them only then: the append fails, nothing of it (or of a batch) is stored,
/// and the next append goes on from where the session was.
#[test]
fn a_write_the_server_refuses_at_commit_stores_nothing_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let engines = common::engines(dir.path(), "refused");
    let Some((_, url)) = engines.iter().find(|(e, _)| *e == "postgres") else {
        return; // said by common::engines (and a failure where CI requires the server)
    };
    let store = open(url);
    let s = store.create_session(SessionOptions::default()).unwrap();
    s.append(json!({"role": "user", "content": "short"}), None)
        .unwrap();
    let (base, schema) = url.split_once("?schema=").unwrap();
    let mut c = postgres::Client::connect(base, postgres::NoTls).unwrap();
    c.batch_execute(&format!(
        "ALTER TABLE {schema}.records ADD CONSTRAINT small CHECK (length(body) + coalesce(length(message), 0) < 600)"
    ))
    .unwrap();
    let words: Vec<String> = (0..400).map(|i| format!("{}", i * 7919 % 10007)).collect();
    let long = json!({"role": "assistant", "content": words.join(" ")});
    let err = s.append(long.clone(), None).unwrap_err();
    assert_eq!(err.code(), "STORE_IO", "{err}");
    assert!(err.to_string().contains("\"small\""), "{err}");
    let err = s
        .append_many(vec![json!({"role": "assistant", "content": "fine"}), long])
        .unwrap_err();
    assert_eq!(err.code(), "STORE_IO", "{err}");
    // Nothing of either was stored, and the session goes on at seq 1.
    let after = s
        .append(json!({"role": "assistant", "content": "next"}), None)
        .unwrap();
    assert_eq!(after["seq"], json!(1));
    let fresh = open(url);
    let again = fresh.open_session(s.id(), None).unwrap();
    let texts: Vec<Value> = again
        .messages()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].clone())
        .collect();
    assert_eq!(texts, vec![json!("short"), json!("next")]);
    assert!(fresh.verify(&Default::default()).unwrap().ok);
}

/// An append on PostgreSQL skips asking the server for the session's tail when this process
/// left the session where the handle's tail is. Handles on one session, through one store and
/// through another URL naming the same store, append in turn: each record follows the one
/// before, whichever handle wrote it.
#[test]
fn handles_on_one_session_through_two_urls_append_in_turn_each_after_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let engines = common::engines(dir.path(), "turns");
    let Some((_, url)) = engines.iter().find(|(e, _)| *e == "postgres") else {
        return; // said by common::engines (and a failure where CI requires the server)
    };
    let other_url = url.replacen("127.0.0.1", "localhost", 1);
    assert_ne!(&other_url, url, "the test server's URL names 127.0.0.1");
    let a = open(url);
    let b = open(&other_url);
    let first = a.create_session(SessionOptions::default()).unwrap();
    let second = a.open_session(first.id(), None).unwrap();
    let third = b.open_session(first.id(), None).unwrap();
    let handles = [&first, &second, &third];
    let mut last_uuid: Option<Value> = None;
    for i in 0..30 {
        let h = handles[i % 3];
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let env = h
            .append(json!({"role": role, "content": format!("m{i}")}), None)
            .unwrap();
        assert_eq!(env["seq"], json!(i), "append {i}");
        if let Some(u) = &last_uuid {
            assert_eq!(&env["parentUuid"], u, "append {i}");
        }
        last_uuid = Some(env["uuid"].clone());
    }
    let texts: Vec<Value> = open(url)
        .open_session(first.id(), None)
        .unwrap()
        .messages()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].clone())
        .collect();
    let want: Vec<Value> = (0..30).map(|i| json!(format!("m{i}"))).collect();
    assert_eq!(texts, want);
}

/// A response recorded in several records (as Claude Code writes one per content block) counts
/// its tokens once, even when another response's record comes between, and also after a resume.
/// On PostgreSQL a session made by this process knows its response keys and looks none up: the
/// counts must be the file's.
#[test]
fn a_response_split_around_another_counts_its_tokens_once_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let assistant = |id: &str, text: &str, input: u64, output: u64| {
        json!({"role": "assistant", "id": id, "model": "claude-sonnet-4-5",
               "content": [{"type": "text", "text": text}],
               "usage": {"input_tokens": input, "output_tokens": output}})
    };
    let mut seen = Vec::new();
    for (engine, url) in common::engines(dir.path(), "split_usage") {
        let store = open(&url);
        let s = store.create_session(SessionOptions::default()).unwrap();
        let mut outputs = Vec::new();
        for m in [
            json!({"role": "user", "content": "go"}),
            assistant("msg_a", "a1", 100, 10),
            assistant("msg_b", "b1", 200, 20),
            assistant("msg_a", "a2", 100, 10),
        ] {
            s.append(m, None).unwrap();
            outputs.push(s.token_tracker().unwrap().cumulative_output_tokens);
        }
        // Resumed by another store: msg_b again, after msg_a.
        let again = open(&url).open_session(s.id(), None).unwrap();
        again
            .append(assistant("msg_b", "b2", 200, 20), None)
            .unwrap();
        outputs.push(again.token_tracker().unwrap().cumulative_output_tokens);
        assert_eq!(outputs, vec![0, 10, 30, 30, 30], "{engine}");
        seen.push(outputs);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]));
}
