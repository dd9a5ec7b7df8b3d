//! Appends to a SQLite store in batches: an append is acknowledged once its frame is in the
//! append log (`append_log.rs`), and its rows are written to SQLite later, with those of the
//! other appends of the last few milliseconds, in one short transaction.
//!
//! Why: a SQLite commit writes every page the append dirtied (the record's, each index's, the
//! session row's) to the WAL, takes and drops the WAL locks, and that was half of an append. A
//! batch writes those pages once for many appends. The log is the commit point: a killed process
//! leaves its frames in the page cache, and the next process to open the store, to take over one
//! of its sessions, or to read, replays them.
//!
//! An append does not take SQLite's write lock: its writes whose results nobody reads (the
//! record's row, its blobs, its journal rows) are staged here, and run at the flush, which takes
//! the lock only for as long as it runs them and commits. So a process that is stopped (Ctrl-Z,
//! a frozen container) or slow between two appends holds no lock another process waits for. A
//! read in this process runs after the flush (or, inside an append, sees the staged writes by
//! running them in a transaction the append then commits: `promote`), unless it cannot be
//! affected by them (`read_unaffected`): the reads an append makes in the common case.
//!
//! A batch is flushed when it holds `MAX_APPENDS` appends or is `MAX_AGE` old (at the next
//! append, or from the flusher thread when no append comes), before any other use of the
//! connection, when the store closes, and when the process exits normally. Those flushes do not
//! wait for the write lock: a batch that finds it taken is flushed a moment later. Other
//! processes see an append once its batch is flushed, within about `MAX_AGE`; a reader that waits
//! longer replays the log itself (`session/replay.rs`).
//!
//! Only stores opened with durability 'process' batch: 'power' commits each append with an
//! fsync, which a batch would not save.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::types::Value;
use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::model::options::Durability;
use crate::model::tool_call::Entry as CallEntry;
use crate::storage::append_log::{AppendLog, LogRead, Orphan};

/// The most appends one batch holds before it is flushed.
const MAX_APPENDS: u32 = 64;
/// The longest a batch stays unflushed when the write lock is free.
pub(crate) const MAX_AGE: Duration = Duration::from_millis(2);
/// A batch no append joined for this long is flushed by the flusher thread without waiting for
/// `MAX_AGE`: a writer that pauses (an agent waiting for its model) gains nothing by waiting,
/// and other processes see its appends sooner. Appends closer together than this share commits.
pub(crate) const IDLE: Duration = Duration::from_micros(250);
/// A batch that could not be flushed for this many appends makes the next append wait for the
/// write lock (and fail with STORE_BUSY past busyTimeoutMs): memory stays bounded.
const MAX_STAGED_APPENDS: u32 = 4096;

/// A connection's batch: its log, and the writes staged for its flush.
#[derive(Default)]
pub(crate) struct Batch {
    /// the store file's canonical path (not in memory)
    store: Option<Arc<Path>>,
    /// whether this connection writes a file on disk, so may batch (with a log)
    writable: bool,
    /// made at the first append to batch; None: no batch yet, or it could not be made (a
    /// directory that cannot be written: each append then commits on its own)
    log: RefCell<Option<AppendLog>>,
    /// the log could not be made: not tried again
    no_log: Cell<bool>,
    /// the busy timeout the connection's SQLite waits use now (the store's busyTimeoutMs)
    busy_ms: Cell<u32>,
    /// when the first append of the unflushed batch was acknowledged; None when there is none
    opened: Cell<Option<Instant>>,
    appends: Cell<u32>,
    /// the writes of the acknowledged appends, in order, run at the flush
    staged: RefCell<Vec<Staged>>,
    /// the sessions written in the batch, in the order of their last write, with their record
    /// counts (the seq after their last record): their rows are updated once, at the flush
    /// (`write_order.rs`)
    touched: RefCell<Vec<Touch>>,
    /// what the staged writes hold, for the reads that need not see them
    notes: RefCell<Notes>,
    /// the append in progress, if any
    current: Cell<Option<Current>>,
    /// a read of the append in progress is running that staged writes cannot affect
    unaffected: Cell<bool>,
    /// the log holds frames that are not in SQLite (a flush failed, or another process replayed
    /// them first): they are replayed before the next write
    owed: Cell<bool>,
    frame: RefCell<Vec<u8>>,
    /// transactions begun inside the append in progress, which runs in its own (`promote`)
    nested: Cell<u32>,
    /// logs of processes that are gone, replayed in the open transaction: removed once it commits
    after_commit: RefCell<Vec<Orphan>>,
}

/// A write staged for the flush.
struct Staged {
    sql: &'static str,
    params: Vec<Value>,
}

/// What the staged writes hold, by session: a read of something else need not see them.
#[derive(Default)]
struct Notes {
    sessions: HashSet<i64>,
    uuids: HashSet<(i64, String)>,
    keys: HashSet<(i64, String)>,
    /// the journal rows the staged writes make, as they leave them (an append answering a call
    /// requested earlier in the batch reads it here, not by running the batch's writes first)
    calls: HashMap<(i64, String), CallEntry>,
    /// what the append in progress changed in `calls`, with what was there before: put back if
    /// it fails (its staged writes are dropped)
    calls_undo: Vec<((i64, String), Option<CallEntry>)>,
}

/// The append in progress: its session, where its staged writes begin, and whether a read made
/// it run the batch's writes in a transaction of its own (which it commits when it ends).
#[derive(Clone, Copy)]
struct Current {
    num: i64,
    mark: usize,
    promoted: bool,
    /// the session's row update the batch held before the append (`touched`)
    prior: Option<Touch>,
}

/// What a read of the append in progress looks up (`read_unaffected`).
pub(crate) enum Probe<'a> {
    /// anything of the session
    Session,
    /// the record with this uuid
    Uuid(&'a str),
    /// records of this response key
    Key(&'a str),
    /// the journal entry of this tool call id
    Call(&'a str),
}

/// A session row's update that waits for the batch's flush: `sql` (from `write_order.rs`) with
/// the session's number and record count.
#[derive(Clone, Copy)]
pub(crate) struct Touch {
    pub sql: &'static str,
    pub num: i64,
    pub records: u64,
}

fn run(c: &Connection, sql: &'static str) -> Result<()> {
    c.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Takes the write lock; false, without waiting, if another connection holds it and `wait` is
/// false.
fn begin(c: &Connection, wait: bool) -> Result<bool> {
    let r = crate::storage::checkpoint::waiting_if(wait, || run(c, "BEGIN IMMEDIATE"));
    match r {
        Ok(()) => Ok(true),
        Err(Error::StoreBusy(_)) if !wait => Ok(false),
        Err(e) => Err(e),
    }
}

fn rollback(c: &Connection) {
    if !c.is_autocommit() {
        let _ = run(c, "ROLLBACK");
    }
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation)
}

impl Batch {
    pub fn new(store: Option<&Path>, writable: bool, busy_ms: u32) -> Batch {
        Batch {
            store: store.map(Arc::from),
            writable,
            busy_ms: Cell::new(busy_ms),
            ..Batch::default()
        }
    }

    /// Has the connection's SQLite waits last `ms` (each store sharing it sets its own).
    pub fn use_busy_timeout(&self, c: &Connection, ms: u32) -> Result<()> {
        if self.busy_ms.get() != ms {
            crate::storage::checkpoint::set_busy_timeout(c, ms)?;
            self.busy_ms.set(ms);
        }
        Ok(())
    }

    /// The log, made at the first append to batch.
    fn ensure_log(&self) -> bool {
        if self.log.borrow().is_some() {
            return true;
        }
        let store = match &self.store {
            Some(s) if self.writable && !self.no_log.get() => s,
            _ => return false,
        };
        match AppendLog::create(store) {
            Ok(log) => {
                *self.log.borrow_mut() = Some(log);
                true
            }
            Err(_) => {
                self.no_log.set(true);
                false
            }
        }
    }

    pub fn is_open(&self) -> bool {
        self.opened.get().is_some()
    }

    pub fn older_than(&self, age: Duration) -> bool {
        self.opened.get().is_some_and(|t| t.elapsed() >= age)
    }

    /// Whether an append to stage writes is in progress (its writes are staged, not run).
    pub fn staging(&self) -> bool {
        self.current.get().is_some_and(|c| !c.promoted)
    }

    /// Starts or joins a batch for an append. False when the append is to commit on its own: the
    /// store asked for durability 'power', the connection cannot batch, or its disk is nearly
    /// full (then the batch is flushed first).
    pub fn join(&self, c: &Connection, durability: Durability) -> Result<bool> {
        if durability == Durability::Power {
            self.commit(c)?;
            return Ok(false);
        }
        if !self.ensure_log() {
            return Ok(false);
        }
        let (roomy, unlinked) = match self.log.borrow().as_ref() {
            None => return Ok(false),
            Some(log) => (self.is_open() || log.roomy(), log.unlinked()),
        };
        if unlinked {
            // Deleted under this process: what it held is committed at once, and a new log
            // takes its place, so what is acknowledged next survives a kill.
            self.commit(c)?;
            self.replace_log()?;
            if let Some(store) = &self.store {
                crate::storage::notice::note(
                    store,
                    "log_deleted",
                    "this process's append log was deleted while in use; what it held was \
                     committed and a new log replaces it"
                        .into(),
                );
            }
        }
        if !roomy {
            self.commit(c)?;
            return Ok(false);
        }
        let busy = Duration::from_millis(self.busy_ms.get().into());
        let stuck = self.appends.get() >= MAX_STAGED_APPENDS || self.older_than(busy);
        if stuck {
            // Flushed for too long: the write lock is waited for here, as a commit would.
            self.commit(c)?;
        }
        if self.opened.get().is_none() {
            self.opened.set(Some(Instant::now()));
            OPEN.fetch_add(1, Ordering::AcqRel);
            self.appends.set(0);
            wake();
        }
        Ok(true)
    }

    fn replace_log(&self) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let fresh = AppendLog::create(store)?;
        if let Some(old) = self.log.borrow_mut().replace(fresh) {
            // Its path now names nothing of this process's: nothing is removed with it.
            old.disown();
        }
        Ok(())
    }

    /// An append to session `num` begins: its writes are staged until it ends.
    pub fn begin_append(&self, num: i64) {
        self.current.set(Some(Current {
            num,
            mark: self.staged.borrow().len(),
            promoted: false,
            prior: self.touched.borrow().iter().find(|t| t.num == num).copied(),
        }));
        self.notes.borrow_mut().calls_undo.clear();
    }

    /// Stages a write of the append in progress.
    pub fn stage(&self, sql: &'static str, params: Vec<Value>) {
        self.staged.borrow_mut().push(Staged { sql, params });
    }

    /// Notes a record staged for session `num`, with its uuid and response key.
    pub fn note_record(&self, num: i64, uuid: &str, key: Option<&str>) {
        if !self.staging() {
            return;
        }
        let mut notes = self.notes.borrow_mut();
        notes.sessions.insert(num);
        notes.uuids.insert((num, uuid.to_string()));
        if let Some(k) = key {
            notes.keys.insert((num, k.to_string()));
        }
    }

    /// Notes a tool call's journal row staged for session `num` (its INSERT keeps the first row of
    /// an id, and so does the note), or the row as a staged update leaves it (`changed`).
    pub fn note_call(&self, num: i64, entry: &CallEntry, changed: bool) {
        if !self.staging() {
            return;
        }
        let mut notes = self.notes.borrow_mut();
        let key = (num, entry.id.clone());
        if !changed && notes.calls.contains_key(&key) {
            return;
        }
        let before = notes.calls.insert(key.clone(), entry.clone());
        notes.calls_undo.push((key, before));
    }

    /// The journal row of call `id` of session `num` as the staged writes leave it, if an append
    /// of the batch staged one (a row stored before the batch may hold the id: see journal.rs).
    pub fn staged_call(&self, num: i64, id: &str) -> Option<CallEntry> {
        if !self.staging() {
            return None;
        }
        self.notes
            .borrow()
            .calls
            .get(&(num, id.to_string()))
            .cloned()
    }

    /// Runs `read` inside the append in progress without the staged writes (it sees what was
    /// committed before the batch).
    pub fn read_without_staged<T>(&self, read: impl FnOnce() -> T) -> T {
        if !self.staging() {
            return read();
        }
        self.unaffected.set(true);
        let out = read();
        self.unaffected.set(false);
        out
    }

    /// Runs `read` (a read of session `num` looking up `probe`) without the staged writes when
    /// they cannot affect it; else as any read (which sees them).
    pub fn read_unaffected<T>(&self, num: i64, probe: Probe<'_>, read: impl FnOnce() -> T) -> T {
        let notes = self.notes.borrow();
        let unaffected = self.staging()
            && match probe {
                Probe::Session => !notes.sessions.contains(&num),
                Probe::Uuid(u) => !notes.uuids.contains(&(num, u.to_string())),
                Probe::Key(k) => !notes.keys.contains(&(num, k.to_string())),
                Probe::Call(id) => !notes.calls.contains_key(&(num, id.to_string())),
            };
        drop(notes);
        if !unaffected {
            return read();
        }
        self.read_without_staged(read)
    }

    /// Before a read on the connection: it is to see every acknowledged append. Inside an append
    /// the staged writes are run in a transaction the append commits (`promote`); elsewhere the
    /// batch is flushed.
    pub fn before_read(&self, c: &Connection) -> Result<()> {
        if self.unaffected.get() || self.staged.borrow().is_empty() {
            return Ok(());
        }
        if self.staging() {
            self.promote(c)
        } else {
            self.commit(c)
        }
    }

    /// A transaction begins on the connection. Inside an append, unless only reads the staged
    /// writes cannot affect run in it, it is part of the append's own (promoted) transaction:
    /// true, and no statement is to be run.
    pub fn transaction_begins(&self, c: &Connection) -> Result<bool> {
        match self.current.get() {
            Some(_) if self.unaffected.get() => Ok(false),
            Some(cur) => {
                if !cur.promoted {
                    self.promote(c)?;
                }
                self.nested.set(self.nested.get() + 1);
                Ok(true)
            }
            None => {
                self.commit(c)?;
                Ok(false)
            }
        }
    }

    /// A transaction ends on the connection: true if it was part of the append's own
    /// (`transaction_begins`), which ends with the append.
    pub fn transaction_ends(&self) -> bool {
        let n = self.nested.get();
        if n == 0 {
            return false;
        }
        self.nested.set(n - 1);
        true
    }

    /// Before a write that is not staged (its result is read, or it is no append's): the staged
    /// writes go first.
    pub fn before_write(&self, c: &Connection) -> Result<()> {
        match self.current.get() {
            Some(cur) if !cur.promoted => self.promote(c),
            Some(_) => Ok(()),
            // In a transaction of its own, the batch was flushed when it began.
            None => self.commit(c),
        }
    }

    /// The append in progress needs its writes seen: the staged writes run now, in a transaction
    /// the append commits when it ends. If another process replayed this one's log first (it
    /// waited for a flush that did not come: this process was stopped), the staged rows are there
    /// already: the append fails (STORE_BUSY, nothing of it written) and the log is owed.
    fn promote(&self, c: &Connection) -> Result<()> {
        let Some(mut cur) = self.current.get() else {
            return Ok(());
        };
        begin(c, true)?;
        if let Err(e) = self.run_staged(c) {
            rollback(c);
            if is_constraint(&e) {
                // This process was stopped (or starved) mid-append long enough for a reader to
                // replay its log: the acknowledged appends are in SQLite, this one is not made.
                self.drop_staged_as_owed();
                return Err(Error::StoreBusy(
                    "another process replayed this one's acknowledged appends while it was \
                     stopped; nothing of this append was written: retry it"
                        .into(),
                ));
            }
            return Err(e.into());
        }
        self.staged.borrow_mut().clear();
        *self.notes.borrow_mut() = Notes::default();
        cur.promoted = true;
        cur.mark = 0;
        self.current.set(Some(cur));
        Ok(())
    }

    /// The staged writes did not run (they clashed with rows another process replayed from the
    /// log, or the disk failed): what the log holds is owed to SQLite, replayed from the log
    /// (which leaves what is there as it is), and the staged writes are dropped.
    fn drop_staged_as_owed(&self) {
        self.staged.borrow_mut().clear();
        self.touched.borrow_mut().clear();
        *self.notes.borrow_mut() = Notes::default();
        self.owed.set(true);
        self.close_batch();
    }

    fn run_staged(&self, c: &Connection) -> rusqlite::Result<()> {
        for s in self.staged.borrow().iter() {
            c.prepare_cached(s.sql)?
                .execute(rusqlite::params_from_iter(s.params.iter()))?;
        }
        Ok(())
    }

    /// Writes an append's frame to the log: the append is acknowledged when this returns.
    pub fn log(&self, payload: &[u8]) -> Result<()> {
        let mut log = self.log.borrow_mut();
        let Some(log) = log.as_mut() else {
            return Ok(());
        };
        log.write(payload, &mut self.frame.borrow_mut())?;
        self.appends.set(self.appends.get() + 1);
        LAST_APPEND.store(since_start(), Ordering::Release);
        Ok(())
    }

    /// The append in progress ends, acknowledged (`ok`) or not. One that was promoted commits
    /// its transaction now (the batch with it); a failed one leaves the batch as it was before
    /// it. Err only when a promoted append's commit failed (what it held is then owed).
    pub fn end_append(&self, c: &Connection, ok: bool) -> Result<()> {
        let Some(cur) = self.current.take() else {
            return Ok(());
        };
        if !cur.promoted {
            if !ok && self.is_open() {
                self.staged.borrow_mut().truncate(cur.mark);
                let mut notes = self.notes.borrow_mut();
                while let Some((key, before)) = notes.calls_undo.pop() {
                    match before {
                        Some(e) => notes.calls.insert(key, e),
                        None => notes.calls.remove(&key),
                    };
                }
                drop(notes);
                let mut touched = self.touched.borrow_mut();
                touched.retain(|t| t.num != cur.num);
                touched.extend(cur.prior);
                drop(touched);
                if self.staged.borrow().is_empty() && self.log_is_empty() {
                    self.close_batch();
                }
            }
            return Ok(());
        }
        if !ok {
            rollback(c);
            self.touched.borrow_mut().clear();
            self.owed.set(!self.log_is_empty());
            self.close_batch();
            return Ok(());
        }
        self.finish(c)
    }

    fn log_is_empty(&self) -> bool {
        self.log.borrow().as_ref().is_none_or(AppendLog::is_empty)
    }

    /// Commits the open transaction with the batch's row updates, and empties the log.
    fn finish(&self, c: &Connection) -> Result<()> {
        let touched = std::mem::take(&mut *self.touched.borrow_mut());
        let done = touched
            .iter()
            .try_for_each(|t| {
                c.prepare_cached(t.sql)?
                    .execute(rusqlite::params![t.num, t.records as i64])?;
                Ok(())
            })
            .and_then(|()| run(c, "COMMIT"));
        self.close_batch();
        if let Err(e) = done {
            rollback(c);
            self.owed.set(true);
            return Err(e);
        }
        self.emptied()
    }

    fn close_batch(&self) {
        if self.opened.take().is_some() {
            OPEN.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// After an append joined the batch: flushes it if it is full or old enough, unless the write
    /// lock is taken (then the flusher thread tries again).
    pub fn commit_if_due(&self, c: &Connection) -> Result<()> {
        match self.opened.get() {
            Some(t) if self.appends.get() >= MAX_APPENDS || t.elapsed() >= MAX_AGE => {
                self.flush(c, false).map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// Flushes the batch if it began `age` ago or earlier, unless the write lock is taken.
    pub fn flush_if_older(&self, c: &Connection, age: Duration) -> Result<()> {
        if self.older_than(age) {
            self.flush(c, false)?;
        }
        Ok(())
    }

    /// Flushes the batch, waiting for the write lock as any write does.
    pub fn commit(&self, c: &Connection) -> Result<()> {
        self.flush(c, true).map(|_| ())
    }

    /// Runs the staged writes and the row updates in one transaction and empties the log. False
    /// if the write lock was taken and `wait` is false: the batch is left as it is. If the flush
    /// fails, the frames stay in the log, owed to SQLite: the next write replays them first.
    fn flush(&self, c: &Connection, wait: bool) -> Result<bool> {
        if self.current.get().is_some() || !self.is_open() {
            return Ok(true);
        }
        if !begin(c, wait)? {
            return Ok(false);
        }
        if let Err(e) = self.run_staged(c) {
            rollback(c);
            self.drop_staged_as_owed();
            return Err(e.into());
        }
        self.staged.borrow_mut().clear();
        *self.notes.borrow_mut() = Notes::default();
        self.finish(c)?;
        Ok(true)
    }

    /// Inside the open batch, a write's update of its session's row (`write_order.rs`) is made at
    /// the flush instead: one update per session and batch. False when no batch is open.
    pub fn defer_touch(&self, touch: Touch) -> bool {
        if !self.is_open() || self.current.get().is_none() {
            return false;
        }
        let mut touched = self.touched.borrow_mut();
        touched.retain(|t| t.num != touch.num);
        touched.push(touch);
        true
    }

    /// The record count session `num`'s row will hold when the batch is flushed, if the batch
    /// wrote to it: what a read inside the batch compares its records with.
    pub fn pending_count(&self, num: i64) -> Option<u64> {
        let touched = self.touched.borrow();
        touched.iter().find(|t| t.num == num).map(|t| t.records)
    }

    /// Whether session `num` ends before `next` as far as the batch knows: written in it by this
    /// connection, the session's holder, so nobody else wrote since.
    pub fn tail_known(&self, num: i64, next: u64) -> bool {
        self.is_open() && self.pending_count(num) == Some(next)
    }

    /// The frames owed to SQLite, if a flush failed.
    pub fn owed(&self) -> Result<Option<LogRead>> {
        if !self.owed.get() {
            return Ok(None);
        }
        match &*self.log.borrow() {
            Some(log) => log.frames().map(Some),
            None => Ok(None),
        }
    }

    /// This connection's log, if it has one.
    pub fn log_path(&self) -> Option<std::path::PathBuf> {
        self.log.borrow().as_ref().map(|l| l.path().to_path_buf())
    }

    /// Closes the log (its batch flushed): the file goes with it.
    pub fn close_log(&self) {
        if !self.owed.get() && !self.is_open() {
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

    /// Keeps `orphan` (replayed in the open transaction) locked until the transaction ends; it is
    /// removed if it commits.
    pub fn remove_after_commit(&self, orphan: Orphan) {
        self.after_commit.borrow_mut().push(orphan);
    }

    /// The open transaction ended: committed (`committed`) or rolled back.
    pub fn transaction_ended(&self, committed: bool) {
        for o in std::mem::take(&mut *self.after_commit.borrow_mut()) {
            if committed {
                o.remove();
            }
        }
    }
}

/// Connections of this process with a batch open.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// When this process last acknowledged an append to a batch, in µs since `start()`: the flusher
/// thread reads it without taking any connection's lock.
static LAST_APPEND: AtomicU64 = AtomicU64::new(0);

fn start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

fn since_start() -> u64 {
    u64::try_from(start().elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// How long since this process last acknowledged an append to a batch.
pub(crate) fn idle_for() -> Duration {
    Duration::from_micros(since_start().saturating_sub(LAST_APPEND.load(Ordering::Acquire)))
}

/// Whether this process has a batch open on a connection other than `own` (of which `own_open`
/// says whether it has one): a read through `own` is to see it (`Shared::lock`).
pub(crate) fn open_elsewhere(own_open: bool) -> bool {
    OPEN.load(Ordering::Acquire) > usize::from(own_open)
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
