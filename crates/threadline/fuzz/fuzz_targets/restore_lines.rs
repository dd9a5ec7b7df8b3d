//! `Session::restore_messages` on arbitrary JSON lines (what a transcript import reads), then
//! everything read from the session: messages, turns, tokens, the next request for every target
//! (which must be valid for its provider), a snapshot and its import.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use threadline::{SessionOptions, Store};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let lines = common::lines(data);
    let store = Store::memory().expect("memory store");
    let s = store
        .create_session(SessionOptions::default())
        .expect("session");
    let items = lines.into_iter().map(Value::String).collect();
    if s.restore_messages(items).is_err() {
        return;
    }
    s.messages().expect("messages");
    s.turns().expect("turns");
    s.token_tracker().expect("token tracker");
    s.context_fill().expect("context fill");
    common::check_contexts(&s, data.len());
    let snap = s.snapshot().expect("snapshot");
    let other = Store::memory().expect("memory store");
    let back = other.import_snapshot(&snap).expect("a snapshot imports");
    assert_eq!(
        back.messages().expect("messages"),
        s.messages().expect("messages")
    );
});
