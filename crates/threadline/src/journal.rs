//! The tool-call journal: the lifecycle of every tool call (requested, started, completed, failed,
//! denied), kept in the `tool_calls` table and written in the same transaction as the record that
//! moves it. It is what recovery reads to tell the truth about a call cut off by a crash, and what
//! makes a finished tool's result available to a resumed agent (`cached_result`).

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::message::{CallFact, MessageFacts, ResultFact};

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
    fn of_result(r: &ResultFact) -> CallState {
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

const COLUMNS: &str =
    "id, kind, name, call_seq, ord, state, requested_ms, started_ms, ended_ms, result_seq, outcome";

fn entry(r: &Row) -> rusqlite::Result<Entry> {
    let state: String = r.get(5)?;
    let outcome: Option<String> = r.get(10)?;
    Ok(Entry {
        id: r.get(0)?,
        kind: r.get(1)?,
        name: r.get(2)?,
        call_seq: r.get::<_, i64>(3)? as u64,
        ord: r.get::<_, i64>(4)? as u64,
        state: CallState::parse(&state).unwrap_or(CallState::Requested),
        requested_ms: r.get(6)?,
        started_ms: r.get(7)?,
        ended_ms: r.get(8)?,
        result_seq: r.get::<_, Option<i64>>(9)?.map(|s| s as u64),
        outcome: outcome.and_then(|o| serde_json::from_str(&o).ok()),
    })
}

pub fn get(conn: &Connection, session: i64, id: &str) -> Result<Option<Entry>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM tool_calls WHERE session = ?1 AND id = ?2"
        ))?
        .query_row(params![session, id], entry)
        .optional()?)
}

/// Every call of a session, in the order they were made.
pub fn list(conn: &Connection, session: i64) -> Result<Vec<Entry>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM tool_calls WHERE session = ?1 ORDER BY call_seq, ord"
    ))?;
    let rows = stmt.query_map([session], entry)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Calls of `tool_use` kind with no result in the history, in order.
pub fn unanswered(conn: &Connection, session: i64) -> Result<Vec<Entry>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM tool_calls WHERE session = ?1 AND result_seq IS NULL
         AND kind = 'tool_use' ORDER BY call_seq, ord"
    ))?;
    let rows = stmt.query_map([session], entry)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Whether any result block of `facts` answers a call in the history. A user message whose
/// results all answer nothing is an orphan: kept in the log, out of `messages`.
pub fn answers_a_call(
    conn: &Connection,
    session: i64,
    facts: &MessageFacts,
    pending: &[String],
) -> Result<bool> {
    for r in &facts.results {
        if pending.contains(&r.tool_use_id) || get(conn, session, &r.tool_use_id)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Folds a stored message into the journal: its calls are requested (a server or MCP call
/// answered in the same message is settled at once), its results settle their calls.
/// `denied_by_envelope`: the envelope says the user refused (Claude Code's `toolUseResult`).
/// A repair record (`is_repair`) places results without changing what is known of a call: a
/// call that never ran stays `requested`, one with an unknown outcome stays `started`.
pub fn on_message(
    conn: &Connection,
    session: i64,
    seq: u64,
    facts: &MessageFacts,
    denied_by_envelope: bool,
    is_repair: bool,
    now_ms: i64,
) -> Result<()> {
    for (ord, call) in facts.calls.iter().enumerate() {
        request(conn, session, seq, ord as u64, call, now_ms)?;
    }
    for r in &facts.results {
        let mut state = CallState::of_result(r);
        if denied_by_envelope && r.is_error {
            state = CallState::Denied;
        }
        conn.prepare_cached(
            // An outcome recorded first (e.g. denied) keeps its state; the message only places it.
            "UPDATE tool_calls SET state = CASE WHEN outcome IS NULL AND ?6 = 0 THEN ?1 ELSE state END,
               result_seq = ?2, ended_ms = coalesce(ended_ms, ?3)
             WHERE session = ?4 AND id = ?5 AND result_seq IS NULL",
        )?
        .execute(params![
            state.as_str(),
            seq as i64,
            now_ms,
            session,
            r.tool_use_id,
            is_repair
        ])?;
    }
    Ok(())
}

fn request(
    conn: &Connection,
    session: i64,
    seq: u64,
    ord: u64,
    call: &CallFact,
    now_ms: i64,
) -> Result<()> {
    // The first record with a call id holds it: a later record repeating the id (a response
    // recorded twice) does not move the journal back.
    conn.prepare_cached(
        "INSERT INTO tool_calls(session, id, kind, name, call_seq, ord, state, requested_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'requested', ?7) ON CONFLICT DO NOTHING",
    )?
    .execute(params![
        session, call.id, call.kind, call.name, seq as i64, ord as i64, now_ms
    ])?;
    Ok(())
}

/// Marks a call started: the side effect is about to happen.
pub fn start(conn: &Connection, session: i64, id: &str, now_ms: i64) -> Result<()> {
    let e = get(conn, session, id)?.ok_or_else(|| not_found(id))?;
    match e.state {
        CallState::Requested => {
            conn.prepare_cached(
                "UPDATE tool_calls SET state = 'started', started_ms = ?1 WHERE session = ?2 AND id = ?3",
            )?
            .execute(params![now_ms, session, id])?;
            Ok(())
        }
        CallState::Started => Ok(()),
        done => Err(Error::InvalidInput(format!(
            "tool call '{id}' already has an outcome ({}); cachedToolResult('{id}') returns it",
            done.as_str()
        ))),
    }
}

/// Records a call's outcome in the journal only. Recording the same outcome again is a no-op.
pub fn record_outcome(
    conn: &Connection,
    session: i64,
    id: &str,
    outcome: &Map<String, Value>,
    state: CallState,
    now_ms: i64,
) -> Result<()> {
    let e = get(conn, session, id)?.ok_or_else(|| not_found(id))?;
    if let Some(prev) = &e.outcome {
        if prev == outcome {
            return Ok(());
        }
        return Err(Error::InvalidInput(format!(
            "tool call '{id}' already has another recorded outcome"
        )));
    }
    if e.result_seq.is_some() {
        return Err(Error::InvalidInput(format!(
            "tool call '{id}' already has its tool_result in the history (record seq {})",
            e.result_seq.unwrap_or_default()
        )));
    }
    let text = serde_json::to_string(outcome).map_err(|e| Error::InvalidInput(e.to_string()))?;
    conn.prepare_cached(
        "UPDATE tool_calls SET state = ?1, outcome = ?2, ended_ms = ?3 WHERE session = ?4 AND id = ?5",
    )?
    .execute(params![state.as_str(), text, now_ms, session, id])?;
    Ok(())
}

/// Writes a journal row as a snapshot gives it (after its records were imported).
pub fn import(conn: &Connection, session: i64, e: &Entry) -> Result<()> {
    let outcome = match &e.outcome {
        Some(o) => Some(serde_json::to_string(o).map_err(|x| Error::InvalidInput(x.to_string()))?),
        None => None,
    };
    conn.prepare_cached(
        "INSERT INTO tool_calls(session, id, kind, name, call_seq, ord, state, requested_ms, started_ms, ended_ms, result_seq, outcome)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT(session, id) DO UPDATE SET state = excluded.state, requested_ms = excluded.requested_ms,
           started_ms = excluded.started_ms, ended_ms = excluded.ended_ms, result_seq = excluded.result_seq,
           outcome = excluded.outcome",
    )?
    .execute(params![
        session,
        e.id,
        e.kind,
        e.name,
        e.call_seq as i64,
        e.ord as i64,
        e.state.as_str(),
        e.requested_ms,
        e.started_ms,
        e.ended_ms,
        e.result_seq.map(|s| s as i64),
        outcome
    ])?;
    Ok(())
}

pub fn delete_session(conn: &Connection, session: i64) -> Result<()> {
    conn.execute("DELETE FROM tool_calls WHERE session = ?1", [session])?;
    Ok(())
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("no tool call '{id}' in this session"))
}
