//! The PostgreSQL schema: the same tables as the SQLite file (records keyed by
//! `num << SEQ_BITS | seq`, with the same checksummed columns, so rows move between engines
//! unchanged), in the schema the URL names, versioned in its `meta` table. Migrations run
//! under a transaction-scoped advisory lock, so processes opening one new schema at once
//! create it once.
//!
//! Differences from SQLite: session ownership is a lease (`lease.rs`: the owner and a heartbeat
//! on the server's clock, in the same columns as SQLite's owner), and the search index is a
//! `tsvector` per field with GIN indexes.

use super::client::PgClient;

use super::error::mapped;
use super::url::quote;
use crate::error::{Error, Result};
use crate::storage::schema::APPLICATION_ID;

pub const VERSION: i64 = 5;

/// Migrations, in order: `MIGRATIONS[i]` brings a schema from version i to i + 1. `{s}` is the
/// quoted schema name.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE {s}.sessions(
  num BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  project TEXT,
  title TEXT,
  provider TEXT,
  model TEXT,
  status TEXT NOT NULL DEFAULT 'active',
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  context_window BIGINT,
  prompt_key TEXT,
  metadata TEXT,
  forked_from TEXT,
  write_seq BIGINT NOT NULL DEFAULT 0,
  records BIGINT NOT NULL DEFAULT 0,
  indexed BIGINT NOT NULL DEFAULT 0,
  owner_pid BIGINT,
  owner_host TEXT,
  owner_start BIGINT,
  heartbeat_ms BIGINT
);
CREATE INDEX sessions_write_seq ON {s}.sessions(write_seq);
CREATE SEQUENCE {s}.write_seq;
CREATE TABLE {s}.records(
  id BIGINT PRIMARY KEY,
  uuid TEXT NOT NULL,
  parent_uuid TEXT,
  type TEXT NOT NULL,
  role TEXT,
  provider TEXT,
  timestamp TEXT NOT NULL,
  written_ms BIGINT NOT NULL,
  msg_index BIGINT,
  turn_start BIGINT NOT NULL DEFAULT 0,
  response_key TEXT,
  input_tokens BIGINT,
  output_tokens BIGINT,
  cache_read_tokens BIGINT,
  cache_creation_tokens BIGINT,
  state TEXT NOT NULL,
  has_blobs BIGINT NOT NULL DEFAULT 0,
  body BYTEA NOT NULL,
  message BYTEA,
  crc BIGINT,
  meta_crc BIGINT
);
CREATE INDEX records_uuid ON {s}.records(uuid);
CREATE INDEX records_response ON {s}.records(response_key) WHERE response_key IS NOT NULL;
CREATE INDEX records_turn_start ON {s}.records(id) WHERE turn_start = 1;
CREATE TABLE {s}.blobs(
  hash TEXT PRIMARY KEY,
  bytes BIGINT NOT NULL,
  literal BYTEA NOT NULL,
  crc BIGINT
);
CREATE TABLE {s}.blob_refs(
  record BIGINT NOT NULL,
  hash TEXT NOT NULL,
  PRIMARY KEY(record, hash)
);
CREATE INDEX blob_refs_hash ON {s}.blob_refs(hash);
CREATE TABLE {s}.tool_calls(
  session BIGINT NOT NULL,
  id TEXT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  call_seq BIGINT NOT NULL,
  ord BIGINT NOT NULL,
  state TEXT NOT NULL,
  requested_ms BIGINT NOT NULL,
  started_ms BIGINT,
  ended_ms BIGINT,
  result_seq BIGINT,
  outcome TEXT,
  crc BIGINT,
  PRIMARY KEY(session, id)
);
CREATE TABLE {s}.search(
  id BIGINT PRIMARY KEY,
  text TSVECTOR,
  thinking TSVECTOR,
  tool_input TSVECTOR,
  tool_output TSVECTOR
);
CREATE INDEX search_text ON {s}.search USING GIN(text);
CREATE INDEX search_thinking ON {s}.search USING GIN(thinking);
CREATE INDEX search_tool_input ON {s}.search USING GIN(tool_input);
CREATE INDEX search_tool_output ON {s}.search USING GIN(tool_output);
"#,
    // Appends slowed as a session grew (0.96 ms each at first, 2.6 ms after 3,000 records):
    // - a lookup by uuid or response key within a session (`... = $1 AND id BETWEEN $2 AND $3`) got
    //   a generic plan that ANDs the key's index with a scan of the session's whole id range. With
    //   the id in the index (as SQLite's index holds the rowid) it is one index probe;
    // - every append updates its session's row (write_seq, records). With an index on a changed
    //   column each update left a dead row version that later updates walked past. Nothing reads
    //   write_seq through an index (the sequence gives it; sorting is by row), so without the index
    //   the update is a HOT update, in place on its page, which room left on the page makes likely.
    r#"
DROP INDEX {s}.records_uuid;
CREATE INDEX records_uuid ON {s}.records(uuid, id);
DROP INDEX {s}.records_response;
CREATE INDEX records_response ON {s}.records(response_key, id) WHERE response_key IS NOT NULL;
DROP INDEX {s}.sessions_write_seq;
ALTER TABLE {s}.sessions SET (fillfactor = 50);
INSERT INTO {s}.meta VALUES ('store_id', (random() * 9.2e18)::bigint);
"#,
    // The records whose response reported usage (SQLite's migration 7 says why).
    concat!(
        "CREATE INDEX records_usage ON {s}.records(id) WHERE ",
        usage_reported!(),
        ";"
    ),
    // Deleted sessions, by number (SQLite's migration 6): an import does not bring a deleted
    // session back unless asked to.
    r#"
CREATE TABLE {s}.deleted_sessions(
  num BIGINT PRIMARY KEY,
  id TEXT NOT NULL,
  deleted_ms BIGINT NOT NULL
);
CREATE INDEX deleted_sessions_id ON {s}.deleted_sessions(id);
"#,
    // The live watches listening now, by server process (`listen.rs`): writers send their
    // NOTIFY only while a row is here, since notifying transactions commit one at a time.
    r#"
CREATE TABLE {s}.listeners(
  backend_pid INT PRIMARY KEY,
  since_ms BIGINT NOT NULL
);
"#,
];

/// The store's random id (written by the migration to version 2): what tells two stores apart
/// whatever URL names them.
pub(crate) fn store_id(client: &mut PgClient) -> Result<i64> {
    let row = client
        .query_one("SELECT value FROM meta WHERE key = 'store_id'", &[])
        .map_err(mapped)?;
    Ok(row.get(0))
}

/// Creates the schema or brings it up to date; a readonly store only checks it. A migration
/// rebuilds indexes, which takes a while on a large store: its statements may take 4x
/// `busy_ms` (the connection's bound for any other).
pub(crate) fn prepare(
    client: &mut PgClient,
    schema: &str,
    readonly: bool,
    busy_ms: u32,
) -> Result<()> {
    let version = read_version(client, schema)?;
    check_version(schema, version)?;
    if version == Some(VERSION) {
        return Ok(());
    }
    if readonly {
        return Err(Error::StoreIo(format!(
            "PostgreSQL: schema '{schema}' holds no Threadline store (or an older one); open it once for writing"
        )));
    }
    let long = busy_ms.saturating_mul(4);
    client
        .batch_execute(&format!("BEGIN; SET LOCAL statement_timeout = {long}"))
        .map_err(mapped)?;
    let wait = client.wait();
    client.set_wait(super::call_wait(std::time::Duration::from_millis(
        u64::from(long),
    )));
    let done = migrate(client, schema);
    let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = client.batch_execute(end).map_err(mapped);
    client.set_wait(wait);
    done.and(ended)
}

/// Inside prepare's transaction: creates or migrates the schema.
fn migrate(tx: &mut PgClient, schema: &str) -> Result<()> {
    let s = quote(schema);
    // One process migrates; the others wait here, then find it done.
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&(APPLICATION_ID as i32), &schema],
    )
    .map_err(mapped)?;
    tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {s}"))
        .map_err(mapped)?;
    let found = schema_state(tx, schema)?;
    let from = match found {
        SchemaState::Empty => {
            tx.batch_execute(&format!(
                "CREATE TABLE {s}.meta(key TEXT PRIMARY KEY, value BIGINT NOT NULL);
                 INSERT INTO {s}.meta VALUES ('application_id', {APPLICATION_ID}), ('version', 0);"
            ))
            .map_err(mapped)?;
            0
        }
        SchemaState::Store(v) => v,
        SchemaState::Foreign => return Err(foreign(schema)),
    };
    check_version(schema, Some(from))?;
    for (i, m) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        tx.batch_execute(&m.replace("{s}", &s)).map_err(mapped)?;
        tx.execute(
            &format!("UPDATE {s}.meta SET value = $1 WHERE key = 'version'"),
            &[&(i as i64 + 1)],
        )
        .map_err(mapped)?;
    }
    Ok(())
}

enum SchemaState {
    /// no tables at all: a new store
    Empty,
    /// a Threadline store of this version
    Store(i64),
    /// tables that are not a Threadline store's
    Foreign,
}

fn schema_state(client: &mut PgClient, schema: &str) -> Result<SchemaState> {
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&schema],
        )
        .map_err(mapped)?
        .get(0);
    if tables == 0 {
        return Ok(SchemaState::Empty);
    }
    Ok(match read_meta(client, schema)? {
        Some(v) => SchemaState::Store(v),
        None => SchemaState::Foreign,
    })
}

/// The version of the store in `schema`, None if there is none.
fn read_version(client: &mut PgClient, schema: &str) -> Result<Option<i64>> {
    match schema_state(client, schema)? {
        SchemaState::Empty => Ok(None),
        SchemaState::Store(v) => Ok(Some(v)),
        SchemaState::Foreign => Err(foreign(schema)),
    }
}

/// The `meta` table's version if it is a Threadline store's (its application id matches).
fn read_meta(client: &mut PgClient, schema: &str) -> Result<Option<i64>> {
    let has_meta: bool = client
        .query_one(
            "SELECT EXISTS(SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'meta')",
            &[&schema],
        )
        .map_err(mapped)?
        .get(0);
    if !has_meta {
        return Ok(None);
    }
    let s = quote(schema);
    let rows = client
        .query(&format!("SELECT key, value FROM {s}.meta"), &[])
        .map_err(mapped)?;
    let get = |k: &str| {
        rows.iter()
            .find(|r| r.get::<_, String>(0) == k)
            .map(|r| r.get::<_, i64>(1))
    };
    match (get("application_id"), get("version")) {
        (Some(APPLICATION_ID), Some(v)) => Ok(Some(v)),
        _ => Ok(None),
    }
}

fn check_version(schema: &str, version: Option<i64>) -> Result<()> {
    match version {
        Some(v) if v > VERSION => Err(Error::StoreVersion(format!(
            "PostgreSQL schema '{schema}' was written by a newer Threadline (schema version {v}; this one knows up to {VERSION})"
        ))),
        _ => Ok(()),
    }
}

fn foreign(schema: &str) -> Error {
    Error::StoreCorrupt(format!(
        "PostgreSQL schema '{schema}' holds tables that are not a Threadline store"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::options::StoreOptions;
    use crate::storage::postgres::{connect, test_server, PgUrl};

    fn url(name: &str) -> Option<PgUrl> {
        let base = test_server::url()?;
        Some(PgUrl::parse(&test_server::with_schema(&base, name)).unwrap())
    }

    fn drop_schema(url: &PgUrl) {
        let mut c = PgClient::connect(&url.config, tokio_postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            url.quoted_schema()
        ))
        .unwrap();
    }

    #[test]
    fn a_new_schema_is_created_at_the_current_version_and_opened_again_as_is() {
        let Some(url) = url("create") else { return };
        drop_schema(&url);
        let mut c = connect(&url, &StoreOptions::default()).unwrap();
        assert_eq!(read_version(&mut c, &url.schema).unwrap(), Some(VERSION));
        let tables: i64 = c
            .query_one(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
                &[&url.schema],
            )
            .unwrap()
            .get(0);
        assert_eq!(
            tables, 9,
            "meta, sessions, records, blobs, blob_refs, tool_calls, search, deleted_sessions, listeners"
        );
        drop(c);
        connect(&url, &StoreOptions::default()).unwrap();
        drop_schema(&url);
    }

    #[test]
    fn a_version_1_schema_is_migrated_with_its_rows_kept() {
        let Some(url) = url("migrate1") else { return };
        drop_schema(&url);
        let s = url.quoted_schema();
        let mut c = PgClient::connect(&url.config, tokio_postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "CREATE SCHEMA {s};
             CREATE TABLE {s}.meta(key TEXT PRIMARY KEY, value BIGINT NOT NULL);
             INSERT INTO {s}.meta VALUES ('application_id', {APPLICATION_ID}), ('version', 1);
             {}
             INSERT INTO {s}.sessions(id, created_ms, updated_ms) VALUES ('kept', 1, 2);",
            MIGRATIONS[0].replace("{s}", &s)
        ))
        .unwrap();
        let mut m = connect(&url, &StoreOptions::default()).unwrap();
        assert_eq!(read_version(&mut m, &url.schema).unwrap(), Some(VERSION));
        let id = store_id(&mut m).unwrap();
        let mut index = |name: &str| -> Option<String> {
            c.query(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2",
                &[&url.schema, &name],
            )
            .unwrap()
            .first()
            .map(|r| r.get(0))
        };
        assert!(index("records_uuid").unwrap().contains("(uuid, id)"));
        assert!(index("records_response")
            .unwrap()
            .contains("(response_key, id)"));
        assert_eq!(index("sessions_write_seq"), None);
        let kept: String = c
            .query_one(&format!("SELECT id FROM {s}.sessions"), &[])
            .unwrap()
            .get(0);
        assert_eq!(kept, "kept");
        // Opened again, it is as it was: the same id.
        let mut again = connect(&url, &StoreOptions::default()).unwrap();
        assert_eq!(store_id(&mut again).unwrap(), id);
        drop_schema(&url);
    }

    #[test]
    fn a_version_4_schema_gets_the_listeners_table_with_its_rows_kept() {
        let Some(url) = url("migrate4") else { return };
        drop_schema(&url);
        let s = url.quoted_schema();
        let mut c = PgClient::connect(&url.config, tokio_postgres::NoTls).unwrap();
        let v4: Vec<String> = MIGRATIONS[..4]
            .iter()
            .map(|m| m.replace("{s}", &s))
            .collect();
        c.batch_execute(&format!(
            "CREATE SCHEMA {s};
             CREATE TABLE {s}.meta(key TEXT PRIMARY KEY, value BIGINT NOT NULL);
             INSERT INTO {s}.meta VALUES ('application_id', {APPLICATION_ID}), ('version', 4);
             {}
             INSERT INTO {s}.sessions(id, created_ms, updated_ms) VALUES ('kept', 1, 2);",
            v4.join("\n")
        ))
        .unwrap();
        let mut m = connect(&url, &StoreOptions::default()).unwrap();
        assert_eq!(read_version(&mut m, &url.schema).unwrap(), Some(VERSION));
        let listeners: i64 = c
            .query_one(&format!("SELECT count(*) FROM {s}.listeners"), &[])
            .unwrap()
            .get(0);
        assert_eq!(listeners, 0, "the table is there, empty");
        let kept: String = c
            .query_one(&format!("SELECT id FROM {s}.sessions"), &[])
            .unwrap()
            .get(0);
        assert_eq!(kept, "kept");
        drop_schema(&url);
    }

    #[test]
    fn processes_creating_one_schema_at_once_create_it_once() {
        let Some(url) = url("race") else { return };
        drop_schema(&url);
        let url = std::sync::Arc::new(url);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let url = url.clone();
                std::thread::spawn(move || connect(&url, &StoreOptions::default()).map(|_| ()))
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        drop_schema(&url);
    }

    #[test]
    fn a_newer_schema_is_store_version_and_foreign_tables_are_store_corrupt() {
        let Some(url) = url("version") else { return };
        drop_schema(&url);
        let mut c = connect(&url, &StoreOptions::default()).unwrap();
        let s = url.quoted_schema();
        c.batch_execute(&format!(
            "UPDATE {s}.meta SET value = 99 WHERE key = 'version'"
        ))
        .unwrap();
        let e = connect(&url, &StoreOptions::default()).err().unwrap();
        assert_eq!(e.code(), "STORE_VERSION", "{}", e.message());
        c.batch_execute(&format!(
            "DROP SCHEMA {s} CASCADE; CREATE SCHEMA {s}; CREATE TABLE {s}.notes(x int)"
        ))
        .unwrap();
        let e = connect(&url, &StoreOptions::default()).err().unwrap();
        assert_eq!(e.code(), "STORE_CORRUPT", "{}", e.message());
        // Nothing of the foreign schema was changed.
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
                &[&url.schema],
            )
            .unwrap()
            .get(0);
        assert_eq!(n, 1);
        drop_schema(&url);
    }

    #[test]
    fn a_readonly_store_does_not_create_its_schema() {
        let Some(url) = url("readonly") else { return };
        drop_schema(&url);
        let options = StoreOptions {
            readonly: true,
            ..Default::default()
        };
        let e = connect(&url, &options).err().unwrap();
        assert_eq!(e.code(), "STORE_IO", "{}", e.message());
        let mut c = PgClient::connect(&url.config, tokio_postgres::NoTls).unwrap();
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
                &[&url.schema],
            )
            .unwrap()
            .get(0);
        assert_eq!(n, 0);
    }
}
