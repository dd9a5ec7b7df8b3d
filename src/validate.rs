//! `validateMessages`: the core validator for JS.

use napi_derive::napi;
use serde_json::Value;

use crate::error::{parse_json, to_json, Code, Result};

/// Problems of a message list (JSON text of an array) as a JSON array.
#[napi(catch_unwind)]
pub fn validate_messages(json: String) -> Result<String> {
    match parse_json(&json, "validateMessages")? {
        Value::Array(messages) => to_json(&threadline::validate_messages(&messages)),
        _ => Err(napi::Error::new(
            Code("INVALID_INPUT"),
            "validateMessages: expected an array of messages",
        )),
    }
}
