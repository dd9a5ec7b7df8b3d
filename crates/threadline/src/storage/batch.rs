//! Appends to a SQLite store in batches: several appends share one SQLite transaction, and each
//! is acknowledged once its frame is in the append log (`append_log.rs`).
//!
//! Why: a SQLite commit writes every page the append dirtied (the record's, each index's, the
//! session row's) to the WAL, takes and drops the WAL locks, and that was half of an append. A
//! batch writes those pages once for many appends. The log is the commit point: a killed process
//! leaves its frames in the page cache, and the next process to open the store, or to take over
//! one of its sessions, replays them.
//!
//! A batch commits when it holds `MAX_APPENDS` appends, when it is `MAX_AGE` old (at the next
//! append, or from the flusher thread when no append comes), before any other transaction on the
//! connection, when the store closes, and when the process exits normally. Other processes see an
//! append once its batch commits, within about `MAX_AGE`. While another process waits for the
//! write lock, every append commits on its own, as before batches, so no writer is starved.
//!
//! Only stores opened with durability 'process' batch: 'power' commits each append with an
//! fsync, which a batch would not save.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::storage::append_log::AppendLog;

/// The most appends one batch holds.
const MAX_APPENDS: u32 = 64;
/// The longest a batch stays open.
pub(crate) const MAX_AGE: Duration = Duration::from_millis(2);

/// A connection's batch: its log, and the transaction open for it.
#[derive(Default)]
pub(crate) struct Batch {
    /// the store file (not in memory): for a hand raised while waiting, and for `see_writers`
    store: Option<Arc<Path>>,
    /// None: this connection does not batch (read-only, in memory, durability 'power').
    log: RefCell<Option<AppendLog>>,
    /// when the open batch began; None when no batch is open
    opened: Cell<Option<Instant>>,
    appends: Cell<u32>,
    /// the sessions written in the open batch, in the order of their last write, with their
    /// record counts (the seq after their last record): their rows are updated once, at the
    /// commit (`write_order.rs`)
    touched: RefCell<Vec<Touch>>,
    /// the log holds frames that are not in SQLite (a batch failed to commit): they are replayed
    /// before the next write
    owed: Cell<bool>,
    frame: RefCell<Vec<u8>>,
}

/// What a batch needs from its connection: running a statement.
pub(crate) trait Control {
    fn run(&self, sql: &'static str) -> Result<()>;
    fn in_transaction(&self) -> bool;
    /// Runs `sql` with a session's number and record count (`Touch`).
    fn run_touch(&self, sql: &'static str, num: i64, records: u64) -> Result<()>;
}

/// A session row's update that waits for the batch's commit: `sql` (from `write_order.rs`) with
/// the session's number and record count.
#[derive(Clone, Copy)]
pub(crate) struct Touch {
    pub sql: &'static str,
    pub num: i64,
    pub records: u64,
}

impl Batch {
    pub fn new(store: Option<&Path>, log: Option<AppendLog>) -> Batch {
        Batch {
            store: store.map(Arc::from),
            log: RefCell::new(log),
            ..Batch::default()
        }
    }

    pub fn is_open(&self) -> bool {
        self.opened.get().is_some()
    }

    pub fn older_than(&self, age: Duration) -> bool {
        self.opened.get().is_some_and(|t| t.elapsed() >= age)
    }

    /// Starts or joins a batch for an append. False when the append is to commit on its own: the
    /// connection does not batch, or another process waits for the write lock (then any open
    /// batch is committed first).
    pub fn join(&self, c: &impl Control) -> Result<bool> {
        let alone = match self.log.borrow_mut().as_mut() {
            None => return Ok(false),
            Some(log) => !log.contended() && (self.is_open() || log.roomy()),
        };
        if !alone {
            self.commit(c)?;
            return Ok(false);
        }
        if self.opened.get().is_none() {
            self.holding_hand(|| c.run("BEGIN IMMEDIATE"))?;
            self.opened.set(Some(Instant::now()));
            OPEN.fetch_add(1, Ordering::AcqRel);
            self.appends.set(0);
            wake();
        }
        Ok(true)
    }

    /// Writes an append's frame to the log: the append is acknowledged when this returns.
    pub fn log(&self, payload: &[u8]) -> Result<()> {
        let mut log = self.log.borrow_mut();
        let Some(log) = log.as_mut() else {
            return Ok(());
        };
        log.write(payload, &mut self.frame.borrow_mut())?;
        self.appends.set(self.appends.get() + 1);
        Ok(())
    }

    /// After an append joined the batch: commits it if it is full or old enough.
    pub fn commit_if_due(&self, c: &impl Control) -> Result<()> {
        match self.opened.get() {
            Some(t) if self.appends.get() >= MAX_APPENDS || t.elapsed() >= MAX_AGE => {
                self.commit(c)
            }
            _ => Ok(()),
        }
    }

    /// Inside the open batch, a write's update of its session's row (`write_order.rs`) is made at
    /// the commit instead: one update per session and batch. False when no batch is open.
    pub fn defer_touch(&self, touch: Touch) -> bool {
        if !self.is_open() {
            return false;
        }
        let mut touched = self.touched.borrow_mut();
        touched.retain(|t| t.num != touch.num);
        touched.push(touch);
        true
    }

    /// The record count session `num`'s row will hold when the open batch commits, if the batch
    /// wrote to it: what a read inside the batch compares its records with.
    pub fn pending_count(&self, num: i64) -> Option<u64> {
        let touched = self.touched.borrow();
        touched.iter().find(|t| t.num == num).map(|t| t.records)
    }

    /// Whether session `num` ends before `next` as far as the open batch knows: written in it by
    /// this connection, which holds the write lock, so nobody else wrote since.
    pub fn tail_known(&self, num: i64, next: u64) -> bool {
        self.is_open() && self.pending_count(num) == Some(next)
    }

    /// Commits the open batch, if any, and empties the log. If the commit fails, the frames stay
    /// in the log, owed to SQLite: the next write replays them first.
    pub fn commit(&self, c: &impl Control) -> Result<()> {
        if self.opened.take().is_none() {
            return Ok(());
        }
        OPEN.fetch_sub(1, Ordering::AcqRel);
        let touched = std::mem::take(&mut *self.touched.borrow_mut());
        let done = touched
            .iter()
            .try_for_each(|t| c.run_touch(t.sql, t.num, t.records))
            .and_then(|()| c.run("COMMIT"));
        if let Err(e) = done {
            if c.in_transaction() {
                let _ = c.run("ROLLBACK");
            }
            self.owed.set(true);
            return Err(e);
        }
        self.emptied()
    }

    /// Drops the open batch after an append failed halfway through its writes: what the batch
    /// held is in the log, owed to SQLite.
    pub fn abandon(&self, c: &impl Control) {
        if self.opened.take().is_none() {
            return;
        }
        OPEN.fetch_sub(1, Ordering::AcqRel);
        self.touched.borrow_mut().clear();
        if c.in_transaction() {
            let _ = c.run("ROLLBACK");
        }
        let logged = self.log.borrow().as_ref().is_some_and(|l| !l.is_empty());
        self.owed.set(logged);
    }

    /// The frames owed to SQLite, if a commit failed.
    pub fn owed(&self) -> Result<Option<Vec<Vec<u8>>>> {
        if !self.owed.get() {
            return Ok(None);
        }
        match &*self.log.borrow() {
            Some(log) => log.frames().map(Some),
            None => Ok(None),
        }
    }

    /// Before a read that is to see every append acknowledged so far by any process (opening a
    /// session, listing sessions): commits this connection's batch, and waits, at most `timeout`,
    /// for live writers in other processes to commit theirs.
    pub fn see_writers(&self, c: &impl Control, timeout: Duration) {
        let _ = self.commit(c);
        if let Some(store) = &self.store {
            let log = self.log.borrow();
            let own = log.as_ref().map(AppendLog::path);
            crate::storage::append_log::await_live(store, own, timeout);
        }
    }

    /// Closes the log (its batch committed): the file goes with it.
    pub fn close_log(&self) {
        if !self.owed.get() {
            self.log.borrow_mut().take();
        }
    }

    /// The owed frames are committed now: the log starts over.
    pub fn emptied(&self) -> Result<()> {
        self.owed.set(false);
        match self.log.borrow_mut().as_mut() {
            Some(log) => log.clear(),
            None => Ok(()),
        }
    }

    /// Runs `f` (which takes the write lock) ready to wait for it well: a wait commits this
    /// process's other batches, and tells another process's (`wait_busy`).
    pub fn holding_hand<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        WAITING_ON.with(|h| h.borrow_mut().clone_from(&self.store));
        let out = f();
        WAITING_ON.with(|h| h.borrow_mut().take());
        out
    }
}

/// Connections of this process with a batch open.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// Whether this process has a batch open on a connection other than `own` (of which `own_open`
/// says whether it has one): a read through `own` is to see it (`Shared::lock`).
pub(crate) fn open_elsewhere(own_open: bool) -> bool {
    OPEN.load(Ordering::Acquire) > usize::from(own_open)
}

thread_local! {
    /// The store whose write lock this thread is taking.
    static WAITING_ON: RefCell<Option<Arc<Path>>> = const { RefCell::new(None) };
}

/// Called from the busy handler while this thread waits for a write lock (`count` tries so far).
/// The holder may be this process, through another connection to the same file (opened with
/// other settings, or by another path): its batch is committed. Or another process: it is told.
pub(crate) fn waiting(count: i32) {
    WAITING_ON.with(|h| {
        let Some(store) = &*h.borrow() else { return };
        if count == 1 {
            if let Some(commit_others) = COMMIT_OTHERS.get() {
                commit_others();
            }
        }
        if count == 2 || (count > 2 && count % 16 == 0) {
            crate::storage::append_log::raise_hand(store);
        }
    });
}

/// What a wait for the write lock does to this process's other connections: commit their
/// batches. Set by `open_file`, which knows the connections (this module cannot: they hold it).
static COMMIT_OTHERS: OnceLock<fn()> = OnceLock::new();

pub(crate) fn on_wait_commit(f: fn()) {
    let _ = COMMIT_OTHERS.set(f);
}

/// Batches opened since the flusher thread (`open_file`) last looked.
struct Signal {
    pending: Mutex<bool>,
    ready: Condvar,
}

fn signal() -> &'static Signal {
    static S: OnceLock<Signal> = OnceLock::new();
    S.get_or_init(|| Signal {
        pending: Mutex::new(false),
        ready: Condvar::new(),
    })
}

/// A batch opened: the flusher thread is to look in `MAX_AGE`.
pub(crate) fn wake() {
    let s = signal();
    *s.pending.lock().unwrap_or_else(|e| e.into_inner()) = true;
    s.ready.notify_one();
}

/// Waits until a batch opened (for the flusher thread).
pub(crate) fn wait_for_batch() {
    let s = signal();
    let mut pending = s.pending.lock().unwrap_or_else(|e| e.into_inner());
    while !*pending {
        pending = s.ready.wait(pending).unwrap_or_else(|e| e.into_inner());
    }
    *pending = false;
}
