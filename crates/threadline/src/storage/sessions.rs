//! The sessions table: one row per session (its id, project, title, status, options and
//! counters). Reads and writes of single columns that the session layer needs.

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::options::{SessionOptions, Status};
use crate::storage::write_order;
use crate::storage::{blob, journal, schema, search_index};

/// The context window the session was made with, if any.
pub(crate) fn context_window(conn: &Connection, num: i64) -> Result<Option<u64>> {
    let window: Option<i64> = conn
        .prepare_cached("SELECT context_window FROM sessions WHERE num = ?1")?
        .query_row([num], |r| r.get(0))?;
    Ok(window.map(|w| w as u64))
}

/// Sets the status (in the caller's write transaction), as a write of the session.
pub(crate) fn set_status(conn: &Connection, num: i64, status: Status, now_ms: i64) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET status = ?1, updated_ms = ?2 WHERE num = ?3",
        params![status.as_str(), now_ms, num],
    )?;
    write_order::touch(conn, num)
}

/// The id of session `num`.
pub(crate) fn id_of(conn: &Connection, num: i64) -> Result<String> {
    Ok(
        conn.query_row("SELECT id FROM sessions WHERE num = ?1", [num], |r| {
            r.get(0)
        })?,
    )
}

/// The row number of session `id`.
pub(crate) fn num_of(conn: &Connection, id: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT num FROM sessions WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?)
}

/// The row number and prompt key of session `id`.
pub(crate) fn num_and_prompt_key(
    conn: &Connection,
    id: &str,
) -> Result<Option<(i64, Option<String>)>> {
    Ok(conn
        .prepare_cached("SELECT num, prompt_key FROM sessions WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Inserts a new session's row (in the caller's write transaction); returns its number.
pub(crate) fn insert(conn: &Connection, id: &str, o: &SessionOptions, now_ms: i64) -> Result<i64> {
    let metadata = o
        .metadata
        .as_ref()
        .map(|m| serde_json::Value::Object(m.clone()).to_string());
    conn.execute(
        "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata)
         VALUES (?1, ?2, ?3, ?4, ?5, 'active', ?6, ?6, ?7, ?8, ?9)",
        params![id, o.project, o.title, o.provider, o.model, now_ms, o.context_window.map(|w| w as i64), o.prompt_key, metadata],
    )?;
    let num = conn.last_insert_rowid();
    write_order::touch(conn, num)?;
    Ok(num)
}

/// The numbers of the sessions of `project` (any, if None) with `status` (any, if None).
pub(crate) fn nums(
    conn: &Connection,
    project: Option<&str>,
    status: Option<Status>,
) -> Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(
        "SELECT num FROM sessions WHERE (?1 IS NULL OR project = ?1) AND (?2 IS NULL OR status = ?2)",
    )?;
    let nums = stmt
        .query_map(params![project, status.map(Status::as_str)], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(nums)
}

/// Deletes session `num` whole (in the caller's write transaction): its records, blob
/// references, row, journal and search rows, then the blobs no record refers to any more.
pub(crate) fn delete(conn: &Connection, num: i64) -> Result<()> {
    let (lo, hi) = schema::range(num);
    conn.execute("DELETE FROM records WHERE id BETWEEN ?1 AND ?2", [lo, hi])?;
    conn.execute(
        "DELETE FROM blob_refs WHERE record BETWEEN ?1 AND ?2",
        [lo, hi],
    )?;
    conn.execute("DELETE FROM sessions WHERE num = ?1", [num])?;
    journal::delete_session(conn, num)?;
    search_index::delete_session(conn, num)?;
    blob::collect_garbage(conn)
}

/// A session's row as stored (and as a snapshot carries it).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Row {
    pub id: String,
    pub project: Option<String>,
    pub title: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub status: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub context_window: Option<i64>,
    pub prompt_key: Option<String>,
    pub metadata: Option<String>,
    pub forked_from: Option<String>,
}

pub(crate) fn read_row(conn: &rusqlite::Connection, num: i64) -> Result<Row> {
    Ok(conn.query_row(
        "SELECT id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from
         FROM sessions WHERE num = ?1",
        [num],
        |r| {
            Ok(Row {
                id: r.get(0)?,
                project: r.get(1)?,
                title: r.get(2)?,
                provider: r.get(3)?,
                model: r.get(4)?,
                status: r.get(5)?,
                created_ms: r.get(6)?,
                updated_ms: r.get(7)?,
                context_window: r.get(8)?,
                prompt_key: r.get(9)?,
                metadata: r.get(10)?,
                forked_from: r.get(11)?,
            })
        },
    )?)
}

/// Inserts a session's row as given (an imported snapshot); returns its number.
pub(crate) fn insert_row(conn: &Connection, r: &Row) -> Result<i64> {
    conn.execute(
        "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![r.id, r.project, r.title, r.provider, r.model, r.status, r.created_ms, r.updated_ms,
            r.context_window, r.prompt_key, r.metadata, r.forked_from],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Inserts the row of a fork of session `source`: its settings, a new id, `title` if given,
/// and where it was forked from. Returns its number.
pub(crate) fn insert_fork(
    conn: &Connection,
    source: i64,
    id: &str,
    title: Option<&str>,
    forked_from: &str,
    now_ms: i64,
) -> Result<i64> {
    conn.execute(
        "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from)
         SELECT ?1, project, coalesce(?2, title), provider, model, 'active', ?3, ?3, context_window, prompt_key, metadata, ?4
         FROM sessions WHERE num = ?5",
        params![id, title, now_ms, forked_from, source],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Sets the time session `num` was last written to `updated_ms`, and no record later than it:
/// an imported session keeps the time of its origin, not of the import.
pub(crate) fn backdate(conn: &Connection, num: i64, updated_ms: i64) -> Result<()> {
    let (lo, hi) = schema::range(num);
    conn.execute(
        "UPDATE records SET written_ms = min(written_ms, ?1) WHERE id BETWEEN ?2 AND ?3",
        [updated_ms, lo, hi],
    )?;
    conn.execute(
        "UPDATE sessions SET updated_ms = ?1 WHERE num = ?2",
        [updated_ms, num],
    )?;
    Ok(())
}

impl Row {
    /// What makes this a row no session could have (`field: why`), if anything.
    pub(crate) fn problem(&self) -> Option<String> {
        let bad = |field: &str, why: &str| Some(format!("{field}: {why}"));
        if self.id.is_empty() {
            return bad("id", "must not be empty");
        }
        if Status::parse(&self.status).is_none() {
            return bad(
                "status",
                "expected 'active', 'completed', 'failed' or 'interrupted'",
            );
        }
        if self.context_window.is_some_and(|w| w < 0) {
            return bad("contextWindow", "must not be negative");
        }
        let is_object = |t: &Option<String>| {
            t.as_ref().is_none_or(|t| {
                matches!(
                    serde_json::from_str::<serde_json::Value>(t),
                    Ok(serde_json::Value::Object(_))
                )
            })
        };
        if !is_object(&self.metadata) {
            return bad("metadata", "expected the JSON text of an object");
        }
        if !is_object(&self.forked_from) {
            return bad("forkedFrom", "expected the JSON text of an object");
        }
        None
    }
}

/// (number, id) of every session, in order of number.
pub(crate) fn all(conn: &Connection) -> Result<Vec<(i64, String)>> {
    let mut stmt = conn.prepare("SELECT num, id FROM sessions ORDER BY num")?;
    let list = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(list)
}
