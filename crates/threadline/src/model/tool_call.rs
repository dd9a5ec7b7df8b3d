//! A tool call's journal entry: its lifecycle (requested, started, completed, failed, denied)
//! and what is known of it. storage/journal.rs keeps the entries; the batch of a SQLite store
//! (storage/batch.rs) keeps those its staged writes leave, for the appends that read them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::message::ResultFact;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallState {
    Requested,
    Started,
    Completed,
    Failed,
    Denied,
}

impl CallState {
    pub fn as_str(self) -> &'static str {
        match self {
            CallState::Requested => "requested",
            CallState::Started => "started",
            CallState::Completed => "completed",
            CallState::Failed => "failed",
            CallState::Denied => "denied",
        }
    }

    pub fn parse(s: &str) -> Option<CallState> {
        Some(match s {
            "requested" => CallState::Requested,
            "started" => CallState::Started,
            "completed" => CallState::Completed,
            "failed" => CallState::Failed,
            "denied" => CallState::Denied,
            _ => return None,
        })
    }

    /// The state a result block puts its call in.
    pub(crate) fn of_result(r: &ResultFact) -> CallState {
        if r.denied {
            CallState::Denied
        } else if r.is_error {
            CallState::Failed
        } else {
            CallState::Completed
        }
    }

    pub fn has_outcome(self) -> bool {
        !matches!(self, CallState::Requested | CallState::Started)
    }
}

/// One row of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    pub id: String,
    pub kind: String,
    pub name: String,
    /// the record holding the call
    pub call_seq: u64,
    /// the block's position among the calls of that record
    pub ord: u64,
    pub state: CallState,
    pub requested_ms: i64,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    /// the record holding the result, once one is in the history
    pub result_seq: Option<u64>,
    /// what `recordToolOutcome` recorded: `{content, is_error?, toolUseResult?}`
    pub outcome: Option<Map<String, Value>>,
}
