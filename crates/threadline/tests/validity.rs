//! "Always valid": whatever the stored history, the request `build_context` gives for every target
//! passes that provider's checks. A property test over random histories: empty and
//! whitespace-only texts, orphan results, calls without results, duplicate ids, histories that
//! start with an assistant, unsigned thinking, reasoning of the other provider, interrupted and
//! failed streams, compactions (Threadline's and Claude Code's boundary, at any record), rewinds,
//! forks, records out of the context, a restored start; each built for all three targets under
//! varied budgets and reasoning modes.
//!
//! `THREADLINE_VALIDITY_CASES` sets the number of histories (default 6,000, each built 12 times: 72,000 requests).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Map, Value};
use threadline::{
    validate_messages, validate_openai_chat, validate_openai_responses, CompactOptions,
    ContextOptions, Reasoning, RecoverOptions, ResponseOptions, Session, SessionOptions, Store,
    Target,
};

#[derive(Debug, Clone, Copy)]
enum Text {
    Words,
    Empty,
    Blank,
    Harness,
}

fn text_of(t: Text, n: usize) -> String {
    match t {
        Text::Words => format!("words {n}"),
        Text::Empty => String::new(),
        Text::Blank => " \n\t ".into(),
        Text::Harness => "[Request interrupted by user]".into(),
    }
}

#[derive(Debug, Clone, Copy)]
enum Id {
    Fresh,
    /// a long id (over OpenAI's limits) or one with characters a provider refuses
    Odd,
    /// an id used before: a duplicate
    Reuse(usize),
}

#[derive(Debug, Clone)]
enum Block {
    Text(Text),
    Thinking {
        signed: bool,
    },
    Redacted,
    ToolUse(Id),
    ServerTool,
    OpenAiReasoning,
    /// an `openai_item` holding an item of its own (a web search) or, rarely, a call
    OpenAiItem {
        call: bool,
    },
    Unknown,
}

#[derive(Debug, Clone, Copy)]
enum Answer {
    /// the k-th call of the latest assistant message
    Open(usize),
    /// a call of any earlier message
    Old(usize),
    Orphan,
    /// a result with an empty text block inside
    EmptyInside(usize),
    /// an error result with text and an image
    Image(usize),
}

#[derive(Debug, Clone)]
enum Chunk {
    Text(Text),
    Reasoning { signed: bool },
    ToolCall { json_ok: bool },
}

#[derive(Debug, Clone, Copy)]
enum End {
    Finish,
    Fail,
    /// the writer goes away mid-stream (a crash): stream records without an end
    Abandon,
    /// ... and recovery closes it
    Recover,
}

#[derive(Debug, Clone)]
enum Op {
    /// a prompt, with an image or not
    Prompt(Text, bool),
    Results {
        answers: Vec<Answer>,
        text: Option<Text>,
    },
    Assistant {
        blocks: Vec<Block>,
        usage: bool,
        openai: bool,
        model: bool,
    },
    Stream(Vec<Chunk>, End),
    Compact(usize),
    CompactAt(usize),
    Boundary,
    Rewind(usize),
    Fork(usize),
    OutOfContext(Text),
}

fn text() -> impl Strategy<Value = Text> {
    prop_oneof![
        5 => Just(Text::Words),
        2 => Just(Text::Empty),
        1 => Just(Text::Blank),
        1 => Just(Text::Harness),
    ]
}

fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        8 => Just(Id::Fresh),
        1 => Just(Id::Odd),
        1 => (0..50usize).prop_map(Id::Reuse),
    ]
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        4 => text().prop_map(Block::Text),
        2 => any::<bool>().prop_map(|signed| Block::Thinking { signed }),
        1 => Just(Block::Redacted),
        5 => id().prop_map(Block::ToolUse),
        1 => Just(Block::ServerTool),
        1 => Just(Block::OpenAiReasoning),
        1 => prop::bool::weighted(0.3).prop_map(|call| Block::OpenAiItem { call }),
        1 => Just(Block::Unknown),
    ]
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        8 => (0..4usize).prop_map(Answer::Open),
        1 => (0..50usize).prop_map(Answer::Old),
        1 => Just(Answer::Orphan),
        1 => (0..4usize).prop_map(Answer::EmptyInside),
        1 => (0..4usize).prop_map(Answer::Image),
    ]
}

fn chunk() -> impl Strategy<Value = Chunk> {
    prop_oneof![
        3 => text().prop_map(Chunk::Text),
        1 => any::<bool>().prop_map(|signed| Chunk::Reasoning { signed }),
        2 => any::<bool>().prop_map(|json_ok| Chunk::ToolCall { json_ok }),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        3 => Just(End::Finish),
        1 => Just(End::Fail),
        1 => Just(End::Abandon),
        1 => Just(End::Recover),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (text(), prop::bool::weighted(0.15)).prop_map(|(t, image)| Op::Prompt(t, image)),
        8 => (prop::collection::vec(answer(), 0..4), prop::option::of(text()))
            .prop_map(|(answers, text)| Op::Results { answers, text }),
        10 => (prop::collection::vec(block(), 0..4), any::<bool>(), prop::bool::weighted(0.2), any::<bool>())
            .prop_map(|(blocks, usage, openai, model)| Op::Assistant { blocks, usage, openai, model }),
        2 => (prop::collection::vec(chunk(), 0..5), end()).prop_map(|(c, e)| Op::Stream(c, e)),
        1 => (0..3usize).prop_map(Op::Compact),
        1 => (0..50usize).prop_map(Op::CompactAt),
        1 => Just(Op::Boundary),
        1 => (0..50usize).prop_map(Op::Rewind),
        1 => (0..50usize).prop_map(Op::Fork),
        1 => text().prop_map(Op::OutOfContext),
    ]
}

#[derive(Debug, Clone)]
struct Budget {
    max_tokens: Option<u64>,
    max_messages: Option<u64>,
    reasoning: Reasoning,
    model: Option<String>,
    preview: Option<usize>,
    system: Option<Value>,
}

fn budget() -> impl Strategy<Value = Budget> {
    (
        prop::option::of(1..3000u64),
        prop::option::of(1..10u64),
        prop_oneof![
            Just(Reasoning::Keep),
            Just(Reasoning::Drop),
            Just(Reasoning::SameModel)
        ],
        prop::option::of(Just("m1".to_string())),
        prop::option::of(0..30usize),
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(json!(""))),
            1 => Just(Some(json!(" \n"))),
            1 => Just(Some(json!("Be terse."))),
            1 => Just(Some(json!([]))),
            1 => Just(Some(json!([{"type": "text", "text": ""}]))),
            1 => Just(Some(json!([{"type": "text", "text": "Be terse."}, {"type": "text", "text": " "}]))),
        ],
    )
        .prop_map(
            |(max_tokens, max_messages, reasoning, model, preview, system)| Budget {
                max_tokens,
                max_messages,
                reasoning,
                model,
                preview,
                system,
            },
        )
}

/// What a history needs to write its records: the session it is on, the calls of the latest
/// assistant message and every id used.
struct World {
    store: Store,
    session: Session,
    open: Vec<String>,
    ids: Vec<String>,
    n: usize,
    /// restored in one `restore_messages` at the first op that is not a message
    pending: Option<Vec<Value>>,
}

impl World {
    fn next(&mut self) -> usize {
        self.n += 1;
        self.n
    }

    fn write(&mut self, message: Value, envelope: Option<Map<String, Value>>) {
        if let Some(p) = self.pending.as_mut() {
            let mut env = envelope.unwrap_or_default();
            env.insert("message".into(), message);
            p.push(Value::Object(env));
            return;
        }
        let _ = self.session.append(message, envelope);
    }

    fn flush(&mut self) {
        if let Some(items) = self.pending.take() {
            if !items.is_empty() {
                self.session
                    .restore_messages(items)
                    .expect("a generated history restores");
            }
        }
    }

    fn uuid(&self, k: usize) -> Option<String> {
        let all = self.session.envelopes(0, None).ok()?;
        let found = all.get(k % all.len().max(1))?;
        found
            .get("uuid")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn tool_id(&mut self, id: Id) -> String {
        let n = self.next();
        let fresh = match id {
            Id::Fresh => format!("toolu_{n:04}"),
            Id::Odd => format!("call.{n}/{}", "x".repeat(70)),
            Id::Reuse(k) if !self.ids.is_empty() => return self.ids[k % self.ids.len()].clone(),
            Id::Reuse(_) => format!("toolu_{n:04}"),
        };
        self.ids.push(fresh.clone());
        fresh
    }

    fn apply(&mut self, op: &Op) {
        let is_message = matches!(
            op,
            Op::Prompt(..) | Op::Results { .. } | Op::Assistant { .. }
        );
        if !is_message {
            self.flush();
        }
        let n = self.next();
        match op {
            Op::Prompt(t, image) => {
                let mut content = vec![json!({"type": "text", "text": text_of(*t, n)})];
                if *image {
                    content.push(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}));
                }
                self.write(json!({"role": "user", "content": content}), None);
            }
            Op::Results { answers, text } => {
                let mut content = Vec::new();
                for a in answers {
                    let (id, inner) = match *a {
                        Answer::Open(k) if !self.open.is_empty() => {
                            (self.open[k % self.open.len()].clone(), json!("ok"))
                        }
                        Answer::Old(k) if !self.ids.is_empty() => {
                            (self.ids[k % self.ids.len()].clone(), json!("old"))
                        }
                        Answer::EmptyInside(k) if !self.open.is_empty() => (
                            self.open[k % self.open.len()].clone(),
                            json!([{"type": "text", "text": ""}]),
                        ),
                        Answer::Image(k) if !self.open.is_empty() => (
                            self.open[k % self.open.len()].clone(),
                            json!([{"type": "text", "text": "see"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]),
                        ),
                        _ => (format!("orphan_{n}"), json!("lost")),
                    };
                    let mut result =
                        json!({"type": "tool_result", "tool_use_id": id, "content": inner});
                    if matches!(a, Answer::Image(_)) {
                        result["is_error"] = json!(true);
                    }
                    content.push(result);
                }
                if let Some(t) = text {
                    content.push(json!({"type": "text", "text": text_of(*t, n)}));
                }
                if content.is_empty() {
                    content.push(json!({"type": "text", "text": ""}));
                }
                self.write(json!({"role": "user", "content": content}), None);
            }
            Op::Assistant {
                blocks,
                usage,
                openai,
                model,
            } => {
                self.open.clear();
                let mut content = Vec::new();
                for b in blocks {
                    content.push(match b {
                        Block::Text(t) => json!({"type": "text", "text": text_of(*t, n)}),
                        Block::Thinking { signed: true } => {
                            json!({"type": "thinking", "thinking": "hmm", "signature": "sig"})
                        }
                        Block::Thinking { signed: false } => {
                            json!({"type": "thinking", "thinking": "hmm"})
                        }
                        Block::Redacted => json!({"type": "redacted_thinking", "data": "xyz"}),
                        Block::ToolUse(id) => {
                            let id = self.tool_id(*id);
                            self.open.push(id.clone());
                            json!({"type": "tool_use", "id": id, "name": "bash", "input": {"n": n}})
                        }
                        Block::ServerTool => {
                            json!({"type": "server_tool_use", "id": format!("srvtoolu_{n}"), "name": "web_search", "input": {}})
                        }
                        Block::OpenAiReasoning => {
                            json!({"type": "openai_reasoning", "id": format!("rs_{n}"), "summary": [], "encrypted_content": "e"})
                        }
                        Block::OpenAiItem { call: false } => {
                            json!({"type": "openai_item", "item": {"type": "web_search_call", "id": format!("ws_{n}"), "status": "completed"}})
                        }
                        Block::OpenAiItem { call: true } => {
                            json!({"type": "openai_item", "item": {"type": "function_call", "call_id": format!("fc_{n}"), "name": "f", "arguments": "{}"}})
                        }
                        Block::Unknown => json!({"type": "future_block", "x": n}),
                    });
                }
                let mut m = json!({"role": "assistant", "content": content});
                if *model {
                    m["model"] = json!("m1");
                }
                if *usage {
                    m["usage"] = json!({"input_tokens": 50 + n, "output_tokens": 5});
                    m["id"] = json!(format!("msg_{n}"));
                }
                let env = openai.then(|| {
                    let mut e = Map::new();
                    e.insert("provider".into(), json!("openai"));
                    e
                });
                self.write(m, env);
            }
            Op::Stream(chunks, end) => {
                self.open.clear();
                let mut w = self.session.begin_response(ResponseOptions {
                    model: Some("m1".into()),
                    ..Default::default()
                });
                for c in chunks {
                    let chunk = match c {
                        Chunk::Text(t) => json!({"type": "text", "text": text_of(*t, n)}),
                        Chunk::Reasoning { signed: true } => {
                            json!({"type": "reasoning", "text": "r", "signature": "s"})
                        }
                        Chunk::Reasoning { signed: false } => {
                            json!({"type": "reasoning", "text": "r"})
                        }
                        Chunk::ToolCall { json_ok } => {
                            let id = self.tool_id(Id::Fresh);
                            self.open.push(id.clone());
                            let delta = if *json_ok { "{\"a\": 1}" } else { "{\"a\": " };
                            json!({"type": "tool_call_delta", "id": id, "name": "bash", "delta": delta})
                        }
                    };
                    let _ = w.push(&self.session, chunk);
                }
                match end {
                    End::Finish => {
                        if w.finish(&self.session, None).is_err() {
                            let _ = w.fail(&self.session, "finish refused", None);
                        }
                    }
                    End::Fail => {
                        let _ = w.fail(&self.session, "overloaded", Some("overloaded_error"));
                    }
                    End::Abandon => {
                        let _ = w.flush(&self.session);
                    }
                    End::Recover => {
                        let _ = w.flush(&self.session);
                        drop(w);
                        let _ = self.session.recover(&RecoverOptions::default());
                    }
                }
            }
            Op::Compact(keep) => {
                let _ = self.session.compact(CompactOptions {
                    summary: format!("summary {n}"),
                    keep_turns: Some(*keep),
                    ..Default::default()
                });
            }
            Op::CompactAt(k) => {
                if let Some(u) = self.uuid(*k) {
                    let mut e = Map::new();
                    e.insert("type".into(), json!("compaction"));
                    e.insert(
                        "compaction".into(),
                        json!({"summary": format!("summary {n}"), "firstKeptUuid": u}),
                    );
                    let _ = self.session.append(Value::Object(e), None);
                }
            }
            Op::Boundary => {
                let e = json!({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted"});
                let _ = self.session.append(e, None);
            }
            Op::Rewind(k) => {
                if let Some(u) = self.uuid(*k) {
                    let _ = self.session.rewind(&u);
                }
            }
            Op::Fork(k) => {
                if let Some(u) = self.uuid(*k) {
                    if let Ok(s) = self.store.fork_session(self.session.id(), Some(&u), None) {
                        self.session = s;
                    }
                }
            }
            Op::OutOfContext(t) => {
                let mut e = Map::new();
                e.insert("includeInContext".into(), json!(false));
                let _ = self.session.append(
                    json!({"role": "user", "content": [{"type": "text", "text": text_of(*t, n)}]}),
                    Some(e),
                );
            }
        }
    }
}

fn history() -> impl Strategy<Value = (bool, Vec<Op>, Vec<Budget>)> {
    (
        prop::bool::weighted(0.3),
        prop::collection::vec(op(), 0..28),
        prop::collection::vec(budget(), 4),
    )
}

/// Options for the whole history (no budget), thinking kept.
fn whole(target: Target, system: Option<Value>) -> ContextOptions {
    ContextOptions {
        target,
        max_tokens: None,
        max_messages: None,
        system,
        tool_result_preview_chars: None,
        reasoning: Reasoning::Keep,
        model: None,
    }
}

fn problems(target: Target, messages: &[Value]) -> Vec<threadline::Problem> {
    match target {
        Target::Anthropic => validate_messages(messages),
        Target::OpenAiChat => validate_openai_chat(messages),
        Target::OpenAiResponses => validate_openai_responses(messages),
    }
}

fn check(restore: bool, ops: &[Op], budgets: &[Budget]) -> Result<(), TestCaseError> {
    let store = Store::memory().expect("store");
    let session = store
        .create_session(SessionOptions::default())
        .expect("session");
    let mut w = World {
        store,
        session,
        open: Vec::new(),
        ids: Vec::new(),
        n: 0,
        pending: restore.then(Vec::new),
    };
    for op in ops {
        w.apply(op);
    }
    w.flush();
    for target in [
        Target::Anthropic,
        Target::OpenAiChat,
        Target::OpenAiResponses,
    ] {
        for b in budgets {
            let o = ContextOptions {
                target,
                max_tokens: b.max_tokens,
                max_messages: b.max_messages,
                system: b.system.clone(),
                tool_result_preview_chars: b.preview,
                reasoning: b.reasoning,
                model: b.model.clone(),
            };
            let c = w
                .session
                .build_context(&o)
                .map_err(|e| TestCaseError::fail(format!("buildContext: {e}")))?;
            let found = problems(target, &c.messages);
            prop_assert!(
                found.is_empty(),
                "{target:?} {b:?}: {found:?}\nsent: {}\nstored: {}",
                Value::Array(c.messages.clone()),
                Value::Array(w.session.messages().unwrap_or_default())
            );
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("THREADLINE_VALIDITY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6_000)
}

#[test]
fn every_request_built_from_any_history_is_valid_for_its_provider() {
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    };
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&history(), |(restore, ops, budgets)| {
        check(restore, &ops, &budgets)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!(
        "validity: {} histories, {} requests built and checked, {:.1} s",
        cases(),
        cases() * 12,
        started.elapsed().as_secs_f64()
    );
}

/// The two failures the hardening issue found, as fixed cases.
#[test]
fn a_history_that_starts_with_tool_calls_or_holds_empty_text_builds_valid_requests() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    s.restore_messages(vec![
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]}),
        json!({"role": "assistant", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "done"}]}),
        json!({"role": "user", "content": [{"type": "text", "text": ""}]}),
        json!({"role": "user", "content": [{"type": "text", "text": "next"}]}),
    ])
    .unwrap();
    for target in [
        Target::Anthropic,
        Target::OpenAiChat,
        Target::OpenAiResponses,
    ] {
        let c = s.build_context(&whole(target, None)).unwrap();
        assert!(
            problems(target, &c.messages).is_empty(),
            "{target:?}: {:?}",
            c.messages
        );
        if target == Target::Anthropic {
            assert_eq!(
                Value::Array(c.messages),
                json!([{"role": "user", "content": [{"type": "text", "text": "next"}]}])
            );
        }
    }
    // A system prompt with no text is no empty system message for OpenAI.
    for system in [json!(""), json!([{"type": "text", "text": " "}])] {
        let c = s
            .build_context(&whole(Target::OpenAiChat, Some(system)))
            .unwrap();
        assert!(
            validate_openai_chat(&c.messages).is_empty(),
            "{:?}",
            c.messages
        );
        assert_eq!(c.messages[0]["role"], "user");
    }
    // The history itself is kept as given.
    assert_eq!(s.messages().unwrap().len(), 5);
    assert_eq!(
        s.messages().unwrap()[2]["content"][0],
        json!({"type": "text", "text": ""})
    );
}

#[test]
fn an_empty_string_prompt_is_refused_with_its_path() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    for text in ["", "  \n"] {
        let e = s.append(json!(text), None).unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT");
        assert!(
            e.message().starts_with("append: content[0].text: "),
            "{}",
            e.message()
        );
    }
    let e = s.append_many(vec![json!("ok"), json!("")]).unwrap_err();
    assert!(
        e.message().starts_with("appendMany: [1].content[0].text: "),
        "{}",
        e.message()
    );
    assert_eq!(s.messages().unwrap().len(), 0);
    // Empty text inside a message is kept (lossless import), and never sent.
    s.append(json!({"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "hi"}]}), None)
        .unwrap();
    assert_eq!(s.messages().unwrap()[0]["content"][0]["text"], "");
}

/// A long transcript cut inside a tool loop (no prompt at all): everything before the first
/// prompt goes in one step, not one message pair per pass over the whole list.
#[test]
fn a_long_tool_loop_with_no_prompt_is_left_out_in_linear_time() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    let mut items = Vec::new();
    for k in 0..4000 {
        let id = format!("toolu_{k}");
        items.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "ls", "input": {}}]}));
        items.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}));
    }
    items.push(json!({"role": "user", "content": [{"type": "text", "text": "now this"}]}));
    s.restore_messages(items).unwrap();
    let started = std::time::Instant::now();
    for target in [
        Target::Anthropic,
        Target::OpenAiChat,
        Target::OpenAiResponses,
    ] {
        let c = s.build_context(&whole(target, None)).unwrap();
        assert!(problems(target, &c.messages).is_empty());
        assert_eq!(c.messages.len(), 1, "{target:?}");
        assert_eq!(c.stats.unpaired.len(), 8000);
    }
    let took = started.elapsed();
    assert!(took.as_secs() < 20, "{took:?}");
}
