//! The stream assembler (`threadline::Assembler`) on arbitrary chunk sequences: one JSON chunk a
//! line (raw Anthropic stream events or the simple chunks). A rejected chunk changes nothing;
//! nothing panics; what `finish` gives is a message `append` accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use threadline::{Assembler, Session, SessionOptions};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let mut a = Assembler::new();
    for line in common::lines(data) {
        let Ok(chunk) = threadline::parse(&line) else {
            continue;
        };
        let before = a.message();
        if a.push(&chunk).is_err() {
            assert_eq!(a.message(), before, "a rejected chunk changed the message");
        }
        a.message();
        a.salvage();
        a.open_blocks();
    }
    let salvaged = a.salvage();
    if let Ok(message) = a.finish() {
        let s = Session::in_memory(SessionOptions::default()).expect("session");
        s.append(Value::String("go".into()), None).expect("prompt");
        // The assembled message is stored as the response (the SDK may build shapes append
        // refuses, e.g. a block with an empty id: then it is an error, not a panic).
        let _ = s.append(message, None);
        let _ = salvaged;
    }
});
