//! Recovery: the tool-call journal's session API, and the repairs that make a session left
//! half-done by a crash valid to send again. Every repair is a record of its own (nothing is
//! deleted), with a uuid derived from what it repairs, so running recovery twice writes nothing
//! the second time.

pub(crate) mod response;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::error::{Error, Path, Result};
use crate::model::envelope::Draft;
use crate::model::message::check_result_block;
use crate::session::{Session, Tail};
use crate::storage::journal::{self, CallState, Entry};

/// What recovery does with a call that started and has no recorded outcome, when it may not be
/// re-run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnknownOutcome {
    /// an is_error tool_result saying the outcome is unknown and side effects may have happened
    #[default]
    Mark,
    /// report it and write nothing
    Leave,
}

#[derive(Debug, Clone, Default)]
pub struct RecoverOptions {
    pub unknown_outcome: UnknownOutcome,
    /// calls re-run by the caller (safe ones) whose real result was recorded with
    /// `record_tool_outcome` just before: reported as replayed
    pub replayed: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairKind {
    /// the journal holds the call's result: it goes into the history
    Backfill,
    /// the call was re-run and its real result goes into the history
    Replayed,
    /// the call never started: an is_error result says it was not run
    NeverStarted,
    /// the call started and its outcome is unknown: an is_error result says so
    UnknownOutcome,
    /// started, outcome unknown, left as it is (`unknownOutcome: 'leave'`): nothing written
    Left,
    /// a call of an earlier response, answered by nothing, with later messages after it: a
    /// result appended now would not be next to its call, so nothing is written
    Stranded,
    /// a response cut off mid-stream becomes an interrupted assistant record
    CloseStream,
}

/// One repair: what recovery does (or did) and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repair {
    pub kind: RepairKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// the journal state of the call
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<CallState>,
    pub reason: String,
    /// the record the repair writes (absent when it writes nothing)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_uuid: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryReport {
    pub repairs: Vec<Repair>,
    /// records written by this run
    pub records_written: u64,
    /// true when nothing needed repairing
    pub clean: bool,
}

const NEVER_STARTED: &str =
    "Not run: the session was interrupted before this tool call started. Nothing was executed.";
const UNKNOWN: &str = "Interrupted: this tool call started but the session ended before its \
outcome was recorded. The outcome is unknown and side effects may have happened; check the \
current state before retrying.";

impl Session {
    /// Marks a call started, right before its side effect. NOT_FOUND for an unknown call.
    pub fn tool_call_started(&self, id: &str) -> Result<()> {
        self.transact(|w| journal::start(w.conn, w.num(), id, w.now.ms))
            .map_err(|e| e.during("toolCallStarted"))
    }

    /// Records a call's outcome in the journal only (`{content, is_error?, toolUseResult?,
    /// denied?}`): the tool ran, even if its tool_result message is never appended.
    pub fn record_tool_outcome(&self, id: &str, result: Value) -> Result<()> {
        let run = || {
            let (outcome, state) = check_outcome(id, result)?;
            self.transact(|w| {
                journal::record_outcome(w.conn, w.num(), id, &outcome, state, w.now.ms)
            })
        };
        run().map_err(|e| e.during("recordToolOutcome"))
    }

    /// Every tool call with its lifecycle state, in the order they were made.
    pub fn tool_calls(&self, state: Option<CallState>) -> Result<Vec<Value>> {
        let run = || {
            let conn = self.conn()?;
            let entries = journal::list(&conn, self.num)?;
            let mut records = RecordCache::default();
            let mut out = Vec::new();
            for e in entries
                .iter()
                .filter(|e| state.is_none_or(|s| e.state == s))
            {
                let call = records.get(&conn, self.num, e.call_seq)?;
                out.push(call_json(e, call.as_ref()));
            }
            Ok(out)
        };
        run().map_err(|e: Error| e.during("toolCalls"))
    }

    /// The result of a finished call (recorded outcome or tool_result in the history), else None.
    pub fn cached_tool_result(&self, id: &str) -> Result<Option<Value>> {
        let run = || {
            let conn = self.conn()?;
            let Some(e) = journal::get(&conn, self.num, id)? else {
                return Ok(None);
            };
            if let Some(o) = &e.outcome {
                return Ok(Some(outcome_block(id, o)));
            }
            let Some(seq) = e.result_seq else {
                return Ok(None);
            };
            let record = crate::storage::records::record(&conn, self.num, seq)?;
            Ok(record.and_then(|r| result_block_in(&r, id)))
        };
        run().map_err(|e: Error| e.during("cachedToolResult"))
    }

    /// What `recover` would do with the default options; writes nothing.
    pub fn pending_repairs(&self) -> Result<Vec<Repair>> {
        let run = || {
            let conn = self.conn()?;
            let tail = self.read_tail(&conn)?;
            let stream = response::salvaged_calls(&conn, self.num, &tail)?;
            let (repairs, _) = plan(&conn, self, &tail, &stream, &RecoverOptions::default())?;
            Ok(repairs)
        };
        run().map_err(|e: Error| e.during("pendingRepairs"))
    }

    /// Closes a stream cut off mid-way, then answers every unanswered call of the latest response
    /// as the journal allows, in one transaction.
    pub fn recover(&self, options: &RecoverOptions) -> Result<RecoveryReport> {
        let run = || {
            self.transact(|w| {
                let mut repairs = Vec::new();
                let mut written = 0;
                if let Some(r) = response::close_interrupted(w)? {
                    repairs.push(r);
                    written += 1;
                }
                let tail = w.tail.clone();
                let (mut planned, draft) = plan(w.conn, self, &tail, &[], options)?;
                if let Some(d) = draft {
                    w.insert(d)?;
                    written += 1;
                }
                repairs.append(&mut planned);
                Ok(RecoveryReport {
                    clean: repairs.is_empty(),
                    repairs,
                    records_written: written,
                })
            })
        };
        run().map_err(|e: Error| e.during("recover"))
    }
}

/// The repairs for unanswered calls, and the record that answers those that can be answered.
/// `streamed`: calls that closing an interrupted stream would add (for the plan only).
fn plan(
    conn: &crate::storage::db::Db,
    session: &Session,
    tail: &Tail,
    streamed: &[Repair],
    options: &RecoverOptions,
) -> Result<(Vec<Repair>, Option<Draft>)> {
    let mut repairs: Vec<Repair> = streamed.to_vec();
    let mut blocks = Vec::new();
    let mut answered = Vec::new();
    let mut single_tool_use_result = None;
    for e in journal::unanswered(conn, session.num)? {
        let base = Repair {
            kind: RepairKind::Stranded,
            tool_use_id: Some(e.id.clone()),
            name: Some(e.name.clone()),
            state: Some(e.state),
            reason: String::new(),
            record_uuid: None,
        };
        if !tail.state.pending.contains(&e.id) {
            repairs.push(Repair {
                reason: format!(
                    "tool call '{}' of an earlier response has no result and later messages follow it; \
                     a result appended now would not be next to its call",
                    e.id
                ),
                ..base
            });
            continue;
        }
        let (kind, reason, block) = decide(&e, options);
        if let Some(b) = block {
            if let Some(o) = &e.outcome {
                single_tool_use_result = o.get("toolUseResult").cloned();
            }
            blocks.push(b);
            answered.push(e.id.clone());
        }
        repairs.push(Repair {
            kind,
            reason,
            ..base
        });
    }
    if repairs.iter().any(|r| r.kind == RepairKind::Left) {
        // The results of one response go in one message: with a call left unanswered, the
        // others wait too, or the left one could never be answered validly later.
        for r in repairs.iter_mut().filter(|r| {
            r.tool_use_id
                .as_ref()
                .is_some_and(|id| answered.contains(id))
        }) {
            r.reason.push_str(
                "; not written yet: another call of the same response is left unanswered",
            );
        }
        return Ok((repairs, None));
    }
    if blocks.is_empty() {
        return Ok((repairs, None));
    }
    let uuid = repair_uuid(session.id(), &answered);
    for r in repairs.iter_mut() {
        if r.tool_use_id
            .as_ref()
            .is_some_and(|id| answered.contains(id))
        {
            r.record_uuid = Some(uuid.clone());
        }
    }
    let calls: Vec<Value> = repairs
        .iter()
        .filter(|r| r.record_uuid.as_ref() == Some(&uuid))
        .map(|r| json!({"toolUseId": r.tool_use_id, "kind": r.kind}))
        .collect();
    let mut env = Map::new();
    env.insert("uuid".into(), Value::String(uuid));
    env.insert("type".into(), Value::String("tool_result".into()));
    env.insert(
        "repair".into(),
        json!({"kind": "tool_results", "calls": calls}),
    );
    if blocks.len() == 1 {
        if let Some(t) = single_tool_use_result {
            env.insert("toolUseResult".into(), t);
        }
    }
    env.insert("message".into(), json!({"role": "user", "content": blocks}));
    Ok((repairs, Some(Draft::from_envelope(env)?)))
}

/// What to do with one unanswered call of the latest response.
fn decide(e: &Entry, options: &RecoverOptions) -> (RepairKind, String, Option<Value>) {
    if let Some(o) = &e.outcome {
        let replayed = options.replayed.contains(&e.id);
        let kind = if replayed {
            RepairKind::Replayed
        } else {
            RepairKind::Backfill
        };
        let reason = if replayed {
            "started before the interruption; safe to re-run, so it was run again and its real result recorded"
        } else {
            "the tool finished and its outcome was recorded, but its tool_result message was never appended"
        };
        return (
            kind,
            format!("{reason} ({})", e.state.as_str()),
            Some(outcome_block(&e.id, o)),
        );
    }
    match (e.state, options.unknown_outcome) {
        (CallState::Started, UnknownOutcome::Mark) => (
            RepairKind::UnknownOutcome,
            "interrupted: outcome unknown, side effects possible".into(),
            Some(error_block(&e.id, UNKNOWN)),
        ),
        (CallState::Started, UnknownOutcome::Leave) => (
            RepairKind::Left,
            "interrupted: outcome unknown, side effects possible; left unanswered (unknownOutcome: 'leave')".into(),
            None,
        ),
        _ => (
            RepairKind::NeverStarted,
            "never started: the session ended before the tool was run".into(),
            Some(error_block(&e.id, NEVER_STARTED)),
        ),
    }
}

fn error_block(id: &str, text: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": true})
}

/// The tool_result block of a recorded outcome, its fields in the API's order.
fn outcome_block(id: &str, o: &Map<String, Value>) -> Value {
    let mut b = Map::new();
    b.insert("type".into(), Value::String("tool_result".into()));
    b.insert("tool_use_id".into(), Value::String(id.into()));
    if let Some(c) = o.get("content") {
        b.insert("content".into(), c.clone());
    }
    match o.get("is_error") {
        Some(e) => {
            b.insert("is_error".into(), e.clone());
        }
        // A refused call did not succeed: the model must not read it as a result.
        None if o.get("denied") == Some(&Value::Bool(true)) => {
            b.insert("is_error".into(), Value::Bool(true));
        }
        None => {}
    }
    Value::Object(b)
}

/// Validates what `recordToolOutcome` is given; returns what the journal keeps and the state.
fn check_outcome(id: &str, result: Value) -> Result<(Map<String, Value>, CallState)> {
    let Value::Object(o) = result else {
        return Err(Error::InvalidInput("result: expected an object".into()));
    };
    let root = Path::root().key("result");
    for key in o.keys() {
        if !["content", "is_error", "toolUseResult", "denied"].contains(&key.as_str()) {
            return Err(Error::invalid(
                &root.key(key),
                "unknown field (expected content, is_error, toolUseResult, denied)",
            ));
        }
    }
    if !o.contains_key("content") {
        return Err(Error::invalid(&root.key("content"), "required"));
    }
    crate::model::message::opt_bool(&o, "denied", &root)?;
    crate::model::message::opt_object(&o, "toolUseResult", &root)?;
    let fact = check_result_block(&outcome_block(id, &o), &root)?;
    let state = if o.get("denied") == Some(&Value::Bool(true)) {
        CallState::Denied
    } else if fact.is_error {
        CallState::Failed
    } else {
        CallState::Completed
    };
    Ok((o, state))
}

/// The result block answering `id` in a stored record (a user tool_result, or a server or MCP
/// result inside an assistant message).
fn result_block_in(record: &Map<String, Value>, id: &str) -> Option<Value> {
    let content = record.get("message")?.get("content")?.as_array()?;
    content
        .iter()
        .find(|b| {
            let ty = b.get("type").and_then(Value::as_str).unwrap_or_default();
            ty.ends_with("tool_result") && b.get("tool_use_id").and_then(Value::as_str) == Some(id)
        })
        .cloned()
}

fn call_json(e: &Entry, record: Option<&Map<String, Value>>) -> Value {
    let block = record
        .and_then(|r| r.get("message"))
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|b| b.get("id").and_then(Value::as_str) == Some(&e.id))
        });
    let mut o = Map::new();
    o.insert("id".into(), Value::String(e.id.clone()));
    o.insert("kind".into(), Value::String(e.kind.clone()));
    o.insert("name".into(), Value::String(e.name.clone()));
    o.insert(
        "input".into(),
        block
            .and_then(|b| b.get("input"))
            .cloned()
            .unwrap_or(Value::Null),
    );
    o.insert("state".into(), Value::String(e.state.as_str().into()));
    o.insert(
        "callUuid".into(),
        record
            .and_then(|r| r.get("uuid"))
            .cloned()
            .unwrap_or(Value::Null),
    );
    o.insert("callSeq".into(), Value::from(e.call_seq));
    o.insert(
        "requestedAt".into(),
        Value::String(crate::model::clock::iso_from_ms(e.requested_ms)),
    );
    let opt_time = |ms: Option<i64>| {
        ms.map_or(Value::Null, |m| {
            Value::String(crate::model::clock::iso_from_ms(m))
        })
    };
    o.insert("startedAt".into(), opt_time(e.started_ms));
    o.insert("endedAt".into(), opt_time(e.ended_ms));
    o.insert(
        "resultSeq".into(),
        e.result_seq.map_or(Value::Null, Value::from),
    );
    Value::Object(o)
}

/// Records read once each while listing calls (a response's calls share one record).
#[derive(Default)]
struct RecordCache {
    seq: Option<u64>,
    record: Option<Map<String, Value>>,
}

impl RecordCache {
    fn get(
        &mut self,
        conn: &crate::storage::db::Db,
        num: i64,
        seq: u64,
    ) -> Result<Option<Map<String, Value>>> {
        if self.seq != Some(seq) {
            self.record = crate::storage::records::record(conn, num, seq)?;
            self.seq = Some(seq);
        }
        Ok(self.record.clone())
    }
}

/// A uuid derived from what a repair answers: the same repair always has the same uuid.
pub(crate) fn repair_uuid(session_id: &str, parts: &[String]) -> String {
    let mut bytes: Vec<&[u8]> = vec![b"threadline-repair\0", session_id.as_bytes()];
    for p in parts {
        bytes.push(b"\0");
        bytes.push(p.as_bytes());
    }
    crate::model::derived_uuid::from_parts(&bytes)
}
