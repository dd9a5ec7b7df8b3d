//! Provider converters: the neutral message model (the Anthropic Messages API wire shape, as the
//! session stores it) to and from the request and response shapes of the Anthropic Messages API,
//! OpenAI Chat Completions and the OpenAI Responses API.
//!
//! Pure functions over `serde_json::Value`. What both sides can express survives a round trip
//! (`from_x(to_x(m))` gives `m` back); what the target cannot express is reported in
//! [`Warning`]s, never dropped silently. Tool-call ids the target does not accept (length,
//! characters) are mapped deterministically ([`Converted::id_map`]) and mapped back by the `from_*`
//! functions given that map.
//!
//! Provider data with no neutral equivalent is kept so that it goes back to the provider that
//! wrote it, and only there:
//! - a field `openai` on a block or a message holds what an OpenAI item, part or message had
//!   besides what the block itself says (Responses item `id`s like `msg_...` / `fc_...`, `status`,
//!   `phase`, output-text `annotations`, an image's `detail`, the exact `arguments` text of a call,
//!   a chat message's `name`, ...);
//! - `{ type: 'openai_reasoning', ... }` is a Responses `reasoning` item (its fields as given,
//!   `type` renamed), passed back by `to_openai_responses` only;
//! - `{ type: 'openai_item', item }` is any other Responses item (web search, MCP, custom tool
//!   calls, ...), `{ type: 'openai_part', part }` a content part with no neutral block (audio,
//!   Files API ids), each passed back only to the API that has it.
//!
//! `to_anthropic` never sends these: it strips every `openai` field and leaves out the `openai_*`
//! blocks (with a warning).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, Path, Result};

mod anthropic;
mod check;
mod ids;
mod openai_chat;
mod openai_responses;

pub use anthropic::{from_anthropic, to_anthropic};
pub use check::{validate_openai_chat, validate_openai_responses};
pub use ids::{accepts_id, IdTarget};
pub use openai_chat::{from_openai_chat, to_openai_chat};
pub use openai_responses::{from_openai_responses, to_openai_responses};

/// Target id -> original id, for the ids a conversion had to change.
pub type IdMap = BTreeMap<String, String>;

/// Something the target cannot express, said instead of dropped silently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    /// Where in the input, e.g. `messages[3].content[1]` or `items[4]`.
    pub path: String,
    /// Stable code: see [`codes`].
    pub code: String,
    pub message: String,
}

/// The stable warning codes.
pub mod codes {
    /// thinking / redacted_thinking to an OpenAI target (the signature is Anthropic's).
    pub const THINKING_DROPPED: &str = "thinking_dropped";
    /// an OpenAI reasoning item to a target other than the Responses API.
    pub const REASONING_DROPPED: &str = "reasoning_dropped";
    /// a block the target has no place for (server tools, MCP, search results, another API's
    /// items or parts, unknown types).
    pub const BLOCK_DROPPED: &str = "block_dropped";
    /// an image or document source the target cannot take (Files API ids, a document URL for
    /// Chat Completions).
    pub const UNSUPPORTED_SOURCE: &str = "unsupported_source";
    /// a plain-text or content document sent as text.
    pub const DOCUMENT_AS_TEXT: &str = "document_as_text";
    /// Chat Completions: images / documents of a tool result moved to a user message after the
    /// tool messages (a tool message takes text only).
    pub const TOOL_RESULT_CONTENT_MOVED: &str = "tool_result_content_moved";
    /// `is_error: true` on a tool result: OpenAI has no such flag; the content is sent as it is.
    pub const IS_ERROR_DROPPED: &str = "is_error_dropped";
    /// a prompt-cache breakpoint (`cache_control`) OpenAI cannot take.
    pub const CACHE_CONTROL_DROPPED: &str = "cache_control_dropped";
    /// citations on a text block, or a document's citation settings.
    pub const CITATIONS_DROPPED: &str = "citations_dropped";
    /// another field the target cannot carry (a document's `context`, a non-direct `caller`,
    /// an unknown message field, ...).
    pub const FIELD_DROPPED: &str = "field_dropped";
    /// Chat Completions: text after a tool call goes before the calls (content, then tool_calls).
    pub const REORDERED: &str = "reordered";
    /// a message left with nothing the target can take.
    pub const MESSAGE_DROPPED: &str = "message_dropped";
    /// from_*: a system / developer message after the first message, folded into the system
    /// prompt. (No longer given: such a message stays in place, a neutral `system` message.)
    pub const SYSTEM_MOVED: &str = "system_moved";
    /// input that is not a valid neutral message or block, left out (only when the input was not
    /// checked with [`super::check_neutral`] first).
    pub const INVALID_SKIPPED: &str = "invalid_skipped";
}

/// The result of a `to_*` conversion.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Converted {
    /// The system prompt as the target takes it beside the messages (Anthropic only; the OpenAI
    /// targets put it in the list as the first message / item).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<Value>,
    /// Messages (Anthropic, Chat Completions) or input items (Responses).
    pub messages: Vec<Value>,
    pub warnings: Vec<Warning>,
    /// Target id -> original id, for every tool-call id that was changed.
    pub id_map: IdMap,
}

/// The result of a `from_*` conversion: neutral messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FromConverted {
    /// A string, or text blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<Value>,
    pub messages: Vec<Value>,
    pub warnings: Vec<Warning>,
}

// ----- shared helpers -----

pub(crate) struct Warnings(pub Vec<Warning>);

impl Warnings {
    pub fn new() -> Self {
        Warnings(Vec::new())
    }
    pub fn add(&mut self, path: impl Into<String>, code: &str, message: impl Into<String>) {
        self.0.push(Warning {
            path: path.into(),
            code: code.to_string(),
            message: message.into(),
        });
    }
}

pub(crate) fn block_type(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or_default()
}

pub(crate) fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// A neutral message's blocks; a string content as one text block.
pub(crate) fn blocks_of(m: &Value) -> Vec<Value> {
    match m.get("content") {
        Some(Value::String(s)) => vec![text_block(s)],
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}

pub(crate) fn text_block(s: &str) -> Value {
    let mut o = Map::new();
    o.insert("type".into(), "text".into());
    o.insert("text".into(), s.into());
    Value::Object(o)
}

/// A document whose source is content blocks, for an OpenAI API: its text and image blocks as
/// that API's parts (`text_type` for a string source), anything else said in a warning.
pub(crate) fn content_document(
    src: &Value,
    at: &str,
    w: &mut Warnings,
    text_type: &str,
    text: fn(&Value, &str, &mut Warnings) -> Value,
    image: fn(&Value, &str, &mut Warnings) -> Option<Value>,
) -> Vec<Value> {
    w.add(
        at,
        codes::DOCUMENT_AS_TEXT,
        "a content document is sent as its text and image parts",
    );
    match src.get("content") {
        Some(Value::String(s)) => vec![obj(vec![
            ("type", text_type.into()),
            ("text", s.clone().into()),
        ])],
        Some(Value::Array(inner)) => {
            let mut out = Vec::new();
            for (k, x) in inner.iter().enumerate() {
                let p = format!("{at}.source.content[{k}]");
                match x.get("type").and_then(Value::as_str).unwrap_or_default() {
                    "text" => out.push(text(x, &p, w)),
                    "image" => out.extend(image(x, &p, w)),
                    t => w.add(
                        &p,
                        codes::BLOCK_DROPPED,
                        format!("a '{t}' block of a content document is not sent"),
                    ),
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

pub(crate) fn obj(pairs: Vec<(&str, Value)>) -> Value {
    let mut o = Map::new();
    for (k, v) in pairs {
        o.insert(k.to_string(), v);
    }
    Value::Object(o)
}

/// The `openai` object of a block or message, if any.
pub(crate) fn openai_of(v: &Value) -> Option<&Map<String, Value>> {
    v.get("openai").and_then(Value::as_object)
}

/// A field of the `openai` object.
pub(crate) fn openai_field<'a>(v: &'a Value, k: &str) -> Option<&'a Value> {
    openai_of(v).and_then(|o| o.get(k))
}

/// Null, or an empty array / object / string: carries nothing.
pub(crate) fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// `data:<media type>;base64,<data>`.
pub(crate) fn data_url(media_type: &str, data: &str) -> String {
    format!("data:{media_type};base64,{data}")
}

/// The media type and data of a base64 data URL.
pub(crate) fn parse_data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let media_type = head.strip_suffix(";base64")?;
    Some((media_type.to_string(), data.to_string()))
}

/// Message fields of an Anthropic response that are not part of a request: left out by every
/// `to_*` without a warning (they describe the response, not the conversation).
pub(crate) const RESPONSE_METADATA: &[&str] = &[
    "id",
    "type",
    "model",
    "stop_reason",
    "stop_sequence",
    "stop_details",
    "usage",
    "container",
    "diagnostics",
    "context_management",
];

/// Warnings for message-level fields a target does not take: response metadata and `openai`
/// are left out silently, anything else is reported.
pub(crate) fn check_message_fields(m: &Value, at: &str, target: &str, w: &mut Warnings) {
    if let Some(o) = m.as_object() {
        for k in o.keys() {
            if k == "role"
                || k == "content"
                || k == "openai"
                || RESPONSE_METADATA.contains(&k.as_str())
            {
                continue;
            }
            w.add(
                at,
                codes::FIELD_DROPPED,
                format!("message field '{k}' is not sent to {target}"),
            );
        }
    }
}

/// Arguments text of a tool_use for OpenAI: the exact text it came with (`openai.arguments`)
/// when the input is still what that text says, else the input as compact JSON.
pub(crate) fn arguments_of(b: &Value) -> String {
    let input = b
        .get("input")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(raw) = openai_field(b, "arguments").and_then(Value::as_str) {
        if raw.trim().is_empty() && input.as_object().is_some_and(Map::is_empty) {
            return raw.to_string();
        }
        if let Ok(parsed) = serde_json::from_str::<Value>(raw) {
            if parsed == input && same_order(&parsed, &input) {
                return raw.to_string();
            }
        }
    }
    serde_json::to_string(&input).unwrap_or_else(|_| "{}".into())
}

/// Key order too (serde_json's equality on objects ignores it).
fn same_order(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((ka, va), (kb, vb))| ka == kb && same_order(va, vb))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_order(p, q))
        }
        _ => true,
    }
}

/// The input of a tool call from its OpenAI `arguments` text, and the text itself when it is not
/// what the input re-serialises to (kept as `openai.arguments` so it goes back byte-identical).
pub(crate) fn parse_arguments(raw: &str, path: &Path) -> Result<(Value, Option<String>)> {
    if raw.trim().is_empty() {
        return Ok((Value::Object(Map::new()), Some(raw.to_string())));
    }
    let v: Value = serde_json::from_str(raw).map_err(|e| {
        let reason = e.to_string();
        let reason = reason
            .split(" at line ")
            .next()
            .unwrap_or(&reason)
            .to_string();
        Error::invalid(path, format!("not valid JSON ({reason})"))
    })?;
    if !v.is_object() {
        return Err(Error::invalid(
            path,
            "expected a JSON object (a tool's input is an object)",
        ));
    }
    let canonical = serde_json::to_string(&v).unwrap_or_default();
    let keep = (canonical != raw).then(|| raw.to_string());
    Ok((v, keep))
}

/// Appends `blocks` as a message of `role`, merged into the last message when it has the same
/// role (tool results stay first in a user message).
pub(crate) fn push_blocks(out: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if let Some(last) = out.last_mut() {
        if last.get("role").and_then(Value::as_str) == Some(role) {
            if let Some(Value::Array(c)) = last.get_mut("content") {
                for b in blocks {
                    if block_type(&b) == "tool_result" {
                        let at = c
                            .iter()
                            .position(|x| block_type(x) != "tool_result")
                            .unwrap_or(c.len());
                        c.insert(at, b);
                    } else {
                        c.push(b);
                    }
                }
                return;
            }
        }
    }
    out.push(obj(vec![
        ("role", role.into()),
        ("content", Value::Array(blocks)),
    ]));
}

/// Sets message-level `openai` fields on the last message (first writer wins; a conflict is a
/// warning).
pub(crate) fn merge_message_openai(
    out: &mut [Value],
    extra: Map<String, Value>,
    at: &str,
    w: &mut Warnings,
) {
    if extra.is_empty() {
        return;
    }
    let Some(Value::Object(last)) = out.last_mut() else {
        return;
    };
    let slot = last
        .entry("openai")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(o) = slot {
        for (k, v) in extra {
            match o.get(&k) {
                Some(old) if *old != v => w.add(
                    at,
                    codes::FIELD_DROPPED,
                    format!(
                        "'{k}' differs from the one of the message it is merged into; the first is kept"
                    ),
                ),
                Some(_) => {}
                None => {
                    o.insert(k, v);
                }
            }
        }
    }
}

/// Collects system prompts: a single string stays a string, anything else becomes text blocks.
#[derive(Default)]
pub(crate) struct SystemAcc {
    parts: Vec<Value>,
}

impl SystemAcc {
    pub fn push(&mut self, v: Value) {
        self.parts.push(v);
    }
    pub fn finish(self) -> Option<Value> {
        if self.parts.is_empty() {
            return None;
        }
        if self.parts.len() == 1 {
            return self.parts.into_iter().next();
        }
        let mut blocks = Vec::new();
        for p in self.parts {
            match p {
                Value::String(s) => blocks.push(text_block(&s)),
                Value::Array(a) => blocks.extend(a),
                _ => {}
            }
        }
        Some(Value::Array(blocks))
    }
}

/// Text parts of a system content (string or text parts): the neutral text blocks, with any
/// extra part fields under `openai`.
pub(crate) fn system_from_openai(
    content: &Value,
    path: &Path,
    text_types: &[&str],
) -> Result<Value> {
    match content {
        Value::String(s) => Ok(Value::String(s.clone())),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                let at = path.index(j);
                if !text_types.contains(&block_type(p)) {
                    return Err(Error::invalid(&at, "expected a text part"));
                }
                let text = str_of(p, "text")
                    .ok_or_else(|| Error::invalid(&at.key("text"), "expected a string"))?;
                let mut b = text_block(text);
                let extra = extras(p, &["type", "text"]);
                if !extra.is_empty() {
                    b["openai"] = Value::Object(extra);
                }
                out.push(b);
            }
            Ok(Value::Array(out))
        }
        _ => Err(Error::invalid(
            path,
            "expected a string or an array of text parts",
        )),
    }
}

/// A neutral system message's content for an OpenAI API: a string stays a string, text blocks
/// become that API's text parts (`part`).
pub(crate) fn system_message_content(
    m: &Value,
    at: &str,
    w: &mut Warnings,
    part: fn(&Value, &str, &mut Warnings) -> Value,
) -> Value {
    match m.get("content") {
        Some(Value::Array(blocks)) => Value::Array(
            blocks
                .iter()
                .enumerate()
                .map(|(j, b)| part(b, &format!("{at}.content[{j}]"), w))
                .collect(),
        ),
        Some(other) => other.clone(),
        None => Value::String(String::new()),
    }
}

/// The fields of an object other than `skip`, leaving out null ones.
pub(crate) fn extras(v: &Value, skip: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(o) = v.as_object() {
        for (k, x) in o {
            if !skip.contains(&k.as_str()) && !x.is_null() {
                out.insert(k.clone(), x.clone());
            }
        }
    }
    out
}

/// Checks that `messages` (and `system`) are neutral messages the `to_*` functions can read:
/// objects with role 'user' or 'assistant' and content a string or blocks, or role 'system' and
/// content a string or text blocks, each block an object
/// with a string `type` and the fields its type requires. Errors name the path
/// (`messages[2].content[0].tool_use_id: expected a string`).
pub fn check_neutral(messages: &[Value], system: Option<&Value>) -> Result<()> {
    if let Some(s) = system {
        check_system(s, &Path::root().key("system"))?;
    }
    let root = Path::root().key("messages");
    for (i, m) in messages.iter().enumerate() {
        let at = root.index(i);
        if !m.is_object() {
            return Err(Error::invalid(&at, "expected a message object"));
        }
        match m.get("role").and_then(Value::as_str) {
            Some("user" | "assistant") => {}
            Some("system") => {
                let content = m.get("content").unwrap_or(&Value::Null);
                check_system(content, &at.key("content"))?;
                if content.is_null() {
                    return Err(Error::invalid(
                        &at.key("content"),
                        "expected a string or an array of text blocks",
                    ));
                }
                continue;
            }
            Some(r) => {
                return Err(Error::invalid(
                    &at.key("role"),
                    format!("expected 'user', 'assistant' or 'system', got '{r}'"),
                ))
            }
            None => {
                return Err(Error::invalid(
                    &at.key("role"),
                    "expected 'user', 'assistant' or 'system'",
                ))
            }
        }
        match m.get("content") {
            Some(Value::String(_)) => {}
            Some(Value::Array(blocks)) => check_blocks(blocks, &at.key("content"))?,
            _ => {
                return Err(Error::invalid(
                    &at.key("content"),
                    "expected a string or an array of blocks",
                ))
            }
        }
    }
    Ok(())
}

fn check_system(s: &Value, path: &Path) -> Result<()> {
    match s {
        Value::Null | Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (j, b) in blocks.iter().enumerate() {
                let at = path.index(j);
                if block_type(b) != "text" {
                    return Err(Error::invalid(&at, "expected a text block"));
                }
                if str_of(b, "text").is_none() {
                    return Err(Error::invalid(&at.key("text"), "expected a string"));
                }
            }
            Ok(())
        }
        _ => Err(Error::invalid(
            path,
            "expected a string or an array of text blocks",
        )),
    }
}

pub(crate) fn check_blocks(blocks: &[Value], path: &Path) -> Result<()> {
    for (j, b) in blocks.iter().enumerate() {
        let at = path.index(j);
        if !b.is_object() {
            return Err(Error::invalid(&at, "expected a block object"));
        }
        let Some(ty) = b.get("type").and_then(Value::as_str) else {
            return Err(Error::invalid(&at.key("type"), "expected a string"));
        };
        let need_str = |k: &str| -> Result<()> {
            if str_of(b, k).is_none() {
                return Err(Error::invalid(&at.key(k), "expected a string"));
            }
            Ok(())
        };
        let need_obj = |k: &str| -> Result<()> {
            match b.get(k) {
                Some(Value::Object(o)) if o.get("type").is_some_and(Value::is_string) => Ok(()),
                _ => Err(Error::invalid(
                    &at.key(k),
                    "expected an object with a string `type`",
                )),
            }
        };
        match ty {
            "text" => need_str("text")?,
            "thinking" => need_str("thinking")?,
            "redacted_thinking" => need_str("data")?,
            "tool_use" => {
                need_str("id")?;
                need_str("name")?;
            }
            "tool_result" => {
                need_str("tool_use_id")?;
                match b.get("content") {
                    None | Some(Value::Null | Value::String(_)) => {}
                    Some(Value::Array(inner)) => check_blocks(inner, &at.key("content"))?,
                    Some(_) => {
                        return Err(Error::invalid(
                            &at.key("content"),
                            "expected a string or an array of blocks",
                        ))
                    }
                }
            }
            "image" | "document" => need_obj("source")?,
            _ => {}
        }
    }
    Ok(())
}

/// The tool-call ids of neutral messages, in order of appearance (tool_use ids and tool_result
/// tool_use_ids).
pub(crate) fn tool_ids(messages: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        if let Some(Value::Array(blocks)) = m.get("content") {
            for b in blocks {
                match block_type(b) {
                    "tool_use" => {
                        if let Some(id) = str_of(b, "id") {
                            out.push(id.to_string());
                        }
                    }
                    "tool_result" => {
                        if let Some(id) = str_of(b, "tool_use_id") {
                            out.push(id.to_string());
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// The original id of a target id, given the map a `to_*` returned.
pub(crate) fn restore_id(id: &str, map: Option<&IdMap>) -> String {
    map.and_then(|m| m.get(id))
        .cloned()
        .unwrap_or_else(|| id.to_string())
}
