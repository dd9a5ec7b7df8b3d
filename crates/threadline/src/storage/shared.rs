//! What a store and all its sessions share: the file's connection (through `open_file`, shared
//! with the other stores of this process on the same file), the store's options, and the
//! sessions this process holds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::model::clock;
use crate::model::options::StoreOptions;
use crate::storage::append_log::LiveLog;
use crate::storage::batch;
use crate::storage::db::Db;
use crate::storage::open_file::{self, OpenFile};
use crate::storage::ownership;

/// Starts the thread that keeps a PostgreSQL store's leases fresh while the store is open: it
/// wakes every half `HEARTBEAT_MS` (so a lease is renewed at most 1.5 periods after the last
/// time) and ends with the store (closed, or dropped).
pub(crate) fn start_heartbeat(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    let period = std::time::Duration::from_millis(ownership::HEARTBEAT_MS as u64 / 2);
    let _ = std::thread::Builder::new()
        .name("threadline-heartbeat".into())
        .spawn(move || loop {
            std::thread::sleep(period);
            let Some(shared) = weak.upgrade() else { return };
            if shared.is_closed() {
                return;
            }
            // A failed renewal (the server unreachable for a moment) is tried again next time;
            // the lease lasts REMOTE_STALE_MS, several periods.
            let _ = shared.renew_due();
        });
}

/// The sessions this process deleted, by store (`Shared::identity`) and number.
fn deleted() -> MutexGuard<'static, std::collections::HashSet<(String, i64)>> {
    static D: std::sync::OnceLock<Mutex<std::collections::HashSet<(String, i64)>>> =
        std::sync::OnceLock::new();
    D.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The connection and settings that a store and all its sessions share.
pub(crate) struct Shared {
    /// the file's connections, shared with the other stores of this process open on it
    file: Arc<OpenFile>,
    closed: AtomicBool,
    pub path: String,
    pub options: StoreOptions,
    /// sessions this process holds through this store, with the time of its last heartbeat
    owned: Mutex<HashMap<i64, i64>>,
    /// live writers' logs this store replayed (`replay::see_writers`): the epoch and the number of
    /// frames it replayed, so a reader does not wait for the same stopped writer again
    adopted: Mutex<HashMap<PathBuf, (u64, usize)>>,
    /// the connection's `Db::generation` at the last claim
    generation: std::sync::atomic::AtomicU64,
}

impl Drop for Shared {
    /// A store dropped without `close()` lets go of its file (closed with the last store on it).
    fn drop(&mut self) {
        if !self.closed.load(Ordering::Acquire) {
            let mut conn = self.file.conn.lock().unwrap_or_else(|e| e.into_inner());
            let _ = open_file::release(&self.file, &mut conn);
        }
    }
}

impl Shared {
    pub fn new(file: Arc<OpenFile>, path: String, options: StoreOptions) -> Shared {
        Shared {
            file,
            closed: AtomicBool::new(false),
            path,
            options,
            owned: Mutex::new(HashMap::new()),
            adopted: Mutex::new(HashMap::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The store file's canonical path (symlinks resolved), for a SQLite file on disk.
    pub fn real_path(&self) -> Option<PathBuf> {
        self.file.real_path()
    }

    /// Keeps a notice for this store's telemetry (`Store::take_notices`).
    pub fn notice(&self, kind: &'static str, message: String) {
        crate::storage::notice::note(&self.notice_key(), kind, message);
    }

    /// What this store's notices are kept by: the file's canonical path, else (PostgreSQL) the
    /// URL it was opened with.
    pub fn notice_key(&self) -> PathBuf {
        self.real_path()
            .unwrap_or_else(|| PathBuf::from(&self.path))
    }

    /// Notes that session `num` was deleted through this store: every handle on it in this
    /// process (through any store on the same file) refuses to go on (`was_deleted`).
    pub fn note_deleted(&self, num: i64) {
        self.owned().remove(&num);
        deleted().insert((self.identity(), num));
    }

    /// Whether session `num` was deleted by this process (a session's number is never reused).
    pub fn was_deleted(&self, num: i64) -> bool {
        let d = deleted();
        !d.is_empty() && d.contains(&(self.identity(), num))
    }

    /// What names the store across the stores of this process: its real file, or its URL.
    fn identity(&self) -> String {
        self.real_path()
            .map_or_else(|| self.path.clone(), |p| p.to_string_lossy().into_owned())
    }

    /// Whether this process holds session `num` through this store (it claimed it and has not let
    /// go): then no other process can have acknowledged records of it.
    pub fn holds(&self, num: i64) -> bool {
        self.owned().contains_key(&num)
    }

    /// Whether this store already replayed everything `log` holds now (its frames of `epoch`).
    pub fn adopted_already(&self, path: &Path, epoch: u64, log: &LiveLog) -> bool {
        let known = self
            .adopted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
            .copied();
        match known {
            Some((e, n)) if e == epoch => log.read().is_ok_and(|r| r.frames.len() == n),
            _ => false,
        }
    }

    /// Notes that this store replayed `frames` frames of `epoch` from a live writer's `log`.
    pub fn adopted(&self, path: &Path, epoch: u64, frames: usize) {
        let mut a = self.adopted.lock().unwrap_or_else(|e| e.into_inner());
        a.retain(|p, _| p.exists());
        a.insert(path.to_path_buf(), (epoch, frames));
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes this store's use of the file: the sessions it holds are let go, and the file closes
    /// with the last store of this process open on it. Closing twice is nothing.
    pub fn close(&self) -> Result<()> {
        let mut guard = self.file.conn.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        for num in std::mem::take(&mut *self.owned()).into_keys() {
            let _ = ownership::release(&guard, num);
        }
        open_file::release(&self.file, &mut guard)
    }

    /// The open connection, or CLOSED.
    pub fn lock(&self) -> Result<MutexGuard<'_, Db>> {
        let guard = self.file.conn.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("the store is closed".into()));
        }
        // This process's writable connection to the file may hold appends in a batch: a read
        // through its readonly one sees them once they are flushed.
        if batch::open_elsewhere(guard.batch_open()) {
            if let Some(real) = self.file.real_path() {
                open_file::commit_batches(&real, &self.file);
            }
        }
        // Stores sharing the connection each wait for SQLite's locks as long as they were told.
        guard.use_busy_timeout(self.options.busy_timeout_ms)?;
        Ok(guard)
    }

    /// Before a write, inside its transaction: holds the session for this process (SESSION_LOCKED
    /// if another live process does), refreshing the heartbeat at most every HEARTBEAT_MS.
    /// Returns the heartbeat to remember once the transaction commits.
    pub fn claim(&self, conn: &Db, num: i64, id: &str) -> Result<Option<i64>> {
        // A connection made anew (PostgreSQL: a failover) reaches a server whose rows are what
        // count now: another process may have taken a session over there while this one was
        // cut off. Every session is claimed again, so a lease lost is said (SESSION_LOCKED).
        let g = conn.generation();
        if self.generation.swap(g, Ordering::AcqRel) != g {
            self.forget_claims();
        }
        let now = clock::now_ms();
        let last = self.owned().get(&num).copied();
        if last.is_some_and(|t| now - t < ownership::HEARTBEAT_MS) {
            return Ok(None);
        }
        ownership::claim(conn, num, id, now).map(Some)
    }

    /// Whether the next write to session `num` claims it (`claim` would not return None).
    pub fn claim_due(&self, num: i64) -> bool {
        let now = clock::now_ms();
        let last = self.owned().get(&num).copied();
        last.is_none_or(|t| now - t >= ownership::HEARTBEAT_MS)
    }

    /// Claims noted for transactions that did not commit after all (a batch of appends that
    /// failed): every session is claimed again at its next write.
    pub fn forget_claims(&self) {
        for t in self.owned().values_mut() {
            *t = i64::MIN / 2;
        }
    }

    pub fn claimed(&self, num: i64, heartbeat: Option<i64>) {
        if let Some(t) = heartbeat {
            self.owned().insert(num, t);
        }
    }

    /// Lets go of a session this process holds (its handle was closed).
    pub fn release(&self, num: i64) {
        if self.owned().remove(&num).is_none() {
            return;
        }
        if let Ok(conn) = self.lock() {
            // Best effort: an owner that is gone is detected anyway.
            let _ = ownership::release(&conn, num);
        }
    }

    /// Renews, on PostgreSQL, the heartbeat of every session this store holds whose last one is
    /// `HEARTBEAT_MS` old, so another host does not take over a session whose holder is alive but
    /// has not written for a while (it would after `REMOTE_STALE_MS`). A session this process no
    /// longer holds (another host took it over) is let go here too.
    pub fn renew_due(&self) -> Result<()> {
        let now = clock::now_ms();
        let due: Vec<i64> = self
            .owned()
            .iter()
            .filter(|(_, t)| now - **t >= ownership::HEARTBEAT_MS)
            .map(|(n, _)| *n)
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let renewed = {
            let conn = self.lock()?;
            ownership::renew(&conn, &due)?
        };
        let mut owned = self.owned();
        for n in due {
            if renewed.contains(&n) {
                owned.insert(n, now);
            } else {
                owned.remove(&n);
            }
        }
        Ok(())
    }

    fn owned(&self) -> MutexGuard<'_, HashMap<i64, i64>> {
        self.owned.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn writable(&self) -> Result<()> {
        if self.options.readonly {
            return Err(Error::StoreIo("the store was opened readonly".into()));
        }
        Ok(())
    }
}
