//! Session ownership on PostgreSQL: a lease. The writing process (pid, host, start time, as on
//! SQLite) holds a session through its row, with a heartbeat taken from the server's clock, so
//! hosts with skewed clocks agree on when a lease has run out. Another writer gets
//! SESSION_LOCKED while the holder is alive: on the same host, while its pid runs; on another
//! host, until its heartbeat is `REMOTE_STALE_MS` old. Writes renew the heartbeat, and so does
//! an open store's background thread (`shared::start_heartbeat`) for the sessions it holds, so a
//! live holder keeps them while idle. A dead holder's active sessions are interrupted sessions,
//! and the next writer takes them over.
//!
//! Why a lease and not an advisory lock that dies with the connection: advisory locks are tied
//! to one server session, so they break behind a transaction-pooling proxy (PgBouncer) and are
//! missing or partial in databases that speak PostgreSQL's protocol (CockroachDB, YugabyteDB);
//! a network partition also holds one until TCP keepalive gives up. A lease is a plain row
//! update, in the append's own transaction, under the row lock that `FOR UPDATE` takes.

use super::client::PgClient;
use super::error::mapped;
use super::url::quote;
use crate::error::Result;
use crate::storage::owner::{self, Owner};

/// The server's clock in milliseconds (one clock for every host).
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// How many times a claim reads the row again when it changed between its read and its update
/// (a heartbeat, another claim) before it waits on the row lock instead.
const CLAIM_TRIES: usize = 4;

/// Holds session `num` for this process (inside the caller's transaction): SESSION_LOCKED if
/// another live process holds it. Returns the heartbeat written (server time).
///
/// The row is read without a lock and then updated only if it is still as read (a compare and
/// set), so a claim that ends in SESSION_LOCKED never locks the holder's row: a contender stopped
/// (SIGSTOP, a debugger, a swapped-out host) between its read and its rollback would otherwise
/// hold up every append of the holder, which updates that row, until it ran again.
pub(crate) fn claim(c: &mut PgClient, schema: &str, num: i64, session_id: &str) -> Result<i64> {
    let s = quote(schema);
    for _ in 0..CLAIM_TRIES {
        let row = c
            .query(
                &format!(
                    "SELECT owner_pid, owner_host, owner_start, heartbeat_ms, {NOW_MS}
                     FROM {s}.sessions WHERE num = $1"
                ),
                &[&num],
            )
            .map_err(mapped)?
            .pop()
            .ok_or_else(|| owner::gone(session_id))?;
        let seen = Seen::of(&row);
        if let Some(holder) = seen.holder() {
            if !holder.is_me() && holder.alive(row.get(4)) {
                return Err(owner::locked(session_id, &holder));
            }
        }
        let m = owner::me();
        let taken = c
            .query(
                &format!(
                    "UPDATE {s}.sessions SET owner_pid = $1, owner_host = $2, owner_start = $3, heartbeat_ms = {NOW_MS}
                     WHERE num = $4 AND owner_pid IS NOT DISTINCT FROM $5 AND owner_host IS NOT DISTINCT FROM $6
                       AND owner_start IS NOT DISTINCT FROM $7 AND heartbeat_ms IS NOT DISTINCT FROM $8
                     RETURNING heartbeat_ms"
                ),
                &[&m.pid, &m.host, &m.start, &num, &seen.pid, &seen.host, &seen.start, &seen.heartbeat_ms],
            )
            .map_err(mapped)?
            .pop();
        if let Some(taken) = taken {
            return Ok(taken.get(0));
        }
    }
    claim_locked(c, &s, num, session_id)
}

/// The owner columns of a session's row as a claim read them.
struct Seen {
    pid: Option<i64>,
    host: Option<String>,
    start: Option<i64>,
    heartbeat_ms: Option<i64>,
}

impl Seen {
    fn of(row: &tokio_postgres::Row) -> Seen {
        Seen {
            pid: row.get(0),
            host: row.get(1),
            start: row.get(2),
            heartbeat_ms: row.get(3),
        }
    }

    fn holder(&self) -> Option<Owner> {
        Some(Owner {
            pid: self.pid?,
            host: self.host.clone().unwrap_or_default(),
            start: self.start.unwrap_or(0),
            heartbeat_ms: self.heartbeat_ms.unwrap_or(0),
        })
    }
}

/// A claim under the row lock (`FOR UPDATE`), for a row that kept changing under the compare
/// and set: it waits for the other writer's transaction and decides on what that left.
fn claim_locked(c: &mut PgClient, s: &str, num: i64, session_id: &str) -> Result<i64> {
    let row = c
        .query(
            &format!(
                "SELECT owner_pid, owner_host, owner_start, heartbeat_ms, {NOW_MS}
                 FROM {s}.sessions WHERE num = $1 FOR UPDATE"
            ),
            &[&num],
        )
        .map_err(mapped)?
        .pop()
        .ok_or_else(|| owner::gone(session_id))?;
    let now: i64 = row.get(4);
    if let Some(holder) = Seen::of(&row).holder() {
        if !holder.is_me() && holder.alive(now) {
            return Err(owner::locked(session_id, &holder));
        }
    }
    let m = owner::me();
    c.execute(
        &format!(
            "UPDATE {s}.sessions SET owner_pid = $1, owner_host = $2, owner_start = $3, heartbeat_ms = $4
             WHERE num = $5"
        ),
        &[&m.pid, &m.host, &m.start, &now, &num],
    )
    .map_err(mapped)?;
    Ok(now)
}

/// Lets go of session `num` if this process holds it.
pub(crate) fn release(c: &mut PgClient, schema: &str, num: i64) -> Result<()> {
    let s = quote(schema);
    let m = owner::me();
    c.execute(
        &format!(
            "UPDATE {s}.sessions SET owner_pid = NULL, owner_host = NULL, owner_start = NULL, heartbeat_ms = NULL
             WHERE num = $1 AND owner_pid = $2 AND owner_host = $3 AND owner_start = $4"
        ),
        &[&num, &m.pid, &m.host, &m.start],
    )
    .map_err(mapped)?;
    Ok(())
}

/// Renews the heartbeat of the sessions in `nums` that this process still holds (a store's
/// background heartbeat, so a holder that is alive but idle keeps its sessions). Returns the
/// sessions renewed.
pub(crate) fn renew(c: &mut PgClient, schema: &str, nums: &[i64]) -> Result<Vec<i64>> {
    let s = quote(schema);
    let m = owner::me();
    let rows = c
        .query(
            &format!(
                "UPDATE {s}.sessions SET heartbeat_ms = {NOW_MS}
                 WHERE num = ANY($1) AND owner_pid = $2 AND owner_host = $3 AND owner_start = $4
                 RETURNING num"
            ),
            &[&nums, &m.pid, &m.host, &m.start],
        )
        .map_err(mapped)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Sessions left active by a holder that is gone (its pid on this host no longer runs, or its
/// heartbeat on another host is stale), by the server's clock.
pub(crate) fn interrupted(c: &mut PgClient, schema: &str) -> Result<Vec<i64>> {
    let s = quote(schema);
    let rows = c
        .query(
            &format!(
                "SELECT num, owner_pid, owner_host, owner_start, heartbeat_ms, {NOW_MS}
                 FROM {s}.sessions WHERE status = 'active' AND owner_pid IS NOT NULL ORDER BY num"
            ),
            &[],
        )
        .map_err(mapped)?;
    Ok(rows
        .iter()
        .filter(|r| {
            let holder = Owner {
                pid: r.get(1),
                host: r.get::<_, Option<String>>(2).unwrap_or_default(),
                start: r.get::<_, Option<i64>>(3).unwrap_or(0),
                heartbeat_ms: r.get::<_, Option<i64>>(4).unwrap_or(0),
            };
            !holder.alive(r.get(5))
        })
        .map(|r| r.get(0))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::options::StoreOptions;
    use crate::storage::owner::REMOTE_STALE_MS;
    use crate::storage::postgres::{connect, test_server, PgUrl};

    fn setup(name: &str) -> Option<(PgUrl, PgClient, i64)> {
        let base = test_server::url()?;
        let url = PgUrl::parse(&test_server::with_schema(&base, name)).unwrap();
        let mut c = PgClient::connect(&url.config, tokio_postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            url.quoted_schema()
        ))
        .unwrap();
        let mut c = connect(&url, &StoreOptions::default()).unwrap();
        let s = url.quoted_schema();
        let num: i64 = c
            .query_one(
                &format!("INSERT INTO {s}.sessions(id, created_ms, updated_ms) VALUES ('s1', 0, 0) RETURNING num"),
                &[],
            )
            .unwrap()
            .get(0);
        Some((url, c, num))
    }

    /// Another host's process holds the session, with its heartbeat `age_ms` ago.
    fn held_elsewhere(c: &mut PgClient, url: &PgUrl, num: i64, age_ms: i64) {
        let s = url.quoted_schema();
        c.execute(
            &format!("UPDATE {s}.sessions SET owner_pid = 4242, owner_host = 'other-host', owner_start = 7, heartbeat_ms = {NOW_MS} - $1 WHERE num = $2"),
            &[&age_ms, &num],
        )
        .unwrap();
    }

    #[test]
    fn a_live_holder_on_another_host_locks_the_session_until_its_heartbeat_is_stale() {
        let Some((url, mut c, num)) = setup("lease_remote") else {
            return;
        };
        held_elsewhere(&mut c, &url, num, 1_000);
        c.batch_execute("BEGIN").unwrap();
        let e = claim(&mut c, &url.schema, num, "s1").err().unwrap();
        assert_eq!(e.code(), "SESSION_LOCKED", "{}", e.message());
        assert!(e.message().contains("other-host"), "{}", e.message());
        c.batch_execute("ROLLBACK").unwrap();
        assert_eq!(interrupted(&mut c, &url.schema).unwrap(), Vec::<i64>::new());

        // The other host died: once its heartbeat is stale, the session is interrupted, and
        // this process takes it over.
        held_elsewhere(&mut c, &url, num, REMOTE_STALE_MS + 1_000);
        assert_eq!(interrupted(&mut c, &url.schema).unwrap(), vec![num]);
        c.batch_execute("BEGIN").unwrap();
        claim(&mut c, &url.schema, num, "s1").unwrap();
        c.batch_execute("COMMIT").unwrap();
        assert_eq!(interrupted(&mut c, &url.schema).unwrap(), Vec::<i64>::new());
        release(&mut c, &url.schema, num).unwrap();
        let free: Option<i64> = c
            .query_one(
                &format!(
                    "SELECT owner_pid FROM {}.sessions WHERE num = $1",
                    url.quoted_schema()
                ),
                &[&num],
            )
            .unwrap()
            .get(0);
        assert_eq!(free, None);
    }

    #[test]
    fn a_claim_refused_with_session_locked_leaves_the_holders_row_unlocked() {
        let Some((url, mut c, num)) = setup("lease_refused") else {
            return;
        };
        held_elsewhere(&mut c, &url, num, 1_000);
        // A contender's claim is refused, and its transaction stays open (the contender stopped
        // before its rollback).
        let options = StoreOptions {
            busy_timeout_ms: 300,
            ..Default::default()
        };
        let mut contender = connect(&url, &options).unwrap();
        contender.batch_execute("BEGIN").unwrap();
        let e = claim(&mut contender, &url.schema, num, "s1").err().unwrap();
        assert_eq!(e.code(), "SESSION_LOCKED", "{}", e.message());
        // The holder's write of the row (what every append does last) goes through at once.
        let mut holder = connect(&url, &options).unwrap();
        let s = url.quoted_schema();
        holder
            .batch_execute(&format!(
                "SET lock_timeout = '200ms'; UPDATE {s}.sessions SET records = records + 1 WHERE num = {num}"
            ))
            .unwrap();
        contender.batch_execute("ROLLBACK").unwrap();
    }

    #[test]
    fn an_open_store_renews_the_lease_of_a_session_it_holds_without_writing() {
        let Some(base) = test_server::url() else {
            return;
        };
        let url = test_server::with_schema(&base, "lease_heartbeat");
        let parsed = PgUrl::parse(&url).unwrap();
        let mut c = PgClient::connect(&parsed.config, tokio_postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            parsed.quoted_schema()
        ))
        .unwrap();
        let store = crate::store::Store::open(Some(&url), StoreOptions::default()).unwrap();
        let session = store
            .create_session(crate::model::options::SessionOptions::default())
            .unwrap();
        session
            .append(serde_json::json!({"role": "user", "content": "hi"}), None)
            .unwrap();
        let s = parsed.quoted_schema();
        let beat = |c: &mut PgClient| -> i64 {
            c.query_one(&format!("SELECT heartbeat_ms FROM {s}.sessions"), &[])
                .unwrap()
                .get(0)
        };
        let first = beat(&mut c);
        // No write: the store's heartbeat renews the lease within 1.5 periods.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let renewed = loop {
            std::thread::sleep(std::time::Duration::from_millis(250));
            let now = beat(&mut c);
            if now > first {
                break now;
            }
            assert!(std::time::Instant::now() < deadline, "no heartbeat in 30 s");
        };
        assert!(renewed - first >= crate::storage::ownership::HEARTBEAT_MS - 1_000);
        assert!(renewed - first < 3 * crate::storage::ownership::HEARTBEAT_MS);
        // Closed, the store lets go of the session and renews nothing more.
        store.close().unwrap();
        let owner: Option<i64> = c
            .query_one(&format!("SELECT owner_pid FROM {s}.sessions"), &[])
            .unwrap()
            .get(0);
        assert_eq!(owner, None);
    }

    #[test]
    fn a_dead_process_on_this_host_holds_nothing() {
        let Some((url, mut c, num)) = setup("lease_local") else {
            return;
        };
        // A process that ran and is gone: its pid no longer runs.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i64;
        child.wait().unwrap();
        let s = url.quoted_schema();
        c.execute(
            &format!("UPDATE {s}.sessions SET owner_pid = $1, owner_host = $2, owner_start = 1, heartbeat_ms = {NOW_MS} WHERE num = $3"),
            &[&pid, &owner::me().host, &num],
        )
        .unwrap();
        assert_eq!(interrupted(&mut c, &url.schema).unwrap(), vec![num]);
        c.batch_execute("BEGIN").unwrap();
        claim(&mut c, &url.schema, num, "s1").unwrap();
        c.batch_execute("COMMIT").unwrap();
    }

    #[test]
    fn a_claim_waits_on_the_row_while_another_claim_is_open_and_is_store_busy_past_the_timeout() {
        let Some((url, mut c, num)) = setup("lease_race") else {
            return;
        };
        // This process claims in one transaction and holds it open; a claim through a second
        // connection waits on the row lock (it is the same process, so it then succeeds).
        c.batch_execute("BEGIN").unwrap();
        claim(&mut c, &url.schema, num, "s1").unwrap();
        let url2 = PgUrl::parse(&test_server::with_schema(
            &test_server::url().unwrap(),
            "lease_race",
        ))
        .unwrap();
        let options = StoreOptions {
            busy_timeout_ms: 300,
            ..Default::default()
        };
        let mut other = connect(&url2, &options).unwrap();
        other.batch_execute("BEGIN").unwrap();
        let e = claim(&mut other, &url.schema, num, "s1").err().unwrap();
        assert_eq!(e.code(), "STORE_BUSY", "{}", e.message());
        other.batch_execute("ROLLBACK").unwrap();
        c.batch_execute("COMMIT").unwrap();
        other.batch_execute("BEGIN").unwrap();
        claim(&mut other, &url.schema, num, "s1").unwrap();
        other.batch_execute("COMMIT").unwrap();
    }
}
