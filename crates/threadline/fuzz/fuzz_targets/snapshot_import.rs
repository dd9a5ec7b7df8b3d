//! `Store::import_snapshot` on altered snapshots. A JSON input with a `body` is sealed again
//! (checksum recomputed) so that altered bodies get past the checksum to the import itself;
//! anything else goes in as it is. An imported session must read back and build valid requests.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sha2::{Digest, Sha256};
use threadline::Store;

#[path = "common.rs"]
mod common;

fn reseal(text: &str) -> Option<String> {
    let doc: Value = serde_json::from_str(text).ok()?;
    let body = doc.get("body")?;
    let body = serde_json::to_string(body).ok()?;
    let sum: String = Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(format!(
        r#"{{"format":"threadline.snapshot","version":1,"sha256":"{sum}","body":{body}}}"#
    ))
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = reseal(&text).unwrap_or_else(|| text.into_owned());
    let store = Store::memory().expect("memory store");
    let Ok(s) = store.import_snapshot(&text) else {
        return;
    };
    s.messages().expect("messages");
    s.turns().expect("turns");
    s.token_tracker().expect("token tracker");
    common::check_contexts(&s, data.len());
    s.snapshot().expect("snapshot");
});
