//! Keeping the write-ahead log bounded. In WAL mode a commit appends pages to the -wal file; a
//! checkpoint copies them into the database file and fsyncs it. The log starts over from its
//! beginning only at a write that follows a checkpoint which copied all of it while no reader
//! was still using it; short of that it only grows, whoever writes and however often.
//!
//! So the length of the log, not a count of this process's commits, decides: SQLite tells each
//! commit how many frames the log holds (its WAL hook; the count covers every process writing to
//! the store), and a thread with its own connection acts on it, so appends do not wait for it:
//!
//! - every `PASSIVE_FRAMES` frames a PASSIVE checkpoint copies what it can, blocking nobody;
//! - from `RESTART_FRAMES` on a RESTART checkpoint copies the rest while holding the write lock,
//!   waits (at most `MAX_WAIT_MS`) for readers still on the log to finish their statement, and so
//!   makes the next commit, in any process, start the log over. It first waits, holding no lock,
//!   until no reader is left on an older snapshot (PASSIVE checkpoints copy all of the log): a
//!   reader in a stopped process would otherwise hold every writer up while the write lock waits
//!   for it. Readers in this library hold a
//!   snapshot for one statement (a page of a bulk read, at most about 1 MiB of it), so the wait
//!   is short. A reader that holds the log longer (a transaction held open outside this library)
//!   makes the try fail; one that kept the PASSIVE checkpoints from copying anything further
//!   since the last one is taken to be such a reader, and not waited for. Either way the next try
//!   comes after the log has grown some more (4, 8, 16, then every 32 MiB);
//! - should the thread fall behind (a slow disk, no CPU to spare), the commit that takes the log
//!   past `WRITER_FRAMES` runs that RESTART checkpoint itself before it returns, so the log
//!   cannot outgrow the thread by more than the writer's pace allows (it waits for readers on
//!   older snapshots only `WRITER_DRAIN_MS`: its own process's appends wait with it); with the
//!   same back-off,
//!   except that a try which found another connection's checkpoint running for as long as it
//!   could wait is made again at the next commit (that checkpoint is the one holding it up);
//! - a store opened with a log over `OPEN_CHECKPOINT_BYTES` (left by a process that was killed,
//!   or by an older version) gets a TRUNCATE checkpoint first;
//! - `journal_size_limit` (`LOG_LIMIT_BYTES`, set in store.rs) cuts the file back after a
//!   restart, should it have grown while restarts failed.
//!
//! Lock waits on every connection go through `wait_busy` rather than SQLite's default handler,
//! whose sleeps grow to 100 ms: under two writer processes that let one of them starve for
//! seconds. Committed data is safe whatever a checkpoint does: it is in the log from the moment
//! of commit, and a checkpoint that fails or is cut short leaves it there.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{ffi, Connection, OpenFlags};

thread_local! {
    /// This thread's waits for the write lock give up at once (`waiting_if`): a batch's flush
    /// does not wait, it is tried again a moment later (batch.rs).
    static NO_WAIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, in which a wait for the write lock gives up at once unless `wait`.
pub(crate) fn waiting_if<T>(wait: bool, f: impl FnOnce() -> T) -> T {
    NO_WAIT.set(!wait);
    let out = f();
    NO_WAIT.set(false);
    out
}

/// A frame of the log: a 4 KiB page and its 24-byte header.
const FRAME_BYTES: u64 = 4096 + 24;
/// Frames between PASSIVE checkpoints (about 4 MiB).
const PASSIVE_FRAMES: u32 = 1024;
/// The length of the log (about 16 MiB) from which the thread makes it start over.
const RESTART_FRAMES: u32 = 4096;
/// The length of the log (about 24 MiB) from which a commit makes it start over itself.
const WRITER_FRAMES: u32 = 6144;
/// What the -wal file is cut back to after the log starts over (`journal_size_limit`).
pub const LOG_LIMIT_BYTES: u64 = 20 << 20;
/// A store opened with a larger -wal file gets a TRUNCATE checkpoint first.
pub const OPEN_CHECKPOINT_BYTES: u64 = PASSIVE_FRAMES as u64 * FRAME_BYTES;
/// The longest a checkpoint waits for a lock (and so holds up writers while it waits for
/// readers); less if `busyTimeoutMs` is shorter.
const MAX_WAIT_MS: u32 = 100;
/// The longest a commit that makes the log start over itself waits for readers on older
/// snapshots to move on: it holds up its own process's appends while it waits, and a reader
/// that does not move on (a process stopped mid-read) would do so at every try. The thread waits
/// up to `MAX_WAIT_MS`.
const WRITER_DRAIN_MS: u32 = 5;

/// When the log is next due to start over, after how many failed tries.
struct Due {
    from: u32,
    next: u32,
    failures: u32,
}

impl Due {
    fn new(from: u32) -> Due {
        Due {
            from,
            next: from,
            failures: 0,
        }
    }

    /// After a try at `frames`: on failure the next comes after 4, 8, 16, then every 32 MiB; if
    /// another connection's checkpoint ran all along, at the next chance.
    fn tried(&mut self, outcome: Outcome, frames: u32) {
        match outcome {
            Outcome::Done => {
                self.next = self.from;
                self.failures = 0;
            }
            Outcome::Busy => {}
            Outcome::Failed => {
                self.next = frames.saturating_add(PASSIVE_FRAMES << self.failures.min(3));
                self.failures += 1;
            }
        }
    }
}

/// How a try to make the log start over went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The next commit starts the log over (or it is empty).
    Done,
    /// Another connection's checkpoint was running for as long as this one could wait.
    Busy,
    /// A reader held the log, or the checkpoint failed.
    Failed,
}

/// What the WAL hook shares with the checkpoint thread.
struct Signal {
    /// frames in the log as of this connection's latest commit
    frames: AtomicU32,
    /// `frames / PASSIVE_FRAMES` at the latest nudge
    step: AtomicU32,
    nudge: Mutex<Option<SyncSender<()>>>,
    /// when a commit is to make the log start over itself
    writer: Mutex<Due>,
    /// `Due::next` of `writer`, read without the lock at every commit
    writer_next: AtomicU32,
    /// the writing connection's lock wait, and a checkpoint's
    busy_ms: u32,
    wait_ms: u32,
    /// frames in the log and frames copied after the latest PASSIVE checkpoint (`packed`)
    passive: AtomicU64,
}

/// No PASSIVE checkpoint has run yet.
const UNKNOWN: u64 = u64::MAX;

fn packed(log: u32, copied: u32) -> u64 {
    ((log as u64) << 32) | copied as u64
}

impl Signal {
    fn committed(&self, db: *mut ffi::sqlite3, name: *const c_char, frames: u32) {
        self.frames.store(frames, Ordering::Relaxed);
        let step = frames / PASSIVE_FRAMES;
        if step > self.step.swap(step, Ordering::Relaxed) {
            if let Some(tx) = self
                .nudge
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                // Full: the thread is at work and reads `frames` when it gets to the nudge.
                let _ = tx.try_send(());
            }
        }
        if frames >= self.writer_next.load(Ordering::Relaxed) {
            // SAFETY: `db` is the connection whose commit called the hook, and `name` its
            // database's name, both valid during the call.
            let outcome = unsafe {
                set_busy_handler(db, self.wait_ms);
                let outcome =
                    self.restart(db, name, ffi::SQLITE_CHECKPOINT_RESTART, WRITER_DRAIN_MS);
                set_busy_handler(db, self.busy_ms);
                outcome
            };
            let mut due = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            due.tried(outcome, frames);
            self.writer_next.store(due.next, Ordering::Relaxed);
        }
    }

    /// A PASSIVE checkpoint: copies what it can, holding nobody up. True if a reader seems to
    /// hold the log: it could not copy everything, and copied no further than the one before
    /// while the log grew. (A reader of this library moves on within milliseconds.)
    ///
    /// # Safety
    /// `db` and `name` must be a valid connection and the name of one of its databases.
    unsafe fn passive(&self, db: *mut ffi::sqlite3, name: *const c_char) -> bool {
        let mode = ffi::SQLITE_CHECKPOINT_PASSIVE;
        let Ok((log, copied)) = (unsafe { checkpoint(db, name, mode, 0) }) else {
            return false;
        };
        let before = self.passive.swap(packed(log, copied), Ordering::Relaxed);
        let (log_before, copied_before) = ((before >> 32) as u32, before as u32);
        before != UNKNOWN && copied < log && copied == copied_before && log > log_before
    }

    /// Makes the next commit start the log over (`mode` RESTART), or empties it now (TRUNCATE):
    /// the bulk of the copying without holding anyone up, then the rest with the write lock
    /// held. Not tried while a reader holds the log: it would only hold writers up for
    /// `wait_ms` and fail.
    ///
    /// # Safety
    /// `db` and `name` must be a valid connection and the name of one of its databases.
    unsafe fn restart(
        &self,
        db: *mut ffi::sqlite3,
        name: *const c_char,
        mode: c_int,
        drain_ms: u32,
    ) -> Outcome {
        if unsafe { self.passive(db, name) } {
            return Outcome::Failed;
        }
        if let Err(outcome) = unsafe { drained(db, name, drain_ms) } {
            return outcome;
        }
        match unsafe { checkpoint(db, name, mode, self.wait_ms) } {
            Ok((log, copied)) if log == copied => Outcome::Done,
            Err(Outcome::Busy) => Outcome::Busy,
            _ => Outcome::Failed,
        }
    }
}

/// Waits, holding no lock, until a PASSIVE checkpoint has copied the whole log: no reader is
/// left on an older snapshot. Only then may the write lock be taken, for while it is held the
/// checkpoint waits for such readers and every writer waits with it, and a reader in a process
/// that was stopped mid-read (SIGSTOP, a debugger) would hold them all up for `wait_ms`, at each
/// try of each process. Gives up after `wait_ms`: Busy if another connection's checkpoint was
/// running, Failed if a reader held the log.
///
/// # Safety
/// `db` and `name` must be a valid connection and the name of one of its databases.
unsafe fn drained(db: *mut ffi::sqlite3, name: *const c_char, wait_ms: u32) -> Result<(), Outcome> {
    let start = Instant::now();
    loop {
        let outcome = match unsafe { checkpoint(db, name, ffi::SQLITE_CHECKPOINT_PASSIVE, 0) } {
            Ok((log, copied)) if copied >= log => return Ok(()),
            Ok(_) => Outcome::Failed,
            Err(outcome) => outcome,
        };
        if start.elapsed() >= Duration::from_millis(wait_ms as u64) {
            return Err(outcome);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

unsafe extern "C" fn wal_hook(
    ctx: *mut c_void,
    db: *mut ffi::sqlite3,
    name: *const c_char,
    frames: c_int,
) -> c_int {
    // SAFETY: `ctx` is the `Signal` of the `Checkpointer` that registered this hook, and it
    // outlives the hook (see `Checkpointer::watch`).
    let signal = unsafe { &*(ctx as *const Signal) };
    signal.committed(db, name, frames.max(0) as u32);
    // Whatever the checkpoint did, the commit stands.
    ffi::SQLITE_OK
}

pub struct Checkpointer {
    signal: Arc<Signal>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Starts the thread for the database at `path`; None for in-memory stores. With `truncate`
    /// its first act is a TRUNCATE checkpoint.
    pub fn start(path: &str, busy_timeout_ms: u32, truncate: bool) -> Option<Checkpointer> {
        if path == ":memory:" || path.is_empty() {
            return None;
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .ok()?;
        let wait_ms = busy_timeout_ms.min(MAX_WAIT_MS);
        set_busy_timeout(&conn, wait_ms).ok()?;
        let (tx, rx) = sync_channel::<()>(1);
        let signal = Arc::new(Signal {
            frames: AtomicU32::new(0),
            step: AtomicU32::new(0),
            nudge: Mutex::new(Some(tx)),
            writer: Mutex::new(Due::new(WRITER_FRAMES)),
            writer_next: AtomicU32::new(WRITER_FRAMES),
            busy_ms: busy_timeout_ms,
            wait_ms,
            passive: AtomicU64::new(UNKNOWN),
        });
        let seen = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name("threadline-checkpoint".into())
            .spawn(move || {
                // SAFETY: the handle is valid while `conn` is, and `conn` lives in this thread.
                let db = unsafe { conn.handle() };
                let main = c"main".as_ptr();
                // (SAFETY of the calls below: `db` is `conn`'s handle and `main` a static name.)
                // A connection opens the log at its first read; until then it has none to
                // checkpoint. (A store busy at this moment is tried again at the next nudge.)
                let reads = |c: &Connection| {
                    c.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
                };
                let mut opened = reads(&conn).is_ok();
                if truncate && opened {
                    unsafe {
                        seen.restart(db, main, ffi::SQLITE_CHECKPOINT_TRUNCATE, seen.wait_ms)
                    };
                }
                let mut due = Due::new(RESTART_FRAMES);
                while rx.recv().is_ok() {
                    opened = opened || reads(&conn).is_ok();
                    if !opened {
                        continue;
                    }
                    let frames = seen.frames.load(Ordering::Relaxed);
                    if frames < due.next {
                        // A failure (busy, disk) is harmless: the frames stay in the log.
                        unsafe { seen.passive(db, main) };
                    } else {
                        let outcome = unsafe {
                            seen.restart(db, main, ffi::SQLITE_CHECKPOINT_RESTART, seen.wait_ms)
                        };
                        due.tried(outcome, frames);
                    }
                }
                drop(conn);
            })
            .ok()?;
        Some(Checkpointer {
            signal,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Has `conn` (the store's writing connection) report its commits. `unwatch` must be called
    /// before this checkpointer is dropped if `conn` outlives it.
    pub fn watch(&self, conn: &Connection) {
        // SAFETY: the handle is valid while `conn` is; the context is the `Signal` this
        // checkpointer keeps alive until it is dropped, and the hook is removed before then or
        // goes with the connection.
        unsafe {
            ffi::sqlite3_wal_hook(
                conn.handle(),
                Some(wal_hook),
                Arc::as_ptr(&self.signal) as *mut c_void,
            );
        }
    }

    pub fn unwatch(conn: &Connection) {
        // SAFETY: the handle is valid while `conn` is.
        unsafe {
            ffi::sqlite3_wal_hook(conn.handle(), None, std::ptr::null_mut());
        }
    }

    /// Stops the thread after any checkpoint in progress.
    pub fn stop(&self) {
        self.signal
            .nudge
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs a checkpoint: the frames in the log and the frames copied if it ran to its end (for
/// RESTART and TRUNCATE: copied everything and no reader is left on the log). A checkpoint by
/// another connection (another process's, say) makes SQLite give up at once without a try: then
/// it tries again, for at most `wait_ms` (Busy if that one is still running then; at once with
/// 0).
///
/// # Safety
/// `db` and `name` must be a valid connection and the name of one of its databases.
unsafe fn checkpoint(
    db: *mut ffi::sqlite3,
    name: *const c_char,
    mode: c_int,
    wait_ms: u32,
) -> Result<(u32, u32), Outcome> {
    let start = Instant::now();
    loop {
        // -1: the checkpoint did not start.
        let (mut log, mut copied) = (-1, -1);
        let rc = unsafe { ffi::sqlite3_wal_checkpoint_v2(db, name, mode, &mut log, &mut copied) };
        match rc {
            // -1 here: the connection had not opened the log (it had read nothing yet).
            ffi::SQLITE_OK if log >= 0 && copied >= 0 => return Ok((log as u32, copied as u32)),
            ffi::SQLITE_BUSY if log == -1 => {
                if start.elapsed() >= Duration::from_millis(wait_ms as u64) {
                    return Err(Outcome::Busy);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            _ => return Err(Outcome::Failed),
        }
    }
}

/// Lock waits of `conn` give up after `ms` milliseconds (STORE_BUSY), trying again at most 250 µs
/// apart: SQLite's own handler sleeps up to 100 ms between tries, and a writer that sleeps that
/// long next to another that never sleeps may not get the lock for seconds.
pub fn set_busy_timeout(conn: &Connection, ms: u32) -> rusqlite::Result<()> {
    // SAFETY: the handle is valid while `conn` is.
    let rc = unsafe { set_busy_handler(conn.handle(), ms) };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None))
    }
}

/// # Safety
/// `db` must be a valid connection.
unsafe fn set_busy_handler(db: *mut ffi::sqlite3, ms: u32) -> c_int {
    // The context is a number, not a pointer.
    unsafe { ffi::sqlite3_busy_handler(db, Some(wait_busy), ms as usize as *mut c_void) }
}

thread_local! {
    /// When the current lock wait of this thread began.
    static WAIT_START: Cell<Option<Instant>> = const { Cell::new(None) };
}

unsafe extern "C" fn wait_busy(ctx: *mut c_void, count: c_int) -> c_int {
    let timeout = Duration::from_millis(ctx as usize as u64);
    let now = Instant::now();
    // `count` is 0 at the first call for a lock, and counts up while that lock stays busy.
    let start = if count == 0 {
        WAIT_START.set(Some(now));
        now
    } else {
        WAIT_START.get().unwrap_or(now)
    };
    let waited = now.duration_since(start);
    // A batch's flush does not wait: it is tried again a moment later (batch.rs).
    if waited >= timeout || NO_WAIT.get() {
        return 0;
    }
    let step = match count {
        0 => 20,
        1 => 50,
        2 => 100,
        _ => 250,
    };
    std::thread::sleep(Duration::from_micros(step).min(timeout - waited));
    1
}

/// Checkpoints the whole log and starts it over, best effort: after a delete, the older copies of
/// the deleted pages in the log are gone with it (a reader still using the log keeps it; the
/// next checkpoint resets it).
pub(crate) fn truncate_now(conn: &Connection) {
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wal_bytes(path: &str) -> u64 {
        std::fs::metadata(format!("{path}-wal")).map_or(0, |m| m.len())
    }

    /// A store-like connection (WAL, no automatic checkpoints), its file cut back to nothing when
    /// the log starts over.
    fn store(dir: &tempfile::TempDir) -> (String, Connection) {
        let path = dir.path().join("w.db").to_string_lossy().into_owned();
        let conn = Connection::open(&path).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
        conn.execute_batch(
            "PRAGMA wal_autocheckpoint = 0; PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit = 0;
             CREATE TABLE t(x BLOB);",
        )
        .unwrap();
        (path, conn)
    }

    #[test]
    fn the_thread_makes_the_log_start_over_once_it_is_long() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = store(&dir);
        let c = Checkpointer::start(&path, 5000, false).unwrap();
        c.watch(&conn);
        let row = vec![7u8; 8000];
        let mut max = 0;
        // About 12,000 frames, with pauses for the thread to keep up: the log never gets long
        // enough for the writer to step in. (Pauses every 50 rows: at every 100, a machine busy
        // with other builds let the log reach the writer's bound.)
        for i in 0..4000 {
            conn.execute("INSERT INTO t(x) VALUES (?1)", [&row])
                .unwrap();
            max = max.max(wal_bytes(&path));
            if i % 50 == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Checkpointer::unwatch(&conn);
        assert!(
            max > RESTART_FRAMES as u64 * FRAME_BYTES,
            "the log grew to {max} bytes"
        );
        assert!(
            max < WRITER_FRAMES as u64 * FRAME_BYTES,
            "the log grew to {max} bytes"
        );
    }

    /// Frames in the log of the store at `path`.
    fn frames(path: &str) -> u64 {
        wal_bytes(path).saturating_sub(32) / FRAME_BYTES
    }

    #[test]
    fn a_reader_left_on_an_older_snapshot_holds_no_writer_up_when_the_log_is_due_to_start_over() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = store(&dir);
        // The writer never waits for a lock: any moment a checkpoint holds the write lock shows
        // as a failed insert.
        set_busy_timeout(&conn, 0).unwrap();
        let c = Checkpointer::start(&path, 5000, false).unwrap();
        c.watch(&conn);
        let row = vec![7u8; 8000];
        let mut busy = 0;
        let mut insert = || match conn.execute("INSERT INTO t(x) VALUES (?1)", [&row]) {
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                busy += 1
            }
            Err(e) => panic!("{e}"),
        };
        // The reader takes its snapshot after the thread's last PASSIVE checkpoint, as a process
        // stopped in the middle of a read does: nothing marks it as a reader that holds the log.
        while frames(&path) < RESTART_FRAMES as u64 - 200 {
            insert();
        }
        let reader = Connection::open(&path).unwrap();
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM t;")
            .unwrap();
        while frames(&path) < RESTART_FRAMES as u64 {
            insert();
        }
        // The thread is due to make the log start over; the writer goes on for 400 ms meanwhile.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(400) {
            insert();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            frames(&path) < WRITER_FRAMES as u64,
            "the writer did not run a checkpoint itself"
        );
        Checkpointer::unwatch(&conn);
        assert_eq!(
            busy, 0,
            "inserts that found the write lock taken while the reader held the log"
        );
        reader.execute_batch("COMMIT").unwrap();
    }

    #[test]
    fn with_its_thread_stopped_the_writer_keeps_the_log_bounded_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = store(&dir);
        let c = Checkpointer::start(&path, 5000, false).unwrap();
        c.stop();
        c.watch(&conn);
        let row = vec![7u8; 8000];
        let mut max = 0;
        for _ in 0..8000 {
            conn.execute("INSERT INTO t(x) VALUES (?1)", [&row])
                .unwrap();
            max = max.max(wal_bytes(&path));
        }
        Checkpointer::unwatch(&conn);
        // 8,000 rows of two pages and a bit: about 100 MiB of log had it never started over.
        let limit = (WRITER_FRAMES as u64 + 8) * FRAME_BYTES;
        assert!(max <= limit, "the -wal file grew to {max} bytes");
        assert!(max > limit / 2, "the log grew until the writer stepped in");
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 8000);
    }
}
