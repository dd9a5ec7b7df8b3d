//! Appends acknowledged by an append log (storage/batch.rs) and not yet in SQLite: a frame per
//! append, and their replay: by the next process that opens the store, takes over one of the
//! sessions of a process that is gone, deletes a session, or reads; by this one after a flush
//! failed; and, for a process that is stopped or too slow to flush, by a reader that waited for it
//! (docs/recovery.md states the rules this keeps).
//!
//! A frame holds the envelopes the append returned, complete (uuid, parentUuid, seq, timestamp).
//! Replaying one inserts them as envelopes: the same checks, the same stored record. A record
//! already stored (its batch was flushed before the process died, or another process replayed it)
//! is found by its uuid and left as it is, so a frame can be replayed any number of times. A
//! record is only ever put at the seq it was acknowledged with: one that would land elsewhere
//! (its log is damaged, or lost a frame before it) is not written, and the log is kept aside and
//! reported.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::clock;
use crate::model::envelope::Draft;
use crate::session::{Now, Session, Writer};
use crate::storage::append_log::{self, OtherLog};
use crate::storage::db::Db;
use crate::storage::encode::Encoded;
use crate::storage::records::{find_uuid, load_tail};
use crate::storage::shared::Shared;
use crate::storage::txn::Txn;
use crate::storage::{notice, ownership, sessions, write_order};

/// How long a read waits for a live writer to flush what it acknowledged before it replays that
/// writer's log itself (a writer flushes within `batch::MAX_AGE` unless it is stopped or starved).
const LIVE_WAIT: Duration = Duration::from_millis(50);

/// A frame as written: `{"n": <session num>, "i": <session id>, "r": [<envelope>, ...]}`.
#[derive(Deserialize)]
struct Stored {
    /// the session's row number (never reused: a session deleted since, and one made after it
    /// with the same id, have other numbers)
    n: i64,
    /// the session's id
    i: String,
    /// the envelopes of the append, in order
    r: Vec<Map<String, Value>>,
}

/// The frame of an append, built as its records are stored: each envelope's JSON text is the
/// stored text (storage/encode.rs), so replaying it stores the same record.
pub(crate) struct Frame {
    buf: Vec<u8>,
    records: usize,
}

impl Frame {
    pub fn new(num: i64, id: &str) -> Frame {
        let mut buf = crate::storage::scratch::take(4096);
        buf.extend_from_slice(format!("{{\"n\":{num},\"i\":").as_bytes());
        crate::storage::encode::write_str(&mut buf, id);
        buf.extend_from_slice(b",\"r\":[");
        Frame { buf, records: 0 }
    }

    pub fn push(&mut self, enc: &Encoded) {
        if self.records > 0 {
            self.buf.push(b',');
        }
        enc.write_text(&mut self.buf);
        self.records += 1;
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(b"]}");
        self.buf
    }
}

/// Before a write: the appends this connection owes SQLite (a flush failed) are replayed first,
/// so nothing is written after them that should come before.
pub(crate) fn before_write(shared: &Arc<Shared>, conn: &Db) -> Result<()> {
    pay_owed(shared, conn)
}

/// Replays the appends this connection owes SQLite, if any.
pub(crate) fn pay_owed(shared: &Arc<Shared>, conn: &Db) -> Result<()> {
    let Some(log) = conn.owed_appends()? else {
        return Ok(());
    };
    let tx = Txn::immediate(conn)?;
    let out = replay(shared, &tx, &log.frames)?;
    tx.commit()?;
    if let Some(why) = log.damage.or(out.unplaced) {
        note(
            shared,
            "log_damaged",
            format!("this process's append log: {why}"),
        );
    }
    conn.owed_paid()
}

/// Before this process claims session `num`, inside the claim's write transaction: if the
/// session's owner is a process that is gone, the logs of processes that are gone are replayed
/// in the same transaction, so what the owner acknowledged keeps its place before anything this
/// process writes (the owner's death can no longer come between the two).
pub(crate) fn before_claim(shared: &Arc<Shared>, conn: &Db, num: i64) -> Result<()> {
    if !replays(shared, conn) || !shared.claim_due(num) {
        return Ok(());
    }
    match ownership::read(conn, num)? {
        Some(o) if !o.is_me() && !o.alive(clock::now_ms()) => orphans_in(shared, conn),
        _ => Ok(()),
    }
}

/// Replays the logs of processes that are gone in `conn`'s open transaction; each is removed
/// once it commits (kept locked until then).
pub(crate) fn orphans_in(shared: &Arc<Shared>, conn: &Db) -> Result<()> {
    let (Some(batch), Some(store)) = (conn.batch(), store_file(shared)) else {
        return Ok(());
    };
    for mut orphan in append_log::orphans(&store) {
        let read = orphan.read()?;
        let out = replay(shared, conn, &read.frames)?;
        match read.damage.or(out.unplaced) {
            Some(why) => keep_damaged(shared, orphan, &why),
            None => batch.remove_after_commit(orphan),
        }
    }
    Ok(())
}

/// Whether this store replays logs: a SQLite file, writable (a readonly store replays through a
/// connection of its own, `side`).
fn replays(shared: &Shared, conn: &Db) -> bool {
    !shared.options.readonly && conn.batch().is_some() && shared.path != ":memory:"
}

fn store_file(shared: &Shared) -> Option<std::path::PathBuf> {
    shared.real_path()
}

/// Replays the append logs of processes that are gone, each in a transaction of its own, and
/// removes them: at open, and when the interrupted sessions are listed.
pub(crate) fn orphans(shared: &Arc<Shared>, conn: &Db) -> Result<()> {
    let Some(store) = store_file(shared) else {
        return Ok(());
    };
    if conn.batch().is_none() {
        return Ok(());
    }
    let found = append_log::orphans(&store);
    if found.is_empty() {
        return Ok(());
    }
    with_writer(shared, conn, |w| {
        for mut orphan in found {
            let read = orphan.read()?;
            let out = if read.frames.is_empty() {
                Replayed::default()
            } else {
                let tx = Txn::immediate(w)?;
                let out = replay(shared, &tx, &read.frames)?;
                tx.commit()?;
                out
            };
            match read.damage.or(out.unplaced) {
                Some(why) => keep_damaged(shared, orphan, &why),
                None => orphan.remove(),
            }
        }
        Ok(())
    })
}

/// Before a read that is to see every append acknowledged so far by any process (opening or
/// reading a session this process does not hold, listing, searching): this connection's batch is
/// flushed; the logs of processes that are gone are replayed; a live writer's acknowledged appends
/// are waited for (its flush comes within `batch::MAX_AGE` unless it is stopped or starved), and
/// replayed from its log after `LIVE_WAIT`. STORE_BUSY if they cannot be (the write lock stayed
/// taken past busyTimeoutMs): a read never gives less than was acknowledged before it began.
pub(crate) fn see_writers(shared: &Arc<Shared>, conn: &Db) -> Result<()> {
    let (Some(batch), Some(store)) = (conn.batch(), store_file(shared)) else {
        return Ok(());
    };
    conn.commit_batch()?;
    let own = batch.log_path();
    let mut dead = Vec::new();
    let mut live = Vec::new();
    for log in append_log::others(&store, own.as_deref()) {
        match log {
            OtherLog::Orphan(o) => dead.push(o),
            OtherLog::Live(l) => {
                if let Some(epoch) = l.pending() {
                    live.push((l, epoch));
                }
            }
        }
    }
    // What a live writer acknowledged before now is what it holds now: its frames of that epoch.
    let start = Instant::now();
    let wait = LIVE_WAIT.min(Duration::from_millis(shared.options.busy_timeout_ms.into()));
    let mut behind = Vec::new();
    for (l, epoch) in live {
        if shared.adopted_already(l.path(), epoch, &l) {
            continue;
        }
        while !l.caught_up(epoch) && start.elapsed() < wait {
            std::thread::sleep(Duration::from_micros(200));
        }
        if !l.caught_up(epoch) {
            behind.push(l);
        }
    }
    if dead.is_empty() && behind.is_empty() {
        return Ok(());
    }
    with_writer(shared, conn, |w| {
        for mut orphan in dead {
            let read = orphan.read()?;
            let out = if read.frames.is_empty() {
                Replayed::default()
            } else {
                let tx = Txn::immediate(w)?;
                let out = replay(shared, &tx, &read.frames)?;
                tx.commit()?;
                out
            };
            match read.damage.or(out.unplaced) {
                Some(why) => keep_damaged(shared, orphan, &why),
                None => orphan.remove(),
            }
        }
        for l in behind {
            // Its writer is alive but has not flushed what it acknowledged (stopped, or
            // starved): replayed from its log here. The writer's own flush then finds the rows
            // there, and replays its log instead, which leaves them as they are.
            let read = l.read()?;
            if read.frames.is_empty() {
                continue;
            }
            let tx = Txn::immediate(w)?;
            let out = replay(shared, &tx, &read.frames)?;
            tx.commit()?;
            if let Some(why) = read.damage.or(out.unplaced) {
                note(
                    shared,
                    "log_damaged",
                    format!(
                        "the append log {} of a live writer: {why}",
                        l.path().display()
                    ),
                );
            }
            if let Some(epoch) = read.epoch {
                shared.adopted(l.path(), epoch, read.frames.len());
            }
        }
        Ok(())
    })
}

/// Runs `f` with a connection that can write the store: `conn`, or for a readonly store, a
/// connection of its own for the replay (acknowledged records are completed, nothing else is
/// written). A store whose file this process cannot write cannot replay: STORE_IO says so.
fn with_writer(shared: &Arc<Shared>, conn: &Db, f: impl FnOnce(&Db) -> Result<()>) -> Result<()> {
    if !shared.options.readonly {
        return f(conn);
    }
    match crate::storage::connection::open_for_replay(&shared.path, &shared.options) {
        Ok(side) => f(&side),
        Err(e) => {
            // Read-only media or another user's store: what is in SQLite is all this store can
            // show; the notice says what is missing and how to get it.
            note(
                shared,
                "log_unreplayed",
                format!(
                    "records acknowledged by another process are in its append log, and this \
                     readonly store cannot replay them ({}); open the store writable once",
                    e.message()
                ),
            );
            Ok(())
        }
    }
}

fn keep_damaged(shared: &Shared, orphan: append_log::Orphan, why: &str) {
    let kept = orphan.keep_damaged();
    note(
        shared,
        "log_damaged",
        format!(
            "the append log of a process that is gone is damaged ({why}); the records before the \
             damage were replayed; the log is kept as {} (verify() lists it)",
            kept.display()
        ),
    );
}

fn note(shared: &Shared, kind: &'static str, message: String) {
    if let Some(store) = shared.real_path() {
        notice::note(&store, kind, message);
    }
}

/// What a replay did.
#[derive(Default)]
struct Replayed {
    /// why a frame could not be put in place, if one could not
    unplaced: Option<String>,
}

/// Inserts the records of `frames` in `conn`'s open transaction.
fn replay(shared: &Arc<Shared>, conn: &Db, frames: &[Vec<u8>]) -> Result<Replayed> {
    let mut out = Replayed::default();
    for bytes in frames {
        let Ok(f) = serde_json::from_slice::<Stored>(bytes) else {
            out.unplaced = Some("a frame that checks out holds no append".into());
            continue;
        };
        // A session deleted since has nothing to get back.
        let Some(id) = sessions::id_if_any(conn, f.n)?.filter(|id| *id == f.i) else {
            continue;
        };
        if let Some(why) = replay_frame(shared, conn, f.n, id, f.r)? {
            out.unplaced = Some(why);
        }
    }
    Ok(out)
}

/// Replays one frame's records into session `num`; why it could not, if a record would not land
/// at the seq it was acknowledged with.
fn replay_frame(
    shared: &Arc<Shared>,
    conn: &Db,
    num: i64,
    id: String,
    records: Vec<Map<String, Value>>,
) -> Result<Option<String>> {
    let session = Session::fresh(shared.clone(), num, id);
    let tail = load_tail(conn, num)?;
    let start = tail.next_seq;
    let mut w = Writer {
        session: &session,
        conn,
        keys_known: false,
        tail,
        now: Now::new(),
        frame: None,
    };
    let mut why = None;
    for env in records {
        let seq = env.get("seq").and_then(Value::as_u64);
        let uuid = env
            .get("uuid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let stored = find_uuid(conn, num, &uuid)?.is_some();
        if !stored && seq != Some(w.tail.next_seq) {
            why = Some(format!(
                "record {uuid} of session '{}' was acknowledged at seq {} but the session ends \
                 before seq {}",
                session.id(),
                seq.map_or_else(|| "?".into(), |s| s.to_string()),
                w.tail.next_seq
            ));
            break;
        }
        let placed = Draft::from_envelope(env).and_then(|d| w.insert(d));
        match placed {
            Ok(_) => {}
            Err(Error::InvalidInput(m)) => {
                why = Some(format!("record {uuid} of session '{}': {m}", session.id()));
                break;
            }
            Err(e) => return Err(e),
        }
    }
    if w.tail.next_seq != start {
        write_order::touch_records(conn, num, w.tail.next_seq)?;
    }
    Ok(why)
}

/// The notices about the store at `path` (for `Store::take_notices`).
pub(crate) fn notices(path: &Path) -> Vec<notice::Notice> {
    notice::take(path)
}
