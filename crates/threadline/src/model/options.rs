//! Options of stores and sessions, and the session metadata that `listSessions` returns.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// An acknowledged write survives the process being killed (WAL, synchronous=NORMAL). An OS
    /// crash or power loss may lose what was acknowledged since the last checkpoint or the
    /// kernel's last writeback (docs/recovery.md, "What each durability mode keeps").
    #[default]
    Process,
    /// It also survives power loss: every commit is fsynced (synchronous=FULL).
    Power,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreOptions {
    pub durability: Durability,
    /// Strings longer than this many UTF-8 bytes are stored once, by hash.
    pub blob_threshold_bytes: usize,
    pub readonly: bool,
    pub busy_timeout_ms: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Process,
            blob_threshold_bytes: 10_240,
            readonly: false,
            busy_timeout_ms: 5_000,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionOptions {
    pub id: Option<String>,
    pub project: Option<String>,
    pub title: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub context_window: Option<u64>,
    pub prompt_key: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Active,
    Completed,
    Failed,
    Interrupted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Interrupted => "interrupted",
        }
    }
    pub fn parse(s: &str) -> Option<Status> {
        serde_json::from_value(Value::String(s.into())).ok()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkedFrom {
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub status: Status,
    pub created_at: String,
    pub updated_at: String,
    pub message_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionFilter {
    pub project: Option<String>,
    pub status: Option<Status>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: Option<u64>,
}

/// Reads typed options from JSON, naming the offending field on error (`options.limit: ...`).
pub fn from_json<T: DeserializeOwned>(v: Value, what: &str) -> Result<T> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            what.to_string()
        } else {
            format!("{what}.{path}")
        };
        Error::InvalidInput(format!("{at}: {}", e.inner()))
    })
}

/// What `session.update` changes: a field absent is kept, `Some(None)` (JSON null) clears it.
/// `metadata` replaces the whole object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionUpdate {
    pub title: Option<Option<String>>,
    pub metadata: Option<Option<Map<String, Value>>>,
    pub context_window: Option<Option<u64>>,
    pub model: Option<Option<String>>,
}

impl SessionUpdate {
    /// Reads `{ title?, metadata?, contextWindow?, model? }`, naming the offending field.
    pub fn from_json(v: Value) -> Result<SessionUpdate> {
        let Value::Object(o) = v else {
            return Err(Error::InvalidInput(format!(
                "expected an object, got {}",
                crate::model::json::kind(&v)
            )));
        };
        let bad = |field: &str, want: &str, got: &Value| {
            Error::InvalidInput(format!(
                "{field}: expected {want}, got {}",
                crate::model::json::kind(got)
            ))
        };
        let text = |field: &str, v: &Value| match v {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            other => Err(bad(field, "a string or null", other)),
        };
        let mut u = SessionUpdate::default();
        for (k, v) in &o {
            match k.as_str() {
                "title" => u.title = Some(text("title", v)?),
                "model" => u.model = Some(text("model", v)?),
                "contextWindow" => {
                    u.context_window = Some(match v {
                        Value::Null => None,
                        Value::Number(n) => match n.as_u64() {
                            Some(w) if w > 0 && w <= i64::MAX as u64 => Some(w),
                            _ => {
                                return Err(Error::InvalidInput(format!(
                                    "contextWindow: expected a positive integer, got {n}"
                                )))
                            }
                        },
                        other => return Err(bad("contextWindow", "a positive integer", other)),
                    })
                }
                "metadata" => {
                    u.metadata = Some(match v {
                        Value::Null => None,
                        Value::Object(m) => Some(m.clone()),
                        other => return Err(bad("metadata", "an object or null", other)),
                    })
                }
                other => {
                    return Err(Error::InvalidInput(format!(
                        "{other}: unknown field (expected title, metadata, contextWindow, model)"
                    )))
                }
            }
        }
        u.check()?;
        Ok(u)
    }

    /// What makes this an update no session could take, if anything (for callers in Rust).
    pub fn check(&self) -> Result<()> {
        if let Some(Some(w)) = self.context_window {
            if w == 0 || w > i64::MAX as u64 {
                return Err(Error::InvalidInput(format!(
                    "contextWindow: expected a positive integer, got {w}"
                )));
            }
        }
        Ok(())
    }
}
