//! Appends acknowledged by the append log (storage/batch.rs) and not yet in SQLite: a frame per
//! append, and their replay, by the next process that opens the store or takes over one of the
//! sessions of a process that is gone, or by this one after a batch failed to commit.
//!
//! A frame holds the envelopes the append returned, complete (uuid, parentUuid, seq, timestamp).
//! Replaying one inserts them as envelopes: the same checks, the same stored record. A record
//! already stored (its batch committed before the process died) is found by its uuid and left as
//! it is, so a frame can be replayed any number of times.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::envelope::Draft;
use crate::session::{Now, Session, Writer};
use crate::storage::append_log;
use crate::storage::db::Db;
use crate::storage::encode::Encoded;
use crate::storage::records::load_tail;
use crate::storage::shared::Shared;
use crate::storage::txn::Txn;
use crate::storage::{sessions, write_order};

/// A frame as written: `{"n": <session num>, "i": <session id>, "r": [<envelope>, ...]}`.
#[derive(Deserialize)]
struct Stored {
    /// the session's row number
    n: i64,
    /// the session's id: a session deleted since, whose number a new one took, is not this one
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

/// Before a write to session `num`: the appends this connection owes SQLite (a batch failed to
/// commit) are replayed first, so nothing is written after them that should come before; and
/// when the write is to claim the session, the logs of processes that are gone, one of which may
/// have held it.
pub(crate) fn before_write(shared: &Arc<Shared>, conn: &Db, num: i64) -> Result<()> {
    pay_owed(shared, conn)?;
    if shared.claim_due(num) {
        orphans(shared, conn)?;
    }
    Ok(())
}

/// Replays the appends this connection owes SQLite, if any.
pub(crate) fn pay_owed(shared: &Arc<Shared>, conn: &Db) -> Result<()> {
    let Some(frames) = conn.owed_appends()? else {
        return Ok(());
    };
    let tx = Txn::immediate(conn)?;
    replay(shared, &tx, &frames)?;
    tx.commit()?;
    conn.owed_paid()
}

/// Replays the append logs of processes that are gone (a writable SQLite store only): at open,
/// and before this process takes over a session. A log is removed once its frames are committed.
pub(crate) fn orphans(shared: &Arc<Shared>, conn: &Db) -> Result<()> {
    if shared.options.readonly || shared.path == ":memory:" || !matches!(conn, Db::Sqlite(..)) {
        return Ok(());
    }
    for mut orphan in append_log::orphans(std::path::Path::new(&shared.path)) {
        let frames = orphan.frames()?;
        if !frames.is_empty() {
            let tx = Txn::immediate(conn)?;
            replay(shared, &tx, &frames)?;
            tx.commit()?;
        }
        orphan.remove();
    }
    Ok(())
}

/// Inserts the records of `frames` in `conn`'s open transaction.
fn replay(shared: &Arc<Shared>, conn: &Db, frames: &[Vec<u8>]) -> Result<()> {
    for bytes in frames {
        let f: Stored = serde_json::from_slice(bytes)
            .map_err(|e| Error::StoreCorrupt(format!("an append log frame is damaged: {e}")))?;
        // A session deleted since has nothing to get back.
        let Some(id) = sessions::id_if_any(conn, f.n)?.filter(|id| *id == f.i) else {
            continue;
        };
        let session = Session::fresh(shared.clone(), f.n, id);
        let tail = load_tail(conn, f.n)?;
        let start = tail.next_seq;
        let mut w = Writer {
            session: &session,
            conn,
            keys_known: false,
            tail,
            now: Now::new(),
            frame: None,
        };
        for env in f.r {
            w.insert(Draft::from_envelope(env)?)?;
        }
        if w.tail.next_seq != start {
            write_order::touch_records(conn, f.n, w.tail.next_seq)?;
        }
    }
    Ok(())
}
