//! A session: a handle on one conversation's log in a store. Opening one reads only its last
//! record; appends fold each record into the running state stored with it; reads stream the
//! stored JSON without building values.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::blob::{self, Expander};
use crate::checksum;
use crate::clock;
use crate::compaction;
use crate::encode::{encode_envelope, MESSAGE_MARK};
use crate::envelope::{Defaults, Draft};
use crate::error::{Error, Result};
use crate::journal;
use crate::json;
use crate::message::Role;
use crate::options::{ForkedFrom, SessionInfo, SessionOptions, Status};
use crate::schema::{self, SEQ_BITS};
use crate::state::{State, Step, TokenPatch, TokenTracker, Turn};
use crate::store::{Shared, Store};
use crate::txn::Txn;
use crate::usage::Usage;

/// What a handle knows of its session's end: enough to append without reading anything else.
/// Which messages `messages` gives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MessageView {
    /// from the latest compaction: its summary, then the records it kept and what came after
    #[default]
    Context,
    /// every message from the start, across compactions
    Full,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Tail {
    pub next_seq: u64,
    pub last_uuid: Option<String>,
    pub last_written_ms: Option<i64>,
    pub state: State,
}

pub struct Session {
    pub(crate) shared: Arc<Shared>,
    pub(crate) num: i64,
    id: String,
    tail: Mutex<Tail>,
    closed: AtomicBool,
}

/// A message of the view, with where it is in the log.
#[derive(Debug, Clone)]
pub(crate) struct ViewRecord {
    pub seq: u64,
    pub uuid: String,
    pub provider: Option<String>,
    pub message: Value,
}

/// A page of a bulk read: a JSON array (ASCII text) and where the next page starts, if anywhere.
#[derive(Debug, Clone)]
pub struct Page {
    pub json: Vec<u8>,
    pub next: Option<u64>,
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

/// Bulk reads are cut into pages of about this many bytes, so memory stays bounded.
pub const PAGE_BYTES: usize = 4 << 20;

/// A page is read by statements of about this many bytes each: a statement holds a snapshot of
/// the store, and while any reader holds an old one the write-ahead log cannot start over.
const STATEMENT_BYTES: usize = 1 << 20;

impl Session {
    /// A session in memory only, with no store behind it.
    pub fn in_memory(options: SessionOptions) -> Result<Session> {
        Store::memory()?.create_session(options)
    }

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

    pub(crate) fn conn(&self) -> Result<std::sync::MutexGuard<'_, Connection>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("the session is closed".into()));
        }
        self.shared.lock()
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
            let mut out = self.write(vec![draft])?;
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
            self.write(drafts)
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
            let mut out = self.write(vec![Draft::from_envelope(env)?])?;
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
        let many = drafts.len() > 1;
        self.transact(|w| {
            let mut out = Vec::with_capacity(drafts.len());
            for (i, d) in drafts.into_iter().enumerate() {
                let env = w
                    .insert(d)
                    .map_err(|e| if many { prefix_index(e, i) } else { e })?;
                out.push(env);
            }
            Ok(out)
        })
    }

    /// Runs `f` in one write transaction on the session's synced tail; the tail moves only if it
    /// commits.
    pub(crate) fn transact<T>(&self, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        self.shared.writable()?;
        let conn = self.conn()?;
        let tx = Txn::immediate(&conn)?;
        let (out, next, heartbeat) = self.stage(&tx, f)?;
        tx.commit()?;
        self.committed(next, heartbeat);
        Ok(out)
    }

    /// The part of a write transaction before its commit: `conn` is in a transaction.
    pub(crate) fn stage<T>(
        &self,
        conn: &Connection,
        f: impl FnOnce(&mut Writer) -> Result<T>,
    ) -> Result<(T, Tail, Option<i64>)> {
        let heartbeat = self.shared.claim(conn, self.num, &self.id)?;
        let mut tail = self.tail();
        self.sync_tail(conn, &mut tail)?;
        let mut w = Writer {
            session: self,
            conn,
            tail: tail.clone(),
            now: Now::new(),
        };
        let out = f(&mut w)?;
        if w.tail.next_seq != tail.next_seq {
            crate::write_order::touch_records(conn, self.num, w.tail.next_seq)?;
        }
        Ok((out, w.tail, heartbeat))
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
    pub(crate) fn read_tail(&self, conn: &Connection) -> Result<Tail> {
        let mut tail = self.tail();
        self.sync_tail(conn, &mut tail)?;
        Ok(tail.clone())
    }

    /// Every record's envelope from `from_seq` on.
    pub(crate) fn records_from(conn: &Connection, num: i64, from_seq: u64) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        let mut from = Some(from_seq);
        while let Some(f) = from {
            let page = read_page(conn, num, f, u64::MAX, PAGE_BYTES, Part::Envelope, false)?;
            out.extend(parse_page(&page)?);
            from = page.next;
        }
        Ok(out)
    }

    /// The messages from record `from_seq` on, each with its position and the envelope fields
    /// context building needs, blobs expanded.
    pub(crate) fn view_from(
        conn: &Connection,
        num: i64,
        from_seq: u64,
        path: &[(u64, u64)],
    ) -> Result<Vec<ViewRecord>> {
        let mut out = Vec::new();
        for &(from, to) in path.iter().filter(|&&(_, to)| to >= from_seq) {
            out.extend(Session::view_range(conn, num, from.max(from_seq), to)?);
        }
        Ok(out)
    }

    fn view_range(
        conn: &Connection,
        num: i64,
        from_seq: u64,
        to_seq: u64,
    ) -> Result<Vec<ViewRecord>> {
        let (lo, _) = schema::range(num);
        let start = lo.saturating_add(from_seq.min(1 << SEQ_BITS) as i64);
        let hi = lo.saturating_add(to_seq.min(1 << SEQ_BITS) as i64);
        let mut stmt = conn.prepare_cached(concat!(
            "SELECT ",
            record_columns!(),
            " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id"
        ))?;
        let mut rows = stmt.query([start, hi])?;
        let mut expander = Expander::new(conn);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut expected = start;
        while let Some(row) = rows.next()? {
            let stored = checked(conn, num, lo, &mut expected, row, Check::All)?;
            if !stored.in_messages()? {
                continue;
            }
            let seq = (stored.id() - lo) as u64;
            let bytes = stored.message()?.unwrap_or(b"null");
            buf.clear();
            if stored.has_blobs()? {
                expander
                    .expand_into(&mut buf, bytes)
                    .map_err(|e| in_record(conn, num, seq, e))?;
            } else {
                buf.extend_from_slice(bytes);
            }
            let message = crate::number_text::parse_stored(&buf).map_err(|e| {
                checksum::damaged(conn, num, seq, &format!("its message is not JSON: {e}"))
            })?;
            out.push(ViewRecord {
                seq,
                uuid: stored
                    .str(checksum::col::UUID)?
                    .unwrap_or_default()
                    .to_string(),
                provider: stored.str(checksum::col::PROVIDER)?.map(str::to_string),
                message,
            });
        }
        if expected <= hi {
            return Err(checksum::damaged(
                conn,
                num,
                (expected - lo) as u64,
                "the record is missing",
            ));
        }
        Ok(out)
    }

    /// The seq of the record with `uuid` in this session.
    pub(crate) fn seq_of(conn: &Connection, num: i64, uuid: &str) -> Result<Option<u64>> {
        let (lo, hi) = schema::range(num);
        let mut stmt = conn.prepare_cached(concat!(
            "SELECT ",
            meta_columns!(),
            " FROM records WHERE uuid = ?1 AND id BETWEEN ?2 AND ?3 LIMIT 1"
        ))?;
        let mut rows = stmt.query(params![uuid, lo, hi])?;
        let Some(row) = rows.next()? else {
            return Ok(None);
        };
        let seq = (row.get::<_, i64>(checksum::col::ID)? - lo) as u64;
        let stored = checksum::Stored::check_meta(row)
            .map_err(|why| checksum::damaged(conn, num, seq, &why))?;
        if stored.str(checksum::col::UUID)? != Some(uuid) {
            return Err(checksum::damaged(
                conn,
                num,
                seq,
                "the uuid index lists it under another uuid",
            ));
        }
        Ok(Some(seq))
    }

    /// The envelopes of records `from_seq..=to_seq`.
    pub(crate) fn records_between(
        conn: &Connection,
        num: i64,
        from_seq: u64,
        to_seq: u64,
    ) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        let mut from = Some(from_seq);
        while let Some(f) = from.filter(|&f| f <= to_seq) {
            let page = read_page(
                conn,
                num,
                f,
                to_seq - f + 1,
                PAGE_BYTES,
                Part::Envelope,
                true,
            )?;
            out.extend(parse_page(&page)?);
            from = page.next;
        }
        Ok(out)
    }

    /// The seq of this session's record `uuid`.
    pub fn seq_of_uuid(&self, uuid: &str) -> Result<Option<u64>> {
        let conn = self.conn()?;
        Session::seq_of(&conn, self.num, uuid)
    }

    /// One record's envelope.
    pub(crate) fn record(
        conn: &Connection,
        num: i64,
        seq: u64,
    ) -> Result<Option<Map<String, Value>>> {
        let page = read_page(conn, num, seq, 1, usize::MAX, Part::Envelope, false)?;
        Ok(match parse_page(&page)?.pop() {
            Some(Value::Object(o)) => Some(o),
            _ => None,
        })
    }

    fn write_restore(
        &self,
        drafts: Vec<(usize, Draft)>,
        skipped: &mut Vec<Skipped>,
    ) -> Result<State> {
        self.shared.writable()?;
        let conn = self.conn()?;
        let tx = Txn::immediate(&conn)?;
        let heartbeat = self.shared.claim(&tx, self.num, &self.id)?;
        let mut tail = self.tail();
        self.sync_tail(&tx, &mut tail)?;
        if tail.state.messages > 0 {
            return Err(Error::SessionNotEmpty(format!(
                "session '{}' already has {} messages; restore into a new session",
                self.id, tail.state.messages
            )));
        }
        let mut w = Writer {
            session: self,
            conn: &tx,
            tail: tail.clone(),
            now: Now::new(),
        };
        for (index, d) in drafts {
            match w.insert(d) {
                Ok(_) => {}
                Err(Error::InvalidInput(reason)) => skipped.push(Skipped { index, reason }),
                Err(e) => return Err(e),
            }
        }
        let next = w.tail;
        if next.next_seq != tail.next_seq {
            crate::write_order::touch_records(&tx, self.num, next.next_seq)?;
        }
        tx.commit()?;
        *tail = next;
        self.shared.claimed(self.num, heartbeat);
        Ok(tail.state.clone())
    }
}

/// A write transaction in progress: records inserted through it fold into its tail, which
/// becomes the session's tail when the transaction commits.
pub(crate) struct Writer<'a> {
    session: &'a Session,
    pub conn: &'a Connection,
    pub tail: Tail,
    pub now: Now,
}

impl Writer<'_> {
    pub fn num(&self) -> i64 {
        self.session.num
    }

    pub fn session_id(&self) -> &str {
        &self.session.id
    }

    /// Validates what needs the store, completes the envelope, folds it into the state and
    /// writes it. Nothing is changed when it fails before the write.
    pub fn insert(&mut self, mut d: Draft) -> Result<Map<String, Value>> {
        let this = self.session;
        let conn = self.conn;
        let now = &self.now;
        let tail = &mut self.tail;
        let (lo, hi) = schema::range(this.num);
        let seq = tail.next_seq;
        if seq >= 1 << SEQ_BITS {
            return Err(Error::InvalidInput(
                "the session has reached its maximum number of records".into(),
            ));
        }
        let generated;
        let uuid = match d.uuid() {
            Some(u) => {
                let taken: Option<i64> = conn
                    .prepare_cached(
                        "SELECT id FROM records WHERE uuid = ?1 AND id BETWEEN ?2 AND ?3 LIMIT 1",
                    )?
                    .query_row(params![u, lo, hi], |r| r.get(0))
                    .optional()?;
                if let Some(id) = taken {
                    // The same record again (a retry after an error the caller could not tell
                    // from a failed write): nothing is written, the stored envelope comes back.
                    let seq = (id - lo) as u64;
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
        }
        if let Some(p) = &d.tokens {
            tail.state.restore_tokens(p);
        }
        let usage = facts.and_then(|f| f.usage);
        let role = d.message.as_ref().and_then(|f| f.role).map(|r| match r {
            Role::User => "user",
            Role::Assistant => "assistant",
        });
        tail.state.track_stream(&d.env, seq);
        if let Some(point) = crate::compaction::point_of(conn, this.num, &d.env, seq)? {
            tail.state.compacted(point);
        }
        let state =
            serde_json::to_string(&tail.state).map_err(|e| Error::StoreIo(e.to_string()))?;
        let response_key = usage.and(response_key.as_deref());
        // In the order of `record_columns!()`: the checksums cover exactly what is stored.
        let mut values: [ValueRef<'_>; checksum::col::ALL] = [
            ValueRef::Integer(id),
            int(msg_index),
            ValueRef::Integer(enc.has_blobs() as i64),
            ValueRef::Blob(&enc.body),
            enc.message
                .as_deref()
                .map_or(ValueRef::Null, ValueRef::Blob),
            ValueRef::Null, // crc
            ValueRef::Text(uuid.as_bytes()),
            text(d.str_field("parentUuid")),
            ValueRef::Text(d.record_type().as_bytes()),
            text(role),
            text(d.str_field("provider")),
            ValueRef::Text(d.str_field("timestamp").unwrap_or(&now.iso).as_bytes()),
            ValueRef::Integer(turn_start as i64),
            text(response_key),
            int(usage.map(|u| u.input_tokens as i64)),
            int(usage.map(|u| u.output_tokens as i64)),
            int(usage.map(|u| u.cache_read_input_tokens as i64)),
            int(usage.map(|u| u.cache_creation_input_tokens as i64)),
            ValueRef::Text(state.as_bytes()),
            ValueRef::Null, // meta_crc
        ];
        let (crc, meta) = checksum::record_sums(&values);
        values[checksum::col::CRC] = ValueRef::Integer(crc as i64);
        values[checksum::col::META_CRC] = ValueRef::Integer(meta as i64);
        let written = ValueRef::Integer(now.ms);
        conn.prepare_cached(concat!(
            "INSERT INTO records(",
            record_columns!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
        ))?
        .execute(rusqlite::params_from_iter(
            values
                .iter()
                .chain([&written])
                .map(|v| rusqlite::types::ToSqlOutput::Borrowed(*v)),
        ))?;
        blob::put(conn, id, &enc.blobs)?;
        if let Some(f) = facts.filter(|f| !f.calls.is_empty() || !f.results.is_empty()) {
            let denied = d.env.get("toolUseResult").and_then(Value::as_str)
                == Some("User rejected tool use");
            let repair = d.env.contains_key("repair");
            journal::on_message(conn, this.num, seq, f, denied, repair, now.ms)?;
        }
        tail.next_seq = seq + 1;
        tail.last_uuid = Some(uuid);
        tail.last_written_ms = Some(now.ms);
        Ok(d.env)
    }
}

impl Session {
    /// The stored envelope of record `seq` if every field the caller gave in `d` is stored with
    /// that value (`seq` aside: it is always the position).
    fn stored_if_same(
        &self,
        conn: &Connection,
        seq: u64,
        d: &Draft,
    ) -> Result<Option<Map<String, Value>>> {
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
    fn sync_tail(&self, conn: &Connection, tail: &mut Tail) -> Result<()> {
        let (lo, hi) = schema::range(self.num);
        // ORDER BY + LIMIT, not max(): SQLite's min/max shortcut does not apply under a WHERE
        // clause, and max() would scan the whole session.
        let last: Option<i64> = conn
            .prepare_cached(
                "SELECT id FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id DESC LIMIT 1",
            )?
            .query_row([lo, hi], |r| r.get(0))
            .optional()?;
        let expected = tail.next_seq.checked_sub(1).map(|s| lo + s as i64);
        if last != expected {
            *tail = load_tail(conn, self.num)?;
        }
        Ok(())
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
        let conn = self.conn().map_err(|e| e.during("envelopes"))?;
        read_page(
            &conn,
            self.num,
            from_seq,
            limit,
            max_bytes,
            Part::Envelope,
            false,
        )
        .map_err(|e| e.during("envelopes"))
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
            let start = compaction::start(&conn, self.num, &tail.state)?;
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
            let (lo, hi) = schema::range(self.num);
            let path = tail
                .next_seq
                .checked_sub(1)
                .map_or(Vec::new(), |last| tail.state.path(last));
            let on_path = |seq: u64| path.iter().any(|&(f, t)| f <= seq && seq <= t);
            // Every turn start and the record before it (whose state holds the turn that ends
            // there), in one read, each checked.
            let mut stmt = conn.prepare_cached(concat!(
                "SELECT ",
                meta_columns!(),
                " FROM records WHERE id IN (
                   SELECT id FROM records WHERE turn_start = 1 AND id BETWEEN ?1 AND ?2
                   UNION SELECT id - 1 FROM records WHERE turn_start = 1 AND id BETWEEN ?1 AND ?2)
                 ORDER BY id"
            ))?;
            let mut rows = stmt.query([lo, hi])?;
            let mut turns = Vec::new();
            // the record before the current one, if it was read: its seq and its state's text
            let mut prev: Option<(u64, String)> = None;
            while let Some(row) = rows.next()? {
                let id: i64 = row.get(checksum::col::ID)?;
                let seq = (id - lo) as u64;
                let stored = checksum::Stored::check_meta(row)
                    .map_err(|why| checksum::damaged(&conn, self.num, seq, &why))?;
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
            }
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
            let window: Option<i64> = self
                .conn()?
                .prepare_cached("SELECT context_window FROM sessions WHERE num = ?1")?
                .query_row([self.num], |r| r.get(0))?;
            let window = window.map(|w| w as u64);
            Ok(ContextFill {
                used_tokens: used,
                context_window: window,
                fraction: window.filter(|&w| w > 0).map(|w| used as f64 / w as f64),
            })
        };
        run().map_err(|e| e.during("contextFill"))
    }

    pub fn info(&self) -> Result<SessionInfo> {
        let conn = self.conn().map_err(|e| e.during("info"))?;
        Ok(read_info(&conn, self.num).map_err(|e| e.during("info"))?.0)
    }

    pub fn set_status(&self, status: Status) -> Result<()> {
        let run = || -> Result<()> {
            self.shared.writable()?;
            let conn = self.conn()?;
            let tx = Txn::immediate(&conn)?;
            let heartbeat = self.shared.claim(&tx, self.num, &self.id)?;
            tx.execute(
                "UPDATE sessions SET status = ?1, updated_ms = ?2 WHERE num = ?3",
                params![status.as_str(), clock::now_ms(), self.num],
            )?;
            crate::write_order::touch(&tx, self.num)?;
            tx.commit()?;
            self.shared.claimed(self.num, heartbeat);
            Ok(())
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
    fn new() -> Now {
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
            crate::message::kind(&other)
        ))),
    }
}

fn prior_usage(conn: &Connection, key: &str, num: i64) -> Result<Option<Usage>> {
    let (lo, hi) = schema::range(num);
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        meta_columns!(),
        " FROM records WHERE response_key = ?1 AND id BETWEEN ?2 AND ?3 ORDER BY id DESC LIMIT 1"
    ))?;
    let mut rows = stmt.query(params![key, lo, hi])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let seq = (row.get::<_, i64>(checksum::col::ID)? - lo) as u64;
    let stored =
        checksum::Stored::check_meta(row).map_err(|why| checksum::damaged(conn, num, seq, &why))?;
    let g =
        |i| -> Result<u64> { Ok(stored.int(checksum::col::INPUT_TOKENS + i)?.unwrap_or(0) as u64) };
    Ok(Some(Usage {
        input_tokens: g(0)?,
        output_tokens: g(1)?,
        cache_read_input_tokens: g(2)?,
        cache_creation_input_tokens: g(3)?,
    }))
}

fn load_tail(conn: &Connection, num: i64) -> Result<Tail> {
    // The last record and the session's record count are compared: both from one snapshot, even
    // while another process appends.
    if conn.is_autocommit() {
        let tx = Txn::deferred(conn)?;
        let tail = load_tail_in(&tx, num)?;
        tx.commit()?;
        return Ok(tail);
    }
    load_tail_in(conn, num)
}

fn load_tail_in(conn: &Connection, num: i64) -> Result<Tail> {
    let (lo, hi) = schema::range(num);
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        meta_columns!(),
        " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id DESC LIMIT 1"
    ))?;
    let mut rows = stmt.query([lo, hi])?;
    let stored_count: Option<i64> = conn
        .prepare_cached("SELECT records FROM sessions WHERE num = ?1")?
        .query_row([num], |r| r.get(0))
        .optional()?;
    let Some(row) = rows.next()? else {
        if let Some(n) = stored_count.filter(|&n| n != 0) {
            return Err(checksum::damaged(
                conn,
                num,
                0,
                &format!("the session has no records, but its row says {n}"),
            ));
        }
        return Ok(Tail::default());
    };
    let seq = (row.get::<_, i64>(checksum::col::ID)? - lo) as u64;
    if let Some(n) = stored_count.filter(|&n| n != seq as i64 + 1) {
        let why = if n > seq as i64 + 1 {
            format!("the session's last records are missing (its row says {n} records, the last stored is seq {seq})")
        } else {
            format!("the session's row says it has {n} records, but seq {seq} is stored")
        };
        return Err(checksum::damaged(conn, num, seq, &why));
    }
    let stored =
        checksum::Stored::check_meta(row).map_err(|why| checksum::damaged(conn, num, seq, &why))?;
    let written: i64 = row.get(checksum::col::WRITTEN_MS)?;
    let uuid = stored.str(checksum::col::UUID)?.unwrap_or_default();
    let parent = stored.str(checksum::col::PARENT)?;
    let ty = stored.str(checksum::col::TYPE)?.unwrap_or_default();
    Ok(Tail {
        next_seq: seq + 1,
        // After a rewind, the next record continues from the record rewound to.
        last_uuid: if ty == crate::branch::REWIND {
            parent.map(str::to_string)
        } else {
            Some(uuid.to_string())
        },
        last_written_ms: Some(written),
        state: state_of(conn, num, seq, &stored)?,
    })
}

/// The state stored with a checked record.
pub(crate) fn state_of(
    conn: &Connection,
    num: i64,
    seq: u64,
    stored: &checksum::Stored<'_>,
) -> Result<State> {
    serde_json::from_str(stored.state()?)
        .map_err(|e| checksum::damaged(conn, num, seq, &format!("its state is not valid: {e}")))
}

/// Calls `f` with each record `from_seq..=to_seq` (read with `meta_columns!()`, its state and
/// indexed fields checked); every one of them must be there.
pub(crate) fn each_record(
    conn: &Connection,
    num: i64,
    from_seq: u64,
    to_seq: u64,
    mut f: impl FnMut(u64, &checksum::Stored<'_>) -> Result<()>,
) -> Result<()> {
    let (lo, _) = schema::range(num);
    let start = lo.saturating_add(from_seq.min(1 << SEQ_BITS) as i64);
    let end = lo.saturating_add(to_seq.min(1 << SEQ_BITS) as i64);
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        meta_columns!(),
        " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id"
    ))?;
    let mut rows = stmt.query([start, end])?;
    let mut expected = start;
    while let Some(row) = rows.next()? {
        let stored = checked(conn, num, lo, &mut expected, row, Check::Meta)?;
        f((stored.id() - lo) as u64, &stored)?;
    }
    if expected <= end {
        return Err(checksum::damaged(
            conn,
            num,
            (expected - lo) as u64,
            "the record is missing",
        ));
    }
    Ok(())
}

/// When a session was last written, for listing: most recent first is the greatest. The time
/// (`updatedAt`, which an imported snapshot keeps from its origin) decides, and the store's write
/// counter breaks its ties: writes in one millisecond list in the order they were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Recency {
    pub updated_ms: i64,
    pub write_seq: i64,
}

/// A session's metadata and when it was last written, for sorting.
pub(crate) fn read_info(conn: &Connection, num: i64) -> Result<(SessionInfo, Recency)> {
    let tail = load_tail(conn, num)?;
    /// The row's fields that need parsing, as stored.
    struct Raw {
        status: String,
        window: Option<i64>,
        metadata: Option<String>,
        forked: Option<String>,
    }
    let row = conn
        .prepare_cached(
            "SELECT id, project, title, provider, model, status, created_ms, updated_ms, context_window, metadata, forked_from, write_seq
             FROM sessions WHERE num = ?1",
        )?
        .query_row([num], |r| {
            let created: i64 = r.get(6)?;
            let updated = r.get::<_, i64>(7)?.max(tail.last_written_ms.unwrap_or(0));
            let info = SessionInfo {
                id: r.get(0)?,
                project: r.get(1)?,
                title: r.get(2)?,
                provider: r.get(3)?,
                model: r.get(4)?,
                status: Status::Active,
                created_at: clock::iso_from_ms(created),
                updated_at: clock::iso_from_ms(updated),
                message_count: tail.state.messages,
                context_window: None,
                forked_from: None,
                metadata: None,
            };
            let raw = Raw {
                status: r.get(5)?,
                window: r.get(8)?,
                metadata: r.get(9)?,
                forked: r.get(10)?,
            };
            let recency = Recency {
                write_seq: r.get(11)?,
                updated_ms: updated,
            };
            Ok((info, raw, recency))
        })
        .optional()?;
    let Some((mut info, raw, recency)) = row else {
        return Err(Error::NotFound("the session was deleted".into()));
    };
    let bad = |what: &str| {
        Error::StoreCorrupt(format!(
            "the row of session '{}' is damaged: its {what} does not parse",
            info.id
        ))
    };
    info.status = Status::parse(&raw.status).ok_or_else(|| bad("status"))?;
    info.context_window = raw
        .window
        .map(|w| u64::try_from(w).map_err(|_| bad("context_window")))
        .transpose()?;
    info.forked_from = raw
        .forked
        .map(|f| serde_json::from_str::<ForkedFrom>(&f).map_err(|_| bad("forked_from")))
        .transpose()?;
    info.metadata = raw
        .metadata
        .map(|m| serde_json::from_str(&m).map_err(|_| bad("metadata")))
        .transpose()?;
    Ok((info, recency))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Message,
    Envelope,
}

fn read_page(
    conn: &Connection,
    num: i64,
    from_seq: u64,
    limit: u64,
    max_bytes: usize,
    part: Part,
    whole: bool,
) -> Result<Page> {
    let (lo, hi) = schema::range(num);
    let start = lo.saturating_add(from_seq.min(1 << SEQ_BITS) as i64);
    let end = hi.min(
        start
            .saturating_add(limit.min(1 << SEQ_BITS) as i64)
            .saturating_sub(1),
    );
    // Every record of the range is read and checked, messages or not: a record whose
    // `msg_index` was damaged is found, not skipped, and a gap in the seqs is a missing record.
    // One statement reads about STATEMENT_BYTES, then the next continues where it stopped: a
    // statement holds a read snapshot, which keeps a log restart waiting while it is open.
    let mut json = Vec::with_capacity(max_bytes.min(1 << 20) + 1024);
    let mut expander = Expander::new(conn);
    let mut next = None;
    let mut expected = start;
    json.push(b'[');
    let mut first = true;
    let mut from = start;
    let mut rescan = false;
    'statements: loop {
        let mut stmt = conn.prepare_cached(concat!(
            "SELECT ",
            content_columns!(),
            " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id"
        ))?;
        let mut rows = stmt.query([from, end])?;
        let begun = json.len();
        let mut any = false;
        while let Some(row) = rows.next()? {
            any = true;
            let id: i64 = row.get(checksum::col::ID)?;
            if json.len() >= max_bytes {
                next = Some((id - lo) as u64);
                break 'statements;
            }
            if json.len() - begun >= STATEMENT_BYTES {
                from = id;
                continue 'statements;
            }
            let stored = checked(conn, num, lo, &mut expected, row, Check::Content)?;
            if part == Part::Message && !stored.in_messages()? {
                continue;
            }
            if !first {
                json.push(b',');
            }
            first = false;
            append_stored(&mut json, &stored, part, &mut expander, conn, num, lo)?;
        }
        drop(rows);
        // The scan ended. A damaged b-tree page can end a scan early with no error from SQLite
        // while a seek still finds later records: if the range's last record lies beyond where
        // the scan stopped, scan again from there (records appended meanwhile are read on), and
        // a second scan that finds nothing there is damage.
        match last_id(conn, expected, end)? {
            Some(_) if rescan && !any => {
                return Err(checksum::damaged(
                    conn,
                    num,
                    (expected - lo) as u64,
                    "the record is missing",
                ))
            }
            Some(_) => {
                rescan = true;
                from = expected;
            }
            None => break,
        }
    }
    json.push(b']');
    // A range known to be stored whole (a segment of the branch, up to the session's last
    // record): stopping short is a missing record.
    if whole && next.is_none() && expected <= end {
        return Err(checksum::damaged(
            conn,
            num,
            (expected - lo) as u64,
            "the record is missing",
        ));
    }
    Ok(Page { json, next })
}

/// The id of the last record stored in `from..=to`, found by a seek (not a scan).
fn last_id(conn: &Connection, from: i64, to: i64) -> Result<Option<i64>> {
    Ok(conn
        // ORDER BY + LIMIT: max() under a WHERE clause would scan the range (see sync_tail).
        .prepare_cached(
            "SELECT id FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id DESC LIMIT 1",
        )?
        .query_row([from, to], |r| r.get(0))
        .optional()?)
}

/// Appends a checked record of `read_page` to the JSON array being built.
fn append_stored(
    json: &mut Vec<u8>,
    stored: &checksum::Stored,
    part: Part,
    expander: &mut Expander,
    conn: &Connection,
    num: i64,
    lo: i64,
) -> Result<()> {
    let id = stored.id();
    let has_blobs = stored.has_blobs()?;
    let message = stored.message()?;
    let text: &[u8] = match part {
        Part::Message => message.unwrap_or(b"null"),
        Part::Envelope => stored.body()?,
    };
    let mut splice = |out: &mut Vec<u8>, bytes: &[u8]| -> Result<()> {
        if has_blobs {
            expander
                .expand_into(out, bytes)
                .map_err(|e| in_record(conn, num, (id - lo) as u64, e))
        } else {
            out.extend_from_slice(bytes);
            Ok(())
        }
    };
    match (part, message, text.iter().position(|&b| b == MESSAGE_MARK)) {
        (Part::Envelope, Some(m), Some(at)) => {
            splice(json, &text[..at])?;
            splice(json, m)?;
            splice(json, &text[at + 1..])?;
        }
        _ => splice(json, text)?,
    }
    Ok(())
}

fn text(t: Option<&str>) -> ValueRef<'_> {
    t.map_or(ValueRef::Null, |t| ValueRef::Text(t.as_bytes()))
}

fn int(i: Option<i64>) -> ValueRef<'static> {
    i.map_or(ValueRef::Null, ValueRef::Integer)
}

/// Which checksums of a row to check: the row was read with `record_columns!()` (all),
/// `content_columns!()` or `meta_columns!()`.
#[derive(Clone, Copy)]
enum Check {
    All,
    Content,
    Meta,
}

/// Checks a row (its checksums, as `check` says), and that it is the record expected next (no
/// seq between is missing).
fn checked<'r>(
    conn: &Connection,
    num: i64,
    lo: i64,
    expected: &mut i64,
    row: &'r rusqlite::Row<'_>,
    check: Check,
) -> Result<checksum::Stored<'r>> {
    let id: i64 = row.get(checksum::col::ID)?;
    if id != *expected {
        let missing = (*expected - lo) as u64;
        return Err(checksum::damaged(
            conn,
            num,
            missing,
            &format!("the record is missing (the next stored is seq {})", id - lo),
        ));
    }
    *expected += 1;
    let stored = match check {
        Check::All => checksum::Stored::check(row),
        Check::Content => checksum::Stored::check_content(row),
        Check::Meta => checksum::Stored::check_meta(row),
    };
    stored.map_err(|why| checksum::damaged(conn, num, (id - lo) as u64, &why))
}

/// A STORE_CORRUPT error found while reading record `seq` (a damaged blob), naming the record.
fn in_record(conn: &Connection, num: i64, seq: u64, e: Error) -> Error {
    match e {
        Error::StoreCorrupt(m) => checksum::damaged(conn, num, seq, &m),
        other => other,
    }
}

fn parse_page(page: &Page) -> Result<Vec<Value>> {
    match crate::number_text::parse_stored(&page.json) {
        Ok(Value::Array(records)) => Ok(records),
        Ok(_) => Err(Error::StoreCorrupt(
            "a stored record is damaged: not a list".into(),
        )),
        Err(e) => Err(Error::StoreCorrupt(format!(
            "a stored record is damaged: {e}"
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
