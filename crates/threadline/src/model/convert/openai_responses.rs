//! Neutral <-> OpenAI Responses API input items (`ResponseInputItem[]`).
//!
//! To:
//! - the system prompt becomes the first item, `{ type: 'message', role: 'system', content }`;
//! - a user message: each tool_result becomes a `function_call_output` item (`output`: a string
//!   stays a string, blocks become `input_text` / `input_image` / `input_file` parts), then one
//!   `message` item with the rest (`input_text`, `input_image` with a `data:` URL or URL,
//!   `input_file` with a `data:` URL or `file_url`); one plain text block goes as a string;
//! - an assistant message: item by item, in order: each text as an assistant `message` item
//!   (`content` a string; text that came from a Responses output message goes back as that
//!   message, `{ id, type: 'message', role: 'assistant', status, content: [output_text...] }`,
//!   consecutive blocks of one id in one item), each tool_use as a `function_call` item
//!   (`arguments` = the input as JSON text; the item's `id` / `status` restored when it came
//!   from the Responses API), each `openai_reasoning` block as the `reasoning` item it was,
//!   each `openai_item` as its item. Anthropic thinking cannot be expressed (warning).
//!
//! A system message inside the conversation goes in place as a `system` message item.
//!
//! From: the inverse (a system / developer message item after the first item: a neutral system
//! message in place); consecutive items of one role become one message (a response's reasoning,
//! message and function_call items: one assistant message). Item ids, statuses and other fields
//! with no neutral equivalent are kept under `openai`; items with no neutral equivalent as
//! `openai_reasoning` / `openai_item` blocks.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::ids::{IdMapper, IdTarget};
use super::openai_chat::{
    copy_openai, default_filename, document_block, document_source, image_block, image_url,
    refusal_block, warn_fields, warn_result_fields,
};
use super::{
    arguments_of, block_type, blocks_of, check_message_fields, codes, content_document, data_url,
    extras, is_empty_value, obj, openai_field, openai_of, parse_arguments, parse_data_url,
    push_blocks, restore_id, str_of, system_from_openai, system_message_content, text_block,
    tool_ids, Converted, FromConverted, IdMap, SystemAcc, Warnings,
};
use crate::error::{Error, Path, Result};

const TARGET: &str = "the OpenAI Responses API";

/// Fields of a message item (not of its parts), kept under a block's `openai`.
const ITEM_KEYS: &[&str] = &["id", "status", "phase"];

/// Neutral messages to Responses input items, the system prompt first.
pub fn to_openai_responses(messages: &[Value], system: Option<&Value>) -> Converted {
    let mut w = Warnings::new();
    let mut ids = IdMapper::new(IdTarget::OpenAiResponses, &tool_ids(messages));
    let custom = custom_ids(messages);
    let mut out = Vec::new();
    if let Some(s) = system.filter(|s| !s.is_null()) {
        let content = match s {
            Value::Array(blocks) => Value::Array(
                blocks
                    .iter()
                    .enumerate()
                    .map(|(j, b)| input_text(b, &format!("system[{j}]"), &mut w))
                    .collect(),
            ),
            other => other.clone(),
        };
        out.push(obj(vec![
            ("type", "message".into()),
            ("role", "system".into()),
            ("content", content),
        ]));
    }
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let before = out.len();
        match m.get("role").and_then(Value::as_str) {
            Some("assistant") => assistant_out(m, &at, &mut ids, &custom, &mut out, &mut w),
            Some("user") => user_out(m, &at, &mut ids, &custom, &mut out, &mut w),
            // In place, with the role the system prompt has.
            Some("system") => out.push(obj(vec![
                ("type", "message".into()),
                ("role", "system".into()),
                (
                    "content",
                    system_message_content(m, &at, &mut w, input_text),
                ),
            ])),
            _ => {
                w.add(
                    &at,
                    codes::INVALID_SKIPPED,
                    "not a message with role 'user', 'assistant' or 'system'",
                );
                continue;
            }
        }
        if out.len() == before {
            w.add(
                &at,
                codes::MESSAGE_DROPPED,
                format!("nothing in this message can be sent to {TARGET}; it is left out"),
            );
        }
        check_message_fields(m, &at, "OpenAI", &mut w);
    }
    Converted {
        system: None,
        messages: out,
        warnings: w.0,
        id_map: ids.reverse,
    }
}

/// Ids of custom tool calls (free-form input): their results are `custom_tool_call_output`.
fn custom_ids(messages: &[Value]) -> HashSet<String> {
    let mut out = HashSet::new();
    for m in messages {
        for b in blocks_of(m) {
            if block_type(&b) == "tool_use"
                && openai_field(&b, "type").and_then(Value::as_str) == Some("custom")
            {
                out.insert(str_of(&b, "id").unwrap_or_default().to_string());
            }
        }
    }
    out
}

/// The item-level `openai` fields of a block (`id`, `status`, `phase`).
fn item_fields(b: &Value) -> Map<String, Value> {
    let mut o = Map::new();
    if let Some(x) = openai_of(b) {
        for k in ITEM_KEYS {
            if let Some(v) = x.get(*k) {
                o.insert((*k).to_string(), v.clone());
            }
        }
    }
    o
}

fn item_id(b: &Value) -> Option<&str> {
    openai_field(b, "id").and_then(Value::as_str)
}

fn assistant_out(
    m: &Value,
    at: &str,
    ids: &mut IdMapper,
    custom: &HashSet<String>,
    out: &mut Vec<Value>,
    w: &mut Warnings,
) {
    // An open output message: consecutive text blocks of one Responses message item.
    let mut open: Option<(String, Value)> = None;
    let flush = |open: &mut Option<(String, Value)>, out: &mut Vec<Value>| {
        if let Some((_, item)) = open.take() {
            out.push(item);
        }
    };
    for (j, b) in blocks_of(m).iter().enumerate() {
        let p = format!("{at}.content[{j}]");
        match block_type(b) {
            "text" => {
                warn_fields(b, &["type", "text", "cache_control", "citations"], &p, w);
                let text = str_of(b, "text").unwrap_or_default();
                let refusal = openai_field(b, "refusal") == Some(&Value::Bool(true));
                match item_id(b) {
                    Some(id) => {
                        if open.as_ref().is_none_or(|(o, _)| o != id) {
                            flush(&mut open, out);
                            let f = item_fields(b);
                            let mut item = obj(vec![
                                ("id", id.into()),
                                ("type", "message".into()),
                                ("role", "assistant".into()),
                                (
                                    "status",
                                    f.get("status")
                                        .cloned()
                                        .unwrap_or_else(|| "completed".into()),
                                ),
                                ("content", Value::Array(Vec::new())),
                            ]);
                            if let Some(ph) = f.get("phase") {
                                item["phase"] = ph.clone();
                            }
                            open = Some((id.to_string(), item));
                        }
                        let part = if refusal {
                            obj(vec![("type", "refusal".into()), ("refusal", text.into())])
                        } else {
                            let mut part = obj(vec![
                                ("type", "output_text".into()),
                                ("text", text.into()),
                                (
                                    "annotations",
                                    openai_field(b, "annotations")
                                        .cloned()
                                        .unwrap_or_else(|| Value::Array(Vec::new())),
                                ),
                            ]);
                            copy_openai(b, &mut part, &["logprobs"]);
                            part
                        };
                        if let Some((_, item)) = open.as_mut() {
                            if let Some(Value::Array(c)) = item.get_mut("content") {
                                c.push(part);
                            }
                        }
                    }
                    None => {
                        flush(&mut open, out);
                        let mut item = obj(vec![
                            ("type", "message".into()),
                            ("role", "assistant".into()),
                            ("content", text.into()),
                        ]);
                        if let Some(ph) = openai_field(b, "phase") {
                            item["phase"] = ph.clone();
                        }
                        out.push(item);
                    }
                }
            }
            "tool_use" => {
                flush(&mut open, out);
                warn_fields(
                    b,
                    &["type", "id", "name", "input", "caller", "cache_control"],
                    &p,
                    w,
                );
                out.push(call_item(b, ids, custom));
            }
            "openai_reasoning" => {
                flush(&mut open, out);
                let mut item = b.clone();
                item["type"] = "reasoning".into();
                out.push(item);
            }
            "openai_item" => {
                flush(&mut open, out);
                out.extend(passthrough_item(b, &p, w));
            }
            "thinking" | "redacted_thinking" => w.add(
                &p,
                codes::THINKING_DROPPED,
                format!(
                    "{} cannot be sent to {TARGET} (its signature is Anthropic's)",
                    block_type(b)
                ),
            ),
            t => w.add(
                &p,
                codes::BLOCK_DROPPED,
                format!("a '{t}' block has no place in {TARGET}"),
            ),
        }
    }
    flush(&mut open, out);
}

fn call_item(b: &Value, ids: &mut IdMapper, custom: &HashSet<String>) -> Value {
    let original = str_of(b, "id").unwrap_or_default();
    let call_id = ids.map(original);
    let name = str_of(b, "name").unwrap_or_default();
    let mut item = Map::new();
    let is_custom = custom.contains(original);
    item.insert(
        "type".into(),
        if is_custom {
            "custom_tool_call"
        } else {
            "function_call"
        }
        .into(),
    );
    if let Some(id) = openai_field(b, "id") {
        item.insert("id".into(), id.clone());
    }
    item.insert("call_id".into(), call_id.into());
    item.insert("name".into(), name.into());
    if is_custom {
        let input = match b.get("input").and_then(|i| i.get("input")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        item.insert("input".into(), input.into());
    } else {
        item.insert("arguments".into(), arguments_of(b).into());
    }
    if let Some(o) = openai_of(b) {
        for (k, v) in o {
            if !matches!(k.as_str(), "id" | "arguments" | "type") && !item.contains_key(k) {
                item.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(item)
}

fn user_out(
    m: &Value,
    at: &str,
    ids: &mut IdMapper,
    custom: &HashSet<String>,
    out: &mut Vec<Value>,
    w: &mut Warnings,
) {
    // The open user message item: its parts and the Responses id they came with (if any).
    let mut parts: Vec<Value> = Vec::new();
    let mut group: Option<Option<String>> = None;
    let mut fields = Map::new();
    let flush = |parts: &mut Vec<Value>,
                 group: &mut Option<Option<String>>,
                 fields: &mut Map<String, Value>,
                 out: &mut Vec<Value>| {
        if group.take().is_some() && !parts.is_empty() {
            let mut item = obj(vec![("type", "message".into()), ("role", "user".into())]);
            for (k, v) in std::mem::take(fields) {
                item[k.as_str()] = v;
            }
            item["content"] = content_of(std::mem::take(parts));
            out.push(item);
        }
        parts.clear();
        fields.clear();
    };
    for (j, b) in blocks_of(m).iter().enumerate() {
        let p = format!("{at}.content[{j}]");
        match block_type(b) {
            "tool_result" => {
                flush(&mut parts, &mut group, &mut fields, out);
                out.push(output_item(b, &p, ids, custom, w));
            }
            "openai_item" => {
                flush(&mut parts, &mut group, &mut fields, out);
                out.extend(passthrough_item(b, &p, w));
            }
            _ => {
                let new = content_parts(b, &p, w);
                if new.is_empty() {
                    continue;
                }
                let id = item_id(b).map(str::to_string);
                if group.as_ref() != Some(&id) {
                    flush(&mut parts, &mut group, &mut fields, out);
                    group = Some(id.clone());
                    if id.is_some() {
                        fields = item_fields(b);
                    }
                }
                parts.extend(new);
            }
        }
    }
    flush(&mut parts, &mut group, &mut fields, out);
}

/// One plain input_text part as a string, else the parts.
fn content_of(parts: Vec<Value>) -> Value {
    if parts.len() == 1 {
        let p = &parts[0];
        if block_type(p) == "input_text" && p.as_object().is_some_and(|o| o.len() == 2) {
            if let Some(t) = str_of(p, "text") {
                return Value::String(t.to_string());
            }
        }
    }
    Value::Array(parts)
}

fn output_item(
    b: &Value,
    at: &str,
    ids: &mut IdMapper,
    custom: &HashSet<String>,
    w: &mut Warnings,
) -> Value {
    warn_result_fields(b, at, w);
    let original = str_of(b, "tool_use_id").unwrap_or_default();
    let output = match b.get("content") {
        Some(Value::String(s)) => Value::String(s.clone()),
        Some(Value::Array(inner)) => {
            let mut parts = Vec::new();
            for (k, x) in inner.iter().enumerate() {
                parts.extend(content_parts(x, &format!("{at}.content[{k}]"), w));
            }
            Value::Array(parts)
        }
        _ => Value::String(String::new()),
    };
    let mut item = Map::new();
    let ty = if custom.contains(original) {
        "custom_tool_call_output"
    } else {
        "function_call_output"
    };
    item.insert("type".into(), ty.into());
    if let Some(id) = openai_field(b, "id") {
        item.insert("id".into(), id.clone());
    }
    item.insert("call_id".into(), ids.map(original).into());
    item.insert("output".into(), output);
    if let Some(o) = openai_of(b) {
        for (k, v) in o {
            if k != "id" && !item.contains_key(k) {
                item.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(item)
}

fn input_text(b: &Value, at: &str, w: &mut Warnings) -> Value {
    warn_fields(b, &["type", "text", "cache_control", "citations"], at, w);
    let mut p = obj(vec![
        ("type", "input_text".into()),
        ("text", str_of(b, "text").unwrap_or_default().into()),
    ]);
    copy_openai(b, &mut p, &["prompt_cache_breakpoint"]);
    p
}

fn input_image(b: &Value, at: &str, w: &mut Warnings) -> Option<Value> {
    warn_fields(b, &["type", "source", "cache_control"], at, w);
    let url = image_url(b, at, w)?;
    let detail = openai_field(b, "detail")
        .cloned()
        .unwrap_or_else(|| "auto".into());
    let mut p = obj(vec![
        ("type", "input_image".into()),
        ("detail", detail),
        ("image_url", url.into()),
    ]);
    copy_openai(b, &mut p, &["prompt_cache_breakpoint"]);
    Some(p)
}

/// The item an `openai_item` block holds, as it goes back. Not an item (no object with a type), or
/// one the neutral model has its own blocks for (a message, a tool call or its output: sent
/// alone it would be a call without its output or the reverse): left out, with a warning.
fn passthrough_item(b: &Value, at: &str, w: &mut Warnings) -> Option<Value> {
    let item = b.get("item").filter(|i| i.is_object());
    let ty = item.and_then(|i| i.get("type")).and_then(Value::as_str);
    match ty {
        Some(
            t @ ("message"
            | "function_call"
            | "function_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"),
        ) => {
            w.add(
                at,
                codes::INVALID_SKIPPED,
                format!("an openai_item block holding a '{t}' item (a message or tool block stands for it); left out"),
            );
            None
        }
        Some(_) => item.cloned(),
        None => {
            w.add(
                at,
                codes::INVALID_SKIPPED,
                "an openai_item block without an item object with a type; left out",
            );
            None
        }
    }
}

/// A neutral content block (not a tool result) as Responses input parts.
fn content_parts(b: &Value, at: &str, w: &mut Warnings) -> Vec<Value> {
    match block_type(b) {
        "text" => vec![input_text(b, at, w)],
        "image" => input_image(b, at, w).into_iter().collect(),
        "document" => document_parts(b, at, w),
        "openai_part"
            if b.get("part").is_some_and(|p| {
                matches!(block_type(p), "input_text" | "input_image" | "input_file")
            }) =>
        {
            vec![b.get("part").cloned().unwrap_or_default()]
        }
        t => {
            w.add(
                at,
                codes::BLOCK_DROPPED,
                format!("a '{t}' block has no place in {TARGET} input"),
            );
            Vec::new()
        }
    }
}

fn document_parts(b: &Value, at: &str, w: &mut Warnings) -> Vec<Value> {
    let src = document_source(b, at, w);
    let file = |pairs: Vec<(&str, Value)>| {
        let mut p = obj(vec![("type", "input_file".into())]);
        for (k, v) in pairs {
            p[k] = v;
        }
        copy_openai(b, &mut p, &["detail", "prompt_cache_breakpoint"]);
        p
    };
    match str_of(src, "type") {
        Some("base64") => {
            let mt = str_of(src, "media_type").unwrap_or("application/pdf");
            let filename = str_of(b, "title")
                .map(str::to_string)
                .unwrap_or_else(|| default_filename(mt));
            vec![file(vec![
                ("filename", filename.into()),
                (
                    "file_data",
                    data_url(mt, str_of(src, "data").unwrap_or_default()).into(),
                ),
            ])]
        }
        Some("url") => {
            let mut pairs = Vec::new();
            if let Some(t) = str_of(b, "title") {
                pairs.push(("filename", Value::from(t)));
            }
            pairs.push(("file_url", str_of(src, "url").unwrap_or_default().into()));
            vec![file(pairs)]
        }
        Some("text") => {
            w.add(
                at,
                codes::DOCUMENT_AS_TEXT,
                "a plain-text document is sent as an input_text part",
            );
            vec![obj(vec![
                ("type", "input_text".into()),
                ("text", str_of(src, "data").unwrap_or_default().into()),
            ])]
        }
        Some("content") => content_document(src, at, w, "input_text", input_text, input_image),
        t => {
            w.add(
                at,
                codes::UNSUPPORTED_SOURCE,
                format!(
                    "a document with a '{}' source cannot be sent to OpenAI (an Anthropic Files API id)",
                    t.unwrap_or("?")
                ),
            );
            Vec::new()
        }
    }
}

/// Responses items (input items, or a response's `output`) to neutral messages. `id_map` (from
/// `to_openai_responses`) restores the original tool-call ids.
pub fn from_openai_responses(items: &[Value], id_map: Option<&IdMap>) -> Result<FromConverted> {
    run(items, id_map).map_err(|e| e.during("fromOpenAIResponses"))
}

fn run(items: &[Value], id_map: Option<&IdMap>) -> Result<FromConverted> {
    let w = Warnings::new();
    let mut sys = SystemAcc::default();
    let mut out: Vec<Value> = Vec::new();
    let root = Path::root().key("items");
    for (i, item) in items.iter().enumerate() {
        let at = root.index(i);
        if !item.is_object() {
            return Err(Error::invalid(&at, "expected an item object"));
        }
        let ty = match item.get("type") {
            Some(Value::String(t)) => t.as_str(),
            None if item.get("role").is_some() => "message",
            None | Some(Value::Null) if item.get("id").is_some_and(Value::is_string) => {
                "item_reference"
            }
            _ => return Err(Error::invalid(&at.key("type"), "expected a string")),
        };
        match ty {
            "message" => {
                let role = str_of(item, "role")
                    .ok_or_else(|| Error::invalid(&at.key("role"), "expected a string"))?;
                let content = item.get("content").unwrap_or(&Value::Null);
                let cpath = at.key("content");
                match role {
                    "system" | "developer" => {
                        let text_types = ["input_text", "output_text", "text"];
                        let content = system_from_openai(content, &cpath, &text_types)?;
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
                    }
                    "user" | "assistant" => {
                        let mut item_extra = extras(item, &["type", "role", "content"]);
                        item_extra.retain(|_, v| !is_empty_value(v));
                        let blocks = match content {
                            Value::String(s) => vec![with_openai(text_block(s), item_extra)],
                            Value::Array(parts) => {
                                let mut blocks = Vec::new();
                                for (j, p) in parts.iter().enumerate() {
                                    let b = part_block(p, &cpath.index(j))?;
                                    blocks.push(with_item(b, &item_extra));
                                }
                                blocks
                            }
                            _ => {
                                return Err(Error::invalid(
                                    &cpath,
                                    "expected a string or an array of content parts",
                                ))
                            }
                        };
                        push_blocks(&mut out, role, blocks);
                    }
                    r => {
                        return Err(Error::invalid(
                            &at.key("role"),
                            format!(
                                "expected 'system', 'developer', 'user' or 'assistant', got '{r}'"
                            ),
                        ))
                    }
                }
            }
            "function_call" | "custom_tool_call" => {
                let call_id = str_of(item, "call_id")
                    .ok_or_else(|| Error::invalid(&at.key("call_id"), "expected a string"))?;
                let name = str_of(item, "name")
                    .ok_or_else(|| Error::invalid(&at.key("name"), "expected a string"))?;
                let mut extra = extras(item, &["type", "call_id", "name", "arguments", "input"]);
                let input = if ty == "function_call" {
                    let raw = str_of(item, "arguments")
                        .ok_or_else(|| Error::invalid(&at.key("arguments"), "expected a string"))?;
                    let (input, keep) = parse_arguments(raw, &at.key("arguments"))?;
                    if let Some(raw) = keep {
                        extra.insert("arguments".into(), raw.into());
                    }
                    input
                } else {
                    let input = str_of(item, "input")
                        .ok_or_else(|| Error::invalid(&at.key("input"), "expected a string"))?;
                    extra.insert("type".into(), "custom".into());
                    obj(vec![("input", input.into())])
                };
                let b = obj(vec![
                    ("type", "tool_use".into()),
                    ("id", restore_id(call_id, id_map).into()),
                    ("name", name.into()),
                    ("input", input),
                ]);
                push_blocks(&mut out, "assistant", vec![with_openai(b, extra)]);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call_id = str_of(item, "call_id")
                    .ok_or_else(|| Error::invalid(&at.key("call_id"), "expected a string"))?;
                let opath = at.key("output");
                let content = match item.get("output") {
                    Some(Value::String(s)) => Value::String(s.clone()),
                    Some(Value::Array(parts)) => {
                        let mut blocks = Vec::new();
                        for (j, p) in parts.iter().enumerate() {
                            blocks.push(part_block(p, &opath.index(j))?);
                        }
                        Value::Array(blocks)
                    }
                    _ => {
                        return Err(Error::invalid(
                            &opath,
                            "expected a string or an array of content parts",
                        ))
                    }
                };
                let b = obj(vec![
                    ("type", "tool_result".into()),
                    ("tool_use_id", restore_id(call_id, id_map).into()),
                    ("content", content),
                ]);
                let extra = extras(item, &["type", "call_id", "output"]);
                push_blocks(&mut out, "user", vec![with_openai(b, extra)]);
            }
            "reasoning" => {
                let mut b = item.clone();
                b["type"] = "openai_reasoning".into();
                push_blocks(&mut out, "assistant", vec![b]);
            }
            t => {
                let role = if t.ends_with("_output") || t == "mcp_approval_response" {
                    "user"
                } else {
                    "assistant"
                };
                let b = obj(vec![("type", "openai_item".into()), ("item", item.clone())]);
                push_blocks(&mut out, role, vec![b]);
            }
        }
    }
    Ok(FromConverted {
        system: sys.finish(),
        messages: out,
        warnings: w.0,
    })
}

fn with_openai(mut b: Value, extra: Map<String, Value>) -> Value {
    if !extra.is_empty() {
        b["openai"] = Value::Object(extra);
    }
    b
}

/// Adds the item's fields to a block's `openai` (before the part's own).
fn with_item(mut b: Value, item_extra: &Map<String, Value>) -> Value {
    if item_extra.is_empty() || block_type(&b).starts_with("openai_") {
        return b;
    }
    let mut o = item_extra.clone();
    if let Some(Value::Object(own)) = b.get("openai") {
        for (k, v) in own {
            o.insert(k.clone(), v.clone());
        }
    }
    b["openai"] = Value::Object(o);
    b
}

fn opaque_part(p: &Value) -> Value {
    obj(vec![("type", "openai_part".into()), ("part", p.clone())])
}

/// A Responses content part as a neutral block; its extra fields under `openai`.
fn part_block(p: &Value, at: &Path) -> Result<Value> {
    if !p.is_object() {
        return Err(Error::invalid(at, "expected a content part object"));
    }
    let nonempty = |skip: &[&str]| {
        let mut e = extras(p, skip);
        e.retain(|_, v| !is_empty_value(v));
        e
    };
    match block_type(p) {
        "input_text" | "output_text" | "text" => {
            let text = str_of(p, "text")
                .ok_or_else(|| Error::invalid(&at.key("text"), "expected a string"))?;
            Ok(with_openai(text_block(text), nonempty(&["type", "text"])))
        }
        "refusal" => {
            let s = str_of(p, "refusal")
                .ok_or_else(|| Error::invalid(&at.key("refusal"), "expected a string"))?;
            Ok(refusal_block(s))
        }
        "input_image" => match str_of(p, "image_url") {
            Some(url) if str_of(p, "file_id").is_none() => {
                let mut e = nonempty(&["type", "image_url"]);
                if e.get("detail").and_then(Value::as_str) == Some("auto") {
                    e.shift_remove("detail");
                }
                Ok(with_openai(image_block(url), e))
            }
            _ => Ok(opaque_part(p)),
        },
        "input_file" if str_of(p, "file_id").is_none() => {
            let title = str_of(p, "filename");
            if let Some(data) = str_of(p, "file_data") {
                let (mt, data) = parse_data_url(data)
                    .unwrap_or_else(|| ("application/pdf".into(), data.to_string()));
                let title = title.filter(|n| *n != default_filename(&mt));
                Ok(with_openai(
                    document_block(&mt, &data, title),
                    nonempty(&["type", "file_data", "filename"]),
                ))
            } else if let Some(url) = str_of(p, "file_url") {
                let mut b = obj(vec![
                    ("type", "document".into()),
                    (
                        "source",
                        obj(vec![("type", "url".into()), ("url", url.into())]),
                    ),
                ]);
                if let Some(t) = title {
                    b["title"] = t.into();
                }
                Ok(with_openai(b, nonempty(&["type", "file_url", "filename"])))
            } else {
                Ok(opaque_part(p))
            }
        }
        "" => Err(Error::invalid(&at.key("type"), "expected a string")),
        _ => Ok(opaque_part(p)),
    }
}
