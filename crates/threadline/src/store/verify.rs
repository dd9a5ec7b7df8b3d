//! `verify`: a whole session, or the whole store, checked record by record. Reads stop at the
//! first damaged record with STORE_CORRUPT; verify goes on past it and reports every one.

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::session::Session;
use crate::storage::integrity::Checker;
use crate::storage::txn::Txn;
use crate::store::Store;

pub use crate::storage::integrity::{Damage, VerifyReport, MAX_DAMAGED};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifyOptions {
    /// `PRAGMA quick_check` instead of `integrity_check`: skips the check that every index
    /// matches its table (O(N) instead of O(N log N))
    #[serde(default)]
    pub quick: bool,
}

impl Session {
    /// Checks every record of this session (its checksum, that none is missing, that its text is
    /// JSON, the blobs it uses) and the session's row.
    pub fn verify(&self) -> Result<VerifyReport> {
        let run = || {
            let conn = self.conn()?;
            let tx = Txn::deferred(&conn)?;
            let mut c = Checker::new(&tx);
            c.session(self.num, self.id());
            Ok(c.finish())
        };
        run().map_err(|e: Error| e.during("verify"))
    }
}

impl Store {
    /// Checks the whole store: SQLite's own check of the file, then every session as
    /// `Session::verify` does, then the blobs no record uses.
    pub fn verify(&self, options: &VerifyOptions) -> Result<VerifyReport> {
        let run = || {
            let conn = self.reader()?;
            let tx = Txn::deferred(&conn)?;
            let mut c = Checker::new(&tx);
            c.file(options.quick);
            // Damage to an append log was found and kept aside when it was replayed: it stays a
            // problem until someone looks at it and removes the file.
            if let Some(store) = self.shared().real_path() {
                for log in crate::storage::append_log::damaged_logs(&store) {
                    c.push(
                        None,
                        None,
                        format!(
                            "the append log {} was damaged: records acknowledged after the \
                             damage may be missing; it is kept for inspection (remove it once \
                             checked)",
                            log.display()
                        ),
                    );
                }
            }
            match crate::storage::sessions::all(&tx) {
                Ok(list) => {
                    for (num, id) in list {
                        c.session(num, &id);
                    }
                }
                Err(e) => c.push(
                    None,
                    None,
                    format!("the sessions table cannot be read: {e}"),
                ),
            }
            c.orphans();
            c.unused_blobs();
            Ok(c.finish())
        };
        run().map_err(|e: Error| e.during("verify"))
    }
}
