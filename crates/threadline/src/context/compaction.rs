//! Compaction: choosing what to summarise (whole turns, never a tool call apart from its result,
//! the last turns kept), and the compaction record that moves the start of the context. Nothing
//! is deleted: the history stays, and only a committed compaction moves the starting point.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::context::{self, estimate_chars};
use crate::error::{Error, Result};
use crate::model::envelope::Draft;
use crate::session::{Session, ViewRecord};

/// The turns kept by default, newest first.
pub const KEEP_TURNS: usize = 2;

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
    /// records to summarise left out of `records` and `text`, the oldest: a plan hands over at
    /// most `SUMMARY_CAP` estimated tokens to summarise (0 but for a context far larger than
    /// any model's window)
    pub records_omitted: u64,
}

/// The most a compaction plan hands over to summarise, in estimated tokens: more than any
/// model's context window holds. Of a longer part to summarise, the newest whole turns up to it
/// are given (`records_omitted` counts the rest): a plan of a context of 1,000,000 records is
/// then made from its end without reading all of it.
pub const SUMMARY_CAP: u64 = 1_000_000;

thread_local! {
    static CAP: std::cell::Cell<u64> = const { std::cell::Cell::new(SUMMARY_CAP) };
}

/// Sets the summary cap on this thread (for tests of long contexts made small).
pub fn set_summary_cap(tokens: Option<u64>) {
    CAP.with(|c| c.set(tokens.unwrap_or(SUMMARY_CAP)));
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
        let keep = keep_turns.unwrap_or(KEEP_TURNS);
        let run = || {
            let conn = self.conn()?;
            if !context::reads_whole() {
                if let Some(p) = plan_from_end(&conn, self, target_tokens, keep)? {
                    return Ok(p);
                }
            }
            let (view, ratio) = context::current_view(&conn, self)?;
            drop(conn);
            let mut p = plan(&view, ratio, target_tokens, keep);
            // The records summarised, moved (not copied) out of the view.
            p.records = view
                .into_iter()
                .skip(p.records_omitted as usize)
                .take(p.records.len())
                .map(|r| json!({"uuid": r.uuid, "seq": r.seq, "message": r.message}))
                .collect();
            Ok(p)
        };
        run().map_err(|e: Error| e.during("compactionPlan"))
    }

    /// Appends a compaction record (summary, first kept record, tokens before and after, trigger)
    /// in one transaction; the context starts there from now on. `InvalidInput` (nothing written)
    /// when there is nothing to summarise (the context has no more than `keep_turns` turns, or
    /// `first_kept_uuid` starts it) or when `first_kept_uuid` would part a tool call from its
    /// result.
    pub fn compact(&self, options: CompactOptions) -> Result<Map<String, Value>> {
        let run = || {
            if options.summary.trim().is_empty() {
                return Err(Error::InvalidInput(
                    "options.summary: must not be empty".into(),
                ));
            }
            if let Some(t) = options
                .trigger
                .as_deref()
                .filter(|t| !["auto", "manual"].contains(t))
            {
                return Err(Error::InvalidInput(format!(
                    "options.trigger: expected 'auto' or 'manual', got '{t}'"
                )));
            }
            let (env, _) = {
                let conn = self.conn()?;
                let (view, ratio, calibrated) = context::view_and_ratio(&conn, self)?;
                let before = view.iter().map(|r| estimate_chars(&r.message)).sum::<u64>();
                let first_kept = match &options.first_kept_uuid {
                    Some(u) => {
                        let summary_seq = self.read_tail(&conn)?.state.compaction.map(|c| c.seq);
                        let at = view.iter().position(|r| &r.uuid == u).ok_or_else(|| {
                            Error::InvalidInput(format!(
                                "options.firstKeptUuid: '{u}' is not a message of the current context"
                            ))
                        })?;
                        // The summary of the previous compaction is not a record that can be
                        // kept (keeping from it would lose what that compaction kept).
                        if at == 0 || Some(view[at].seq) == summary_seq {
                            return Err(Error::InvalidInput(format!(
                                "options.firstKeptUuid: '{u}' starts the current context: nothing before it to summarise"
                            )));
                        }
                        if let Some((_, _, id)) = call_spans(&view)
                            .into_iter()
                            .find(|&(f, t, _)| f <= at && at <= t)
                        {
                            return Err(Error::InvalidInput(format!(
                                "options.firstKeptUuid: '{u}' would part tool call '{id}' from its result (keep from a turn start: compactionPlan gives one)"
                            )));
                        }
                        u.clone()
                    }
                    None => {
                        let keep = options.keep_turns.unwrap_or(KEEP_TURNS);
                        plan(&view, ratio, 0, keep).first_kept_uuid.ok_or_else(|| {
                            Error::InvalidInput(format!(
                                "nothing to summarise: the context has {} turn(s) and options.keepTurns keeps the last {}",
                                context::turn_starts(&view).len(),
                                keep.max(1)
                            ))
                        })?
                    }
                };
                let kept_chars: u64 = view
                    .iter()
                    .skip_while(|r| r.uuid != first_kept)
                    .map(|r| estimate_chars(&r.message))
                    .sum();
                let after =
                    ((kept_chars + options.summary.len() as u64) as f64 * ratio).ceil() as u64;
                let mut c = Map::new();
                c.insert("summary".into(), Value::String(options.summary.clone()));
                c.insert("firstKeptUuid".into(), Value::String(first_kept));
                c.insert(
                    "tokensBefore".into(),
                    json!((before as f64 * ratio).ceil() as u64),
                );
                c.insert("tokensAfter".into(), json!(after));
                if calibrated {
                    // The requests right after this one have no usage of their own to go by.
                    c.insert("tokensPerChar".into(), json!(ratio));
                }
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
/// Linear in the view: each message's size is estimated once, and what is left after a cut is a
/// suffix sum, not a re-sum per turn.
fn plan(view: &[ViewRecord], ratio: f64, target_tokens: u64, keep: usize) -> CompactionPlan {
    let turns = context::turn_starts(view);
    // chars_from[i]: estimated characters of view[i..]
    let mut chars_from = vec![0u64; view.len() + 1];
    for (i, r) in view.iter().enumerate().rev() {
        chars_from[i] = chars_from[i + 1] + estimate_chars(&r.message);
    }
    let tokens = |chars: u64| -> u64 { (chars as f64 * ratio).ceil() as u64 };
    let before = tokens(chars_from[0]);
    let keep = keep.max(1).min(turns.len());
    let parted = parting(view);
    // Cut at a turn start: everything before it is summarised. Never where a call before the
    // cut has its result after it (a prompt can carry the results of the response before it).
    let mut cut = 0;
    for (i, &start) in turns.iter().enumerate() {
        if i + keep > turns.len() {
            break;
        }
        if parted[start] {
            continue;
        }
        cut = start;
        if tokens(chars_from[start]) <= target_tokens {
            break;
        }
    }
    // The newest whole turns before the cut within the cap (the last one at least).
    let cap = CAP.with(std::cell::Cell::get);
    let before_cut: Vec<usize> = turns.iter().copied().filter(|&t| t < cut).collect();
    let from = before_cut
        .iter()
        .copied()
        .find(|&t| tokens(chars_from[t] - chars_from[cut]) <= cap)
        .or(before_cut.last().copied())
        .unwrap_or(0);
    let summarised = &view[from..cut];
    let mut text = String::new();
    for (i, r) in summarised.iter().enumerate() {
        if i > 0 {
            text.push_str("\n\n");
        }
        text.push_str(&render(r));
    }
    CompactionPlan {
        // Placeholders, one a record: the caller that owns the view moves the messages in.
        records: vec![Value::Null; cut - from],
        text,
        first_kept_uuid: (cut > 0)
            .then(|| view.get(cut).map(|r| r.uuid.clone()))
            .flatten(),
        tokens_before: before,
        tokens_to_summarise: tokens(chars_from[0] - chars_from[cut]),
        tokens_kept: tokens(chars_from[cut]),
        turns_summarised: turns.iter().filter(|&&s| s < cut).count(),
        turns_kept: turns.iter().filter(|&&s| s >= cut).count(),
        records_omitted: from as u64,
    }
}

/// The plan of a long context, from its end: None when its part to summarise is within the cap
/// (or it has fewer turns than it takes to know): then the whole context is read. Read back until
/// the cut falls past the second turn read (from a prompt on: no turn before can be the cut, nor
/// part a call from its result there) and what lies before it holds the cap.
fn plan_from_end(
    conn: &crate::storage::db::Db,
    s: &Session,
    target: u64,
    keep: usize,
) -> Result<Option<CompactionPlan>> {
    let Some(mut back) = context::read_back::ReadBack::new(conn, s)? else {
        return Ok(None);
    };
    let cap = CAP.with(std::cell::Cell::get);
    while back.read_more(conn, s.num)? {
        let (view, chars) = back.view();
        let Some((ratio, _)) = back.ratio(&view, &chars) else {
            continue;
        };
        let Some(first) = view.iter().position(|r| context::is_prompt(&r.message)) else {
            continue;
        };
        // Until what was read holds more than the cap, nothing before a cut can: read on, at
        // once as far as the cap needs at the characters a record has so far.
        let read: u64 = chars[first..].iter().sum();
        if ((read as f64) * ratio) as u64 <= cap.saturating_add(target) {
            let per_record = (read / (view.len() - first).max(1) as u64).max(1);
            // A quarter more: the turns before a cut must be read too.
            let needed = (cap.saturating_add(target) as f64 / ratio) as u64 / per_record * 5 / 4;
            back.read_at_least(needed.saturating_sub((view.len() - first) as u64));
            continue;
        }
        let window: Vec<ViewRecord> = view[first..].iter().map(|&r| r.clone()).collect();
        let p = plan(&window, ratio, target, keep);
        let turns = context::turn_starts(&window);
        let (from, cut) = (
            p.records_omitted as usize,
            p.records_omitted as usize + p.records.len(),
        );
        if turns.len() < 3 || cut <= turns[1] || p.tokens_to_summarise <= cap {
            continue;
        }
        let unread = context::unread_part(
            conn,
            s.num,
            &back.segments,
            &back.start,
            window[0].seq,
            window[0].index,
        )?;
        let read_chars: u64 = chars[first..first + cut].iter().sum();
        // What was not read is estimated at the size of what was.
        let unread_chars = (read_chars / cut as u64) * unread.records;
        let tokens_to_summarise = (((read_chars + unread_chars) as f64) * ratio).ceil() as u64;
        let mut window = window;
        let kept_first = window.get(cut).map(|r| r.uuid.clone());
        let records = window
            .drain(from..cut)
            .map(|r| json!({"uuid": r.uuid, "seq": r.seq, "message": r.message}))
            .collect();
        return Ok(Some(CompactionPlan {
            records,
            text: p.text,
            first_kept_uuid: kept_first,
            tokens_before: tokens_to_summarise + p.tokens_kept,
            tokens_to_summarise,
            tokens_kept: p.tokens_kept,
            turns_summarised: p.turns_summarised + unread.record_turns as usize,
            turns_kept: p.turns_kept,
            records_omitted: from as u64 + unread.records,
        }));
    }
    Ok(None)
}

/// The spans of the view a cut must not fall in: `(from, to, id)` when a cut right before any
/// index in `from..=to` would part tool call `id` (before the cut) from its result (after it).
fn call_spans(view: &[ViewRecord]) -> Vec<(usize, usize, &str)> {
    let mut call_at: HashMap<&str, usize> = HashMap::new();
    let mut spans = Vec::new();
    for (j, r) in view.iter().enumerate() {
        let blocks = r.message.get("content").and_then(Value::as_array);
        for b in blocks.into_iter().flatten() {
            let field = |k: &str| b.get(k).and_then(Value::as_str);
            match field("type") {
                Some("tool_use") => {
                    if let Some(id) = field("id") {
                        call_at.entry(id).or_insert(j);
                    }
                }
                Some("tool_result") => {
                    if let Some(&c) = field("tool_use_id")
                        .and_then(|id| call_at.get(id))
                        .filter(|&&c| c < j)
                    {
                        spans.push((c + 1, j, field("tool_use_id").unwrap_or_default()));
                    }
                }
                _ => {}
            }
        }
    }
    spans
}

/// For each index `i` of the view: whether a cut right before it parts a call from its result.
fn parting(view: &[ViewRecord]) -> Vec<bool> {
    let mut depth = vec![0i64; view.len() + 1];
    for (from, to, _) in call_spans(view) {
        depth[from] += 1;
        depth[to + 1] -= 1;
    }
    let mut open = 0;
    depth
        .iter()
        .take(view.len())
        .map(|d| {
            open += d;
            open > 0
        })
        .collect()
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
        .map_or(&[][..], Vec::as_slice);
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
