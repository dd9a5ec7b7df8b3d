//! `stats()`, `vacuum()` and `backup()`: the store's size, giving back free space, and a
//! consistent copy of every session in a new SQLite file.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::clock;
use crate::storage::db::Db;
use crate::storage::maintenance;
use crate::storage::sessions;
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStats {
    /// "sqlite" or "postgres"
    pub engine: &'static str,
    /// the store's size: the SQLite file's pages, or PostgreSQL's tables with their indexes
    pub bytes: u64,
    /// what `vacuum()` could give back (SQLite's free pages; 0 on PostgreSQL)
    pub free_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_pages: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VacuumReport {
    pub bytes_before: u64,
    pub bytes_after: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupReport {
    pub path: String,
    pub sessions: u64,
    pub records: u64,
    pub bytes: u64,
}

impl Store {
    pub fn stats(&self) -> Result<StoreStats> {
        let run = || -> Result<StoreStats> {
            let conn = self.reader()?;
            stats_of(&conn)
        };
        run().map_err(|e| e.during("stats"))
    }

    /// Gives the free space back (SQLite: rewrites the file; PostgreSQL: VACUUM of its tables).
    pub fn vacuum(&self) -> Result<VacuumReport> {
        let run = || -> Result<VacuumReport> {
            self.shared().writable()?;
            let conn = self.reader()?;
            let before = stats_of(&conn)?.bytes;
            maintenance::vacuum(&conn)?;
            let after = stats_of(&conn)?.bytes;
            Ok(VacuumReport {
                bytes_before: before,
                bytes_after: after,
            })
        };
        run().map_err(|e| e.during("vacuum"))
    }

    /// Copies every session into a new SQLite file at `dest`, which must not exist. Every append
    /// acknowledged before the call is in the copy (it reads as any reader does, after the
    /// append logs). Written under a temporary name and linked into place: a crash leaves no
    /// half file at `dest`.
    pub fn backup(&self, dest: &str) -> Result<BackupReport> {
        let run = || -> Result<BackupReport> {
            let dest_path = Path::new(dest);
            if dest.is_empty() {
                return Err(Error::InvalidInput("path: must not be empty".into()));
            }
            refuse_existing(dest_path)?;
            let tmp = temp_name(dest_path)?;
            let made = self.copy_to(&tmp).and_then(|()| {
                maintenance::disown_all(&tmp)?;
                let (sessions, records) = maintenance::counts(&tmp)?;
                std::fs::File::open(&tmp)?.sync_all()?;
                let bytes = std::fs::metadata(&tmp)?.len();
                publish(&tmp, dest_path)?;
                Ok(BackupReport {
                    path: dest.to_string(),
                    sessions,
                    records,
                    bytes,
                })
            });
            let _ = std::fs::remove_file(&tmp);
            made
        };
        run().map_err(|e| e.during("backup"))
    }

    /// SQLite: the file's content in one read snapshot. PostgreSQL: each session through its
    /// snapshot into a store in memory, then that store's content.
    fn copy_to(&self, tmp: &Path) -> Result<()> {
        let conn = self.reader()?;
        if conn.is_sqlite() {
            return maintenance::copy_into(&conn, tmp);
        }
        let ids: Vec<String> = sessions::all(&conn)?
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        drop(conn);
        let copy = Store::memory()?;
        for id in ids {
            let session = match self.open_session(&id, None) {
                Ok(s) => s,
                // Deleted since it was listed: not in the copy, as if deleted before.
                Err(Error::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            let snapshot = session.snapshot()?;
            // A snapshot keeps the row's time, not when its last record was written (a fork's
            // records come after its row): the copy is listed as the session is.
            let updated = clock::parse_ms(&session.info()?.updated_at);
            session.close();
            let imported = copy.import_snapshot(&snapshot)?;
            if let Some(ms) = updated {
                let conn = copy.shared().lock()?;
                sessions::backdate(&conn, imported.num, ms)?;
            }
            imported.close();
        }
        let conn = copy.reader()?;
        let done = maintenance::copy_into(&conn, tmp);
        drop(conn);
        copy.close()?;
        done
    }
}

fn stats_of(conn: &Db) -> Result<StoreStats> {
    let size = maintenance::size(conn)?;
    Ok(StoreStats {
        engine: if conn.is_sqlite() {
            "sqlite"
        } else {
            "postgres"
        },
        bytes: size.bytes,
        free_bytes: size.free_bytes,
        page_size: size.pages.map(|p| p.0),
        free_pages: size.pages.map(|p| p.1),
    })
}

fn refuse_existing(dest: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dest).is_ok() {
        return Err(Error::InvalidInput(format!(
            "path: '{}' already exists (a backup never replaces a file)",
            dest.display()
        )));
    }
    Ok(())
}

/// A name next to `dest` (same directory, so it can be linked into place) no one else uses.
fn temp_name(dest: &Path) -> Result<PathBuf> {
    let name = dest
        .file_name()
        .ok_or_else(|| Error::InvalidInput(format!("path: '{}' names no file", dest.display())))?;
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(Error::StoreIo(format!(
            "path: the directory '{}' does not exist",
            dir.display()
        )));
    }
    let unique = uuid::Uuid::now_v7().simple().to_string();
    Ok(dir.join(format!(
        ".{}.{}-{unique}.tmp",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Puts the finished copy at `dest`, never over a file that appeared meanwhile: a hard link
/// fails if `dest` exists (where the file system has none, a rename after one more look).
fn publish(tmp: &Path, dest: &Path) -> Result<()> {
    match std::fs::hard_link(tmp, dest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            refuse_existing(dest)?;
            return Err(e.into());
        }
        Err(_) => {
            refuse_existing(dest)?;
            std::fs::rename(tmp, dest)?;
        }
    }
    // The new name is durable once its directory is (best effort: not every system can).
    if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}
