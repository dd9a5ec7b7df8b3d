//! Import of other agents' files and export back, on the real fixtures.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use threadline::interop::{export, import, ExportFormat, Format, ImportOptions, Progress};
use threadline::{
    validate_messages, validate_openai_chat, validate_openai_responses, ContextOptions,
    SessionFilter, Store, StoreOptions, Target,
};

fn fixtures(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(sub)
}

fn store(dir: &Path, name: &str) -> Store {
    Store::open(Some(&common::location(dir, name)), StoreOptions::default()).unwrap()
}

fn run(
    store: &Store,
    format: Format,
    path: &Path,
) -> (threadline::interop::ImportReport, Vec<Progress>) {
    let mut seen = Vec::new();
    let report = import(store, format, path, &ImportOptions::default(), &mut |p| {
        seen.push(*p)
    })
    .unwrap();
    (report, seen)
}

/// The lines of a JSONL file, with a message's string content as the one text block the store
/// keeps it as (the one change a store makes to a message).
fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if let Some(c) = v.get_mut("message").and_then(|m| m.get_mut("content")) {
                if let Value::String(text) = c {
                    *c = json!([{"type": "text", "text": text}]);
                }
            }
            v
        })
        .collect()
}

fn context_options(target: Target) -> ContextOptions {
    ContextOptions {
        target,
        max_tokens: None,
        max_messages: None,
        system: None,
        tool_result_preview_chars: None,
        reasoning: Default::default(),
        model: None,
    }
}

/// Every imported session's context is a valid request for all three targets.
fn assert_contexts_valid(store: &Store) {
    for info in store.list_sessions(&SessionFilter::default()).unwrap() {
        let s = store.open_session(&info.id, None).unwrap();
        for target in [
            Target::Anthropic,
            Target::OpenAiChat,
            Target::OpenAiResponses,
        ] {
            let c = s
                .build_context(&ContextOptions {
                    target,
                    max_tokens: None,
                    max_messages: None,
                    system: Some(json!("You are terse.")),
                    tool_result_preview_chars: None,
                    reasoning: Default::default(),
                    model: None,
                })
                .unwrap();
            let problems: Vec<String> = match target {
                Target::Anthropic => validate_messages(&c.messages)
                    .iter()
                    .map(|p| format!("{p:?}"))
                    .collect(),
                Target::OpenAiChat => validate_openai_chat(&c.messages)
                    .iter()
                    .map(|p| format!("{p:?}"))
                    .collect(),
                Target::OpenAiResponses => validate_openai_responses(&c.messages)
                    .iter()
                    .map(|p| format!("{p:?}"))
                    .collect(),
            };
            assert!(problems.is_empty(), "{} {target:?}: {problems:?}", info.id);
        }
    }
}

#[test]
fn claude_code_files_import_every_line_once_and_again_add_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let root = fixtures("claude-code");
    let (report, progress) = run(&s, Format::ClaudeCode, &root);
    let files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    let total_lines: usize = files.iter().map(|f| lines_of(f).len()).sum();
    assert_eq!(report.sessions, files.len() as u64);
    assert_eq!(report.new_sessions, files.len() as u64);
    assert_eq!(report.records, total_lines as u64, "{:?}", report.skipped);
    assert_eq!(report.new_records, total_lines as u64);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(progress.len(), files.len());
    let last = progress.last().unwrap();
    assert_eq!(last.files, last.total_files);
    assert_eq!(last.bytes, last.total_bytes);
    assert!(report.events["progress"] > 0 && report.events["file-history-snapshot"] > 0);

    // each file's records are stored as they were, in order
    for f in &files {
        let id = f.file_stem().unwrap().to_string_lossy().into_owned();
        let session = s.open_session(&id, None).unwrap();
        let stored = session.envelopes(0, None).unwrap();
        let original = lines_of(f);
        assert_eq!(stored.len(), original.len());
        for (got, want) in stored.iter().zip(&original) {
            for (k, v) in want.as_object().unwrap() {
                assert_eq!(&got[k], v, "{id}: key {k}");
            }
        }
        let info = session.info().unwrap();
        assert_eq!(
            info.metadata.unwrap()["importedFrom"]["format"],
            "claude-code"
        );
        assert!(info.project.unwrap().starts_with("/home/"));
    }

    let (again, _) = run(&s, Format::ClaudeCode, &root);
    assert_eq!(again.records, report.records);
    assert_eq!(again.new_records, 0);
    assert_eq!(again.new_sessions, 0);
    assert!(again.skipped.is_empty(), "{:?}", again.skipped);
    assert_contexts_valid(&s);
}

#[test]
fn a_grown_file_adds_only_its_new_lines_and_a_bad_line_is_reported_with_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let text = std::fs::read_to_string(fixtures("claude-code/tool_heavy.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let file = dir.path().join("d6e0bada.jsonl");
    let half = lines.len() / 2;
    std::fs::write(&file, lines[..half].join("\n") + "\n").unwrap();
    let (first, _) = run(&s, Format::ClaudeCode, &file);
    assert_eq!(first.new_records, half as u64);
    let mut grown = lines.join("\n");
    grown.push_str("\n{not json\n");
    std::fs::write(&file, grown).unwrap();
    let (second, _) = run(&s, Format::ClaudeCode, &file);
    assert_eq!(second.new_records, (lines.len() - half) as u64);
    assert_eq!(second.records, lines.len() as u64);
    assert_eq!(second.skipped.len(), 1);
    assert_eq!(second.skipped[0].line, Some(lines.len() as u64 + 1));
    assert!(
        second.skipped[0].reason.starts_with("not JSON"),
        "{}",
        second.skipped[0].reason
    );
    let session = s.open_session("d6e0bada", None).unwrap();
    assert_eq!(session.envelopes(0, None).unwrap().len(), lines.len());
}

#[test]
fn claude_code_export_gives_the_files_back_and_imports_to_the_same_messages() {
    let dir = tempfile::tempdir().unwrap();
    let a = store(dir.path(), "a.db");
    let root = fixtures("claude-code");
    run(&a, Format::ClaudeCode, &root);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for info in a.list_sessions(&SessionFilter::default()).unwrap() {
        let session = a.open_session(&info.id, None).unwrap();
        let text = export(&session, ExportFormat::ClaudeCode).unwrap();
        let original = lines_of(&root.join(format!("{}.jsonl", info.id)));
        let exported: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            exported, original,
            "{}: the lines as Claude Code wrote them",
            info.id
        );
        std::fs::write(out.join(format!("{}.jsonl", info.id)), text).unwrap();
    }
    let b = store(dir.path(), "b.db");
    run(&b, Format::ClaudeCode, &out);
    for info in a.list_sessions(&SessionFilter::default()).unwrap() {
        let x = a.open_session(&info.id, None).unwrap();
        let y = b.open_session(&info.id, None).unwrap();
        assert_eq!(x.messages().unwrap(), y.messages().unwrap());
        assert_eq!(x.all_messages().unwrap(), y.all_messages().unwrap());
        assert_eq!(x.turns().unwrap().len(), y.turns().unwrap().len());
    }
}

#[test]
fn a_native_session_exports_one_block_per_line_chained_and_reimports_to_the_same_context() {
    let dir = tempfile::tempdir().unwrap();
    let a = store(dir.path(), "a.db");
    let s = a.create_session(Default::default()).unwrap();
    s.append(json!("List src"), None).unwrap();
    s.append(
        json!({"role": "assistant", "id": "msg_1", "model": "claude-sonnet-4-5",
        "content": [{"type": "thinking", "thinking": "look", "signature": "sig"},
                    {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "src"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5}}),
        Some(serde_json::from_value(json!({"requestId": "req_1"})).unwrap()),
    )
    .unwrap();
    s.append(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.rs"}]}), None).unwrap();
    let text = export(&s, ExportFormat::ClaudeCode).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    for (i, l) in lines.iter().enumerate() {
        assert!(l.get("seq").is_none());
        assert_eq!(l["sessionId"], s.id());
        if i > 0 {
            assert_eq!(
                l["parentUuid"],
                lines[i - 1]["uuid"],
                "line {i} chains to the one before"
            );
        }
    }
    for l in &lines[1..4] {
        assert_eq!(l["message"]["content"].as_array().unwrap().len(), 1);
        assert_eq!(l["message"]["id"], "msg_1");
        assert_eq!(l["requestId"], "req_1");
    }
    assert_eq!(lines[4]["type"], "user");
    let file = dir.path().join(format!("{}.jsonl", s.id()));
    std::fs::write(&file, &text).unwrap();
    let b = store(dir.path(), "b.db");
    run(&b, Format::ClaudeCode, &file);
    let t = b.open_session(s.id(), None).unwrap();
    let opts = context_options(Target::Anthropic);
    assert_eq!(
        s.build_context(&opts).unwrap().messages,
        t.build_context(&opts).unwrap().messages
    );
    assert_eq!(t.token_tracker().unwrap().cumulative_output_tokens, 5);
}

#[test]
fn a_missing_path_is_not_found_and_an_unknown_format_is_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let e = import(
        &s,
        Format::ClaudeCode,
        &dir.path().join("nope"),
        &ImportOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(e.code(), "NOT_FOUND");
    assert!(e.message().contains("nope"), "{}", e.message());
    assert_eq!(Format::parse("gemini").unwrap_err().code(), "INVALID_INPUT");
    assert_eq!(
        ExportFormat::parse("pdf").unwrap_err().code(),
        "INVALID_INPUT"
    );
}

/// A Claude Code project folder as Claude Code lays it out: the session's file and its
/// subagents' folder (the real files of fixtures/claude-code and fixtures/claude-code-subagents).
fn project_folder(dir: &Path) -> PathBuf {
    let sid = "4d5611e5-241a-462a-8d15-5122611a9569";
    let project = dir.join("projects/-home-USER-projects-spotter-worktrees-spotter-dov");
    std::fs::create_dir_all(project.join(sid).join("subagents")).unwrap();
    std::fs::copy(
        fixtures("claude-code/compacted-session.jsonl"),
        project.join(format!("{sid}.jsonl")),
    )
    .unwrap();
    let subagents = fixtures("claude-code-subagents")
        .join(sid)
        .join("subagents");
    for e in std::fs::read_dir(subagents).unwrap() {
        let e = e.unwrap();
        std::fs::copy(
            e.path(),
            project.join(sid).join("subagents").join(e.file_name()),
        )
        .unwrap();
    }
    dir.join("projects")
}

#[test]
fn subagent_files_become_sessions_linked_to_their_parent_and_the_call_that_spawned_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let root = project_folder(dir.path());
    let (report, progress) = run(&s, Format::ClaudeCode, &root);
    assert_eq!(progress.len(), 3);
    assert_eq!(report.sessions, 3);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let sid = "4d5611e5-241a-462a-8d15-5122611a9569";
    let explore = s
        .open_session(&format!("{sid}/agent-a2898e3"), None)
        .unwrap();
    let m = explore.info().unwrap().metadata.unwrap();
    assert_eq!(m["parentSessionId"], sid);
    assert_eq!(m["parentToolUseId"], "toolu_017pLRuPHYTX5t99EnLyV53m");
    assert_eq!(m["agentId"], "a2898e3");
    assert_eq!(m["agentKind"], "subagent");
    // the call is in the parent, and its result names the agent
    let parent = s.open_session(sid, None).unwrap();
    let spawned = parent
        .envelopes(0, None)
        .unwrap()
        .into_iter()
        .find(|r| r["toolUseResult"]["agentId"] == "a2898e3")
        .unwrap();
    assert_eq!(
        spawned["message"]["content"][0]["tool_use_id"],
        "toolu_017pLRuPHYTX5t99EnLyV53m"
    );
    assert_eq!(explore.envelopes(0, None).unwrap().len(), 144);
    let compaction = s
        .open_session(&format!("{sid}/agent-acompact-e1f845"), None)
        .unwrap();
    let m = compaction.info().unwrap().metadata.unwrap();
    assert_eq!(m["agentKind"], "compaction");
    assert!(m.get("parentToolUseId").is_none());
    assert_eq!(
        m["parentRecordUuid"],
        "6d942f99-74cb-4183-92e6-69aa915cb5f6"
    );
    assert_contexts_valid(&s);
    let (again, _) = run(&s, Format::ClaudeCode, &root);
    assert_eq!((again.new_sessions, again.new_records), (0, 0));
}

#[test]
fn a_subagent_exported_as_claude_code_imports_alone_as_one_session_with_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let a = store(dir.path(), "a.db");
    run(&a, Format::ClaudeCode, &project_folder(dir.path()));
    let sid = "4d5611e5-241a-462a-8d15-5122611a9569";
    let agent = a
        .open_session(&format!("{sid}/agent-a2898e3"), None)
        .unwrap();
    let file = dir.path().join("agent-a2898e3.jsonl");
    std::fs::write(&file, export(&agent, ExportFormat::ClaudeCode).unwrap()).unwrap();
    let b = store(dir.path(), "b.db");
    let (report, _) = run(&b, Format::ClaudeCode, &file);
    assert_eq!((report.sessions, report.new_sessions), (1, 1));
    let ids: Vec<String> = b
        .list_sessions(&SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(ids, ["agent-a2898e3"], "one session, no sidechain-<n>");
    let back = b.open_session("agent-a2898e3", None).unwrap();
    assert_eq!(
        back.envelopes(0, None).unwrap(),
        agent.envelopes(0, None).unwrap()
    );
    assert_eq!(back.messages().unwrap(), agent.messages().unwrap());
}

#[test]
fn inline_sidechains_become_sessions_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    // An older file's layout: the subagent's records inline in the session's file, marked
    // isSidechain (the real records, interleaved after the spawning call).
    let main = std::fs::read_to_string(fixtures("claude-code/short.jsonl")).unwrap();
    let side = std::fs::read_to_string(fixtures(
        "claude-code-subagents/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl",
    ))
    .unwrap();
    let mut lines: Vec<&str> = main.lines().collect();
    let at = lines.len() / 2;
    let side: Vec<&str> = side.lines().collect();
    lines.splice(at..at, side.iter().copied());
    let file = dir.path().join("mixed.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let (report, _) = run(&s, Format::ClaudeCode, &file);
    assert_eq!(report.sessions, 2);
    assert_eq!(
        s.open_session("mixed", None)
            .unwrap()
            .envelopes(0, None)
            .unwrap()
            .len(),
        main.lines().count()
    );
    let chain = s.open_session("mixed/sidechain-1", None).unwrap();
    assert_eq!(chain.envelopes(0, None).unwrap().len(), side.len());
    assert_eq!(
        chain.info().unwrap().metadata.unwrap()["parentSessionId"],
        "mixed"
    );
    assert_contexts_valid(&s);
}

#[test]
fn codex_rollouts_import_with_their_messages_events_subagents_and_a_bad_line_reported() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let root = fixtures("codex");
    let (report, progress) = run(&s, Format::Codex, &root);
    assert_eq!(progress.len(), 6);
    assert_eq!(report.sessions, 6);
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert!(report.skipped[0]
        .file
        .ends_with("rollout-66666666-6666-4666-8666-666666666666.jsonl"));
    assert_eq!(report.skipped[0].line, Some(3));
    assert_eq!(
        report.events["future_synthetic_record"], 1,
        "an unknown type is kept and counted"
    );

    let main = s
        .open_session("11111111-1111-4111-8111-111111111111", None)
        .unwrap();
    let info = main.info().unwrap();
    assert_eq!(
        info.project.as_deref(),
        Some("/workspace/synthetic-project")
    );
    assert_eq!(info.model.as_deref(), Some("synthetic-model"));
    let roles: Vec<String> = main
        .messages()
        .unwrap()
        .iter()
        .map(|m| {
            let blocks: Vec<&str> = m["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["type"].as_str().unwrap())
                .collect();
            format!("{} {}", m["role"].as_str().unwrap(), blocks.join(","))
        })
        .collect();
    assert_eq!(
        roles,
        [
            "user text",
            "assistant openai_reasoning",
            "assistant tool_use",
            "user tool_result",
            "assistant tool_use",
            "user tool_result",
            "assistant tool_use",
            "user tool_result",
            "assistant text"
        ]
    );
    // every line is a record, the unknown one too
    assert_eq!(main.envelopes(0, None).unwrap().len(), 14);
    assert_eq!(main.turns().unwrap().len(), 1);

    let sub = s
        .open_session("33333333-3333-4333-8333-333333333333", None)
        .unwrap();
    let m = sub.info().unwrap().metadata.unwrap();
    assert_eq!(m["parentSessionId"], "22222222-2222-4222-8222-222222222222");
    assert_eq!(m["parentToolUseId"], "call-spawn-001");

    let legacy = s
        .open_session("44444444-4444-4444-8444-444444444444", None)
        .unwrap();
    let texts: Vec<Value> = legacy
        .messages()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].clone())
        .collect();
    assert_eq!(
        texts,
        [
            json!("Open the synthetic legacy session."),
            json!("The synthetic legacy session is open.")
        ]
    );
    assert_eq!(
        legacy.envelopes(0, None).unwrap()[0]["type"],
        "session_meta"
    );
    // Its items carry no time: they are dated at the header (2026-01-04), not at the import.
    let times: Vec<Value> = legacy
        .envelopes(0, None)
        .unwrap()
        .iter()
        .map(|e| e["timestamp"].clone())
        .collect();
    assert_eq!(times, vec![json!("2026-01-04T05:06:07.000Z"); 3]);

    assert_contexts_valid(&s);
    let (again, _) = run(&s, Format::Codex, &root);
    assert_eq!((again.new_sessions, again.new_records), (0, 0));
}

#[test]
fn compaction_after_a_rewind_starts_the_context_at_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let file = fixtures("claude-code-log/dag_compact_after_rewind.jsonl");
    let (report, _) = run(&s, Format::ClaudeCode, &file);
    // the 12 lines, and the rewind before "Second attempt" (its parent is "Ready", not the
    // answer written before it)
    assert_eq!(report.records, 13);
    assert_eq!(report.events["rewind"], 1);
    let session = s.open_session("dag_compact_after_rewind", None).unwrap();
    let branches = session.branches().unwrap();
    let leaves: Vec<(&str, bool, Option<&str>)> = branches
        .iter()
        .map(|b| (b.leaf_uuid.as_str(), b.current, b.forked_at_uuid.as_deref()))
        .collect();
    assert_eq!(leaves, [("p1a", true, None), ("b1a", false, Some("a1"))]);
    let c = session
        .build_context(&context_options(Target::Anthropic))
        .unwrap();
    let texts: Vec<String> = c
        .messages
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect();
    assert!(
        texts[0].contains("Summary: the user asked for a plan."),
        "{texts:?}"
    );
    assert_eq!(&texts[1..], ["After compaction", "Final answer"]);
    assert!(validate_messages(&c.messages).is_empty());
    // the branch: the first attempt was left, the second kept; the log keeps both
    let all = serde_json::to_string(&session.all_messages().unwrap()).unwrap();
    assert!(!all.contains("First attempt") && all.contains("Second attempt"));
    assert_eq!(session.envelopes(0, None).unwrap().len(), 13);
    // a second import finds the rewind
    let (again, _) = run(&s, Format::ClaudeCode, &file);
    assert_eq!(again.new_records, 0);
}

#[test]
fn a_pi_session_imports_its_messages_compactions_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let file = fixtures("pi/before-compaction.jsonl");
    let original = lines_of(&file);
    let (report, _) = run(&s, Format::Pi, &file);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.records, original.len() as u64);
    assert_eq!(report.events["model_change"], 5);
    assert_eq!(report.events["thinking_level_change"], 5);
    assert_eq!(
        report.events["message"], 3,
        "bashExecution entries are kept as they are"
    );
    let session = s
        .open_session("ffae836b-9420-4060-ac13-7745215f90ff", None)
        .unwrap();
    let info = session.info().unwrap();
    assert_eq!(info.model.as_deref(), Some("claude-opus-4-5"));
    assert_eq!(
        info.project.as_deref(),
        Some("/Users/badlogic/workspaces/pi-mono")
    );
    let all = session.all_messages().unwrap();
    let count = |role: &str| {
        original
            .iter()
            .filter(|l| l["message"]["role"] == role)
            .count()
    };
    assert_eq!(
        all.len(),
        count("user") + count("assistant") + count("toolResult")
    );
    // a tool call and its result, as the provider wants them
    let call = all
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .find(|b| b["type"] == "tool_use")
        .unwrap();
    assert_eq!(call["id"], "toolu_012yuiPP1VAfh196GXaAmT8D");
    assert_eq!(call["name"], "read");
    assert!(call["input"]["path"].as_str().unwrap().ends_with("main.ts"));
    let thinking = all
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .find(|b| b["type"] == "thinking")
        .unwrap();
    assert!(thinking.get("signature").is_some());
    // usage counted as pi counted it
    let out: u64 = original
        .iter()
        .filter(|l| l["message"]["role"] == "assistant")
        .map(|l| l["message"]["usage"]["output"].as_u64().unwrap())
        .sum();
    assert_eq!(
        session.token_tracker().unwrap().cumulative_output_tokens,
        out
    );
    // the last compaction keeps from entry 551: the context starts at its summary, then that entry
    let c = session
        .build_context(&context_options(Target::Anthropic))
        .unwrap();
    assert!(c.messages[0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("# Context Checkpoint: Coding Agent Refactoring"));
    assert!(c.messages.len() < all.len());
    assert_contexts_valid(&s);
    let (again, _) = run(&s, Format::Pi, &file);
    assert_eq!((again.new_sessions, again.new_records), (0, 0));
}

#[test]
fn a_pi_tree_imports_with_its_branches_as_branches_and_the_last_one_current() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let file = fixtures("pi/branched.jsonl");
    let entries = lines_of(&file);
    let (report, _) = run(&s, Format::Pi, &file);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    // pi's tree from the file itself: the leaves are the entries nothing continues, and the
    // current branch is the path from the last entry back to the root.
    let parents: HashSet<&str> = entries
        .iter()
        .filter_map(|e| e["parentId"].as_str())
        .collect();
    let leaves: HashSet<String> = entries
        .iter()
        .filter(|e| e["type"] != "session")
        .filter_map(|e| e["id"].as_str())
        .filter(|id| !parents.contains(id))
        .map(str::to_string)
        .collect();
    assert_eq!(leaves.len(), 3);
    let by_id: HashMap<&str, &Value> = entries
        .iter()
        .filter_map(|e| Some((e["id"].as_str()?, e)))
        .collect();
    let mut path = Vec::new();
    let mut at = entries.last().unwrap();
    loop {
        path.push(at);
        match at["parentId"].as_str() {
            Some(p) => at = by_id[p],
            None => break,
        }
    }
    assert_eq!(
        report.events["rewind"], 2,
        "one rewind per branch point pi went back to"
    );

    let session = s
        .open_session("019b001f-d6fa-74b8-a3c0-2be0a64ca101", None)
        .unwrap();
    let branches = session.branches().unwrap();
    let found: HashSet<String> = branches.iter().map(|b| b.leaf_uuid.clone()).collect();
    assert_eq!(found, leaves);
    let current = branches.iter().find(|b| b.current).unwrap();
    assert_eq!(
        Some(current.leaf_uuid.as_str()),
        entries.last().unwrap()["id"].as_str()
    );
    // each abandoned branch names the entry pi went back to
    let forked: HashMap<String, Option<String>> = branches
        .iter()
        .map(|b| (b.leaf_uuid.clone(), b.forked_at_uuid.clone()))
        .collect();
    assert_eq!(forked["2b59bdde"].as_deref(), Some("fae19071"));
    assert_eq!(forked["ed70f735"].as_deref(), Some("73a18acb"));
    // messages follow the current branch (from the compaction's summary and the entry it keeps);
    // allMessages is the whole branch, across the compaction
    let compaction = entries.iter().find(|e| e["type"] == "compaction").unwrap();
    let kept = compaction["firstKeptEntryId"].as_str().unwrap();
    let on_branch: Vec<&&Value> = path
        .iter()
        .rev()
        .filter(|e| e["type"] == "message")
        .collect();
    let from = on_branch.iter().position(|e| e["id"] == kept).unwrap();
    let messages = session.messages().unwrap();
    assert_eq!(messages.len(), 1 + on_branch.len() - from);
    assert_eq!(session.all_messages().unwrap().len(), on_branch.len());
    assert!(on_branch.len() < entries.iter().filter(|e| e["type"] == "message").count());
    // the context: the compaction's summary, then from the entry it keeps, along the branch
    let c = session
        .build_context(&context_options(Target::Anthropic))
        .unwrap();
    let summary = compaction["summary"].as_str().unwrap();
    let first = c.messages[0]["content"][0]["text"].as_str().unwrap();
    assert!(first.contains(&summary[..40]), "{first}");
    // the abandoned branches' prompts are not in it; the current branch's are
    let text_of = |id: &str| {
        by_id[id]["message"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let sent = serde_json::to_string(&c.messages).unwrap();
    assert!(!sent.contains(&text_of("8449278d")));
    assert!(sent.contains(&text_of("6b3fcfe7")));
    assert_contexts_valid(&s);
    // a second import finds the rewinds too
    let (again, _) = run(&s, Format::Pi, &file);
    assert_eq!((again.new_sessions, again.new_records), (0, 0));
    assert_eq!(session.branches().unwrap().len(), 3);
}

#[test]
fn a_real_project_folder_imports_with_its_subagents_linked_and_every_context_valid() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let (report, _) = run(&s, Format::ClaudeCode, &fixtures("claude-code-projects"));
    assert_eq!(report.sessions, 3);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let sid = "ae4a77f8-aedd-4bc1-888f-c94edc91af04";
    let agent = s
        .open_session(&format!("{sid}/agent-aac57f5"), None)
        .unwrap();
    let m = agent.info().unwrap().metadata.unwrap();
    assert_eq!(m["parentSessionId"], sid);
    assert_eq!(m["parentToolUseId"], "toolu_01Hf8v1Za7y4af8VUwSR4CXU");
    let compaction = s
        .open_session(&format!("{sid}/agent-acompact-946d2b"), None)
        .unwrap();
    assert_eq!(
        compaction.info().unwrap().metadata.unwrap()["agentKind"],
        "compaction"
    );
    assert_contexts_valid(&s);
}

#[test]
fn claude_code_log_cases_import_with_every_bad_line_reported_and_every_context_valid() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let root = fixtures("claude-code-log");
    let (report, _) = run(&s, Format::ClaudeCode, &root);
    // edge_cases.jsonl holds lines that are JSON but not records, and sidechain_integrated.jsonl
    // a tool result with `is_error: null`: each such line is reported with its file, line and
    // reason, and the rest of its file imports
    for skip in &report.skipped {
        assert!(
            skip.file.ends_with("edge_cases.jsonl")
                || skip.file.ends_with("sidechain_integrated.jsonl"),
            "{skip:?}"
        );
        assert!(skip.line.is_some() && !skip.reason.is_empty());
    }
    assert!(report
        .skipped
        .iter()
        .any(|s| s.file.ends_with("edge_cases.jsonl")));
    assert!(report.records > 0);
    assert!(s
        .open_session("55550000-0000-4000-8000-000000000001/agent-showcol1", None)
        .is_ok());
    assert_contexts_valid(&s);
}

/// The manifests of an fspec data directory, and its stored messages by id (the last line of an
/// id wins, as in fspec: a metadata update appends the message again).
fn fspec_data(data: &Path) -> (Vec<Value>, HashMap<String, Value>) {
    let mut manifests: Vec<Value> = std::fs::read_dir(data.join("sessions"))
        .unwrap()
        .map(|e| {
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap()
        })
        .collect();
    manifests.sort_by_key(|m: &Value| m["id"].as_str().unwrap().to_string());
    let stored = lines_of(&data.join("messages/messages.jsonl"))
        .into_iter()
        .map(|v| (v["id"].as_str().unwrap().to_string(), v))
        .collect();
    (manifests, stored)
}

#[test]
fn an_fspec_data_directory_imports_its_sessions_with_forks_merges_compaction_blobs_and_usage() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let data = fixtures("fspec/data");
    let (manifests, stored) = fspec_data(&data);
    let (report, seen) = run(&s, Format::Fspec, &data);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.sessions, manifests.len() as u64);
    // the messages file, then each manifest
    assert_eq!(seen.len(), manifests.len() + 1);
    assert_eq!(seen[0].records, 0);
    for m in &manifests {
        let id = m["id"].as_str().unwrap();
        let session = s.open_session(id, None).unwrap();
        let info = session.info().unwrap();
        assert_eq!(info.title.as_deref(), m["name"].as_str());
        assert_eq!(info.project.as_deref(), m["project"].as_str());
        let refs = m["messages"].as_array().unwrap();
        let all = session.all_messages().unwrap();
        assert_eq!(all.len(), refs.len(), "{id}: every message of the manifest");
        // fspec wrote it all on 2026-11-25: the token state and compaction records made from a
        // manifest are dated then too, not at the import
        for e in session.envelopes(0, None).unwrap() {
            let t = e["timestamp"].as_str().unwrap();
            assert!(t.starts_with("2026-11-25T10:14"), "{id}: {} {t}", e["type"]);
        }
        // each message as its envelope had it, the blobs put back
        for (r, got) in refs.iter().zip(&all) {
            let env = &stored[r["message_id"].as_str().unwrap()]["metadata"]["message"];
            assert_eq!(got["role"], env["role"]);
            let blocks = env["content"].as_array().unwrap();
            assert_eq!(got["content"].as_array().unwrap().len(), blocks.len());
            for (g, b) in got["content"].as_array().unwrap().iter().zip(blocks) {
                assert_eq!(g["type"], b["type"]);
                if let Some(text) = b["text"].as_str() {
                    assert_eq!(g["text"], text);
                }
            }
        }
        match m["forked_from"].as_object() {
            Some(f) => {
                let at = f["fork_after_index"].as_u64().unwrap() as usize;
                let from = info.forked_from.as_ref().unwrap();
                assert_eq!(from.session_id, f["source_session_id"].as_str().unwrap());
                assert_eq!(from.uuid, refs[at]["message_id"].as_str().unwrap());
            }
            None => assert!(info.forked_from.is_none()),
        }
        let usage = &m["token_usage"];
        if usage["cumulative_billed_output"].as_u64().unwrap() > 0 {
            let t = session.token_tracker().unwrap();
            assert_eq!(
                t.cumulative_output_tokens,
                usage["cumulative_billed_output"]
            );
            assert_eq!(t.context_tokens, usage["current_context_tokens"]);
        }
        // a compaction: the summary, then the messages from `compacted_before_index`
        if let Some(c) = m["compaction"].as_object() {
            let kept = c["compacted_before_index"].as_u64().unwrap() as usize;
            assert_eq!(session.messages().unwrap().len(), 1 + refs.len() - kept);
            let ctx = session
                .build_context(&context_options(Target::Anthropic))
                .unwrap();
            let first = ctx.messages[0]["content"][0]["text"].as_str().unwrap();
            let summary = c["summary"].as_str().unwrap();
            assert!(first.contains(&summary[..60]), "{first}");
        }
    }
    assert!(manifests.iter().any(|m| m["compaction"].is_object()));
    assert!(manifests.iter().any(|m| m["forked_from"].is_object()));
    // a tool result fspec put in blobs/ comes back whole
    let blob_dir = data.join("blobs");
    let blob = std::fs::read_dir(&blob_dir)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .next()
        .unwrap();
    assert!(blob.len() > 10 * 1024);
    let found = manifests.iter().any(|m| {
        let session = s.open_session(m["id"].as_str().unwrap(), None).unwrap();
        session.all_messages().unwrap().iter().any(|msg| {
            msg["content"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["type"] == "tool_result" && b["content"] == blob.as_str())
        })
    });
    assert!(found, "the blob's text is the tool result's content");
    assert_contexts_valid(&s);
    let (again, _) = run(&s, Format::Fspec, &data);
    assert_eq!((again.new_sessions, again.new_records), (0, 0));
    // one session's manifest alone reads the messages file beside it
    let t = store(dir.path(), "t.db");
    let one = data
        .join("sessions")
        .join(format!("{}.json", manifests[0]["id"].as_str().unwrap()));
    let (single, _) = run(&t, Format::Fspec, &one);
    assert_eq!(single.sessions, 1);
    assert!(single.skipped.is_empty(), "{:?}", single.skipped);

    // exported as Claude Code JSONL and imported again: the same request
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for m in &manifests {
        let id = m["id"].as_str().unwrap();
        let text = export(&s.open_session(id, None).unwrap(), ExportFormat::ClaudeCode).unwrap();
        std::fs::write(out.join(format!("{id}.jsonl")), text).unwrap();
    }
    let b = store(dir.path(), "b.db");
    let (back, _) = run(&b, Format::ClaudeCode, &out);
    assert!(back.skipped.is_empty(), "{:?}", back.skipped);
    for m in &manifests {
        let id = m["id"].as_str().unwrap();
        let x = s.open_session(id, None).unwrap();
        let y = b.open_session(id, None).unwrap();
        // Claude Code writes one content block a line; its lines of one response are one
        // message again in the request
        let request = |s: &threadline::Session| {
            s.build_context(&context_options(Target::Anthropic))
                .unwrap()
                .messages
        };
        assert_eq!(request(&x), request(&y), "{id}");
    }
}

#[test]
fn an_fspec_manifest_naming_a_missing_message_reports_it_and_imports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fspec");
    let src = fixtures("fspec/data");
    for sub in ["sessions", "messages"] {
        std::fs::create_dir_all(data.join(sub)).unwrap();
    }
    let (manifests, _) = fspec_data(&src);
    let m = manifests
        .iter()
        .find(|m| {
            m["forked_from"].is_null()
                && m["compaction"].is_null()
                && m["merged_from"].as_array().unwrap().is_empty()
        })
        .unwrap();
    let id = m["id"].as_str().unwrap();
    let mut broken = m.clone();
    broken["messages"][0]["message_id"] = json!("00000000-0000-4000-8000-000000000000");
    std::fs::write(data.join(format!("sessions/{id}.json")), broken.to_string()).unwrap();
    std::fs::write(data.join("sessions/garbage.json"), "{ not json").unwrap();
    std::fs::copy(
        src.join("messages/messages.jsonl"),
        data.join("messages/messages.jsonl"),
    )
    .unwrap();
    let s = store(dir.path(), "a.db");
    let (report, _) = run(&s, Format::Fspec, &data);
    let reasons: Vec<&str> = report.skipped.iter().map(|k| k.reason.as_str()).collect();
    assert_eq!(report.skipped.len(), 2, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("messages[0]: message '00000000-")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.starts_with("not JSON")),
        "{reasons:?}"
    );
    let session = s.open_session(id, None).unwrap();
    assert_eq!(
        session.all_messages().unwrap().len(),
        m["messages"].as_array().unwrap().len() - 1
    );
}

fn try_import(
    store: &Store,
    format: Format,
    path: &Path,
    options: &ImportOptions,
) -> threadline::Result<threadline::interop::ImportReport> {
    import(store, format, path, options, &mut |_| {})
}

fn ids(store: &Store) -> Vec<String> {
    let mut ids: Vec<String> = store
        .list_sessions(&SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_file_of_another_format_is_refused_by_name_and_creates_no_session() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let random = dir.path().join("random.jsonl");
    std::fs::write(&random, "{\"a\":1}\n{\"b\":[2]}\n").unwrap();
    let rollout = fixtures(
        "codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
    );
    let claude = fixtures("claude-code/short.jsonl");
    let cases = [
        (
            Format::ClaudeCode,
            rollout.clone(),
            "not a Claude Code session file: line 1 has no sessionId and no type of a Claude Code record (it has type 'session_meta'); it looks like a Codex file: import it as 'codex'",
        ),
        (
            Format::ClaudeCode,
            fixtures("pi/branched.jsonl"),
            "not a Claude Code session file: line 1 has no sessionId",
        ),
        (
            Format::ClaudeCode,
            random.clone(),
            "not a Claude Code session file: line 1 has no sessionId and no type of a Claude Code record (it has keys 'a')",
        ),
        (Format::Codex, claude.clone(), "not a Codex session file: line 1"),
        (Format::Codex, random.clone(), "not a Codex session file"),
        (Format::Pi, claude.clone(), "it looks like a Claude Code file: import it as 'claude-code'"),
        (Format::Pi, rollout.clone(), "not a pi session file"),
    ];
    for (format, path, said) in cases {
        let e = try_import(&s, format, &path, &ImportOptions::default()).unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT", "{format:?} {path:?}");
        assert!(e.message().contains(said), "{format:?}: {}", e.message());
        assert!(
            e.message().contains(&*path.to_string_lossy()),
            "names the file: {}",
            e.message()
        );
    }
    // a folder of another agent's files: Codex finds none of its own in Claude Code's folder,
    // and every file Claude Code's reader finds in Codex's folder is a rollout
    let e = try_import(
        &s,
        Format::Codex,
        &fixtures("claude-code"),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
    assert!(
        e.message().contains("no Codex session files were found in")
            && e.message().contains("rollout-*.jsonl"),
        "{}",
        e.message()
    );
    let e = try_import(
        &s,
        Format::ClaudeCode,
        &fixtures("codex"),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "INVALID_INPUT");
    assert!(
        e.message().contains("none of the 6 files found in")
            && e.message().contains("is a Claude Code session file")
            && e.message().contains("import it as 'codex'"),
        "{}",
        e.message()
    );
    assert!(ids(&s).is_empty(), "{:?}", ids(&s));
}

#[test]
fn an_empty_transcript_is_skipped_with_its_reason_and_makes_no_session() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let src = dir.path().join("project");
    std::fs::create_dir(&src).unwrap();
    std::fs::copy(fixtures("claude-code/short.jsonl"), src.join("short.jsonl")).unwrap();
    std::fs::write(src.join("zzz-empty.jsonl"), "").unwrap();
    std::fs::write(src.join("blank.jsonl"), "\n\n").unwrap();
    let report = try_import(&s, Format::ClaudeCode, &src, &ImportOptions::default()).unwrap();
    assert_eq!(ids(&s), ["short"]);
    assert_eq!(report.sessions, 1);
    let reasons: Vec<(String, Option<u64>, String)> = report
        .skipped
        .iter()
        .map(|k| {
            (
                k.file.rsplit('/').next().unwrap().to_string(),
                k.line,
                k.reason.clone(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "blank.jsonl".to_string(),
                None,
                "no records in this file (only blank lines): no session to import".to_string()
            ),
            (
                "zzz-empty.jsonl".to_string(),
                None,
                "empty file (0 bytes): no session to import".to_string()
            )
        ]
    );
    // given as the path: the same, and still no session
    let report = try_import(
        &s,
        Format::ClaudeCode,
        &src.join("zzz-empty.jsonl"),
        &ImportOptions::default(),
    )
    .unwrap();
    assert_eq!((report.sessions, report.skipped.len()), (0, 1));
    assert_eq!(ids(&s), ["short"]);
}

#[test]
fn imported_sessions_are_completed_unless_their_last_tool_calls_went_unanswered() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    run(&s, Format::ClaudeCode, &project_folder(dir.path()));
    run(&s, Format::Pi, &fixtures("pi"));
    run(&s, Format::Codex, &fixtures("codex/sessions/2026/01/02"));
    for info in s.list_sessions(&SessionFilter::default()).unwrap() {
        assert_eq!(info.status, threadline::Status::Completed, "{}", info.id);
    }
    // stopped while a tool ran: the last response's call has no result
    let file = dir.path().join("stopped.jsonl");
    let line = |uuid: &str, parent: &str, message: Value| {
        json!({"type": message["role"], "uuid": uuid, "parentUuid": parent, "sessionId": "stopped",
               "timestamp": "2026-01-01T00:00:00.000Z", "message": message})
        .to_string()
    };
    let text = [
        line("u1", "", json!({"role": "user", "content": "list src"})),
        line("a1", "u1", json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]})),
        line("u2", "a1", json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"}]})),
        line("a2", "u2", json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}]})),
    ]
    .join("\n");
    std::fs::write(&file, text).unwrap();
    run(&s, Format::ClaudeCode, &file);
    let info = s.open_session("stopped", None).unwrap().info().unwrap();
    assert_eq!(info.status, threadline::Status::Interrupted);
}

#[test]
fn a_deleted_session_is_not_brought_back_by_an_import_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let src = fixtures("claude-code");
    run(&s, Format::ClaudeCode, &src);
    let before = s.open_session("short", None).unwrap().messages().unwrap();
    s.delete_session("short").unwrap();
    let (report, _) = run(&s, Format::ClaudeCode, &src);
    assert_eq!(
        (report.sessions, report.new_sessions, report.new_records),
        (2, 0, 0)
    );
    assert!(!ids(&s).contains(&"short".to_string()));
    let skipped: Vec<&str> = report
        .skipped
        .iter()
        .filter(|k| k.file.ends_with("short.jsonl"))
        .map(|k| k.reason.as_str())
        .collect();
    assert_eq!(skipped.len(), 1, "{:?}", report.skipped);
    // `... deleted on 2026-11-27 15:40 UTC; ...`
    let date = skipped[0]
        .strip_prefix("session 'short' was deleted on ")
        .unwrap_or_else(|| panic!("{}", skipped[0]));
    assert!(
        date.as_bytes()[4] == b'-'
            && date.as_bytes()[10] == b' '
            && date.as_bytes()[13] == b':'
            && skipped[0].ends_with("UTC; --include-deleted (includeDeleted: true) brings it back"),
        "{}",
        skipped[0]
    );
    let again = ImportOptions {
        include_deleted: true,
        ..ImportOptions::default()
    };
    let report = try_import(&s, Format::ClaudeCode, &src, &again).unwrap();
    assert_eq!(report.new_sessions, 1);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(
        s.open_session("short", None).unwrap().messages().unwrap(),
        before
    );
    // back and alive: later imports see it as any other
    let (report, _) = run(&s, Format::ClaudeCode, &src);
    assert_eq!((report.sessions, report.new_records), (3, 0));
    assert!(report.skipped.is_empty());
}

#[test]
fn skipped_lines_say_what_is_wrong_in_words_for_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), "a.db");
    let (report, _) = run(
        &s,
        Format::ClaudeCode,
        &fixtures("claude-code-log/edge_cases.jsonl"),
    );
    let reasons: HashMap<u64, &str> = report
        .skipped
        .iter()
        .map(|k| (k.line.unwrap(), k.reason.as_str()))
        .collect();
    assert_eq!(
        reasons[&13],
        "not a record: the line is a string, not a JSON object"
    );
    assert_eq!(
        reasons[&10],
        "not imported, a record Threadline cannot store: message.content: required"
    );
    let (report, _) = run(&s, Format::Codex, &fixtures("codex/malformed"));
    assert_eq!(
        report.skipped[0].reason,
        "not JSON (key must be a string): the line is cut or damaged"
    );
}
