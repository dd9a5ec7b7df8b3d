//! The OpenAI APIs' checks on a request, run before it is sent (like `validate_messages` for the
//! Anthropic shape), reported with the same [`Problem`] type.
//!
//! Chat Completions: every tool call of an assistant message answered by exactly one `tool`
//! message with its id, among the tool messages right after it (before any other message); no
//! tool message without its call; tool call ids unique, non-empty and at most 40 characters; no
//! empty user / system content, no assistant message with neither content nor tool calls.
//!
//! Responses: every `function_call` (and `custom_tool_call`) answered by exactly one
//! `function_call_output` (`custom_tool_call_output`) with its `call_id`, after it; no output
//! without its call; call ids unique, non-empty and at most 64 characters; no message item with
//! empty content.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::ids::{accepts_id, IdTarget, OPENAI_CHAT_MAX_ID, OPENAI_RESPONSES_MAX_ID};
use super::str_of;
use crate::model::validate::{Problem, ProblemCode};

fn problem(index: usize, path: String, code: ProblemCode, message: String) -> Problem {
    Problem {
        index,
        path,
        code,
        message,
    }
}

fn empty_content(c: Option<&Value>) -> bool {
    match c {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// The problems of a Chat Completions message list, in order; empty when it is valid.
pub fn validate_openai_chat(messages: &[Value]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    // calls of the last assistant message still waiting for their tool message: id -> (index, k)
    let mut open: Vec<(String, usize, usize)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let close = |open: &mut Vec<(String, usize, usize)>,
                 answered: &mut HashSet<String>,
                 out: &mut Vec<Problem>| {
        for (id, i, k) in open.drain(..) {
            if !answered.contains(&id) {
                out.push(problem(
                    i,
                    format!("[{i}].tool_calls[{k}]"),
                    ProblemCode::ToolUseWithoutResult,
                    format!(
                        "tool call '{id}' has no tool message right after its assistant message"
                    ),
                ));
            }
        }
        answered.clear();
    };
    for (i, m) in messages.iter().enumerate() {
        let at = format!("[{i}]");
        let role = str_of(m, "role").unwrap_or_default();
        if role != "tool" {
            close(&mut open, &mut answered, &mut out);
        }
        match role {
            "system" | "developer" | "user" => {
                if !matches!(m.get("content"), Some(Value::String(_) | Value::Array(_))) {
                    out.push(problem(
                        i,
                        format!("{at}.content"),
                        ProblemCode::NotAMessage,
                        "content must be a string or an array of parts".into(),
                    ));
                } else if empty_content(m.get("content")) {
                    out.push(problem(
                        i,
                        format!("{at}.content"),
                        ProblemCode::EmptyContent,
                        format!("a {role} message needs content"),
                    ));
                }
            }
            "assistant" => {
                let calls = m.get("tool_calls").and_then(Value::as_array);
                if empty_content(m.get("content"))
                    && calls.is_none_or(|c| c.is_empty())
                    && m.get("refusal")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    && m.get("audio").is_none_or(Value::is_null)
                {
                    out.push(problem(
                        i,
                        at.clone(),
                        ProblemCode::EmptyContent,
                        "an assistant message needs content or tool calls".into(),
                    ));
                }
                for (k, c) in calls.into_iter().flatten().enumerate() {
                    let path = format!("{at}.tool_calls[{k}]");
                    let id = str_of(c, "id").unwrap_or_default();
                    if !accepts_id(IdTarget::OpenAiChat, id) {
                        out.push(problem(
                            i,
                            format!("{path}.id"),
                            ProblemCode::InvalidToolId,
                            format!(
                                "a tool call id must be 1 to {OPENAI_CHAT_MAX_ID} characters, got {}",
                                id.chars().count()
                            ),
                        ));
                    }
                    if !seen.insert(id.to_string()) {
                        out.push(problem(
                            i,
                            path.clone(),
                            ProblemCode::DuplicateToolUseId,
                            format!("tool call id '{id}' is used twice"),
                        ));
                    }
                    open.push((id.to_string(), i, k));
                }
            }
            "tool" => {
                let id = str_of(m, "tool_call_id").unwrap_or_default();
                if !open.iter().any(|(o, _, _)| o == id) {
                    out.push(problem(
                        i,
                        at.clone(),
                        ProblemCode::ToolResultWithoutToolUse,
                        format!("no tool call '{id}' in the assistant message before these tool messages"),
                    ));
                } else if !answered.insert(id.to_string()) {
                    out.push(problem(
                        i,
                        at.clone(),
                        ProblemCode::DuplicateToolResult,
                        format!("a second tool message for '{id}'"),
                    ));
                }
                if !matches!(m.get("content"), Some(Value::String(_) | Value::Array(_))) {
                    out.push(problem(
                        i,
                        format!("{at}.content"),
                        ProblemCode::NotAMessage,
                        "a tool message's content must be a string or text parts".into(),
                    ));
                }
            }
            _ => out.push(problem(
                i,
                at.clone(),
                ProblemCode::NotAMessage,
                "expected role 'system', 'developer', 'user', 'assistant' or 'tool'".into(),
            )),
        }
    }
    close(&mut open, &mut answered, &mut out);
    out.sort_by_key(|p| p.index);
    out
}

/// The problems of a Responses input item list, in order; empty when it is valid.
pub fn validate_openai_responses(items: &[Value]) -> Vec<Problem> {
    let mut out = Vec::new();
    // call_id -> (index, answered)
    let mut calls: HashMap<String, (usize, bool)> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("[{i}]");
        let ty = match item.get("type").and_then(Value::as_str) {
            Some(t) => t,
            None if item.get("role").is_some() => "message",
            None if item.get("id").is_some_and(Value::is_string) => "item_reference",
            None => {
                out.push(problem(
                    i,
                    at,
                    ProblemCode::NotAMessage,
                    "expected an item with a type (or a message with a role)".into(),
                ));
                continue;
            }
        };
        match ty {
            "message" => {
                if !matches!(
                    str_of(item, "role"),
                    Some("system" | "developer" | "user" | "assistant")
                ) {
                    out.push(problem(
                        i,
                        at.clone(),
                        ProblemCode::NotAMessage,
                        "expected role 'system', 'developer', 'user' or 'assistant'".into(),
                    ));
                }
                if empty_content(item.get("content")) {
                    out.push(problem(
                        i,
                        format!("{at}.content"),
                        ProblemCode::EmptyContent,
                        "a message item needs content".into(),
                    ));
                }
            }
            "function_call" | "custom_tool_call" => {
                let id = str_of(item, "call_id").unwrap_or_default();
                if !accepts_id(IdTarget::OpenAiResponses, id) {
                    out.push(problem(
                        i,
                        format!("{at}.call_id"),
                        ProblemCode::InvalidToolId,
                        format!(
                            "a call_id must be 1 to {OPENAI_RESPONSES_MAX_ID} characters, got {}",
                            id.chars().count()
                        ),
                    ));
                }
                if calls.contains_key(id) {
                    out.push(problem(
                        i,
                        at.clone(),
                        ProblemCode::DuplicateToolUseId,
                        format!("call_id '{id}' is used twice"),
                    ));
                } else {
                    calls.insert(id.to_string(), (i, false));
                    order.push(id.to_string());
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                let id = str_of(item, "call_id").unwrap_or_default();
                match calls.get_mut(id) {
                    None => out.push(problem(
                        i,
                        at.clone(),
                        ProblemCode::ToolResultWithoutToolUse,
                        format!("no function call '{id}' before this output"),
                    )),
                    Some((_, true)) => out.push(problem(
                        i,
                        at.clone(),
                        ProblemCode::DuplicateToolResult,
                        format!("a second output for '{id}'"),
                    )),
                    Some((_, answered)) => *answered = true,
                }
            }
            _ => {}
        }
    }
    for id in order {
        if let Some((i, false)) = calls.get(&id) {
            out.push(problem(
                *i,
                format!("[{i}]"),
                ProblemCode::ToolUseWithoutResult,
                format!("function call '{id}' has no output"),
            ));
        }
    }
    out.sort_by_key(|p| p.index);
    out
}
