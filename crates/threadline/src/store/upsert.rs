//! A write that makes its session when the store lacks it, in the same transaction: a mirror of
//! another program's log (the Claude Agent SDK's) has its session and first records stored
//! together or not at all.

use crate::error::{Error, Result};
use crate::model::clock;
use crate::model::options::SessionOptions;
use crate::session::{Session, Writer};
use crate::storage::sessions;
use crate::storage::txn::Txn;
use crate::store::Store;

impl Store {
    /// Runs `f`, a write of session `id`, in one transaction; the session is made first (with
    /// `options`) when it does not exist, and `f` is told whether it was. The session is claimed
    /// as an append claims it (SESSION_LOCKED while another live process holds it) and released
    /// after, as an import does.
    pub(crate) fn write_upserting<T>(
        &self,
        id: &str,
        options: SessionOptions,
        f: impl FnOnce(&mut Writer, bool) -> Result<T>,
    ) -> Result<T> {
        let shared = self.shared();
        shared.writable()?;
        if id.is_empty() {
            return Err(Error::InvalidInput("id: must not be empty".into()));
        }
        let conn = self.reader()?;
        let known = sessions::num_of(&conn, id)?;
        let run = || -> Result<(T, Session)> {
            let tx = Txn::immediate(&conn)?;
            let (num, created) = match sessions::num_of(&tx, id)? {
                Some(num) => (num, false),
                None => {
                    let mut o = options;
                    o.id = Some(id.to_string());
                    let num = sessions::insert(&tx, id, &o, clock::now_ms())?;
                    tx.note_created(num);
                    (num, true)
                }
            };
            let session = Session::fresh(shared.clone(), num, id.to_string());
            if !created {
                session.read_tail(&tx)?;
            }
            let (out, next, heartbeat) = session.stage(&tx, |w| f(w, created))?;
            tx.commit()?;
            session.committed(next, heartbeat);
            Ok((out, session))
        };
        let (out, session) = match known {
            Some(num) => conn.writing(num, run),
            None => run(),
        }?;
        // released with the connection free: the release writes
        drop(conn);
        session.close();
        Ok(out)
    }
}
