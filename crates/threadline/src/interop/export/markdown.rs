//! Markdown: the conversation to read, turn by turn. Thinking and tool calls are in `<details>`
//! blocks (folded where Markdown is rendered), tool input and output in fences long enough that
//! no backticks inside can close them.
//!
//! The session's text is data: what this file writes as structure (headings, list items, folds,
//! emphasis) cannot be made by it. A one-line field (title, id, project, model, tool name, event
//! type, media type) has its line breaks made spaces, so it cannot start a heading or a list
//! item, and its Markdown and HTML characters backslash-escaped (`inline`), or is a code span.
//! A fold's text (thinking, a compaction summary) is in a fence, so a `</details>` in it is text,
//! as the HTML export shows it; message text is Markdown, as it was written.

use std::collections::HashMap;

use serde_json::Value;

use super::{is_compact_summary, thousands, turn_starts, ExportOptions, Transcript};

/// The message under the last heading written: its role and id (Claude Code writes a response
/// one content block per line, each line a record of the same message id).
type Under = Option<(String, String)>;

pub fn render(t: &Transcript, options: &ExportOptions) -> String {
    let mut out = header(t);
    let starts = turn_starts(t.turns);
    let names = tool_names(t.records);
    let mut under: Under = None;
    for r in t.records {
        let uuid = r.get("uuid").and_then(Value::as_str).unwrap_or("");
        if let Some(turn) = starts.get(uuid) {
            out.push_str(&format!(
                "\n## Turn {} · {}\n",
                turn.index + 1,
                super::turn_tokens(turn)
            ));
            under = None;
        }
        match r.get("message") {
            Some(m) => message(&mut out, r, m, &names, &mut under),
            // Events (hook progress above all) are most of a Claude Code file and say little
            // to a reader: left out unless asked for. A compaction is part of the story.
            None if options.events || super::event_label(r).summary.is_some() => {
                event(&mut out, r);
                under = None;
            }
            None => {}
        }
    }
    out
}

fn header(t: &Transcript) -> String {
    let i = t.info;
    let mut out = format!(
        "# {}\n\n",
        inline(
            &i.title
                .clone()
                .unwrap_or_else(|| format!("Session {}", i.id))
        )
    );
    out.push_str(&format!("- Session: {}\n", code_span(&i.id)));
    if let Some(p) = &i.project {
        out.push_str(&format!("- Project: {}\n", inline(p)));
    }
    match &i.model {
        Some(m) => out.push_str(&format!("- Model: {}\n", inline(m))),
        None => {
            let used = models(t.records);
            if !used.is_empty() {
                let k = if used.len() == 1 { "Model" } else { "Models" };
                let used: Vec<String> = used.into_iter().map(inline).collect();
                out.push_str(&format!("- {k}: {}\n", used.join(", ")));
            }
        }
    }
    out.push_str(&format!(
        "- Created: {} · updated: {} · {} messages\n",
        inline(&i.created_at),
        inline(&i.updated_at),
        thousands(i.message_count)
    ));
    out
}

/// A message under its heading; the next record of the same message (same role and id) under
/// the same heading, and a message with nothing to show (an empty text) not at all.
fn message(out: &mut String, r: &Value, m: &Value, names: &HashMap<&str, &str>, under: &mut Under) {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
    let summary = is_compact_summary(r);
    let mut body = String::new();
    match m.get("content") {
        Some(Value::String(text)) if text.trim().is_empty() => {}
        Some(Value::String(text)) if summary => details(&mut body, "Summary", text),
        Some(Value::String(text)) => body.push_str(&format!("\n{text}\n")),
        Some(Value::Array(blocks)) if summary => {
            let text: Vec<&str> = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            details(&mut body, "Summary", &text.join("\n"));
        }
        Some(Value::Array(blocks)) => {
            for b in blocks {
                block(&mut body, b, names);
            }
        }
        _ => {}
    }
    if body.is_empty() {
        return;
    }
    let id = m.get("id").and_then(Value::as_str).unwrap_or("");
    let this = (!id.is_empty()).then(|| (role.to_string(), id.to_string()));
    if this.is_none() || *under != this {
        let who = match role {
            _ if summary => "Compaction summary",
            "assistant" => "Assistant",
            _ => "User",
        };
        let ts = r.get("timestamp").and_then(Value::as_str).unwrap_or("");
        out.push_str(&format!("\n### {who} · {}\n", inline(ts)));
    }
    out.push_str(&body);
    *under = this;
}

fn block(out: &mut String, b: &Value, names: &HashMap<&str, &str>) {
    let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
    match s("type") {
        "text" if s("text").trim().is_empty() => {}
        "text" => out.push_str(&format!("\n{}\n", s("text"))),
        "thinking" => details(out, "Thinking", s("thinking")),
        "redacted_thinking" => out.push_str("\n_(redacted thinking)_\n"),
        "tool_use" | "server_tool_use" => {
            out.push_str(&format!(
                "\n**Tool call** {} ({})\n",
                code_span(s("name")),
                code_span(s("id"))
            ));
            let input = serde_json::to_string_pretty(b.get("input").unwrap_or(&Value::Null))
                .unwrap_or_default();
            fenced(out, "json", &input);
        }
        "tool_result" => {
            let error = if b.get("is_error") == Some(&Value::Bool(true)) {
                " (error)"
            } else {
                ""
            };
            let id = s("tool_use_id");
            let of = names
                .get(id)
                .map(|n| format!("{} ", code_span(n)))
                .unwrap_or_default();
            out.push_str(&format!(
                "\n**Tool result** of {of}({}){error}\n",
                code_span(id)
            ));
            fenced(out, "", &result_text(b.get("content")));
        }
        "image" | "document" => {
            out.push_str(&format!("\n_[{}: {}]_\n", s("type"), inline(&media(b))))
        }
        other => {
            let text = serde_json::to_string(b).unwrap_or_default();
            out.push_str(&format!("\n_{} block_\n", inline(other)));
            fenced(out, "json", &text);
        }
    }
}

fn event(out: &mut String, r: &Value) {
    let e = super::event_label(r);
    match e.summary {
        Some(summary) => details(out, "Compaction summary", summary),
        None => {
            let ty = match (e.ty, r.get("name").and_then(Value::as_str)) {
                ("event", Some(name)) => name,
                (ty, _) => ty,
            };
            let sub = e
                .sub
                .map(|s| format!(" ({})", inline(s)))
                .unwrap_or_default();
            out.push_str(&format!("\n_{}{sub}_\n", inline(ty)));
        }
    }
}

/// A fold with its text in a fence: what the text says (`</details>`, `<!--`, a heading) is
/// shown, not read as Markdown or HTML, so the fold ends where it should.
fn details(out: &mut String, summary: &str, body: &str) {
    out.push_str(&format!("\n<details><summary>{summary}</summary>\n"));
    fenced(out, "", body);
    out.push_str("\n</details>\n");
}

/// A one-line field as one line: CommonMark ends a line at LF, CR and CRLF, and a line that
/// starts with `#`, `-`, `+`, `>`, a fence or `<tag` would be structure.
fn one_line(text: &str) -> String {
    text.replace("\r\n", " ").replace(['\n', '\r'], " ")
}

/// A one-line field as Markdown text that reads as written: on one line, and its characters
/// that Markdown or HTML would read (emphasis, links, code, raw HTML, entities, a heading's
/// closing `#`) backslash-escaped. The field never starts a line (a prefix is written before
/// it), so the characters that mean something only there (`-`, `+`, `=`, `1.`) are left alone.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in one_line(text).chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '&' | '|' | '~' | '!'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The longest run of backticks in a text.
fn longest_backticks(text: &str) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// A fence one backtick longer than the longest run of backticks in the text (three at least).
fn fenced(out: &mut String, lang: &str, text: &str) {
    let fence = "`".repeat(longest_backticks(text).max(2) + 1);
    out.push_str(&format!("\n{fence}{lang}\n{text}\n{fence}\n"));
}

/// Inline code that backticks inside cannot close (CommonMark: a longer delimiter, and a space
/// on each side when the text starts or ends with a backtick), on one line.
fn code_span(text: &str) -> String {
    let text = &one_line(text);
    if text.is_empty() {
        return "``".into();
    }
    let ticks = "`".repeat(longest_backticks(text) + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{text}{pad}{ticks}")
}

pub(super) fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                Some(t) => format!("[{t}: {}]", media(b)),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// An image's or document's media type and size, as a placeholder says it.
pub(super) fn media(b: &Value) -> String {
    let src = b.get("source");
    let ty = src
        .and_then(|s| s.get("media_type"))
        .and_then(Value::as_str)
        .unwrap_or("unknown type");
    match src.and_then(|s| s.get("data")).and_then(Value::as_str) {
        Some(d) => format!("{ty}, {} bytes", d.len() / 4 * 3),
        None => match src.and_then(|s| s.get("url")).and_then(Value::as_str) {
            Some(u) => format!("{ty}, {u}"),
            None => ty.to_string(),
        },
    }
}

/// The models the assistant messages name, each once, in order of first use.
pub(super) fn models(records: &[Value]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for r in records {
        let m = r
            .get("message")
            .and_then(|m| m.get("model"))
            .and_then(Value::as_str);
        if let Some(m) = m.filter(|m| !m.is_empty() && *m != "<synthetic>") {
            if !seen.contains(&m) {
                seen.push(m);
            }
        }
    }
    seen
}

/// Each tool call's name by its id, so that its result can say which tool it answers.
pub(super) fn tool_names(records: &[Value]) -> HashMap<&str, &str> {
    let mut names = HashMap::new();
    for r in records {
        let blocks = r
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array);
        for b in blocks.into_iter().flatten() {
            if let (Some(id), Some(name)) = (
                b.get("id").and_then(Value::as_str),
                b.get("name").and_then(Value::as_str),
            ) {
                names.insert(id, name);
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::options::{SessionInfo, Status};
    use crate::model::state::{Turn, TurnStatus};
    use crate::model::usage::Usage;
    use serde_json::json;

    fn doc(records: Vec<Value>, turns: &[Turn]) -> String {
        doc_of(&info(), records, turns)
    }

    /// The transcript with its events (what most tests look at), as `export --events` writes it.
    fn doc_of(info: &SessionInfo, records: Vec<Value>, turns: &[Turn]) -> String {
        doc_with(info, records, turns, true)
    }

    fn doc_with(info: &SessionInfo, records: Vec<Value>, turns: &[Turn], events: bool) -> String {
        render(
            &Transcript {
                info,
                records: &records,
                turns,
            },
            &ExportOptions { events },
        )
    }

    fn headings(md: &str) -> Vec<&str> {
        md.lines().filter(|l| l.starts_with("### ")).collect()
    }

    #[test]
    fn one_heading_per_message_none_empty_and_events_only_when_asked() {
        let records = vec![
            json!({"uuid": "a", "seq": 0, "timestamp": "T1", "message": {"role": "user", "content": "hi"}}),
            json!({"uuid": "p1", "seq": 1, "type": "progress", "data": {"type": "hook_progress"}}),
            // Claude Code's lines of one response: one block each, the same message id
            json!({"uuid": "b1", "seq": 2, "timestamp": "T2", "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}]}}),
            json!({"uuid": "p2", "seq": 3, "type": "progress", "data": {"type": "hook_progress"}}),
            json!({"uuid": "b2", "seq": 4, "timestamp": "T3", "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": "Done."}]}}),
            json!({"uuid": "b3", "seq": 5, "timestamp": "T4", "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": "  "}]}}),
            json!({"uuid": "c", "seq": 6, "timestamp": "T5", "message": {"id": "msg_2", "role": "assistant", "content": [{"type": "text", "text": ""}]}}),
            json!({"uuid": "d", "seq": 7, "timestamp": "T6", "message": {"role": "user", "content": "thanks"}}),
            json!({"uuid": "e", "seq": 8, "timestamp": "T7", "message": {"role": "user", "content": "again"}}),
        ];
        let md = doc_with(&info(), records.clone(), &[], false);
        assert_eq!(
            headings(&md),
            [
                "### User · T1",
                "### Assistant · T2",
                "### User · T6",
                "### User · T7"
            ],
            "{md}"
        );
        assert!(!md.contains("progress"), "{md}");
        let (thinking, done) = (md.find("hm").unwrap(), md.find("Done.").unwrap());
        assert!(md.find("### Assistant").unwrap() < thinking && thinking < done);
        let with = doc_with(&info(), records, &[], true);
        assert_eq!(with.matches("\n_progress (hook\\_progress)_\n").count(), 2);
        // an event written between two lines of a message: the rest under a heading again
        assert_eq!(headings(&with).len(), 5, "{with}");
    }

    #[test]
    fn a_compaction_summary_is_folded_and_counts_have_thousands_separators() {
        let mut i = info();
        i.message_count = 12345;
        let mut t = turn();
        t.usage.input_tokens = 1_234_567;
        let md = doc_with(
            &i,
            vec![
                json!({"uuid": "a", "seq": 0, "timestamp": "T1", "isCompactSummary": true, "message": {"role": "user", "content": "This session is being continued.\n## Summary\n- a lot"}}),
            ],
            &[t],
            false,
        );
        assert_eq!(headings(&md), ["### Compaction summary · T1"], "{md}");
        assert!(md.contains("<details><summary>Summary</summary>\n\n```\nThis session is being continued.\n## Summary\n- a lot\n```\n\n</details>"), "{md}");
        assert!(md.contains("· 12,345 messages\n"), "{md}");
        assert!(md.contains("## Turn 1 · 1,234,567 in · 2 out"), "{md}");
    }

    fn info() -> SessionInfo {
        SessionInfo {
            id: "sid".into(),
            project: Some("/work/p".into()),
            title: None,
            provider: None,
            model: Some("claude-x".into()),
            status: Status::Active,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-02T00:00:00Z".into(),
            message_count: 3,
            context_window: None,
            forked_from: None,
            metadata: None,
        }
    }

    fn turn() -> Turn {
        Turn {
            index: 0,
            start_index: 0,
            end_index: 2,
            start_uuid: "a".into(),
            end_uuid: "c".into(),
            message_count: 3,
            tool_use_count: 1,
            usage: Usage {
                input_tokens: 1,
                output_tokens: 2,
                cache_read_input_tokens: 3,
                cache_creation_input_tokens: 4,
            },
            status: TurnStatus::Complete,
        }
    }

    #[test]
    fn a_fence_outlasts_the_backticks_inside() {
        let mut out = String::new();
        fenced(&mut out, "", "a ```` b");
        assert!(out.starts_with("\n`````\n"), "{out}");
        assert!(out.ends_with("\n`````\n"));
        let mut out = String::new();
        fenced(&mut out, "json", "no ticks");
        assert_eq!(out, "\n```json\nno ticks\n```\n");
        assert_eq!(code_span("a`b"), "``a`b``");
        assert_eq!(code_span("`x"), "`` `x ``");
    }

    #[test]
    fn a_transcript_turn_by_turn() {
        let md = doc(
            vec![
                json!({"uuid": "s0", "seq": 0, "type": "summary", "subtype": "x"}),
                json!({"uuid": "a", "seq": 1, "timestamp": "T1", "message": {"role": "user", "content": "hello *there*"}}),
                json!({"uuid": "b", "seq": 2, "timestamp": "T2", "message": {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "let me think", "signature": "sig"},
                    {"type": "text", "text": "Sure:\n```sh\nls\n```"},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo ```"}},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAAAAAA"}}]}}),
                json!({"uuid": "c", "seq": 3, "timestamp": "T3", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "boom ````"}], "is_error": true}]}}),
                json!({"uuid": "p", "seq": 4, "type": "progress", "data": {"type": "hook_progress"}}),
            ],
            &[turn()],
        );
        assert!(md.starts_with("# Session sid\n"), "{md}");
        assert!(md.contains("- Session: `sid`\n- Project: /work/p\n- Model: claude-x\n"));
        assert!(md.contains("- Created: 2026-01-01T00:00:00Z"));
        assert!(md.contains("\n## Turn 1 · 1 in · 2 out · 3 cache read · 4 cache write\n"));
        assert!(
            md.contains("\n### User · T1\n\nhello *there*\n"),
            "text as it is"
        );
        assert!(md.contains("\n### Assistant · T2\n"));
        assert!(md.contains(
            "<details><summary>Thinking</summary>\n\n```\nlet me think\n```\n\n</details>"
        ));
        assert!(md.contains("Sure:\n```sh\nls\n```\n"));
        assert!(md.contains(
            "**Tool call** `Bash` (`t1`)\n\n````json\n{\n  \"command\": \"echo ```\"\n}\n````\n"
        ));
        assert!(
            md.contains("**Tool result** of `Bash` (`t1`) (error)\n\n`````\nboom ````\n`````\n")
        );
        assert!(md.contains("\n_[image: image/png, 6 bytes]_\n"));
        assert!(md.contains("\n_summary (x)_\n"));
        assert!(md.contains("\n_progress (hook\\_progress)_\n"));
        // the turn heading comes before the turn's first message, after the event before it
        let turn_at = md.find("## Turn 1").unwrap();
        assert!(md.find("_summary (x)_").unwrap() < turn_at);
        assert!(turn_at < md.find("### User").unwrap());
    }

    /// The lines a CommonMark reader sees as structure: each line outside fenced code blocks
    /// (the fences this export writes start at the line's start), and the text of every fence.
    fn outside_fences(md: &str) -> (Vec<&str>, Vec<String>) {
        let mut lines = Vec::new();
        let mut fences = Vec::new();
        let mut open: Option<(usize, Vec<&str>)> = None;
        for line in md.lines() {
            let ticks = line.chars().take_while(|&c| c == '`').count();
            match &mut open {
                Some((n, body)) => {
                    if ticks >= *n && line.trim_end().len() == ticks {
                        fences.push(body.join("\n"));
                        open = None;
                    } else {
                        body.push(line);
                    }
                }
                None if ticks >= 3 => open = Some((ticks, Vec::new())),
                None => lines.push(line),
            }
        }
        assert!(open.is_none(), "a fence left open: the rest is code:\n{md}");
        (lines, fences)
    }

    /// The payloads of finding 12: a line break that would start a heading or a list item, and
    /// Markdown and HTML that would be read as structure.
    const BREAK: &str = " x\n# Injected heading\n- injected item\r\n## Turn 99\r+ item";

    #[test]
    fn a_line_break_in_a_one_line_field_starts_no_heading_or_list_item() {
        let mut i = info();
        i.id = format!("sid{BREAK}");
        i.title = Some(format!("Title{BREAK} #"));
        i.project = Some(format!("/p{BREAK} *bold* [link](u) <b>"));
        i.model = Some(format!("m{BREAK}"));
        let md = doc_of(
            &i,
            vec![
                json!({"uuid": "a", "seq": 0, "timestamp": "T1", "message": {"role": "assistant", "content": [
                    {"type": "tool_use", "id": format!("t1{BREAK}"), "name": format!("Bash{BREAK}"), "input": {}},
                    {"type": "image", "source": {"type": "base64", "media_type": format!("image/png{BREAK}"), "data": "AAAA"}},
                    {"type": format!("odd{BREAK}")}]}}),
                json!({"uuid": "b", "seq": 1, "timestamp": "T2", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": format!("t1{BREAK}"), "content": "ok"}]}}),
                json!({"uuid": "c", "seq": 2, "type": format!("system{BREAK}"), "subtype": format!("sub{BREAK}")}),
                json!({"uuid": "d", "seq": 3, "type": "event", "name": format!("my_event{BREAK}"), "data": {}}),
            ],
            &[],
        );
        let (lines, _) = outside_fences(&md);
        let headings: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with('#'))
            .collect();
        assert_eq!(
            headings.len(),
            3,
            "the title and two messages only: {headings:?}\n{md}"
        );
        for l in &lines {
            assert!(
                !l.contains("Injected")
                    || l.starts_with("# ")
                    || l.starts_with("- ")
                    || l.starts_with("**")
                    || l.starts_with('_'),
                "a field's line break made a line of its own: {l:?}\n{md}"
            );
            for start in ["- injected", "+ item", "## Turn 99"] {
                assert!(!l.starts_with(start), "{l:?}\n{md}");
            }
            assert!(!l.contains('\r'), "a CR is a line break in Markdown: {l:?}");
        }
        assert!(
            lines.iter().all(|l| !l.starts_with("- ")
                || ["- Session: ", "- Project: ", "- Model: ", "- Created: "]
                    .iter()
                    .any(|p| l.starts_with(p))),
            "{md}"
        );
        // what stays on its line reads as written: metacharacters escaped, code spans whole
        assert!(
            md.starts_with(
                "# Title x \\# Injected heading - injected item \\#\\# Turn 99 + item \\#\n"
            ),
            "{md}"
        );
        assert!(md.contains("- Project: /p x \\# Injected heading - injected item \\#\\# Turn 99 + item \\*bold\\* \\[link\\](u) \\<b\\>\n"), "{md}");
        assert!(
            md.contains(
                "- Session: `sid x # Injected heading - injected item ## Turn 99 + item`\n"
            ),
            "{md}"
        );
        assert!(md.contains("**Tool call** `Bash x # Injected"), "{md}");
        assert!(
            md.contains("\n_[image: image/png x \\# Injected heading"),
            "{md}"
        );
        assert!(md.contains("\n_my\\_event x \\# Injected heading"), "{md}");
    }

    #[test]
    fn a_fold_holds_whatever_its_text_says() {
        let payloads = [
            "a\n</details>\n# outside the fold",
            "a </DETAILS > b\n\n<details><summary>fake</summary>",
            "```\n</details>\n```",
            "````` and ``` runs\n</details >",
            "<!-- an unclosed comment",
        ];
        let records: Vec<Value> = payloads
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                [
                    json!({"uuid": format!("t{i}"), "seq": i * 2, "timestamp": "T", "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": p, "signature": "s"}]}}),
                    json!({"uuid": format!("c{i}"), "seq": i * 2 + 1, "type": "compaction", "compaction": {"summary": p}}),
                ]
            })
            .collect();
        let md = doc(records, &[]);
        let (lines, fences) = outside_fences(&md);
        // every fold opens and closes on lines of its own, with the text in a fence between
        let opens = lines.iter().filter(|l| l.starts_with("<details>")).count();
        let closes = lines.iter().filter(|l| **l == "</details>").count();
        assert_eq!(
            (opens, closes),
            (payloads.len() * 2, payloads.len() * 2),
            "{md}"
        );
        for l in &lines {
            assert!(
                !l.to_ascii_lowercase().contains("details")
                    || *l == "</details>"
                    || l.starts_with("<details><summary>"),
                "the text's HTML outside its fence: {l:?}\n{md}"
            );
            assert!(!l.starts_with("# outside"), "{md}");
        }
        for p in payloads {
            assert_eq!(
                fences.iter().filter(|f| f.as_str() == p).count(),
                2,
                "{p:?} whole in the fences of its thinking and summary:\n{md}"
            );
        }
    }

    #[test]
    fn tool_fences_outlast_the_backticks_of_any_content() {
        let text = "``` closes?\n````\n`````` six";
        let md = doc(
            vec![
                json!({"uuid": "a", "seq": 0, "timestamp": "T", "message": {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": text}}]}}),
                json!({"uuid": "b", "seq": 1, "timestamp": "T", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": text}]}}),
            ],
            &[],
        );
        let (_, fences) = outside_fences(&md);
        assert!(fences.iter().any(|f| f == text), "{md}");
        assert!(
            md.contains("\n```````\n``` closes?"),
            "a fence of seven: {md}"
        );
    }
}
