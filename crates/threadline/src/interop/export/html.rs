//! One self-contained HTML page: styles and a small script inline, images as data: URLs, and a
//! Content-Security-Policy that lets the page load nothing from anywhere. Everything from the
//! session is escaped (it is untrusted text). Tool calls, their results and thinking are
//! `<details>` elements, folded, so the page works without its script (the script only adds the
//! Expand all / Collapse all buttons).
//!
//! The page's shape, which `__test__/html.test.js` checks in Chromium: one
//! `<article class="message" data-role data-uuid data-seq>` per record with a message, in order;
//! one `<div class="event">` per event (runs of three or more folded into one
//! `<details class="events">`); a `<h2 class="turn">` with the turn's tokens where each turn
//! starts; a tool call is `<details class="tool-call" id="call-ID">`, its result
//! `<details class="tool-result" data-tool-use-id="ID">` naming the same tool and linking back.

use std::collections::HashMap;
use std::fmt::Write;

use serde_json::Value;

use super::markdown::{media, models, result_text, tool_names};
use super::{is_compact_summary, thousands, turn_starts, Transcript};

const STYLE: &str = include_str!("html.css");
const SCRIPT: &str = "(()=>{const t=document.getElementById('tools');t.hidden=false;\
const all=o=>document.querySelectorAll('main details').forEach(d=>{d.open=o});\
document.getElementById('open-all').onclick=()=>all(true);\
document.getElementById('close-all').onclick=()=>all(false)})()";
const CSP: &str = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; \
                   script-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

/// Runs of at least this many events in a row are folded into one `<details>`.
const EVENT_RUN_FOLD: usize = 3;
/// Characters of a one-line preview in a summary.
const PREVIEW: usize = 100;

pub fn render(t: &Transcript) -> String {
    let i = t.info;
    let title = i
        .title
        .clone()
        .unwrap_or_else(|| format!("Session {}", i.id));
    let mut out = String::with_capacity(64 * 1024 + t.records.len() * 512);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
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
    match &i.model {
        Some(m) => fact("Model", m),
        None => {
            let used = models(t.records);
            if !used.is_empty() {
                fact(
                    if used.len() == 1 { "Model" } else { "Models" },
                    &used.join(", "),
                );
            }
        }
    }
    if let Some(p) = &i.provider {
        fact("Provider", p);
    }
    fact("Created", &i.created_at);
    fact("Updated", &i.updated_at);
    fact(
        "Messages",
        &format!(
            "{}, {}",
            count(i.message_count, "message"),
            count(t.turns.len() as u64, "turn")
        ),
    );
    if !t.turns.is_empty() {
        let sum = |f: fn(&crate::model::usage::Usage) -> u64| {
            t.turns.iter().map(|t| f(&t.usage)).sum::<u64>()
        };
        fact(
            "Tokens",
            &format!(
                "{} in · {} out · {} cache read · {} cache write",
                thousands(sum(|u| u.input_tokens)),
                thousands(sum(|u| u.output_tokens)),
                thousands(sum(|u| u.cache_read_input_tokens)),
                thousands(sum(|u| u.cache_creation_input_tokens))
            ),
        );
    }
    out.push_str(
        "</dl><nav id=\"tools\" hidden><button id=\"open-all\" type=\"button\">Expand all</button> \
         <button id=\"close-all\" type=\"button\">Collapse all</button></nav></header>\n<main>\n",
    );

    let names = tool_names(t.records);
    let starts = turn_starts(t.turns);
    let mut events: Vec<&Value> = Vec::new();
    for r in t.records {
        let uuid = r.get("uuid").and_then(Value::as_str).unwrap_or("");
        let turn = starts.get(uuid);
        let plain_event = r.get("message").is_none() && super::event_label(r).summary.is_none();
        if plain_event && turn.is_none() {
            events.push(r);
            continue;
        }
        flush_events(&mut out, &mut events);
        if let Some(turn) = turn {
            let _ = writeln!(
                out,
                "<h2 class=\"turn\" data-turn=\"{}\"><span>Turn {}<span class=\"meta\">{} · {}</span></span><span class=\"tokens\">{}</span></h2>",
                turn.index,
                turn.index + 1,
                count(turn.message_count, "message"),
                count(turn.tool_use_count, "tool call"),
                super::turn_tokens(turn)
            );
        }
        match r.get("message") {
            Some(m) => message(&mut out, r, m, &names),
            None if plain_event => events.push(r),
            None => event(&mut out, r),
        }
    }
    flush_events(&mut out, &mut events);
    let _ = writeln!(out, "</main>\n<script>{SCRIPT}</script>\n</body></html>");
    out
}

/// `1 turn`, `2 turns`, `1,024 messages`.
fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{} {what}s", thousands(n))
    }
}

fn message(out: &mut String, r: &Value, m: &Value, names: &HashMap<&str, &str>) {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    let seq = r.get("seq").and_then(Value::as_u64).unwrap_or(0);
    let model = m.get("model").and_then(Value::as_str).unwrap_or("");
    let blocks: Vec<Value> = match m.get("content") {
        Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "text": text})],
        Some(Value::Array(b)) => b.clone(),
        _ => Vec::new(),
    };
    let only_results = !blocks.is_empty()
        && blocks
            .iter()
            .all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
    let summary = is_compact_summary(r);
    let who = match role {
        _ if summary => "Compaction summary".to_string(),
        "assistant" => "Assistant".to_string(),
        "user" if only_results => "Tool result".to_string(),
        "user" => "User".to_string(),
        other => other.to_string(),
    };
    let class = if only_results { " results" } else { "" };
    let ts = s("timestamp");
    let _ = write!(
        out,
        "<article class=\"message {}{class}\" data-role=\"{}\" data-uuid=\"{}\" data-seq=\"{seq}\">\
         <div class=\"who\"><b>{}</b> <time datetime=\"{}\" title=\"{}\">{}</time>",
        esc(&css_word(role)),
        esc(role),
        esc(s("uuid")),
        esc(&who),
        esc(ts),
        esc(ts),
        esc(&short_time(ts)),
    );
    if !model.is_empty() {
        let _ = write!(out, " <span class=\"model\">{}</span>", esc(model));
    }
    out.push_str("</div>\n");
    let before = out.len();
    if summary {
        // Claude Code's summary of the conversation before (hundreds of lines), folded
        let mut body = String::new();
        for b in &blocks {
            block(&mut body, b, names);
        }
        let text: Vec<&str> = blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        details(
            out,
            "compact-summary",
            "",
            "Summary of the conversation before",
            &preview(&text.join("\n")),
            &body,
        );
    } else {
        for b in &blocks {
            block(out, b, names);
        }
    }
    if out.len() == before {
        out.push_str("<div class=\"note\">(no content)</div>\n");
    }
    out.push_str("</article>\n");
}
fn block(out: &mut String, b: &Value, names: &HashMap<&str, &str>) {
    let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
    match s("type") {
        "text" => {
            let text = s("text").trim();
            if !text.is_empty() {
                let _ = writeln!(out, "<div class=\"text\">{}</div>", esc(text));
            }
        }
        "thinking" => details(
            out,
            "thinking",
            "",
            "Thinking",
            &preview(s("thinking")),
            &format!("<div class=\"text\">{}</div>", esc(s("thinking").trim())),
        ),
        "redacted_thinking" => out.push_str("<div class=\"note\">(redacted thinking)</div>\n"),
        "tool_use" | "server_tool_use" => {
            let input = b.get("input").unwrap_or(&Value::Null);
            let pretty = serde_json::to_string_pretty(input).unwrap_or_default();
            let id = s("id");
            let attrs = if safe_id(id) {
                format!(" id=\"call-{id}\"")
            } else {
                String::new()
            };
            let label = if s("type") == "server_tool_use" {
                "Server tool"
            } else {
                "Tool call"
            };
            details(
                out,
                "tool-call",
                &attrs,
                &format!("{label} <b>{}</b>", esc(s("name"))),
                &input_preview(input),
                &format!(
                    "<pre>{}</pre><div class=\"id\">{}</div>",
                    esc(&pretty),
                    esc(id)
                ),
            );
        }
        "tool_result" => {
            let error = b.get("is_error") == Some(&Value::Bool(true));
            let id = s("tool_use_id");
            let text = result_text(b.get("content"));
            let mut body = format!("<pre>{}</pre>", esc(&text));
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
            let name = names.get(id).copied();
            if name.is_some() && safe_id(id) {
                let _ = write!(
                    body,
                    "<a class=\"id\" href=\"#call-{id}\">↑ the call ({id})</a>"
                );
            } else {
                let _ = write!(body, "<div class=\"id\">{}</div>", esc(id));
            }
            let mut label = String::from("Result");
            if let Some(name) = name {
                let _ = write!(label, " <b>{}</b>", esc(name));
            }
            if error {
                label.push_str(" <span class=\"badge\">error</span>");
            }
            let class = if error {
                "tool-result error"
            } else {
                "tool-result"
            };
            details(
                out,
                class,
                &format!(" data-tool-use-id=\"{}\"", esc(id)),
                &label,
                &preview(&text),
                &body,
            );
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
                "",
                &esc(other),
                "",
                &format!("<pre>{}</pre>", esc(&text)),
            );
        }
    }
}

/// A folded element: `label_html` and `attrs` are markup made here; `preview` is plain text.
fn details(
    out: &mut String,
    class: &str,
    attrs: &str,
    label_html: &str,
    preview: &str,
    body_html: &str,
) {
    let preview = if preview.is_empty() {
        String::new()
    } else {
        format!(" <span class=\"preview\">{}</span>", esc(preview))
    };
    let _ = writeln!(
        out,
        "<details class=\"{class}\"{attrs}><summary>{label_html}{preview}</summary><div class=\"body\">{body_html}</div></details>",
    );
}

/// The first non-blank line of a text, cut to `PREVIEW` characters.
fn preview(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let line = line.unwrap_or("");
    match line.char_indices().nth(PREVIEW) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// What a tool call is about, in one line: the input's most telling string field.
fn input_preview(input: &Value) -> String {
    const KEYS: [&str; 9] = [
        "description",
        "command",
        "file_path",
        "path",
        "pattern",
        "query",
        "url",
        "prompt",
        "skill",
    ];
    let Some(obj) = input.as_object() else {
        return String::new();
    };
    KEYS.iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .or_else(|| obj.values().find_map(Value::as_str))
        .map(preview)
        .unwrap_or_default()
}

/// A timestamp as people read it: `2026-02-12 16:02:25` from `2026-02-12T16:02:25.284Z`.
fn short_time(ts: &str) -> String {
    let b = ts.as_bytes();
    match (ts.get(..10), ts.get(11..19)) {
        (Some(day), Some(time)) if b[10] == b'T' && b[4] == b'-' && b[13] == b':' => {
            format!("{day} {time}")
        }
        _ => ts.to_string(),
    }
}

/// An id that can go in an `id` attribute and a `#fragment` as it is.
fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// A role as a class name (letters and digits only).
fn css_word(s: &str) -> String {
    s.chars().filter(char::is_ascii_alphanumeric).collect()
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

/// Writes the events gathered since the last message: each a line, a run of
/// `EVENT_RUN_FOLD` or more folded into one element that says what is in it.
fn flush_events(out: &mut String, events: &mut Vec<&Value>) {
    if events.is_empty() {
        return;
    }
    let fold = events.len() >= EVENT_RUN_FOLD;
    if fold {
        let mut kinds: Vec<(String, usize)> = Vec::new();
        for r in events.iter() {
            let k = kind(r);
            match kinds.iter_mut().find(|(n, _)| *n == k) {
                Some((_, c)) => *c += 1,
                None => kinds.push((k, 1)),
            }
        }
        let list = kinds
            .iter()
            .map(|(k, c)| {
                if *c > 1 {
                    format!("{k} ×{c}")
                } else {
                    k.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            out,
            "<details class=\"events\"><summary>{} events <span class=\"preview\">{}</span></summary><div class=\"body\">",
            events.len(),
            esc(&list)
        );
    }
    for r in events.drain(..) {
        event(out, r);
    }
    if fold {
        out.push_str("</div></details>\n");
    }
}

/// An event's type (an app event's name) and subtype, as one short label.
fn kind(r: &Value) -> String {
    let e = super::event_label(r);
    let ty = match (e.ty, r.get("name").and_then(Value::as_str)) {
        ("event", Some(name)) => name,
        (ty, _) => ty,
    };
    match e.sub {
        Some(sub) => format!("{ty} · {sub}"),
        None => ty.to_string(),
    }
}

fn event(out: &mut String, r: &Value) {
    let e = super::event_label(r);
    match e.summary {
        Some(summary) => details(
            out,
            "compaction",
            "",
            "Compaction summary",
            &preview(summary),
            &format!("<div class=\"text\">{}</div>", esc(summary.trim())),
        ),
        None => {
            let content = r
                .get("content")
                .and_then(Value::as_str)
                .map(preview)
                .filter(|c| !c.is_empty())
                .map(|c| format!(" <span class=\"preview\">{}</span>", esc(&c)))
                .unwrap_or_default();
            let seq = r.get("seq").and_then(Value::as_u64).unwrap_or(0);
            // where Claude Code compacted: a rule across the page
            let class = if e.sub == Some("compact_boundary") {
                "event boundary"
            } else {
                "event"
            };
            let _ = writeln!(
                out,
                "<div class=\"{class}\" data-seq=\"{seq}\">{}{content}</div>",
                esc(&kind(r))
            );
        }
    }
}

/// Text as HTML: the five special characters escaped; terminal colour and cursor sequences
/// (`ESC [ ... letter`, common in tool output) left out; other control characters shown as
/// their Unicode pictures (␛, ␇, ...).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' if chars.peek() == Some(&'[') => {
                chars.next();
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('�')),
            '\u{7f}' => out.push('␡'),
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
    use crate::model::state::{Turn, TurnStatus};
    use crate::model::usage::Usage;
    use serde_json::json;

    fn info() -> SessionInfo {
        SessionInfo {
            id: "s<1>".into(),
            project: Some("p&q".into()),
            title: None,
            provider: None,
            model: Some("m\"x".into()),
            status: Status::Active,
            created_at: "c".into(),
            updated_at: "u".into(),
            message_count: 2,
            context_window: None,
            forked_from: None,
            metadata: None,
        }
    }

    fn page_with(records: Vec<Value>, turns: &[Turn]) -> String {
        let info = info();
        render(&Transcript {
            info: &info,
            records: &records,
            turns,
        })
    }

    fn page(records: Vec<Value>) -> String {
        page_with(records, &[])
    }

    /// The value of every `attr="..."` in the page.
    fn attr_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
        let pat = format!(" {attr}=\"");
        html.match_indices(&pat)
            .map(|(at, _)| {
                let rest = &html[at + pat.len()..];
                &rest[..rest.find('"').unwrap()]
            })
            .collect()
    }

    fn hostile() -> Vec<Value> {
        vec![
            json!({"uuid": "a", "seq": 0, "timestamp": "2026-02-12T16:02:25.284Z", "message": {"role": "user", "content": [{"type": "text", "text": "<script>alert(1)</script><img src=x onerror=alert(2)>"}]}}),
            json!({"uuid": "b\"><i>", "seq": 1, "message": {"role": "assistant", "model": "<b>", "content": [
                {"type": "thinking", "thinking": "hmm <u>", "signature": "s"},
                {"type": "tool_use", "id": "t1", "name": "ls<script>", "input": {"p": "\"><b>", "command": "</pre><script>x()</script>"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}}),
            json!({"uuid": "c", "seq": 2, "type": "progress"}),
            json!({"uuid": "d", "seq": 3, "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "<script>y()</script>", "is_error": true}]}}),
            json!({"uuid": "e", "seq": 4, "type": "system", "subtype": "<x>", "content": "<script>z()</script>"}),
        ]
    }

    #[test]
    fn text_from_the_session_is_escaped_everywhere() {
        let html = page(hostile());
        for bad in [
            "<script>alert",
            "<img src=x",
            "<script>x()",
            "<script>y()",
            "<script>z()",
            "<u>",
            "<i>",
            "ls<script>",
            "<x>",
        ] {
            assert!(!html.contains(bad), "{bad} is in the page");
        }
        assert!(html
            .contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"));
        assert!(html.contains("<title>Session s&lt;1&gt;</title>"));
        assert!(html.contains("<dd>p&amp;q</dd>"));
        assert!(html.contains("<dd>m&quot;x</dd>"));
        assert!(html.contains("data-uuid=\"b&quot;&gt;&lt;i&gt;\""));
        // the only script is the page's own
        assert_eq!(html.matches("<script>").count(), 1);
        assert_eq!(html.matches("<script").count(), 1);
    }

    #[test]
    fn one_element_per_message_with_role_uuid_and_seq() {
        let html = page(hostile());
        assert_eq!(html.matches("<article class=\"message").count(), 3);
        assert_eq!(
            attr_values(&html, "data-role"),
            ["user", "assistant", "user"]
        );
        assert_eq!(attr_values(&html, "data-uuid")[0], "a");
        assert_eq!(attr_values(&html, "data-uuid")[2], "d");
        assert_eq!(
            html.matches("data-seq=\"0\"").count()
                + html.matches("data-seq=\"1\"").count()
                + html.matches("data-seq=\"3\"").count(),
            3
        );
        // events are lines, not messages
        assert_eq!(html.matches("<div class=\"event\"").count(), 2);
        assert!(html.contains("<div class=\"event\" data-seq=\"2\">progress</div>"));
    }

    #[test]
    fn calls_results_and_thinking_are_folded_details() {
        let html = page(hostile());
        assert_eq!(html.matches("<details class=\"thinking\">").count(), 1);
        assert_eq!(
            html.matches("<details class=\"tool-call\" id=\"call-t1\">")
                .count(),
            1
        );
        assert_eq!(
            html.matches("<details class=\"tool-result error\" data-tool-use-id=\"t1\">")
                .count(),
            1
        );
        assert!(!html.contains("<details open"), "folded at first");
        assert!(!html.contains(" open>"));
        // the result names its tool and links back to the call
        assert!(html.contains("Result <b>ls&lt;script&gt;</b> <span class=\"badge\">error</span>"));
        assert!(html.contains("href=\"#call-t1\""));
        // the call's summary says what it does
        assert!(html.contains("<span class=\"preview\">&lt;/pre&gt;&lt;script&gt;x()"));
    }

    #[test]
    fn images_are_data_urls_and_nothing_is_loaded_from_a_url() {
        let html = page(hostile());
        assert!(html.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""));
        assert!(html.contains("[image: unknown type, https://example.com/x.png]"));
        for attr in ["src", "href", "action", "srcset", "poster"] {
            for v in attr_values(&html, attr) {
                assert!(
                    v.starts_with("data:") || v.starts_with('#'),
                    "{attr}={v} would load something"
                );
            }
        }
        assert!(!html.contains("url("), "no CSS url()");
        assert!(html.contains("default-src 'none'"));
    }

    #[test]
    fn a_data_url_with_a_bad_media_type_or_data_is_not_used() {
        let html = page(vec![
            json!({"uuid": "a", "seq": 0, "message": {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png\" onload=\"x", "data": "AAAA"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA\"AA"}}]}}),
        ]);
        assert!(!html.contains("<img"));
        assert_eq!(html.matches("[image: ").count(), 2);
    }

    #[test]
    fn string_content_whitespace_text_and_turn_tokens() {
        let turn = Turn {
            index: 0,
            start_index: 0,
            end_index: 1,
            start_uuid: "a".into(),
            end_uuid: "b".into(),
            message_count: 2,
            tool_use_count: 0,
            usage: Usage {
                input_tokens: 11,
                output_tokens: 22,
                cache_read_input_tokens: 33,
                cache_creation_input_tokens: 44,
            },
            status: TurnStatus::Complete,
        };
        let html = page_with(
            vec![
                json!({"uuid": "a", "seq": 0, "message": {"role": "user", "content": "hi <there>"}}),
                json!({"uuid": "b", "seq": 1, "message": {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}]}}),
            ],
            &[turn],
        );
        assert!(html.contains("<div class=\"text\">hi &lt;there&gt;</div>"));
        assert!(html.contains("(no content)"));
        assert!(html.contains(
            "<span class=\"tokens\">11 in · 22 out · 33 cache read · 44 cache write</span>"
        ));
        assert_eq!(html.matches("<h2 class=\"turn\"").count(), 1);
    }

    #[test]
    fn a_compaction_summary_is_folded_and_token_counts_have_thousands_separators() {
        let turn = Turn {
            index: 0,
            start_index: 0,
            end_index: 0,
            start_uuid: "a".into(),
            end_uuid: "a".into(),
            message_count: 1,
            tool_use_count: 0,
            usage: Usage {
                input_tokens: 1_234_567,
                output_tokens: 2_000,
                cache_read_input_tokens: 0,
                cache_creation_input_tokens: 999,
            },
            status: TurnStatus::Complete,
        };
        let long: String = (0..230).map(|i| format!("line {i}\n")).collect();
        let html = page_with(
            vec![
                json!({"uuid": "a", "seq": 0, "isCompactSummary": true, "message": {"role": "user", "content": format!("This session is being continued.\n{long}")}}),
            ],
            &[turn],
        );
        let article = html.find("<article class=\"message user\"").unwrap();
        let fold = html
            .find("<details class=\"compact-summary\"><summary>Summary of the conversation before <span class=\"preview\">This session is being continued.</span></summary>")
            .unwrap_or_else(|| panic!("{html}"));
        assert!(article < fold && fold < html.find("line 229").unwrap());
        assert!(html.contains("<b>Compaction summary</b>"));
        assert!(html.contains(
            "<span class=\"tokens\">1,234,567 in · 2,000 out · 0 cache read · 999 cache write</span>"
        ));
        assert!(
            html.contains("1,234,567 in · 2,000 out"),
            "the header's sum"
        );
    }

    #[test]
    fn a_run_of_events_is_folded_with_its_count() {
        let mut records: Vec<Value> = (0..4)
            .map(|i| json!({"uuid": format!("e{i}"), "seq": i, "type": "progress", "data": {"type": "hook_progress"}}))
            .collect();
        records.push(json!({"uuid": "q", "seq": 4, "type": "queue-operation"}));
        let html = page(records);
        assert_eq!(html.matches("<div class=\"event\"").count(), 5);
        assert!(html.contains(
            "5 events <span class=\"preview\">progress · hook_progress ×4, queue-operation</span>"
        ));
    }

    #[test]
    fn terminal_sequences_are_left_out_and_control_characters_shown() {
        assert_eq!(esc("\u{1b}[1mbold\u{1b}[22m <x>"), "bold &lt;x&gt;");
        assert_eq!(esc("a\u{7}b\u{0}c\td\ne"), "a␇b␀c\td\ne");
        assert_eq!(esc("\u{1b}x"), "␛x");
        assert_eq!(esc("\u{1b}["), "", "an unfinished sequence ends the text");
    }

    #[test]
    fn the_header_names_the_models_used_and_counts_are_plural_or_not() {
        let mut info = info();
        info.model = None;
        let records = vec![
            json!({"uuid": "a", "seq": 0, "message": {"role": "assistant", "model": "m1", "content": []}}),
            json!({"uuid": "b", "seq": 1, "message": {"role": "assistant", "model": "<synthetic>", "content": []}}),
            json!({"uuid": "c", "seq": 2, "message": {"role": "assistant", "model": "m2", "content": []}}),
            json!({"uuid": "d", "seq": 3, "message": {"role": "assistant", "model": "m1", "content": []}}),
            json!({"uuid": "e", "seq": 4, "type": "event", "name": "approval", "data": {"type": "ok"}}),
        ];
        let html = render(&Transcript {
            info: &info,
            records: &records,
            turns: &[],
        });
        assert!(html.contains("<dt>Models</dt><dd>m1, m2</dd>"));
        assert!(html.contains("<dd>2 messages, 0 turns</dd>"));
        assert!(html.contains(">approval · ok</div>"));
        assert_eq!(count(1, "tool call"), "1 tool call");
    }

    #[test]
    fn previews_are_one_line_and_short() {
        assert_eq!(preview("\n  first  \nsecond"), "first");
        let long = "é".repeat(300);
        assert_eq!(preview(&long).chars().count(), PREVIEW + 1);
        assert_eq!(
            short_time("2026-02-12T16:02:25.284Z"),
            "2026-02-12 16:02:25"
        );
        assert_eq!(short_time("c"), "c");
    }
}
