//! A store: one SQLite file (WAL) holding any number of sessions.

pub(crate) mod fork;
pub(crate) mod maintenance;
pub(crate) mod snapshot;
pub(crate) mod upsert;
pub(crate) mod verify;
pub(crate) mod watch;

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::clock;
use crate::model::options::{SessionFilter, SessionInfo, SessionOptions, StoreOptions};
use crate::session::replay;
use crate::session::Session;
use crate::storage::checkpoint;
use crate::storage::connection;
use crate::storage::db::Db;
use crate::storage::open_file::OpenFile;
use crate::storage::ownership;
use crate::storage::postgres;
use crate::storage::sessions;
pub(crate) use crate::storage::shared::Shared;

pub struct Store {
    shared: Arc<Shared>,
    /// sessions a mirror keeps claimed between its writes (upsert.rs)
    held: upsert::Held,
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
        let is_server = postgres::is_url(&path);
        let (open, path) = if is_server {
            let shown = postgres::PgUrl::redacted(&path);
            let db =
                postgres::open(&path, &options).map_err(|e| e.during(&format!("open {shown}")))?;
            (OpenFile::postgres(db), shown)
        } else {
            let open = connection::open(&path, &options, make_dirs)
                .map_err(|e| e.during(&format!("open {path}")))?;
            (open, path)
        };
        let shared = Arc::new(Shared::new(open, path, options));
        if is_server {
            crate::storage::shared::start_heartbeat(&shared);
        } else {
            // Appends a process that is gone acknowledged before they reached SQLite. Best effort:
            // another process may hold the write lock now; they are replayed before any read or
            // any take-over of one of that process's sessions anyway.
            let conn = shared.lock()?;
            let _ = replay::orphans(&shared, &conn);
        }
        Ok(Store {
            shared,
            held: upsert::Held::default(),
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
        let id = match o.id.clone() {
            Some(id) if id.is_empty() => {
                return Err(Error::InvalidInput("id: must not be empty".into()))
            }
            Some(id) => id,
            None => uuid::Uuid::now_v7().to_string(),
        };
        let now = clock::now_ms();
        let guard = self.shared.lock()?;
        let conn = crate::storage::txn::Txn::immediate(&guard)?;
        if sessions::num_of(&conn, &id)?.is_some() {
            return Err(Error::InvalidInput(format!(
                "id: a session '{id}' already exists"
            )));
        }
        let num = sessions::insert(&conn, &id, &o, now)?;
        conn.note_created(num);
        conn.commit()?;
        drop(guard);
        Session::attach(self.shared.clone(), num, id)
    }

    /// Opens a stored session. NOT_FOUND if absent; PROMPT_MISMATCH if `prompt_key` is given and
    /// the session was made with another.
    pub fn open_session(&self, id: &str, prompt_key: Option<&str>) -> Result<Session> {
        let found: Option<(i64, Option<String>)> = {
            let conn = self.reader().map_err(|e| e.during("openSession"))?;
            sessions::num_and_prompt_key(&conn, id).map_err(|e| e.during("openSession"))?
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

    /// On PostgreSQL, a listener that wakes at each commit to any session of the store; None on
    /// SQLite (see `Session::listener`).
    pub fn listener(&self) -> Result<Option<crate::Listener>> {
        let conn = self.shared.lock().map_err(|e| e.during("watch"))?;
        conn.listener(None).map_err(|e| e.during("watch"))
    }

    /// Sessions, most recently updated first.
    pub fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionInfo>> {
        let run = || -> Result<Vec<SessionInfo>> {
            let conn = self.reader()?;
            // One snapshot: a session deleted meanwhile is listed whole or not at all.
            let conn = crate::storage::txn::Txn::deferred(&conn)?;
            let nums = sessions::nums(&conn, filter.project.as_deref(), filter.status)?;
            let since = bound(&filter.since, "since")?;
            let until = bound(&filter.until, "until")?;
            let mut out = Vec::with_capacity(nums.len());
            for num in nums {
                let (info, recency) = crate::storage::records::read_info(&conn, num)?;
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
            let conn = self.reader()?;
            let mut out = Vec::new();
            for num in ownership::interrupted(&conn, clock::now_ms())? {
                out.push(crate::storage::records::read_info(&conn, num)?);
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
            replay::pay_owed(&self.shared, &conn)?;
            let Some(num) = sessions::num_of(&conn, id)? else {
                return Err(Error::NotFound(format!("no session '{id}'")));
            };
            conn.writing(num, || self.delete_in(&conn, id, num))?;
            if let Db::Sqlite(c, ..) = &*conn {
                checkpoint::truncate_now(c);
            }
            Ok(())
        };
        run().map_err(|e| e.during("deleteSession"))
    }

    fn delete_in(&self, conn: &Db, id: &str, num: i64) -> Result<()> {
        let tx = crate::storage::txn::Txn::immediate(conn)?;
        // Deleted since it was looked up (another thread or process).
        if sessions::num_of(&tx, id)? != Some(num) {
            return Err(Error::NotFound(format!("no session '{id}'")));
        }
        ownership::check_free(&tx, num, id, clock::now_ms())?;
        // What a dead owner acknowledged goes in first, and out with the rest: its log is
        // replayed and removed in this transaction.
        replay::orphans_in(&self.shared, &tx)?;
        sessions::delete(&tx, num)?;
        tx.commit()?;
        self.shared.note_deleted(num);
        Ok(())
    }

    /// When session `id` was deleted (ms), if it was and no session of that id lives now.
    pub(crate) fn deleted_at(&self, id: &str) -> Result<Option<i64>> {
        let conn = self.reader()?;
        if sessions::num_of(&conn, id)?.is_some() {
            return Ok(None);
        }
        sessions::deleted_ms(&conn, id)
    }

    /// The connection, for a read that is to see every append any process acknowledged before
    /// it (`replay::see_writers`).
    pub(crate) fn reader(&self) -> Result<std::sync::MutexGuard<'_, Db>> {
        let conn = self.shared.lock()?;
        replay::pay_owed(&self.shared, &conn)?;
        replay::see_writers(&self.shared, &conn)?;
        Ok(conn)
    }

    /// What the store found and handled on its own since it was last asked (a damaged or
    /// deleted append log, records it could not replay): for telemetry.
    pub fn take_notices(&self) -> Vec<crate::storage::notice::Notice> {
        replay::notices(&self.shared.notice_key())
    }

    /// Closes the store; later use of it or its sessions fails with CLOSED.
    pub fn close(&self) -> Result<()> {
        self.held.forget();
        self.shared.close().map_err(|e| e.during("close"))
    }

    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
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

impl Session {
    /// A session in memory only, with no store behind it.
    pub fn in_memory(options: SessionOptions) -> Result<Session> {
        Store::memory()?.create_session(options)
    }
}
