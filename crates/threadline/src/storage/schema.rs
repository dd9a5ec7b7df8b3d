//! The store's schema, versioned with `PRAGMA user_version` and recognised by
//! `PRAGMA application_id`, and the migrations that bring an older store up to date.
//!
//! Records of a session live in one rowid range: `id = session_num << SEQ_BITS | seq`. A session's
//! log is one contiguous range of the table's B-tree, read in order without a separate index, and
//! an append writes to the end of its range.

use rusqlite::Connection;

use crate::error::{Error, Result};

/// "THLN"
pub const APPLICATION_ID: i64 = 0x5448_4C4E;
pub const VERSION: i64 = 7;
pub const SEQ_BITS: u32 = 36;

/// Migrations, in order: `MIGRATIONS[i]` brings a store from version i to i + 1.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE sessions(
  num INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  project TEXT,
  title TEXT,
  provider TEXT,
  model TEXT,
  status TEXT NOT NULL DEFAULT 'active',
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  context_window INTEGER,
  prompt_key TEXT,
  metadata TEXT,
  forked_from TEXT
);
CREATE TABLE records(
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL,
  parent_uuid TEXT,
  type TEXT NOT NULL,
  role TEXT,
  provider TEXT,
  timestamp TEXT NOT NULL,
  written_ms INTEGER NOT NULL,
  msg_index INTEGER,
  turn_start INTEGER NOT NULL DEFAULT 0,
  response_key TEXT,
  input_tokens INTEGER,
  output_tokens INTEGER,
  cache_read_tokens INTEGER,
  cache_creation_tokens INTEGER,
  state TEXT NOT NULL,
  has_blobs INTEGER NOT NULL DEFAULT 0,
  body BLOB NOT NULL,
  message BLOB
);
CREATE INDEX records_uuid ON records(uuid);
CREATE INDEX records_response ON records(response_key) WHERE response_key IS NOT NULL;
CREATE INDEX records_turn_start ON records(turn_start) WHERE turn_start = 1;
CREATE TABLE blobs(
  hash TEXT PRIMARY KEY,
  bytes INTEGER NOT NULL,
  literal BLOB NOT NULL
);
CREATE TABLE blob_refs(
  record INTEGER NOT NULL,
  hash TEXT NOT NULL,
  PRIMARY KEY(record, hash)
) WITHOUT ROWID;
CREATE INDEX blob_refs_hash ON blob_refs(hash);
"#,
    r#"
CREATE TABLE tool_calls(
  session INTEGER NOT NULL,
  id TEXT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  call_seq INTEGER NOT NULL,
  ord INTEGER NOT NULL,
  state TEXT NOT NULL,
  requested_ms INTEGER NOT NULL,
  started_ms INTEGER,
  ended_ms INTEGER,
  result_seq INTEGER,
  outcome TEXT,
  PRIMARY KEY(session, id)
) WITHOUT ROWID;
ALTER TABLE sessions ADD COLUMN owner_pid INTEGER;
ALTER TABLE sessions ADD COLUMN owner_host TEXT;
ALTER TABLE sessions ADD COLUMN owner_start INTEGER;
ALTER TABLE sessions ADD COLUMN heartbeat_ms INTEGER;
"#,
    r#"
ALTER TABLE sessions ADD COLUMN write_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_write_seq ON sessions(write_seq);
"#,
    // Checksums (checksum.rs): filled in for the rows already there by `checksum::fill`; the
    // number of records of each session, so a log that lost its last records is told from a
    // shorter one.
    r#"
ALTER TABLE records ADD COLUMN crc INTEGER;
ALTER TABLE records ADD COLUMN meta_crc INTEGER;
ALTER TABLE blobs ADD COLUMN crc INTEGER;
ALTER TABLE tool_calls ADD COLUMN crc INTEGER;
ALTER TABLE sessions ADD COLUMN records INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET records = coalesce(
  (SELECT id - (sessions.num << 36) + 1 FROM records
   WHERE id BETWEEN sessions.num << 36 AND (sessions.num << 36) + (1 << 36) - 1 ORDER BY id DESC LIMIT 1), 0);
"#,
    // (The index's table itself is made by `recall::index::CREATE` before this runs.) How many
    // of each session's records are indexed: the records stored before are indexed at the first
    // search, not here, so opening a large store stays quick.
    r#"
ALTER TABLE sessions ADD COLUMN indexed INTEGER NOT NULL DEFAULT 0;
"#,
    // Deleted sessions, by number: a number is never given to another session (sessions::insert),
    // so a record acknowledged for a deleted session (in a dead process's append log) can never
    // be replayed into a new one that took its id.
    r#"
CREATE TABLE IF NOT EXISTS deleted_sessions(
  num INTEGER PRIMARY KEY,
  id TEXT NOT NULL,
  deleted_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS deleted_sessions_id ON deleted_sessions(id);
"#,
    // The records whose response reported usage: a budgeted context of a long session finds the
    // latest (what calibrates its estimates) without reading back to it.
    concat!(
        "CREATE INDEX IF NOT EXISTS records_usage ON records(id) WHERE ",
        usage_reported!(),
        ";"
    ),
];

/// The version whose migration adds checksums: the rows already stored get theirs computed.
const CHECKSUMS: i64 = 4;
/// The version that adds the search index.
const SEARCH: i64 = 5;

/// Checks that `conn` is a Threadline store (or an empty file to make one) and migrates it.
pub fn prepare(conn: &Connection, readonly: bool) -> Result<()> {
    // One read transaction: processes creating the same new file at once must not see the
    // identity of the file half-way through another's migration (tables there, version not yet).
    let version = in_transaction(conn, "BEGIN", identify)?;
    if version > VERSION {
        return Err(newer(version));
    }
    if version == VERSION {
        return Ok(());
    }
    if readonly {
        return Err(Error::StoreIo(format!(
            "the store needs migrating from version {version} but was opened readonly"
        )));
    }
    migrate(conn)
}

/// The schema version of a Threadline store (0: an empty file to make one), or why the file is
/// not one.
fn identify(conn: &Connection) -> Result<i64> {
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(not_a_store)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(not_a_store)?;
    if app == 0 && version == 0 {
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(not_a_store)?;
        if tables > 0 {
            return Err(Error::StoreCorrupt(
                "the file is a SQLite database but not a Threadline store".into(),
            ));
        }
    } else if app != APPLICATION_ID {
        return Err(Error::StoreCorrupt(format!(
            "the file is not a Threadline store (application_id {app:#x})"
        )));
    }
    if version < 0 {
        return Err(Error::StoreCorrupt(format!(
            "the store's schema version is {version}: damaged"
        )));
    }
    Ok(version)
}

fn newer(version: i64) -> Error {
    Error::StoreVersion(format!(
        "the store has schema version {version}, newer than this library's {VERSION}: upgrade threadline"
    ))
}

/// Runs `f` between `begin` and COMMIT, rolling back if it fails.
fn in_transaction<T>(
    conn: &Connection,
    begin: &str,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    conn.execute_batch(begin).map_err(not_a_store)?;
    match f(conn) {
        Ok(v) => {
            conn.execute_batch("COMMIT")?;
            Ok(v)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

fn migrate(conn: &Connection) -> Result<()> {
    in_transaction(conn, "BEGIN IMMEDIATE", |conn| {
        // Identified again under the write lock: another process opening the same new or old
        // store at the same moment may have made or migrated it since.
        let from = identify(conn)?;
        if from > VERSION {
            return Err(newer(from));
        }
        for (to, sql) in (1..).zip(MIGRATIONS).skip(from as usize) {
            if to == SEARCH {
                conn.execute_batch(CREATE_SEARCH)?;
            }
            conn.execute_batch(sql)?;
            if to == CHECKSUMS {
                crate::storage::checksum::fill(conn)?;
                crate::storage::journal::seal_all(conn)?;
            }
        }
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {VERSION};"
        ))?;
        Ok(())
    })
}

fn not_a_store(e: rusqlite::Error) -> Error {
    match Error::from(e) {
        Error::StoreCorrupt(m) => {
            Error::StoreCorrupt(format!("the file is not a Threadline store: {m}"))
        }
        other => other,
    }
}

/// The rowid range of a session's records.
pub fn range(session_num: i64) -> (i64, i64) {
    let lo = session_num << SEQ_BITS;
    (lo, lo + (1 << SEQ_BITS) - 1)
}

/// The search index (see `search_index`): one row per indexed record, rowid = record id.
pub(crate) const CREATE_SEARCH: &str = "CREATE VIRTUAL TABLE search USING fts5(text, thinking, tool_input, tool_output, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2')";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_store_is_migrated_and_keeps_its_records() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;"
        ))
        .unwrap();
        conn.execute(
            "INSERT INTO sessions(id, status, created_ms, updated_ms) VALUES ('s', 'active', 1, 1)",
            [],
        )
        .unwrap();
        prepare(&conn, false).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, VERSION);
        let kept: i64 = conn
            .query_row(
                "SELECT count(*) FROM sessions WHERE id = 's' AND owner_pid IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kept, 1);
        let calls: i64 = conn
            .query_row("SELECT count(*) FROM tool_calls", [], |r| r.get(0))
            .unwrap();
        assert_eq!(calls, 0);
        // A version 1 store opened readonly cannot be migrated: it says so.
        let old = Connection::open_in_memory().unwrap();
        old.execute_batch(MIGRATIONS[0]).unwrap();
        old.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;"
        ))
        .unwrap();
        assert_eq!(prepare(&old, true).unwrap_err().code(), "STORE_IO");
    }
}
