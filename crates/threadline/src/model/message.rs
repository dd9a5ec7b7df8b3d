//! Messages in the Anthropic Messages API wire shape: validation of content blocks (what the
//! provider would reject is rejected here, with the path), the one normalisation (string content
//! becomes a text block), and the facts session state needs from a message.

use serde_json::{Map, Value};

use crate::error::{Error, Path, Result};
use crate::model::usage::Usage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    /// A system message inside the conversation (the Anthropic API takes one in `messages`):
    /// never a prompt, it starts no turn.
    System,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }
}

/// What session state needs to know about one message.
#[derive(Debug, Clone, Default)]
pub struct MessageFacts {
    pub role: Option<Role>,
    /// A user message with at least one block that is not a tool_result: it starts a turn.
    pub is_prompt: bool,
    /// ids of `tool_use` blocks (answered by `tool_result` blocks in a later user message).
    pub tool_use_ids: Vec<String>,
    /// every tool call in the message: tool_use, server_tool_use, mcp_tool_use.
    pub tool_calls: u64,
    pub tool_result_ids: Vec<String>,
    /// every tool call, with what the journal keeps of it
    pub calls: Vec<CallFact>,
    /// every result block (tool_result in a user message, `*_tool_result` of a server or MCP
    /// call inside an assistant message)
    pub results: Vec<ResultFact>,
    pub usage: Option<Usage>,
    /// the provider's message id, used to count one response once.
    pub id: Option<String>,
    /// holds a `compaction` block (Anthropic's context management): a request to Anthropic
    /// starts at the latest such message
    pub compaction: bool,
}

/// A tool call block: `tool_use` (answered in a later user message) or `server_tool_use` /
/// `mcp_tool_use` (answered inside the same assistant message).
#[derive(Debug, Clone, PartialEq)]
pub struct CallFact {
    pub id: String,
    pub kind: String,
    pub name: String,
}

/// A result block and what it says about its call.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultFact {
    pub tool_use_id: String,
    pub is_error: bool,
    /// the result says the call was refused (Claude Code's rejection text), not that it failed
    pub denied: bool,
}

/// Text Claude Code writes into user messages that no person typed: an interruption notice, a
/// local command (`/mcp`) with its caveat and output, shell-mode output, a background task's
/// notification, a system reminder. Such a message belongs to the turn it occurs in.
const HARNESS_TEXT_PREFIXES: &[&str] = &[
    "[Request interrupted by user",
    "<local-command-caveat>",
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<task-notification>",
    "<system-reminder>",
];

/// A block of a user message that a person wrote or attached (text, an image, a document), as
/// opposed to a tool result or text the agent's harness inserted. A user message with one starts
/// a turn.
pub(crate) fn is_human_block(block: &Value) -> bool {
    match block.get("type").and_then(Value::as_str) {
        Some("tool_result") => false,
        Some("text") => {
            let text = block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let text = text.trim_start();
            !HARNESS_TEXT_PREFIXES.iter().any(|p| text.starts_with(p))
        }
        _ => true,
    }
}

/// What Claude Code writes as the result of a call the user refused.
const DENIED_PREFIX: &str = "The user doesn't want to proceed with this tool use";

/// Where a block stands decides which types are allowed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    User,
    Assistant,
    /// inside a tool_result's content
    ToolResult,
    /// a system message: text blocks only, as the provider takes it
    System,
}

/// Validates `msg` in place, turning string content into `[{type:'text', text}]`.
/// The ids of a stored message's tool calls (the blocks `check_message` gives the journal).
pub(crate) fn call_ids(msg: &Value) -> impl Iterator<Item = &str> {
    msg.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| {
            matches!(
                b.get("type").and_then(Value::as_str),
                Some("tool_use" | "server_tool_use" | "mcp_tool_use")
            )
        })
        .filter_map(|b| b.get("id").and_then(Value::as_str))
}

pub fn check_message(msg: &mut Value, path: &Path) -> Result<MessageFacts> {
    let Value::Object(obj) = msg else {
        return Err(Error::invalid(
            path,
            format!("expected a message object, got {}", kind(msg)),
        ));
    };
    let role = match obj.get("role") {
        Some(Value::String(r)) if r == "user" => Role::User,
        Some(Value::String(r)) if r == "assistant" => Role::Assistant,
        Some(Value::String(r)) if r == "system" => Role::System,
        Some(Value::String(r)) if r == "tool" || r == "function" => {
            return Err(Error::invalid(
                &path.key("role"),
                format!("'{r}' is an OpenAI Chat message; convert it with fromOpenAIChat(messages) first"),
            ))
        }
        Some(Value::String(r)) if r == "developer" => {
            return Err(Error::invalid(
                &path.key("role"),
                "'developer' is an OpenAI message; use role 'system', or convert it with fromOpenAIChat(messages) / fromOpenAIResponses(items) first",
            ))
        }
        Some(Value::String(r)) => {
            return Err(Error::invalid(
                &path.key("role"),
                format!("expected 'user', 'assistant' or 'system', got '{r}'"),
            ))
        }
        Some(v) => {
            return Err(Error::invalid(
                &path.key("role"),
                format!("expected a string, got {}", kind(v)),
            ))
        }
        None => return Err(Error::invalid(&path.key("role"), "required")),
    };
    // OpenAI Chat's shape of a tool call: said before `content` (often null there) is checked.
    if obj.contains_key("tool_calls") || obj.contains_key("function_call") {
        let key = if obj.contains_key("tool_calls") {
            "tool_calls"
        } else {
            "function_call"
        };
        return Err(Error::invalid(
            &path.key(key),
            format!("a message with {key} is an OpenAI Chat message; convert it with fromOpenAIChat(messages) first"),
        ));
    }
    for key in ["id", "model"] {
        opt_string(obj, key, path)?;
    }
    for key in ["stop_reason", "stop_sequence"] {
        opt_string_or_null(obj, key, path)?;
    }
    let usage = match obj.get("usage") {
        None | Some(Value::Null) => None,
        Some(u) => Some(Usage::from_json(u, &path.key("usage"))?),
    };
    let content_path = path.key("content");
    let content = match obj.get_mut("content") {
        Some(c) => c,
        None => return Err(Error::invalid(&content_path, "required")),
    };
    if let Value::String(text) = content {
        let text = std::mem::take(text);
        let mut block = Map::new();
        block.insert("type".into(), Value::String("text".into()));
        block.insert("text".into(), Value::String(text));
        *content = Value::Array(vec![Value::Object(block)]);
    }
    let Value::Array(blocks) = content else {
        return Err(Error::invalid(
            &content_path,
            format!(
                "expected a string or an array of blocks, got {}",
                kind(content)
            ),
        ));
    };
    if role != Role::Assistant && blocks.is_empty() {
        return Err(Error::invalid(
            &content_path,
            format!("a {} message needs at least one block", role.as_str()),
        ));
    }
    let place = match role {
        Role::User => Place::User,
        Role::Assistant => Place::Assistant,
        Role::System => Place::System,
    };
    let mut facts = MessageFacts {
        role: Some(role),
        usage,
        ..Default::default()
    };
    for (i, block) in blocks.iter().enumerate() {
        let p = content_path.index(i);
        let ty = check_block(block, &p, place)?;
        match ty {
            "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                facts.tool_calls += 1;
                if ty == "tool_use" {
                    facts.tool_use_ids.push(str_field(block, "id").to_string());
                }
                facts.calls.push(CallFact {
                    id: str_field(block, "id").to_string(),
                    kind: ty.to_string(),
                    name: str_field(block, "name").to_string(),
                });
            }
            "tool_result" => {
                facts
                    .tool_result_ids
                    .push(str_field(block, "tool_use_id").to_string());
                facts.results.push(result_fact(block));
            }
            t if role == Role::Assistant
                && t.ends_with("_tool_result")
                && block.get("tool_use_id").and_then(Value::as_str).is_some() =>
            {
                facts.results.push(result_fact(block));
            }
            "compaction" => facts.compaction = true,
            _ if is_human_block(block) => facts.is_prompt = true,
            _ => {}
        }
    }
    facts.is_prompt &= role == Role::User;
    facts.id = match obj.get("id") {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    Ok(facts)
}

fn result_fact(block: &Value) -> ResultFact {
    let is_error = block.get("is_error") == Some(&Value::Bool(true));
    let first_text = match block.get("content") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Array(items)) => items
            .first()
            .and_then(|b| b.get("text"))
            .and_then(Value::as_str)
            .unwrap_or_default(),
        _ => "",
    };
    ResultFact {
        tool_use_id: str_field(block, "tool_use_id").to_string(),
        is_error,
        denied: is_error && first_text.starts_with(DENIED_PREFIX),
    }
}

/// Checks a tool result given outside a message (`recordToolOutcome`): the block it makes.
pub fn check_result_block(block: &Value, path: &Path) -> Result<ResultFact> {
    check_block(block, path, Place::User)?;
    Ok(result_fact(block))
}

fn str_field<'a>(block: &'a Value, key: &str) -> &'a str {
    block.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Checks one block; returns its type.
fn check_block<'a>(block: &'a Value, path: &Path, place: Place) -> Result<&'a str> {
    let Value::Object(b) = block else {
        return Err(Error::invalid(
            path,
            format!("expected a content block object, got {}", kind(block)),
        ));
    };
    let ty = match b.get("type") {
        Some(Value::String(t)) if !t.is_empty() => t.as_str(),
        Some(Value::String(_)) => {
            return Err(Error::invalid(&path.key("type"), "must not be empty"))
        }
        Some(v) => {
            return Err(Error::invalid(
                &path.key("type"),
                format!("expected a string, got {}", kind(v)),
            ))
        }
        None => return Err(Error::invalid(&path.key("type"), "required")),
    };
    // The provider takes text blocks only in a system message (SystemMessageParam).
    if place == Place::System && ty != "text" {
        return Err(Error::invalid(
            &path.key("type"),
            format!("a system message holds text blocks only, got '{ty}'"),
        ));
    }
    let only = |allowed: &[Place], what: &str| -> Result<()> {
        if allowed.contains(&place) {
            Ok(())
        } else {
            Err(Error::invalid(
                &path.key("type"),
                format!("a '{ty}' block is only allowed in {what}"),
            ))
        }
    };
    match ty {
        "text" => {
            req_string(b, "text", path)?;
            opt_array_or_null(b, "citations", path)?;
        }
        "thinking" => {
            only(&[Place::Assistant], "assistant messages")?;
            req_string(b, "thinking", path)?;
            opt_string(b, "signature", path)?;
        }
        "redacted_thinking" => {
            only(&[Place::Assistant], "assistant messages")?;
            req_string(b, "data", path)?;
        }
        // The context-management beta's summary of what came before it (kept exactly, sent
        // back as given: the server reads the request from the latest one on).
        "compaction" => {
            only(&[Place::Assistant], "assistant messages")?;
            opt_string_or_null(b, "content", path)?;
            opt_string_or_null(b, "encrypted_content", path)?;
            opt_string_or_null(b, "signature", path)?;
        }
        "tool_use" | "server_tool_use" | "mcp_tool_use" => {
            only(&[Place::Assistant], "assistant messages")?;
            req_nonempty_string(b, "id", path)?;
            req_nonempty_string(b, "name", path)?;
            match b.get("input") {
                Some(Value::Object(_)) => {}
                Some(v) => {
                    return Err(Error::invalid(
                        &path.key("input"),
                        format!("expected an object, got {}", kind(v)),
                    ))
                }
                None => return Err(Error::invalid(&path.key("input"), "required")),
            }
        }
        "tool_result" => {
            only(&[Place::User], "user messages")?;
            req_nonempty_string(b, "tool_use_id", path)?;
            opt_bool(b, "is_error", path)?;
            match b.get("content") {
                None | Some(Value::String(_)) => {}
                Some(Value::Array(items)) => {
                    let cp = path.key("content");
                    for (i, item) in items.iter().enumerate() {
                        check_block(item, &cp.index(i), Place::ToolResult)?;
                    }
                }
                Some(v) => {
                    return Err(Error::invalid(
                        &path.key("content"),
                        format!("expected a string or an array of blocks, got {}", kind(v)),
                    ))
                }
            }
        }
        "image" => check_source(b, path, &["base64", "url", "file"])?,
        "document" => {
            check_source(b, path, &["base64", "url", "text", "content", "file"])?;
            opt_string_or_null(b, "title", path)?;
            opt_string_or_null(b, "context", path)?;
        }
        _ => {}
    }
    Ok(ty)
}

fn check_source(b: &Map<String, Value>, path: &Path, kinds: &[&str]) -> Result<()> {
    let sp = path.key("source");
    let Some(source) = b.get("source") else {
        return Err(Error::invalid(&sp, "required"));
    };
    let Value::Object(s) = source else {
        return Err(Error::invalid(
            &sp,
            format!("expected an object, got {}", kind(source)),
        ));
    };
    let ty = match s.get("type") {
        Some(Value::String(t)) if kinds.contains(&t.as_str()) => t.as_str(),
        Some(Value::String(t)) => {
            return Err(Error::invalid(
                &sp.key("type"),
                format!("expected one of {}, got '{t}'", kinds.join(", ")),
            ))
        }
        Some(v) => {
            return Err(Error::invalid(
                &sp.key("type"),
                format!("expected a string, got {}", kind(v)),
            ))
        }
        None => return Err(Error::invalid(&sp.key("type"), "required")),
    };
    match ty {
        "base64" | "text" => {
            req_string(s, "media_type", &sp)?;
            req_string(s, "data", &sp)?;
        }
        "url" => req_nonempty_string(s, "url", &sp)?,
        "file" => req_nonempty_string(s, "file_id", &sp)?,
        _ => match s.get("content") {
            Some(Value::String(_)) => {}
            Some(Value::Array(items)) => {
                let cp = sp.key("content");
                for (i, item) in items.iter().enumerate() {
                    check_block(item, &cp.index(i), Place::ToolResult)?;
                }
            }
            Some(v) => {
                return Err(Error::invalid(
                    &sp.key("content"),
                    format!("expected a string or an array, got {}", kind(v)),
                ))
            }
            None => return Err(Error::invalid(&sp.key("content"), "required")),
        },
    }
    Ok(())
}

pub(crate) use crate::model::json::kind;

pub(crate) fn req_string(o: &Map<String, Value>, key: &str, path: &Path) -> Result<()> {
    match o.get(key) {
        Some(Value::String(_)) => Ok(()),
        Some(v) => Err(Error::invalid(
            &path.key(key),
            format!("expected a string, got {}", kind(v)),
        )),
        None => Err(Error::invalid(&path.key(key), "required")),
    }
}

pub(crate) fn req_nonempty_string(o: &Map<String, Value>, key: &str, path: &Path) -> Result<()> {
    req_string(o, key, path)?;
    if o.get(key)
        .and_then(Value::as_str)
        .is_some_and(str::is_empty)
    {
        return Err(Error::invalid(&path.key(key), "must not be empty"));
    }
    Ok(())
}

pub(crate) fn opt_string(o: &Map<String, Value>, key: &str, path: &Path) -> Result<()> {
    match o.get(key) {
        None | Some(Value::String(_)) => Ok(()),
        Some(v) => Err(Error::invalid(
            &path.key(key),
            format!("expected a string, got {}", kind(v)),
        )),
    }
}

pub(crate) fn opt_string_or_null(o: &Map<String, Value>, key: &str, path: &Path) -> Result<()> {
    match o.get(key) {
        None | Some(Value::String(_)) | Some(Value::Null) => Ok(()),
        Some(v) => Err(Error::invalid(
            &path.key(key),
            format!("expected a string or null, got {}", kind(v)),
        )),
    }
}

pub(crate) fn opt_bool(o: &Map<String, Value>, key: &str, path: &Path) -> Result<()> {
    match o.get(key) {
        None | Some(Value::Bool(_)) => Ok(()),
        Some(v) => Err(Error::invalid(
            &path.key(key),
            format!("expected a boolean, got {}", kind(v)),
        )),
    }
}

pub(crate) fn opt_object(o: &Map<String, Value>, key: &str, path: &Path) -> Result<()> {
    match o.get(key) {
        None | Some(Value::Object(_)) => Ok(()),
        Some(v) => Err(Error::invalid(
            &path.key(key),
            format!("expected an object, got {}", kind(v)),
        )),
    }
}

fn opt_array_or_null(o: &Map<String, Value>, key: &str, path: &Path) -> Result<()> {
    match o.get(key) {
        None | Some(Value::Array(_)) | Some(Value::Null) => Ok(()),
        Some(v) => Err(Error::invalid(
            &path.key(key),
            format!("expected an array or null, got {}", kind(v)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Result<MessageFacts> {
        let mut v = v;
        check_message(&mut v, &Path::root())
    }

    #[test]
    fn string_content_becomes_a_text_block() {
        let mut m = json!({"role": "user", "content": "hi"});
        let f = check_message(&mut m, &Path::root()).unwrap();
        assert_eq!(
            m,
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
        );
        assert!(f.is_prompt);
    }

    #[test]
    fn errors_name_the_path() {
        let e = check(json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
            {"type": "tool_result", "tool_use_id": 7}]}))
        .unwrap_err();
        assert_eq!(
            e.message(),
            "content[2].tool_use_id: expected a string, got a number"
        );
        let e = check(
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x"}]}),
        )
        .unwrap_err();
        assert_eq!(e.message(), "content[0].input: required");
        let e = check(json!({"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}]})).unwrap_err();
        assert_eq!(e.message(), "content[0].source.media_type: required");
    }

    #[test]
    fn tool_results_alone_are_not_a_prompt_and_unknown_blocks_are_kept() {
        let f = check(
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}),
        )
        .unwrap();
        assert!(!f.is_prompt);
        assert_eq!(f.tool_result_ids, vec!["a"]);
        let f = check(
            json!({"role": "assistant", "content": [{"type": "future_block", "x": 1},
            {"type": "tool_use", "id": "t1", "name": "n", "input": {}}]}),
        )
        .unwrap();
        assert_eq!(f.tool_use_ids, vec!["t1"]);
    }

    #[test]
    fn text_the_harness_inserted_is_not_a_prompt() {
        for text in [
            "[Request interrupted by user]",
            "[Request interrupted by user for tool use]",
            "<local-command-caveat>Caveat: ...</local-command-caveat>",
            "<command-name>/mcp</command-name>",
            "  <local-command-stdout>Reconnected</local-command-stdout>",
            "<task-notification>\n<task-id>b1</task-id>",
        ] {
            let f = check(json!({"role": "user", "content": [{"type": "text", "text": text}]}))
                .unwrap();
            assert!(!f.is_prompt, "{text}");
        }
        for content in [
            json!([{"type": "text", "text": "please fix <command-name> parsing"}]),
            json!([{"type": "text", "text": "[Request interrupted by user]"}, {"type": "text", "text": "now do X"}]),
            json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}]),
        ] {
            let f = check(json!({"role": "user", "content": content})).unwrap();
            assert!(f.is_prompt, "{content}");
        }
    }
}
