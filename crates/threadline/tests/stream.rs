//! The stream assembler against the Anthropic SDK's own results (stored in the fixtures by
//! `__test__/helpers/sdk-stream.js`; the node tests re-check them against the live SDK), the
//! salvage rules at every cut of a stream, and the rejection of bad chunks.

use std::path::PathBuf;

use serde_json::{json, Value};
use threadline::{Assembler, Error, Pushed};

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../__test__/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn cases(name: &str) -> Vec<Value> {
    fixture(name)["cases"].as_array().unwrap().clone()
}

fn list(value: &Value) -> &Vec<Value> {
    value.as_array().unwrap()
}

/// Equal including key order (serde_json's map equality ignores order).
fn assert_same(got: &Value, want: &Value, what: &str) {
    let (g, w) = (got.to_string(), want.to_string());
    assert!(
        g == w,
        "{what}\n got: {}\nwant: {}",
        serde_json::to_string_pretty(got).unwrap(),
        serde_json::to_string_pretty(want).unwrap()
    );
}

fn assemble(chunks: &[Value]) -> Assembler {
    let mut asm = Assembler::new();
    for (i, chunk) in chunks.iter().enumerate() {
        asm.push(chunk)
            .unwrap_or_else(|e| panic!("chunk {i} {chunk}: {e}"));
    }
    asm
}

fn invalid_message(result: threadline::Result<impl std::fmt::Debug>) -> String {
    match result {
        Err(Error::InvalidInput(m)) => m,
        other => panic!("expected INVALID_INPUT, got {other:?}"),
    }
}

#[test]
fn raw_events_give_the_sdk_final_message() {
    for case in cases("anthropic-stream-events.json") {
        let name = case["name"].as_str().unwrap();
        let asm = assemble(list(&case["events"]));
        assert!(asm.is_stopped(), "{name}");
        assert_eq!(asm.open_blocks(), 0, "{name}");
        assert_same(&asm.message(), &case["expected"], name);
        assert_same(&asm.finish().unwrap(), &case["expected"], name);
    }
}

#[test]
fn open_tool_input_is_the_sdk_partial_parse() {
    for case in cases("anthropic-stream-events.json") {
        let events = list(&case["events"]);
        for snap in list(&case["partialInputs"]) {
            let n = snap["event"].as_u64().unwrap() as usize;
            let asm = assemble(&events[..=n]);
            let index = events[n]["index"].as_u64().unwrap() as usize;
            let got = &asm.message()["content"][index]["input"];
            assert_same(got, &snap["input"], &format!("after event {n}"));
        }
    }
}

#[test]
fn pushed_reports_what_each_event_did() {
    let case = &cases("anthropic-stream-events.json")[0];
    let mut asm = Assembler::new();
    let mut seen = Vec::new();
    for event in list(&case["events"]) {
        seen.push((
            event["type"].as_str().unwrap().to_string(),
            asm.push(event).unwrap(),
        ));
    }
    for (kind, pushed) in seen {
        let want = match kind.as_str() {
            "message_start" => Pushed::MessageStarted,
            "content_block_start" => Pushed::BlockOpened,
            "content_block_delta" => Pushed::Delta,
            "content_block_stop" => Pushed::BlockClosed,
            "message_delta" => Pushed::MessageDelta,
            "message_stop" => Pushed::Stopped,
            _ => Pushed::Ignored,
        };
        assert_eq!(pushed, want, "{kind}");
    }
}

/// The salvage rules, re-stated: which blocks of a cut stream may go back to a model.
fn safe(block: &Value, closed: bool) -> bool {
    let nonempty = |key: &str| block[key].as_str().is_some_and(|s| !s.is_empty());
    match block["type"].as_str().unwrap() {
        "text" => nonempty("text"),
        "thinking" => closed && nonempty("signature"),
        "tool_use" | "server_tool_use" => closed && block["input"].is_object(),
        _ => closed,
    }
}

#[test]
fn salvage_at_every_cut_of_the_stream() {
    for case in cases("anthropic-stream-events.json") {
        let events = list(&case["events"]);
        let final_blocks = list(&case["expected"]["content"]);
        for n in 0..=events.len() {
            let asm = assemble(&events[..n]);
            let stopped: Vec<u64> = events[..n]
                .iter()
                .filter(|e| e["type"] == "content_block_stop")
                .map(|e| e["index"].as_u64().unwrap())
                .collect();
            let message = asm.message();
            let blocks = list(&message["content"]);
            let closed = |i: usize| stopped.contains(&(i as u64));
            // A closed block no longer changes: it is already what the final message holds.
            for (i, block) in blocks.iter().enumerate().filter(|(i, _)| closed(*i)) {
                assert_same(
                    block,
                    &final_blocks[i],
                    &format!("block {i} after {n} events"),
                );
            }
            let want: Vec<Value> = blocks
                .iter()
                .enumerate()
                .filter(|(i, b)| safe(b, closed(*i)))
                .map(|(_, b)| b.clone())
                .collect();
            let got = asm.salvage();
            assert_same(
                &json!(got),
                &json!(want),
                &format!("salvage after {n} events"),
            );
            for (i, block) in blocks.iter().enumerate() {
                let kind = block["type"].as_str().unwrap();
                let in_salvage = got.contains(block);
                if matches!(kind, "thinking" | "tool_use" | "server_tool_use") && !closed(i) {
                    assert!(!in_salvage, "open {kind} salvaged after {n} events");
                }
                if kind == "thinking" && closed(i) {
                    assert!(in_salvage, "signed thinking missing after {n} events");
                }
            }
            assert_eq!(asm.open_blocks(), blocks.len() - stopped.len());
        }
    }
}

fn delta(index: i64, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn tool_stream(args: &[&str]) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-x", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {},
                "caller": {"type": "direct"}}}),
    ];
    for part in args {
        events.push(delta(
            0,
            json!({"type": "input_json_delta", "partial_json": part}),
        ));
    }
    events
}

#[test]
fn tool_input_moves_last_once_it_streams_and_keeps_number_text() {
    let mut events = tool_stream(&["{\"n\": 1.50, \"big\": 12345678901234567890", "}"]);
    events.push(json!({"type": "content_block_stop", "index": 0}));
    let block = assemble(&events).message()["content"][0].clone();
    assert_eq!(
        block.to_string(),
        r#"{"type":"tool_use","id":"toolu_1","name":"run","caller":{"type":"direct"},"input":{"n":1.50,"big":12345678901234567890}}"#
    );
    // Without any input delta the block is as given, `input` in its place.
    let mut events = tool_stream(&[]);
    events.push(json!({"type": "content_block_stop", "index": 0}));
    let asm = assemble(&events);
    let block = &asm.message()["content"][0];
    assert_eq!(
        block.to_string(),
        r#"{"type":"tool_use","id":"toolu_1","name":"run","input":{},"caller":{"type":"direct"}}"#
    );
    assert_eq!(asm.salvage().len(), 1);
}

#[test]
fn a_tool_input_that_is_not_json_is_kept_out_and_fails_finish() {
    // Truncated: the SDK's partial parse shows what was complete; it is not a whole object.
    let mut events = tool_stream(&["{\"cmd\": \"ls\", \"arg", "s\": [1"]);
    let open = assemble(&events[..events.len() - 1]);
    assert_same(
        &open.message()["content"][0]["input"],
        &json!({"cmd": "ls"}),
        "open",
    );
    events.push(json!({"type": "content_block_stop", "index": 0}));
    let mut asm = assemble(&events);
    assert_same(
        &asm.message()["content"][0]["input"],
        &json!({"cmd": "ls", "args": []}),
        "closed",
    );
    assert!(asm.salvage().is_empty());
    asm.push(&json!({"type": "message_stop"})).unwrap();
    let err = invalid_message(asm.finish());
    assert!(err.starts_with("content[0].input: "), "{err}");
    assert!(err.contains("toolu_1"), "{err}");

    // Garbage: nothing to show but `{}`.
    let mut events = tool_stream(&["{\"cmd\": ls}"]);
    events.push(json!({"type": "content_block_stop", "index": 0}));
    let asm = assemble(&events);
    assert_same(&asm.message()["content"][0]["input"], &json!({}), "garbage");
    assert!(asm.salvage().is_empty());
    assert!(asm.finish().is_err());
}

#[test]
fn bad_raw_chunks_are_rejected_and_change_nothing() {
    let case = &cases("anthropic-stream-events.json")[0];
    let events = list(&case["events"]);
    // Cut inside the tool call: thinking and text closed, the tool_use (index 2) open.
    let cut = events
        .iter()
        .position(|e| {
            e["type"] == "content_block_delta" && e["delta"]["type"] == "input_json_delta"
        })
        .unwrap()
        + 3;
    let rejected = [
        (json!(42), "chunk: expected an object"),
        (json!({"index": 0}), "chunk.type: expected a string"),
        (
            delta(2, json!({"type": "text_delta", "text": "x"})),
            "chunk.delta.type: text_delta does not apply to content block 2",
        ),
        (
            delta(2, json!({"type": "input_json_delta", "partial_json": 5})),
            "chunk.delta.partial_json: expected a string",
        ),
        (
            delta(7, json!({"type": "text_delta", "text": "x"})),
            "chunk.index: content block 7 was never started",
        ),
        (
            delta(1, json!({"type": "text_delta", "text": "x"})),
            "chunk.index: content block 1 is already closed",
        ),
        (
            delta(-1, json!({"type": "text_delta", "text": "x"})),
            "chunk.index: expected a non-negative integer",
        ),
        (
            json!({"type": "content_block_delta", "index": 2}),
            "chunk.delta: expected an object",
        ),
        (delta(2, json!({})), "chunk.delta.type: expected a string"),
        (
            json!({"type": "content_block_stop", "index": 0}),
            "chunk.index: content block 0 is already closed",
        ),
        (
            json!({"type": "content_block_start", "index": 5, "content_block": {"type": "text"}}),
            "chunk.index: expected 3",
        ),
        (
            json!({"type": "content_block_start", "index": 3, "content_block": {"text": ""}}),
            "chunk.content_block.type: expected a string",
        ),
        (
            json!({"type": "message_start", "message": {"content": []}}),
            "chunk.type: a second message_start",
        ),
        (
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
            "chunk.usage: expected an object",
        ),
        (
            json!({"type": "message_delta", "usage": {"output_tokens": 1}}),
            "chunk.delta: expected an object",
        ),
        (
            json!({"type": "text", "text": "hi"}),
            "chunk.type: \"text\" mixes simple chunks and Anthropic stream events",
        ),
    ];
    for (chunk, want) in rejected {
        let mut asm = assemble(&events[..cut]);
        let before = format!("{asm:?}");
        let err = invalid_message(asm.push(&chunk));
        assert!(err.starts_with(want), "{chunk}: {err}");
        assert_eq!(format!("{asm:?}"), before, "{chunk} changed the assembler");
        // And the stream goes on as if the bad chunk had never come.
        for event in &events[cut..] {
            asm.push(event).unwrap();
        }
        assert_same(&asm.message(), &case["expected"], "after a rejected chunk");
    }
}

#[test]
fn events_out_of_order_are_rejected() {
    let mut asm = Assembler::new();
    let err = invalid_message(asm.push(&json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}})));
    assert_eq!(err, "chunk.type: content_block_start before message_start");
    assert_eq!(asm.push(&json!({"type": "ping"})).unwrap(), Pushed::Ignored);
    let err =
        invalid_message(asm.push(&json!({"type": "message_start", "message": {"content": {}}})));
    assert_eq!(err, "chunk.message.content: expected an array");

    let case = &cases("anthropic-stream-events.json")[0];
    let mut asm = assemble(list(&case["events"]));
    let before = format!("{asm:?}");
    for chunk in [
        json!({"type": "ping"}),
        json!({"type": "message_stop"}),
        case["events"][0].clone(),
    ] {
        let err = invalid_message(asm.push(&chunk));
        assert_eq!(err, "chunk: the stream already ended with message_stop");
    }
    assert_eq!(format!("{asm:?}"), before);
}

#[test]
fn unknown_events_and_deltas_are_ignored_like_the_sdk() {
    let mut asm = assemble(&tool_stream(&["{}"]));
    let before = format!("{asm:?}");
    let ignored = [
        json!({"type": "future_event", "x": 1}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        delta(0, json!({"type": "future_delta"})),
    ];
    for chunk in ignored {
        assert_eq!(asm.push(&chunk).unwrap(), Pushed::Ignored, "{chunk}");
    }
    assert_eq!(format!("{asm:?}"), before);
    // Before the form is known an unknown type cannot be told apart from a typo.
    let err = invalid_message(Assembler::new().push(&json!({"type": "future_event"})));
    assert!(err.starts_with("chunk.type: unknown chunk type"), "{err}");
}

#[test]
fn simple_fixture() {
    for case in cases("simple-stream-chunks.json") {
        let name = case["name"].as_str().unwrap();
        let asm = assemble(list(&case["chunks"]));
        assert_same(&json!(asm.salvage()), &case["salvage"], name);
        assert!(!asm.is_stopped());
        assert_same(&asm.finish().unwrap(), &case["expected"], name);
    }
}

#[test]
fn simple_chunks_open_append_and_close_blocks() {
    let mut asm = Assembler::new();
    let mut push = |chunk: Value| asm.push(&chunk).unwrap();
    assert_eq!(push(json!({"type": "text", "text": ""})), Pushed::Ignored);
    assert_eq!(
        push(json!({"type": "reasoning", "text": "a"})),
        Pushed::BlockOpened
    );
    assert_eq!(
        push(json!({"type": "reasoning", "text": "b"})),
        Pushed::Delta
    );
    assert_eq!(
        push(json!({"type": "reasoning", "text": "c", "signature": "s1"})),
        Pushed::BlockClosed
    );
    assert_eq!(
        push(json!({"type": "reasoning", "text": "", "signature": "s2"})),
        Pushed::BlockClosed
    );
    assert_eq!(
        push(json!({"type": "text", "text": "x"})),
        Pushed::BlockOpened
    );
    assert_eq!(push(json!({"type": "text", "text": ""})), Pushed::Delta);
    assert_eq!(
        push(json!({"type": "tool_call_delta", "id": "c1", "name": "f", "delta": "{\"a\""})),
        Pushed::BlockOpened
    );
    assert_eq!(asm.open_blocks(), 1);
    // An open tool call shows the partial parse of its arguments.
    assert_same(
        &asm.message()["content"][3]["input"],
        &json!({}),
        "open tool",
    );
    assert!(asm.salvage().iter().all(|b| b["type"] != "tool_use"));
    let mut push = |chunk: Value| asm.push(&chunk).unwrap();
    assert_eq!(
        push(json!({"type": "tool_call_delta", "id": "c1", "delta": ": [1, 2"})),
        Pushed::Delta
    );
    assert_same(
        &asm.message()["content"][3]["input"],
        &json!({"a": [1]}),
        "open tool",
    );
    let mut push = |chunk: Value| asm.push(&chunk).unwrap();
    assert_eq!(
        push(json!({"type": "tool_call_delta", "id": "c1", "delta": "]}"})),
        Pushed::Delta
    );
    assert_eq!(
        push(json!({"type": "tool_call_delta", "id": "c2", "name": "g", "delta": ""})),
        Pushed::BlockOpened
    );
    let want = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "abc", "signature": "s1"},
        {"type": "thinking", "thinking": "", "signature": "s2"},
        {"type": "text", "text": "x"},
        {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": [1, 2]}},
        {"type": "tool_use", "id": "c2", "name": "g", "input": {}},
    ]});
    assert_eq!(asm.open_blocks(), 1);
    let salvaged = asm.salvage();
    assert_eq!(salvaged.len(), 4, "{salvaged:?}"); // c2 is still open
    assert_same(&asm.finish().unwrap(), &want, "finished");
}

#[test]
fn simple_tool_arguments_that_are_not_json_fail_finish() {
    let mut asm = Assembler::new();
    asm.push(&json!({"type": "tool_call_delta", "id": "c1", "name": "f", "delta": "{\"a\": "}))
        .unwrap();
    asm.push(&json!({"type": "text", "text": "then text"}))
        .unwrap();
    assert_eq!(
        asm.salvage(),
        vec![json!({"type": "text", "text": "then text"})]
    );
    let err = invalid_message(asm.finish());
    assert!(
        err.starts_with("content[0].input: tool call c1: the arguments are not"),
        "{err}"
    );

    let mut asm = Assembler::new();
    asm.push(&json!({"type": "tool_call_delta", "id": "c1", "name": "f", "delta": "[1]"}))
        .unwrap();
    assert!(invalid_message(asm.finish()).contains("not a JSON object"));
}

#[test]
fn bad_simple_chunks_are_rejected_and_change_nothing() {
    let setup = [
        json!({"type": "tool_call_delta", "id": "c1", "name": "f", "delta": "{}"}),
        json!({"type": "text", "text": "hi"}),
        json!({"type": "tool_call_delta", "id": "c2", "name": "g", "delta": "{"}),
    ];
    let rejected = [
        (json!({"type": "text"}), "chunk.text: expected a string"),
        (
            json!({"type": "text", "text": 1}),
            "chunk.text: expected a string",
        ),
        (
            json!({"type": "reasoning", "text": "t", "signature": 5}),
            "chunk.signature: expected a string",
        ),
        (
            json!({"type": "tool_call_delta", "id": "", "name": "f", "delta": ""}),
            "chunk.id: expected a non-empty string",
        ),
        (
            json!({"type": "tool_call_delta", "id": "c3", "delta": "{}"}),
            "chunk.name: expected a string",
        ),
        (
            json!({"type": "tool_call_delta", "id": "c3", "name": "h"}),
            "chunk.delta: expected a string",
        ),
        (
            json!({"type": "tool_call_delta", "id": "c2", "name": "other", "delta": "}"}),
            "chunk.name: tool call c2 is named \"g\"",
        ),
        (
            json!({"type": "tool_call_delta", "id": "c1", "delta": "{}"}),
            "chunk.id: tool call c1 was already closed",
        ),
        (
            json!({"type": "message_stop"}),
            "chunk.type: \"message_stop\" mixes simple chunks and Anthropic stream events",
        ),
        (
            json!({"type": "nope"}),
            "chunk.type: unknown chunk type \"nope\"",
        ),
    ];
    for (chunk, want) in rejected {
        let mut asm = assemble(&setup);
        let before = format!("{asm:?}");
        let err = invalid_message(asm.push(&chunk));
        assert!(err.starts_with(want), "{chunk}: {err}");
        assert_eq!(format!("{asm:?}"), before, "{chunk} changed the assembler");
    }
}

#[test]
fn an_empty_assembler() {
    let asm = Assembler::default();
    assert_same(
        &asm.message(),
        &json!({"role": "assistant", "content": []}),
        "empty",
    );
    assert!(asm.salvage().is_empty());
    assert!(!asm.is_stopped());
    assert_eq!(asm.open_blocks(), 0);
    assert_same(
        &asm.finish().unwrap(),
        &json!({"role": "assistant", "content": []}),
        "finish",
    );
}
