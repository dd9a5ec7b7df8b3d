//! The store files this process has open: one set of connections per file. SQLite cannot close
//! a file descriptor while another connection of the same process holds a lock on that file
//! (POSIX locks belong to the process, and closing any descriptor would drop them all), so it
//! keeps it open until the other closes: a store dropped while another store on the same file
//! stayed open would keep two descriptors for as long. Stores of one process that open the same
//! file share its connections instead (one writable, one readonly): opening it again costs no
//! descriptor, dropping a store frees nothing that another still uses, and every write of this
//! process to the file goes through one connection and its batch (`batch.rs`), which is what lets
//! an append take no SQLite lock: two connections of one process would each stage appends to the
//! same session without seeing the other's. The stores' own settings (durability, busy timeout)
//! apply to what each of them does through it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::Result;
use crate::model::options::{Durability, StoreOptions};
use crate::storage::batch::{self, Batch, IDLE, MAX_AGE};
use crate::storage::checkpoint::Checkpointer;
use crate::storage::db::Db;

/// A store file's connections.
pub(crate) struct OpenFile {
    /// Declared before `checkpointer`, so dropped before it: its WAL hook points into it.
    pub conn: Mutex<Db>,
    pub checkpointer: Option<Checkpointer>,
    /// Where the table lists it; None if it is not shared (in memory, or not found on disk).
    key: Option<Key>,
    /// The file's canonical path (symlinks resolved): where its append logs are, whichever path
    /// opened it. None in memory and on PostgreSQL.
    real: Option<PathBuf>,
}

/// A file and whether its connection writes. The file is its canonical path (a relative path,
/// `./` or a symlink name the same file) and its inode (a file replaced at that path is another);
/// the path stays in the key because a bind mount shows the same inode under another path with
/// other permissions (read-only).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    path: std::path::PathBuf,
    dev: u64,
    ino: u64,
    readonly: bool,
}

struct Entry {
    file: Weak<OpenFile>,
    /// stores open on it (not closed, not dropped)
    handles: usize,
}

fn table() -> MutexGuard<'static, HashMap<Key, Entry>> {
    static TABLE: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    TABLE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The open file at `file` (SQLite's file name) for a new store: the one already open, else a
/// new one from `make` (its connection and its checkpointer). The table stays locked meanwhile:
/// two threads opening one file at once get one connection.
pub(crate) fn open(
    file: &str,
    options: &StoreOptions,
    make: impl FnOnce() -> Result<(Connection, Option<Checkpointer>)>,
) -> Result<Arc<OpenFile>> {
    let mut table = table();
    if let Some(key) = key_of(file, options) {
        if let Some(entry) = table.get_mut(&key) {
            if let Some(open) = entry.file.upgrade() {
                entry.handles += 1;
                drop(table);
                if options.durability == Durability::Power && !options.readonly {
                    // A store that asks for an fsync per commit has it, whoever opened the file.
                    let conn = open.conn.lock().unwrap_or_else(|e| e.into_inner());
                    conn.sqlite()?.execute_batch("PRAGMA synchronous = FULL")?;
                }
                return Ok(open);
            }
        }
    }
    let (conn, checkpointer) = make()?;
    // The logs are beside the real file, so every path to it (a symlink to the file or to a
    // directory above it) finds the same logs; SQLite puts its own -wal and -shm files there too.
    let real = (file != ":memory:")
        .then(|| std::fs::canonicalize(file).ok())
        .flatten();
    let writable = real.is_some() && !options.readonly;
    let busy = options.busy_timeout_ms;
    let key = key_of(file, options);
    let open = Arc::new(OpenFile {
        conn: Mutex::new(Db::Sqlite(
            conn,
            Box::new(Batch::new(real.as_deref(), writable, busy)),
        )),
        checkpointer,
        key: key.clone(),
        real,
    });
    if let Some(key) = key {
        let file = Arc::downgrade(&open);
        table.insert(key, Entry { file, handles: 1 });
    }
    drop(table);
    if writable {
        register_batching(&open);
    }
    Ok(open)
}

/// A store lets go of `file` (closed or dropped), with `conn` its connection, locked. The last
/// store to let go closes the file, even while closed stores still refer to it.
pub(crate) fn release(file: &OpenFile, conn: &mut Db) -> Result<()> {
    if let Some(key) = &file.key {
        let mut table = table();
        if let Some(entry) = table.get_mut(key) {
            entry.handles = entry.handles.saturating_sub(1);
            if entry.handles > 0 {
                return Ok(());
            }
            table.remove(key);
        }
    }
    file.shut(conn)
}

impl OpenFile {
    /// Stops the checkpointer and closes the connection; an inert in-memory one takes its place,
    /// so the file is really closed now.
    fn shut(&self, conn: &mut Db) -> Result<()> {
        // What the open batch holds is committed; if that fails it stays in the log, replayed
        // by the next process to open the store.
        let _ = conn.commit_batch();
        if let (Some(c), Db::Sqlite(sqlite, ..)) = (&self.checkpointer, &*conn) {
            c.stop();
            Checkpointer::unwatch(sqlite);
        }
        let inert = Db::Sqlite(Connection::open_in_memory()?, Box::default());
        match std::mem::replace(conn, inert) {
            Db::Sqlite(c, ..) => c.close().map_err(|(_, e)| e.into()),
            Db::Postgres(p) => (*p).close(),
        }
    }

    /// A PostgreSQL store's connection: not shared (the server sees every client anyway).
    pub(crate) fn postgres(db: Db) -> Arc<OpenFile> {
        Arc::new(OpenFile {
            conn: Mutex::new(db),
            checkpointer: None,
            key: None,
            real: None,
        })
    }

    /// The file's canonical path (see `real`).
    pub(crate) fn real_path(&self) -> Option<PathBuf> {
        self.real.clone()
    }
}

fn key_of(file: &str, options: &StoreOptions) -> Option<Key> {
    if file == ":memory:" {
        return None;
    }
    let meta = std::fs::metadata(file).ok()?;
    let (dev, ino) = inode(&meta);
    Some(Key {
        path: std::fs::canonicalize(file).ok()?,
        dev,
        ino,
        readonly: options.readonly,
    })
}

#[cfg(unix)]
fn inode(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// Elsewhere the canonical path alone names the file.
#[cfg(not(unix))]
fn inode(_meta: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// The files whose connection batches appends, for the thread that commits a batch when no
/// append comes to do it (started with the first), for a wait for the write lock, and for exit.
fn batching() -> &'static Mutex<Vec<Weak<OpenFile>>> {
    static FILES: OnceLock<Mutex<Vec<Weak<OpenFile>>>> = OnceLock::new();
    FILES.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("threadline-batch".into())
            .spawn(commit_when_old);
        // SAFETY: `at_exit` is a plain function that only takes locks it can get without waiting.
        #[cfg(unix)]
        unsafe {
            libc::atexit(at_exit);
        }
        Mutex::new(Vec::new())
    })
}

fn register_batching(file: &Arc<OpenFile>) {
    let mut files = batching().lock().unwrap_or_else(|e| e.into_inner());
    files.retain(|f| f.strong_count() > 0);
    files.push(Arc::downgrade(file));
}

fn batching_files() -> Vec<Arc<OpenFile>> {
    let files = batching().lock().unwrap_or_else(|e| e.into_inner());
    files.iter().filter_map(Weak::upgrade).collect()
}

/// The flusher thread: once a batch opened, commits every batch once no append joined it for
/// `IDLE`, or once it is `MAX_AGE` old, until none is left open. While appends keep coming it
/// looks at the connections only every `MAX_AGE` (a look takes each one's lock).
fn commit_when_old() {
    loop {
        batch::wait_for_batch();
        let mut looked = Instant::now();
        let mut nap = IDLE;
        let mut again = false;
        loop {
            std::thread::sleep(nap);
            let since = batch::idle_for();
            if since < IDLE && looked.elapsed() < MAX_AGE {
                // An append came since: looked at again once it is IDLE old, in case it was the
                // last before a pause; if appends keep coming, and batch, only when the batch is
                // due (a thread woken every IDLE would take CPU from the appending one).
                nap = if again {
                    MAX_AGE.saturating_sub(looked.elapsed())
                } else {
                    IDLE - since
                };
                again = true;
                continue;
            }
            let idle = since >= IDLE;
            nap = IDLE;
            again = false;
            looked = Instant::now();
            let age = if idle { Duration::ZERO } else { MAX_AGE };
            let mut open = false;
            for f in batching_files() {
                let conn = f.conn.lock().unwrap_or_else(|e| e.into_inner());
                // A failed commit is owed, and replayed by the next write.
                let _ = conn.commit_batch_if_older(age);
                open |= conn.batch_open();
            }
            if !open {
                break;
            }
        }
    }
}

/// Flushes the batch of the writable connection of this process to `real` (the file's canonical
/// path), for a read through its readonly connection. It waits for that connection (whose
/// holder waits for no other connection's lock, so this cannot deadlock).
pub(crate) fn commit_batches(real: &std::path::Path, own: &OpenFile) {
    for f in batching_files() {
        if f.real.as_deref() == Some(real) && !std::ptr::eq(Arc::as_ptr(&f), own) {
            let conn = f.conn.lock().unwrap_or_else(|e| e.into_inner());
            let _ = conn.commit_batch();
        }
    }
}

/// At `exit`: every batch is committed and its log removed, so what was acknowledged is in
/// SQLite for the next process, and nothing is left to replay.
#[cfg(unix)]
extern "C" fn at_exit() {
    for f in batching_files() {
        if let Ok(conn) = f.conn.try_lock() {
            if conn.commit_batch().is_ok() {
                conn.close_log();
            }
        }
    }
}
