//! Building requests (for every target) and compaction, on the real Claude Code sessions.

use std::path::PathBuf;

use serde_json::{json, Value};
use threadline::{
    validate_messages, validate_openai_chat, validate_openai_responses, CompactOptions,
    ContextOptions, Reasoning, Session, SessionOptions, Target,
};

fn fixture(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/claude-code")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Value::String(l.to_string()))
        .collect()
}

fn restored(name: &str) -> Session {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    s.restore_messages(fixture(name)).unwrap();
    s
}

fn options() -> ContextOptions {
    ContextOptions {
        target: Target::Anthropic,
        max_tokens: None,
        max_messages: None,
        system: None,
        tool_result_preview_chars: None,
        reasoning: Reasoning::Keep,
        model: None,
    }
}

fn text_of(m: &Value) -> String {
    m["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect()
}

#[test]
fn every_budget_cut_of_a_real_session_is_a_valid_request_that_keeps_the_latest_prompt() {
    for name in ["tool_heavy.jsonl", "short.jsonl", "compacted-session.jsonl"] {
        let s = restored(name);
        let full = s.build_context(&options()).unwrap();
        assert!(
            validate_messages(&full.messages).is_empty(),
            "{name}: {:?}",
            validate_messages(&full.messages)
        );
        assert!(full.stats.fits);
        let last = full
            .messages
            .iter()
            .rposition(|m| {
                m["role"] == "user"
                    && m["content"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|b| b["type"] != "tool_result")
            })
            .unwrap();
        let prompt_blocks = |m: &Value| -> Vec<Value> {
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] != "tool_result")
                .cloned()
                .collect()
        };
        let latest_prompt = prompt_blocks(&full.messages[last]);
        let total = full.stats.estimated_tokens;
        for step in 1..=20 {
            let o = ContextOptions {
                max_tokens: Some(total * step / 20),
                ..options()
            };
            let c = s.build_context(&o).unwrap();
            assert!(
                validate_messages(&c.messages).is_empty(),
                "{name} at {}: {:?}",
                total * step / 20,
                validate_messages(&c.messages)
            );
            assert!(
                c.messages
                    .iter()
                    .any(|m| m["role"] == "user" && prompt_blocks(m) == latest_prompt),
                "{name}: the latest prompt is always kept"
            );
            assert!(c.stats.fits == (c.stats.estimated_tokens <= total * step / 20));
            assert_eq!(
                c.stats.kept_records + c.stats.dropped_records,
                full.stats.kept_records
            );
        }
        for max in 1..6 {
            let c = s
                .build_context(&ContextOptions {
                    max_messages: Some(max),
                    ..options()
                })
                .unwrap();
            assert!(validate_messages(&c.messages).is_empty());
        }
        // The same cuts for the OpenAI targets: each output passes that API's checks.
        for target in [Target::OpenAiChat, Target::OpenAiResponses] {
            for step in 1..=10 {
                let c = s
                    .build_context(&ContextOptions {
                        target,
                        max_tokens: Some(total * step / 10),
                        system: Some(json!("You are terse.")),
                        ..options()
                    })
                    .unwrap();
                let problems = match target {
                    Target::OpenAiChat => validate_openai_chat(&c.messages),
                    _ => validate_openai_responses(&c.messages),
                };
                assert!(
                    problems.is_empty(),
                    "{name} {target:?} at step {step}: {problems:?}"
                );
                assert_eq!(
                    c.messages[0]["role"], "system",
                    "{target:?}: the system prompt goes first"
                );
            }
            // Thinking cannot be expressed there: it is said, not dropped silently.
            let c = s
                .build_context(&ContextOptions {
                    target,
                    ..options()
                })
                .unwrap();
            assert_eq!(
                c.stats
                    .warnings
                    .iter()
                    .any(|w| w.code == "thinking_dropped"),
                full_has_thinking(&full.messages),
                "{name} {target:?}: {:?}",
                c.stats.warnings
            );
        }
    }
}

fn full_has_thinking(messages: &[Value]) -> bool {
    messages.iter().any(|m| {
        m["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "thinking"))
    })
}

#[test]
fn the_anthropic_target_sends_role_and_content_only() {
    let s = restored("tool_heavy.jsonl");
    let c = s.build_context(&options()).unwrap();
    for m in &c.messages {
        let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["role", "content"]);
    }
    // The stored messages keep everything.
    assert!(s
        .messages()
        .unwrap()
        .iter()
        .any(|m| m.get("usage").is_some()));
}

#[test]
fn the_compacted_claude_code_session_is_built_from_its_compaction_point() {
    let s = restored("compacted-session.jsonl");
    let c = s.build_context(&options()).unwrap();
    assert!(c.stats.compacted);
    assert!(
        c.stats.start_seq > 700,
        "starts after the compact_boundary, at {}",
        c.stats.start_seq
    );
    assert!(text_of(&c.messages[0])
        .starts_with("This session is being continued from a previous conversation"));
    // `messages` is the view from the boundary (Claude Code's summary message first); the full
    // view keeps everything before it.
    let view = s.messages().unwrap();
    assert!(text_of(&view[0])
        .starts_with("This session is being continued from a previous conversation"));
    let all = s.all_messages().unwrap();
    assert!(all.len() > view.len());
    assert_eq!(all[all.len() - view.len()..], view[..]);
}

#[test]
fn long_tool_results_are_previewed_and_read_in_full() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    let big = "line of output\n".repeat(2000);
    s.append(json!("show the log"), None).unwrap();
    s.append(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}), None).unwrap();
    s.append(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]}), None).unwrap();
    let c = s
        .build_context(&ContextOptions {
            tool_result_preview_chars: Some(100),
            ..options()
        })
        .unwrap();
    let shown = c.messages[2]["content"][0]["content"].as_str().unwrap();
    assert!(shown.starts_with(&big[..100]));
    assert!(shown.contains("read_tool_output(tool_use_id: \"t1\")"));
    assert_eq!(c.stats.previewed[0].chars, big.len());
    assert_eq!(s.read_tool_output("t1").unwrap(), json!(big));
    assert_eq!(s.read_tool_output("nope").unwrap_err().code(), "NOT_FOUND");
    assert_eq!(
        s.messages().unwrap()[2]["content"][0]["content"],
        json!(big),
        "the stored output is untouched"
    );
}

#[test]
fn thinking_goes_back_only_where_it_may() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    s.append(json!("q1"), None).unwrap();
    s.append(
        json!({"role": "assistant", "model": "claude-a", "content": [
        {"type": "thinking", "thinking": "signed", "signature": "sig"},
        {"type": "thinking", "thinking": "half"},
        {"type": "text", "text": "a1"}]}),
        Some(
            json!({"provider": "anthropic"})
                .as_object()
                .unwrap()
                .clone(),
        ),
    )
    .unwrap();
    s.append(json!("q2"), None).unwrap();
    let kinds = |c: &threadline::Context| -> Vec<String> {
        c.messages[1]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap().to_string())
            .collect()
    };
    let keep = s.build_context(&options()).unwrap();
    assert_eq!(
        kinds(&keep),
        ["thinking", "text"],
        "unsigned thinking never goes back"
    );
    let drop = s
        .build_context(&ContextOptions {
            reasoning: Reasoning::Drop,
            ..options()
        })
        .unwrap();
    assert_eq!(kinds(&drop), ["text"]);
    let same = s
        .build_context(&ContextOptions {
            reasoning: Reasoning::SameModel,
            model: Some("claude-a".into()),
            ..options()
        })
        .unwrap();
    assert_eq!(kinds(&same), ["thinking", "text"]);
    let other = s
        .build_context(&ContextOptions {
            reasoning: Reasoning::SameModel,
            model: Some("claude-b".into()),
            ..options()
        })
        .unwrap();
    assert_eq!(kinds(&other), ["text"]);
    assert_eq!(other.stats.dropped_thinking, 2);
}

#[test]
fn compaction_summarises_whole_turns_and_moves_the_start_only_when_committed() {
    let s = restored("tool_heavy.jsonl");
    let before = s.build_context(&options()).unwrap();
    let plan = s.compaction_plan(0, Some(1)).unwrap();
    let first_kept = plan
        .first_kept_uuid
        .clone()
        .expect("something to summarise");
    // The first kept record starts a turn: a prompt, so no tool call is apart from its result.
    let kept = s
        .envelopes(0, None)
        .unwrap()
        .into_iter()
        .find(|e| e["uuid"] == json!(first_kept))
        .unwrap();
    let content = &kept["message"]["content"];
    assert!(
        content.is_string()
            || content
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["type"] != "tool_result")
    );
    assert!(!plan.text.is_empty());
    // A summary never committed changes nothing.
    assert_eq!(
        s.compact(CompactOptions {
            summary: "  ".into(),
            ..Default::default()
        })
        .unwrap_err()
        .code(),
        "INVALID_INPUT"
    );
    assert_eq!(
        s.build_context(&options()).unwrap().messages,
        before.messages
    );

    let env = s
        .compact(CompactOptions {
            summary: "We fixed the parser.".into(),
            first_kept_uuid: Some(first_kept),
            ..Default::default()
        })
        .unwrap();
    let after = s.build_context(&options()).unwrap();
    assert!(after.stats.compacted);
    // `messages` starts with the summary, then the kept records; nothing is lost from the full view.
    let all = s.all_messages().unwrap();
    let view = s.messages().unwrap();
    assert!(text_of(&view[0]).contains("We fixed the parser."));
    let kept = view.len() - 1;
    assert!(kept < all.len());
    assert_eq!(view[1..], all[all.len() - kept..]);
    assert!(text_of(&after.messages[0]).contains("We fixed the parser."));
    assert!(validate_messages(&after.messages).is_empty());
    assert!(after.messages.len() < before.messages.len());
    let t = s.token_tracker().unwrap();
    assert_eq!(
        t.context_tokens,
        env["compaction"]["tokensAfter"].as_u64().unwrap(),
        "the tracker is re-based"
    );
}

#[test]
fn rewind_continues_from_an_earlier_record_and_keeps_the_abandoned_branch() {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    let q1 = s.append(json!("q1"), None).unwrap();
    let a1 = s.append(json!({"role": "assistant", "content": [{"type": "text", "text": "a1"}], "usage": {"input_tokens": 10, "output_tokens": 5}}), None).unwrap();
    s.append(json!("q2 (abandoned)"), None).unwrap();
    let a2 = s.append(json!({"role": "assistant", "content": [{"type": "text", "text": "a2"}], "usage": {"input_tokens": 20, "output_tokens": 7}}), None).unwrap();
    let a1_uuid = a1["uuid"].as_str().unwrap();
    s.rewind(a1_uuid).unwrap();
    assert_eq!(
        s.messages().unwrap().len(),
        2,
        "messages follow the branch rewound to"
    );
    assert_eq!(s.turns().unwrap().len(), 1);
    assert_eq!(
        s.token_tracker().unwrap().cumulative_output_tokens,
        5,
        "token state is the branch's"
    );
    let q3 = s.append(json!("q3 instead"), None).unwrap();
    assert_eq!(
        q3["parentUuid"],
        json!(a1_uuid),
        "the next append's parent is the record rewound to"
    );
    let texts: Vec<String> = s.messages().unwrap().iter().map(text_of).collect();
    assert_eq!(texts, ["q1", "a1", "q3 instead"]);
    let c = s.build_context(&options()).unwrap();
    assert_eq!(c.messages.iter().map(text_of).collect::<Vec<_>>(), texts);
    let turns = s.turns().unwrap();
    assert_eq!(
        (turns.len(), turns[1].start_uuid.as_str()),
        (2, q3["uuid"].as_str().unwrap())
    );
    let branches = s.branches().unwrap();
    assert_eq!(branches.len(), 2);
    assert!(branches[0].current && branches[0].leaf_uuid == q3["uuid"].as_str().unwrap());
    assert_eq!(branches[1].leaf_uuid, a2["uuid"].as_str().unwrap());
    assert_eq!(branches[1].message_count, 4);
    assert_eq!(
        s.envelopes(0, None).unwrap().len(),
        6,
        "nothing is lost: the log keeps both branches"
    );
    // Back to the abandoned branch.
    s.rewind(a2["uuid"].as_str().unwrap()).unwrap();
    assert_eq!(s.messages().unwrap().len(), 4);
    assert_eq!(s.token_tracker().unwrap().cumulative_output_tokens, 12);
    assert_eq!(s.rewind("nope").unwrap_err().code(), "NOT_FOUND");
    let _ = q1;
}

#[test]
fn a_fork_starts_from_any_record_with_the_parent_state_there() {
    let store =
        threadline::Store::open(Some(":memory:"), threadline::StoreOptions::default()).unwrap();
    let s = store
        .create_session(SessionOptions {
            title: Some("parent".into()),
            ..Default::default()
        })
        .unwrap();
    let big = "x".repeat(50_000);
    s.append(json!("q1"), None).unwrap();
    let a1 = s.append(json!({"role": "assistant", "content": [{"type": "text", "text": big}], "usage": {"input_tokens": 10, "output_tokens": 5}}), None).unwrap();
    s.append(json!("q2"), None).unwrap();
    let f = store
        .fork_session(s.id(), a1["uuid"].as_str(), Some("fork".into()))
        .unwrap();
    assert_eq!(f.messages().unwrap(), s.messages().unwrap()[..2].to_vec());
    let info = f.info().unwrap();
    assert_eq!(info.title.as_deref(), Some("fork"));
    let from = info.forked_from.unwrap();
    assert_eq!(
        (from.session_id.as_str(), from.uuid.as_str()),
        (s.id(), a1["uuid"].as_str().unwrap())
    );
    assert_eq!(
        f.token_tracker().unwrap().cumulative_output_tokens,
        5,
        "the baseline is the parent's at the fork"
    );
    f.append(json!("q2 in the fork"), None).unwrap();
    assert_eq!(s.messages().unwrap().len(), 3, "the parent is untouched");
    assert_eq!(f.envelopes(0, None).unwrap()[0]["sessionId"], json!(f.id()));
}

/// A long session: turns of a prompt, a tool call (some with thinking), its result and an answer,
/// with reported usage (none when `input_tokens` is 0); compacted once, rewound once, the odd
/// event and long result.
fn long_session(turns: usize, input_tokens: u64) -> Session {
    let s = Session::in_memory(SessionOptions::default()).unwrap();
    let usage = |n: u64, out: u64| match input_tokens {
        0 => Value::Null,
        _ => json!({"input_tokens": n, "output_tokens": out}),
    };
    let mut batch = Vec::new();
    for i in 0..turns {
        let id = format!("toolu_{i:06}");
        batch.push(json!({"role": "user", "content": [{"type": "text", "text": format!("step {i}: look at module_{} and fix it", i % 37)}]}));
        let mut call = vec![
            json!({"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": format!("/repo/m{}.rs", i % 37)}}),
        ];
        if i.is_multiple_of(5) {
            call.insert(0, json!({"type": "thinking", "thinking": format!("thinking {i}"), "signature": "c2ln"}));
        }
        batch.push(
            json!({"role": "assistant", "id": format!("msg_{i}a"), "content": call,
            "usage": usage(input_tokens + i as u64 % 100, 20)}),
        );
        let output = if i % 50 == 7 {
            "x".repeat(3000)
        } else {
            format!("fn m{i}() {{ {i} }}\n").repeat(1 + i % 4)
        };
        batch.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}));
        batch.push(json!({"role": "assistant", "id": format!("msg_{i}b"), "content": [{"type": "text", "text": format!("Fixed module_{}.", i % 37)}],
            "usage": usage(input_tokens + 50, 10)}));
        if batch.len() >= 400 || i + 1 == turns {
            s.append_many(std::mem::take(&mut batch)).unwrap();
        }
        if i == turns / 3 {
            s.compact(CompactOptions {
                summary: "The first third: modules fixed one by one.".into(),
                keep_turns: Some(3),
                ..Default::default()
            })
            .unwrap();
        }
        if i == turns / 2 {
            s.append_event("checkpoint", Some(json!({"i": i})), None)
                .unwrap();
        }
        if i == turns * 2 / 3 {
            // Back a few turns: the branch left stays in the log, out of the context.
            let envs = s.envelopes(0, None).unwrap();
            let target = envs
                .iter()
                .rev()
                .filter(|e| e["type"] == "assistant")
                .nth(6)
                .unwrap();
            s.rewind(target["uuid"].as_str().unwrap()).unwrap();
        }
    }
    s
}

#[test]
fn a_budget_read_from_the_end_of_a_long_context_gives_what_the_whole_context_gives() {
    // No usage (the ratio is known at once), usage that reports too few tokens to calibrate (read
    // from the end until that shows), and usage that calibrates (the whole context is read).
    for input_tokens in [0, 800, 2_000_000] {
        let s = long_session(2_400, input_tokens);
        let whole = |o: &ContextOptions| {
            threadline::testing::read_whole_context(true);
            let c = s.build_context(o).unwrap();
            threadline::testing::read_whole_context(false);
            c
        };
        let full = whole(&options());
        assert!(full.stats.compacted);
        for target in [Target::Anthropic, Target::OpenAiResponses] {
            for (max_tokens, max_messages) in [
                (Some(0), None),
                (Some(2_000), None),
                (Some(30_000), None),
                (Some(150_000), None),
                (Some(full.stats.estimated_tokens - 1), None),
                (None, Some(1)),
                (None, Some(500)),
                (Some(20_000), Some(100)),
            ] {
                let o = ContextOptions {
                    target,
                    max_tokens,
                    max_messages,
                    tool_result_preview_chars: Some(1000),
                    ..options()
                };
                let (back, all) = (s.build_context(&o).unwrap(), whole(&o));
                let what = format!("{input_tokens} {target:?} {max_tokens:?} {max_messages:?}");
                assert_eq!(back.messages, all.messages, "{what}: messages");
                assert!(!back.messages.is_empty(), "{what}");
                let (b, a) = (&back.stats, &all.stats);
                assert_eq!(
                    b.estimated_tokens, a.estimated_tokens,
                    "{what}: estimatedTokens"
                );
                assert_eq!(
                    b.tokens_per_char, a.tokens_per_char,
                    "{what}: tokensPerChar"
                );
                assert_eq!(b.calibrated, a.calibrated, "{what}");
                assert_eq!(b.fits, a.fits, "{what}: fits");
                assert_eq!(b.start_seq, a.start_seq, "{what}: startSeq");
                assert_eq!(b.kept_records, a.kept_records, "{what}: keptRecords");
                assert_eq!(b.kept_turns, a.kept_turns, "{what}: keptTurns");
                assert_eq!(
                    b.dropped_records, a.dropped_records,
                    "{what}: droppedRecords"
                );
                assert_eq!(b.dropped_turns, a.dropped_turns, "{what}: droppedTurns");
                assert_eq!(
                    serde_json::to_value(&b.dropped).unwrap(),
                    serde_json::to_value(&a.dropped).unwrap(),
                    "{what}: dropped"
                );
                assert_eq!(b.messages, a.messages, "{what}");
                assert_eq!(
                    serde_json::to_value(&b.id_map).unwrap(),
                    serde_json::to_value(&a.id_map).unwrap()
                );
            }
        }
    }
}

#[test]
fn a_plan_of_a_context_over_the_summary_cap_is_made_from_its_end_and_hands_over_the_newest_turns() {
    for input_tokens in [0, 800, 2_000_000] {
        let s = long_session(2_400, input_tokens);
        for (target, keep) in [(2_000, Some(2)), (20_000, None), (0, Some(5))] {
            threadline::testing::read_whole_context(true);
            let whole = s.compaction_plan(target, keep).unwrap();
            threadline::testing::read_whole_context(false);
            let what = format!("{input_tokens} {target} {keep:?}");
            // At the default cap: what a read of the whole context gives (with usage that
            // calibrates, 2,000,000 tokens: more to summarise than the cap, the newest given).
            let same = s.compaction_plan(target, keep).unwrap();
            assert_eq!(same.records, whole.records, "{what}");
            assert_eq!(same.records_omitted, whole.records_omitted, "{what}");
            assert_eq!(
                whole.records_omitted > 0,
                input_tokens == 2_000_000,
                "{what}"
            );
            threadline::testing::set_summary_cap(Some(3_000));
            let capped = s.compaction_plan(target, keep);
            threadline::testing::set_summary_cap(None);
            let capped = capped.unwrap();
            // The same cut, and what is kept, counted alike.
            assert_eq!(capped.first_kept_uuid, whole.first_kept_uuid, "{what}");
            assert_eq!(capped.tokens_kept, whole.tokens_kept, "{what}");
            assert_eq!(capped.turns_kept, whole.turns_kept, "{what}");
            assert_eq!(capped.turns_summarised, whole.turns_summarised, "{what}");
            // The newest records to summarise, whole turns within the cap, the rest counted.
            let n = capped.records.len();
            assert!(n > 0 && n < whole.records.len(), "{what}: {n}");
            assert_eq!(
                capped.records[..],
                whole.records[whole.records.len() - n..],
                "{what}"
            );
            let all = whole.records_omitted as usize + whole.records.len();
            assert_eq!(capped.records_omitted as usize, all - n, "{what}");
            assert!(whole.text.ends_with(&capped.text), "{what}");
            assert!(capped.tokens_to_summarise > 3_000, "{what}");
            assert_eq!(
                capped.records[0]["message"]["role"], "user",
                "{what}: a turn start"
            );
            // What was not read is estimated: within a fifth of the count of all of it.
            let (a, b) = (
                capped.tokens_to_summarise as f64,
                whole.tokens_to_summarise as f64,
            );
            assert!((a - b).abs() / b < 0.2, "{what}: {a} vs {b}");
            assert_eq!(
                capped.tokens_before,
                capped.tokens_to_summarise + capped.tokens_kept
            );
        }
    }
}
