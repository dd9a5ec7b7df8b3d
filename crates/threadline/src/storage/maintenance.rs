//! The store's size, what VACUUM could give back, VACUUM itself, and a consistent copy of a
//! SQLite file (`VACUUM INTO`): what `stats()`, `vacuum()` and `backup()` ask of each engine.

use std::path::Path;

use rusqlite::Connection;

use super::postgres::error::mapped;
use super::postgres::url::quote;
use crate::error::Result;
use crate::storage::db::Db;

/// What the store takes up and what VACUUM could reclaim, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Size {
    pub bytes: u64,
    pub free_bytes: u64,
    /// SQLite only: its page size and the pages on its free list
    pub pages: Option<(u64, u64)>,
}

/// The tables threadline keeps on PostgreSQL, in the store's schema.
const PG_SIZE: &str = "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')";

pub(crate) fn size(conn: &Db) -> Result<Size> {
    match conn {
        Db::Sqlite(..) => {
            let c = conn.sqlite()?;
            let pragma = |name: &str| -> Result<u64> {
                let v: i64 = c.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))?;
                Ok(v.max(0) as u64)
            };
            let page_size = pragma("page_size")?;
            let free = pragma("freelist_count")?;
            Ok(Size {
                bytes: pragma("page_count")? * page_size,
                free_bytes: free * page_size,
                pages: Some((page_size, free)),
            })
        }
        Db::Postgres(pg) => {
            let schema = pg.schema.clone();
            let row = pg
                .client()?
                .query_one(PG_SIZE, &[&schema])
                .map_err(mapped)?;
            let bytes: i64 = row.get(0);
            // What plain VACUUM frees is reused by the tables, not given back: nothing to report.
            Ok(Size {
                bytes: bytes.max(0) as u64,
                free_bytes: 0,
                pages: None,
            })
        }
    }
}

/// VACUUM: SQLite rewrites the file without its free pages; PostgreSQL marks the dead rows of
/// threadline's tables reusable. Not in a transaction (neither engine allows one).
pub(crate) fn vacuum(conn: &Db) -> Result<()> {
    match conn {
        Db::Sqlite(..) => {
            let c = conn.sqlite()?;
            c.execute_batch("VACUUM")?;
            // VACUUM wrote the whole file through the write-ahead log: give that back too.
            crate::storage::checkpoint::truncate_now(c);
            Ok(())
        }
        Db::Postgres(pg) => {
            let s = quote(&pg.schema);
            let mut client = pg.client()?;
            let existing: Vec<String> = client
                .query(
                    "SELECT tablename::text FROM pg_tables WHERE schemaname = $1",
                    &[&pg.schema],
                )
                .map_err(mapped)?
                .iter()
                .map(|r| r.get(0))
                .collect();
            if existing.is_empty() {
                return Ok(());
            }
            let list: Vec<String> = existing
                .iter()
                .map(|t| format!("{s}.{}", quote(t)))
                .collect();
            client
                .batch_execute(&format!("VACUUM {}", list.join(", ")))
                .map_err(mapped)
        }
    }
}

/// Writes a consistent copy of the SQLite file to `dest` (which must not exist): one read
/// snapshot, as of the moment it starts.
pub(crate) fn copy_into(conn: &Db, dest: &Path) -> Result<()> {
    let c = conn.sqlite()?;
    c.execute("VACUUM INTO ?1", [dest.to_string_lossy().into_owned()])?;
    Ok(())
}

/// The sessions and records a SQLite store file holds (a copy just written).
pub(crate) fn counts(path: &Path) -> Result<(u64, u64)> {
    let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let count = |sql: &str| -> Result<u64> {
        let n: i64 = c.query_row(sql, [], |r| r.get(0))?;
        Ok(n.max(0) as u64)
    };
    Ok((
        count("SELECT count(*) FROM sessions")?,
        count("SELECT count(*) FROM records")?,
    ))
}

/// Lets go of every session of the SQLite store file at `path` (a copy just written): a backup
/// is held by no process, so whoever opens it may write every session.
pub(crate) fn disown_all(path: &Path) -> Result<()> {
    let c = Connection::open(path)?;
    c.execute(
        "UPDATE sessions SET owner_pid = NULL, owner_host = NULL, owner_start = NULL, heartbeat_ms = NULL",
        [],
    )?;
    Ok(())
}
