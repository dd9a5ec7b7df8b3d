//! System messages inside a conversation (`role: 'system'`, as the Anthropic API takes them in
//! `messages`) and the context-management beta's `compaction` blocks: stored losslessly on both
//! engines, never a prompt, sent in place to every target, and a request to Anthropic starting at
//! the latest compaction block.

mod common;

use serde_json::{json, Map, Value};
use threadline::convert::{
    check_neutral, from_anthropic, from_openai_chat, from_openai_responses, to_anthropic,
    to_openai_chat, to_openai_responses,
};
use threadline::{
    validate_messages, validate_openai_chat, validate_openai_responses, ContextOptions,
    ProblemCode, Reasoning, SearchOptions, Session, SessionOptions, Store, StoreOptions, Target,
};

fn options(target: Target) -> ContextOptions {
    ContextOptions {
        target,
        max_tokens: None,
        max_messages: None,
        system: None,
        tool_result_preview_chars: None,
        reasoning: Reasoning::Keep,
        model: None,
    }
}

fn append(s: &Session, m: Value) -> Map<String, Value> {
    s.append(m, None).unwrap()
}

const COMPACTION: &str = "Summary: the user is refactoring the parser; tests pass.";

fn compaction_block() -> Value {
    json!({"type": "compaction", "content": COMPACTION, "encrypted_content": "opaque-bytes==", "signature": "sig"})
}

/// A conversation: system message, prompt, response, a system message mid-way, prompt, response.
fn conversation(s: &Session) {
    append(s, json!({"role": "system", "content": "You are terse."}));
    append(s, json!({"role": "user", "content": "hello"}));
    append(
        s,
        json!({"role": "assistant", "content": [{"type": "text", "text": "hi"}]}),
    );
    append(
        s,
        json!({"role": "system", "content": [{"type": "text", "text": "From now on, answer in French."}]}),
    );
    append(s, json!({"role": "user", "content": "how are you?"}));
    append(
        s,
        json!({"role": "assistant", "content": [{"type": "text", "text": "bien"}]}),
    );
}

#[test]
fn a_system_message_is_stored_in_place_on_both_engines_and_is_never_a_prompt() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "system_msgs") {
        let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
        let s = store.create_session(SessionOptions::default()).unwrap();
        conversation(&s);
        let env = s.envelopes(0, None).unwrap();
        assert_eq!(env[0]["type"], "system", "{engine}");
        assert_eq!(env[3]["type"], "system", "{engine}");
        let messages = s.messages().unwrap();
        assert_eq!(messages.len(), 6, "{engine}");
        assert_eq!(
            messages[0],
            json!({"role": "system", "content": [{"type": "text", "text": "You are terse."}]}),
            "{engine}"
        );
        assert_eq!(
            messages[3],
            json!({"role": "system", "content": [{"type": "text", "text": "From now on, answer in French."}]}),
            "{engine}"
        );
        // Two turns, each started by its prompt: the system messages start none.
        let turns = s.turns().unwrap();
        assert_eq!(turns.len(), 2, "{engine}");
        assert_eq!(
            (turns[0].start_index, turns[0].end_index),
            (1, 3),
            "{engine}"
        );
        assert_eq!(
            (turns[1].start_index, turns[1].end_index),
            (4, 5),
            "{engine}"
        );
        // Not conversation for search: the system text is not found, the prompts are.
        let hits = store.search("hello", &SearchOptions::default()).unwrap();
        assert_eq!(hits.hits.len(), 1, "{engine}");
        let hits = store.search("French", &SearchOptions::default()).unwrap();
        assert!(hits.hits.is_empty(), "{engine}: {:?}", hits.hits);
        store.close().unwrap();
    }
}

#[test]
fn a_system_message_refused_for_what_the_provider_refuses_and_nothing_is_stored() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    let e = s
        .append(json!({"role": "system", "content": [{"type": "image", "source": {"type": "url", "url": "http://x"}}]}), None)
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
    assert_eq!(
        e.message(),
        "append: content[0].type: a system message holds text blocks only, got 'image'"
    );
    let e = s
        .append(json!({"role": "system", "content": []}), None)
        .unwrap_err();
    assert_eq!(
        e.message(),
        "append: content: a system message needs at least one block"
    );
    // A system message in a user record is a contradiction.
    let e = s
        .append(
            json!({"type": "user", "message": {"role": "system", "content": "x"}}),
            None,
        )
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
    assert!(e.message().starts_with("append: type:"), "{}", e.message());
    assert!(s.messages().unwrap().is_empty());
}

#[test]
fn openai_chat_messages_given_to_append_say_how_to_convert_them() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    let e = s
        .append(
            json!({"role": "tool", "tool_call_id": "c1", "content": "42"}),
            None,
        )
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
    assert_eq!(
        e.message(),
        "append: role: 'tool' is an OpenAI Chat message; convert it with fromOpenAIChat(messages) first"
    );
    let e = s
        .append(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            None,
        )
        .unwrap_err();
    assert_eq!(
        e.message(),
        "append: tool_calls: a message with tool_calls is an OpenAI Chat message; convert it with fromOpenAIChat(messages) first"
    );
    let e = s
        .append(json!({"role": "developer", "content": "x"}), None)
        .unwrap_err();
    assert!(
        e.message()
            .starts_with("append: role: 'developer' is an OpenAI message; use role 'system'"),
        "{}",
        e.message()
    );
    assert!(s.messages().unwrap().is_empty());
}

#[test]
fn restore_messages_takes_system_messages() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    let report = s
        .restore_messages(vec![
            json!(r#"{"role":"system","content":"Be brief."}"#),
            json!({"role": "user", "content": "one"}),
            json!({"role": "assistant", "content": "two"}),
        ])
        .unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!((report.message_count, report.turn_count), (3, 1));
    assert_eq!(s.messages().unwrap()[0]["role"], "system");
}

#[test]
fn build_context_sends_system_messages_in_place_for_every_target() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    conversation(&s);
    let a = s.build_context(&options(Target::Anthropic)).unwrap();
    assert!(validate_messages(&a.messages).is_empty());
    let roles: Vec<&str> = a
        .messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "system", "user", "assistant"]
    );
    assert_eq!(
        a.messages[3],
        json!({"role": "system", "content": [{"type": "text", "text": "From now on, answer in French."}]})
    );
    assert!(a.stats.warnings.is_empty(), "{:?}", a.stats.warnings);

    let c = s.build_context(&options(Target::OpenAiChat)).unwrap();
    assert!(validate_openai_chat(&c.messages).is_empty());
    assert_eq!(
        c.messages[0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(
        c.messages[3],
        json!({"role": "system", "content": "From now on, answer in French."})
    );

    let r = s.build_context(&options(Target::OpenAiResponses)).unwrap();
    assert!(validate_openai_responses(&r.messages).is_empty());
    assert_eq!(
        r.messages[3],
        json!({"type": "message", "role": "system", "content": [{"type": "input_text", "text": "From now on, answer in French."}]})
    );
}

#[test]
fn converters_round_trip_system_messages_in_place() {
    let neutral = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "a"}]}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "b"}]}),
        json!({"role": "system", "content": [{"type": "text", "text": "be brief"}]}),
        json!({"role": "user", "content": [{"type": "text", "text": "c"}]}),
    ];
    check_neutral(&neutral, None).unwrap();

    let to = to_anthropic(&neutral, None);
    assert!(to.warnings.is_empty(), "{:?}", to.warnings);
    assert_eq!(to.messages, neutral);
    let back = from_anthropic(&to.messages, None, None).unwrap();
    assert_eq!(back.messages, neutral);
    assert!(back.system.is_none());

    let to = to_openai_chat(&neutral, None);
    assert!(to.warnings.is_empty(), "{:?}", to.warnings);
    assert_eq!(
        to.messages[2],
        json!({"role": "system", "content": "be brief"})
    );
    let back = from_openai_chat(&to.messages, None).unwrap();
    assert_eq!(back.messages, neutral);
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);

    let to = to_openai_responses(&neutral, None);
    assert!(to.warnings.is_empty(), "{:?}", to.warnings);
    let back = from_openai_responses(&to.messages, None).unwrap();
    assert_eq!(back.messages, neutral);

    // A leading system message of an OpenAI list is the system prompt (the format cannot tell
    // them apart); a developer message later on is a system message in place.
    let back = from_openai_chat(
        &[
            json!({"role": "system", "content": "sys"}),
            json!({"role": "user", "content": "a"}),
            json!({"role": "developer", "content": "dev"}),
        ],
        None,
    )
    .unwrap();
    assert_eq!(back.system, Some(json!("sys")));
    assert_eq!(
        back.messages[1],
        json!({"role": "system", "content": [{"type": "text", "text": "dev"}]})
    );

    let e = check_neutral(
        &[json!({"role": "system", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]})],
        None,
    )
    .unwrap_err();
    assert_eq!(e.message(), "messages[0].content[0]: expected a text block");
}

#[test]
fn compaction_blocks_round_trip_exactly_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "compaction_blocks") {
        let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
        let s = store.create_session(SessionOptions::default()).unwrap();
        append(&s, json!({"role": "user", "content": "go"}));
        let response = json!({"role": "assistant", "content": [
            compaction_block(),
            {"type": "compaction", "content": null, "encrypted_content": null},
            {"type": "text", "text": "done"}
        ]});
        append(&s, response.clone());
        let id = s.id().to_string();
        store.close().unwrap();
        let store = Store::open(Some(&path), StoreOptions::default()).unwrap();
        let s = store.open_session(&id, None).unwrap();
        assert_eq!(s.messages().unwrap()[1], response, "{engine}");
        store.close().unwrap();
    }
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    let e = s
        .append(
            json!({"role": "user", "content": [compaction_block()]}),
            None,
        )
        .unwrap_err();
    assert_eq!(
        e.message(),
        "append: content[0].type: a 'compaction' block is only allowed in assistant messages"
    );
    let e = s
        .append(
            json!({"role": "assistant", "content": [{"type": "compaction", "content": 5}]}),
            None,
        )
        .unwrap_err();
    assert_eq!(
        e.message(),
        "append: content[0].content: expected a string or null, got a number"
    );
}

/// Four turns; the response of the third carries a compaction block.
fn compacted(s: &Session) {
    append(s, json!({"role": "system", "content": "You are terse."}));
    append(s, json!({"role": "user", "content": "one"}));
    append(
        s,
        json!({"role": "assistant", "content": [{"type": "text", "text": "1"}]}),
    );
    append(s, json!({"role": "user", "content": "two"}));
    append(
        s,
        json!({"role": "assistant", "content": [{"type": "text", "text": "2"}]}),
    );
    append(s, json!({"role": "user", "content": "three"}));
    append(
        s,
        json!({"role": "assistant", "content": [compaction_block(), {"type": "text", "text": "3"}]}),
    );
    append(s, json!({"role": "user", "content": "four"}));
    append(
        s,
        json!({"role": "assistant", "content": [{"type": "text", "text": "4"}]}),
    );
}

#[test]
fn an_anthropic_request_starts_at_the_latest_compaction_block_with_its_tokens_counted() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    compacted(&s);
    let c = s.build_context(&options(Target::Anthropic)).unwrap();
    assert!(
        validate_messages(&c.messages).is_empty(),
        "{:?}",
        validate_messages(&c.messages)
    );
    assert_eq!(
        c.messages,
        vec![
            json!({"role": "assistant", "content": [compaction_block(), {"type": "text", "text": "3"}]}),
            json!({"role": "user", "content": [{"type": "text", "text": "four"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "4"}]}),
        ]
    );
    assert_eq!(c.stats.start_seq, 6);
    assert!(c.stats.compacted);
    // The block's tokens are in the estimate: its text alone is more than the rest.
    let block_chars = serde_json::to_string(&compaction_block()).unwrap().len() as f64;
    assert!(
        c.stats.estimated_tokens as f64 >= block_chars * c.stats.tokens_per_char,
        "{} tokens for a block of {block_chars} characters",
        c.stats.estimated_tokens
    );
    // A budget the block's turn does not fit in: whole turns are left out from the oldest, the
    // block's with it, as any other (the latest turn always stays).
    let mut o = options(Target::Anthropic);
    o.max_tokens = Some(c.stats.estimated_tokens - 1);
    let cut = s.build_context(&o).unwrap();
    assert!(validate_messages(&cut.messages).is_empty());
    assert_eq!(cut.messages.last(), c.messages.last());
    assert_eq!(cut.stats.dropped_records, 1);
    assert!(cut.stats.fits);

    // The OpenAI targets cannot take the block: they get the whole conversation, the block left
    // out with a warning.
    let chat = s.build_context(&options(Target::OpenAiChat)).unwrap();
    assert_eq!(chat.messages.len(), 9);
    assert_eq!(chat.stats.start_seq, 0);
    assert!(chat
        .stats
        .warnings
        .iter()
        .any(|w| w.code == "block_dropped"));
}

#[test]
fn a_budgeted_anthropic_context_read_from_its_end_is_the_whole_read_one() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    compacted(&s);
    for t in 1..200 {
        append(
            &s,
            json!({"role": "user", "content": format!("prompt {t}")}),
        );
        append(
            &s,
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("answer {t}")}]}),
        );
    }
    for max in [50, 400, 2000, 100_000] {
        let mut o = options(Target::Anthropic);
        o.max_tokens = Some(max);
        threadline::testing::read_whole_context(true);
        let whole = s.build_context(&o).unwrap();
        threadline::testing::read_whole_context(false);
        let back = s.build_context(&o).unwrap();
        assert_eq!(back.messages, whole.messages, "{max}");
        assert_eq!(
            back.stats.estimated_tokens, whole.stats.estimated_tokens,
            "{max}"
        );
        assert!(validate_messages(&back.messages).is_empty());
    }
}

#[test]
fn a_rewind_past_the_compaction_block_sends_what_lies_before_it_again() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    compacted(&s);
    let envs = s.envelopes(0, None).unwrap();
    let before = envs[5]["uuid"].as_str().unwrap().to_string();
    s.rewind(&before).unwrap();
    let c = s.build_context(&options(Target::Anthropic)).unwrap();
    assert_eq!(c.messages[0]["role"], "system");
    assert_eq!(c.messages.len(), 6);
    assert!(!c.stats.compacted);
}

#[test]
fn a_custom_openai_tool_call_to_a_recall_tool_is_answered_when_its_input_is_json() {
    let store = Store::open(Some(":memory:"), StoreOptions::default()).unwrap();
    let s = store.create_session(SessionOptions::default()).unwrap();
    append(&s, json!({"role": "user", "content": "the phoenix server"}));
    let tools = store
        .recall_tools(threadline::RecallOptions::default())
        .unwrap();
    let r = tools
        .handle(&json!({"id": "c1", "type": "custom", "custom": {"name": "session_search", "input": "{\"query\": \"phoenix\"}"}}))
        .unwrap();
    assert_eq!(r["tool_use_id"], "c1");
    assert!(r.get("is_error").is_none(), "{r}");
    assert!(r["content"].as_str().unwrap().contains("phoenix"), "{r}");
    let r = tools
        .handle(&json!({"id": "c2", "type": "custom", "custom": {"name": "session_search", "input": "phoenix"}}))
        .unwrap();
    assert_eq!(r["tool_use_id"], "c2");
    assert_eq!(r["is_error"], true);
    assert!(
        r["content"]
            .as_str()
            .unwrap()
            .starts_with("custom.input: session_search takes a JSON object as its input, got text that is not JSON"),
        "{r}"
    );
}

#[test]
fn validate_messages_takes_system_messages_in_place_but_not_between_a_call_and_its_results() {
    let call = json!({"type": "tool_use", "id": "t1", "name": "bash", "input": {}});
    let result = json!({"type": "tool_result", "tool_use_id": "t1", "content": "ok"});
    let ok = [
        json!({"role": "system", "content": "You are terse."}),
        json!({"role": "user", "content": "go"}),
        json!({"role": "system", "content": [{"type": "text", "text": "Be careful."}]}),
        json!({"role": "user", "content": "really"}),
        json!({"role": "assistant", "content": [call.clone()]}),
        json!({"role": "user", "content": [result.clone()]}),
    ];
    assert_eq!(validate_messages(&ok), vec![]);
    let bad = [
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": [call]}),
        json!({"role": "system", "content": [{"type": "image", "source": {}}]}),
        json!({"role": "user", "content": [result]}),
    ];
    let problems: Vec<(String, ProblemCode)> = validate_messages(&bad)
        .into_iter()
        .map(|p| (p.path, p.code))
        .collect();
    assert_eq!(
        problems,
        [
            (
                "[1].content[0]".to_string(),
                ProblemCode::ToolUseWithoutResult
            ),
            ("[2].content[0]".to_string(), ProblemCode::NotAMessage),
            (
                "[3].content[0]".to_string(),
                ProblemCode::ToolResultWithoutToolUse
            ),
        ]
    );
}
