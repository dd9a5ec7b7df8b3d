//! Envelopes: the record around a message (camelCase, like Claude Code's session files). Turns what
//! a caller gives (a bare message, an envelope, a string) into a validated draft, and fills in the
//! defaults a session knows.

use serde_json::{Map, Value};

use crate::error::{Error, Path, Result};
use crate::model::message::{self, check_message, kind, MessageFacts, Role};

/// A record validated and ready for the session to complete (uuid, seq, ...) and store.
#[derive(Debug, Clone)]
pub struct Draft {
    pub env: Map<String, Value>,
    /// facts of the message, when the record has one
    pub message: Option<MessageFacts>,
    /// The caller gave an envelope, not a bare message: its key order is kept, and error paths in
    /// its message start with `message.`. (A bare message's envelope gets `message` last.)
    pub(crate) from_envelope: bool,
    /// token state set by `restoreTokenState`
    pub(crate) tokens: Option<crate::model::state::TokenPatch>,
}

/// The defaults a session fills in, in the order they are added to an envelope that lacks them.
pub struct Defaults<'a> {
    pub uuid: &'a str,
    pub parent_uuid: Option<&'a str>,
    pub session_id: &'a str,
    pub seq: u64,
    pub timestamp: &'a str,
}

impl Draft {
    /// A record from what `append` accepts: a message (`role` present), an envelope, or a string
    /// (a user prompt). `extra` holds envelope fields given beside a message.
    pub fn from_input(input: Value, extra: Option<Map<String, Value>>) -> Result<Draft> {
        match input {
            Value::String(text) => {
                // A bare string is a prompt typed now: one with no text would be stored only to
                // be left out of every request (providers refuse empty text), so it is refused.
                // Empty text blocks inside a message are accepted and kept (lossless import).
                if text.trim().is_empty() {
                    return Err(Error::invalid(
                        &Path::root().key("content").index(0).key("text"),
                        "a string prompt must have text (empty or whitespace-only text is refused by the providers)",
                    ));
                }
                let msg = serde_json::json!({"role": "user", "content": [{"type": "text", "text": text}]});
                Draft::from_message(msg, extra)
            }
            Value::Object(o) if o.contains_key("role") && !o.contains_key("message") => {
                Draft::from_message(Value::Object(o), extra)
            }
            Value::Object(mut o) => {
                if let Some(extra) = extra {
                    o.extend(extra);
                }
                Draft::from_envelope(o)
            }
            other => Err(Error::InvalidInput(format!(
                "expected a message object, an envelope object or a string, got {}",
                kind(&other)
            ))),
        }
    }

    fn from_message(mut msg: Value, extra: Option<Map<String, Value>>) -> Result<Draft> {
        let mut facts = check_message(&mut msg, &Path::root())?;
        let mut env = extra.unwrap_or_default();
        facts.is_prompt &= !inserted_by_harness(&env);
        if env.contains_key("message") {
            return Err(Error::invalid(
                &Path::root().key("envelope.message"),
                "not allowed when a message is given",
            ));
        }
        check_fields(&env, Some(&facts))?;
        if !env.contains_key("type") {
            env.insert("type".into(), Value::String(derived_type(&facts).into()));
        }
        env.insert("message".into(), msg);
        Ok(Draft {
            env,
            message: Some(facts),
            from_envelope: false,
            tokens: None,
        })
    }

    /// A record from an envelope object (a message under `message`, or none for an event).
    pub fn from_envelope(mut env: Map<String, Value>) -> Result<Draft> {
        let mut facts = match env.get_mut("message") {
            Some(m) => Some(check_message(m, &Path::root().key("message"))?),
            None => None,
        };
        if let Some(f) = facts.as_mut() {
            f.is_prompt &= !inserted_by_harness(&env);
        }
        check_fields(&env, facts.as_ref())?;
        if !env.contains_key("type") {
            match &facts {
                Some(f) => {
                    env.insert("type".into(), Value::String(derived_type(f).into()));
                }
                None => {
                    return Err(Error::invalid(
                        &Path::root().key("type"),
                        "required for a record without a message",
                    ))
                }
            }
        }
        Ok(Draft {
            env,
            message: facts,
            from_envelope: true,
            tokens: None,
        })
    }

    pub fn uuid(&self) -> Option<&str> {
        self.env.get("uuid").and_then(Value::as_str)
    }

    pub fn record_type(&self) -> &str {
        self.env
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("event")
    }

    pub fn str_field(&self, key: &str) -> Option<&str> {
        self.env.get(key).and_then(Value::as_str)
    }

    /// In `messages`: a message not marked `includeInContext: false`.
    pub fn in_messages(&self) -> bool {
        self.message.is_some() && self.env.get("includeInContext") != Some(&Value::Bool(false))
    }

    /// The key that identifies one provider response: its message id, else the request id.
    pub fn response_key(&self) -> Option<String> {
        let facts = self.message.as_ref()?;
        facts.usage?;
        facts
            .id
            .clone()
            .or_else(|| self.str_field("requestId").map(str::to_string))
    }

    /// Fills in what was not given; `seq` is always the record's position. Called once.
    pub fn complete(&mut self, d: &Defaults) {
        let env = &mut self.env;
        env.entry("uuid")
            .or_insert_with(|| Value::String(d.uuid.into()));
        env.entry("parentUuid").or_insert_with(|| {
            d.parent_uuid
                .map_or(Value::Null, |p| Value::String(p.into()))
        });
        env.entry("sessionId")
            .or_insert_with(|| Value::String(d.session_id.into()));
        env.insert("seq".into(), Value::from(d.seq));
        env.entry("timestamp")
            .or_insert_with(|| Value::String(d.timestamp.into()));
        if !self.from_envelope {
            if let Some(m) = env.shift_remove("message") {
                env.insert("message".into(), m);
            }
        }
    }
}

/// A record the agent's harness marked as not typed by a person: Claude Code's `isMeta` (a
/// caveat, an injected skill) and `isCompactSummary` (the summary that continues a compacted
/// conversation). It belongs to the turn it occurs in.
fn inserted_by_harness(env: &Map<String, Value>) -> bool {
    ["isMeta", "isCompactSummary"]
        .iter()
        .any(|k| env.get(*k) == Some(&Value::Bool(true)))
}

fn derived_type(f: &MessageFacts) -> &'static str {
    match f.role {
        Some(Role::Assistant) => "assistant",
        // A record of its own type: never a prompt, never indexed for search.
        Some(Role::System) => "system",
        _ if !f.is_prompt && !f.tool_result_ids.is_empty() => "tool_result",
        _ => "user",
    }
}

/// Checks the envelope fields the contract types; every other field is kept as given.
fn check_fields(env: &Map<String, Value>, facts: Option<&MessageFacts>) -> Result<()> {
    let root = Path::root();
    match env.get("uuid") {
        None => {}
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(Value::String(_)) => {
            return Err(Error::invalid(&root.key("uuid"), "must not be empty"))
        }
        Some(v) => {
            return Err(Error::invalid(
                &root.key("uuid"),
                format!("expected a string, got {}", kind(v)),
            ))
        }
    }
    message::opt_string_or_null(env, "parentUuid", &root)?;
    for key in [
        "sessionId",
        "provider",
        "requestId",
        "mode",
        "runId",
        "agentId",
    ] {
        message::opt_string(env, key, &root)?;
    }
    message::opt_bool(env, "includeInContext", &root)?;
    message::opt_object(env, "metadata", &root)?;
    if let Some(ts) = env.get("timestamp") {
        let Value::String(s) = ts else {
            return Err(Error::invalid(
                &root.key("timestamp"),
                format!("expected a string, got {}", kind(ts)),
            ));
        };
        if crate::model::clock::parse(s).is_none() {
            return Err(Error::invalid(
                &root.key("timestamp"),
                format!("expected an ISO 8601 date-time, got '{s}'"),
            ));
        }
    }
    match env.get("seq") {
        None | Some(Value::Number(_)) => {}
        Some(v) => {
            return Err(Error::invalid(
                &root.key("seq"),
                format!("expected a number, got {}", kind(v)),
            ))
        }
    }
    let ty = match env.get("type") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.as_str()),
        Some(Value::String(_)) => {
            return Err(Error::invalid(&root.key("type"), "must not be empty"))
        }
        Some(v) => {
            return Err(Error::invalid(
                &root.key("type"),
                format!("expected a string, got {}", kind(v)),
            ))
        }
    };
    let role = facts.and_then(|f| f.role);
    let clash = match (ty, role) {
        (Some("assistant"), Some(Role::User | Role::System)) => {
            Some("an assistant record needs role 'assistant'")
        }
        (Some("user" | "tool_result"), Some(Role::Assistant | Role::System)) => {
            Some("a user or tool_result record needs role 'user'")
        }
        (Some("user" | "assistant" | "tool_result"), None) => {
            Some("a user, assistant or tool_result record needs a message")
        }
        _ => None,
    };
    match clash {
        Some(why) => Err(Error::invalid(&root.key("type"), why)),
        None => Ok(()),
    }
}

/// The type of the record a rewind writes: the next record continues from its `parentUuid`.
pub const REWIND: &str = "rewind";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn bare_message_gets_defaults_then_message_last() {
        let mut d = Draft::from_input(
            json!({"role": "user", "content": "hi"}),
            Some(obj(json!({"requestId": "r1"}))),
        )
        .unwrap();
        d.complete(&Defaults {
            uuid: "u",
            parent_uuid: None,
            session_id: "s",
            seq: 0,
            timestamp: "2026-01-01T00:00:00.000Z",
        });
        let keys: Vec<&str> = d.env.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "requestId",
                "type",
                "uuid",
                "parentUuid",
                "sessionId",
                "seq",
                "timestamp",
                "message"
            ]
        );
        assert_eq!(d.env["type"], "user");
    }

    #[test]
    fn envelope_keeps_its_order_and_unknown_fields() {
        let mut d = Draft::from_input(
            json!({"zeta": 1, "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}, "uuid": "x"}),
            None,
        )
        .unwrap();
        d.complete(&Defaults {
            uuid: "u",
            parent_uuid: Some("p"),
            session_id: "s",
            seq: 3,
            timestamp: "t",
        });
        let keys: Vec<&str> = d.env.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "zeta",
                "message",
                "uuid",
                "type",
                "parentUuid",
                "sessionId",
                "seq",
                "timestamp"
            ]
        );
        assert_eq!(d.env["type"], "tool_result");
        assert_eq!(d.env["uuid"], "x");
    }

    #[test]
    fn events_need_a_type_and_roles_must_match() {
        assert!(Draft::from_input(json!({"data": 1}), None)
            .unwrap_err()
            .message()
            .starts_with("type:"));
        let e = Draft::from_input(
            json!({"type": "assistant", "message": {"role": "user", "content": "x"}}),
            None,
        )
        .unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT");
        let e =
            Draft::from_input(json!({"type": "x", "timestamp": "yesterday"}), None).unwrap_err();
        assert_eq!(
            e.message(),
            "timestamp: expected an ISO 8601 date-time, got 'yesterday'"
        );
    }

    #[test]
    fn meta_and_compact_summary_records_are_not_prompts() {
        let msg = json!({"role": "user", "content": "typed by nobody"});
        for flag in ["isMeta", "isCompactSummary"] {
            let d = Draft::from_input(msg.clone(), Some(obj(json!({ flag: true })))).unwrap();
            assert!(!d.message.unwrap().is_prompt, "{flag} beside a message");
            let d = Draft::from_input(
                json!({"type": "user", flag: true, "message": msg.clone()}),
                None,
            )
            .unwrap();
            assert!(!d.message.unwrap().is_prompt, "{flag} in an envelope");
        }
        let d = Draft::from_input(
            json!({"type": "user", "isMeta": false, "message": msg}),
            None,
        )
        .unwrap();
        assert!(d.message.unwrap().is_prompt);
    }
}
