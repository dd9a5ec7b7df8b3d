//! The tool-call journal: the lifecycle of every tool call (requested, started, completed, failed,
//! denied), kept in the `tool_calls` table and written in the same transaction as the record that
//! moves it. It is what recovery reads to tell the truth about a call cut off by a crash, and what
//! makes a finished tool's result available to a resumed agent (`cached_result`).

use std::collections::HashSet;

use crate::storage::db::{args, Db, Row};
use rusqlite::types::ValueRef;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::message::{CallFact, MessageFacts};
pub use crate::model::tool_call::{CallState, Entry};
use crate::storage::batch::Probe;
use crate::storage::checksum;

/// The columns of a journal row, as its checksum covers them (the session's number first: a row
/// belongs to one session), then the checksum.
macro_rules! columns {
    () => {
        "session, id, kind, name, call_seq, ord, state, requested_ms, started_ms, ended_ms, result_seq, outcome, crc"
    };
}
const COVERED: usize = 12;

/// A journal row read with `columns!()`, checked against its checksum.
fn entry(conn: &Db, r: &Row<'_>) -> Result<Entry> {
    Ok(entry_raw(conn, r)?.0)
}

/// A checked journal row, with its outcome's text as stored.
fn entry_raw(conn: &Db, r: &Row<'_>) -> Result<(Entry, Option<String>)> {
    let check = || -> std::result::Result<(), String> {
        let mut v = [ValueRef::Null; COVERED];
        for (i, slot) in v.iter_mut().enumerate() {
            *slot = r.get_ref(i).map_err(|e| e.to_string())?;
        }
        let stored: Option<i64> = r.get(COVERED).map_err(|e| e.to_string())?;
        let computed = checksum::sum(&v);
        match stored {
            Some(s) if s == computed as i64 => Ok(()),
            Some(s) => Err(format!(
                "checksum mismatch (stored {s:#x}, computed {computed:#x})"
            )),
            None => Err("its checksum is missing".into()),
        }
    };
    if let Err(why) = check() {
        let session: i64 = r.get(0).unwrap_or(-1);
        let id: String = r.get(1).unwrap_or_default();
        return Err(Error::StoreCorrupt(format!(
            "the journal entry of tool call '{id}' of session '{}' is damaged: {why}",
            checksum::session_id(conn, session)
        )));
    }
    let state: String = r.get(6)?;
    let outcome: Option<String> = r.get(11)?;
    let bad = |what: &str| Error::StoreCorrupt(format!("a journal entry's {what} is damaged"));
    let entry = Entry {
        id: r.get(1)?,
        kind: r.get(2)?,
        name: r.get(3)?,
        call_seq: r.get::<i64>(4)? as u64,
        ord: r.get::<i64>(5)? as u64,
        state: CallState::parse(&state).ok_or_else(|| bad("state"))?,
        requested_ms: r.get(7)?,
        started_ms: r.get(8)?,
        ended_ms: r.get(9)?,
        result_seq: r.get::<Option<i64>>(10)?.map(|s| s as u64),
        outcome: outcome
            .as_deref()
            .map(|o| serde_json::from_str(o).map_err(|_| bad("outcome")))
            .transpose()?,
    };
    Ok((entry, outcome))
}

/// A journal row's values as its checksum covers them.
struct Sealed<'a> {
    session: i64,
    e: &'a Entry,
    state: CallState,
    started_ms: Option<i64>,
    ended_ms: Option<i64>,
    result_seq: Option<i64>,
    outcome: Option<&'a str>,
}

impl Sealed<'_> {
    fn sum(&self) -> i64 {
        let opt = |v: Option<i64>| v.map_or(ValueRef::Null, ValueRef::Integer);
        checksum::sum(&[
            ValueRef::Integer(self.session),
            ValueRef::Text(self.e.id.as_bytes()),
            ValueRef::Text(self.e.kind.as_bytes()),
            ValueRef::Text(self.e.name.as_bytes()),
            ValueRef::Integer(self.e.call_seq as i64),
            ValueRef::Integer(self.e.ord as i64),
            ValueRef::Text(self.state.as_str().as_bytes()),
            ValueRef::Integer(self.e.requested_ms),
            opt(self.started_ms),
            opt(self.ended_ms),
            opt(self.result_seq),
            self.outcome
                .map_or(ValueRef::Null, |o| ValueRef::Text(o.as_bytes())),
        ]) as i64
    }
}

/// A checked entry and its outcome's text as stored.
fn get_raw(conn: &Db, session: i64, id: &str) -> Result<Option<(Entry, Option<String>)>> {
    conn.query_row(
        concat!(
            "SELECT ",
            columns!(),
            " FROM tool_calls WHERE session = ?1 AND id = ?2"
        ),
        &args![session, id],
        |r| entry_raw(conn, r),
    )
}

/// Every entry a statement selects with `columns!()`, each checked.
fn entries(conn: &Db, sql: &'static str, params: &[ValueRef<'_>]) -> Result<Vec<Entry>> {
    conn.rows(sql, params, |r| entry(conn, r))
}

/// Why each damaged journal row of a session is damaged (verify: every one, not the first).
pub(crate) fn damaged(conn: &Db, session: i64) -> Result<Vec<String>> {
    let mut out = Vec::new();
    conn.each(
        concat!(
            "SELECT ",
            columns!(),
            " FROM tool_calls WHERE session = ?1 ORDER BY call_seq, ord"
        ),
        &args![session],
        |r| {
            if let Err(e) = entry(conn, r) {
                out.push(e.message().to_string());
            }
            Ok(true)
        },
    )?;
    Ok(out)
}

/// Sets the checksum of a journal row from what it holds (after an import's upsert, and for the
/// rows of a store migrated to schema version 4).
fn seal(conn: &Db, session: i64, id: &str) -> Result<()> {
    let crc = conn.query_row(
        concat!(
            "SELECT ",
            columns!(),
            " FROM tool_calls WHERE session = ?1 AND id = ?2"
        ),
        &args![session, id],
        |r| {
            let mut v = [ValueRef::Null; COVERED];
            for (i, slot) in v.iter_mut().enumerate() {
                *slot = r.get_ref(i)?;
            }
            Ok(checksum::sum(&v))
        },
    )?;
    if let Some(crc) = crc {
        conn.execute(
            "UPDATE tool_calls SET crc = ?1 WHERE session = ?2 AND id = ?3",
            &args![crc as i64, session, id],
        )?;
    }
    Ok(())
}

/// Computes the checksum of every journal row of a store that had none (the migration to schema
/// version 4).
pub(crate) fn seal_all(conn: &rusqlite::Connection) -> Result<()> {
    let mut sums: Vec<(i64, i64, String)> = Vec::new();
    {
        let mut stmt = conn.prepare(concat!("SELECT ", columns!(), " FROM tool_calls"))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let mut v = [ValueRef::Null; COVERED];
            for (i, slot) in v.iter_mut().enumerate() {
                *slot = r.get_ref(i)?;
            }
            sums.push((checksum::sum(&v) as i64, r.get(0)?, r.get(1)?));
        }
    }
    let mut update =
        conn.prepare("UPDATE tool_calls SET crc = ?1 WHERE session = ?2 AND id = ?3")?;
    for (crc, session, id) in sums {
        update.execute(rusqlite::params![crc, session, id])?;
    }
    Ok(())
}

pub fn get(conn: &Db, session: i64, id: &str) -> Result<Option<Entry>> {
    Ok(entries(
        conn,
        concat!(
            "SELECT ",
            columns!(),
            " FROM tool_calls WHERE session = ?1 AND id = ?2"
        ),
        &args![session, id],
    )?
    .pop())
}

/// Every call of a session, in the order they were made.
pub fn list(conn: &Db, session: i64) -> Result<Vec<Entry>> {
    entries(
        conn,
        concat!(
            "SELECT ",
            columns!(),
            " FROM tool_calls WHERE session = ?1 ORDER BY call_seq, ord"
        ),
        &args![session],
    )
}

/// Checks that `entries` (the session's whole journal) holds every call made by a message of
/// `records` (its envelopes, in order). Rows are keyed by the call id alone: damage to a page of
/// the table's b-tree can drop a row without SQLite or the row checksums noticing, and a journal
/// short of a call must not be handed out as the truth.
pub(crate) fn check_complete(
    entries: &[Entry],
    records: &[Map<String, Value>],
    session_id: &str,
) -> Result<()> {
    let known: HashSet<&str> = entries.iter().map(|e| e.id.as_str()).collect();
    for env in records {
        let Some(message) = env.get("message") else {
            continue;
        };
        if env.get("includeInContext") == Some(&Value::Bool(false)) {
            continue;
        }
        if let Some(id) = crate::model::message::call_ids(message).find(|id| !known.contains(id)) {
            let seq = env.get("seq").and_then(Value::as_u64).unwrap_or_default();
            return Err(Error::StoreCorrupt(format!(
                "seq {seq} of session '{session_id}': {}",
                lost(id)
            )));
        }
    }
    Ok(())
}

/// What a journal short of call `id` is.
pub(crate) fn lost(id: &str) -> String {
    format!("the tool-call journal has lost its call '{id}'")
}

/// Calls of `tool_use` kind with no result in the history, in order.
pub fn unanswered(conn: &Db, session: i64) -> Result<Vec<Entry>> {
    entries(
        conn,
        concat!(
            "SELECT ",
            columns!(),
            " FROM tool_calls WHERE session = ?1 AND result_seq IS NULL
             AND kind = 'tool_use' ORDER BY call_seq, ord"
        ),
        &args![session],
    )
}

/// Whether any result block of `facts` answers a call in the history. A user message whose
/// results all answer nothing is an orphan: kept in the log, out of `messages`.
pub fn answers_a_call(
    conn: &Db,
    session: i64,
    facts: &MessageFacts,
    pending: &[String],
) -> Result<bool> {
    for r in &facts.results {
        let id = r.tool_use_id.as_str();
        // requested by an append of the open batch: its staged row, or one stored before, is there
        if pending.iter().any(|p| p == id)
            || conn.staged_call(session, id).is_some()
            || conn
                .read_unaffected(session, Probe::Call(id), || get(conn, session, id))?
                .is_some()
        {
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
    conn: &Db,
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
        // Read (and checked) before it changes: the new checksum is of the new values.
        let id = r.tool_use_id.as_str();
        let staged = staged(conn, session, id)?;
        let found = match &staged {
            // a row an append of the batch made carries no outcome (recordToolOutcome is no append)
            Some(e) => Some((e.clone(), None)),
            None => {
                conn.read_unaffected(session, Probe::Call(id), || get_raw(conn, session, id))?
            }
        };
        let Some((e, outcome)) = found else {
            continue;
        };
        if e.result_seq.is_some() {
            continue;
        }
        // An outcome recorded first (e.g. denied) keeps its state; the message only places it.
        let state = if outcome.is_none() && !is_repair {
            state
        } else {
            e.state
        };
        let next = Sealed {
            session,
            e: &e,
            state,
            started_ms: e.started_ms,
            ended_ms: Some(e.ended_ms.unwrap_or(now_ms)),
            result_seq: Some(seq as i64),
            outcome: outcome.as_deref(),
        };
        conn.execute_later(
            "UPDATE tool_calls SET state = ?1, result_seq = ?2, ended_ms = ?3, crc = ?4
             WHERE session = ?5 AND id = ?6",
            &args![
                state.as_str(),
                seq as i64,
                next.ended_ms,
                next.sum(),
                session,
                r.tool_use_id,
            ],
        )?;
        if staged.is_some() {
            let settled = Entry {
                state,
                ended_ms: next.ended_ms,
                result_seq: Some(seq),
                ..e.clone()
            };
            conn.note_call(session, &settled, true);
        }
    }
    Ok(())
}

/// The journal row of call `id` as the open batch's staged writes leave it, when an append of
/// the batch requested the call and no row of that id was stored before the batch (then the
/// staged INSERT made nothing, and the stored row holds: read as any row).
fn staged(conn: &Db, session: i64, id: &str) -> Result<Option<Entry>> {
    let Some(e) = conn.staged_call(session, id) else {
        return Ok(None);
    };
    let stored_before = conn.read_without_staged(|| {
        conn.query_row(
            "SELECT 1 FROM tool_calls WHERE session = ?1 AND id = ?2",
            &args![session, id],
            |_| Ok(()),
        )
    })?;
    Ok(stored_before.is_none().then_some(e))
}

fn request(
    conn: &Db,
    session: i64,
    seq: u64,
    ord: u64,
    call: &CallFact,
    now_ms: i64,
) -> Result<()> {
    // The first record with a call id holds it: a later record repeating the id (a response
    // recorded twice) does not move the journal back.
    let e = Entry {
        id: call.id.clone(),
        kind: call.kind.clone(),
        name: call.name.clone(),
        call_seq: seq,
        ord,
        state: CallState::Requested,
        requested_ms: now_ms,
        started_ms: None,
        ended_ms: None,
        result_seq: None,
        outcome: None,
    };
    let crc = Sealed {
        session,
        e: &e,
        state: CallState::Requested,
        started_ms: None,
        ended_ms: None,
        result_seq: None,
        outcome: None,
    }
    .sum();
    conn.note_call(session, &e, false);
    conn.execute_later(
        "INSERT INTO tool_calls(session, id, kind, name, call_seq, ord, state, requested_ms, crc)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'requested', ?7, ?8) ON CONFLICT DO NOTHING",
        &args![session, call.id, call.kind, call.name, seq as i64, ord as i64, now_ms, crc],
    )?;
    Ok(())
}

/// Marks a call started: the side effect is about to happen.
pub fn start(conn: &Db, session: i64, id: &str, now_ms: i64) -> Result<()> {
    let (e, outcome) = get_raw(conn, session, id)?.ok_or_else(|| not_found(id))?;
    match e.state {
        CallState::Requested => {
            let crc = Sealed {
                session,
                e: &e,
                state: CallState::Started,
                started_ms: Some(now_ms),
                ended_ms: e.ended_ms,
                result_seq: e.result_seq.map(|s| s as i64),
                outcome: outcome.as_deref(),
            }
            .sum();
            conn.execute(
            "UPDATE tool_calls SET state = 'started', started_ms = ?1, crc = ?2 WHERE session = ?3 AND id = ?4",
            &args![now_ms, crc, session, id],
        )?;
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
    conn: &Db,
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
    let crc = Sealed {
        session,
        e: &e,
        state,
        started_ms: e.started_ms,
        ended_ms: Some(now_ms),
        result_seq: e.result_seq.map(|s| s as i64),
        outcome: Some(&text),
    }
    .sum();
    conn.execute(
            "UPDATE tool_calls SET state = ?1, outcome = ?2, ended_ms = ?3, crc = ?4 WHERE session = ?5 AND id = ?6",
            &args![state.as_str(), text, now_ms, crc, session, id],
        )?;
    Ok(())
}

/// Writes a journal row as a snapshot gives it (after its records were imported).
pub fn import(conn: &Db, session: i64, e: &Entry) -> Result<()> {
    let outcome = match &e.outcome {
        Some(o) => Some(serde_json::to_string(o).map_err(|x| Error::InvalidInput(x.to_string()))?),
        None => None,
    };
    conn.execute(
            "INSERT INTO tool_calls(session, id, kind, name, call_seq, ord, state, requested_ms, started_ms, ended_ms, result_seq, outcome)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT(session, id) DO UPDATE SET state = excluded.state, requested_ms = excluded.requested_ms,
           started_ms = excluded.started_ms, ended_ms = excluded.ended_ms, result_seq = excluded.result_seq,
           outcome = excluded.outcome",
            &args![
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
    ],
        )?;
    seal(conn, session, &e.id)
}

pub fn delete_session(conn: &Db, session: i64) -> Result<()> {
    conn.execute_later("DELETE FROM tool_calls WHERE session = ?1", &args![session])
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("no tool call '{id}' in this session"))
}
