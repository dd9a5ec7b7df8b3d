//! Markdown: the conversation to read, turn by turn. Thinking and tool calls are in `<details>`
//! blocks (folded where Markdown is rendered), tool input and output in fences long enough that
//! no backticks inside can close them.

use serde_json::Value;

use super::{turn_starts, Transcript};

pub fn render(t: &Transcript) -> String {
    let mut out = header(t);
    let starts = turn_starts(t.turns);
    for r in t.records {
        let uuid = r.get("uuid").and_then(Value::as_str).unwrap_or("");
        if let Some(turn) = starts.get(uuid) {
            out.push_str(&format!(
                "\n## Turn {} · {}\n",
                turn.index + 1,
                super::turn_tokens(turn)
            ));
        }
        match r.get("message") {
            Some(m) => message(&mut out, r, m),
            None => event(&mut out, r),
        }
    }
    out
}

fn header(t: &Transcript) -> String {
    let i = t.info;
    let mut out = format!(
        "# {}\n\n",
        i.title
            .clone()
            .unwrap_or_else(|| format!("Session {}", i.id))
    );
    out.push_str(&format!("- Session: `{}`\n", i.id));
    for (k, v) in [("Project", &i.project), ("Model", &i.model)] {
        if let Some(v) = v {
            out.push_str(&format!("- {k}: {v}\n"));
        }
    }
    out.push_str(&format!(
        "- Created: {} · updated: {} · {} messages\n",
        i.created_at, i.updated_at, i.message_count
    ));
    out
}

fn message(out: &mut String, r: &Value, m: &Value) {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
    let who = if role == "assistant" {
        "Assistant"
    } else {
        "User"
    };
    let ts = r.get("timestamp").and_then(Value::as_str).unwrap_or("");
    out.push_str(&format!("\n### {who} · {ts}\n"));
    let blocks = m
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for b in &blocks {
        block(out, b);
    }
}

fn block(out: &mut String, b: &Value) {
    let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
    match s("type") {
        "text" => out.push_str(&format!("\n{}\n", s("text"))),
        "thinking" => details(out, "Thinking", s("thinking")),
        "redacted_thinking" => out.push_str("\n_(redacted thinking)_\n"),
        "tool_use" | "server_tool_use" => {
            out.push_str(&format!("\n**Tool call** `{}` ({})\n", s("name"), s("id")));
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
            out.push_str(&format!(
                "\n**Tool result** for {}{error}\n",
                s("tool_use_id")
            ));
            fenced(out, "", &result_text(b.get("content")));
        }
        "image" | "document" => out.push_str(&format!("\n_[{}: {}]_\n", s("type"), media(b))),
        other => {
            let text = serde_json::to_string(b).unwrap_or_default();
            out.push_str(&format!("\n_{other} block_\n"));
            fenced(out, "json", &text);
        }
    }
}

fn event(out: &mut String, r: &Value) {
    let e = super::event_label(r);
    match e.summary {
        Some(summary) => details(out, "Compaction summary", summary),
        None => {
            let sub = e.sub.map(|s| format!(" ({s})")).unwrap_or_default();
            out.push_str(&format!("\n_{}{sub}_\n", e.ty));
        }
    }
}

fn details(out: &mut String, summary: &str, body: &str) {
    out.push_str(&format!(
        "\n<details><summary>{summary}</summary>\n\n{body}\n\n</details>\n"
    ));
}

/// A fence one backtick longer than the longest run of backticks in the text.
fn fenced(out: &mut String, lang: &str, text: &str) {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    out.push_str(&format!("\n{fence}{lang}\n{text}\n{fence}\n"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_outlasts_the_backticks_inside() {
        let mut out = String::new();
        fenced(&mut out, "", "a ```` b");
        assert!(out.starts_with("\n`````\n"), "{out}");
        assert!(out.ends_with("\n`````\n"));
    }
}
