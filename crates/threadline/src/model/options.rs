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
