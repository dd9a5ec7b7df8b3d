//! Compaction points: where a compaction record puts the start of the context (Threadline's
//! `compaction` record, or Claude Code's `compact_boundary` followed by its summary), as the
//! session's state keeps it and reads of the context need it.

use crate::storage::batch::Probe;
use crate::storage::db::Db;
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::model::state::{CompactionPoint, State};
use crate::storage::records::ViewRecord;

const SUMMARY_PREAMBLE: &str =
    "This session continues from an earlier conversation, summarised here:\n\n";

/// Where the current context starts.
#[derive(Default)]
pub(crate) struct Start {
    /// the first record after the latest compaction (0 without one)
    pub seq: u64,
    /// the summary, as the user message that goes first. Claude Code's boundary has none of its
    /// own: its summary is the user message right after it.
    pub summary: Option<ViewRecord>,
    /// tokens per character as calibrated before the compaction, for the requests after it
    /// until a response reports usage again
    pub tokens_per_char: Option<f64>,
}

pub(crate) fn start(conn: &Db, num: i64, state: &State) -> Result<Start> {
    let Some(cp) = &state.compaction else {
        return Ok(Start::default());
    };
    let record = crate::storage::records::record(conn, num, cp.seq)?.unwrap_or_default();
    let compaction = record.get("compaction");
    let summary = compaction
        .and_then(|c| c.get("summary"))
        .and_then(Value::as_str)
        .map(|summary| ViewRecord {
            // It stands where the kept records start (the compaction record itself comes after
            // them in the log), so ranges of the context stay in order.
            seq: cp.kept,
            index: 0,
            uuid: record
                .get("uuid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            provider: None,
            message: json!({"role": "user", "content": [{"type": "text", "text": format!("{SUMMARY_PREAMBLE}{summary}")}]}),
        });
    Ok(Start {
        seq: cp.kept,
        summary,
        tokens_per_char: compaction
            .and_then(|c| c.get("tokensPerChar"))
            .and_then(Value::as_f64),
    })
}

/// Where the current context starts for a request to `anthropic` or not: an Anthropic request
/// starts at the latest message holding a `compaction` block when that is later than the latest
/// compaction's start (the server ignores what lies before the block, a summary too).
pub(crate) fn start_for(conn: &Db, num: i64, state: &State, anthropic: bool) -> Result<Start> {
    let normal = start(conn, num, state)?;
    match state.compaction_block {
        Some(block) if anthropic && block >= normal.seq => Ok(Start {
            seq: block,
            summary: None,
            tokens_per_char: normal.tokens_per_char,
        }),
        _ => Ok(normal),
    }
}

/// The compaction point a record sets, if it is one: Threadline's `compaction` record, or Claude
/// Code's `compact_boundary` (the summary is the user message right after it).
pub(crate) fn point_of(
    conn: &Db,
    num: i64,
    env: &Map<String, Value>,
    seq: u64,
) -> Result<Option<CompactionPoint>> {
    let ty = env.get("type").and_then(Value::as_str);
    if ty == Some("system")
        && env.get("subtype").and_then(Value::as_str) == Some("compact_boundary")
    {
        return Ok(Some(CompactionPoint {
            seq,
            kept: seq + 1,
            tokens_after: None,
        }));
    }
    if ty != Some("compaction") {
        return Ok(None);
    }
    let Some(c) = env.get("compaction").and_then(Value::as_object) else {
        return Ok(None);
    };
    let kept = match c.get("firstKeptUuid").and_then(Value::as_str) {
        Some(uuid) => conn
            .read_unaffected(num, Probe::Uuid(uuid), || {
                crate::storage::records::seq_of(conn, num, uuid)
            })?
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "compaction.firstKeptUuid: no record '{uuid}' in this session"
                ))
            })?,
        None => seq + 1,
    };
    let tokens_after = c.get("tokensAfter").and_then(Value::as_u64);
    Ok(Some(CompactionPoint {
        seq,
        kept,
        tokens_after,
    }))
}
