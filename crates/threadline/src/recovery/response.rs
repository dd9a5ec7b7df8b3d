//! Streaming a response into a session: a writer that takes chunks as they arrive, persists them
//! as `stream` records (out of `messages`) at every block boundary and at least every
//! `FLUSH_INTERVAL` within a long block, and ends with the complete message (`finish`) or an
//! `error` record holding what can be sent back to a model (`fail`). A stream cut off by a crash
//! is closed by recovery the same way as `fail`, from the chunks that were persisted.

use std::time::{Duration, Instant};

use crate::storage::db::Db;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::model::envelope::Draft;
use crate::model::state::OpenStream;
use crate::model::stream::{Assembler, Pushed};
use crate::recovery::{repair_uuid, Repair, RepairKind};
use crate::session::{Session, Tail, Writer};

/// Within a long block, buffered chunks are persisted at least this often.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(200);
/// ... or when this many are buffered.
const FLUSH_CHUNKS: usize = 512;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResponseOptions {
    pub request_id: Option<String>,
    pub model: Option<String>,
    pub provider: Option<String>,
}

pub struct ResponseWriter {
    id: String,
    options: ResponseOptions,
    assembler: Assembler,
    buffer: Vec<Value>,
    since: Option<Instant>,
    part: u64,
    done: bool,
}

impl Session {
    /// Starts streaming a response; nothing is written until the first block boundary.
    pub fn begin_response(&self, options: ResponseOptions) -> ResponseWriter {
        ResponseWriter {
            id: uuid::Uuid::now_v7().to_string(),
            options,
            assembler: Assembler::new(),
            buffer: Vec::new(),
            since: None,
            part: 0,
            done: false,
        }
    }
}

impl ResponseWriter {
    /// The stream's id: its `stream` records and its final record carry it (`streamId`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Takes one chunk (the simple form or an Anthropic raw stream event). A rejected chunk
    /// changes nothing. A persistence error leaves the chunk buffered for the next flush.
    pub fn push(&mut self, session: &Session, chunk: Value) -> Result<()> {
        let run = || {
            self.open()?;
            let pushed = self.assembler.push(&chunk)?;
            self.buffer.push(chunk);
            let since = *self.since.get_or_insert_with(Instant::now);
            // A block closes at content_block_stop (raw events), or when the next block opens
            // (simple chunks: then the buffer holds the previous block's chunks too).
            let boundary = match pushed {
                Pushed::BlockClosed => true,
                Pushed::BlockOpened => self.buffer.len() > 1,
                _ => false,
            };
            if boundary || since.elapsed() >= FLUSH_INTERVAL || self.buffer.len() >= FLUSH_CHUNKS {
                self.flush(session)?;
            }
            Ok(())
        };
        run().map_err(|e: Error| e.during("push"))
    }

    /// Persists the buffered chunks as one `stream` record.
    pub fn flush(&mut self, session: &Session) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let mut env = Map::new();
        env.insert("type".into(), Value::String("stream".into()));
        env.insert("includeInContext".into(), Value::Bool(false));
        self.tag(&mut env, false);
        let chunks = Value::Array(self.buffer.clone());
        let mut stream = json!({"id": self.id, "part": self.part, "chunks": chunks});
        if let (Some(model), 0) = (&self.options.model, self.part) {
            stream["model"] = Value::String(model.clone());
        }
        env.insert("stream".into(), stream);
        session.write(vec![Draft::from_envelope(env)?])?;
        self.buffer.clear();
        self.since = None;
        self.part += 1;
        Ok(())
    }

    /// Stores the complete assistant message: `message` if given (e.g. the SDK's
    /// `finalMessage()`), else the one assembled from the chunks.
    pub fn finish(
        &mut self,
        session: &Session,
        message: Option<Value>,
    ) -> Result<Map<String, Value>> {
        let run = || {
            self.open()?;
            let message = match message {
                Some(m) => m,
                // A clone: if the write fails, the caller can retry with the response intact.
                None => {
                    let assembled = self.assembler.clone().finish()?;
                    self.with_model(assembled)
                }
            };
            let mut env = Map::new();
            env.insert("type".into(), Value::String("assistant".into()));
            self.tag(&mut env, true);
            env.insert("message".into(), message);
            let out = self.write_last(session, env)?;
            Ok(out)
        };
        run().map_err(|e: Error| e.during("finish"))
    }

    /// Stores an `error` record with the error and the partial output a model may see again.
    pub fn fail(
        &mut self,
        session: &Session,
        message: &str,
        code: Option<&str>,
    ) -> Result<Map<String, Value>> {
        let mut run = || {
            self.open()?;
            let mut error = Map::new();
            error.insert("message".into(), Value::String(message.into()));
            if let Some(c) = code {
                error.insert("code".into(), Value::String(c.into()));
            }
            let mut env = error_record(&self.assembler, error);
            self.tag(&mut env, true);
            if let Some(m) = env.get_mut("message") {
                *m = self.with_model(std::mem::take(m));
            }
            self.write_last(session, env)
        };
        run().map_err(|e: Error| e.during("fail"))
    }

    fn write_last(
        &mut self,
        session: &Session,
        env: Map<String, Value>,
    ) -> Result<Map<String, Value>> {
        let mut out = session.write(vec![Draft::from_envelope(env)?])?;
        self.done = true;
        self.buffer.clear();
        Ok(out.pop().unwrap_or_default())
    }

    fn open(&self) -> Result<()> {
        if self.done {
            return Err(Error::InvalidInput(
                "the response is already finished".into(),
            ));
        }
        Ok(())
    }

    /// Envelope fields every record of the stream carries.
    fn tag(&self, env: &mut Map<String, Value>, last: bool) {
        if last {
            env.insert("streamId".into(), Value::String(self.id.clone()));
        }
        let o = &self.options;
        for (k, v) in [("requestId", &o.request_id), ("provider", &o.provider)] {
            if let Some(v) = v {
                env.insert(k.into(), Value::String(v.clone()));
            }
        }
    }

    /// The simple chunk form carries no model: the writer's option fills it in.
    fn with_model(&self, mut message: Value) -> Value {
        if let (Some(model), Value::Object(m)) = (&self.options.model, &mut message) {
            if !m.contains_key("model") {
                m.insert("model".into(), Value::String(model.clone()));
            }
        }
        message
    }
}

/// An `error` record for a stream that ended early: the message keeps only what a model may be
/// sent again (no half-streamed thinking, no tool call with half its input).
fn error_record(assembler: &Assembler, error: Map<String, Value>) -> Map<String, Value> {
    let mut env = Map::new();
    env.insert("type".into(), Value::String("error".into()));
    env.insert("error".into(), Value::Object(error));
    let salvage = assembler.salvage();
    if salvage.is_empty() {
        // Nothing arrived that a model could continue from: the record stays out of context.
        env.insert("includeInContext".into(), Value::Bool(false));
        return env;
    }
    let mut message = match assembler.message() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    message.insert("role".into(), Value::String("assistant".into()));
    message.insert("content".into(), Value::Array(salvage));
    if message.contains_key("stop_reason") {
        message.insert("stop_reason".into(), Value::Null);
    }
    env.insert("message".into(), Value::Object(message));
    env
}

/// The open stream's persisted chunks, replayed, and the envelope fields of its records.
fn replay(conn: &Db, num: i64, os: &OpenStream) -> Result<(Assembler, Map<String, Value>)> {
    let mut assembler = Assembler::new();
    let mut tags = Map::new();
    for record in crate::storage::records::records_from(conn, num, os.seq)? {
        let Some(stream) = record
            .get("stream")
            .filter(|s| s.get("id").and_then(Value::as_str) == Some(&os.id))
        else {
            continue;
        };
        for k in ["requestId", "provider"] {
            if let Some(v) = record.get(k) {
                tags.insert(k.into(), v.clone());
            }
        }
        if let Some(m) = stream.get("model") {
            tags.insert("model".into(), m.clone());
        }
        for chunk in stream
            .get("chunks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // Chunks were validated when pushed; one that no longer folds ends the replay.
            if assembler.push(chunk).is_err() {
                return Ok((assembler, tags));
            }
        }
    }
    Ok((assembler, tags))
}

const INTERRUPTED: &str = "interrupted: the process ended before the response finished";

fn close_repair(os: &OpenStream, uuid: String, kept: usize) -> Repair {
    Repair {
        kind: RepairKind::CloseStream,
        tool_use_id: None,
        name: None,
        state: None,
        reason: format!(
            "{INTERRUPTED}; its persisted output becomes an interrupted assistant record ({kept} \
             complete block(s) kept, half-streamed thinking and tool input left out) (stream {})",
            os.id
        ),
        record_uuid: Some(uuid),
    }
}

/// For the plan: closing the open stream, and the calls its salvaged output would add (never
/// started, since the response never finished).
pub(crate) fn salvaged_calls(conn: &Db, num: i64, tail: &Tail) -> Result<Vec<Repair>> {
    let Some(os) = &tail.state.open_stream else {
        return Ok(Vec::new());
    };
    let (assembler, _) = replay(conn, num, os)?;
    let salvage = assembler.salvage();
    let session_id = crate::storage::sessions::id_of(conn, num)?;
    let mut out = vec![close_repair(
        os,
        repair_uuid(&session_id, &["stream".into(), os.id.clone()]),
        salvage.len(),
    )];
    for b in salvage
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
    {
        out.push(Repair {
            kind: RepairKind::NeverStarted,
            tool_use_id: b.get("id").and_then(Value::as_str).map(str::to_string),
            name: b.get("name").and_then(Value::as_str).map(str::to_string),
            state: Some(crate::storage::journal::CallState::Requested),
            reason: "never started: the session ended before the tool was run".into(),
            record_uuid: None,
        });
    }
    Ok(out)
}

/// Closes a stream cut off by a crash: an `error` record as `fail` writes, marked as a repair.
pub(crate) fn close_interrupted(w: &mut Writer) -> Result<Option<Repair>> {
    let Some(os) = w.tail.state.open_stream.clone() else {
        return Ok(None);
    };
    let (assembler, tags) = replay(w.conn, w.num(), &os)?;
    let uuid = repair_uuid(w.session_id(), &["stream".into(), os.id.clone()]);
    let mut error = Map::new();
    error.insert("message".into(), Value::String(INTERRUPTED.into()));
    error.insert("code".into(), Value::String("INTERRUPTED".into()));
    let mut tags = tags;
    let model = tags.shift_remove("model");
    let mut env = Map::new();
    env.insert("uuid".into(), Value::String(uuid.clone()));
    env.extend(error_record(&assembler, error));
    if let (Some(model), Some(Value::Object(m))) = (model, env.get_mut("message")) {
        m.entry("model").or_insert(model);
    }
    env.insert("streamId".into(), Value::String(os.id.clone()));
    env.extend(tags);
    env.insert("repair".into(), json!({"kind": "close_stream"}));
    if let Some(m) = env.shift_remove("message") {
        env.insert("message".into(), m);
    }
    let kept = assembler.salvage().len();
    w.insert(Draft::from_envelope(env)?)?;
    Ok(Some(close_repair(&os, uuid, kept)))
}
