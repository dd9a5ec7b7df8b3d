//! `validateMessages`: the core validator for JS.

use napi_derive::napi;
use serde_json::Value;

use crate::error::{parse_json, to_json, Code, Result};

/// Problems of a message list (JSON text of an array) as a JSON array, checked as `target`
/// ('anthropic', 'openai-chat' or 'openai-responses') would.
#[napi(catch_unwind)]
pub fn validate_messages(json: String, target: String) -> Result<String> {
    crate::error::guard("validateMessages", || {
        let Value::Array(messages) = parse_json(&json, "validateMessages")? else {
            return Err(napi::Error::new(
                Code("INVALID_INPUT"),
                "validateMessages: expected an array of messages",
            ));
        };
        let problems = match target.as_str() {
            "anthropic" => threadline::validate_messages(&messages),
            "openai-chat" => threadline::validate_openai_chat(&messages),
            "openai-responses" => threadline::validate_openai_responses(&messages),
            other => {
                return Err(napi::Error::new(
                    Code("INVALID_INPUT"),
                    format!("validateMessages: options.target: expected 'anthropic', 'openai-chat' or 'openai-responses', got '{other}'"),
                ))
            }
        };
        to_json(&problems)
    })
}
