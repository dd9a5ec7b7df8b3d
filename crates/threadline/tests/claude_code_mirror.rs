//! The Claude Agent SDK's session mirror (`interop::mirror`): a transcript appended in batches
//! is the session `import claude-code` makes of the same file, and loads back as appended.

mod common;

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use threadline::interop::mirror::{self, Key};
use threadline::interop::{export, import, ExportFormat, Format, ImportOptions};
use threadline::{SessionFilter, Store, StoreOptions};

const SID: &str = "ae4a77f8-aedd-4bc1-888f-c94edc91af04";
const PROJECT_KEY: &str = "-home-USER-projects-spotter-worktrees-spotter-4te";

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/claude-code-projects")
        .join(PROJECT_KEY)
}

fn store(dir: &Path, name: &str) -> Store {
    Store::open(Some(&common::location(dir, name)), StoreOptions::default()).unwrap()
}

fn key(subpath: Option<&str>) -> Key {
    Key {
        project_key: PROJECT_KEY.into(),
        session_id: SID.into(),
        subpath: subpath.map(str::to_string),
        project: None,
    }
}

/// (subpath, the file's lines as written) of the fixture's main file and its subagents.
fn transcripts() -> Vec<(Option<&'static str>, Vec<String>)> {
    let read = |p: PathBuf| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()
    };
    let f = folder();
    vec![
        (None, read(f.join(format!("{SID}.jsonl")))),
        (
            Some("subagents/agent-aac57f5"),
            read(f.join(SID).join("subagents/agent-aac57f5.jsonl")),
        ),
        (
            Some("subagents/agent-acompact-946d2b"),
            read(f.join(SID).join("subagents/agent-acompact-946d2b.jsonl")),
        ),
    ]
}

fn array(lines: &[String]) -> String {
    format!("[{}]", lines.join(","))
}

/// Mirrors every transcript in batches of `size` lines.
/// JSON text as `mirror::load` gives it back: characters outside ASCII as `\uXXXX` escapes (a
/// one-byte string for JS), everything else as written.
fn ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            out.push_str(&format!("\\u{u:04x}"));
        }
    }
    out
}

fn mirror_all(s: &Store, size: usize) {
    for (sub, lines) in transcripts() {
        for batch in lines.chunks(size) {
            let r = mirror::append(s, &key(sub), &array(batch), None).unwrap();
            assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        }
    }
}

/// A record without what differs between two writes of the same line: `seq`, and the keys the
/// store filled in (an id derived per call, the parent that follows from it).
fn comparable(r: &Value) -> Value {
    let mut r = r.as_object().unwrap().clone();
    r.shift_remove("seq");
    r.shift_remove("importedStringContent");
    if let Some(Value::Array(keys)) = r.shift_remove("importedWithout") {
        for k in keys {
            r.shift_remove(k.as_str().unwrap());
        }
    }
    Value::Object(r)
}

/// The metadata of a session without where it came from (a file, or the SDK).
fn origin_free(m: Option<Map<String, Value>>) -> Map<String, Value> {
    let mut m = m.unwrap_or_default();
    m.shift_remove("importedFrom");
    m.shift_remove("claudeAgentSdk");
    m
}

#[test]
fn a_transcript_mirrored_in_batches_of_1_7_or_all_is_the_session_the_import_makes() {
    let dir = tempfile::tempdir().unwrap();
    let imported = store(dir.path(), "imported.db");
    import(
        &imported,
        Format::ClaudeCode,
        &folder(),
        &ImportOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let ids: Vec<String> = imported
        .list_sessions(&SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(ids.len(), 3);
    for size in [1, 7, usize::MAX] {
        let s = store(dir.path(), &format!("mirrored-{size}.db"));
        mirror_all(&s, size);
        for id in &ids {
            let a = imported.open_session(id, None).unwrap();
            let b = s.open_session(id, None).unwrap();
            let (x, y) = (a.info().unwrap(), b.info().unwrap());
            let what = format!("{id} in batches of {size}");
            assert_eq!(
                (&x.project, &x.title, &x.model, &x.provider),
                (&y.project, &y.title, &y.model, &y.provider),
                "{what}"
            );
            assert_eq!(
                origin_free(x.metadata.clone()),
                origin_free(y.metadata.clone()),
                "{what}"
            );
            let m = y.metadata.unwrap();
            assert_eq!(m["importedFrom"]["format"], "claude-code");
            assert_eq!(m["claudeAgentSdk"]["projectKey"], PROJECT_KEY);
            assert_eq!(
                a.all_messages().unwrap(),
                b.all_messages().unwrap(),
                "{what}"
            );
            assert_eq!(a.messages().unwrap(), b.messages().unwrap(), "{what}");
            let ea: Vec<Value> = a
                .envelopes(0, None)
                .unwrap()
                .iter()
                .map(comparable)
                .collect();
            let eb: Vec<Value> = b
                .envelopes(0, None)
                .unwrap()
                .iter()
                .map(comparable)
                .collect();
            assert_eq!(ea.len(), eb.len(), "{what}");
            for (i, (p, q)) in ea.iter().zip(&eb).enumerate() {
                assert_eq!(p, q, "{what}: record {i}");
            }
            // the export: Claude Code's lines, as the import gives them back
            let ta = export(&a, ExportFormat::ClaudeCode).unwrap();
            let tb = export(&b, ExportFormat::ClaudeCode).unwrap();
            let la: Vec<Value> = ta
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let lb: Vec<Value> = tb
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(la.len(), lb.len(), "{what}");
            for (p, q) in la.iter().zip(&lb) {
                assert_eq!(normal(p), normal(q), "{what}");
            }
        }
        let agent = s
            .open_session(&format!("{SID}/agent-aac57f5"), None)
            .unwrap();
        let m = agent.info().unwrap().metadata.unwrap();
        assert_eq!(m["parentToolUseId"], "toolu_01Hf8v1Za7y4af8VUwSR4CXU");
        assert_eq!(m["claudeAgentSdk"]["subpath"], "subagents/agent-aac57f5");
    }
}

/// A line with a message's string content as the one text block the import keeps it as.
fn normal(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(c) = v.get_mut("message").and_then(|m| m.get_mut("content")) {
        if let Value::String(text) = c {
            *c = json!([{"type": "text", "text": text}]);
        }
    }
    v
}

#[test]
fn load_gives_back_every_entry_as_appended_and_a_retry_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    mirror_all(&s, 7);
    for (sub, lines) in transcripts() {
        let text = mirror::load(&s, &key(sub)).unwrap().unwrap();
        let got: Value = serde_json::from_str(&text).unwrap();
        let want: Value = serde_json::from_str(&array(&lines)).unwrap();
        assert_eq!(got, want, "{sub:?}");
        // key order and number text too: the text itself is the lines', in ASCII
        assert!(text.is_ascii());
        assert_eq!(text, ascii(&array(&lines)), "{sub:?}");
    }
    // the SDK retries a batch, and `importSessionToStore` replays them all: entries with a uuid
    // are stored once
    let (_, lines) = transcripts().remove(1);
    let with_uuid: Vec<String> = lines
        .iter()
        .filter(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap()
                .get("uuid")
                .is_some()
        })
        .cloned()
        .collect();
    let r = mirror::append(
        &s,
        &key(Some("subagents/agent-aac57f5")),
        &array(&with_uuid),
        None,
    )
    .unwrap();
    assert_eq!((r.created, r.new_records), (false, 0));
    assert_eq!(
        mirror::load(&s, &key(Some("subagents/agent-aac57f5")))
            .unwrap()
            .unwrap(),
        ascii(&array(&lines))
    );
    assert_eq!(
        mirror::load(&s, &key(Some("subagents/agent-nothere"))).unwrap(),
        None
    );
}

fn sdk_key(session: &str, sub: Option<&str>) -> Key {
    Key {
        project_key: "-tmp-sdk-work".into(),
        session_id: session.into(),
        subpath: sub.map(str::to_string),
        project: None,
    }
}

#[test]
fn entries_without_a_uuid_are_stored_once_per_call_and_numbers_keep_their_text() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let k = sdk_key("s1", None);
    let batch = r#"[{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-27T18:40:06.132Z","sessionId":"s1"},{"type":"cost-state","costUSD":1E+2,"n":1.50}]"#;
    let r = mirror::append(&s, &k, batch, None).unwrap();
    assert_eq!((r.created, r.new_records), (true, 2));
    let r = mirror::append(&s, &k, batch, None).unwrap();
    assert_eq!((r.created, r.new_records), (false, 2));
    let inner = &batch[1..batch.len() - 1];
    assert_eq!(
        mirror::load(&s, &k).unwrap().unwrap(),
        format!("[{inner},{inner}]")
    );
    // the first batch had no `cwd`: the project is the key until an entry names it
    let info = s.open_session("s1", None).unwrap().info().unwrap();
    assert_eq!(info.project.as_deref(), Some("-tmp-sdk-work"));
    mirror::append(
        &s,
        &k,
        r#"[{"type":"user","uuid":"u1","cwd":"/tmp/sdk/work","timestamp":"2026-11-27T18:40:07.000Z","message":{"role":"user","content":"hi"}}]"#,
        None,
    )
    .unwrap();
    let info = s.open_session("s1", None).unwrap().info().unwrap();
    assert_eq!(info.project.as_deref(), Some("/tmp/sdk/work"));
    let loaded: Value = serde_json::from_str(&mirror::load(&s, &k).unwrap().unwrap()).unwrap();
    assert_eq!(loaded[4]["message"]["content"], "hi");
}

#[test]
fn a_refused_entry_is_reported_kept_whole_and_the_rest_stored() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let k = sdk_key("s2", None);
    let batch = r#"[{"type":"user","uuid":"u1","timestamp":"2026-11-27T18:40:06.000Z","message":{"role":"user","content":[{"type":"text","text":"hi"}]}},42,{"no":"type"},{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"text"}]}},{"type":"last-prompt","lastPrompt":"hi"}]"#;
    let r = mirror::append(&s, &k, batch, None).unwrap();
    let skipped: Vec<(usize, &str)> = r
        .skipped
        .iter()
        .map(|e| (e.index, e.reason.as_str()))
        .collect();
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert_eq!(
        skipped[0],
        (1, "entries[1]: expected an object, got a number")
    );
    assert_eq!(skipped[1], (2, "entries[2].type: required, a string"));
    assert_eq!(skipped[2].0, 3);
    assert!(
        skipped[2].1.starts_with("entries[3]: message.content[0]"),
        "{}",
        skipped[2].1
    );
    assert_eq!(r.new_records, 5);
    assert_eq!(mirror::load(&s, &k).unwrap().unwrap(), batch);
    let session = s.open_session("s2", None).unwrap();
    assert_eq!(session.all_messages().unwrap().len(), 1);
    // a retry: the refused entry with a uuid is found stored; those without one are kept again
    let r = mirror::append(&s, &k, batch, None).unwrap();
    assert_eq!(r.new_records, 3);
}

#[test]
fn the_sidecar_sessions_subkeys_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let entry = |uuid: &str| {
        format!(
            r#"[{{"type":"user","uuid":"{uuid}","cwd":"/tmp/sdk/work","timestamp":"2026-11-27T18:40:06.000Z","message":{{"role":"user","content":"go"}}}}]"#
        )
    };
    let side = |mtime: i64| {
        let Value::Object(m) = json!({"mtime": mtime, "summary": {"v": 1, "n": 1E+2}}) else {
            unreachable!()
        };
        Some(m)
    };
    mirror::append(&s, &sdk_key("m1", None), &entry("a"), side(5)).unwrap();
    mirror::append(&s, &sdk_key("m1", None), &entry("b"), side(7)).unwrap();
    mirror::append(&s, &sdk_key("m2", None), &entry("c"), None).unwrap();
    mirror::append(
        &s,
        &sdk_key("m1", Some("subagents/agent-x1")),
        r#"[{"type":"agent_metadata","agentType":"Explore","description":"look"}]"#,
        None,
    )
    .unwrap();
    mirror::append(
        &s,
        &sdk_key("m1", Some("subagents/agent-x1/subagents/agent-y2")),
        &entry("d"),
        None,
    )
    .unwrap();
    let mut other = sdk_key("m3", None);
    other.project_key = "-elsewhere".into();
    mirror::append(&s, &other, &entry("e"), None).unwrap();
    // a session imported from a file whose project the SDK sanitises to the key
    let f = dir.path().join("imp.jsonl");
    std::fs::write(
        &f,
        "{\"type\":\"user\",\"uuid\":\"i1\",\"cwd\":\"/tmp/sdk/work\",\"sessionId\":\"imp\",\"timestamp\":\"2026-11-27T18:40:06.000Z\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n",
    )
    .unwrap();
    import(
        &s,
        Format::ClaudeCode,
        &f,
        &ImportOptions::default(),
        &mut |_| {},
    )
    .unwrap();

    let listed = serde_json::to_value(mirror::sessions(&s, "-tmp-sdk-work").unwrap()).unwrap();
    let mut ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["sessionId"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["imp", "m1", "m2"]);
    let m1 = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["sessionId"] == "m1")
        .unwrap();
    assert_eq!(m1["mtime"], 7);
    assert_eq!(m1["summary"], json!({"v": 1, "n": 1E+2}));
    let m2 = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["sessionId"] == "m2")
        .unwrap();
    assert!(m2["mtime"].as_i64().unwrap() > 0);
    assert!(m2.get("summary").is_none());

    let agent = s.open_session("m1/agent-x1", None).unwrap().info().unwrap();
    let m = agent.metadata.unwrap();
    assert_eq!(
        m["agent"],
        json!({"agentType": "Explore", "description": "look"})
    );
    assert_eq!(m["parentSessionId"], "m1");
    assert_eq!(
        mirror::load(&s, &sdk_key("m1", Some("subagents/agent-x1")))
            .unwrap()
            .unwrap(),
        r#"[{"type":"agent_metadata","agentType":"Explore","description":"look"}]"#
    );
    let mut subs = mirror::subkeys(&s, "m1").unwrap();
    subs.sort();
    assert_eq!(
        subs,
        [
            "subagents/agent-x1",
            "subagents/agent-x1/subagents/agent-y2"
        ]
    );

    // a subpath key deletes that session only; a main key the session and its subagents
    mirror::delete(
        &s,
        &sdk_key("m1", Some("subagents/agent-x1/subagents/agent-y2")),
    )
    .unwrap();
    assert_eq!(mirror::subkeys(&s, "m1").unwrap(), ["subagents/agent-x1"]);
    mirror::append(
        &s,
        &sdk_key("m1", Some("subagents/agent-x1/subagents/agent-y2")),
        &entry("d"),
        None,
    )
    .unwrap();
    mirror::delete(&s, &sdk_key("m1", None)).unwrap();
    assert_eq!(mirror::load(&s, &sdk_key("m1", None)).unwrap(), None);
    assert!(mirror::subkeys(&s, "m1").unwrap().is_empty());
    assert!(s.open_session("m2", None).is_ok());
    // missing: nothing to do
    mirror::delete(&s, &sdk_key("m1", None)).unwrap();
}

#[test]
fn a_subagent_mirrored_before_its_parents_result_is_linked_when_the_result_comes() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let mut t = transcripts();
    // the SDK mirrors the agent's transcript while it runs, the parent's result after
    let (sub, agent_lines) = t.remove(1);
    for batch in agent_lines.chunks(5) {
        mirror::append(&s, &key(sub), &array(batch), None).unwrap();
    }
    let (_, main_lines) = t.remove(0);
    for batch in main_lines.chunks(50) {
        mirror::append(&s, &key(None), &array(batch), None).unwrap();
    }
    let m = s
        .open_session(&format!("{SID}/agent-aac57f5"), None)
        .unwrap()
        .info()
        .unwrap()
        .metadata
        .unwrap();
    assert_eq!(m["parentToolUseId"], "toolu_01Hf8v1Za7y4af8VUwSR4CXU");
}

#[test]
fn bad_keys_and_entries_are_refused_with_the_field_and_nothing_stored() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    for (text, want) in [
        (r#"{"sessionId":"a"}"#, "key.projectKey: required, a string"),
        (
            r#"{"projectKey":"p","sessionId":""}"#,
            "key.sessionId: must not be empty",
        ),
        (
            r#"{"projectKey":"p","sessionId":"a","subpath":""}"#,
            "key.subpath: must not be empty",
        ),
        (
            r#"{"projectKey":"p","sessionId":"a/b"}"#,
            "key.sessionId: must not contain '/', got 'a/b'",
        ),
        (r#"[]"#, "key: expected an object, got an array"),
    ] {
        let e = Key::from_json(text).unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT");
        assert_eq!(e.message(), want);
    }
    let e = mirror::append(&s, &sdk_key("z", None), r#"{"type":"x"}"#, None).unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
    assert!(
        e.message()
            .contains("entries: expected an array, got an object"),
        "{}",
        e.message()
    );
    assert!(s
        .list_sessions(&SessionFilter::default())
        .unwrap()
        .is_empty());
}

#[test]
fn a_rewind_across_batches_is_the_importers_rewind_and_load_leaves_it_out() {
    let dir = tempfile::tempdir().unwrap();
    let line = |uuid: &str, parent: Option<&str>, role: &str, text: &str, t: u32| {
        let content = if role == "user" {
            json!(text)
        } else {
            json!([{"type": "text", "text": text}])
        };
        json!({"parentUuid": parent, "type": role, "uuid": uuid, "sessionId": "rw",
            "timestamp": format!("2026-11-27T18:40:{t:02}.000Z"), "cwd": "/tmp/rw",
            "message": {"role": role, "content": content}})
        .to_string()
    };
    let lines = vec![
        line("u1", None, "user", "one", 1),
        line("a1", Some("u1"), "assistant", "ok one", 2),
        line("u2", Some("a1"), "user", "two", 3),
        line("a2", Some("u2"), "assistant", "ok two", 4),
        // the user went back to after the first answer
        line("u3", Some("a1"), "user", "two again", 5),
        line("a3", Some("u3"), "assistant", "ok again", 6),
    ];
    let file = dir.path().join("rw.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let imported = store(dir.path(), "imported.db");
    import(
        &imported,
        Format::ClaudeCode,
        &file,
        &ImportOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let a = imported.open_session("rw", None).unwrap();
    let ea: Vec<Value> = a
        .envelopes(0, None)
        .unwrap()
        .iter()
        .map(comparable)
        .collect();
    assert!(
        ea.iter().any(|r| r["type"] == "rewind"),
        "the import rewinds"
    );
    let k = sdk_key("rw", None);
    for size in [1, 4] {
        let s = store(dir.path(), &format!("mirrored-{size}.db"));
        for batch in lines.chunks(size) {
            mirror::append(&s, &k, &array(batch), None).unwrap();
        }
        let b = s.open_session("rw", None).unwrap();
        let eb: Vec<Value> = b
            .envelopes(0, None)
            .unwrap()
            .iter()
            .map(comparable)
            .collect();
        assert_eq!(ea, eb, "batches of {size}");
        assert_eq!(a.messages().unwrap(), b.messages().unwrap());
        assert_eq!(mirror::load(&s, &k).unwrap().unwrap(), array(&lines));
    }
}

/// The process that holds session `id` in a SQLite store (None: free); on PostgreSQL, not asked.
fn sqlite_owner(s: &Store, id: &str) -> Option<Option<i64>> {
    if s.path().contains("://") {
        return None;
    }
    let db = rusqlite::Connection::open(s.path()).unwrap();
    let owner = db
        .query_row("SELECT owner_pid FROM sessions WHERE id = ?1", [id], |r| {
            r.get::<_, Option<i64>>(0)
        })
        .unwrap();
    Some(owner)
}

#[test]
fn an_append_keeps_its_session_claimed_until_released_deleted_or_the_store_closed() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let me = Some(Some(std::process::id() as i64));
    let free = |s: &Store, id: &str| sqlite_owner(s, id).map(|_| None::<i64>);
    let entry = |uuid: &str| {
        format!(
            r#"[{{"type":"user","uuid":"{uuid}","cwd":"/tmp/sdk/work","timestamp":"2026-11-27T18:40:06.000Z","message":{{"role":"user","content":"go {uuid}"}}}}]"#
        )
    };
    let k = sdk_key("h1", None);
    let sub = sdk_key("h1", Some("subagents/agent-x1"));
    mirror::append(&s, &k, &entry("a"), None).unwrap();
    mirror::append(&s, &sub, &entry("x"), None).unwrap();
    // held between calls: the next append does not claim it again
    if sqlite_owner(&s, "h1").is_some() {
        assert_eq!(sqlite_owner(&s, "h1"), me);
        assert_eq!(sqlite_owner(&s, "h1/agent-x1"), me);
    }
    mirror::append(&s, &k, &entry("b"), None).unwrap();
    // a load reads through the held handle and keeps the claim
    assert_eq!(
        serde_json::from_str::<Value>(&mirror::load(&s, &k).unwrap().unwrap())
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(mirror::release(&s, &k).unwrap(), "held until released");
    assert_eq!(sqlite_owner(&s, "h1"), free(&s, "h1"));
    assert!(!mirror::release(&s, &k).unwrap(), "released once");
    if sqlite_owner(&s, "h1").is_some() {
        assert_eq!(
            sqlite_owner(&s, "h1/agent-x1"),
            me,
            "a key's release is its session's"
        );
    }
    // an append after a release claims it again and goes on where the log is
    mirror::append(&s, &k, &entry("c"), None).unwrap();
    assert!(mirror::load(&s, &k).unwrap().unwrap().contains("go c"));
    // deleted behind the mirror's back (by this process): the next append makes it afresh
    s.delete_session("h1/agent-x1").unwrap();
    let r = mirror::append(&s, &sub, &entry("y"), None).unwrap();
    assert_eq!((r.created, r.new_records), (true, 1));
    // the mirror's delete lets go of the session and its subagents' first
    mirror::delete(&s, &k).unwrap();
    assert!(!mirror::release(&s, &k).unwrap());
    assert!(!mirror::release(&s, &sub).unwrap());
    assert_eq!(mirror::load(&s, &k).unwrap(), None);
    // the store's close lets go of what it holds
    mirror::append(&s, &k, &entry("d"), None).unwrap();
    let path = s.path().to_string();
    s.close().unwrap();
    let again = Store::open(Some(&path), StoreOptions::default()).unwrap();
    assert_eq!(sqlite_owner(&again, "h1"), free(&again, "h1"));
    let r = mirror::append(&again, &k, &entry("e"), None).unwrap();
    assert_eq!((r.created, r.new_records), (false, 1));
    assert!(mirror::release(&again, &k).unwrap());
}

#[test]
fn load_gives_back_the_appended_text_in_ascii_whatever_the_characters_and_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let k = sdk_key("t1", None);
    // what serde_json (and JSON.stringify) write: non-ASCII as it is, control characters escaped
    let lines = [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"t1","timestamp":"2026-11-27T18:40:06.000Z","cwd":"/tmp/é","message":{"role":"user","content":[{"type":"text","text":"é 😀 \u2028 \"q\" \\ \n\t\u0001\u001b[0m \u007f ✓"}]},"n":[1E+2,-0,1.50,12345678901234567890]}"#,
        r#"{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"t1","timestamp":"2026-11-27T18:40:07.000Z","message":{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"Bash","input":{"seq":3,"type":"rewind","command":"echo 日本"}}]}}"#,
        r#"{"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"t1","timestamp":"2026-11-27T18:40:08.000Z","message":{"role":"user","content":"a string 😀"}}"#,
        r#"{"type":"progress","timestamp":"2026-11-27T18:40:09.000Z","data":{"é":"\ud83d\ude00 literal escapes are text"}}"#,
        r#"{"type":"last-prompt","lastPrompt":"ünïcode"}"#,
    ];
    let mut lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    // a string long enough to be stored once, by hash (a blob), spliced back in as it is read
    let long = "é 😀 \\n ".repeat(2_000);
    lines.push(format!(
        r#"{{"type":"user","uuid":"u4","parentUuid":"u3","sessionId":"t1","timestamp":"2026-11-27T18:40:10.000Z","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"c1","content":"{long}"}}]}}}}"#
    ));
    // the text serde_json makes of each line (an escape it need not write is written as the
    // character), numbers as appended: what load gave back before it read records as text, with
    // what is outside ASCII escaped (it parses to the same values)
    let want: Vec<String> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap().to_string())
        .map(|l| l.replace("1e+2", "1E+2"))
        .collect();
    for l in &lines {
        let r = mirror::append(&s, &k, &format!("[{l}]"), None).unwrap();
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    }
    let text = mirror::load(&s, &k).unwrap().unwrap();
    assert_eq!(text, ascii(&array(&want)));
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        parsed,
        serde_json::from_str::<Value>(&array(&want)).unwrap()
    );
    // and so through a handle of its own (the session no longer held)
    assert!(mirror::release(&s, &k).unwrap());
    assert_eq!(mirror::load(&s, &k).unwrap().unwrap(), ascii(&array(&want)));
}
