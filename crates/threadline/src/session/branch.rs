//! Branches: records form a tree through `parentUuid`. Rewinding continues the session from an
//! earlier record; the abandoned branch stays in the log. A `rewind` record marks the switch and
//! carries the state of the record rewound to, so `messages`, turns, token state and context
//! follow the current branch (its records are a few seq ranges of the log).

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::model::envelope::Draft;
use crate::model::state::State;
use crate::session::{Session, Writer};

/// The record type of a rewind.
pub use crate::model::envelope::REWIND;

/// A branch of the session's tree, named by its last record.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    pub leaf_uuid: String,
    pub leaf_seq: u64,
    /// messages on the branch, from the start of the session
    pub message_count: u64,
    pub current: bool,
    /// for an abandoned branch: the record the session was rewound to when it was left
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_at_uuid: Option<String>,
}

impl Session {
    /// Continues the session from record `to_uuid`: the next append's parent is it, and
    /// `messages`, turns, token state and context are those of the branch ending there.
    pub fn rewind(&self, to_uuid: &str) -> Result<()> {
        self.transact(|w| w.rewind(to_uuid, None, None).map(|_| ()))
            .map_err(|e: Error| e.during("rewind"))
    }

    /// The current branch and every branch a rewind left, most recent first after the current.
    pub fn branches(&self) -> Result<Vec<Branch>> {
        let run = || {
            let conn = self.conn()?;
            let tail = self.read_tail(&conn)?;
            let Some(last) = tail.next_seq.checked_sub(1) else {
                return Ok(Vec::new());
            };
            let path = tail.state.path(last);
            let on_path = |seq: u64| path.iter().any(|&(f, t)| f <= seq && seq <= t);
            let leaf = tail.last_uuid.clone().unwrap_or_default();
            let leaf_seq = crate::storage::records::seq_of(&conn, self.num, &leaf)?.unwrap_or(last);
            let mut out = vec![Branch {
                leaf_uuid: leaf,
                leaf_seq,
                message_count: tail.state.messages,
                current: true,
                forked_at_uuid: None,
            }];
            // Every record a rewind left, with the records of its branch.
            let mut left: Vec<(Branch, Vec<(u64, u64)>)> = Vec::new();
            for (from, to) in rewinds(&conn, self.num)?.into_iter().rev() {
                let Some(seq) = crate::storage::records::seq_of(&conn, self.num, &from)? else {
                    continue;
                };
                if on_path(seq)
                    || out.iter().any(|b| b.leaf_uuid == from)
                    || left.iter().any(|(b, _)| b.leaf_uuid == from)
                {
                    continue;
                }
                let state = state_at(&conn, self.num, seq)?;
                left.push((
                    Branch {
                        leaf_uuid: from,
                        leaf_seq: seq,
                        message_count: state.messages,
                        current: false,
                        forked_at_uuid: Some(to),
                    },
                    state.path(seq),
                ));
            }
            // A record that another branch continues is not the end of a branch (left by
            // rewinding twice: first to it, then away from it).
            for (i, (b, _)) in left.iter().enumerate() {
                let continued = left.iter().enumerate().any(|(j, (_, path))| {
                    j != i
                        && path
                            .iter()
                            .any(|&(f, t)| f <= b.leaf_seq && b.leaf_seq <= t)
                });
                if !continued {
                    out.push(b.clone());
                }
            }
            Ok(out)
        };
        run().map_err(|e: Error| e.during("branches"))
    }
}

impl Writer<'_> {
    /// Writes a rewind to `to_uuid` (with `uuid` and `timestamp` when given: an import's, from its
    /// source, so a second import finds it and it is dated where it happened). A rewind whose uuid
    /// is stored already is not written again. Returns whether it was written.
    pub(crate) fn rewind(
        &mut self,
        to_uuid: &str,
        uuid: Option<&str>,
        timestamp: Option<&str>,
    ) -> Result<bool> {
        let num = self.num();
        if let Some(u) = uuid {
            if crate::storage::records::find_uuid(self.conn, num, u)?.is_some() {
                return Ok(false);
            }
        }
        let seq = crate::storage::records::seq_of(self.conn, num, to_uuid)?
            .ok_or_else(|| Error::NotFound(format!("no record '{to_uuid}' in this session")))?;
        let mut state = state_at(self.conn, num, seq)?;
        let at = self.tail.next_seq;
        state.branch_path = state.path(seq);
        state.segment_start = at;
        let mut env = Map::new();
        env.insert("type".into(), Value::String(REWIND.into()));
        if let Some(u) = uuid {
            env.insert("uuid".into(), Value::String(u.into()));
        }
        env.insert("parentUuid".into(), Value::String(to_uuid.into()));
        if let Some(t) = timestamp {
            env.insert("timestamp".into(), Value::String(t.into()));
        }
        env.insert("includeInContext".into(), Value::Bool(false));
        let from = self.tail.last_uuid.clone();
        env.insert(
            "rewind".into(),
            json!({"toUuid": to_uuid, "fromUuid": from}),
        );
        self.tail.state = state;
        self.insert(Draft::from_envelope(env)?)?;
        self.tail.last_uuid = Some(to_uuid.to_string());
        Ok(true)
    }
}

/// The state stored with record `seq`.
pub(crate) fn state_at(conn: &crate::storage::db::Db, num: i64, seq: u64) -> Result<State> {
    let mut state = None;
    crate::storage::records::each_record(conn, num, seq, seq, |at, stored| {
        state = Some(crate::storage::records::state_of(conn, num, at, stored)?);
        Ok(())
    })?;
    state.ok_or_else(|| Error::NotFound(format!("no record seq {seq}")))
}

/// (abandoned leaf, record rewound to) of every rewind, in order.
fn rewinds(conn: &crate::storage::db::Db, num: i64) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for seq in crate::storage::records::seqs_of_type(conn, num, REWIND)? {
        let Some(env) = crate::storage::records::record(conn, num, seq)? else {
            continue;
        };
        let r = env.get("rewind");
        let field = |k: &str| {
            r.and_then(|r| r.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        if let (Some(from), Some(to)) = (field("fromUuid"), field("toUuid")) {
            out.push((from, to));
        }
    }
    Ok(out)
}
