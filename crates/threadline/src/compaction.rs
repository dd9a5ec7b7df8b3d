//! Compaction: choosing what to summarise (whole turns, never a tool call apart from its result,
//! the last turns kept), and the compaction record that moves the start of the context. Nothing
//! is deleted: the history stays, and only a committed compaction moves the starting point.

use rusqlite::Connection;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::context::{self, estimate_chars};
use crate::envelope::Draft;
use crate::error::{Error, Result};
use crate::session::{Session, ViewRecord};
use crate::state::CompactionPoint;

/// The turns kept by default, newest first.
pub const KEEP_TURNS: usize = 2;

/// The compaction point a record sets, if it is one: Threadline's `compaction` record, or Claude
/// Code's `compact_boundary` (the summary is the user message right after it).
pub(crate) fn point_of(
    conn: &Connection,
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
        Some(uuid) => Session::seq_of(conn, num, uuid)?.ok_or_else(|| {
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

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionPlan {
    /// the records to summarise, oldest first: `{uuid, seq, message}`
    pub records: Vec<Value>,
    /// a plain-text rendering of them, to hand to a summarising model
    pub text: String,
    /// the first record kept (None: nothing to summarise)
    pub first_kept_uuid: Option<String>,
    pub tokens_before: u64,
    pub tokens_to_summarise: u64,
    pub tokens_kept: u64,
    pub turns_summarised: usize,
    pub turns_kept: usize,
}

#[derive(Debug, Clone, Default)]
pub struct CompactOptions {
    pub summary: String,
    pub first_kept_uuid: Option<String>,
    pub keep_turns: Option<usize>,
    pub trigger: Option<String>,
}

impl Session {
    /// What to summarise so that what is kept fits `target_tokens`, keeping at least the last
    /// `keep_turns` turns whole.
    pub fn compaction_plan(
        &self,
        target_tokens: u64,
        keep_turns: Option<usize>,
    ) -> Result<CompactionPlan> {
        let run = || {
            let conn = self.conn()?;
            let (view, ratio) = context::current_view(&conn, self)?;
            Ok(plan(
                &view,
                ratio,
                target_tokens,
                keep_turns.unwrap_or(KEEP_TURNS),
            ))
        };
        run().map_err(|e: Error| e.during("compactionPlan"))
    }

    /// Appends a compaction record (summary, first kept record, tokens before and after, trigger)
    /// in one transaction; the context starts there from now on.
    pub fn compact(&self, options: CompactOptions) -> Result<Map<String, Value>> {
        let run = || {
            if options.summary.trim().is_empty() {
                return Err(Error::InvalidInput("summary: must not be empty".into()));
            }
            if let Some(t) = options
                .trigger
                .as_deref()
                .filter(|t| !["auto", "manual"].contains(t))
            {
                return Err(Error::InvalidInput(format!(
                    "trigger: expected 'auto' or 'manual', got '{t}'"
                )));
            }
            let (env, _) = {
                let conn = self.conn()?;
                let (view, ratio) = context::current_view(&conn, self)?;
                let before = view.iter().map(|r| estimate_chars(&r.message)).sum::<u64>();
                let first_kept = match &options.first_kept_uuid {
                    Some(u) => {
                        if !view.iter().any(|r| &r.uuid == u) {
                            return Err(Error::InvalidInput(format!(
                                "firstKeptUuid: '{u}' is not a message of the current context"
                            )));
                        }
                        Some(u.clone())
                    }
                    None => {
                        plan(&view, ratio, 0, options.keep_turns.unwrap_or(KEEP_TURNS))
                            .first_kept_uuid
                    }
                };
                let kept_chars: u64 = match &first_kept {
                    Some(u) => view
                        .iter()
                        .skip_while(|r| &r.uuid != u)
                        .map(|r| estimate_chars(&r.message))
                        .sum(),
                    None => 0,
                };
                let after =
                    ((kept_chars + options.summary.len() as u64) as f64 * ratio).ceil() as u64;
                let mut c = Map::new();
                c.insert("summary".into(), Value::String(options.summary.clone()));
                c.insert(
                    "firstKeptUuid".into(),
                    first_kept.map_or(Value::Null, Value::String),
                );
                c.insert(
                    "tokensBefore".into(),
                    json!((before as f64 * ratio).ceil() as u64),
                );
                c.insert("tokensAfter".into(), json!(after));
                c.insert(
                    "trigger".into(),
                    Value::String(options.trigger.clone().unwrap_or_else(|| "manual".into())),
                );
                let mut env = Map::new();
                env.insert("type".into(), Value::String("compaction".into()));
                env.insert("compaction".into(), Value::Object(c));
                (env, ())
            };
            let mut out = self.write(vec![Draft::from_envelope(env)?])?;
            Ok(out.pop().unwrap_or_default())
        };
        run().map_err(|e: Error| e.during("compact"))
    }
}

/// Whole turns from the oldest, until what is left fits; the last `keep` turns always stay.
fn plan(view: &[ViewRecord], ratio: f64, target_tokens: u64, keep: usize) -> CompactionPlan {
    let turns = context::turn_starts(view);
    let tokens = |rs: &[ViewRecord]| -> u64 {
        (rs.iter().map(|r| estimate_chars(&r.message)).sum::<u64>() as f64 * ratio).ceil() as u64
    };
    let before = tokens(view);
    let keep = keep.max(1).min(turns.len());
    // Cut at a turn start: everything before it is summarised.
    let mut cut = 0;
    for (i, &start) in turns.iter().enumerate() {
        if i + keep > turns.len() {
            break;
        }
        cut = start;
        if tokens(&view[start..]) <= target_tokens {
            break;
        }
    }
    let summarised = &view[..cut];
    let text = summarised
        .iter()
        .map(render)
        .collect::<Vec<_>>()
        .join("\n\n");
    CompactionPlan {
        records: summarised
            .iter()
            .map(|r| json!({"uuid": r.uuid, "seq": r.seq, "message": r.message}))
            .collect(),
        text,
        first_kept_uuid: (cut > 0)
            .then(|| view.get(cut).map(|r| r.uuid.clone()))
            .flatten(),
        tokens_before: before,
        tokens_to_summarise: tokens(summarised),
        tokens_kept: tokens(&view[cut..]),
        turns_summarised: turns.iter().filter(|&&s| s < cut).count(),
        turns_kept: turns.iter().filter(|&&s| s >= cut).count(),
    }
}

/// A message as plain text for a summarising model: `User:` / `Assistant:` lines, tool calls and
/// results shortened to what a summary needs.
fn render(r: &ViewRecord) -> String {
    let role = match r.message.get("role").and_then(Value::as_str) {
        Some("assistant") => "Assistant",
        _ => "User",
    };
    let blocks = r
        .message
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => b.get("text").and_then(Value::as_str).map(str::to_string),
            Some("tool_use") => Some(format!(
                "[tool call {} {}]",
                b.get("name").and_then(Value::as_str).unwrap_or_default(),
                short(
                    &b.get("input").map(Value::to_string).unwrap_or_default(),
                    500
                )
            )),
            Some("tool_result") => Some(format!(
                "[tool result{}: {}]",
                if b.get("is_error") == Some(&Value::Bool(true)) {
                    " (error)"
                } else {
                    ""
                },
                short(&context::result_text(b), 1000)
            )),
            Some("thinking" | "redacted_thinking") => None,
            Some(other) => Some(format!("[{other}]")),
            None => None,
        })
        .collect();
    format!("{role}: {}", parts.join("\n"))
}

fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}... ({} characters in all)", s.chars().count())
}
