//! Opening a store's file: the SQLite connection with its settings (WAL, synchronous, busy
//! timeout, secure delete), the schema brought up to date, the background checkpointer, and the
//! fallbacks for read-only media. Stores of one process on one file share what this opens
//! (`open_file`).

use std::path::Path as FsPath;
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};
use crate::model::options::{Durability, StoreOptions};
use crate::storage::checkpoint::{self, Checkpointer};
use crate::storage::db::Db;
use crate::storage::open_file::{self, OpenFile};
use crate::storage::schema;

/// Opens the store file at `path` (or joins this process's open connection to it).
pub(crate) fn open(path: &str, options: &StoreOptions, make_dirs: bool) -> Result<Arc<OpenFile>> {
    let file = sqlite_filename(path);
    open_file::open(&file, options, || {
        let conn = open_connection(&file, options, make_dirs)?;
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
}

/// A writable connection of its own to the store file at `path`, for a readonly store that must
/// replay what another process acknowledged (`session/replay.rs`): nothing else writes through
/// it. STORE_IO if this process cannot write the file.
pub(crate) fn open_for_replay(path: &str, options: &StoreOptions) -> Result<Db> {
    let file = sqlite_filename(path);
    let conn = Connection::open_with_flags(
        &file,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // SQLite opens a file it may not write read-only, without a word.
    if conn.is_readonly("main")? {
        return Err(Error::StoreIo(format!(
            "this process cannot write '{path}'"
        )));
    }
    checkpoint::set_busy_timeout(&conn, options.busy_timeout_ms)?;
    schema::prepare(&conn, true)?;
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA secure_delete = ON;")?;
    Ok(Db::Sqlite(conn, Box::default()))
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
