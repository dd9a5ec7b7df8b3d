//! Forks: a new session that starts as the branch of another session up to one of its records.
//! The records are written again under the new session (same uuids and content; blobs are
//! stored by hash, so long content is shared, not copied), and its state, token counts included,
//! is derived from them: the fork starts from the parent's state at that record, counted once.

use serde_json::{json, Value};

use crate::branch::{state_at, REWIND};
use crate::envelope::Draft;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::store::Store;
use crate::txn::Txn;

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
            Some(u) => Session::seq_of(&tx, source.num, u)?
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
        tx.execute(
            "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from)
             SELECT ?1, project, coalesce(?2, title), provider, model, 'active', ?3, ?3, context_window, prompt_key, metadata, ?4
             FROM sessions WHERE num = ?5",
            rusqlite::params![new_id, title, crate::clock::now_ms(), forked, source.num],
        )?;
        let num = tx.last_insert_rowid();
        let session = Session::fresh(shared.clone(), num, new_id.clone());
        let (_, next, heartbeat) = session.stage(&tx, |w| {
            for (from, to) in path {
                for record in Session::records_between(w.conn, source.num, from, to)? {
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
