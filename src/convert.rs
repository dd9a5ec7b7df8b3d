//! The provider converters for JS: JSON text in, JSON text out.

use napi_derive::napi;
use serde_json::Value;
use threadline::convert::{self, check_neutral, IdMap};

use crate::error::{parse_json, to_js, to_json, Code, OrThrow, Result};

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToOptions {
    system: Option<Value>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FromAnthropicOptions {
    system: Option<Value>,
    id_map: Option<IdMap>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FromOptions {
    id_map: Option<IdMap>,
}

fn list(json: &str, op: &str, what: &str) -> Result<Vec<Value>> {
    match parse_json(json, op)? {
        Value::Array(v) => Ok(v),
        _ => Err(napi::Error::new(
            Code("INVALID_INPUT"),
            format!("{op}: expected an array of {what}"),
        )),
    }
}

fn options<T: serde::de::DeserializeOwned + Default>(json: Option<String>, op: &str) -> Result<T> {
    let what = format!("{op}: options");
    match json {
        None => Ok(T::default()),
        Some(t) => match parse_json(&t, &what)? {
            Value::Null => Ok(T::default()),
            v => threadline::from_json(v, &what).or_throw(),
        },
    }
}

fn to(
    op: &str,
    messages_json: String,
    options_json: Option<String>,
    f: fn(&[Value], Option<&Value>) -> convert::Converted,
) -> Result<String> {
    let messages = list(&messages_json, op, "messages")?;
    let o: ToOptions = options(options_json, op)?;
    let system = o.system.filter(|s| !s.is_null());
    check_neutral(&messages, system.as_ref()).map_err(|e| to_js(e.during(op)))?;
    to_json(&f(&messages, system.as_ref()))
}

#[napi(js_name = "toAnthropic", catch_unwind)]
pub fn to_anthropic(messages_json: String, options_json: Option<String>) -> Result<String> {
    crate::error::guard("toAnthropic", || {
        to(
            "toAnthropic",
            messages_json,
            options_json,
            convert::to_anthropic,
        )
    })
}

#[napi(js_name = "toOpenAIChat", catch_unwind)]
pub fn to_openai_chat(messages_json: String, options_json: Option<String>) -> Result<String> {
    crate::error::guard("toOpenaiChat", || {
        to(
            "toOpenAIChat",
            messages_json,
            options_json,
            convert::to_openai_chat,
        )
    })
}

#[napi(js_name = "toOpenAIResponses", catch_unwind)]
pub fn to_openai_responses(messages_json: String, options_json: Option<String>) -> Result<String> {
    crate::error::guard("toOpenaiResponses", || {
        to(
            "toOpenAIResponses",
            messages_json,
            options_json,
            convert::to_openai_responses,
        )
    })
}

#[napi(js_name = "fromAnthropic", catch_unwind)]
pub fn from_anthropic(messages_json: String, options_json: Option<String>) -> Result<String> {
    crate::error::guard("fromAnthropic", || {
        let op = "fromAnthropic";
        let messages = list(&messages_json, op, "messages")?;
        let o: FromAnthropicOptions = options(options_json, op)?;
        let system = o.system.filter(|s| !s.is_null());
        to_json(&convert::from_anthropic(&messages, system.as_ref(), o.id_map.as_ref()).or_throw()?)
    })
}

#[napi(js_name = "fromOpenAIChat", catch_unwind)]
pub fn from_openai_chat(messages_json: String, options_json: Option<String>) -> Result<String> {
    crate::error::guard("fromOpenaiChat", || {
        let op = "fromOpenAIChat";
        let messages = list(&messages_json, op, "messages")?;
        let o: FromOptions = options(options_json, op)?;
        to_json(&convert::from_openai_chat(&messages, o.id_map.as_ref()).or_throw()?)
    })
}

#[napi(js_name = "fromOpenAIResponses", catch_unwind)]
pub fn from_openai_responses(items_json: String, options_json: Option<String>) -> Result<String> {
    crate::error::guard("fromOpenaiResponses", || {
        let op = "fromOpenAIResponses";
        let items = list(&items_json, op, "items")?;
        let o: FromOptions = options(options_json, op)?;
        to_json(&convert::from_openai_responses(&items, o.id_map.as_ref()).or_throw()?)
    })
}
