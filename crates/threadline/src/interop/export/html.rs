//! One self-contained HTML page: styles and a small script inline, images as data: URLs, and a
//! Content-Security-Policy that lets the page load nothing from anywhere. Everything from the
//! session is escaped (it is untrusted text). Tool calls, their results and thinking are
//! `<details>` elements, folded, so the page works without its script.

use std::fmt::Write;

use serde_json::Value;

use super::markdown::{media, result_text};
use super::{turn_starts, Transcript};

const STYLE: &str = include_str!("html.css");
const SCRIPT: &str = "document.getElementById('open-all').onclick=()=>document.querySelectorAll('details').forEach(d=>d.open=true);document.getElementById('close-all').onclick=()=>document.querySelectorAll('details').forEach(d=>d.open=false);";

pub fn render(t: &Transcript) -> String {
    let i = t.info;
    let title = i
        .title
        .clone()
        .unwrap_or_else(|| format!("Session {}", i.id));
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<header><h1>{}</h1><dl>",
        esc(&title),
        esc(&title)
    );
    let mut fact = |k: &str, v: &str| {
        let _ = write!(out, "<dt>{k}</dt><dd>{}</dd>", esc(v));
    };
    fact("Session", &i.id);
    if let Some(p) = &i.project {
        fact("Project", p);
    }
    if let Some(m) = &i.model {
        fact("Model", m);
    }
    fact("Created", &i.created_at);
    fact("Updated", &i.updated_at);
    fact("Messages", &i.message_count.to_string());
    out.push_str("</dl><nav><button id=\"open-all\" type=\"button\">Expand all</button> <button id=\"close-all\" type=\"button\">Collapse all</button></nav></header>\n<main>\n");
    let starts = turn_starts(t.turns);
    for r in t.records {
        let uuid = r.get("uuid").and_then(Value::as_str).unwrap_or("");
        if let Some(turn) = starts.get(uuid) {
            let _ = writeln!(
                out,
                "<h2 class=\"turn\" data-turn=\"{}\">Turn {}<span class=\"tokens\">{}</span></h2>",
                turn.index,
                turn.index + 1,
                super::turn_tokens(turn)
            );
        }
        match r.get("message") {
            Some(m) => message(&mut out, r, m),
            None => event(&mut out, r),
        }
    }
    let _ = writeln!(out, "</main>\n<script>{SCRIPT}</script>\n</body></html>");
    out
}

fn message(out: &mut String, r: &Value, m: &Value) {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    let seq = r.get("seq").and_then(Value::as_u64).unwrap_or(0);
    let model = m.get("model").and_then(Value::as_str).unwrap_or("");
    let _ = writeln!(
        out,
        "<article class=\"message {}\" data-role=\"{}\" data-uuid=\"{}\" data-seq=\"{seq}\"><div class=\"who\">{} <time>{}</time> <span class=\"model\">{}</span></div>",
        esc(role),
        esc(role),
        esc(s("uuid")),
        if role == "assistant" { "Assistant" } else { "User" },
        esc(s("timestamp")),
        esc(model)
    );
    for b in m
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        block(out, b);
    }
    out.push_str("</article>\n");
}

fn block(out: &mut String, b: &Value) {
    let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
    match s("type") {
        "text" => {
            let _ = writeln!(out, "<div class=\"text\">{}</div>", esc(s("text")));
        }
        "thinking" => details(out, "thinking", "Thinking", "", &esc(s("thinking"))),
        "redacted_thinking" => out.push_str("<div class=\"note\">(redacted thinking)</div>\n"),
        "tool_use" | "server_tool_use" => {
            let input = serde_json::to_string_pretty(b.get("input").unwrap_or(&Value::Null))
                .unwrap_or_default();
            details(
                out,
                "tool-call",
                &format!("Tool call: {}", s("name")),
                s("id"),
                &format!("<pre>{}</pre>", esc(&input)),
            );
        }
        "tool_result" => {
            let error = b.get("is_error") == Some(&Value::Bool(true));
            let mut body = format!("<pre>{}</pre>", esc(&result_text(b.get("content"))));
            for img in b
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if img.get("type").and_then(Value::as_str) == Some("image") {
                    body.push_str(&image(img));
                }
            }
            let label = if error {
                "Tool result (error)"
            } else {
                "Tool result"
            };
            let class = if error {
                "tool-result error"
            } else {
                "tool-result"
            };
            details(out, class, label, s("tool_use_id"), &body);
        }
        "image" => out.push_str(&image(b)),
        "document" => {
            let _ = writeln!(
                out,
                "<div class=\"note\">[document: {}]</div>",
                esc(&media(b))
            );
        }
        other => {
            let text = serde_json::to_string_pretty(b).unwrap_or_default();
            details(
                out,
                "block",
                other,
                "",
                &format!("<pre>{}</pre>", esc(&text)),
            );
        }
    }
}

fn details(out: &mut String, class: &str, label: &str, id: &str, body_html: &str) {
    let id = if id.is_empty() {
        String::new()
    } else {
        format!(" <code>{}</code>", esc(id))
    };
    let _ = writeln!(
        out,
        "<details class=\"{class}\"><summary>{}{id}</summary><div class=\"body\">{body_html}</div></details>",
        esc(label)
    );
}

/// An image from base64 data as a data: URL; one from a URL is named, never loaded.
fn image(b: &Value) -> String {
    let src = b.get("source");
    let get = |k: &str| src.and_then(|s| s.get(k)).and_then(Value::as_str);
    let ty = get("media_type").unwrap_or("");
    match get("data") {
        Some(data) if is_image_type(ty) && is_base64(data) => {
            format!(
                "<img class=\"image\" alt=\"image ({})\" src=\"data:{ty};base64,{data}\">\n",
                esc(ty)
            )
        }
        _ => format!("<div class=\"note\">[image: {}]</div>\n", esc(&media(b))),
    }
}

fn is_image_type(t: &str) -> bool {
    t.strip_prefix("image/").is_some_and(|s| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    })
}

fn is_base64(s: &str) -> bool {
    s.bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"+/=\n\r".contains(&c))
}

fn event(out: &mut String, r: &Value) {
    let e = super::event_label(r);
    match e.summary {
        Some(summary) => details(
            out,
            "compaction",
            "Compaction summary",
            "",
            &format!("<div class=\"text\">{}</div>", esc(summary)),
        ),
        None => {
            let sub = e.sub.map(|s| format!(" · {s}")).unwrap_or_default();
            let _ = writeln!(out, "<div class=\"event\">{}{}</div>", esc(e.ty), esc(&sub));
        }
    }
}

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::options::{SessionInfo, Status};
    use serde_json::json;

    fn page(records: Vec<Value>) -> String {
        let info = SessionInfo {
            id: "s<1>".into(),
            project: None,
            title: None,
            provider: None,
            model: None,
            status: Status::Active,
            created_at: "c".into(),
            updated_at: "u".into(),
            message_count: 2,
            context_window: None,
            forked_from: None,
            metadata: None,
        };
        render(&Transcript {
            info: &info,
            records: &records,
            turns: &[],
        })
    }

    #[test]
    fn text_is_escaped_calls_and_thinking_fold_and_nothing_is_loaded() {
        let html = page(vec![
            json!({"uuid": "a", "seq": 0, "message": {"role": "user", "content": [{"type": "text", "text": "<script>alert(1)</script><img src=x onerror=alert(2)>"}]}}),
            json!({"uuid": "b", "seq": 1, "message": {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {"p": "\"><b>"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}}),
            json!({"uuid": "c", "seq": 2, "type": "progress"}),
        ]);
        assert!(!html.contains("<script>alert"));
        assert!(!html.contains("<img src=x"));
        assert!(html.contains("&lt;script&gt;alert(1)"));
        assert_eq!(html.matches("<article class=\"message").count(), 2);
        assert_eq!(html.matches("<details class=\"thinking\">").count(), 1);
        assert_eq!(html.matches("<details class=\"tool-call\">").count(), 1);
        assert!(html.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""));
        assert!(
            !html.contains("src=\"http"),
            "a URL image is named, not loaded"
        );
        assert!(!html.contains("href=\"http"));
        assert!(html.contains("<title>Session s&lt;1&gt;</title>"));
        assert!(html.contains("<div class=\"event\">progress</div>"));
    }

    #[test]
    fn a_data_url_with_a_bad_media_type_is_not_used() {
        let html = page(vec![
            json!({"uuid": "a", "seq": 0, "message": {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png\" onload=\"x", "data": "AAAA"}}]}}),
        ]);
        assert!(!html.contains("<img"));
    }
}
