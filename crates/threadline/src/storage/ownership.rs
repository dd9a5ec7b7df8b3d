//! Session ownership: the process that writes a session holds it (its pid, host and process
//! start time in the session's row, with a heartbeat). A second live process that tries to write
//! gets SESSION_LOCKED; readers never look. An owner that is gone (its pid no longer runs, or runs
//! a different program started later) holds nothing: its session shows in
//! `interrupted_sessions` if it was left active, and the next writer takes it over. On
//! PostgreSQL the claim is a lease on the server's clock (`postgres/lease.rs`).

use crate::error::Result;
use crate::storage::db::{args, Db};
use crate::storage::owner::{locked, me, Owner};
use crate::storage::postgres::lease;

/// A writer refreshes its heartbeat at most this often.
pub const HEARTBEAT_MS: i64 = 10_000;

/// The session's owner, if one is recorded.
pub fn read(conn: &Db, num: i64) -> Result<Option<Owner>> {
    conn.query_row(
        "SELECT owner_pid, owner_host, owner_start, heartbeat_ms FROM sessions WHERE num = ?1 AND owner_pid IS NOT NULL",
        &args![num],
        |r| {
            Ok(Owner {
                pid: r.get(0)?,
                host: r.get::<Option<String>>(1)?.unwrap_or_default(),
                start: r.get::<Option<i64>>(2)?.unwrap_or(0),
                heartbeat_ms: r.get::<Option<i64>>(3)?.unwrap_or(0),
            })
        },
    )
}

/// Makes this process the session's owner, inside the caller's write transaction. Returns the
/// time of the heartbeat written. SESSION_LOCKED if another live process owns it.
pub fn claim(conn: &Db, num: i64, session_id: &str, now_ms: i64) -> Result<i64> {
    if let Db::Postgres(pg) = conn {
        lease::claim(&mut *pg.client()?, &pg.schema, num, session_id)?;
        return Ok(now_ms);
    }
    if let Some(o) = read(conn, num)? {
        if !o.is_me() && o.alive(now_ms) {
            return Err(locked(session_id, &o));
        }
    }
    let m = me();
    let claimed = conn.execute(
        "UPDATE sessions SET owner_pid = ?1, owner_host = ?2, owner_start = ?3, heartbeat_ms = ?4 WHERE num = ?5",
        &args![m.pid, m.host, m.start, now_ms, num],
    )?;
    if claimed == 0 {
        return Err(gone(session_id));
    }
    Ok(now_ms)
}

/// A session deleted while a handle on it stayed open.
pub(crate) use crate::storage::owner::gone;

/// Gives up ownership if this process holds it.
pub fn release(conn: &Db, num: i64) -> Result<()> {
    if let Db::Postgres(pg) = conn {
        return lease::release(&mut *pg.client()?, &pg.schema, num);
    }
    let m = me();
    conn.execute(
        "UPDATE sessions SET owner_pid = NULL, owner_host = NULL, owner_start = NULL, heartbeat_ms = NULL
         WHERE num = ?1 AND owner_pid = ?2 AND owner_host = ?3 AND owner_start = ?4",
        &args![num, m.pid, m.host, m.start],
    )?;
    Ok(())
}

/// On PostgreSQL, renews the heartbeat of the sessions this process still holds among `nums`
/// and returns them; on SQLite (where a holder on this host is known by its pid) nothing.
pub fn renew(conn: &Db, nums: &[i64]) -> Result<Vec<i64>> {
    match conn {
        Db::Postgres(pg) => lease::renew(&mut *pg.client()?, &pg.schema, nums),
        Db::Sqlite(..) => Ok(Vec::new()),
    }
}

/// SESSION_LOCKED unless the session is free, ours, or held by a process that is gone.
pub fn check_free(conn: &Db, num: i64, session_id: &str, now_ms: i64) -> Result<()> {
    let now_ms = server_now(conn)?.unwrap_or(now_ms);
    match read(conn, num)? {
        Some(o) if !o.is_me() && o.alive(now_ms) => Err(locked(session_id, &o)),
        _ => Ok(()),
    }
}

/// Sessions left active by an owner that is gone.
pub fn interrupted(conn: &Db, now_ms: i64) -> Result<Vec<i64>> {
    if let Db::Postgres(pg) = conn {
        return lease::interrupted(&mut *pg.client()?, &pg.schema);
    }
    let rows = conn.rows(
        "SELECT num, owner_pid, owner_host, owner_start, heartbeat_ms FROM sessions
         WHERE status = 'active' AND owner_pid IS NOT NULL ORDER BY num",
        &[],
        |r| {
            Ok((
                r.get::<i64>(0)?,
                Owner {
                    pid: r.get(1)?,
                    host: r.get::<Option<String>>(2)?.unwrap_or_default(),
                    start: r.get::<Option<i64>>(3)?.unwrap_or(0),
                    heartbeat_ms: r.get::<Option<i64>>(4)?.unwrap_or(0),
                },
            ))
        },
    )?;
    Ok(rows
        .into_iter()
        .filter(|(_, o)| !o.alive(now_ms))
        .map(|(num, _)| num)
        .collect())
}

/// PostgreSQL's clock, the one its leases' heartbeats are written by (None on SQLite, where
/// every writer shares the machine's clock).
fn server_now(conn: &Db) -> Result<Option<i64>> {
    match conn {
        Db::Sqlite(..) => Ok(None),
        Db::Postgres(_) => conn.query_row(
            "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint",
            &[],
            |r| r.get(0),
        ),
    }
}
