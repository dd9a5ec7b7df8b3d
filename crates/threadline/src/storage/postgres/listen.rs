//! Live watch on PostgreSQL: a write of a session (its records, its row) sends a `NOTIFY` in its
//! own transaction (`write_order.rs`, `sessions::delete`) while some listener is registered in
//! the store's `listeners` table, so a listener hears of it exactly when it commits, and only if
//! it does. A listener holds a connection of its own that runs `LISTEN`; its `wait` blocks the
//! calling thread (the binding runs it on the thread pool) until a change of its session (or of
//! any, for a store's) comes, a new connection was made after the server dropped the last (the
//! caller reads everything from where it was: notifications sent while no connection listened
//! are lost, the catch-up read is what keeps a restart from losing records), or `cancel` is
//! called.
//!
//! Why only while someone listens: PostgreSQL commits notifying transactions one at a time (a
//! server-wide lock from the notify's pre-commit to the commit's end), which cost concurrent
//! writers 21% to 45% of their appends per second (BENCHMARKS.md). Why a writer never misses a
//! listener that registers while it writes: see `REGISTER`.

use std::sync::Mutex;
use std::time::Duration;

use super::client::{Cancel, PgClient, Reconnect};
use super::error::mapped;
use crate::error::Result;

/// The channel every store's writes notify; the payload names the schema, so a listener of one
/// store ignores the others on the same database.
pub(crate) const CHANNEL: &str = "threadline";

/// A session's change as a notification tells it: its number and how many records it holds
/// now, or `None` when it was deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub num: i64,
    pub records: Option<u64>,
}

/// What ended a wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// committed changes (of the listener's session, or of every session)
    Changes(Vec<Change>),
    /// the connection was lost and made again: anything may have changed meanwhile
    Reconnected,
    /// `cancel` was called
    Cancelled,
}

pub struct Listener {
    client: Mutex<Option<PgClient>>,
    connect: Reconnect,
    schema: String,
    only: Option<i64>,
    cancel: Cancel,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("schema", &self.schema)
            .field("only", &self.only)
            .finish()
    }
}

/// The longest pause between two tries to reach a server that went away.
const MAX_PAUSE: Duration = Duration::from_secs(1);

impl Listener {
    /// Listens from now on: a change committed after this returns is heard by the next `wait`.
    pub(crate) fn new(connect: Reconnect, schema: String, only: Option<i64>) -> Result<Listener> {
        let client = listening(&connect)?;
        Ok(Listener {
            client: Mutex::new(Some(client)),
            connect,
            schema,
            only,
            cancel: Cancel::default(),
        })
    }

    /// Ends the current or next `wait` (it returns `Cancelled`) and every later one.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the next change, a reconnection, or `cancel`. While the server is unreachable it
    /// tries again, pausing 50 ms, then twice as long each time up to a second (the pause ends at
    /// `cancel`; a try under way ends within `busyTimeoutMs`).
    pub fn wait(&self) -> Result<Wake> {
        let mut slot = self.client.lock().unwrap_or_else(|e| e.into_inner());
        let mut pause = Duration::from_millis(50);
        loop {
            if self.cancel.is_set() {
                // The connection closes now, not when the listener is dropped.
                if let Some(mut c) = slot.take() {
                    unregister(&mut c);
                }
                return Ok(Wake::Cancelled);
            }
            match slot.as_mut() {
                None => match listening(&self.connect) {
                    Ok(c) => {
                        *slot = Some(c);
                        return Ok(Wake::Reconnected);
                    }
                    Err(_) => {
                        self.cancel.sleep(pause);
                        pause = (pause * 2).min(MAX_PAUSE);
                    }
                },
                Some(c) => match c.notifications(&self.cancel) {
                    Ok(heard) => {
                        let changes: Vec<Change> = heard
                            .iter()
                            .filter_map(|n| parse(n.payload(), &self.schema))
                            .filter(|c| self.only.is_none_or(|num| num == c.num))
                            .collect();
                        if !changes.is_empty() {
                            return Ok(Wake::Changes(changes));
                        }
                    }
                    Err(_) => *slot = None,
                },
            }
        }
    }
}

/// A listener's registration, on every (re)connection, in one transaction (one round trip).
/// Writers read `listeners` in the statement that would notify, which holds an ACCESS SHARE lock
/// on it until their commit; the ACCESS EXCLUSIVE lock here waits for every such writer, and
/// writers that come later wait for this transaction. So once it commits, every write that saw
/// no listener is committed (the caller's catch-up read, made after this returns, sees it) and
/// every later one sees this row and notifies. `LISTEN` takes effect at the same commit. Rows of
/// listeners whose connection is gone (a process killed, a connection dropped without `cancel`)
/// are removed here; a pid reused meanwhile only keeps notifications on, which costs writers
/// time and is never wrong.
const REGISTER: &str = "BEGIN;
LOCK TABLE listeners IN ACCESS EXCLUSIVE MODE;
DELETE FROM listeners WHERE backend_pid NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL);
INSERT INTO listeners(backend_pid, since_ms) VALUES (pg_backend_pid(), (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
  ON CONFLICT (backend_pid) DO UPDATE SET since_ms = excluded.since_ms";

fn listening(connect: &Reconnect) -> Result<PgClient> {
    let mut client = connect()?;
    client
        .batch_execute(&format!("{REGISTER}; LISTEN {CHANNEL}; COMMIT"))
        .map_err(mapped)?;
    Ok(client)
}

/// A cancelled listener's row goes with it, so writers stop notifying as soon as no one listens.
/// Best effort: a row left (the server unreachable, the process killed) is removed by the next
/// registration.
fn unregister(client: &mut PgClient) {
    let _ = client.batch_execute("DELETE FROM listeners WHERE backend_pid = pg_backend_pid()");
}

/// `schema num records`, or `schema num d` for a deletion; another store's, or anything else:
/// `None`.
fn parse(payload: &str, schema: &str) -> Option<Change> {
    let mut parts = payload.split(' ');
    if parts.next()? != schema {
        return None;
    }
    let num = parts.next()?.parse().ok()?;
    let records = match parts.next()? {
        "d" => None,
        n => Some(n.parse().ok()?),
    };
    Some(Change { num, records })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_of_another_schema_or_shape_is_not_a_change() {
        assert_eq!(
            parse("team_a 7 12", "team_a"),
            Some(Change {
                num: 7,
                records: Some(12)
            })
        );
        assert_eq!(
            parse("team_a 7 d", "team_a"),
            Some(Change {
                num: 7,
                records: None
            })
        );
        assert_eq!(parse("team_b 7 12", "team_a"), None);
        assert_eq!(parse("team_a x 12", "team_a"), None);
        assert_eq!(parse("team_a 7", "team_a"), None);
    }
}
