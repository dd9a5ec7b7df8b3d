//! Recovery through the core's public API: the tool-call journal, repairs, streamed responses,
//! snapshots and session ownership. (The SIGKILL crash matrix runs in the Node tests, with real
//! processes.)

use serde_json::{json, Value};
use threadline::{
    validate_messages, CallState, RecoverOptions, RepairKind, ResponseOptions, Session,
    SessionOptions, Store, StoreOptions, UnknownOutcome,
};

fn temp_store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").to_string_lossy().into_owned();
    (dir, path)
}

fn open(path: &str) -> Store {
    Store::open(Some(path), StoreOptions::default()).unwrap()
}

fn calls(ids: &[&str]) -> Value {
    let blocks: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": format!("echo {id}")}}))
        .collect();
    json!({"role": "assistant", "content": blocks})
}

fn kinds(r: &[threadline::Repair]) -> Vec<(Option<String>, RepairKind)> {
    r.iter().map(|r| (r.tool_use_id.clone(), r.kind)).collect()
}

fn assert_valid(s: &Session) {
    let problems = validate_messages(&s.messages().unwrap());
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn each_unanswered_call_is_repaired_with_the_truth_and_recovery_is_idempotent() {
    let (_dir, path) = temp_store();
    let store = open(&path);
    let s = store.create_session(SessionOptions::default()).unwrap();
    s.append(json!("clean up"), None).unwrap();
    s.append(calls(&["never", "started", "done", "denied"]), None)
        .unwrap();
    s.tool_call_started("started").unwrap();
    s.tool_call_started("done").unwrap();
    s.record_tool_outcome(
        "done",
        json!({"content": "ok", "toolUseResult": {"stdout": "ok"}}),
    )
    .unwrap();
    s.record_tool_outcome(
        "denied",
        json!({"content": "no", "is_error": true, "denied": true}),
    )
    .unwrap();
    let states: Vec<Value> = s
        .tool_calls(None)
        .unwrap()
        .iter()
        .map(|c| c["state"].clone())
        .collect();
    assert_eq!(
        states,
        vec![
            json!("requested"),
            json!("started"),
            json!("completed"),
            json!("denied")
        ]
    );
    assert_eq!(
        s.cached_tool_result("done").unwrap(),
        Some(json!({"type": "tool_result", "tool_use_id": "done", "content": "ok"}))
    );
    assert_eq!(s.cached_tool_result("started").unwrap(), None);

    let before = s.envelopes(0, None).unwrap().len();
    let plan = s.pending_repairs().unwrap();
    assert_eq!(
        s.envelopes(0, None).unwrap().len(),
        before,
        "the plan writes nothing"
    );
    let expected = vec![
        (Some("never".to_string()), RepairKind::NeverStarted),
        (Some("started".to_string()), RepairKind::UnknownOutcome),
        (Some("done".to_string()), RepairKind::Backfill),
        (Some("denied".to_string()), RepairKind::Backfill),
    ];
    assert_eq!(kinds(&plan), expected);

    let report = s.recover(&RecoverOptions::default()).unwrap();
    assert_eq!(kinds(&report.repairs), expected);
    assert_eq!(report.records_written, 1);
    assert_valid(&s);
    let msgs = s.messages().unwrap();
    let results = msgs[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert!(results[1]["content"]
        .as_str()
        .unwrap()
        .contains("outcome is unknown"));
    assert!(!results[1]["content"].as_str().unwrap().contains("rejected"));
    assert_eq!(results[2]["content"], json!("ok"));
    let repair = s.envelopes(2, Some(1)).unwrap().remove(0);
    assert_eq!(repair["type"], json!("tool_result"));
    assert_eq!(repair["repair"]["kind"], json!("tool_results"));
    assert_eq!(repair["uuid"], json!(report.repairs[0].record_uuid));

    let again = s.recover(&RecoverOptions::default()).unwrap();
    assert!(again.clean);
    assert_eq!(again.records_written, 0);
    assert_eq!(s.envelopes(0, None).unwrap().len(), before + 1);
}

#[test]
fn leave_writes_nothing_for_unknown_outcomes_and_replayed_calls_are_reported() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    s.append(json!("go"), None).unwrap();
    s.append(calls(&["a", "b"]), None).unwrap();
    s.tool_call_started("a").unwrap();
    s.tool_call_started("b").unwrap();
    let leave = RecoverOptions {
        unknown_outcome: UnknownOutcome::Leave,
        ..Default::default()
    };
    let r = s.recover(&leave).unwrap();
    assert_eq!(r.records_written, 0);
    assert!(r
        .repairs
        .iter()
        .all(|r| r.kind == RepairKind::Left && r.record_uuid.is_none()));
    // The caller re-ran `a` (safe) and recorded its real result.
    s.record_tool_outcome("a", json!({"content": "a again"}))
        .unwrap();
    let r = s
        .recover(&RecoverOptions {
            replayed: vec!["a".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        kinds(&r.repairs),
        vec![
            (Some("a".into()), RepairKind::Replayed),
            (Some("b".into()), RepairKind::UnknownOutcome)
        ]
    );
    assert_valid(&s);
}

#[test]
fn journal_follows_results_in_messages_and_orphans_stay_out_of_messages() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    s.append(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "ghost", "content": "?"}]}), None)
        .unwrap();
    assert_eq!(
        s.messages().unwrap().len(),
        0,
        "an orphan result is out of messages"
    );
    assert_eq!(
        s.envelopes(0, None).unwrap().len(),
        1,
        "and kept in the log"
    );
    s.append(json!("hi"), None).unwrap();
    s.append(calls(&["x", "y"]), None).unwrap();
    s.append(
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "x", "content": "fine"},
            {"type": "tool_result", "tool_use_id": "y", "content": "The user doesn't want to proceed with this tool use.", "is_error": true}]}),
        None,
    )
    .unwrap();
    let states: Vec<Value> = s
        .tool_calls(None)
        .unwrap()
        .iter()
        .map(|c| c["state"].clone())
        .collect();
    assert_eq!(states, vec![json!("completed"), json!("denied")]);
    assert_eq!(s.tool_calls(Some(CallState::Denied)).unwrap().len(), 1);
    assert_eq!(
        s.cached_tool_result("x").unwrap().unwrap()["content"],
        json!("fine")
    );
    assert!(s.pending_repairs().unwrap().is_empty());
    // Server tools settle inside their own message.
    s.append(
        json!({"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []},
            {"type": "text", "text": "found"}]}),
        None,
    )
    .unwrap();
    let srv = s.tool_calls(None).unwrap().pop().unwrap();
    assert_eq!(
        (srv["kind"].clone(), srv["state"].clone()),
        (json!("server_tool_use"), json!("completed"))
    );
    assert_eq!(s.tool_call_started("nope").unwrap_err().code(), "NOT_FOUND");
    assert_eq!(
        s.tool_call_started("x").unwrap_err().code(),
        "INVALID_INPUT"
    );
}

#[test]
fn a_stream_cut_off_is_closed_by_recovery_like_fail() {
    let (_dir, path) = temp_store();
    let id = {
        let store = open(&path);
        let s = store.create_session(SessionOptions::default()).unwrap();
        s.append(json!("explain"), None).unwrap();
        let mut w = s.begin_response(ResponseOptions::default());
        w.push(
            &s,
            json!({"type": "reasoning", "text": "let me think", "signature": "sig1"}),
        )
        .unwrap();
        w.push(&s, json!({"type": "text", "text": "The answer "}))
            .unwrap();
        w.push(&s, json!({"type": "text", "text": "is 42"}))
            .unwrap();
        w.push(&s, json!({"type": "reasoning", "text": "half a tho"}))
            .unwrap();
        // The process dies here: the writer is never finished.
        s.id().to_string()
    };
    let store = open(&path);
    let s = store.open_session(&id, None).unwrap();
    assert_eq!(
        s.messages().unwrap().len(),
        1,
        "partial output stays out of messages"
    );
    let plan = s.pending_repairs().unwrap();
    assert_eq!(plan[0].kind, RepairKind::CloseStream);
    let r = s.recover(&RecoverOptions::default()).unwrap();
    assert_eq!(r.records_written, 1);
    let msgs = s.messages().unwrap();
    assert_eq!(
        msgs[1]["content"],
        json!([{"type": "thinking", "thinking": "let me think", "signature": "sig1"},
               {"type": "text", "text": "The answer is 42"}])
    );
    let last = s.envelopes(0, None).unwrap().pop().unwrap();
    assert_eq!(last["type"], json!("error"));
    assert_eq!(last["error"]["code"], json!("INTERRUPTED"));
    assert_valid(&s);
    assert!(s.recover(&RecoverOptions::default()).unwrap().clean);
}

#[test]
fn finish_and_fail_end_a_stream() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    s.append(json!("hi"), None).unwrap();
    let mut w = s.begin_response(ResponseOptions {
        model: Some("m-1".into()),
        ..Default::default()
    });
    w.push(&s, json!({"type": "text", "text": "Hel"})).unwrap();
    w.push(&s, json!({"type": "text", "text": "lo"})).unwrap();
    let env = w.finish(&s, None).unwrap();
    assert_eq!(
        env["message"],
        json!({"role": "assistant", "content": [{"type": "text", "text": "Hello"}], "model": "m-1"})
    );
    assert_eq!(
        w.push(&s, json!({"type": "text", "text": "more"}))
            .unwrap_err()
            .code(),
        "INVALID_INPUT"
    );

    s.append(json!("again"), None).unwrap();
    let mut w = s.begin_response(ResponseOptions::default());
    w.push(&s, json!({"type": "text", "text": "partial"}))
        .unwrap();
    w.push(
        &s,
        json!({"type": "tool_call_delta", "id": "t1", "name": "Bash", "delta": "{\"comm"}),
    )
    .unwrap();
    let env = w.fail(&s, "overloaded", Some("529")).unwrap();
    assert_eq!(env["type"], json!("error"));
    assert_eq!(
        env["error"],
        json!({"message": "overloaded", "code": "529"})
    );
    assert_eq!(
        env["message"]["content"],
        json!([{"type": "text", "text": "partial"}])
    );
    assert_eq!(s.messages().unwrap().len(), 4);
    assert!(s.pending_repairs().unwrap().is_empty());
}

#[test]
fn snapshots_round_trip_and_refuse_tampering() {
    let s = Session::in_memory(SessionOptions {
        title: Some("t".into()),
        prompt_key: Some("p1".into()),
        ..Default::default()
    })
    .unwrap();
    let big = "x".repeat(20_000);
    s.append(json!("hi"), None).unwrap();
    s.append(calls(&["a"]), None).unwrap();
    s.tool_call_started("a").unwrap();
    s.append(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": big}]}), None)
        .unwrap();
    let snap = s.snapshot().unwrap();
    let other = Store::open(Some(":memory:"), StoreOptions::default()).unwrap();
    let back = other.import_snapshot(&snap).unwrap();
    assert_eq!(back.id(), s.id());
    assert_eq!(
        Value::Array(back.messages().unwrap()).to_string(),
        Value::Array(s.messages().unwrap()).to_string()
    );
    assert_eq!(
        back.envelopes(0, None).unwrap(),
        s.envelopes(0, None).unwrap()
    );
    assert_eq!(back.tool_calls(None).unwrap(), s.tool_calls(None).unwrap());
    assert_eq!(back.token_tracker().unwrap(), s.token_tracker().unwrap());
    assert_eq!(
        other.open_session(s.id(), Some("p2")).err().unwrap().code(),
        "PROMPT_MISMATCH"
    );

    let fresh = Store::open(Some(":memory:"), StoreOptions::default()).unwrap();
    for bad in [
        snap.replacen("hi", "ho", 1),
        snap[..snap.len() / 2].to_string(),
        snap.replacen("\"seq\":1", "\"seq\":2", 1),
        "{}".to_string(),
    ] {
        let err = fresh.import_snapshot(&bad).err().unwrap();
        assert_eq!(err.code(), "SNAPSHOT_INVALID", "{err}");
    }
    assert!(fresh.list_sessions(&Default::default()).unwrap().is_empty());
    assert_eq!(
        other.import_snapshot(&snap).err().unwrap().code(),
        "INVALID_INPUT"
    );
}

#[test]
fn a_live_owner_locks_writers_out_and_a_dead_one_leaves_an_interrupted_session() {
    let (_dir, path) = temp_store();
    let store = open(&path);
    let s = store.create_session(SessionOptions::default()).unwrap();
    s.append(json!("mine"), None).unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    // pid 1 runs for as long as the machine does: a live owner that is not us.
    let init_start = std::fs::read_to_string("/proc/1/stat")
        .ok()
        .and_then(|st| {
            st[st.rfind(')')? + 1..]
                .split_whitespace()
                .nth(19)?
                .parse::<i64>()
                .ok()
        })
        .unwrap_or(0);
    db.execute(
        "UPDATE sessions SET owner_pid = 1, owner_start = ?1",
        [init_start],
    )
    .unwrap();
    let other = open(&path);
    let s2 = other.open_session(s.id(), None).unwrap();
    assert_eq!(
        s2.append(json!("theirs"), None).unwrap_err().code(),
        "SESSION_LOCKED"
    );
    assert_eq!(s2.messages().unwrap().len(), 1, "readers are never blocked");
    assert!(other.interrupted_sessions().unwrap().is_empty());
    // An owner whose process is gone: the session is interrupted, and the next writer takes it.
    db.execute(
        "UPDATE sessions SET owner_pid = 2147483646, owner_start = 1",
        [],
    )
    .unwrap();
    let found = other.interrupted_sessions().unwrap();
    assert_eq!(
        found.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        vec![s.id()]
    );
    s2.append(json!("theirs"), None).unwrap();
    assert!(other.interrupted_sessions().unwrap().is_empty());
}
