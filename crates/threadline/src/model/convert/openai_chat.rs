//! Neutral <-> OpenAI Chat Completions (`ChatCompletionMessageParam[]`).
//!
//! To:
//! - the system prompt becomes the first message, `{ role: 'system', content }` (a string stays
//!   a string, text blocks become text parts);
//! - an assistant message becomes `{ role: 'assistant', content, tool_calls? }`: its text (one
//!   plain text block: a string; else text parts; none: `null`), a refusal (a text block marked
//!   `openai.refusal`) as `refusal`, each tool_use as a function tool call whose `arguments` is
//!   the input as JSON text (the exact text it came with when unchanged). Chat has no place for
//!   thinking, OpenAI reasoning, server tools or text after a call's position (warnings);
//! - a user message becomes one `{ role: 'tool', tool_call_id, content }` message per tool_result,
//!   in order, then `{ role: 'user', content }` with the rest: text, images (`image_url` parts, base64
//!   as `data:` URLs), PDFs (`file` parts with a `data:` URL and a filename). A tool message takes
//!   text only: images and documents of a tool result move to the user message after the tool
//!   messages (warning). `is_error` has no equivalent (warning; the content is sent as it is).
//!
//! A system message inside the conversation goes in place as `{ role: 'system', content }`.
//!
//! From: the inverse. Leading system / developer messages become `system`, later ones neutral
//! system messages in place; tool messages and the
//! user message after them become one user message (tool_results first); consecutive messages of
//! one role are merged. Fields with no neutral equivalent (`name`, `annotations`, `audio`, an
//! image's `detail`, parts like `input_audio`) are kept under `openai` / as `openai_part` blocks
//! and restored by `to_openai_chat`.

use serde_json::{Map, Value};

use super::ids::{IdMapper, IdTarget};
use super::{
    arguments_of, block_type, blocks_of, check_message_fields, codes, content_document, data_url,
    extras, is_empty_value, merge_message_openai, obj, openai_field, openai_of, parse_arguments,
    parse_data_url, push_blocks, restore_id, str_of, system_from_openai, system_message_content,
    text_block, tool_ids, Converted, FromConverted, IdMap, SystemAcc, Warnings,
};
use crate::error::{Error, Path, Result};

const TARGET: &str = "OpenAI Chat Completions";

/// Chat part types an `openai_part` block may hold for a user / assistant message.
const USER_PARTS: &[&str] = &["text", "image_url", "input_audio", "file"];
const ASSISTANT_PARTS: &[&str] = &["text", "refusal"];

/// Neutral messages to Chat Completions messages, the system prompt first.
pub fn to_openai_chat(messages: &[Value], system: Option<&Value>) -> Converted {
    let mut w = Warnings::new();
    let mut ids = IdMapper::new(IdTarget::OpenAiChat, &tool_ids(messages));
    let mut out = Vec::new();
    if let Some(s) = system.filter(|s| !s.is_null()) {
        let content = match s {
            Value::Array(blocks) => {
                let mut parts = Vec::new();
                for (j, b) in blocks.iter().enumerate() {
                    parts.push(text_part(b, &format!("system[{j}]"), &mut w));
                }
                Value::Array(parts)
            }
            other => other.clone(),
        };
        out.push(obj(vec![("role", "system".into()), ("content", content)]));
    }
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        match m.get("role").and_then(Value::as_str) {
            Some("assistant") => assistant_out(m, &at, &mut ids, &mut out, &mut w),
            Some("user") => user_out(m, &at, &mut ids, &mut out, &mut w),
            Some("system") => {
                let content = content_of_system(system_message_content(m, &at, &mut w, text_part));
                out.push(obj(vec![("role", "system".into()), ("content", content)]));
            }
            _ => {
                w.add(
                    &at,
                    codes::INVALID_SKIPPED,
                    "not a message with role 'user', 'assistant' or 'system'",
                );
                continue;
            }
        }
        check_message_fields(m, &at, TARGET, &mut w);
    }
    Converted {
        system: None,
        messages: out,
        warnings: w.0,
        id_map: ids.reverse,
    }
}

/// A system message's content: one plain text part as a string (as a string came in).
fn content_of_system(content: Value) -> Value {
    match content {
        Value::Array(parts) => content_of(parts),
        other => other,
    }
}

/// Content from parts: one plain text part as a string, else the parts.
fn content_of(parts: Vec<Value>) -> Value {
    if parts.len() == 1 {
        let p = &parts[0];
        if block_type(p) == "text" && p.as_object().is_some_and(|o| o.len() == 2) {
            if let Some(t) = str_of(p, "text") {
                return Value::String(t.to_string());
            }
        }
    }
    Value::Array(parts)
}

/// Message-level `openai` fields, restored on the Chat message.
fn restore_message_fields(m: &Value, msg: &mut Value) {
    if let (Some(extra), Value::Object(o)) = (openai_of(m), msg) {
        for (k, v) in extra {
            if !o.contains_key(k) {
                o.insert(k.clone(), v.clone());
            }
        }
    }
}

fn assistant_out(m: &Value, at: &str, ids: &mut IdMapper, out: &mut Vec<Value>, w: &mut Warnings) {
    let mut texts = Vec::new();
    let mut refusals: Vec<String> = Vec::new();
    let mut calls = Vec::new();
    let mut reordered = false;
    for (j, b) in blocks_of(m).iter().enumerate() {
        let p = format!("{at}.content[{j}]");
        match block_type(b) {
            "text" => {
                if !calls.is_empty() && !reordered {
                    reordered = true;
                    w.add(
                        &p,
                        codes::REORDERED,
                        "text after a tool call: Chat Completions puts the content before the tool calls",
                    );
                }
                if openai_field(b, "refusal") == Some(&Value::Bool(true)) {
                    refusals.push(str_of(b, "text").unwrap_or_default().to_string());
                } else {
                    texts.push(text_part(b, &p, w));
                }
            }
            "tool_use" => calls.push(tool_call(b, &p, ids, w)),
            "thinking" | "redacted_thinking" => w.add(
                &p,
                codes::THINKING_DROPPED,
                format!(
                    "{} cannot be sent to {TARGET} (its signature is Anthropic's)",
                    block_type(b)
                ),
            ),
            "openai_reasoning" => w.add(
                &p,
                codes::REASONING_DROPPED,
                format!("OpenAI Responses reasoning has no place in {TARGET}"),
            ),
            "openai_part" if part_type_in(b, ASSISTANT_PARTS) => {
                texts.push(b.get("part").cloned().unwrap_or_default())
            }
            t => w.add(
                &p,
                codes::BLOCK_DROPPED,
                format!("a '{t}' block has no place in a {TARGET} assistant message"),
            ),
        }
    }
    if texts.is_empty() && refusals.is_empty() && calls.is_empty() && openai_of(m).is_none() {
        w.add(
            at,
            codes::MESSAGE_DROPPED,
            format!("nothing in this message can be sent to {TARGET}; it is left out"),
        );
        return;
    }
    let content = if texts.is_empty() {
        Value::Null
    } else {
        content_of(texts)
    };
    let mut msg = obj(vec![("role", "assistant".into()), ("content", content)]);
    if !refusals.is_empty() {
        msg["refusal"] = refusals.join("\n").into();
    }
    if !calls.is_empty() {
        msg["tool_calls"] = Value::Array(calls);
    }
    restore_message_fields(m, &mut msg);
    out.push(msg);
}

fn part_type_in(b: &Value, types: &[&str]) -> bool {
    b.get("part")
        .is_some_and(|p| types.contains(&block_type(p)))
}

fn tool_call(b: &Value, at: &str, ids: &mut IdMapper, w: &mut Warnings) -> Value {
    warn_fields(
        b,
        &["type", "id", "name", "input", "caller", "cache_control"],
        at,
        w,
    );
    let id = ids.map(str_of(b, "id").unwrap_or_default());
    let name = str_of(b, "name").unwrap_or_default();
    if openai_field(b, "type").and_then(Value::as_str) == Some("custom") {
        let input = match b.get("input").and_then(|i| i.get("input")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        return obj(vec![
            ("id", id.into()),
            ("type", "custom".into()),
            (
                "custom",
                obj(vec![("name", name.into()), ("input", input.into())]),
            ),
        ]);
    }
    obj(vec![
        ("id", id.into()),
        ("type", "function".into()),
        (
            "function",
            obj(vec![
                ("name", name.into()),
                ("arguments", arguments_of(b).into()),
            ]),
        ),
    ])
}

/// Warnings for a block's fields the target cannot carry: `cache_control`, citations, a caller
/// other than a direct one, anything not in `known` (`openai` is never reported).
pub(crate) fn warn_fields(b: &Value, known: &[&str], at: &str, w: &mut Warnings) {
    let Some(o) = b.as_object() else { return };
    for (k, v) in o {
        if k == "openai" || v.is_null() {
            continue;
        }
        match k.as_str() {
            "cache_control" if known.contains(&"cache_control") => w.add(
                at,
                codes::CACHE_CONTROL_DROPPED,
                "OpenAI takes no cache_control (its prompt cache is automatic)",
            ),
            "citations" if known.contains(&"citations") => {
                let enabled = match v {
                    Value::Array(a) => !a.is_empty(),
                    Value::Object(c) => c.get("enabled") == Some(&Value::Bool(true)),
                    _ => false,
                };
                if enabled {
                    w.add(at, codes::CITATIONS_DROPPED, "OpenAI takes no citations");
                }
            }
            "caller" if known.contains(&"caller") => {
                if str_of(v, "type") != Some("direct") {
                    w.add(
                        at,
                        codes::FIELD_DROPPED,
                        "a tool call made by code execution (caller) is sent as a plain call",
                    );
                }
            }
            k if known.contains(&k) => {}
            k => w.add(
                at,
                codes::FIELD_DROPPED,
                format!(
                    "field '{k}' of a {} block is not sent to OpenAI",
                    block_type(b)
                ),
            ),
        }
    }
}

/// A text block as a Chat text part (`prompt_cache_breakpoint` restored from `openai`).
fn text_part(b: &Value, at: &str, w: &mut Warnings) -> Value {
    warn_fields(b, &["type", "text", "cache_control", "citations"], at, w);
    let mut p = obj(vec![
        ("type", "text".into()),
        ("text", str_of(b, "text").unwrap_or_default().into()),
    ]);
    copy_openai(b, &mut p, &["prompt_cache_breakpoint"]);
    p
}

/// Copies the listed `openai` fields of a block onto a part.
pub(crate) fn copy_openai(b: &Value, part: &mut Value, keys: &[&str]) {
    if let (Some(o), Value::Object(p)) = (openai_of(b), part) {
        for k in keys {
            if let Some(v) = o.get(*k) {
                p.insert((*k).to_string(), v.clone());
            }
        }
    }
}

/// The file name given for a document without a title.
pub(crate) fn default_filename(media_type: &str) -> String {
    if media_type == "application/pdf" {
        "document.pdf".into()
    } else {
        "document".into()
    }
}

/// An image as an `image_url` part; `None` (with a warning) when its source has no URL form.
fn image_part(b: &Value, at: &str, w: &mut Warnings) -> Option<Value> {
    warn_fields(b, &["type", "source", "cache_control"], at, w);
    let url = image_url(b, at, w)?;
    let mut iu = obj(vec![("url", url.into())]);
    copy_openai(b, &mut iu, &["detail"]);
    let mut p = obj(vec![("type", "image_url".into()), ("image_url", iu)]);
    copy_openai(b, &mut p, &["prompt_cache_breakpoint"]);
    Some(p)
}

/// The URL of an image: a `data:` URL for base64 data, the URL itself for a URL source.
pub(crate) fn image_url(b: &Value, at: &str, w: &mut Warnings) -> Option<String> {
    let src = b.get("source").unwrap_or(&Value::Null);
    match str_of(src, "type") {
        Some("base64") => Some(data_url(
            str_of(src, "media_type").unwrap_or("image/png"),
            str_of(src, "data").unwrap_or_default(),
        )),
        Some("url") => Some(str_of(src, "url").unwrap_or_default().to_string()),
        t => {
            w.add(
                at,
                codes::UNSUPPORTED_SOURCE,
                format!(
                    "an image with a '{}' source cannot be sent to OpenAI (an Anthropic Files API id)",
                    t.unwrap_or("?")
                ),
            );
            None
        }
    }
}

/// A document's source, after saying which of its fields OpenAI has no place for (both OpenAI
/// APIs take the same document fields).
pub(crate) fn document_source<'a>(b: &'a Value, at: &str, w: &mut Warnings) -> &'a Value {
    warn_fields(
        b,
        &[
            "type",
            "source",
            "title",
            "context",
            "citations",
            "cache_control",
        ],
        at,
        w,
    );
    if str_of(b, "context").is_some() {
        w.add(
            at,
            codes::FIELD_DROPPED,
            "a document's context is not sent to OpenAI",
        );
    }
    let src = b.get("source").unwrap_or(&Value::Null);
    src
}

/// A document as Chat parts: a PDF as a `file` part, text as text parts.
fn document_parts(b: &Value, at: &str, w: &mut Warnings) -> Vec<Value> {
    let src = document_source(b, at, w);
    match str_of(src, "type") {
        Some("base64") => {
            let mt = str_of(src, "media_type").unwrap_or("application/pdf");
            let filename = str_of(b, "title")
                .map(str::to_string)
                .unwrap_or_else(|| default_filename(mt));
            let mut p = obj(vec![
                ("type", "file".into()),
                (
                    "file",
                    obj(vec![
                        ("filename", filename.into()),
                        (
                            "file_data",
                            data_url(mt, str_of(src, "data").unwrap_or_default()).into(),
                        ),
                    ]),
                ),
            ]);
            copy_openai(b, &mut p, &["prompt_cache_breakpoint"]);
            vec![p]
        }
        Some("text") => {
            w.add(
                at,
                codes::DOCUMENT_AS_TEXT,
                "a plain-text document is sent as a text part",
            );
            vec![obj(vec![
                ("type", "text".into()),
                ("text", str_of(src, "data").unwrap_or_default().into()),
            ])]
        }
        Some("content") => content_document(src, at, w, "text", text_part, image_part),
        t => {
            w.add(
                at,
                codes::UNSUPPORTED_SOURCE,
                format!(
                    "a document with a '{}' source cannot be sent to {TARGET} (file parts take base64 data only)",
                    t.unwrap_or("?")
                ),
            );
            Vec::new()
        }
    }
}

fn user_out(m: &Value, at: &str, ids: &mut IdMapper, out: &mut Vec<Value>, w: &mut Warnings) {
    let mut tools = Vec::new();
    let mut moved = Vec::new();
    let mut parts = Vec::new();
    for (j, b) in blocks_of(m).iter().enumerate() {
        let p = format!("{at}.content[{j}]");
        match block_type(b) {
            "tool_result" => tools.push(tool_message(b, &p, ids, &mut moved, w)),
            "text" => parts.push(text_part(b, &p, w)),
            "image" => parts.extend(image_part(b, &p, w)),
            "document" => parts.extend(document_parts(b, &p, w)),
            "openai_part" if part_type_in(b, USER_PARTS) => {
                parts.push(b.get("part").cloned().unwrap_or_default())
            }
            t => w.add(
                &p,
                codes::BLOCK_DROPPED,
                format!("a '{t}' block has no place in a {TARGET} user message"),
            ),
        }
    }
    let had_tools = !tools.is_empty();
    out.extend(tools);
    moved.extend(parts);
    if !moved.is_empty() {
        let mut msg = obj(vec![
            ("role", "user".into()),
            ("content", content_of(moved)),
        ]);
        restore_message_fields(m, &mut msg);
        out.push(msg);
    } else if !had_tools {
        w.add(
            at,
            codes::MESSAGE_DROPPED,
            format!("nothing in this message can be sent to {TARGET}; it is left out"),
        );
    }
}

/// Says what of a tool_result neither OpenAI API has a place for (no error flag, no cache
/// control, no unknown fields).
pub(crate) fn warn_result_fields(b: &Value, at: &str, w: &mut Warnings) {
    warn_fields(
        b,
        &[
            "type",
            "tool_use_id",
            "content",
            "is_error",
            "cache_control",
        ],
        at,
        w,
    );
    if b.get("is_error") == Some(&Value::Bool(true)) {
        w.add(
            at,
            codes::IS_ERROR_DROPPED,
            "OpenAI has no error flag on a tool result; its content is sent as it is",
        );
    }
}

fn tool_message(
    b: &Value,
    at: &str,
    ids: &mut IdMapper,
    moved: &mut Vec<Value>,
    w: &mut Warnings,
) -> Value {
    warn_result_fields(b, at, w);
    let id = ids.map(str_of(b, "tool_use_id").unwrap_or_default());
    let content = match b.get("content") {
        Some(Value::String(s)) => Value::String(s.clone()),
        Some(Value::Array(inner)) => {
            let mut texts = Vec::new();
            for (k, x) in inner.iter().enumerate() {
                let p = format!("{at}.content[{k}]");
                match block_type(x) {
                    "text" => texts.push(text_part(x, &p, w)),
                    "image" | "document" => {
                        let parts = if block_type(x) == "image" {
                            image_part(x, &p, w).into_iter().collect()
                        } else {
                            document_parts(x, &p, w)
                        };
                        if !parts.is_empty() {
                            w.add(
                                &p,
                                codes::TOOL_RESULT_CONTENT_MOVED,
                                format!(
                                    "a {TARGET} tool message takes text only: this {} goes in the user message after the tool messages",
                                    block_type(x)
                                ),
                            );
                            moved.extend(parts);
                        }
                    }
                    t => w.add(
                        &p,
                        codes::BLOCK_DROPPED,
                        format!("a '{t}' block has no place in a {TARGET} tool message"),
                    ),
                }
            }
            if texts.is_empty() {
                Value::String(String::new())
            } else {
                Value::Array(texts)
            }
        }
        _ => Value::String(String::new()),
    };
    obj(vec![
        ("role", "tool".into()),
        ("tool_call_id", id.into()),
        ("content", content),
    ])
}

/// Chat Completions messages (params, or `ChatCompletionMessage`s of responses) to neutral
/// messages. `id_map` (from `to_openai_chat`) restores the original tool-call ids.
pub fn from_openai_chat(messages: &[Value], id_map: Option<&IdMap>) -> Result<FromConverted> {
    run(messages, id_map).map_err(|e| e.during("fromOpenAIChat"))
}

fn run(messages: &[Value], id_map: Option<&IdMap>) -> Result<FromConverted> {
    let mut w = Warnings::new();
    let mut sys = SystemAcc::default();
    let mut out: Vec<Value> = Vec::new();
    let root = Path::root().key("messages");
    for (i, m) in messages.iter().enumerate() {
        let at = root.index(i);
        if !m.is_object() {
            return Err(Error::invalid(&at, "expected a message object"));
        }
        let role = str_of(m, "role")
            .ok_or_else(|| Error::invalid(&at.key("role"), "expected a string"))?;
        match role {
            "system" | "developer" => {
                let content = m.get("content").unwrap_or(&Value::Null);
                let content = system_from_openai(content, &at.key("content"), &["text"])?;
                if out.is_empty() {
                    sys.push(content);
                } else {
                    // After the conversation began: a system message in place.
                    let content = match content {
                        Value::String(s) => Value::Array(vec![text_block(&s)]),
                        other => other,
                    };
                    out.push(obj(vec![("role", "system".into()), ("content", content)]));
                }
                if m.get("name").is_some_and(|n| !n.is_null()) {
                    w.add(
                        at.to_string(),
                        codes::FIELD_DROPPED,
                        "the name of a system message is not kept",
                    );
                }
            }
            "user" => {
                let blocks = match m.get("content") {
                    Some(Value::String(s)) => vec![text_block(s)],
                    Some(Value::Array(parts)) => {
                        let mut out = Vec::new();
                        for (j, p) in parts.iter().enumerate() {
                            out.push(user_part_block(p, &at.key("content").index(j))?);
                        }
                        out
                    }
                    _ => {
                        return Err(Error::invalid(
                            &at.key("content"),
                            "expected a string or an array of content parts",
                        ))
                    }
                };
                push_blocks(&mut out, "user", blocks);
                merge_message_openai(&mut out, message_extras(m, &[]), &at.to_string(), &mut w);
            }
            "assistant" => {
                let mut blocks = Vec::new();
                match m.get("content") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(s)) => {
                        if !s.is_empty() {
                            blocks.push(text_block(s));
                        }
                    }
                    Some(Value::Array(parts)) => {
                        for (j, p) in parts.iter().enumerate() {
                            blocks.push(assistant_part_block(p, &at.key("content").index(j))?);
                        }
                    }
                    Some(_) => {
                        return Err(Error::invalid(
                            &at.key("content"),
                            "expected a string, an array of content parts or null",
                        ))
                    }
                }
                match m.get("refusal") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(s)) => blocks.push(refusal_block(s)),
                    Some(_) => {
                        return Err(Error::invalid(
                            &at.key("refusal"),
                            "expected a string or null",
                        ))
                    }
                }
                match m.get("tool_calls") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(calls)) => {
                        for (k, c) in calls.iter().enumerate() {
                            blocks.push(tool_use_block(c, &at.key("tool_calls").index(k), id_map)?);
                        }
                    }
                    Some(_) => {
                        return Err(Error::invalid(&at.key("tool_calls"), "expected an array"))
                    }
                }
                push_blocks(&mut out, "assistant", blocks);
                merge_message_openai(
                    &mut out,
                    message_extras(m, &["refusal", "tool_calls"]),
                    &at.to_string(),
                    &mut w,
                );
            }
            "tool" => {
                let id = str_of(m, "tool_call_id")
                    .ok_or_else(|| Error::invalid(&at.key("tool_call_id"), "expected a string"))?;
                let content = match m.get("content") {
                    Some(Value::String(s)) => Value::String(s.clone()),
                    Some(Value::Array(parts)) => {
                        let mut out = Vec::new();
                        for (j, p) in parts.iter().enumerate() {
                            out.push(user_part_block(p, &at.key("content").index(j))?);
                        }
                        Value::Array(out)
                    }
                    _ => {
                        return Err(Error::invalid(
                            &at.key("content"),
                            "expected a string or an array of text parts",
                        ))
                    }
                };
                let b = obj(vec![
                    ("type", "tool_result".into()),
                    ("tool_use_id", restore_id(id, id_map).into()),
                    ("content", content),
                ]);
                push_blocks(&mut out, "user", vec![b]);
            }
            "function" => return Err(Error::invalid(
                &at.key("role"),
                "role 'function' (deprecated function calling) is not supported; use tool calls",
            )),
            r => {
                return Err(Error::invalid(
                    &at.key("role"),
                    format!(
                        "expected 'system', 'developer', 'user', 'assistant' or 'tool', got '{r}'"
                    ),
                ))
            }
        }
    }
    Ok(FromConverted {
        system: sys.finish(),
        messages: out,
        warnings: w.0,
    })
}

/// Message fields with no neutral equivalent (`name`, `annotations`, `audio`, ...), non-empty.
fn message_extras(m: &Value, also_skip: &[&str]) -> Map<String, Value> {
    let mut out = extras(m, &["role", "content"]);
    out.retain(|k, v| !also_skip.contains(&k.as_str()) && !is_empty_value(v));
    out
}

pub(crate) fn refusal_block(s: &str) -> Value {
    let mut b = text_block(s);
    b["openai"] = obj(vec![("refusal", true.into())]);
    b
}

fn with_openai(mut b: Value, extra: Map<String, Value>) -> Value {
    if !extra.is_empty() {
        b["openai"] = Value::Object(extra);
    }
    b
}

fn opaque_part(p: &Value) -> Value {
    obj(vec![("type", "openai_part".into()), ("part", p.clone())])
}

fn user_part_block(p: &Value, at: &Path) -> Result<Value> {
    if !p.is_object() {
        return Err(Error::invalid(at, "expected a content part object"));
    }
    match block_type(p) {
        "text" => {
            let text = str_of(p, "text")
                .ok_or_else(|| Error::invalid(&at.key("text"), "expected a string"))?;
            Ok(with_openai(text_block(text), extras(p, &["type", "text"])))
        }
        "image_url" => {
            let iu = p.get("image_url").unwrap_or(&Value::Null);
            let url = str_of(iu, "url").ok_or_else(|| {
                Error::invalid(&at.key("image_url").key("url"), "expected a string")
            })?;
            let mut extra = extras(p, &["type", "image_url"]);
            if let Some(d) = iu.get("detail").filter(|d| !d.is_null()) {
                extra.insert("detail".into(), d.clone());
            }
            Ok(with_openai(image_block(url), extra))
        }
        "file" => {
            let f = p.get("file").unwrap_or(&Value::Null);
            match str_of(f, "file_data") {
                Some(data) if str_of(f, "file_id").is_none() => {
                    let (mt, data) = parse_data_url(data)
                        .unwrap_or_else(|| ("application/pdf".into(), data.to_string()));
                    let title = str_of(f, "filename").filter(|n| *n != default_filename(&mt));
                    Ok(with_openai(
                        document_block(&mt, &data, title),
                        extras(p, &["type", "file"]),
                    ))
                }
                _ => Ok(opaque_part(p)),
            }
        }
        "" => Err(Error::invalid(&at.key("type"), "expected a string")),
        _ => Ok(opaque_part(p)),
    }
}

fn assistant_part_block(p: &Value, at: &Path) -> Result<Value> {
    if !p.is_object() {
        return Err(Error::invalid(at, "expected a content part object"));
    }
    match block_type(p) {
        "text" => user_part_block(p, at),
        "refusal" => {
            let s = str_of(p, "refusal")
                .ok_or_else(|| Error::invalid(&at.key("refusal"), "expected a string"))?;
            Ok(refusal_block(s))
        }
        "" => Err(Error::invalid(&at.key("type"), "expected a string")),
        _ => Ok(opaque_part(p)),
    }
}

/// An image block from a URL (`data:` URLs become base64 data).
pub(crate) fn image_block(url: &str) -> Value {
    let source = match parse_data_url(url) {
        Some((mt, data)) => obj(vec![
            ("type", "base64".into()),
            ("media_type", mt.into()),
            ("data", data.into()),
        ]),
        None => obj(vec![("type", "url".into()), ("url", url.into())]),
    };
    obj(vec![("type", "image".into()), ("source", source)])
}

pub(crate) fn document_block(media_type: &str, data: &str, title: Option<&str>) -> Value {
    let mut b = obj(vec![
        ("type", "document".into()),
        (
            "source",
            obj(vec![
                ("type", "base64".into()),
                ("media_type", media_type.into()),
                ("data", data.into()),
            ]),
        ),
    ]);
    if let Some(t) = title {
        b["title"] = t.into();
    }
    b
}

fn tool_use_block(c: &Value, at: &Path, id_map: Option<&IdMap>) -> Result<Value> {
    if !c.is_object() {
        return Err(Error::invalid(at, "expected a tool call object"));
    }
    let id = str_of(c, "id").ok_or_else(|| Error::invalid(&at.key("id"), "expected a string"))?;
    let id = restore_id(id, id_map);
    match str_of(c, "type").unwrap_or("function") {
        "function" => {
            let f = at.key("function");
            let func = c.get("function").unwrap_or(&Value::Null);
            let name = str_of(func, "name")
                .ok_or_else(|| Error::invalid(&f.key("name"), "expected a string"))?;
            let raw = str_of(func, "arguments")
                .ok_or_else(|| Error::invalid(&f.key("arguments"), "expected a string"))?;
            let (input, keep) = parse_arguments(raw, &f.key("arguments"))?;
            let mut b = obj(vec![
                ("type", "tool_use".into()),
                ("id", id.into()),
                ("name", name.into()),
                ("input", input),
            ]);
            if let Some(raw) = keep {
                b["openai"] = obj(vec![("arguments", raw.into())]);
            }
            Ok(b)
        }
        "custom" => {
            let cu = at.key("custom");
            let custom = c.get("custom").unwrap_or(&Value::Null);
            let name = str_of(custom, "name")
                .ok_or_else(|| Error::invalid(&cu.key("name"), "expected a string"))?;
            let input = str_of(custom, "input")
                .ok_or_else(|| Error::invalid(&cu.key("input"), "expected a string"))?;
            Ok(obj(vec![
                ("type", "tool_use".into()),
                ("id", id.into()),
                ("name", name.into()),
                ("input", obj(vec![("input", input.into())])),
                ("openai", obj(vec![("type", "custom".into())])),
            ]))
        }
        t => Err(Error::invalid(
            &at.key("type"),
            format!("expected 'function' or 'custom', got '{t}'"),
        )),
    }
}
