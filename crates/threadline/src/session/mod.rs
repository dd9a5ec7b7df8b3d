//! A session: a handle on one conversation's log in a store. Opening one reads only its last
//! record; appends fold each record into the running state stored with it; reads stream the
//! stored JSON without building values.

pub(crate) mod branch;
pub(crate) mod compaction_point;
pub(crate) mod readahead;
pub(crate) mod replay;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::storage::db::Db;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::clock;
use crate::model::context_windows::known_context_window;
use crate::model::envelope::{Defaults, Draft};
use crate::model::json;
use crate::model::message::Role;
use crate::model::options::{SessionInfo, SessionUpdate, Status};
use crate::model::state::{State, Step, TokenPatch, TokenTracker, Turn};
use crate::storage::batch::Probe;
use crate::storage::checksum;
use crate::storage::encode::encode_envelope;
use crate::storage::journal;
use crate::storage::records::{self, NewRecord};
use crate::storage::records::{load_tail, parse_page, prior_usage, read_info, read_page, Part};
pub use crate::storage::records::{Page, PAGE_BYTES};
pub(crate) use crate::storage::records::{Tail, ViewRecord};
use crate::storage::schema::{self, SEQ_BITS};
use crate::storage::sessions;
use crate::storage::shared::Shared;
use crate::storage::txn::Txn;

/// Which messages `messages` gives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MessageView {
    /// from the latest compaction: its summary, then the records it kept and what came after
    #[default]
    Context,
    /// every message from the start, across compactions
    Full,
}

pub struct Session {
    pub(crate) shared: Arc<Shared>,
    pub(crate) num: i64,
    id: String,
    tail: Mutex<Tail>,
    closed: AtomicBool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    pub index: usize,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreReport {
    pub message_count: u64,
    pub turn_count: u64,
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextFill {
    pub used_tokens: u64,
    pub context_window: Option<u64>,
    pub fraction: Option<f64>,
}

impl Session {
    pub(crate) fn attach(shared: Arc<Shared>, num: i64, id: String) -> Result<Session> {
        let tail = {
            let conn = shared.lock()?;
            load_tail(&conn, num)?
        };
        Ok(Session {
            shared,
            num,
            id,
            tail: Mutex::new(tail),
            closed: AtomicBool::new(false),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The store's connection. A session this process does not hold may have been written by
    /// another: what any process acknowledged is made visible first (`replay::see_writers`).
    pub(crate) fn conn(&self) -> Result<std::sync::MutexGuard<'_, Db>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("the session is closed".into()));
        }
        if self.shared.was_deleted(self.num) {
            return Err(crate::storage::ownership::gone(&self.id));
        }
        let conn = self.shared.lock()?;
        // Appends this process acknowledged and could not flush are replayed before anything
        // reads or writes past them.
        replay::pay_owed(&self.shared, &conn)?;
        if !self.shared.holds(self.num) {
            replay::see_writers(&self.shared, &conn)?;
        }
        Ok(conn)
    }

    fn tail(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.tail.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends one record (a message, an envelope, or a string prompt) and returns its envelope
    /// after it is committed.
    pub fn append(
        &self,
        input: Value,
        envelope: Option<Map<String, Value>>,
    ) -> Result<Map<String, Value>> {
        let run = || {
            let draft = Draft::from_input(input, envelope)?;
            let mut out = self.append_records(vec![draft])?;
            Ok(out.pop().unwrap_or_default())
        };
        run().map_err(|e: Error| e.during("append"))
    }

    /// Appends several records in one transaction: all or nothing.
    pub fn append_many(&self, inputs: Vec<Value>) -> Result<Vec<Map<String, Value>>> {
        let run = || {
            let drafts = inputs
                .into_iter()
                .enumerate()
                .map(|(i, v)| Draft::from_input(v, None).map_err(|e| prefix_index(e, i)))
                .collect::<Result<Vec<_>>>()?;
            self.append_records(drafts)
        };
        run().map_err(|e| e.during("appendMany"))
    }

    /// Appends an app event (`type: 'event'`), never sent to a model.
    pub fn append_event(
        &self,
        name: &str,
        data: Option<Value>,
        envelope: Option<Map<String, Value>>,
    ) -> Result<Map<String, Value>> {
        let run = || {
            let mut env = envelope.unwrap_or_default();
            if env.contains_key("message") {
                return Err(Error::InvalidInput(
                    "envelope.message: an event has no message".into(),
                ));
            }
            env.entry("type")
                .or_insert_with(|| Value::String("event".into()));
            env.insert("name".into(), Value::String(name.into()));
            if let Some(d) = data {
                env.insert("data".into(), d);
            }
            let mut out = self.append_records(vec![Draft::from_envelope(env)?])?;
            Ok(out.pop().unwrap_or_default())
        };
        run().map_err(|e| e.during("appendEvent"))
    }

    /// Loads a history from elsewhere: envelopes, bare messages, legacy `{role, content}` records,
    /// or JSON text of any of them. What cannot be read is skipped and reported; the rest is
    /// written in one transaction. Only while the session has no messages.
    pub fn restore_messages(&self, items: Vec<Value>) -> Result<RestoreReport> {
        let run = || {
            let mut skipped = Vec::new();
            let mut drafts = Vec::with_capacity(items.len());
            for (index, item) in items.into_iter().enumerate() {
                match restore_draft(item) {
                    Ok(d) => drafts.push((index, d)),
                    Err(e) => skipped.push(Skipped {
                        index,
                        reason: e.message().to_string(),
                    }),
                }
            }
            let state = self.write_restore(drafts, &mut skipped)?;
            skipped.sort_by_key(|s| s.index);
            Ok(RestoreReport {
                message_count: state.messages,
                turn_count: state.turns,
                skipped,
            })
        };
        run().map_err(|e: Error| e.during("restoreMessages"))
    }

    /// Sets the token tracker from outside (e.g. counts kept by an earlier frontend). Stored as a
    /// `token_state` record, so it survives reopening.
    pub fn restore_token_state(&self, patch: TokenPatch) -> Result<()> {
        let run = || {
            let mut env = Map::new();
            env.insert("type".into(), Value::String("token_state".into()));
            env.insert(
                "data".into(),
                serde_json::to_value(&patch).unwrap_or(Value::Null),
            );
            let mut draft = Draft::from_envelope(env)?;
            draft.tokens = Some(patch.clone());
            self.write(vec![draft]).map(|_| ())
        };
        run().map_err(|e| e.during("restoreTokenState"))
    }

    pub(crate) fn write(&self, drafts: Vec<Draft>) -> Result<Vec<Map<String, Value>>> {
        self.transact(|w| w.insert_all(drafts))
    }

    /// Appends: on SQLite staged in the batch and acknowledged by the append log
    /// (storage/batch.rs), else each in a transaction of its own.
    fn append_records(&self, drafts: Vec<Draft>) -> Result<Vec<Map<String, Value>>> {
        self.shared.writable()?;
        let conn = self.conn()?;
        replay::before_write(&self.shared, &conn)?;
        // A write that claims the session commits on its own: the claim is in SQLite, not only
        // in this process's log, so if this process dies the session shows as interrupted.
        if self.shared.claim_due(self.num) || !conn.join_batch(self.shared.options.durability)? {
            drop(conn);
            return self.write(drafts);
        }
        self.append_staged(&conn, drafts)
    }

    /// An append in the batch: its writes staged, its frame logged (the acknowledgement), then
    /// the batch flushed if it is due.
    fn append_staged(&self, conn: &Db, drafts: Vec<Draft>) -> Result<Vec<Map<String, Value>>> {
        if let Some(b) = conn.batch() {
            b.begin_append(self.num);
        }
        let staged = self
            .stage(conn, |w| {
                w.frame = Some(replay::Frame::new(self.num, &self.id));
                let out = w.insert_all(drafts)?;
                Ok((out, w.frame.take()))
            })
            .and_then(|((out, frame), next, hb)| {
                let frame = frame.map(replay::Frame::finish).unwrap_or_default();
                conn.log_append(&frame)?;
                crate::storage::scratch::give(frame);
                Ok((out, next, hb))
            });
        let ended = conn.end_append(staged.is_ok());
        let (out, next, heartbeat) = staged?;
        // Acknowledged now: if the commit of a transaction the append had to run in failed, what
        // the batch held is owed to SQLite by the log, and replayed at once (else before the next
        // write).
        self.committed(next, heartbeat);
        if ended.and_then(|()| conn.commit_batch_if_due()).is_err() {
            self.shared.forget_claims();
            let _ = replay::pay_owed(&self.shared, conn);
        }
        Ok(out)
    }

    /// Runs `f` in one write transaction on the session's synced tail; the tail moves only if it
    /// commits.
    pub(crate) fn transact<T>(&self, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        self.shared.writable()?;
        let conn = self.conn()?;
        replay::before_write(&self.shared, &conn)?;
        conn.writing(self.num, || {
            let tx = Txn::immediate(&conn)?;
            let (out, next, heartbeat) = self.stage(&tx, f)?;
            tx.commit()?;
            self.committed(next, heartbeat);
            Ok(out)
        })
    }

    /// The part of a write transaction before its commit: `conn` is in a transaction.
    pub(crate) fn stage<T>(
        &self,
        conn: &Db,
        f: impl FnOnce(&mut Writer) -> Result<T>,
    ) -> Result<(T, Tail, Option<i64>)> {
        let heartbeat = self.claim(conn)?;
        let mut tail = self.tail();
        // Held all along (no claim needed) and left where this process last wrote it: on
        // PostgreSQL the tail is known without asking (storage/postgres/tails.rs).
        if heartbeat.is_some() || !conn.tail_known(self.num, tail.next_seq) {
            self.sync_tail(conn, &mut tail)?;
        }
        let mut w = Writer {
            session: self,
            conn,
            keys_known: conn.keys_hold(self.num, tail.next_seq),
            tail: tail.clone(),
            now: Now::new(),
            frame: None,
        };
        let out = f(&mut w)?;
        if w.tail.next_seq != tail.next_seq {
            crate::storage::write_order::touch_records(conn, self.num, w.tail.next_seq)?;
        }
        Ok((out, w.tail, heartbeat))
    }

    /// Inside a write transaction: holds the session for this process (SESSION_LOCKED if another
    /// live process does), after replaying what a dead owner acknowledged (`replay::before_claim`).
    fn claim(&self, conn: &Db) -> Result<Option<i64>> {
        replay::before_claim(&self.shared, conn, self.num)?;
        self.shared.claim(conn, self.num, &self.id)
    }

    /// After the commit of what `stage` wrote.
    pub(crate) fn committed(&self, next: Tail, heartbeat: Option<i64>) {
        *self.tail() = next;
        self.shared.claimed(self.num, heartbeat);
    }

    /// A handle on a session made in the caller's transaction (nothing stored yet to read).
    pub(crate) fn fresh(shared: Arc<Shared>, num: i64, id: String) -> Session {
        Session {
            shared,
            num,
            id,
            tail: Mutex::new(Tail::default()),
            closed: AtomicBool::new(false),
        }
    }

    /// The tail as of the last commit, re-read if another handle wrote since.
    pub(crate) fn read_tail(&self, conn: &Db) -> Result<Tail> {
        let mut tail = self.tail();
        self.sync_tail(conn, &mut tail)?;
        Ok(tail.clone())
    }

    /// The seq of this session's record `uuid`.
    pub fn seq_of_uuid(&self, uuid: &str) -> Result<Option<u64>> {
        let conn = self.conn()?;
        crate::storage::records::seq_of(&conn, self.num, uuid)
    }

    fn write_restore(
        &self,
        drafts: Vec<(usize, Draft)>,
        skipped: &mut Vec<Skipped>,
    ) -> Result<State> {
        self.write_tolerant(drafts, skipped, Mode::Restore)
            .map(|(state, _)| state)
    }

    /// Records brought in from another agent's files: written in one transaction, those whose
    /// uuid is already stored with the same content left as they are (a second import of a grown
    /// file adds only what is new), the invalid ones reported by their index. Returns how many
    /// were new.
    /// `dated`: the times a new session takes from its source, when it began and was last
    /// written (ms), set in the same transaction.
    pub fn import_records(
        &self,
        drafts: Vec<(usize, Draft)>,
        skipped: &mut Vec<Skipped>,
        origin: Origin,
    ) -> Result<u64> {
        self.write_tolerant(drafts, skipped, Mode::Import(origin))
            .map(|(_, new)| new)
            .map_err(|e| e.during("import"))
    }

    /// Writes what is valid in one transaction; an INVALID_INPUT record is reported in `skipped`
    /// and the rest are written. A restore refuses a session that already has messages.
    fn write_tolerant(
        &self,
        drafts: Vec<(usize, Draft)>,
        skipped: &mut Vec<Skipped>,
        mode: Mode,
    ) -> Result<(State, u64)> {
        self.shared.writable()?;
        let conn = self.conn()?;
        conn.writing(self.num, || {
            self.write_tolerant_in(&conn, drafts, skipped, mode)
        })
    }

    fn write_tolerant_in(
        &self,
        conn: &Db,
        drafts: Vec<(usize, Draft)>,
        skipped: &mut Vec<Skipped>,
        mode: Mode,
    ) -> Result<(State, u64)> {
        let restore = matches!(mode, Mode::Restore);
        let tx = Txn::immediate(conn)?;
        let heartbeat = self.claim(&tx)?;
        let mut tail = self.tail();
        self.sync_tail(&tx, &mut tail)?;
        if restore && tail.state.messages > 0 {
            return Err(Error::SessionNotEmpty(format!(
                "session '{}' already has {} messages; restore into a new session",
                self.id, tail.state.messages
            )));
        }
        let mut w = Writer {
            session: self,
            conn: &tx,
            keys_known: tx.keys_hold(self.num, tail.next_seq),
            tail: tail.clone(),
            now: Now::new(),
            frame: None,
        };
        for (index, d) in drafts {
            match w.insert_or_rewind(d) {
                Ok(()) => {}
                Err(Error::InvalidInput(reason) | Error::NotFound(reason)) => {
                    skipped.push(Skipped { index, reason })
                }
                Err(e) => return Err(e),
            }
        }
        let next = w.tail;
        let new = next.next_seq - tail.next_seq;
        if let Mode::Import(origin) = &mode {
            // before the dates: a status change is a write, dated now
            if let Some(status) = origin.status {
                crate::storage::sessions::set_status(&tx, self.num, status, Now::new().ms)?;
            }
            if let Some((created, updated)) = origin.dated {
                crate::storage::sessions::set_created(&tx, self.num, created)?;
                crate::storage::sessions::backdate(&tx, self.num, updated)?;
            }
            if let Some(f) = &origin.forked_from {
                crate::storage::sessions::set_forked_from(&tx, self.num, &f.to_string())?;
            }
        }
        if next.next_seq != tail.next_seq {
            crate::storage::write_order::touch_records(&tx, self.num, next.next_seq)?;
        }
        tx.commit()?;
        *tail = next;
        self.shared.claimed(self.num, heartbeat);
        Ok((tail.state.clone(), new))
    }
}

/// What a tolerant write is for.
enum Mode {
    Restore,
    Import(Origin),
}

/// What an import knows of a new session besides its records.
#[derive(Debug, Default)]
pub struct Origin {
    /// how it ended, from its source's records (a new session is `active` until told)
    pub status: Option<crate::model::options::Status>,
    /// when it began and was last written (ms), from its source's records
    pub dated: Option<(i64, i64)>,
    /// `{sessionId, uuid}` when the source says it was forked
    pub forked_from: Option<Value>,
}

/// A write transaction in progress: records inserted through it fold into its tail, which
/// becomes the session's tail when the transaction commits.
pub(crate) struct Writer<'a> {
    session: &'a Session,
    pub conn: &'a Db,
    /// whether every response key of the session's records is known here (PostgreSQL: a new
    /// response then needs no lookup of an earlier record of it)
    keys_known: bool,
    pub tail: Tail,
    pub now: Now,
    /// the append log frame of what this writer stores, when it is logged (`replay.rs`)
    pub(crate) frame: Option<replay::Frame>,
}

impl Writer<'_> {
    pub fn num(&self) -> i64 {
        self.session.num
    }

    pub fn session_id(&self) -> &str {
        &self.session.id
    }

    /// Inserts `drafts` in order (an error names the index of the failing one when several).
    pub fn insert_all(&mut self, drafts: Vec<Draft>) -> Result<Vec<Map<String, Value>>> {
        let many = drafts.len() > 1;
        let mut out = Vec::with_capacity(drafts.len());
        for (i, d) in drafts.into_iter().enumerate() {
            let env = self
                .insert(d)
                .map_err(|e| if many { prefix_index(e, i) } else { e })?;
            out.push(env);
        }
        Ok(out)
    }

    /// A restored or imported record: a `rewind` record (one a store exported, or one an importer
    /// made where its source's tree branches) rewinds; any other is inserted.
    pub(crate) fn insert_or_rewind(&mut self, d: Draft) -> Result<()> {
        if d.record_type() == crate::model::envelope::REWIND {
            let to = d
                .env
                .get("rewind")
                .and_then(|r| r.get("toUuid"))
                .and_then(Value::as_str);
            if let Some(to) = to {
                return self
                    .rewind(to, d.uuid(), d.str_field("timestamp"))
                    .map(|_| ());
            }
        }
        self.insert(d).map(|_| ())
    }

    /// Validates what needs the store, completes the envelope, folds it into the state and
    /// writes it. Nothing is changed when it fails before the write.
    pub fn insert(&mut self, mut d: Draft) -> Result<Map<String, Value>> {
        let this = self.session;
        let conn = self.conn;
        let now = &self.now;
        let tail = &mut self.tail;
        let (lo, _) = schema::range(this.num);
        let seq = tail.next_seq;
        if seq >= 1 << SEQ_BITS {
            return Err(Error::InvalidInput(
                "the session has reached its maximum number of records".into(),
            ));
        }
        let generated;
        let uuid = match d.uuid() {
            Some(u) => {
                if let Some(seq) = records::find_uuid(conn, this.num, u)? {
                    // The same record again (a retry after an error the caller could not tell
                    // from a failed write): nothing is written, the stored envelope comes back.
                    return match this.stored_if_same(conn, seq, &d)? {
                        Some(stored) => Ok(stored),
                        None => Err(Error::InvalidInput(format!(
                            "uuid: '{u}' is already used by record seq {seq}, with other content"
                        ))),
                    };
                }
                u.to_string()
            }
            None => {
                generated = uuid::Uuid::now_v7().to_string();
                generated.clone()
            }
        };
        d.complete(&Defaults {
            uuid: &uuid,
            parent_uuid: tail.last_uuid.as_deref(),
            session_id: &this.id,
            seq,
            timestamp: &now.iso,
        });
        let enc = encode_envelope(
            &d.env,
            this.shared.options.blob_threshold_bytes,
            d.from_envelope,
        )?;
        let id = lo + seq as i64;
        let mut msg_index = None;
        let mut turn_start = false;
        let response_key = d.response_key();
        let mut facts = d.message.as_ref().filter(|_| d.in_messages());
        if let Some(f) =
            facts.filter(|f| !f.is_prompt && !f.results.is_empty() && f.calls.is_empty())
        {
            // A result whose call is not in the history: the provider would refuse it. It stays in
            // the log, out of `messages`.
            if !journal::answers_a_call(conn, this.num, f, &tail.state.pending)? {
                facts = None;
            }
        }
        if let Some(f) = facts {
            let prior = match (&response_key, &tail.state.latest_key) {
                (Some(k), Some(l)) if k == l => Some(tail.state.latest),
                (Some(k), _) if self.keys_known && conn.key_unseen(this.num, k) => None,
                (Some(k), _) => prior_usage(conn, k, this.num)?,
                (None, _) => None,
            };
            let placed = tail.state.apply(&Step {
                uuid: &uuid,
                facts: f,
                bytes: enc.message_bytes as u64,
                response_key: response_key.as_deref(),
                prior,
            });
            msg_index = Some(placed.index as i64);
            turn_start = placed.turn_start;
            if f.compaction {
                tail.state.compaction_block = Some(seq);
            }
        }
        if let Some(p) = &d.tokens {
            tail.state.restore_tokens(p);
        }
        let usage = facts.and_then(|f| f.usage);
        let role = d.message.as_ref().and_then(|f| f.role).map(Role::as_str);
        tail.state.track_stream(&d.env, seq);
        if let Some(point) = compaction_point::point_of(conn, this.num, &d.env, seq)? {
            tail.state.compacted(point);
        }
        let state =
            serde_json::to_string(&tail.state).map_err(|e| Error::StoreIo(e.to_string()))?;
        let response_key = usage.and(response_key.as_deref());
        if let Some(k) = response_key {
            conn.note_key(this.num, k);
        }
        records::insert(
            conn,
            &NewRecord {
                id,
                msg_index,
                encoded: &enc,
                uuid: &uuid,
                parent_uuid: d.str_field("parentUuid"),
                record_type: d.record_type(),
                role,
                provider: d.str_field("provider"),
                timestamp: d.str_field("timestamp").unwrap_or(&now.iso),
                turn_start,
                response_key,
                usage,
                state: &state,
                written_ms: now.ms,
            },
        )?;
        if let Some(f) = &mut self.frame {
            f.push(&enc);
        }
        if let Some(f) = facts.filter(|f| !f.calls.is_empty() || !f.results.is_empty()) {
            let denied = d.env.get("toolUseResult").and_then(Value::as_str)
                == Some("User rejected tool use");
            let repair = d.env.contains_key("repair");
            journal::on_message(conn, this.num, seq, f, denied, repair, now.ms)?;
        }
        tail.next_seq = seq + 1;
        tail.last_uuid = Some(uuid);
        tail.last_written_ms = Some(now.ms);
        enc.recycle();
        Ok(d.env)
    }
}

impl Session {
    /// The stored envelope of record `seq` if every field the caller gave in `d` is stored with
    /// that value (`seq` aside: it is always the position).
    fn stored_if_same(&self, conn: &Db, seq: u64, d: &Draft) -> Result<Option<Map<String, Value>>> {
        let page = read_page(conn, self.num, seq, 1, usize::MAX, Part::Envelope, false)?;
        let Some(Value::Object(stored)) = parse_page(&page)?.pop() else {
            return Ok(None);
        };
        let same = d
            .env
            .iter()
            .all(|(k, v)| k == "seq" || stored.get(k) == Some(v));
        Ok(same.then_some(stored))
    }

    /// Another handle (or process) may have appended since this one last looked: re-read the tail
    /// if the log's end is not where this handle thinks.
    fn sync_tail(&self, conn: &Db, tail: &mut Tail) -> Result<()> {
        // Inside an append, the staged writes of other sessions do not change this one's end.
        conn.read_unaffected(self.num, Probe::Session, || {
            if records::last_seq(conn, self.num)? != tail.next_seq.checked_sub(1) {
                *tail = load_tail(conn, self.num)?;
            }
            // A failover may have lost records this process was acknowledged: said, never
            // written past as if the session were whole.
            conn.check_acknowledged(self.num, &self.id, tail.next_seq)
                .inspect_err(|e| self.shared.notice("records_lost", e.message().to_string()))
        })
    }

    fn synced_tail(&self) -> Result<Tail> {
        let conn = self.conn()?;
        let mut tail = self.tail();
        self.sync_tail(&conn, &mut tail)?;
        Ok(tail.clone())
    }

    /// One page of `messages` as a JSON array, starting at record `from_seq`.
    /// Messages follow the current branch: its records are seq ranges of the log.
    pub fn messages_page(&self, from_seq: u64, max_bytes: usize) -> Result<Page> {
        let run = || {
            let conn = self.conn()?;
            let tail = self.read_tail(&conn)?;
            let Some(last) = tail.next_seq.checked_sub(1) else {
                return Ok(Page {
                    json: b"[]".to_vec(),
                    next: None,
                });
            };
            let path = tail.state.path(last);
            let Some(i) = path.iter().position(|&(_, to)| to >= from_seq) else {
                return Ok(Page {
                    json: b"[]".to_vec(),
                    next: None,
                });
            };
            let (seg_from, seg_to) = path[i];
            let start = from_seq.max(seg_from);
            let mut page = read_page(
                &conn,
                self.num,
                start,
                seg_to - start + 1,
                max_bytes,
                Part::Message,
                true,
            )?;
            if page.next.is_none() {
                page.next = path.get(i + 1).map(|&(f, _)| f);
            }
            Ok(page)
        };
        run().map_err(|e: Error| e.during("messages"))
    }

    /// One page of envelopes (every record) as a JSON array.
    pub fn envelopes_page(&self, from_seq: u64, limit: u64, max_bytes: usize) -> Result<Page> {
        let run = || {
            let conn = self.conn()?;
            let page = read_page(
                &conn,
                self.num,
                from_seq,
                limit,
                max_bytes,
                Part::Envelope,
                false,
            )?;
            // Deleted by another process (this one's deletes `conn` reports): its records are
            // gone, so an empty page would read as "nothing new yet" and a watch would wait on.
            if page.json == b"[]" && crate::storage::sessions::id_if_any(&conn, self.num)?.is_none()
            {
                return Err(crate::storage::ownership::gone(&self.id));
            }
            Ok(page)
        };
        run().map_err(|e: Error| e.during("envelopes"))
    }

    /// The messages of the current context, in order: from the latest compaction (its summary
    /// first) on the current branch; records with `includeInContext: false` and events left out.
    pub fn messages(&self) -> Result<Vec<Value>> {
        self.messages_in(MessageView::Context)
    }

    /// Every message of the current branch from the start, across compactions.
    pub fn all_messages(&self) -> Result<Vec<Value>> {
        self.messages_in(MessageView::Full)
    }

    pub fn messages_in(&self, view: MessageView) -> Result<Vec<Value>> {
        let (start, first) = self.message_start(view)?;
        let mut out: Vec<Value> = first.into_iter().collect();
        out.extend(collect(start, |from| self.messages_page(from, PAGE_BYTES))?);
        Ok(out)
    }

    /// Where the messages of `view` start, and the message that goes before them (the summary
    /// of a compaction).
    pub(crate) fn message_start(&self, view: MessageView) -> Result<(u64, Option<Value>)> {
        if view == MessageView::Full {
            return Ok((0, None));
        }
        let run = || {
            let conn = self.conn()?;
            let tail = self.read_tail(&conn)?;
            let start = compaction_point::start(&conn, self.num, &tail.state)?;
            Ok((start.seq, start.summary.map(|r| r.message)))
        };
        run().map_err(|e: Error| e.during("messages"))
    }

    /// Every record's envelope, from `from_seq`, at most `limit`.
    pub fn envelopes(&self, from_seq: u64, limit: Option<u64>) -> Result<Vec<Value>> {
        let limit = limit.unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut from = Some(from_seq);
        while let Some(f) = from {
            let left = limit.saturating_sub(out.len() as u64);
            if left == 0 {
                break;
            }
            let page = self.envelopes_page(f, left, PAGE_BYTES)?;
            out.extend(parse_page(&page)?);
            from = page.next;
        }
        Ok(out)
    }

    pub fn turns(&self) -> Result<Vec<Turn>> {
        let run = || -> Result<Vec<Turn>> {
            let tail = self.synced_tail()?;
            let conn = self.conn()?;
            let path = tail
                .next_seq
                .checked_sub(1)
                .map_or(Vec::new(), |last| tail.state.path(last));
            let on_path = |seq: u64| path.iter().any(|&(f, t)| f <= seq && seq <= t);
            let mut turns = Vec::new();
            // the record before the current one, if it was read: its seq and its state's text
            let mut prev: Option<(u64, String)> = None;
            records::each_turn_edge(&conn, self.num, |seq, stored| {
                let starts = stored.int(checksum::col::TURN_START)? == Some(1);
                // A turn of the current branch ends where the next of its turns starts.
                if starts && seq > 0 && on_path(seq) && on_path(seq - 1) {
                    let Some((_, state)) = prev.as_ref().filter(|(p, _)| *p + 1 == seq) else {
                        return Err(checksum::damaged(
                            &conn,
                            self.num,
                            seq - 1,
                            "the record is missing",
                        ));
                    };
                    let ended: State = serde_json::from_str(state).map_err(|e| {
                        checksum::damaged(
                            &conn,
                            self.num,
                            seq - 1,
                            &format!("its state is not valid: {e}"),
                        )
                    })?;
                    turns.extend(ended.current_turn());
                }
                prev = Some((seq, stored.state()?.to_string()));
                Ok(())
            })?;
            turns.extend(tail.state.current_turn());
            // Turns are numbered in order: a gap is a turn start lost to damage.
            if let Some((i, t)) = turns.iter().enumerate().find(|(i, t)| t.index != *i as u64) {
                return Err(Error::StoreCorrupt(format!(
                    "session '{}' is damaged: turn {i} is missing (the next stored is turn {})",
                    self.id, t.index
                )));
            }
            Ok(turns)
        };
        run().map_err(|e| e.during("turns"))
    }

    pub fn token_tracker(&self) -> Result<TokenTracker> {
        Ok(self
            .synced_tail()
            .map_err(|e| e.during("tokenTracker"))?
            .state
            .tracker())
    }

    pub fn context_fill(&self) -> Result<ContextFill> {
        let run = || -> Result<ContextFill> {
            let used = self.synced_tail()?.state.tracker().context_tokens;
            let window = self.known_window()?;
            Ok(ContextFill {
                used_tokens: used,
                context_window: window,
                fraction: window.filter(|&w| w > 0).map(|w| used as f64 / w as f64),
            })
        };
        run().map_err(|e| e.during("contextFill"))
    }

    /// The window `contextFill` divides by: the one given, else the one of the session's model
    /// or, without one, of the model of its latest assistant message (`known_context_window`).
    fn known_window(&self) -> Result<Option<u64>> {
        let conn = self.conn()?;
        if let Some(w) = sessions::context_window(&conn, self.num)? {
            return Ok(Some(w));
        }
        if let Some(model) = sessions::model(&conn, self.num)? {
            return Ok(known_context_window(&model));
        }
        let Some(seq) = records::latest_of_role(&conn, self.num, "assistant")? else {
            return Ok(None);
        };
        let model = records::record(&conn, self.num, seq)?
            .and_then(|env| env.get("message")?.get("model")?.as_str().map(String::from));
        Ok(model.as_deref().and_then(known_context_window))
    }

    /// Changes the session's title, metadata, context window or model; the new info.
    pub fn update(&self, u: SessionUpdate) -> Result<SessionInfo> {
        let run = || -> Result<SessionInfo> {
            u.check()?;
            self.shared.writable()?;
            let conn = self.conn()?;
            conn.writing(self.num, || {
                let tx = Txn::immediate(&conn)?;
                let heartbeat = self.claim(&tx)?;
                sessions::update(&tx, self.num, &u, clock::now_ms())?;
                tx.commit()?;
                self.shared.claimed(self.num, heartbeat);
                Ok::<(), Error>(())
            })?;
            Ok(read_info(&conn, self.num)?.0)
        };
        run().map_err(|e| e.during("update"))
    }

    pub fn info(&self) -> Result<SessionInfo> {
        let conn = self.conn().map_err(|e| e.during("info"))?;
        Ok(read_info(&conn, self.num).map_err(|e| e.during("info"))?.0)
    }

    /// On PostgreSQL, a listener that wakes at each commit to this session (its records, its
    /// row, its deletion), on a connection of its own; None on SQLite, whose watches are woken
    /// by the store's file changing (the Node binding's `session.watch` watches it).
    pub fn listener(&self) -> Result<Option<crate::Listener>> {
        let conn = self.conn().map_err(|e| e.during("watch"))?;
        conn.listener(Some(self.num)).map_err(|e| e.during("watch"))
    }

    pub fn set_status(&self, status: Status) -> Result<()> {
        let run = || -> Result<()> {
            self.shared.writable()?;
            let conn = self.conn()?;
            conn.writing(self.num, || {
                let tx = Txn::immediate(&conn)?;
                let heartbeat = self.claim(&tx)?;
                sessions::set_status(&tx, self.num, status, clock::now_ms())?;
                tx.commit()?;
                self.shared.claimed(self.num, heartbeat);
                Ok(())
            })
        };
        run().map_err(|e| e.during("setStatus"))
    }

    /// Closes this handle; the store stays open.
    pub fn close(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.shared.release(self.num);
        }
    }
}

/// The time of one write: every record of a batch gets the same.
pub(crate) struct Now {
    pub iso: String,
    pub ms: i64,
}

impl Now {
    pub(crate) fn new() -> Now {
        Now {
            iso: clock::now_iso(),
            ms: clock::now_ms(),
        }
    }
}

fn prefix_index(e: Error, i: usize) -> Error {
    match e {
        Error::InvalidInput(m) => Error::InvalidInput(format!("[{i}].{m}")),
        other => other,
    }
}

fn restore_draft(item: Value) -> Result<Draft> {
    let value = match item {
        Value::String(text) => json::parse(&text)?,
        v => v,
    };
    match value {
        Value::Object(_) => Draft::from_input(value, None),
        other => Err(Error::InvalidInput(format!(
            "expected an envelope or a message object, got {}",
            crate::model::message::kind(&other)
        ))),
    }
}

fn collect(start: u64, mut page: impl FnMut(u64) -> Result<Page>) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut from = Some(start);
    while let Some(f) = from {
        let p = page(f)?;
        out.extend(parse_page(&p)?);
        from = p.next;
    }
    Ok(out)
}
