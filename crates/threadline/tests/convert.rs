//! The provider converters: round trips on the real Claude Code sessions and on hand-written
//! conversations (images, documents, errors, parallel calls, long and odd ids), warnings, id
//! mapping, the OpenAI validators, and errors with paths.

use std::path::PathBuf;

use serde_json::{json, Value};
use threadline::convert::{check_neutral, codes, IdMap};
use threadline::{
    from_anthropic, from_openai_chat, from_openai_responses, to_anthropic, to_openai_chat,
    to_openai_responses, validate_messages, validate_openai_chat, validate_openai_responses,
};

const FIXTURES: &[&str] = &["short.jsonl", "tool_heavy.jsonl", "compacted-session.jsonl"];

/// The messages of a Claude Code session, string content as a text block, consecutive records of
/// one role merged (tool results first), as a request sends them.
fn fixture(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/claude-code")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut out: Vec<Value> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let rec: Value = serde_json::from_str(line).unwrap();
        let Some(m) = rec.get("message") else {
            continue;
        };
        let mut m = m.clone();
        if let Some(Value::String(s)) = m.get("content") {
            m["content"] = json!([{"type": "text", "text": s}]);
        }
        match out.last_mut() {
            Some(last) if last["role"] == m["role"] => {
                let add = m["content"].as_array().unwrap().clone();
                let c = last["content"].as_array_mut().unwrap();
                c.extend(add);
                c.sort_by_key(|b| b["type"] != "tool_result");
            }
            _ => out.push(m),
        }
    }
    out
}

/// Keeps only `role` and `content` (what a request message has).
fn request_shape(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| json!({"role": m["role"], "content": m["content"]}))
        .collect()
}

/// What an OpenAI target can express of `messages`: no thinking, no `caller: direct`, no
/// `is_error`; for Chat Completions, text before the tool calls.
fn openai_expressible(messages: &[Value], chat: bool) -> Vec<Value> {
    request_shape(messages)
        .into_iter()
        .map(|mut m| {
            let c = m["content"].as_array_mut().unwrap();
            c.retain(|b| b["type"] != "thinking" && b["type"] != "redacted_thinking");
            for b in c.iter_mut() {
                let o = b.as_object_mut().unwrap();
                o.shift_remove("caller");
                o.shift_remove("is_error");
            }
            if chat {
                c.sort_by_key(|b| b["type"] == "tool_use");
            }
            m
        })
        .collect()
}

fn count(blocks_of: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    blocks_of
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| pred(b))
        .count()
}

fn codes_of(w: &[threadline::Warning]) -> Vec<&str> {
    w.iter().map(|w| w.code.as_str()).collect()
}

#[test]
fn fixtures_round_trip_through_anthropic() {
    for name in FIXTURES {
        let m = fixture(name);
        assert!(validate_messages(&m).is_empty(), "{name}");
        let to = to_anthropic(&m, Some(&json!("You are Claude Code.")));
        assert_eq!(to.warnings, vec![], "{name}");
        assert!(to.id_map.is_empty());
        assert_eq!(to.system, Some(json!("You are Claude Code.")));
        assert!(validate_messages(&to.messages).is_empty());
        for out in &to.messages {
            let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
            assert_eq!(
                keys,
                ["role", "content"],
                "{name}: request messages are role + content"
            );
        }
        let back = from_anthropic(&to.messages, to.system.as_ref(), Some(&to.id_map)).unwrap();
        assert_eq!(back.messages, request_shape(&m), "{name}");
        // byte-identical content, key order and numbers included
        for (a, b) in back.messages.iter().zip(&m) {
            assert_eq!(a["content"].to_string(), b["content"].to_string());
        }
        assert_eq!(back.system, Some(json!("You are Claude Code.")));
    }
}

#[test]
fn fixtures_round_trip_through_openai_chat() {
    for name in FIXTURES {
        let m = fixture(name);
        let to = to_openai_chat(&m, Some(&json!("sys")));
        assert_eq!(to.messages[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(validate_openai_chat(&to.messages), vec![], "{name}");
        let thinking = count(&m, |b| b["type"] == "thinking");
        let errors = count(&m, |b| b["is_error"] == true);
        let w = codes_of(&to.warnings);
        assert_eq!(
            w.iter().filter(|c| **c == codes::THINKING_DROPPED).count(),
            thinking
        );
        assert_eq!(
            w.iter().filter(|c| **c == codes::IS_ERROR_DROPPED).count(),
            errors
        );
        assert!(
            w.iter().all(|c| [
                codes::THINKING_DROPPED,
                codes::IS_ERROR_DROPPED,
                codes::REORDERED
            ]
            .contains(c)),
            "{name}: {w:?}"
        );
        // every tool result became a tool message right after its call
        let tools = to.messages.iter().filter(|x| x["role"] == "tool").count();
        assert_eq!(tools, count(&m, |b| b["type"] == "tool_result"));
        let back = from_openai_chat(&to.messages, Some(&to.id_map)).unwrap();
        assert_eq!(back.system, Some(json!("sys")));
        assert_eq!(back.messages, openai_expressible(&m, true), "{name}");
        assert_eq!(back.warnings, vec![]);
    }
}

#[test]
fn fixtures_round_trip_through_openai_responses() {
    for name in FIXTURES {
        let m = fixture(name);
        let to = to_openai_responses(&m, Some(&json!([{"type": "text", "text": "sys"}])));
        assert_eq!(
            to.messages[0],
            json!({"type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys"}]})
        );
        assert_eq!(validate_openai_responses(&to.messages), vec![], "{name}");
        let w = codes_of(&to.warnings);
        assert!(
            w.iter()
                .all(|c| [codes::THINKING_DROPPED, codes::IS_ERROR_DROPPED].contains(c)),
            "{name}: {w:?}"
        );
        let calls = to
            .messages
            .iter()
            .filter(|x| x["type"] == "function_call")
            .count();
        assert_eq!(calls, count(&m, |b| b["type"] == "tool_use"));
        let back = from_openai_responses(&to.messages, Some(&to.id_map)).unwrap();
        assert_eq!(back.system, Some(json!([{"type": "text", "text": "sys"}])));
        assert_eq!(back.messages, openai_expressible(&m, false), "{name}");
    }
}

/// A conversation with what each side has: images, documents, an error, parallel calls, ids
/// too long for Chat Completions and with characters Anthropic rejects.
fn rich() -> Vec<Value> {
    let long = format!("call_{}", "x".repeat(40)); // 45 characters: over Chat's 40, within 64
    let m = json!([
        {"role": "user", "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}, "title": "report.pdf"},
        ]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "functions.read:0", "name": "read", "input": {"path": "a.txt", "n": 1.50}},
            {"type": "tool_use", "id": long, "name": "read", "input": {"path": "b.txt"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "functions.read:0", "content": "alpha"},
            {"type": "tool_result", "tool_use_id": long, "content": [{"type": "text", "text": "no such file"}], "is_error": true},
            {"type": "text", "text": "Go on."},
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]);
    // numbers as written (json! would make 1.50 a float 1.5)
    serde_json::from_str(&m.to_string().replace("\"n\":1.5", "\"n\":1.50")).unwrap()
}

#[test]
fn rich_conversation_through_openai_chat() {
    let m = rich();
    let to = to_openai_chat(&m, None);
    assert_eq!(validate_openai_chat(&to.messages), vec![]);
    let long = format!("call_{}", "x".repeat(40));
    // the 45-character id is mapped, the same way on the call and on its result
    let mapped = to.messages[1]["tool_calls"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(mapped.starts_with("tl_") && mapped.len() == 35);
    assert_eq!(to.messages[3]["tool_call_id"], json!(mapped));
    assert_eq!(to.id_map.get(&mapped), Some(&long));
    assert_eq!(
        to.id_map.len(),
        1,
        "'functions.read:0' fits Chat Completions"
    );
    assert_eq!(
        to.messages,
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                {"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"}},
            ]},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "functions.read:0", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\",\"n\":1.50}"}},
                {"id": mapped, "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"b.txt\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "functions.read:0", "content": "alpha"},
            {"role": "tool", "tool_call_id": mapped, "content": [{"type": "text", "text": "no such file"}]},
            {"role": "user", "content": "Go on."},
            {"role": "assistant", "content": "Done."},
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    assert_eq!(codes_of(&to.warnings), vec![codes::IS_ERROR_DROPPED]);
    assert_eq!(to.warnings[0].path, "messages[2].content[1]");
    let back = from_openai_chat(&to.messages, Some(&to.id_map)).unwrap();
    let mut expected = m.clone();
    expected[2]["content"][1]
        .as_object_mut()
        .unwrap()
        .shift_remove("is_error");
    assert_eq!(back.messages, expected);
    // without the map, the mapped id stays
    let raw = from_openai_chat(&to.messages, None).unwrap();
    assert_eq!(raw.messages[1]["content"][2]["id"], json!(mapped));
}

#[test]
fn rich_conversation_through_openai_responses() {
    let m = rich();
    let to = to_openai_responses(&m, None);
    assert_eq!(validate_openai_responses(&to.messages), vec![]);
    assert!(to.id_map.is_empty(), "ids up to 64 characters are kept");
    let types: Vec<&str> = to
        .messages
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "message",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "message",
            "message"
        ]
    );
    assert_eq!(
        to.messages[0]["content"],
        json!([
            {"type": "input_text", "text": "What is in these?"},
            {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            {"type": "input_image", "detail": "auto", "image_url": "https://example.com/cat.jpg"},
            {"type": "input_file", "filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
        ])
    );
    assert_eq!(
        to.messages[1],
        json!({"type": "message", "role": "assistant", "content": "Let me look."})
    );
    assert_eq!(
        to.messages[5]["output"],
        json!([{"type": "input_text", "text": "no such file"}])
    );
    let back = from_openai_responses(&to.messages, Some(&to.id_map)).unwrap();
    let mut expected = m.clone();
    expected[2]["content"][1]
        .as_object_mut()
        .unwrap()
        .shift_remove("is_error");
    assert_eq!(back.messages, expected);
}

#[test]
fn long_ids_are_mapped_for_responses_and_odd_ones_for_anthropic() {
    let long = "c".repeat(70);
    let m = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": long, "name": "a", "input": {}},
            {"type": "tool_use", "id": "functions.b:1", "name": "b", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": long, "content": "1"},
            {"type": "tool_result", "tool_use_id": "functions.b:1", "content": "2"},
        ]},
    ]);
    let m = m.as_array().unwrap();
    let r = to_openai_responses(m, None);
    assert_eq!(r.id_map.len(), 1);
    let (target, original) = r.id_map.iter().next().unwrap();
    assert_eq!(original, &long);
    assert_eq!(r.messages[1]["call_id"], json!(target));
    assert_eq!(r.messages[3]["call_id"], json!(target));
    assert_eq!(validate_openai_responses(&r.messages), vec![]);
    let a = to_anthropic(m, None);
    assert_eq!(
        a.id_map.len(),
        1,
        "70 word characters are fine for Anthropic"
    );
    let (t, o) = a.id_map.iter().next().unwrap();
    assert_eq!(o, "functions.b:1");
    assert!(t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    assert_eq!(a.messages[1]["content"][1]["id"], json!(t));
    assert_eq!(a.messages[2]["content"][1]["tool_use_id"], json!(t));
    let back = from_anthropic(&a.messages, None, Some(&a.id_map)).unwrap();
    assert_eq!(back.messages[1]["content"][1]["id"], json!("functions.b:1"));
    assert_eq!(
        back.messages[2]["content"][1]["tool_use_id"],
        json!("functions.b:1")
    );
    // deterministic: the same mapping every time
    assert_eq!(to_anthropic(m, None).id_map, a.id_map);
}

#[test]
fn what_openai_cannot_express_is_warned_about() {
    let m = json!([
        {"role": "user", "content": [
            {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}, "context": "ctx"},
            {"type": "document", "source": {"type": "url", "url": "https://x/y.pdf"}},
            {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "tool_use", "id": "t1", "name": "shot", "input": {}},
            {"type": "text", "text": "after", "citations": [{"type": "char_location"}]},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "see image"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAA"}},
            ]},
        ]},
    ]);
    let m = m.as_array().unwrap();
    let chat = to_openai_chat(m, None);
    let got: Vec<(&str, &str)> = chat
        .warnings
        .iter()
        .map(|w| (w.path.as_str(), w.code.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("messages[0].content[0]", codes::CACHE_CONTROL_DROPPED),
            ("messages[0].content[1]", codes::FIELD_DROPPED),
            ("messages[0].content[1]", codes::DOCUMENT_AS_TEXT),
            ("messages[0].content[2]", codes::UNSUPPORTED_SOURCE),
            ("messages[0].content[3]", codes::UNSUPPORTED_SOURCE),
            ("messages[1].content[0]", codes::THINKING_DROPPED),
            ("messages[1].content[1]", codes::THINKING_DROPPED),
            ("messages[1].content[2]", codes::BLOCK_DROPPED),
            ("messages[1].content[3]", codes::BLOCK_DROPPED),
            ("messages[1].content[5]", codes::REORDERED),
            ("messages[1].content[5]", codes::CITATIONS_DROPPED),
            (
                "messages[2].content[0].content[1]",
                codes::TOOL_RESULT_CONTENT_MOVED
            ),
        ]
    );
    assert_eq!(validate_openai_chat(&chat.messages), vec![]);
    // the image of the tool result goes in a user message right after the tool message
    assert_eq!(
        chat.messages[2..],
        json!([
            {"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "see image"}]},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAA"}}]},
        ])
        .as_array()
        .unwrap()[..]
    );
    let resp = to_openai_responses(m, None);
    let rcodes = codes_of(&resp.warnings);
    assert!(rcodes.contains(&codes::THINKING_DROPPED));
    assert!(
        !rcodes.contains(&codes::TOOL_RESULT_CONTENT_MOVED),
        "Responses outputs take images"
    );
    assert_eq!(
        resp.messages.last().unwrap()["output"][1],
        json!({"type": "input_image", "detail": "auto", "image_url": "data:image/jpeg;base64,AAA"})
    );
    // a document URL is an input_file for Responses
    assert_eq!(
        resp.messages[0]["content"][2],
        json!({"type": "input_file", "file_url": "https://x/y.pdf"})
    );
    assert_eq!(validate_openai_responses(&resp.messages), vec![]);
}

/// A response of the Responses API: reasoning, a message, two parallel function calls.
fn responses_output() -> Vec<Value> {
    json!([
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking."}], "encrypted_content": "gAAAA"},
        {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant", "phase": "commentary",
         "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "Checking both."}]},
        {"id": "fc_1", "type": "function_call", "status": "completed", "arguments": "{\"city\": \"Paris\"}", "call_id": "call_a", "name": "weather"},
        {"id": "fc_2", "type": "function_call", "status": "completed", "arguments": "{\"city\":\"Rome\"}", "call_id": "call_b", "name": "weather"},
    ])
    .as_array()
    .unwrap()
    .clone()
}

#[test]
fn a_responses_output_keeps_its_items_and_goes_back_as_it_was() {
    let items = responses_output();
    let from = from_openai_responses(&items, None).unwrap();
    assert_eq!(from.messages.len(), 1);
    assert_eq!(
        from.messages[0],
        json!({"role": "assistant", "content": [
            {"id": "rs_1", "type": "openai_reasoning", "summary": [{"type": "summary_text", "text": "Thinking."}], "encrypted_content": "gAAAA"},
            {"type": "text", "text": "Checking both.", "openai": {"id": "msg_1", "status": "completed", "phase": "commentary"}},
            {"type": "tool_use", "id": "call_a", "name": "weather", "input": {"city": "Paris"},
             "openai": {"id": "fc_1", "status": "completed", "arguments": "{\"city\": \"Paris\"}"}},
            {"type": "tool_use", "id": "call_b", "name": "weather", "input": {"city": "Rome"},
             "openai": {"id": "fc_2", "status": "completed"}},
        ]})
    );
    let mut conv = vec![json!({"role": "user", "content": "Weather?"})];
    conv.extend(from.messages.clone());
    conv.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_a", "content": "sunny"},
        {"type": "tool_result", "tool_use_id": "call_b", "content": "rain"},
    ]}));
    let to = to_openai_responses(&conv, None);
    assert_eq!(to.warnings, vec![]);
    assert_eq!(validate_openai_responses(&to.messages), vec![]);
    // the response's items come back as they were (output_text's empty logprobs aside)
    let mut expected = items.clone();
    expected[1]["content"][0]
        .as_object_mut()
        .unwrap()
        .shift_remove("logprobs");
    assert_eq!(to.messages[1..5], expected[..]);
    assert_eq!(
        to.messages[2]["content"][0]["annotations"],
        json!([]),
        "output_text always has annotations"
    );
    assert_eq!(to.messages[3]["arguments"], json!("{\"city\": \"Paris\"}"));
    // Anthropic and Chat Completions get none of it but the text and the calls
    let a = to_anthropic(&conv, None);
    assert_eq!(codes_of(&a.warnings), vec![codes::REASONING_DROPPED]);
    assert_eq!(
        a.messages[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "call_a", "name": "weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "call_b", "name": "weather", "input": {"city": "Rome"}},
        ]})
    );
    let c = to_openai_chat(&conv, None);
    assert_eq!(codes_of(&c.warnings), vec![codes::REASONING_DROPPED]);
    assert_eq!(
        c.messages[1]["tool_calls"][0]["function"]["arguments"],
        json!("{\"city\": \"Paris\"}"),
        "the exact arguments text goes back"
    );
}

#[test]
fn chat_completion_messages_come_in_and_go_back() {
    let msgs = json!([
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "Look"},
            {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "high"}},
            {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
        ], "name": "ann"},
        {"role": "assistant", "content": null, "refusal": null, "annotations": [], "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "call_2", "type": "custom", "custom": {"name": "g", "input": "free text"}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "tool", "tool_call_id": "call_2", "content": "ok2"},
        {"role": "assistant", "content": null, "refusal": "I can't."},
    ]);
    let msgs = msgs.as_array().unwrap();
    let from = from_openai_chat(msgs, None).unwrap();
    assert_eq!(from.system, Some(json!("Be brief.")));
    assert_eq!(from.warnings, vec![]);
    assert_eq!(
        from.messages,
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Look"},
                {"type": "image", "source": {"type": "url", "url": "https://x/cat.png"}, "openai": {"detail": "high"}},
                {"type": "openai_part", "part": {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}}},
            ], "openai": {"name": "ann"}},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "f", "input": {}},
                {"type": "tool_use", "id": "call_2", "name": "g", "input": {"input": "free text"}, "openai": {"type": "custom"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "ok2"},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "I can't.", "openai": {"refusal": true}}]},
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let to = to_openai_chat(&from.messages, from.system.as_ref());
    assert_eq!(to.warnings, vec![]);
    assert_eq!(validate_openai_chat(&to.messages), vec![]);
    assert_eq!(
        to.messages[0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(to.messages[1], msgs[1]);
    assert_eq!(
        to.messages[2],
        json!({"role": "assistant", "content": null, "tool_calls": msgs[2]["tool_calls"]})
    );
    assert_eq!(to.messages[3..5], msgs[3..5]);
    assert_eq!(
        to.messages[5],
        json!({"role": "assistant", "content": null, "refusal": "I can't."})
    );
    // a custom tool call goes to Responses as a custom_tool_call with its output
    let r = to_openai_responses(&from.messages, None);
    assert_eq!(
        r.messages[2],
        json!({"type": "custom_tool_call", "call_id": "call_2", "name": "g", "input": "free text"})
    );
    assert_eq!(r.messages[4]["type"], json!("custom_tool_call_output"));
    assert_eq!(validate_openai_responses(&r.messages), vec![]);
}

#[test]
fn bad_input_is_an_error_naming_the_path() {
    let e = from_openai_chat(
        &[
            json!({"role": "user", "content": "x"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}),
        ],
        None,
    )
    .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
    assert!(
        e.message().starts_with(
            "fromOpenAIChat: messages[1].tool_calls[0].function.arguments: not valid JSON"
        ),
        "{}",
        e.message()
    );
    let e = from_openai_responses(
        &[json!({"type": "function_call", "name": "f", "arguments": "{}"})],
        None,
    )
    .unwrap_err();
    assert_eq!(
        e.message(),
        "fromOpenAIResponses: items[0].call_id: expected a string"
    );
    let e = from_anthropic(
        &[json!({"role": "user", "content": [{"type": "tool_result"}]})],
        None,
        None,
    )
    .unwrap_err();
    assert_eq!(
        e.message(),
        "fromAnthropic: messages[0].content[0].tool_use_id: expected a string"
    );
    let e = check_neutral(&[json!({"role": "tool", "content": "x"})], None).unwrap_err();
    assert!(e
        .message()
        .starts_with("messages[0].role: expected 'user', 'assistant' or 'system'"));
    let e = check_neutral(&[], Some(&json!(5))).unwrap_err();
    assert_eq!(
        e.message(),
        "system: expected a string or an array of text blocks"
    );
}

#[test]
fn the_openai_validators_find_what_the_api_rejects() {
    use threadline::ProblemCode::*;
    let chat = json!([
        {"role": "user", "content": ""},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b".repeat(41), "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "user", "content": "late"},
        {"role": "tool", "tool_call_id": "b".repeat(41), "content": "2"},
        {"role": "assistant", "content": null},
    ]);
    let got: Vec<(String, threadline::ProblemCode)> =
        validate_openai_chat(chat.as_array().unwrap())
            .into_iter()
            .map(|p| (p.path, p.code))
            .collect();
    assert_eq!(
        got,
        vec![
            ("[0].content".into(), EmptyContent),
            ("[1].tool_calls[1].id".into(), InvalidToolId),
            ("[1].tool_calls[1]".into(), ToolUseWithoutResult),
            ("[4]".into(), ToolResultWithoutToolUse),
            ("[5]".into(), EmptyContent),
        ]
    );
    let items = json!([
        {"type": "message", "role": "user", "content": []},
        {"type": "function_call_output", "call_id": "x", "output": "early"},
        {"type": "function_call", "call_id": "x", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "y", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "x", "output": "1"},
        {"type": "function_call_output", "call_id": "x", "output": "2"},
    ]);
    let got: Vec<(String, threadline::ProblemCode)> =
        validate_openai_responses(items.as_array().unwrap())
            .into_iter()
            .map(|p| (p.path, p.code))
            .collect();
    assert_eq!(
        got,
        vec![
            ("[0].content".into(), EmptyContent),
            ("[1]".into(), ToolResultWithoutToolUse),
            ("[3]".into(), ToolUseWithoutResult),
            ("[5]".into(), DuplicateToolResult),
        ]
    );
}

#[test]
fn a_message_left_empty_is_left_out_and_the_list_stays_valid() {
    let m = json!([
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "openai_reasoning", "id": "rs_1", "summary": []}]},
        {"role": "user", "content": "b"},
    ]);
    let a = to_anthropic(m.as_array().unwrap(), None);
    assert_eq!(
        codes_of(&a.warnings),
        vec![codes::REASONING_DROPPED, codes::MESSAGE_DROPPED]
    );
    assert_eq!(
        a.messages,
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
        ]
    );
    assert!(validate_messages(&a.messages).is_empty());
}

#[test]
fn id_maps_are_plain_maps() {
    let mut map = IdMap::new();
    map.insert("tl_x".into(), "orig".into());
    let back = from_openai_responses(
        &[
            json!({"type": "function_call", "call_id": "tl_x", "name": "f", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "tl_x", "output": "o"}),
        ],
        Some(&map),
    )
    .unwrap();
    assert_eq!(back.messages[0]["content"][0]["id"], json!("orig"));
    assert_eq!(back.messages[1]["content"][0]["tool_use_id"], json!("orig"));
}

/// Found by the `convert` fuzz target: an `openai_item` block without an item went out as a
/// `null` item, which `from_openai_responses` (and the API) refuse. One holding a call or a
/// message would be a call without its output. Both are left out, with a warning.
#[test]
fn an_openai_item_block_goes_back_only_as_an_item_of_its_own() {
    let messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "go"}, {"type": "openai_item", "content": "x"}]}),
        json!({"role": "assistant", "content": [
            {"type": "openai_item", "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}},
            {"type": "openai_item", "item": {"type": "web_search_call", "id": "ws_1", "status": "completed"}},
            {"type": "text", "text": "done"}
        ]}),
    ];
    check_neutral(&messages, None).unwrap();
    let out = to_openai_responses(&messages, None);
    assert!(
        validate_openai_responses(&out.messages).is_empty(),
        "{:?}",
        out.messages
    );
    assert_eq!(
        out.messages
            .iter()
            .filter(|i| i["type"] == "web_search_call")
            .count(),
        1
    );
    assert!(!out
        .messages
        .iter()
        .any(|i| i.is_null() || i["type"] == "function_call"));
    assert_eq!(
        out.warnings
            .iter()
            .filter(|w| w.code == codes::INVALID_SKIPPED)
            .map(|w| w.path.as_str())
            .collect::<Vec<_>>(),
        vec!["messages[0].content[1]", "messages[1].content[0]"]
    );
    from_openai_responses(&out.messages, Some(&out.id_map)).unwrap();
}
