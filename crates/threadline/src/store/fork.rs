//! Forks: a new session that starts as the branch of another session up to one of its records.
//! The records are written again under the new session (same uuids and content; blobs are
//! stored by hash, so long content is shared, not copied), and its state, token counts included,
//! is derived from them: the fork starts from the parent's state at that record, counted once.

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::model::envelope::Draft;
use crate::session::branch::{state_at, REWIND};
use crate::session::Session;
use crate::storage::txn::Txn;
use crate::store::Store;

impl Store {
    /// A new session from session `id`, up to record `at_uuid` (default: its latest), with
    /// `forkedFrom` set.
    pub fn fork_session(
        &self,
        id: &str,
        at_uuid: Option<&str>,
        title: Option<String>,
    ) -> Result<Session> {
        self.fork(id, at_uuid, title)
            .map_err(|e| e.during("forkSession"))
    }

    fn fork(&self, id: &str, at_uuid: Option<&str>, title: Option<String>) -> Result<Session> {
        let source = self.open_session(id, None)?;
        let shared = self.shared();
        shared.writable()?;
        let conn = shared.lock()?;
        let tx = Txn::immediate(&conn)?;
        let tail = source.read_tail(&tx)?;
        let last = tail
            .next_seq
            .checked_sub(1)
            .ok_or_else(|| Error::InvalidInput(format!("session '{id}' has no records to fork")))?;
        let at_seq = match at_uuid {
            Some(u) => crate::storage::records::seq_of(&tx, source.num, u)?
                .ok_or_else(|| Error::NotFound(format!("no record '{u}' in session '{id}'")))?,
            None => last,
        };
        let at = at_uuid.map_or_else(
            || tail.last_uuid.clone().unwrap_or_default(),
            str::to_string,
        );
        let path = if at_seq == last {
            tail.state.path(last)
        } else {
            state_at(&tx, source.num, at_seq)?.path(at_seq)
        };
        let new_id = uuid::Uuid::now_v7().to_string();
        let forked = json!({"sessionId": id, "uuid": at}).to_string();
        let num = crate::storage::sessions::insert_fork(
            &tx,
            source.num,
            &new_id,
            title.as_deref(),
            &forked,
            crate::model::clock::now_ms(),
        )?;
        let session = Session::fresh(shared.clone(), num, new_id.clone());
        let (_, next, heartbeat) = session.stage(&tx, |w| {
            for (from, to) in path {
                for record in
                    crate::storage::records::records_between(w.conn, source.num, from, to)?
                {
                    let Value::Object(mut env) = record else {
                        continue;
                    };
                    if env.get("type").and_then(Value::as_str) == Some(REWIND) {
                        continue;
                    }
                    env.insert("sessionId".into(), Value::String(new_id.clone()));
                    env.shift_remove("seq");
                    w.insert(Draft::from_envelope(env)?)?;
                }
            }
            Ok(())
        })?;
        tx.commit()?;
        session.committed(next, heartbeat);
        Ok(session)
    }
}
