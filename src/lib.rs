//! Node.js binding for the Threadline core: conversions and classes only. Structured values cross
//! as JSON text (parsed by the JS facade in index.js); bulk reads cross as one-byte strings.
#![deny(clippy::all)]
// In a test build napi-rs registers no exports, so every #[napi] item looks unused; the binding is
// tested from Node (__test__/), not by cargo test.
#![cfg_attr(test, allow(dead_code))]

mod context;
mod convert;
mod error;
mod interop;
#[macro_use]
mod job;
// after `job`: it uses its macro
mod claude_code;
mod promise;
mod recovery;
mod session;
mod store;
mod text;
mod validate;
mod watch;

use napi_derive::napi;

/// THREADLINE_HOME/threadline.db if set, else the platform's per-user data dir + threadline/threadline.db.
#[napi]
pub fn default_store_path() -> String {
    threadline::default_store_path()
        .to_string_lossy()
        .into_owned()
}

/// The core's error codes, for the check that `ERROR_CODES` in index.js lists the same.
#[napi]
pub fn error_codes() -> Vec<&'static str> {
    threadline::Error::CODES.to_vec()
}

/// Panics inside `guard`, for the test that a panic reaches JS as a coded error. Not exported by
/// index.js.
#[napi(js_name = "__panicForTest")]
pub fn panic_for_test() -> error::Result<()> {
    error::guard("__panicForTest", || panic!("a deliberate panic"))
}
