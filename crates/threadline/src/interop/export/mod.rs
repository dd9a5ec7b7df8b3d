//! Export: a session written out as Claude Code JSONL, Markdown, one self-contained HTML page, or
//! the snapshot.

pub(crate) mod claude_code;
mod html;
mod markdown;

use serde::Deserialize;
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

/// How `export` writes a transcript view (Markdown, HTML).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportOptions {
    /// Markdown: events (progress, hooks, snapshots, ...) too, one line each; without it only
    /// the conversation (and compaction summaries) is written
    #[serde(default)]
    pub events: bool,
}

/// A count as the views write it: `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
        thousands(u.input_tokens),
        thousands(u.output_tokens),
        thousands(u.cache_read_input_tokens),
        thousands(u.cache_creation_input_tokens)
    )
}

/// The turns by the uuid of the record each starts at.
/// Claude Code's compaction summary: the user message after a compact boundary that holds the
/// summary (hundreds of lines), folded by both views.
fn is_compact_summary(r: &Value) -> bool {
    r.get("isCompactSummary") == Some(&Value::Bool(true))
}

fn turn_starts(turns: &[Turn]) -> std::collections::HashMap<&str, &Turn> {
    turns.iter().map(|t| (t.start_uuid.as_str(), t)).collect()
}

pub fn export(session: &Session, format: ExportFormat) -> Result<String> {
    export_with(session, format, &ExportOptions::default())
}

pub fn export_with(
    session: &Session,
    format: ExportFormat,
    options: &ExportOptions,
) -> Result<String> {
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
            ExportFormat::Markdown => markdown::render(&t, options),
            ExportFormat::Html => html::render(&t),
            ExportFormat::Snapshot => unreachable!(),
        })
    };
    run().map_err(|e: Error| e.during("export"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_are_separated_by_commas() {
        let shown: Vec<String> = [0, 999, 1000, 12_345, 1_234_567, u64::MAX]
            .into_iter()
            .map(super::thousands)
            .collect();
        assert_eq!(
            shown,
            [
                "0",
                "999",
                "1,000",
                "12,345",
                "1,234,567",
                "18,446,744,073,709,551,615"
            ]
        );
    }
}
