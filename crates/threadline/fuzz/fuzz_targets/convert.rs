//! The converters on arbitrary input: a JSON array of messages (or `{messages, system}`) through
//! `to_anthropic`, `to_openai_chat` and `to_openai_responses`, their outputs back through the
//! `from_*` functions with the id map, and the input as provider messages through `from_*`.
//! Nothing may panic; a neutral list that passes `check_neutral` and `validate_messages`
//! converts to a list the OpenAI validators accept.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use threadline::convert;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(v) = threadline::parse(&text) else {
        return;
    };
    let (messages, system) = match &v {
        Value::Array(a) => (a.clone(), None),
        Value::Object(o) => match o.get("messages") {
            Some(Value::Array(a)) => (a.clone(), o.get("system").cloned()),
            _ => (vec![v.clone()], None),
        },
        other => (vec![other.clone()], None),
    };
    let system = system.as_ref();
    let neutral_ok = convert::check_neutral(&messages, system).is_ok();

    let a = convert::to_anthropic(&messages, system);
    let _ = convert::from_anthropic(&a.messages, a.system.as_ref(), Some(&a.id_map));
    let c = convert::to_openai_chat(&messages, system);
    let chat_back = convert::from_openai_chat(&c.messages, Some(&c.id_map));
    let r = convert::to_openai_responses(&messages, system);
    let resp_back = convert::from_openai_responses(&r.messages, Some(&r.id_map));
    if neutral_ok {
        assert!(chat_back.is_ok(), "{chat_back:?}");
        assert!(resp_back.is_ok(), "{resp_back:?}");
    }

    let _ = convert::from_anthropic(&messages, system, None);
    let _ = convert::from_openai_chat(&messages, None);
    let _ = convert::from_openai_responses(&messages, None);
    let _ = convert::validate_openai_chat(&messages);
    let _ = convert::validate_openai_responses(&messages);
    let _ = threadline::validate_messages(&messages);
});
