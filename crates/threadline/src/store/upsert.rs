//! A write that makes its session when the store lacks it, in the same transaction: a mirror of
//! another program's log (the Claude Agent SDK's) has its session and first records stored
//! together or not at all. The session stays claimed after the write (`Held`) until it is
//! released: a mirror writes one session many times in a row, and a claim and a release cost more
//! than a small write.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::model::clock;
use crate::model::options::SessionOptions;
use crate::session::replay;
use crate::session::{Session, Writer};
use crate::storage::sessions;
use crate::storage::txn::Txn;
use crate::store::Store;

/// The sessions `write_upserting` keeps claimed between writes, by id. A handle is taken out for
/// a write and put back after it, so two threads writing one session each get a handle (the
/// claim is the process's, not a handle's).
#[derive(Default)]
pub(crate) struct Held(Mutex<HashMap<String, Session>>);

impl Held {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn take(&self, id: &str) -> Option<Session> {
        self.map().remove(id)
    }

    /// Keeps `s` held; a handle another thread put back meanwhile stays (dropping a handle
    /// without closing it keeps the claim).
    pub(crate) fn put(&self, s: Session) {
        self.map().entry(s.id().to_string()).or_insert(s);
    }

    /// Lets go of session `id` and, with `with_children`, of every held session under `id/`;
    /// whether one was held.
    pub(crate) fn release(&self, id: &str, with_children: bool) -> bool {
        let prefix = format!("{id}/");
        let gone: Vec<Session> = {
            let mut map = self.map();
            let ids: Vec<String> = map
                .keys()
                .filter(|k| *k == id || (with_children && k.starts_with(&prefix)))
                .cloned()
                .collect();
            ids.iter().filter_map(|k| map.remove(k)).collect()
        };
        // closed with the map free: a release writes
        for s in &gone {
            s.close();
        }
        !gone.is_empty()
    }

    /// Forgets every handle (the store is closing: it lets go of its sessions itself).
    pub(crate) fn forget(&self) {
        self.map().clear();
    }
}

impl Store {
    /// Runs `f`, a write of session `id`, in one transaction; the session is made first (with
    /// `options`) when it does not exist, and `f` is told whether it was. The session is claimed
    /// as an append claims it (SESSION_LOCKED while another live process holds it) and stays
    /// claimed after (`release_held` lets it go, as does `close`): the next write of it neither
    /// claims it again nor reads its tail. A write that fails lets it go.
    pub(crate) fn write_upserting<T>(
        &self,
        id: &str,
        options: SessionOptions,
        f: impl FnOnce(&mut Writer, bool) -> Result<T>,
    ) -> Result<T> {
        let shared = self.shared();
        shared.writable()?;
        if id.is_empty() {
            return Err(Error::InvalidInput("id: must not be empty".into()));
        }
        let held = self.held.take(id);
        // deleted since (by this process: another cannot while it is held)
        let held = held.filter(|s| !shared.was_deleted(s.num));
        let was_held = held.is_some();
        let conn = match &held {
            // as a held session reads (Session::conn): others' writes need not be seen first
            Some(s) if shared.holds(s.num) => {
                let conn = shared.lock()?;
                replay::pay_owed(shared, &conn)?;
                conn
            }
            _ => self.reader()?,
        };
        let known = match &held {
            Some(s) => Some(s.num),
            None => sessions::num_of(&conn, id)?,
        };
        let run = || -> Result<(T, Session)> {
            let tx = Txn::immediate(&conn)?;
            let (num, created) = match sessions::num_of(&tx, id)? {
                Some(num) => (num, false),
                None => {
                    let mut o = options;
                    o.id = Some(id.to_string());
                    let num = sessions::insert(&tx, id, &o, clock::now_ms())?;
                    tx.note_created(num);
                    (num, true)
                }
            };
            let session = match held {
                Some(s) if s.num == num => s,
                _ => {
                    let s = Session::fresh(shared.clone(), num, id.to_string());
                    if !created {
                        s.read_tail(&tx)?;
                    }
                    s
                }
            };
            let (out, next, heartbeat) = session.stage(&tx, |w| f(w, created))?;
            tx.commit()?;
            session.committed(next, heartbeat);
            Ok((out, session))
        };
        let done = match known {
            Some(num) => conn.writing(num, run),
            None => run(),
        };
        drop(conn);
        match done {
            Ok((out, session)) => {
                self.held.put(session);
                Ok(out)
            }
            Err(e) => {
                // as before a session was held: the next write claims it afresh
                if let Some(num) = known.filter(|&n| was_held && shared.holds(n)) {
                    shared.release(num);
                }
                Err(e)
            }
        }
    }

    /// Lets go of session `id` (and, with `with_children`, of the sessions under `id/`) if a
    /// `write_upserting` holds it; whether one was held.
    pub(crate) fn release_held(&self, id: &str, with_children: bool) -> bool {
        self.held.release(id, with_children)
    }

    /// The handle `write_upserting` holds on session `id`, lent to `f` (None if none is held).
    pub(crate) fn with_held<T>(&self, id: &str, f: impl FnOnce(&Session) -> T) -> Option<T> {
        let s = self.held.take(id)?;
        let out = f(&s);
        self.held.put(s);
        Some(out)
    }
}
