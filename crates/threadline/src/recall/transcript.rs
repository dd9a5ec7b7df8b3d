//! A session's records as a model reads them best: one line per block, roles and tool calls
//! named, long outputs previewed with the way to read them whole. Not JSON.

use serde_json::{Map, Value};

/// Characters of a long text, thinking or tool output shown in a transcript.
pub(crate) const PREVIEW_CHARS: usize = 400;
/// Characters of a tool call's input shown on its line.
const CALL_CHARS: usize = 300;

/// Whether a record is part of the conversation a transcript shows.
pub(crate) fn shown(env: &Map<String, Value>) -> bool {
    crate::storage::search_index::indexable(env) || is_summary(env)
}

fn is_summary(env: &Map<String, Value>) -> bool {
    env.get("type").and_then(Value::as_str) == Some("compaction") && env.contains_key("message")
}

/// The lines of record `seq` (`whole`: no previews, as `record_seq` asks).
pub(crate) fn render(env: &Map<String, Value>, seq: u64, session_id: &str, whole: bool) -> String {
    let message = env.get("message").unwrap_or(&Value::Null);
    let role = message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user");
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&format!("[seq {seq}] {}\n", s.trim_end()));
    };
    let more = |n: usize| {
        format!(
            " … [{n} chars; whole: session_read {{\"session_id\": \"{session_id}\", \"record_seq\": {seq}}}]"
        )
    };
    let show = |text: &str, limit: usize| -> String {
        let n = text.chars().count();
        if whole || n <= limit {
            text.to_string()
        } else {
            let head: String = text.chars().take(limit).collect();
            format!("{}{}", one_line(&head), more(n))
        }
    };
    if is_summary(env) {
        let text = crate::model::fields::texts(message)[0].clone();
        line(format!(
            "summary of the earlier conversation: {}",
            show(&text, PREVIEW_CHARS * 2)
        ));
        return out;
    }
    match message.get("content") {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            line(format!("{role}: {}", show(s, PREVIEW_CHARS * 5)))
        }
        Some(Value::Array(blocks)) => {
            for b in blocks {
                let str_of = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
                match b.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" => line(format!(
                        "{role}: {}",
                        show(str_of("text"), PREVIEW_CHARS * 5)
                    )),
                    "thinking" => line(format!(
                        "{role} (thinking): {}",
                        show(str_of("thinking"), PREVIEW_CHARS)
                    )),
                    "redacted_thinking" => line(format!("{role} (thinking, redacted)")),
                    ty @ ("tool_use" | "server_tool_use" | "mcp_tool_use") => {
                        let input = b.get("input").map(Value::to_string).unwrap_or_default();
                        let kind = if ty == "tool_use" {
                            "called"
                        } else {
                            "called (server)"
                        };
                        line(format!(
                            "{role} {kind} {} ({}): {}",
                            str_of("name"),
                            str_of("id"),
                            if whole {
                                input
                            } else {
                                cut(&input, CALL_CHARS)
                            }
                        ))
                    }
                    "tool_result" => {
                        let mut text = String::new();
                        crate::model::fields::result_text(
                            b.get("content").unwrap_or(&Value::Null),
                            true,
                            &mut text,
                        );
                        let error = b.get("is_error") == Some(&Value::Bool(true));
                        line(format!(
                            "{} of {}: {}",
                            if error { "error result" } else { "result" },
                            str_of("tool_use_id"),
                            show(text.trim(), PREVIEW_CHARS)
                        ))
                    }
                    "image" => line(format!("{role}: [image]")),
                    "document" => line(format!("{role}: [document {}]", str_of("title"))),
                    ty if ty.ends_with("_tool_result") => {
                        let text = b.get("content").map(Value::to_string).unwrap_or_default();
                        line(format!(
                            "{ty} of {}: {}",
                            str_of("tool_use_id"),
                            show(&text, PREVIEW_CHARS)
                        ))
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    out
}

/// `s` on one line, at most `n` characters.
fn cut(s: &str, n: usize) -> String {
    let count = s.chars().count();
    let head: String = s.chars().take(n).collect();
    let head = one_line(&head);
    if count > n {
        format!("{head}… [{count} chars]")
    } else {
        head
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
