//! The sessions table: one row per session (its id, project, title, status, options and
//! counters). Reads and writes of single columns that the session layer needs.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::options::{SessionOptions, Status};
use crate::storage::db::{args, Db};
use crate::storage::write_order;
use crate::storage::{blob, journal, schema, search_index};

/// The context window the session was made with, if any.
pub(crate) fn context_window(conn: &Db, num: i64) -> Result<Option<u64>> {
    let window: Option<i64> = conn
        .query_row(
            "SELECT context_window FROM sessions WHERE num = ?1",
            &args![num],
            |r| r.get(0),
        )?
        .ok_or_else(|| no_row(num))?;
    Ok(window.map(|w| w as u64))
}

/// Sets the status (in the caller's write transaction), as a write of the session.
pub(crate) fn set_status(conn: &Db, num: i64, status: Status, now_ms: i64) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET status = ?1, updated_ms = ?2 WHERE num = ?3",
        &args![status.as_str(), now_ms, num],
    )?;
    write_order::touch(conn, num)
}

/// The id of session `num`.
pub(crate) fn id_of(conn: &Db, num: i64) -> Result<String> {
    conn.query_row("SELECT id FROM sessions WHERE num = ?1", &args![num], |r| {
        r.get(0)
    })?
    .ok_or_else(|| no_row(num))
}

/// The id of session `num`, None if it was deleted.
pub(crate) fn id_if_any(conn: &Db, num: i64) -> Result<Option<String>> {
    conn.query_row("SELECT id FROM sessions WHERE num = ?1", &args![num], |r| {
        r.get(0)
    })
}

/// The row number of session `id`.
pub(crate) fn num_of(conn: &Db, id: &str) -> Result<Option<i64>> {
    conn.query_row("SELECT num FROM sessions WHERE id = ?1", &args![id], |r| {
        r.get(0)
    })
}

/// The row number and prompt key of session `id`.
pub(crate) fn num_and_prompt_key(conn: &Db, id: &str) -> Result<Option<(i64, Option<String>)>> {
    conn.query_row(
        "SELECT num, prompt_key FROM sessions WHERE id = ?1",
        &args![id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// A new session's number on SQLite: above every number a session has had, deleted ones
/// included (`delete`), so a number names one session forever.
macro_rules! new_num {
    () => {
        "(SELECT max(coalesce((SELECT max(num) FROM sessions), 0), coalesce((SELECT max(num) FROM deleted_sessions), 0)) + 1)"
    };
}

/// Inserts a new session's row (in the caller's write transaction); returns its number.
pub(crate) fn insert(conn: &Db, id: &str, o: &SessionOptions, now_ms: i64) -> Result<i64> {
    let metadata = o
        .metadata
        .as_ref()
        .map(|m| serde_json::Value::Object(m.clone()).to_string());
    let num = conn
        .query_row(
            conn.pick(
                concat!(
                    "INSERT INTO sessions(num, id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata)
         VALUES (",
                    new_num!(),
                    ", ?1, ?2, ?3, ?4, ?5, 'active', ?6, ?6, ?7, ?8, ?9) RETURNING num"
                ),
                "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata)
         VALUES (?1, ?2, ?3, ?4, ?5, 'active', ?6, ?6, ?7, ?8, ?9) RETURNING num",
            ),
            &args![id, o.project, o.title, o.provider, o.model, now_ms, o.context_window.map(|w| w as i64), o.prompt_key, metadata],
            |r| r.get(0),
        )?
        .ok_or_else(|| no_row(0))?;
    write_order::touch(conn, num)?;
    Ok(num)
}

/// The numbers of the sessions of `project` (any, if None) with `status` (any, if None).
pub(crate) fn nums(conn: &Db, project: Option<&str>, status: Option<Status>) -> Result<Vec<i64>> {
    conn.rows(
        "SELECT num FROM sessions WHERE (CAST(?1 AS TEXT) IS NULL OR project = ?1) AND (CAST(?2 AS TEXT) IS NULL OR status = ?2)",
        &args![project, status.map(Status::as_str)],
        |r| r.get(0),
    )
}

/// Deletes session `num` whole (in the caller's write transaction): its records, blob
/// references, row, journal and search rows, then the blobs no record refers to any more.
/// On PostgreSQL every statement is held back and sent with the COMMIT, one round trip: the
/// locks they take (the blob collection's is the store's, `blob::collect_garbage`) are then held
/// while the server runs them, never while this process is between two calls (a process stopped
/// there would hold up every other writer that stores a blob).
pub(crate) fn delete(conn: &Db, num: i64) -> Result<()> {
    let (lo, hi) = schema::range(num);
    // The tombstone: on SQLite the number is kept, so no later session gets it (`new_num!`;
    // PostgreSQL's numbers come from a sequence, never given twice); on both, an import finds
    // the id deleted and does not bring the session back (`deleted_ms`).
    conn.execute_later(
        "INSERT INTO deleted_sessions(num, id, deleted_ms) SELECT num, id, ?2 FROM sessions WHERE num = ?1",
        &args![num, crate::model::clock::now_ms()],
    )?;
    // The row first: on PostgreSQL this waits for a write of another process to the session
    // (which updates the row last, `write_order::touch_records`) to end, and such a write that
    // comes after finds no row and is undone; the records deleted next are then all there are.
    conn.execute_later("DELETE FROM sessions WHERE num = ?1", &args![num])?;
    if conn.is_postgres() {
        // Live watches hear of it at the commit (`postgres/listen.rs`), if any is registered.
        conn.execute_later(
            "SELECT pg_notify('threadline', current_schema() || ' ' || ?1::bigint::text || ' d') \
             WHERE EXISTS (SELECT 1 FROM listeners)",
            &args![num],
        )?;
    }
    conn.execute_later(
        "DELETE FROM records WHERE id BETWEEN ?1 AND ?2",
        &args![lo, hi],
    )?;
    conn.execute_later(
        "DELETE FROM blob_refs WHERE record BETWEEN ?1 AND ?2",
        &args![lo, hi],
    )?;
    journal::delete_session(conn, num)?;
    search_index::delete_session(conn, num)?;
    blob::collect_garbage(conn)
}

/// When session `id` was last deleted (ms), if it was.
pub(crate) fn deleted_ms(conn: &Db, id: &str) -> Result<Option<i64>> {
    let ms: Option<Option<i64>> = conn.query_row(
        "SELECT max(deleted_ms) FROM deleted_sessions WHERE id = ?1",
        &args![id],
        |r| r.get(0),
    )?;
    Ok(ms.flatten())
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

pub(crate) fn read_row(conn: &Db, num: i64) -> Result<Row> {
    conn.query_row(
        "SELECT id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from
         FROM sessions WHERE num = ?1",
        &args![num],
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
    )?
    .ok_or_else(|| no_row(num))
}

/// Inserts a session's row as given (an imported snapshot); returns its number.
pub(crate) fn insert_row(conn: &Db, r: &Row) -> Result<i64> {
    conn.query_row(
        conn.pick(
            concat!(
                "INSERT INTO sessions(num, id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from)
         VALUES (",
                new_num!(),
                ", ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING num"
            ),
            "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING num",
        ),
        &args![r.id, r.project, r.title, r.provider, r.model, r.status, r.created_ms, r.updated_ms,
            r.context_window, r.prompt_key, r.metadata, r.forked_from],
        |r| r.get(0),
    )?
    .ok_or_else(|| no_row(0))
}

/// Inserts the row of a fork of session `source`: its settings, a new id, `title` if given,
/// and where it was forked from. Returns its number.
pub(crate) fn insert_fork(
    conn: &Db,
    source: i64,
    id: &str,
    title: Option<&str>,
    forked_from: &str,
    now_ms: i64,
) -> Result<i64> {
    conn.query_row(
        conn.pick(
            concat!(
                "INSERT INTO sessions(num, id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from)
         SELECT ",
                new_num!(),
                ", ?1, project, coalesce(?2, title), provider, model, 'active', ?3, ?3, context_window, prompt_key, metadata, ?4
         FROM sessions WHERE num = ?5 RETURNING num"
            ),
            "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from)
         SELECT ?1, project, coalesce(?2, title), provider, model, 'active', ?3, ?3, context_window, prompt_key, metadata, ?4
         FROM sessions WHERE num = ?5 RETURNING num",
        ),
        &args![id, title, now_ms, forked_from, source],
        |r| r.get(0),
    )?
    .ok_or_else(|| no_row(source))
}

/// Sets the time session `num` was last written to `updated_ms`, and no record later than it:
/// an imported session keeps the time of its origin, not of the import.
pub(crate) fn backdate(conn: &Db, num: i64, updated_ms: i64) -> Result<()> {
    let (lo, hi) = schema::range(num);
    conn.execute(
        conn.pick(
            "UPDATE records SET written_ms = min(written_ms, ?1) WHERE id BETWEEN ?2 AND ?3",
            "UPDATE records SET written_ms = least(written_ms, ?1) WHERE id BETWEEN ?2 AND ?3",
        ),
        &args![updated_ms, lo, hi],
    )?;
    conn.execute(
        "UPDATE sessions SET updated_ms = ?1 WHERE num = ?2",
        &args![updated_ms, num],
    )?;
    Ok(())
}

/// Sets the time session `num` was made: an imported session keeps the time it began.
pub(crate) fn set_created(conn: &Db, num: i64, created_ms: i64) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET created_ms = ?1 WHERE num = ?2",
        &args![created_ms, num],
    )?;
    Ok(())
}

/// An imported session's `forkedFrom` (JSON text of `{sessionId, uuid}`).
pub(crate) fn set_forked_from(conn: &Db, num: i64, forked_from: &str) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET forked_from = ?1 WHERE num = ?2",
        &args![forked_from, num],
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
pub(crate) fn all(conn: &Db) -> Result<Vec<(i64, String)>> {
    conn.rows("SELECT num, id FROM sessions ORDER BY num", &[], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
}

/// A session row that a read expected and did not find (deleted meanwhile, or damage).
fn no_row(num: i64) -> Error {
    Error::NotFound(format!("no session row {num}"))
}

/// Applies `u` to session `num`'s row (in the caller's write transaction), as a write of the
/// session. NOT_FOUND if the row is gone (deleted by another process).
pub(crate) fn update(
    conn: &Db,
    num: i64,
    u: &crate::model::options::SessionUpdate,
    now_ms: i64,
) -> Result<()> {
    let touched = conn.execute(
        "UPDATE sessions SET updated_ms = ?1 WHERE num = ?2",
        &args![now_ms, num],
    )?;
    if touched == 0 {
        return Err(no_row(num));
    }
    if let Some(title) = &u.title {
        conn.execute(
            "UPDATE sessions SET title = ?1 WHERE num = ?2",
            &args![title.as_deref(), num],
        )?;
    }
    if let Some(model) = &u.model {
        conn.execute(
            "UPDATE sessions SET model = ?1 WHERE num = ?2",
            &args![model.as_deref(), num],
        )?;
    }
    if let Some(window) = u.context_window {
        conn.execute(
            "UPDATE sessions SET context_window = ?1 WHERE num = ?2",
            &args![window.map(|w| w as i64), num],
        )?;
    }
    if let Some(metadata) = &u.metadata {
        let text = metadata
            .as_ref()
            .map(|m| serde_json::Value::Object(m.clone()).to_string());
        conn.execute(
            "UPDATE sessions SET metadata = ?1 WHERE num = ?2",
            &args![text.as_deref(), num],
        )?;
    }
    write_order::touch(conn, num)
}

/// The model session `num` was made with (or set to by `update`), if any.
pub(crate) fn model(conn: &Db, num: i64) -> Result<Option<String>> {
    conn.query_row(
        "SELECT model FROM sessions WHERE num = ?1",
        &args![num],
        |r| r.get(0),
    )?
    .ok_or_else(|| no_row(num))
}

/// A session as a listing of mirrored sessions needs it: id, project, metadata (JSON text) and
/// when its row was last written (ms).
pub(crate) struct Listed {
    pub id: String,
    pub project: Option<String>,
    pub metadata: Option<String>,
    pub updated_ms: i64,
}

/// Every session whose id has no `/` (a main session, not a subagent's or a sidechain's), or
/// with `under` every session whose id begins with it; in one query (a store may hold many).
pub(crate) fn listed(conn: &Db, under: Option<&str>) -> Result<Vec<Listed>> {
    let row = |r: &crate::storage::db::Row<'_>| {
        Ok(Listed {
            id: r.get(0)?,
            project: r.get(1)?,
            metadata: r.get(2)?,
            updated_ms: r.get(3)?,
        })
    };
    match under {
        None => conn.rows(
            "SELECT id, project, metadata, updated_ms FROM sessions WHERE id NOT LIKE '%/%' ORDER BY num",
            &[],
            row,
        ),
        Some(prefix) => conn.rows(
            "SELECT id, project, metadata, updated_ms FROM sessions WHERE substr(id, 1, length(?1)) = ?1 ORDER BY num",
            &args![prefix],
            row,
        ),
    }
}

/// Sets the project and provider of session `num` (in the caller's write transaction): a
/// mirrored session learns them from a later batch than its first.
pub(crate) fn set_project_provider(
    conn: &Db,
    num: i64,
    project: Option<&str>,
    provider: Option<&str>,
) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET project = ?1, provider = ?2 WHERE num = ?3",
        &args![project, provider, num],
    )?;
    Ok(())
}

/// What a live watch of the store needs of a session to tell what changed: its number, id,
/// status, how many records it holds and when it was last written (`write_order`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MarkRow {
    pub num: i64,
    pub id: String,
    pub status: String,
    pub records: i64,
    pub write_seq: i64,
}

/// The sessions of `project` (all when None) and `id` (all when None), written after
/// `after` (`write_seq`; -1: all), and among `nums` when given (a JSON array of numbers).
pub(crate) fn marks(
    conn: &Db,
    project: Option<&str>,
    id: Option<&str>,
    after: i64,
    nums: Option<&str>,
) -> Result<Vec<MarkRow>> {
    conn.rows(
        conn.pick(
            "SELECT num, id, status, records, write_seq FROM sessions
             WHERE (CAST(?1 AS TEXT) IS NULL OR project = ?1) AND (CAST(?2 AS TEXT) IS NULL OR id = ?2)
               AND write_seq > ?3 AND (CAST(?4 AS TEXT) IS NULL OR num IN (SELECT value FROM json_each(?4)))
             ORDER BY write_seq",
            "SELECT num, id, status, records, write_seq FROM sessions
             WHERE (CAST(?1 AS TEXT) IS NULL OR project = ?1) AND (CAST(?2 AS TEXT) IS NULL OR id = ?2)
               AND write_seq > ?3
               AND (CAST(?4 AS TEXT) IS NULL OR num IN (SELECT value::bigint FROM jsonb_array_elements_text(CAST(?4 AS TEXT)::jsonb)))
             ORDER BY write_seq",
        ),
        &args![project, id, after, nums],
        |r| {
            Ok(MarkRow {
                num: r.get(0)?,
                id: r.get(1)?,
                status: r.get(2)?,
                records: r.get(3)?,
                write_seq: r.get(4)?,
            })
        },
    )
}

/// The store's latest write (`write_order`) and how many sessions were ever deleted: a watch
/// that saw both unchanged knows no session was written or deleted since.
pub(crate) fn watermarks(conn: &Db) -> Result<(i64, i64)> {
    conn.query_row(
        "SELECT (SELECT coalesce(max(write_seq), 0) FROM sessions), (SELECT count(*) FROM deleted_sessions)",
        &[],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .map(|o| o.unwrap_or((0, 0)))
}
