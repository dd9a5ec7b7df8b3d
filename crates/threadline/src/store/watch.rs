//! What a live watch of the whole store (`store.watch` in the Node binding) reads when it is
//! woken: which sessions of its scope were written since it last looked, each with its status
//! and record count, so the watch can tell a new session, new records, a status change and a
//! deletion apart, and read only the records it has not yet given.

use crate::error::{Error, Result};
use crate::model::options::{SessionInfo, Status};
use crate::storage::sessions;
use crate::storage::txn::Txn;

use super::Store;

/// Which sessions a watch follows: those of a project, one session, or all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchScope {
    pub project: Option<String>,
    pub session_id: Option<String>,
}

/// A session as a watch sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMark {
    pub num: i64,
    pub id: String,
    pub status: Status,
    /// records 0..records are committed
    pub records: u64,
    /// when it was last written, store-wide (`write_order`)
    pub write_seq: i64,
}

/// What one look found, read in one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchScan {
    pub marks: Vec<SessionMark>,
    /// the store's latest write: on SQLite, writes are numbered in commit order, so the next
    /// look from here (`after`) finds every session written since
    pub last_write: i64,
    /// how many sessions were ever deleted: when it grows, a watch looks at its whole scope
    pub deletions: i64,
}

impl Store {
    /// The sessions of `scope` written after `after` (every one when None), among `nums` when
    /// given (the sessions a PostgreSQL notification named), oldest write first.
    pub fn watch_scan(
        &self,
        scope: &WatchScope,
        after: Option<i64>,
        nums: Option<&[i64]>,
    ) -> Result<WatchScan> {
        let run = || -> Result<WatchScan> {
            let conn = self.reader()?;
            let conn = Txn::deferred(&conn)?;
            let nums = nums.map(|n| serde_json::Value::from(n.to_vec()).to_string());
            let rows = sessions::marks(
                &conn,
                scope.project.as_deref(),
                scope.session_id.as_deref(),
                after.unwrap_or(-1),
                nums.as_deref(),
            )?;
            let (last_write, deletions) = sessions::watermarks(&conn)?;
            let marks = rows
                .into_iter()
                .map(|r| {
                    let status = Status::parse(&r.status).ok_or_else(|| {
                        Error::StoreCorrupt(format!(
                            "the row of session '{}' is damaged: its status does not parse",
                            r.id
                        ))
                    })?;
                    Ok(SessionMark {
                        num: r.num,
                        id: r.id,
                        status,
                        records: r.records.max(0) as u64,
                        write_seq: r.write_seq,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(WatchScan {
                marks,
                last_write,
                deletions,
            })
        };
        run().map_err(|e| e.during("watch"))
    }

    /// The metadata of sessions `nums`, read in one snapshot; a session deleted meanwhile is
    /// left out.
    pub fn session_infos(&self, nums: &[i64]) -> Result<Vec<(i64, SessionInfo)>> {
        let run = || -> Result<Vec<(i64, SessionInfo)>> {
            let conn = self.reader()?;
            let conn = Txn::deferred(&conn)?;
            let mut out = Vec::with_capacity(nums.len());
            for &num in nums {
                match crate::storage::records::read_info(&conn, num) {
                    Ok((info, _)) => out.push((num, info)),
                    Err(Error::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(out)
        };
        run().map_err(|e| e.during("watch"))
    }
}
