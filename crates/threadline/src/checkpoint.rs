//! Background checkpoints. In WAL mode a commit appends pages to the -wal file; a checkpoint
//! copies them into the database file and fsyncs it, which takes milliseconds. Left to SQLite,
//! that happens inside whichever append crosses the threshold; here a thread with its own
//! connection does it, so appends never wait for it. Committed data is safe either way: it is in
//! the WAL from the moment of commit.
//!
//! Under a steady stream of appends a background checkpoint never quite catches up, and SQLite
//! starts the log over only after one that did; the -wal file would grow without end, and every
//! append would pay for fresh file pages. So every `COMMITS_PER_RESTART` commits a restart falls
//! due: the background thread pauses, and the writer runs a checkpoint itself after each commit
//! (returning at once while a background pass is still running) until one copies the whole log;
//! the next commit then starts the log from the beginning.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

/// Commits between nudges to the background checkpointer (4 or 5 pages each: about 4 MiB).
const COMMITS_PER_CHECKPOINT: u32 = 256;
/// Commits between checkpoints by the writer itself, which let the log start over.
const COMMITS_PER_RESTART: u32 = 1024;
/// A due restart is given up (until the next one) after this many checkpoints that ran but could
/// not copy the whole log (a reader on an old snapshot). One that found the log busy is free.
const RESTART_TRIES: u32 = 64;

/// What a checkpoint by the writer achieved.
pub enum Outcome {
    /// The whole log was copied: the next commit starts it over.
    Complete,
    /// The background checkpoint was running.
    Busy,
    /// Some frames could not be copied yet, or the checkpoint failed.
    Partial,
}

pub struct Checkpointer {
    nudge: Mutex<Option<SyncSender<()>>>,
    commits: AtomicU32,
    /// Tries left for a due restart; while above 0 the background thread stays out of the way.
    restart_tries: Arc<AtomicU32>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Starts the thread for the database at `path`; None for in-memory stores.
    pub fn start(path: &str, busy_timeout_ms: u32) -> Option<Checkpointer> {
        if path == ":memory:" || path.is_empty() {
            return None;
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .ok()?;
        conn.busy_timeout(std::time::Duration::from_millis(busy_timeout_ms as u64))
            .ok()?;
        let (tx, rx) = sync_channel::<()>(1);
        let restart_tries = Arc::new(AtomicU32::new(0));
        let restart_due = Arc::clone(&restart_tries);
        let thread = std::thread::Builder::new()
            .name("threadline-checkpoint".into())
            .spawn(move || {
                while rx.recv().is_ok() {
                    // PASSIVE copies what it can without blocking writers or readers. A failure
                    // (busy, disk) is harmless: the frames stay in the log for the next pass.
                    if restart_due.load(Ordering::Relaxed) == 0 {
                        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    }
                }
            })
            .ok()?;
        Some(Checkpointer {
            nudge: Mutex::new(Some(tx)),
            commits: AtomicU32::new(0),
            restart_tries,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Called after each commit; true when the writer should now run a checkpoint itself.
    pub fn committed(&self) -> bool {
        let n = self.commits.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if n.is_multiple_of(COMMITS_PER_RESTART) {
            self.restart_tries.store(RESTART_TRIES, Ordering::Relaxed);
        } else if n.is_multiple_of(COMMITS_PER_CHECKPOINT) {
            if let Some(tx) = self
                .nudge
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                match tx.try_send(()) {
                    Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
                }
            }
        }
        self.restart_tries.load(Ordering::Relaxed) > 0
    }

    /// How the writer's checkpoint went.
    pub fn writer_checkpointed(&self, outcome: Outcome) {
        let left = self.restart_tries.load(Ordering::Relaxed);
        let left = match outcome {
            Outcome::Complete => 0,
            Outcome::Busy => left,
            Outcome::Partial => left.saturating_sub(1),
        };
        self.restart_tries.store(left, Ordering::Relaxed);
    }

    /// Stops the thread after any checkpoint in progress.
    pub fn stop(&self) {
        self.nudge.lock().unwrap_or_else(|e| e.into_inner()).take();
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
