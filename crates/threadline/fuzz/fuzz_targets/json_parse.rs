//! `threadline::parse` (caller JSON with path-bearing errors): never panics, an error message
//! stays bounded, and what parses writes back to text that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match threadline::parse(&text) {
        Ok(v) => {
            let again = serde_json::to_string(&v).expect("a parsed value writes");
            let back = threadline::parse(&again).expect("written JSON parses");
            assert_eq!(v, back);
        }
        Err(e) => {
            assert_eq!(e.code(), "INVALID_INPUT");
            let m = e.bounded_message();
            assert!(m.chars().count() <= 400 + 40, "{m}");
        }
    }
});
