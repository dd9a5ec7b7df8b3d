//! Checks a message list the way the provider checks a request, before it is sent: every tool
//! call answered by exactly one result in the next message, no result without its call, roles
//! alternating from a user message, no empty text, no unsigned thinking. Each problem is named with
//! the path of the offending message or block.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

/// One thing the provider would reject the request for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Index of the message in the list.
    pub index: usize,
    /// Path of the offending message or block, e.g. `[3].content[1]`.
    pub path: String,
    pub code: ProblemCode,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemCode {
    /// Not an object with role 'user' or 'assistant' and string or array content.
    NotAMessage,
    /// The first message is not a user message.
    FirstNotUser,
    /// Two messages in a row with the same role.
    RolesNotAlternating,
    /// A message with no content (only the final assistant message may have none).
    EmptyContent,
    /// A text block (or string content) that is empty.
    EmptyText,
    /// A thinking block without its signature: the provider cannot verify it.
    UnsignedThinking,
    /// A tool_use block not answered by a tool_result in the next message.
    ToolUseWithoutResult,
    /// A tool_result whose tool_use is not in the message before it.
    ToolResultWithoutToolUse,
    /// A second tool_result for the same tool_use.
    DuplicateToolResult,
    /// The same tool_use id twice in the conversation.
    DuplicateToolUseId,
    /// tool_result blocks must come before any other block of their message.
    ToolResultNotFirst,
    /// A tool-call id the provider does not accept (OpenAI: too long). Reported by the OpenAI
    /// validators of `convert` only.
    InvalidToolId,
}

struct Call {
    id: String,
    index: usize,
    block: usize,
}

/// The problems of `messages` (Anthropic Messages API shape), in order; empty when it is valid.
pub fn validate_messages(messages: &[Value]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut say = |index: usize, path: String, code: ProblemCode, message: String| {
        out.push(Problem {
            index,
            path,
            code,
            message,
        })
    };
    let mut prev_role: Option<&str> = None;
    let mut open: Vec<Call> = Vec::new();
    let mut use_ids: HashSet<&str> = HashSet::new();
    let last = messages.len().saturating_sub(1);
    // The first user or assistant message (system messages may come before it).
    let mut first = true;
    for (i, m) in messages.iter().enumerate() {
        let at = format!("[{i}]");
        if m.get("role").and_then(Value::as_str) == Some("system") {
            check_system_message(m, i, &at, &mut say);
            // The messages around it are turns of their own (the API combines a role's
            // consecutive turns): a user message may follow a user message across it.
            prev_role = None;
            // A tool call's results go in the very next message: a system message between
            // them leaves the call unanswered.
            for c in open.drain(..) {
                say(
                    c.index,
                    format!("[{}].content[{}]", c.index, c.block),
                    ProblemCode::ToolUseWithoutResult,
                    format!("tool_use '{}' has no tool_result in the next message", c.id),
                );
            }
            continue;
        }
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .filter(|r| *r == "user" || *r == "assistant");
        let (Some(role), Some(content)) = (
            role,
            m.get("content").filter(|c| c.is_string() || c.is_array()),
        ) else {
            say(
                i,
                at,
                ProblemCode::NotAMessage,
                "expected {role: 'user' | 'assistant' | 'system', content: string | blocks}".into(),
            );
            prev_role = None;
            continue;
        };
        let is_first = std::mem::replace(&mut first, false);
        // The server reads a request from its latest compaction block on: a request may start
        // at the assistant message holding one.
        if is_first && role != "user" && !holds_compaction(content) {
            say(
                i,
                at.clone(),
                ProblemCode::FirstNotUser,
                format!("the first message must be a user message, not {role}"),
            );
        }
        if prev_role == Some(role) {
            say(
                i,
                at.clone(),
                ProblemCode::RolesNotAlternating,
                format!("two {role} messages in a row"),
            );
        }
        prev_role = Some(role);
        let expected = std::mem::take(&mut open);
        let blocks: &[Value] = match content {
            Value::String(s) => {
                if s.trim().is_empty() {
                    say(
                        i,
                        format!("{at}.content"),
                        ProblemCode::EmptyText,
                        "empty text content (or only whitespace)".into(),
                    );
                }
                &[]
            }
            Value::Array(a) => {
                if a.is_empty() && !(role == "assistant" && i == last) {
                    say(
                        i,
                        format!("{at}.content"),
                        ProblemCode::EmptyContent,
                        "a message needs at least one block".into(),
                    );
                }
                a
            }
            _ => &[],
        };
        // Whitespace-only text passes beside other content (a response's "\n\n" before its
        // tool call), not alone.
        let has_other = blocks.iter().any(|b| {
            b.get("type").and_then(Value::as_str) != Some("text")
                || b.get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.trim().is_empty())
        });
        let mut answered: HashSet<&str> = HashSet::new();
        let mut other_seen = false;
        for (j, b) in blocks.iter().enumerate() {
            let path = format!("{at}.content[{j}]");
            let str_of = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or_default();
            match b.get("type").and_then(Value::as_str).unwrap_or_default() {
                "text" if str_of("text").is_empty() => {
                    say(i, path, ProblemCode::EmptyText, "empty text block".into())
                }
                "text" if !has_other && str_of("text").trim().is_empty() => say(
                    i,
                    path,
                    ProblemCode::EmptyText,
                    "a text block with only whitespace, and nothing else in the message".into(),
                ),
                "thinking" if str_of("signature").is_empty() => say(
                    i,
                    path,
                    ProblemCode::UnsignedThinking,
                    "a thinking block without its signature".into(),
                ),
                "tool_use" if role == "assistant" => {
                    let id = str_of("id");
                    if !use_ids.insert(id) {
                        say(
                            i,
                            path,
                            ProblemCode::DuplicateToolUseId,
                            format!("tool_use id '{id}' is used twice"),
                        );
                    }
                    open.push(Call {
                        id: id.to_string(),
                        index: i,
                        block: j,
                    });
                }
                "tool_result" => {
                    let id = str_of("tool_use_id");
                    if let Some(Value::Array(inner)) = b.get("content") {
                        for (k, x) in inner.iter().enumerate() {
                            if x.get("type").and_then(Value::as_str) == Some("text")
                                && x.get("text")
                                    .and_then(Value::as_str)
                                    .is_some_and(str::is_empty)
                            {
                                say(
                                    i,
                                    format!("{path}.content[{k}]"),
                                    ProblemCode::EmptyText,
                                    "empty text block in a tool result".into(),
                                );
                            }
                        }
                    }
                    if other_seen {
                        say(
                            i,
                            path.clone(),
                            ProblemCode::ToolResultNotFirst,
                            "tool_result blocks must come first in their message".into(),
                        );
                    }
                    if role != "user" || !expected.iter().any(|c| c.id == id) {
                        say(
                            i,
                            path,
                            ProblemCode::ToolResultWithoutToolUse,
                            format!("no tool_use '{id}' in the message before"),
                        );
                    } else if !answered.insert(id) {
                        say(
                            i,
                            path,
                            ProblemCode::DuplicateToolResult,
                            format!("a second tool_result for '{id}'"),
                        );
                    }
                    continue;
                }
                _ => {}
            }
            other_seen = true;
        }
        for c in expected
            .iter()
            .filter(|c| !answered.contains(c.id.as_str()))
        {
            say(
                c.index,
                format!("[{}].content[{}]", c.index, c.block),
                ProblemCode::ToolUseWithoutResult,
                format!("tool_use '{}' has no tool_result in the next message", c.id),
            );
        }
    }
    for c in &open {
        say(
            c.index,
            format!("[{}].content[{}]", c.index, c.block),
            ProblemCode::ToolUseWithoutResult,
            format!("tool_use '{}' has no tool_result after it", c.id),
        );
    }
    out.sort_by_key(|p| p.index);
    out
}

/// An assistant message holding a `compaction` block (the context-management beta).
pub(crate) fn holds_compaction(content: &Value) -> bool {
    content.as_array().is_some_and(|blocks| {
        blocks
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) == Some("compaction"))
    })
}

/// A system message inside the conversation: text only, and some of it.
fn check_system_message(
    m: &Value,
    i: usize,
    at: &str,
    say: &mut impl FnMut(usize, String, ProblemCode, String),
) {
    match m.get("content") {
        Some(Value::String(s)) if s.trim().is_empty() => say(
            i,
            format!("{at}.content"),
            ProblemCode::EmptyText,
            "empty text content (or only whitespace)".into(),
        ),
        Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) => {
            if blocks.is_empty() {
                say(
                    i,
                    format!("{at}.content"),
                    ProblemCode::EmptyContent,
                    "a message needs at least one block".into(),
                );
            }
            for (j, b) in blocks.iter().enumerate() {
                let text = b.get("text").and_then(Value::as_str);
                if b.get("type").and_then(Value::as_str) != Some("text") || text.is_none() {
                    say(
                        i,
                        format!("{at}.content[{j}]"),
                        ProblemCode::NotAMessage,
                        "a system message holds text blocks only".into(),
                    );
                } else if text.is_some_and(|t| t.trim().is_empty()) {
                    say(
                        i,
                        format!("{at}.content[{j}]"),
                        ProblemCode::EmptyText,
                        "empty text block".into(),
                    );
                }
            }
        }
        _ => say(
            i,
            at.to_string(),
            ProblemCode::NotAMessage,
            "expected {role: 'system', content: string | text blocks}".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codes(v: Value) -> Vec<(String, ProblemCode)> {
        let Value::Array(list) = v else {
            unreachable!()
        };
        validate_messages(&list)
            .into_iter()
            .map(|p| (p.path, p.code))
            .collect()
    }

    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "bash", "input": {}})
    }

    fn result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})
    }

    #[test]
    fn a_valid_tool_loop_has_no_problems() {
        let v = json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, call("a"), call("b")]},
            {"role": "user", "content": [result("a"), result("b"), {"type": "text", "text": "and?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        ]);
        assert_eq!(codes(v), vec![]);
    }

    #[test]
    fn each_problem_is_named_with_its_path() {
        use ProblemCode::*;
        let v = json!([
            {"role": "assistant", "content": [call("a")]},
            {"role": "user", "content": [{"type": "text", "text": ""}, result("a"), result("zz")]},
            {"role": "user", "content": [result("a")]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, call("b")]},
            {"role": "user", "content": []},
            {"role": "assistant", "content": [call("b")]},
            {"role": "tool", "content": "x"},
        ]);
        assert_eq!(
            codes(v),
            vec![
                ("[0]".into(), FirstNotUser),
                ("[1].content[0]".into(), EmptyText),
                ("[1].content[1]".into(), ToolResultNotFirst),
                ("[1].content[2]".into(), ToolResultNotFirst),
                ("[1].content[2]".into(), ToolResultWithoutToolUse),
                ("[2]".into(), RolesNotAlternating),
                ("[2].content[0]".into(), ToolResultWithoutToolUse),
                ("[3].content[0]".into(), UnsignedThinking),
                ("[3].content[1]".into(), ToolUseWithoutResult),
                ("[4].content".into(), EmptyContent),
                ("[5].content[0]".into(), DuplicateToolUseId),
                ("[5].content[0]".into(), ToolUseWithoutResult),
                ("[6]".into(), NotAMessage),
            ]
        );
    }

    #[test]
    fn blank_text_alone_and_empty_text_anywhere_are_empty_text() {
        let v = json!([
            {"role": "user", "content": " \n"},
            {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}, call("a")]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": ""}]}]},
            {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}]},
        ]);
        assert_eq!(
            codes(v),
            vec![
                ("[0].content".into(), ProblemCode::EmptyText),
                ("[2].content[0].content[0]".into(), ProblemCode::EmptyText),
                ("[3].content[0]".into(), ProblemCode::EmptyText),
            ]
        );
    }

    #[test]
    fn a_second_result_for_one_call_is_a_duplicate() {
        let v = json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [call("a")]},
            {"role": "user", "content": [result("a"), result("a")]},
        ]);
        assert_eq!(
            codes(v),
            vec![("[2].content[1]".into(), ProblemCode::DuplicateToolResult)]
        );
    }
}
