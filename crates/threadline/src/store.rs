//! A store: one SQLite file (WAL) holding any number of sessions.

use std::collections::HashMap;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use crate::checkpoint::{self, Checkpointer};
use crate::clock;
use crate::error::{Error, Result};
use crate::open_file::{self, OpenFile};
use crate::options::{
    Durability, SessionFilter, SessionInfo, SessionOptions, Status, StoreOptions,
};
use crate::owner;
use crate::schema;
use crate::session::Session;

/// The connection and settings that a store and all its sessions share.
pub(crate) struct Shared {
    /// the file's connections, shared with the other stores of this process open on it
    file: Arc<OpenFile>,
    closed: AtomicBool,
    pub path: String,
    pub options: StoreOptions,
    /// sessions this process holds through this store, with the time of its last heartbeat
    owned: Mutex<HashMap<i64, i64>>,
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
    /// The open connection, or CLOSED.
    pub fn lock(&self) -> Result<MutexGuard<'_, Connection>> {
        let guard = self.file.conn.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("the store is closed".into()));
        }
        Ok(guard)
    }

    /// Before a write, inside its transaction: holds the session for this process (SESSION_LOCKED
    /// if another live process does), refreshing the heartbeat at most every HEARTBEAT_MS.
    /// Returns the heartbeat to remember once the transaction commits.
    pub fn claim(&self, conn: &Connection, num: i64, id: &str) -> Result<Option<i64>> {
        let now = clock::now_ms();
        let last = self.owned().get(&num).copied();
        if last.is_some_and(|t| now - t < owner::HEARTBEAT_MS) {
            return Ok(None);
        }
        owner::claim(conn, num, id, now).map(Some)
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
            let _ = owner::release(&conn, num);
        }
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

pub struct Store {
    shared: Arc<Shared>,
}

/// `THREADLINE_HOME/threadline.db` if THREADLINE_HOME is set, else the platform's per-user data
/// directory + `threadline/threadline.db`.
pub fn default_store_path() -> PathBuf {
    match std::env::var_os("THREADLINE_HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home).join("threadline.db"),
        _ => dirs::data_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("threadline")
            .join("threadline.db"),
    }
}

impl Store {
    /// Opens the store at `path` (created if missing; `:memory:` for one in memory only).
    pub fn open(path: Option<&str>, options: StoreOptions) -> Result<Store> {
        // The default location is ours to make (0700); a path the caller gives must be in a
        // directory that exists: nothing is created that the caller did not ask for.
        let (path, make_dirs) = match path {
            Some(p) => (p.to_string(), false),
            None => (default_store_path().to_string_lossy().into_owned(), true),
        };
        let file = sqlite_filename(&path);
        let open = open_file::open(&file, &options, || {
            let conn = open_connection(&file, &options, make_dirs)?;
            let checkpointer = if options.readonly {
                None
            } else {
                // A log this long at open was left by a process that did not close the store
                // (or that could not restart it): it is checkpointed and cut back first.
                let wal = std::fs::metadata(format!("{file}-wal")).map_or(0, |m| m.len());
                Checkpointer::start(
                    &file,
                    options.busy_timeout_ms,
                    wal > checkpoint::OPEN_CHECKPOINT_BYTES,
                )
            };
            if let Some(c) = &checkpointer {
                c.watch(&conn);
            }
            Ok((conn, checkpointer))
        })
        .map_err(|e| e.during(&format!("open {path}")))?;
        let shared = Shared {
            file: open,
            closed: AtomicBool::new(false),
            path,
            options,
            owned: Mutex::new(HashMap::new()),
        };
        Ok(Store {
            shared: Arc::new(shared),
        })
    }

    /// An in-memory store, for sessions made without one.
    pub fn memory() -> Result<Store> {
        Store::open(Some(":memory:"), StoreOptions::default())
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub fn path(&self) -> &str {
        &self.shared.path
    }

    pub fn options(&self) -> &StoreOptions {
        &self.shared.options
    }

    pub fn create_session(&self, options: SessionOptions) -> Result<Session> {
        self.create(options).map_err(|e| e.during("createSession"))
    }

    fn create(&self, o: SessionOptions) -> Result<Session> {
        self.shared.writable()?;
        let id = match o.id {
            Some(id) if id.is_empty() => {
                return Err(Error::InvalidInput("id: must not be empty".into()))
            }
            Some(id) => id,
            None => uuid::Uuid::now_v7().to_string(),
        };
        let now = clock::now_ms();
        let guard = self.shared.lock()?;
        let conn = crate::txn::Txn::immediate(&guard)?;
        let exists: Option<i64> = conn
            .query_row("SELECT num FROM sessions WHERE id = ?1", [&id], |r| {
                r.get(0)
            })
            .optional()?;
        if exists.is_some() {
            return Err(Error::InvalidInput(format!(
                "id: a session '{id}' already exists"
            )));
        }
        let metadata = o.metadata.map(|m| serde_json::Value::Object(m).to_string());
        conn.execute(
            "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata)
             VALUES (?1, ?2, ?3, ?4, ?5, 'active', ?6, ?6, ?7, ?8, ?9)",
            params![id, o.project, o.title, o.provider, o.model, now, o.context_window.map(|w| w as i64), o.prompt_key, metadata],
        )?;
        let num = conn.last_insert_rowid();
        crate::write_order::touch(&conn, num)?;
        conn.commit()?;
        drop(guard);
        Session::attach(self.shared.clone(), num, id)
    }

    /// Opens a stored session. NOT_FOUND if absent; PROMPT_MISMATCH if `prompt_key` is given and
    /// the session was made with another.
    pub fn open_session(&self, id: &str, prompt_key: Option<&str>) -> Result<Session> {
        let found: Option<(i64, Option<String>)> = {
            let conn = self.shared.lock().map_err(|e| e.during("openSession"))?;
            conn.query_row(
                "SELECT num, prompt_key FROM sessions WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| Error::from(e).during("openSession"))?
        };
        let Some((num, key)) = found else {
            return Err(Error::NotFound(format!("openSession: no session '{id}'")));
        };
        if let (Some(given), Some(stored)) = (prompt_key, key.as_deref()) {
            if given != stored {
                return Err(Error::PromptMismatch(format!(
                    "openSession: session '{id}' was made for prompt '{stored}', not '{given}'"
                )));
            }
        }
        Session::attach(self.shared.clone(), num, id.to_string())
            .map_err(|e| e.during("openSession"))
    }

    /// Sessions, most recently updated first.
    pub fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionInfo>> {
        let run = || -> Result<Vec<SessionInfo>> {
            let conn = self.shared.lock()?;
            let mut stmt = conn.prepare_cached(
                "SELECT num FROM sessions WHERE (?1 IS NULL OR project = ?1) AND (?2 IS NULL OR status = ?2)",
            )?;
            let nums: Vec<i64> = stmt
                .query_map(
                    params![filter.project, filter.status.map(Status::as_str)],
                    |r| r.get(0),
                )?
                .collect::<rusqlite::Result<_>>()?;
            let since = bound(&filter.since, "since")?;
            let until = bound(&filter.until, "until")?;
            let mut out = Vec::with_capacity(nums.len());
            for num in nums {
                let (info, recency) = crate::session::read_info(&conn, num)?;
                let updated = recency.updated_ms;
                if since.is_some_and(|s| updated < s) || until.is_some_and(|u| updated > u) {
                    continue;
                }
                out.push((recency, info));
            }
            out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.id.cmp(&a.1.id)));
            let limit = filter.limit.map_or(usize::MAX, |l| l as usize);
            Ok(out.into_iter().take(limit).map(|(_, i)| i).collect())
        };
        run().map_err(|e| e.during("listSessions"))
    }

    /// Sessions left `active` by a process that is gone (killed, crashed, or exited without
    /// closing them), most recently updated first.
    pub fn interrupted_sessions(&self) -> Result<Vec<SessionInfo>> {
        let run = || -> Result<Vec<SessionInfo>> {
            let conn = self.shared.lock()?;
            let mut out = Vec::new();
            for num in owner::interrupted(&conn, clock::now_ms())? {
                out.push(crate::session::read_info(&conn, num)?);
            }
            out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.id.cmp(&a.0.id)));
            Ok(out.into_iter().map(|(i, _)| i).collect())
        };
        run().map_err(|e| e.during("interruptedSessions"))
    }

    /// Deletes a session, its records, and the blobs no other record uses.
    pub fn delete_session(&self, id: &str) -> Result<()> {
        let run = || -> Result<()> {
            self.shared.writable()?;
            let conn = self.shared.lock()?;
            let tx = crate::txn::Txn::immediate(&conn)?;
            let num: Option<i64> = tx
                .query_row("SELECT num FROM sessions WHERE id = ?1", [id], |r| r.get(0))
                .optional()?;
            let Some(num) = num else {
                return Err(Error::NotFound(format!("no session '{id}'")));
            };
            owner::check_free(&tx, num, id, clock::now_ms())?;
            let (lo, hi) = schema::range(num);
            tx.execute("DELETE FROM records WHERE id BETWEEN ?1 AND ?2", [lo, hi])?;
            tx.execute(
                "DELETE FROM blob_refs WHERE record BETWEEN ?1 AND ?2",
                [lo, hi],
            )?;
            tx.execute("DELETE FROM sessions WHERE num = ?1", [num])?;
            crate::journal::delete_session(&tx, num)?;
            crate::recall::index::delete_session(&tx, num)?;
            crate::blob::collect_garbage(&tx)?;
            tx.commit()?;
            // The deleted rows are zeroed in the database pages, but older copies of those pages
            // remain in the WAL until it is checkpointed and reset: do that now, best effort (a
            // reader still using the log keeps it; the next checkpoint resets it).
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
            Ok(())
        };
        run().map_err(|e| e.during("deleteSession"))
    }

    /// Closes the store; later use of it or its sessions fails with CLOSED.
    pub fn close(&self) -> Result<()> {
        let file = &self.shared.file;
        let mut guard = file.conn.lock().unwrap_or_else(|e| e.into_inner());
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        for num in std::mem::take(&mut *self.shared.owned()).into_keys() {
            let _ = owner::release(&guard, num);
        }
        // The file closes with the last store of this process open on it.
        open_file::release(file, &mut guard).map_err(|e| e.during("close"))
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }
}

fn bound(s: &Option<String>, name: &str) -> Result<Option<i64>> {
    match s {
        None => Ok(None),
        Some(s) => clock::parse_ms(s).map(Some).ok_or_else(|| {
            Error::InvalidInput(format!(
                "filter.{name}: expected an ISO 8601 date-time, got '{s}'"
            ))
        }),
    }
}

/// The name to hand SQLite for a path. SQLite reads a name that starts with `file:` as a URI
/// (`?mode=memory`, `nolock=1`, `immutable=1`: acknowledged writes that reach no disk, or no
/// locking); a path is a path, so such a name is made explicitly relative.
fn sqlite_filename(path: &str) -> String {
    if path.starts_with("file:") {
        format!("./{path}")
    } else {
        path.to_string()
    }
}

fn open_connection(path: &str, options: &StoreOptions, make_dirs: bool) -> Result<Connection> {
    let memory = path == ":memory:";
    if !memory && !options.readonly {
        create_private(FsPath::new(path), make_dirs)?;
    }
    let flags = if options.readonly {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)?;
    checkpoint::set_busy_timeout(&conn, options.busy_timeout_ms)?;
    let conn = match schema::prepare(&conn, options.readonly) {
        Ok(()) => conn,
        Err(Error::StoreIo(_)) if options.readonly && !memory && read_only_media(path) => {
            open_immutable(path, options)?
        }
        Err(e) => return Err(e),
    };
    let sync = match options.durability {
        Durability::Process => "NORMAL",
        Durability::Power => "FULL",
    };
    if !options.readonly {
        use_wal(&conn, options.busy_timeout_ms)?;
        // Checkpoints run on a background connection (see checkpoint.rs), not inside appends;
        // after the log starts over, its file is cut back to the limit.
        if path != ":memory:" {
            conn.execute_batch(&format!(
                "PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = {};",
                checkpoint::LOG_LIMIT_BYTES
            ))?;
        }
    }
    // secure_delete: what deleteSession removes is overwritten with zeros in the file, not left
    // readable in free pages.
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync}; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -32768; PRAGMA secure_delete = ON;"
    ))?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// Puts the store in WAL mode (a no-op once it is). The switch needs the file to itself, and
/// SQLite refuses it at once, without waiting, while other connections are switching too (the
/// processes that create one new store at the same moment): it is tried again until the busy
/// timeout.
fn use_wal(conn: &Connection, timeout_ms: u32) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && start.elapsed().as_millis() < u128::from(timeout_ms) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            r => return Ok(r?),
        }
    }
}

/// A readonly store whose directory cannot be written (read-only media, a read-only directory)
/// and that has no log: SQLite cannot make the shared-memory file WAL mode reads need there.
fn read_only_media(path: &str) -> bool {
    let wal = FsPath::new(&format!("{path}-wal")).exists();
    let dir = FsPath::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(FsPath::new("."));
    !wal && dir_is_read_only(dir)
}

fn dir_is_read_only(dir: &FsPath) -> bool {
    let probe = dir.join(format!(".threadline-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            false
        }
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
        ),
    }
}

/// Opens the file as immutable: with no log and no writer able to make one, the file is all
/// there is, and SQLite reads it without the shared-memory file.
fn open_immutable(path: &str, options: &StoreOptions) -> Result<Connection> {
    let mut uri = String::from("file:");
    for c in path.chars() {
        match c {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    checkpoint::set_busy_timeout(&conn, options.busy_timeout_ms)?;
    schema::prepare(&conn, true)?;
    Ok(conn)
}

/// Creates the database file readable and writable by its owner only (SQLite gives its -wal and
/// -shm files the same permissions). Its directory must exist, unless `make_dirs` (the default
/// location), when missing directories are made readable by their owner only.
fn create_private(path: &FsPath, make_dirs: bool) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if make_dirs {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                builder.mode(0o700);
            }
            builder.create(dir)?;
        } else if !dir.is_dir() {
            return Err(Error::StoreIo(format!(
                "the directory '{}' does not exist",
                dir.display()
            )));
        }
    }
    // create, not create_new: a dangling symlink at the path gets its target made, 0600 too
    // (O_EXCL would refuse it, and SQLite would then create the target with its own 0644).
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.mode(0o600);
    }
    match open.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e.into()),
    }
}
