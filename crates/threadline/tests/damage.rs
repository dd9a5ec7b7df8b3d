//! Damage is detected, never returned: a store built from a real session is damaged on disk
//! (column bytes rewritten, raw page bytes flipped), then read through every path. Each read
//! gives exactly what it gave before, or STORE_CORRUPT.

mod common;

use rusqlite::Connection;
use serde_json::Value;
use threadline::{
    ContextOptions, Error, SessionOptions, Store, StoreOptions, Target, VerifyOptions,
};

const ID: &str = "damaged";

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn options() -> StoreOptions {
    StoreOptions {
        // small blobs, so that records use some and blob damage is tried too
        blob_threshold_bytes: 1024,
        ..StoreOptions::default()
    }
}

fn build(path: &str) {
    let store = Store::open(Some(path), options()).unwrap();
    let s = store
        .create_session(SessionOptions {
            id: Some(ID.into()),
            ..SessionOptions::default()
        })
        .unwrap();
    s.restore_messages(common::fixture_lines("tool_heavy.jsonl"))
        .unwrap();
    s.append_event("note", Some(serde_json::json!({"x": 1})), None)
        .unwrap();
    store.close().unwrap();
}

/// Every read path, each result as text (or its error).
/// The schema version this library writes (as a new store has it).
fn threadline_schema_version() -> i64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db").to_string_lossy().into_owned();
    drop(Store::open(Some(&path), options()).unwrap());
    Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn reads(path: &str) -> Vec<(&'static str, Result<String, Error>)> {
    let store = match Store::open(Some(path), options()) {
        Ok(s) => s,
        Err(e) => return vec![("open", Err(e))],
    };
    let s = match store.open_session(ID, None) {
        Ok(s) => s,
        Err(e) => return vec![("openSession", Err(e))],
    };
    let text = |v: Result<Value, Error>| v.map(|v| v.to_string());
    let json = |v: Result<Vec<Value>, Error>| v.map(|v| Value::Array(v).to_string());
    let out = vec![
        ("messages", json(s.messages())),
        ("allMessages", json(s.all_messages())),
        ("envelopes", json(s.envelopes(0, None))),
        (
            "turns",
            text(
                s.turns()
                    .map(|t| serde_json::to_value(t).unwrap_or(Value::Null)),
            ),
        ),
        (
            "buildContext",
            text(
                s.build_context(&ContextOptions {
                    target: Target::Anthropic,
                    max_tokens: None,
                    max_messages: None,
                    system: None,
                    tool_result_preview_chars: None,
                    reasoning: Default::default(),
                    model: None,
                })
                .map(|c| serde_json::to_value(c).unwrap_or(Value::Null)),
            ),
        ),
        ("snapshot", s.snapshot()),
    ];
    store.close().unwrap();
    out
}

fn verify(path: &str) -> Option<threadline::VerifyReport> {
    let store = Store::open(Some(path), options()).ok()?;
    let r = store.verify(&VerifyOptions::default()).unwrap();
    // the session's own verify agrees on its records
    if let Ok(s) = store.open_session(ID, None) {
        let own = s.verify().unwrap();
        assert!(own.ok || !r.ok);
    }
    Some(r)
}

/// Checks one damaged copy against the pristine reads; returns how many reads failed.
fn check(path: &str, pristine: &[(&str, Result<String, Error>)], what: &str) -> usize {
    let got = reads(path);
    let mut failed = 0;
    for (name, r) in &got {
        match r {
            Ok(v) => {
                let want = pristine.iter().find(|(n, _)| n == name).unwrap();
                assert_eq!(
                    Some(v),
                    want.1.as_ref().ok(),
                    "{what}: {name} returned other data"
                );
            }
            Err(e) => {
                assert_eq!(e.code(), "STORE_CORRUPT", "{what}: {name}: {e}");
                failed += 1;
            }
        }
    }
    if let Some(report) = verify(path) {
        if failed > 0 {
            assert!(!report.ok, "{what}: reads failed but verify found nothing");
        }
    }
    failed
}

fn temp() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.db").to_string_lossy().into_owned();
    let trial = dir.path().join("trial.db").to_string_lossy().into_owned();
    build(&clean);
    (dir, clean, trial)
}

const COLUMNS: [&str; 11] = [
    "crc",
    "meta_crc",
    "body",
    "message",
    "state",
    "uuid",
    "type",
    "msg_index",
    "turn_start",
    "has_blobs",
    "provider",
];

#[test]
fn rewritten_column_bytes_are_detected_on_every_path() {
    let (_dir, clean, trial) = temp();
    let pristine = reads(&clean);
    assert!(pristine.iter().all(|(_, r)| r.is_ok()));
    assert!(verify(&clean).unwrap().ok);
    let mut rng = Rng(0x5eed_cafe);
    let mut detected = 0;
    for t in 0..150 {
        std::fs::copy(&clean, &trial).unwrap();
        let conn = Connection::open(&trial).unwrap();
        let ids: Vec<i64> = conn
            .prepare("SELECT id FROM records")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let id = ids[rng.below(ids.len() as u64) as usize];
        let col = if t % 10 == 9 {
            "literal"
        } else if t % 10 == 4 {
            [
                "kind",
                "name",
                "state",
                "call_seq",
                "result_seq",
                "outcome",
                "crc",
            ][rng.below(7) as usize]
        } else {
            COLUMNS[rng.below(COLUMNS.len() as u64) as usize]
        };
        let (table, key) = if col == "literal" {
            ("blobs", "rowid")
        } else if t % 10 == 4 {
            // no rowid: keyed by the position of (session, id) in key order
            (
                "tool_calls",
                "session * 0 + (SELECT count(*) FROM tool_calls t WHERE t.id < tool_calls.id)",
            )
        } else {
            ("records", "id")
        };
        let key_value: i64 = if t % 10 == 4 {
            let n: i64 = conn
                .query_row("SELECT count(*) FROM tool_calls", [], |r| r.get(0))
                .unwrap();
            rng.below(n as u64) as i64
        } else if col == "literal" {
            let n: i64 = conn
                .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
                .unwrap();
            assert!(n > 0, "the fixture has blobs");
            conn.query_row(
                "SELECT rowid FROM blobs LIMIT 1 OFFSET ?1",
                [rng.below(n as u64) as i64],
                |r| r.get(0),
            )
            .unwrap()
        } else {
            id
        };
        let value: rusqlite::types::Value = conn
            .query_row(
                &format!("SELECT {col} FROM {table} WHERE {key} = ?1"),
                [key_value],
                |r| r.get(0),
            )
            .unwrap();
        use rusqlite::types::Value as V;
        let damaged = match value {
            V::Text(t) => {
                let mut b = t.into_bytes();
                for _ in 0..1 + rng.below(3) {
                    let i = rng.below(b.len() as u64) as usize;
                    if !b.is_empty() {
                        b[i] = rng.next() as u8;
                    }
                }
                conn.execute(
                    &format!("UPDATE {table} SET {col} = CAST(?1 AS TEXT) WHERE {key} = ?2"),
                    rusqlite::params![b, key_value],
                )
                .unwrap();
                true
            }
            V::Blob(mut b) => {
                for _ in 0..1 + rng.below(3) {
                    let i = rng.below(b.len() as u64) as usize;
                    if !b.is_empty() {
                        b[i] = rng.next() as u8;
                    }
                }
                conn.execute(
                    &format!("UPDATE {table} SET {col} = ?1 WHERE {key} = ?2"),
                    rusqlite::params![b, key_value],
                )
                .unwrap();
                true
            }
            V::Integer(i) => {
                let n = if rng.below(2) == 0 { i ^ 1 } else { i + 1 };
                conn.execute(
                    &format!("UPDATE {table} SET {col} = ?1 WHERE {key} = ?2"),
                    rusqlite::params![n, key_value],
                )
                .unwrap();
                true
            }
            V::Null => {
                conn.execute(
                    &format!("UPDATE {table} SET {col} = 0 WHERE {key} = ?1"),
                    [key_value],
                )
                .unwrap();
                true
            }
            V::Real(_) => false,
        };
        drop(conn);
        let failed = check(
            &trial,
            &pristine,
            &format!("trial {t}: {table}.{col} of {key_value}"),
        );
        if damaged && failed > 0 {
            detected += 1;
        }
    }
    assert!(detected > 100, "only {detected} trials were detected");
}

#[test]
fn flipped_page_bytes_are_detected_or_harmless() {
    let (_dir, clean, trial) = temp();
    let pristine = reads(&clean);
    // The pages of the record and blob tables and their indexes (dbstat: SQLite's page map).
    let conn = Connection::open(&clean).unwrap();
    let page_size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    let pages: Vec<i64> = conn
        .prepare("SELECT pageno FROM dbstat WHERE name IN ('records', 'records_uuid', 'records_response', 'records_turn_start', 'blobs', 'sqlite_autoindex_blobs_1', 'tool_calls')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    drop(conn);
    assert!(pages.len() > 5);
    let bytes = std::fs::read(&clean).unwrap();
    let mut rng = Rng(0xf11b_b175);
    let mut detected = 0;
    for t in 0..150 {
        let mut b = bytes.clone();
        for _ in 0..1 + rng.below(4) {
            let page = pages[rng.below(pages.len() as u64) as usize];
            let at = ((page - 1) * page_size) as u64 + rng.below(page_size as u64);
            b[at as usize] ^= 1 << rng.below(8);
        }
        std::fs::write(&trial, &b).unwrap();
        if check(&trial, &pristine, &format!("flip trial {t}")) > 0 {
            detected += 1;
        }
    }
    assert!(detected > 20, "only {detected} trials were detected");
}

#[test]
fn a_changed_quote_and_an_injected_message_are_store_corrupt_on_every_path() {
    let (_dir, clean, trial) = temp();
    let pristine = reads(&clean);
    for (what, sql) in [
        (
            "a quote changed",
            "UPDATE records SET message = CAST(replace(CAST(message AS TEXT), '\"role\"', '\"ro1e\"') AS BLOB) WHERE id = (SELECT min(id) FROM records WHERE message IS NOT NULL AND instr(CAST(message AS TEXT), '\"role\"') > 0)",
        ),
        (
            "a second message injected",
            "UPDATE records SET message = CAST('{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"injected\"}' AS BLOB) WHERE id = (SELECT min(id) FROM records WHERE message IS NOT NULL)",
        ),
        (
            "state set to another record's",
            "UPDATE records SET state = (SELECT state FROM records ORDER BY id LIMIT 1) WHERE id = (SELECT max(id) FROM records)",
        ),
        (
            "a record removed",
            "DELETE FROM records WHERE id = (SELECT min(id) + 3 FROM records)",
        ),
        (
            "the last record removed",
            "DELETE FROM records WHERE id = (SELECT max(id) FROM records)",
        ),
    ] {
        std::fs::copy(&clean, &trial).unwrap();
        let conn = Connection::open(&trial).unwrap();
        assert_eq!(conn.execute(sql, []).unwrap(), 1, "{what}");
        drop(conn);
        for (name, r) in reads(&trial) {
            // A path that never reads the damaged record (turns: the states at turn ends) may
            // give its data, exactly; the others must refuse.
            let may_pass = name == "turns" || name == "buildContext";
            match r {
                Ok(v) if may_pass => {
                    let want = pristine.iter().find(|(n, _)| *n == name).unwrap();
                    assert_eq!(Some(&v), want.1.as_ref().ok(), "{what}: {name}");
                }
                r => {
                    let e = r.expect_err(&format!("{what}: {name} read damaged data"));
                    assert_eq!(e.code(), "STORE_CORRUPT", "{what}: {name}: {e}");
                    assert!(e.message().contains(ID), "{what}: {name}: {e}");
                }
            }
        }
        let r = verify(&trial).unwrap();
        assert!(!r.ok, "{what}");
        assert_eq!(r.damaged[0].session_id.as_deref(), Some(ID), "{what}");
        assert!(r.damaged[0].seq.is_some(), "{what}");
    }
}

#[test]
fn damaged_session_rows_are_store_corrupt() {
    let (_dir, clean, trial) = temp();
    for (what, sql) in [
        (
            "metadata not JSON",
            "UPDATE sessions SET metadata = '{\"a\":'",
        ),
        ("metadata a blob", "UPDATE sessions SET metadata = x'00ff'"),
        ("status unknown", "UPDATE sessions SET status = 'actve'"),
        ("status an integer", "UPDATE sessions SET status = 7"),
        ("created_ms text", "UPDATE sessions SET created_ms = 'x'"),
        (
            "state an integer",
            "UPDATE records SET state = 5 WHERE id = (SELECT max(id) FROM records)",
        ),
    ] {
        std::fs::copy(&clean, &trial).unwrap();
        let conn = Connection::open(&trial).unwrap();
        conn.execute(sql, []).unwrap();
        drop(conn);
        let store = Store::open(Some(&trial), options()).unwrap();
        let listed = store.list_sessions(&Default::default());
        assert_eq!(listed.unwrap_err().code(), "STORE_CORRUPT", "{what}");
        if let Ok(s) = store.open_session(ID, None) {
            assert_eq!(s.info().unwrap_err().code(), "STORE_CORRUPT", "{what}");
            assert_eq!(s.snapshot().unwrap_err().code(), "STORE_CORRUPT", "{what}");
            assert!(!s.verify().unwrap().ok, "{what}");
        }
        assert!(
            !store.verify(&VerifyOptions::default()).unwrap().ok,
            "{what}"
        );
    }
}

/// A damaged page of the journal's b-tree can drop a row with no error from SQLite (seen with
/// flipped bits): the snapshot refuses a journal short of a call, and verify names the record.
#[test]
fn a_journal_row_lost_is_store_corrupt_in_the_snapshot_and_found_by_verify() {
    let (_dir, clean, trial) = temp();
    std::fs::copy(&clean, &trial).unwrap();
    let conn = Connection::open(&trial).unwrap();
    let (call, seq): (String, i64) = conn
        .query_row(
            "SELECT id, call_seq FROM tool_calls ORDER BY call_seq LIMIT 1 OFFSET 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    conn.execute("DELETE FROM tool_calls WHERE id = ?1", [&call])
        .unwrap();
    drop(conn);
    let store = Store::open(Some(&trial), options()).unwrap();
    let s = store.open_session(ID, None).unwrap();
    let e = s.snapshot().unwrap_err();
    assert_eq!(e.code(), "STORE_CORRUPT", "{e}");
    assert!(
        e.message()
            .contains(&format!("seq {seq} of session '{ID}'"))
            && e.message().contains(&call),
        "{e}"
    );
    let r = store.verify(&VerifyOptions::default()).unwrap();
    assert!(!r.ok);
    assert_eq!(r.damaged.len(), 1, "{:?}", r.damaged);
    assert_eq!(r.damaged[0].seq, Some(seq as u64));
    assert!(r.damaged[0].reason.contains(&call), "{:?}", r.damaged);
    assert_eq!(s.verify().unwrap().damaged, r.damaged);
    // The clean store's snapshot has every call.
    let clean = Store::open(Some(&clean), options()).unwrap();
    assert!(clean.open_session(ID, None).unwrap().snapshot().is_ok());
}

#[test]
fn verify_reports_every_damaged_record_and_reads_past_them() {
    let (_dir, clean, trial) = temp();
    std::fs::copy(&clean, &trial).unwrap();
    let conn = Connection::open(&trial).unwrap();
    let ids: Vec<i64> = conn
        .prepare("SELECT id FROM records ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let lo = ids[0];
    for &id in &[ids[2], ids[10], ids[20]] {
        conn.execute(
            "UPDATE records SET body = CAST(replace(CAST(body AS TEXT), 'uuid', 'uuix') AS BLOB) WHERE id = ?1",
            [id],
        )
        .unwrap();
    }
    drop(conn);
    let store = Store::open(Some(&trial), options()).unwrap();
    let r = store.verify(&VerifyOptions::default()).unwrap();
    assert!(!r.ok);
    assert_eq!(r.records as usize, ids.len());
    let seqs: Vec<u64> = r.damaged.iter().filter_map(|d| d.seq).collect();
    assert_eq!(
        seqs,
        [2, 10, 20]
            .iter()
            .map(|&i| (ids[i] - lo) as u64)
            .collect::<Vec<_>>()
    );
    let s = store.open_session(ID, None).unwrap();
    let own = s.verify().unwrap();
    assert_eq!(own.damaged, r.damaged);
    // Reads stop at the first damaged record, naming it.
    let e = s.envelopes(0, None).unwrap_err();
    assert!(
        e.message()
            .contains(&format!("seq {} of session '{ID}'", ids[2] - lo)),
        "{e}"
    );
    // What comes before it still reads.
    assert_eq!(s.envelopes(0, Some(2)).unwrap().len(), 2);
}

#[test]
fn a_version_3_store_is_migrated_with_checksums() {
    let (_dir, clean, trial) = temp();
    let pristine = reads(&clean);
    std::fs::copy(&clean, &trial).unwrap();
    // The store as version 3 had it: no checksum columns, no record count (and no search index).
    let conn = Connection::open(&trial).unwrap();
    conn.execute_batch(
        "ALTER TABLE records DROP COLUMN crc; ALTER TABLE records DROP COLUMN meta_crc;
         ALTER TABLE blobs DROP COLUMN crc; ALTER TABLE tool_calls DROP COLUMN crc;
         ALTER TABLE sessions DROP COLUMN records;
         DROP TABLE search; ALTER TABLE sessions DROP COLUMN indexed;
         DROP TABLE deleted_sessions; PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(conn);
    let got = reads(&trial);
    for ((n, a), (_, b)) in pristine.iter().zip(&got) {
        assert_eq!(a.as_ref().ok(), b.as_ref().ok(), "{n}");
    }
    assert!(verify(&trial).unwrap().ok);
    let conn = Connection::open(&trial).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, threadline_schema_version());
}

#[test]
fn appends_seen_by_another_connection_are_never_mistaken_for_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db").to_string_lossy().into_owned();
    let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
    let s = store
        .create_session(SessionOptions {
            id: Some("live".into()),
            ..SessionOptions::default()
        })
        .unwrap();
    let reader = {
        let path = path.clone();
        std::thread::spawn(move || {
            let other = Store::open(Some(&path), StoreOptions::default()).unwrap();
            let mut seen = 0;
            for _ in 0..400 {
                // a fresh handle loads the tail (last record and the row's record count)
                let r = other.open_session("live", None).unwrap();
                let n = r.messages().unwrap().len();
                assert!(n >= seen);
                seen = n;
                other.list_sessions(&Default::default()).unwrap();
            }
        })
    };
    for i in 0..300 {
        s.append(Value::String(format!("message {i}")), None)
            .unwrap();
    }
    reader.join().unwrap();
    assert!(store.verify(&VerifyOptions::default()).unwrap().ok);
}
