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
