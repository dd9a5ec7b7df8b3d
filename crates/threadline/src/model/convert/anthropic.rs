//! Neutral <-> Anthropic Messages API. The neutral model is the Anthropic wire shape, so this is
//! mostly the identity; what it does:
//! - to: messages become `{ role, content }` (a request's `MessageParam`): response metadata
//!   (`id`, `type`, `model`, `stop_reason`, `stop_sequence`, `usage`, ...) is left out silently,
//!   other message fields with a warning; every `openai` field (on messages and blocks, nested
//!   ones too) is stripped; `openai_reasoning` / `openai_item` / `openai_part` blocks are left out
//!   with a warning; tool-call ids not matching `^[a-zA-Z0-9_-]+$` are mapped. A message left
//!   empty is left out and its neighbours of one role merged, so the request stays valid.
//! - system messages (role 'system', inside the conversation) stay where they are, both ways.
//! - from: string content becomes one text block, ids are restored with the map; everything else
//!   is kept as given.

use serde_json::Value;

use super::ids::{IdMapper, IdTarget};
use super::{
    block_type, check_blocks, check_message_fields, codes, obj, push_blocks, restore_id, str_of,
    text_block, tool_ids, Converted, FromConverted, IdMap, SystemAcc, Warnings,
};
use crate::error::{Error, Path, Result};

/// Neutral messages to an Anthropic Messages API request (`system` stays beside them).
pub fn to_anthropic(messages: &[Value], system: Option<&Value>) -> Converted {
    let mut w = Warnings::new();
    let mut ids = IdMapper::new(IdTarget::Anthropic, &tool_ids(messages));
    let system = system.filter(|s| !s.is_null()).map(|s| match s {
        Value::Array(blocks) => Value::Array(blocks.iter().map(without_openai).collect()),
        other => other.clone(),
    });
    let mut out: Vec<Value> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let Some(role) = m
            .get("role")
            .and_then(Value::as_str)
            .filter(|r| matches!(*r, "user" | "assistant" | "system"))
        else {
            w.add(
                &at,
                codes::INVALID_SKIPPED,
                "not a message with role 'user', 'assistant' or 'system'",
            );
            continue;
        };
        if role == "system" {
            // In place, as the API takes it inside `messages`; never merged with a neighbour.
            check_message_fields(m, &at, "Anthropic", &mut w);
            let content = match m.get("content") {
                Some(Value::Array(blocks)) => {
                    Value::Array(blocks.iter().map(without_openai).collect())
                }
                Some(other) => other.clone(),
                None => Value::String(String::new()),
            };
            out.push(obj(vec![("role", role.into()), ("content", content)]));
            continue;
        }
        check_message_fields(m, &at, "Anthropic", &mut w);
        let content = match m.get("content") {
            Some(Value::String(s)) => Value::String(s.clone()),
            Some(Value::Array(blocks)) => {
                let mut kept = Vec::new();
                for (j, b) in blocks.iter().enumerate() {
                    if let Some(b) = block_out(b, &format!("{at}.content[{j}]"), &mut ids, &mut w) {
                        kept.push(b);
                    }
                }
                if kept.is_empty() && !blocks.is_empty() {
                    w.add(
                        &at,
                        codes::MESSAGE_DROPPED,
                        "nothing in this message can be sent to Anthropic; it is left out",
                    );
                    continue;
                }
                Value::Array(kept)
            }
            _ => {
                w.add(
                    &at,
                    codes::INVALID_SKIPPED,
                    "content is not a string or blocks",
                );
                continue;
            }
        };
        let same_role = out
            .last()
            .and_then(|l| l.get("role"))
            .and_then(Value::as_str)
            == Some(role);
        if same_role {
            let blocks = match content {
                Value::String(s) => vec![text_block(&s)],
                Value::Array(a) => a,
                _ => Vec::new(),
            };
            if let Some(last) = out.last_mut() {
                if let Some(Value::String(s)) = last.get("content") {
                    last["content"] = Value::Array(vec![text_block(&s.clone())]);
                }
            }
            push_blocks(&mut out, role, blocks);
        } else {
            out.push(obj(vec![("role", role.into()), ("content", content)]));
        }
    }
    Converted {
        system,
        messages: out,
        warnings: w.0,
        id_map: ids.reverse,
    }
}

fn block_out(b: &Value, at: &str, ids: &mut IdMapper, w: &mut Warnings) -> Option<Value> {
    if !b.is_object() {
        w.add(at, codes::INVALID_SKIPPED, "not a block object");
        return None;
    }
    match block_type(b) {
        "openai_reasoning" => {
            w.add(
                at,
                codes::REASONING_DROPPED,
                "OpenAI reasoning cannot be sent to Anthropic",
            );
            return None;
        }
        t @ ("openai_item" | "openai_part") => {
            w.add(
                at,
                codes::BLOCK_DROPPED,
                format!("an {t} block (OpenAI-only content) cannot be sent to Anthropic"),
            );
            return None;
        }
        _ => {}
    }
    let mut out = without_openai(b);
    match block_type(b) {
        "tool_use" => {
            if let Some(id) = str_of(b, "id") {
                out["id"] = ids.map(id).into();
            }
        }
        "tool_result" => {
            if let Some(id) = str_of(b, "tool_use_id") {
                out["tool_use_id"] = ids.map(id).into();
            }
            if let Some(Value::Array(inner)) = b.get("content") {
                let mut kept = Vec::new();
                for (k, x) in inner.iter().enumerate() {
                    let p = format!("{at}.content[{k}]");
                    match block_type(x) {
                        "openai_part" | "openai_item" | "openai_reasoning" => w.add(
                            p,
                            codes::BLOCK_DROPPED,
                            "OpenAI-only content in a tool result cannot be sent to Anthropic",
                        ),
                        _ => kept.push(without_openai(x)),
                    }
                }
                out["content"] = Value::Array(kept);
            }
        }
        _ => {}
    }
    Some(out)
}

/// A copy without the `openai` field.
fn without_openai(v: &Value) -> Value {
    match v {
        Value::Object(o) if o.contains_key("openai") => {
            let mut o = o.clone();
            o.shift_remove("openai");
            Value::Object(o)
        }
        other => other.clone(),
    }
}

/// Anthropic messages (`MessageParam`s or response `Message`s) to neutral messages: string
/// content becomes one text block (`system` role messages stay in place), tool-call ids are
/// restored with `id_map`; everything else is kept as given.
pub fn from_anthropic(
    messages: &[Value],
    system: Option<&Value>,
    id_map: Option<&IdMap>,
) -> Result<FromConverted> {
    run(messages, system, id_map).map_err(|e| e.during("fromAnthropic"))
}

fn run(
    messages: &[Value],
    system: Option<&Value>,
    id_map: Option<&IdMap>,
) -> Result<FromConverted> {
    let w = Warnings::new();
    let mut sys = SystemAcc::default();
    if let Some(s) = system.filter(|s| !s.is_null()) {
        check_system_value(s, &Path::root().key("system"))?;
        sys.push(s.clone());
    }
    let root = Path::root().key("messages");
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = root.index(i);
        let Value::Object(o) = m else {
            return Err(Error::invalid(&at, "expected a message object"));
        };
        let role = o
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid(&at.key("role"), "expected a string"))?;
        let content = o.get("content").ok_or_else(|| {
            Error::invalid(
                &at.key("content"),
                "expected a string or an array of blocks",
            )
        })?;
        match role {
            // In place: the API takes system messages inside `messages`.
            "system" => check_system_value(content, &at.key("content"))?,
            "user" | "assistant" => {}
            r => {
                return Err(Error::invalid(
                    &at.key("role"),
                    format!("expected 'user', 'assistant' or 'system', got '{r}'"),
                ))
            }
        }
        let blocks = match content {
            Value::String(s) => vec![text_block(s)],
            Value::Array(blocks) => {
                check_blocks(blocks, &at.key("content"))?;
                blocks.iter().map(|b| restore_ids(b, id_map)).collect()
            }
            _ => {
                return Err(Error::invalid(
                    &at.key("content"),
                    "expected a string or an array of blocks",
                ))
            }
        };
        let mut msg = o.clone();
        msg.insert("content".into(), Value::Array(blocks));
        out.push(Value::Object(msg));
    }
    Ok(FromConverted {
        system: sys.finish(),
        messages: out,
        warnings: w.0,
    })
}

fn restore_ids(b: &Value, id_map: Option<&IdMap>) -> Value {
    let mut b = b.clone();
    match block_type(&b) {
        "tool_use" => {
            if let Some(id) = str_of(&b, "id") {
                b["id"] = restore_id(id, id_map).into();
            }
        }
        "tool_result" => {
            if let Some(id) = str_of(&b, "tool_use_id") {
                b["tool_use_id"] = restore_id(id, id_map).into();
            }
        }
        _ => {}
    }
    b
}

fn check_system_value(s: &Value, path: &Path) -> Result<()> {
    match s {
        Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (j, b) in blocks.iter().enumerate() {
                if block_type(b) != "text" || str_of(b, "text").is_none() {
                    return Err(Error::invalid(
                        &path.index(j),
                        "expected a text block ({ type: 'text', text })",
                    ));
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
