//! Export: a session written out as Claude Code JSONL, Markdown, one self-contained HTML page, or
//! the snapshot.

mod claude_code;
mod html;
mod markdown;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::options::SessionInfo;
use crate::model::state::Turn;
use crate::session::Session;

/// What `session.export(format)` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    ClaudeCode,
    Markdown,
    Html,
    Snapshot,
}

impl ExportFormat {
    pub fn parse(s: &str) -> Result<ExportFormat> {
        match s {
            "claude-code" => Ok(ExportFormat::ClaudeCode),
            "markdown" => Ok(ExportFormat::Markdown),
            "html" => Ok(ExportFormat::Html),
            "snapshot" => Ok(ExportFormat::Snapshot),
            other => Err(Error::InvalidInput(format!(
                "format: expected 'claude-code', 'markdown', 'html' or 'snapshot', got '{other}'"
            ))),
        }
    }
}

/// What the text formats are made from: the session's info, every record (envelopes, in seq
/// order, as `session.envelopes()` gives them) and its turns.
pub struct Transcript<'a> {
    pub info: &'a SessionInfo,
    pub records: &'a [Value],
    pub turns: &'a [Turn],
}

/// What an event is, in a few words: its type and its subtype (Claude Code's `subtype`, the
/// `type` of its `data`, or the record a rewind went back to), and the summary when it is a
/// compaction.
struct EventLabel<'a> {
    ty: &'a str,
    sub: Option<&'a str>,
    summary: Option<&'a str>,
}

fn event_label(r: &Value) -> EventLabel<'_> {
    EventLabel {
        ty: r.get("type").and_then(Value::as_str).unwrap_or("event"),
        sub: r
            .get("subtype")
            .or_else(|| r.get("data").and_then(|d| d.get("type")))
            .or_else(|| r.get("rewind").and_then(|w| w.get("toUuid")))
            .and_then(Value::as_str),
        summary: r
            .get("compaction")
            .and_then(|c| c.get("summary"))
            .and_then(Value::as_str),
    }
}

/// A turn's tokens as both text exports say them.
fn turn_tokens(turn: &Turn) -> String {
    let u = &turn.usage;
    format!(
        "{} in · {} out · {} cache read · {} cache write",
        u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens
    )
}

/// The turns by the uuid of the record each starts at.
fn turn_starts(turns: &[Turn]) -> std::collections::HashMap<&str, &Turn> {
    turns.iter().map(|t| (t.start_uuid.as_str(), t)).collect()
}

pub fn export(session: &Session, format: ExportFormat) -> Result<String> {
    let run = || {
        if format == ExportFormat::Snapshot {
            return session.snapshot();
        }
        let info = session.info()?;
        let records = session.envelopes(0, None)?;
        let turns = session.turns()?;
        let t = Transcript {
            info: &info,
            records: &records,
            turns: &turns,
        };
        Ok(match format {
            ExportFormat::ClaudeCode => claude_code::render(&t),
            ExportFormat::Markdown => markdown::render(&t),
            ExportFormat::Html => html::render(&t),
            ExportFormat::Snapshot => unreachable!(),
        })
    };
    run().map_err(|e: Error| e.during("export"))
}
