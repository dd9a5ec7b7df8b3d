//! Building the next request from a session: from the latest compaction, the messages of the
//! current context, cut to a budget by whole turns (a tool call never apart from its result, the
//! latest prompt always kept), long tool results previewed, thinking kept only where a model may
//! see it again, and the result valid for the provider, always.

pub(crate) mod compaction;
pub(crate) mod read_back;

use std::cell::Cell;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::model::convert::{self, IdMap, Warning};
use crate::model::validate::validate_messages;
use crate::session::{Session, ViewRecord};
use crate::storage::journal;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Target {
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
}

impl Target {
    fn provider(self) -> &'static str {
        match self {
            Target::Anthropic => "anthropic",
            _ => "openai",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reasoning {
    Keep,
    Drop,
    #[default]
    SameModel,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextOptions {
    pub target: Target,
    pub max_tokens: Option<u64>,
    pub max_messages: Option<u64>,
    pub system: Option<Value>,
    pub tool_result_preview_chars: Option<usize>,
    #[serde(default)]
    pub reasoning: Reasoning,
    /// the model the request is for (`same-model` keeps its own thinking only)
    pub model: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    pub from_seq: u64,
    pub to_seq: u64,
    pub messages: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Previewed {
    pub tool_use_id: String,
    pub chars: usize,
    pub shown_chars: usize,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextStats {
    /// the first record of the context: the first kept after the latest compaction, else 0
    pub start_seq: u64,
    pub compacted: bool,
    /// messages sent (after merging a response split over several records)
    pub messages: u64,
    /// records of the context that went in, and the ranges left out by the budget
    pub kept_records: u64,
    pub dropped_records: u64,
    pub dropped: Vec<Dropped>,
    pub kept_turns: u64,
    pub dropped_turns: u64,
    pub estimated_tokens: u64,
    /// false when even the latest turn alone is over the budget (it is sent anyway, whole)
    pub fits: bool,
    /// tokens per character of message JSON used for the estimates
    pub tokens_per_char: f64,
    /// true when that ratio comes from usage the provider reported in this session
    pub calibrated: bool,
    pub previewed: Vec<Previewed>,
    pub dropped_thinking: u64,
    /// tool_use / tool_result blocks left out because their counterpart is not in the context
    pub unpaired: Vec<Value>,
    /// what the target cannot express, as the converter said it (paths into the neutral messages)
    pub warnings: Vec<Warning>,
    /// tool-call ids the target does not accept, mapped: the id sent -> the stored id
    pub id_map: IdMap,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<Value>,
    pub messages: Vec<Value>,
    pub stats: ContextStats,
}

/// Characters per token of message JSON when the session has no usage to calibrate on.
pub const DEFAULT_TOKENS_PER_CHAR: f64 = 0.25;

/// A message, with the records it came from.
struct Msg {
    message: Value,
    first_seq: u64,
    last_seq: u64,
    records: u64,
}

impl Session {
    /// The next request for `options.target`.
    pub fn build_context(&self, options: &ContextOptions) -> Result<Context> {
        let run = || {
            check_system(options.system.as_ref())?;
            let conn = self.conn()?;
            let read = read_context(&conn, self, options)?;
            let mut stats = ContextStats {
                start_seq: read.start_seq,
                compacted: {
                    let state = &self.read_tail(&conn)?.state;
                    state.compaction.is_some()
                        || (options.target == Target::Anthropic && state.compaction_block.is_some())
                },
                tokens_per_char: read.ratio,
                calibrated: read.calibrated,
                ..Default::default()
            };
            drop(conn);
            let ratio = read.ratio;
            let kept = match read.cut {
                // Cut already, on the records read back (the same cut a read of all gives).
                Some((kept, cut_stats)) => {
                    stats = ContextStats {
                        start_seq: stats.start_seq,
                        compacted: stats.compacted,
                        tokens_per_char: stats.tokens_per_char,
                        calibrated: stats.calibrated,
                        ..cut_stats
                    };
                    kept
                }
                None => cut(read.view, options, ratio, &mut stats),
            };
            if let Some(unread) = read.unread {
                unread.count_in(&mut stats);
            }
            // What is sent, counted after the results of dropped calls left it.
            stats.estimated_tokens = estimate(&kept, options, ratio);
            stats.fits = fits(options, stats.estimated_tokens, kept.len());
            let messages: Vec<Value> = kept.into_iter().map(|m| m.message).collect();
            debug_assert!(validate_messages(&messages).is_empty());
            let system = match options.target {
                // Beside the messages, as given (the typed contract: given, it is there).
                Target::Anthropic => options.system.clone().filter(|s| !s.is_null()),
                // A message of its own: one with no text would be an empty message.
                _ => sendable_system(options.system.as_ref()),
            };
            let system = system.as_ref();
            let out = match options.target {
                Target::Anthropic => convert::to_anthropic(&messages, system),
                Target::OpenAiChat => convert::to_openai_chat(&messages, system),
                Target::OpenAiResponses => convert::to_openai_responses(&messages, system),
            };
            debug_assert!(match options.target {
                Target::Anthropic => validate_messages(&out.messages).is_empty(),
                Target::OpenAiChat => convert::validate_openai_chat(&out.messages).is_empty(),
                Target::OpenAiResponses =>
                    convert::validate_openai_responses(&out.messages).is_empty(),
            });
            stats.messages = out.messages.len() as u64;
            stats.warnings = out.warnings;
            stats.id_map = out.id_map;
            Ok(Context {
                system: out.system,
                messages: out.messages,
                stats,
            })
        };
        run().map_err(|e: Error| e.during("buildContext"))
    }

    /// The full output of a tool call (what a preview in the context stands for).
    pub fn read_tool_output(&self, id: &str) -> Result<Value> {
        let run = || {
            if let Some(on_branch) = self.result_on_branch(id)? {
                return Ok(on_branch.get("content").cloned().unwrap_or_default());
            }
            let result = self.cached_tool_result(id)?;
            if result.is_none() {
                let conn = self.conn()?;
                if journal::get(&conn, self.num, id)?.is_none() {
                    return Err(Error::NotFound(format!(
                        "no tool call '{id}' in this session"
                    )));
                }
                return Err(Error::NotFound(format!(
                    "tool call '{id}' has no output yet"
                )));
            }
            Ok(result
                .and_then(|b| b.get("content").cloned())
                .unwrap_or(Value::String(String::new())))
        };
        run().map_err(|e: Error| e.during("readToolOutput"))
    }
}

impl Session {
    /// The journal keeps a call's first result. After a rewind past it, the current branch may
    /// hold another one: that is the one the context shows.
    fn result_on_branch(&self, id: &str) -> Result<Option<Value>> {
        let conn = self.conn()?;
        let Some(entry) = journal::get(&conn, self.num, id)? else {
            return Ok(None);
        };
        let tail = self.read_tail(&conn)?;
        let Some(last) = tail.next_seq.checked_sub(1) else {
            return Ok(None);
        };
        let path = tail.state.path(last);
        let on_path = |seq: u64| path.iter().any(|&(f, t)| f <= seq && seq <= t);
        if entry.result_seq.is_none_or(on_path) {
            return Ok(None);
        }
        let view = crate::storage::records::view_from(&conn, self.num, entry.call_seq, &path)?;
        Ok(view
            .iter()
            .rev()
            .flat_map(|r| blocks(&r.message).iter().rev())
            .find(|b| {
                block_type(b) == "tool_result"
                    && b.get("tool_use_id").and_then(Value::as_str) == Some(id)
            })
            .cloned())
    }
}

/// Shapes, merges and pairs the messages of `view`, then cuts them to the budget.
fn cut(
    view: Vec<ViewRecord>,
    o: &ContextOptions,
    ratio: f64,
    stats: &mut ContextStats,
) -> Vec<Msg> {
    let msgs = shape(view, o, stats);
    let anthropic = o.target == Target::Anthropic;
    let msgs = pair(merge(msgs), stats, anthropic);
    // A turn can start with the results of the response before it (merged into the prompt's
    // message): cut there, those results lose their call.
    pair(budget(msgs, o, ratio, stats), stats, anthropic)
}

/// What `build_context` read of the context.
struct Read {
    /// the messages read: the whole context, or its end from a prompt on
    view: Vec<ViewRecord>,
    ratio: f64,
    calibrated: bool,
    start_seq: u64,
    /// the part of the context before `view`, when it was not read
    unread: Option<Unread>,
    /// the messages kept and the statistics of the cut, when reading back made it already
    cut: Option<(Vec<Msg>, ContextStats)>,
}

impl Read {
    /// The whole context, read.
    fn whole((view, ratio, calibrated): (Vec<ViewRecord>, f64, bool)) -> Read {
        Read {
            start_seq: view.first().map_or(0, |r| r.seq),
            view,
            ratio,
            calibrated,
            unread: None,
            cut: None,
        }
    }
}

/// The start of a long context that the budget leaves out, counted from the stored records
/// without reading them.
pub(crate) struct Unread {
    /// the ranges left out, as `dropped` gives them (a record counted as one message)
    dropped: Vec<Dropped>,
    pub records: u64,
    pub turns: u64,
    /// turns as `turn_starts` counts them over the records (the summary one of its own)
    pub record_turns: u64,
}

impl Unread {
    /// Adds what was not read to the statistics of what was (all of it left out by the budget).
    fn count_in(self, stats: &mut ContextStats) {
        let mut dropped = self.dropped;
        for d in std::mem::take(&mut stats.dropped) {
            extend(&mut dropped, d);
        }
        stats.dropped = dropped;
        stats.dropped_records += self.records;
        stats.dropped_turns += self.turns;
    }
}

/// Adds range `d` to `ranges` as `dropped_ranges` does (a message after the last range extends it).
fn extend(ranges: &mut Vec<Dropped>, d: Dropped) {
    match ranges.last_mut() {
        Some(last) if d.from_seq > last.to_seq => {
            last.to_seq = d.to_seq;
            last.messages += d.messages;
        }
        _ => ranges.push(d),
    }
}

thread_local! {
    /// Whether `build_context` reads the whole context even with a budget (tests compare the two).
    static WHOLE: Cell<bool> = const { Cell::new(false) };
}

/// Makes `build_context` on this thread read the whole context, budget or not (for tests: what
/// a read from the end gives is compared with it).
pub fn read_whole_context(whole: bool) {
    WHOLE.with(|w| w.set(whole));
}

/// Whether this thread reads whole contexts (`read_whole_context`).
pub(crate) fn reads_whole() -> bool {
    WHOLE.with(Cell::get)
}

/// The context as `build_context` needs it. Without a budget, all of it. With one, the context is
/// read back from its end only as far as the budget decides: until the records read decide the
/// tokens-per-character ratio (`ratio_from_end`: at once when no record reported usage, else once
/// the latest usage is read with so many characters before it that it does not calibrate) and
/// hold at least two whole turns that do not fit before the cut (`read_back.rs`). The messages
/// sent are then exactly those a read of the whole context gives; what lies before the records
/// read is counted (records, turns) from the stored positions.
fn read_context(conn: &crate::storage::db::Db, s: &Session, o: &ContextOptions) -> Result<Read> {
    let anthropic = o.target == Target::Anthropic;
    let whole = |conn| view_and_ratio_for(conn, s, anthropic).map(Read::whole);
    if o.max_tokens.is_none() && o.max_messages.is_none() || WHOLE.with(Cell::get) {
        return whole(conn);
    }
    let Some(mut back) = read_back::ReadBack::for_target(conn, s, anthropic)? else {
        return whole(conn);
    };
    while back.read_more(conn, s.num)? {
        let (view, sizes) = back.view();
        let Some((ratio, calibrated)) = back.ratio(&view, &sizes) else {
            continue;
        };
        // Until what was read could be over the budget once shaped (at most `most` characters
        // a record, each message's estimate rounded up), no turn of it can be left out: no trial
        // cut is made.
        let read_chars: u64 = sizes.iter().sum();
        let most: u64 = view.iter().map(|r| most_chars(r, o)).sum::<u64>() + read_chars;
        let over = o.max_tokens.is_some_and(|t| {
            tokens_of(most, ratio) + view.len() as u64 + system_tokens(o, ratio) > t
        }) || o.max_messages.is_some_and(|m| view.len() as u64 > m);
        if !over {
            // Read on, at once as far as the budget needs at the characters a record has so far.
            if let Some(t) = o.max_tokens {
                let per_record = (read_chars / view.len().max(1) as u64).max(1);
                // A quarter more than the budget holds: the turns left out must be read too.
                let needed = (t as f64 / ratio) as u64 / per_record * 5 / 4;
                back.read_at_least(needed.saturating_sub(view.len() as u64));
            }
            continue;
        }
        // The cut is that of the whole context if, read from a prompt on, at least two whole
        // turns are left out: the first turn read lacks what merges into it from before (the
        // results of the response before the prompt), and the cut never falls there.
        let Some(first) = view.iter().position(|r| is_prompt(&r.message)) else {
            continue;
        };
        let window: Vec<ViewRecord> = view[first..].iter().map(|&r| r.clone()).collect();
        let mut trial = ContextStats::default();
        let kept = cut(window, o, ratio, &mut trial);
        if trial.dropped_turns < 2 {
            continue;
        }
        let first_seq = view[first].seq;
        let first_index = view[first].index;
        let unread = unread_part(
            conn,
            s.num,
            &back.segments,
            &back.start,
            first_seq,
            first_index,
        )?;
        return Ok(Read {
            view: Vec::new(),
            ratio,
            calibrated,
            start_seq: unread.dropped.first().map_or(first_seq, |d| d.from_seq),
            unread: Some(unread),
            cut: Some((kept, trial)),
        });
    }
    // Read to its start: it is the whole context.
    let before = back.start.tokens_per_char;
    let view = back.into_whole();
    let (ratio, calibrated) = match (calibrate(&view), before) {
        ((_, false), Some(before)) => (before, true),
        (found, _) => found,
    };
    Ok(Read::whole((view, ratio, calibrated)))
}

/// How many characters shaping can add to a record's estimate, at most: a string content
/// becomes a text block, and a previewed result gains its note (its text only shortens).
fn most_chars(r: &ViewRecord, o: &ContextOptions) -> u64 {
    let results: u64 = match o.tool_result_preview_chars {
        Some(_) => blocks(&r.message)
            .iter()
            .filter(|b| block_type(b) == "tool_result")
            .map(|b| json_chars(b.get("tool_use_id").unwrap_or(&Value::Null)) + 256)
            .sum(),
        None => 0,
    };
    32 + results
}

/// The tokens-per-character ratio of a context that ends with `view` (with `chars` of each
/// record), and whether usage calibrated it, if `view` decides it: when no record of the context
/// reported usage (`latest`, found by the index), or when the latest that did has so many
/// characters before it, within `view` already, that it does not calibrate (more characters
/// before, further back, keep it so). Then the ratio is `fallback`. None when the whole context
/// must be read to know it.
pub(crate) fn ratio_from_end(
    view: &[&ViewRecord],
    chars: &[u64],
    latest: Option<u64>,
    fallback: (f64, bool),
) -> Option<(f64, bool)> {
    let Some(latest) = latest else {
        return Some(fallback);
    };
    let k = view.iter().rposition(|r| r.seq == latest)?;
    let (reported, before) = (reported(&view[k].message), chars[..k].iter().sum::<u64>());
    if reported == 0 || before == 0 {
        return None;
    }
    let ratio = reported as f64 / before as f64;
    (ratio < MIN_TOKENS_PER_CHAR).then_some(fallback)
}

/// The part of the context before record `first_seq` (the first read), counted: its records by
/// their places among the messages, its turns by the index of turn starts.
pub(crate) fn unread_part(
    conn: &crate::storage::db::Db,
    num: i64,
    segments: &[(u64, u64)],
    start: &crate::session::compaction_point::Start,
    first_seq: u64,
    first_index: u64,
) -> Result<Unread> {
    // The first message of the context (records before it, events and the like, are not in it).
    let mut oldest: Option<ViewRecord> = None;
    'find: for &(from, to) in segments {
        let mut a = from;
        while a <= to && a < first_seq {
            let b = to.min(first_seq - 1).min(a + 63);
            if let Some(r) = crate::storage::records::view_from(conn, num, a, &[(a, b)])?
                .into_iter()
                .next()
            {
                oldest = Some(r);
                break 'find;
            }
            a = b + 1;
        }
    }
    let summary = start.summary.as_ref().map(|r| r.seq);
    let Some(oldest) = oldest else {
        return Ok(Unread {
            dropped: summary
                .map(|seq| Dropped {
                    from_seq: seq,
                    to_seq: seq,
                    messages: 1,
                })
                .into_iter()
                .collect(),
            records: u64::from(summary.is_some()),
            turns: u64::from(summary.is_some()),
            record_turns: u64::from(summary.is_some()),
        });
    };
    // The first message of a context starts a turn, whatever it is; a summary is a message of its
    // own unless the first record is a user message, which merges into it.
    let user = oldest.message.get("role").and_then(Value::as_str) == Some("user");
    let apart = summary.filter(|_| !user);
    let mut between = 0;
    for &(from, to) in segments {
        let (a, b) = (
            from.max(oldest.seq + 1),
            to.min(first_seq.saturating_sub(1)),
        );
        if a <= b {
            between += crate::storage::records::turn_starts_between(conn, num, a, b)?;
        }
    }
    let turns = 1 + u64::from(apart.is_some()) + between;
    let record_turns = match summary {
        Some(_) => 1 + u64::from(is_prompt(&oldest.message)) + between,
        None => 1 + between,
    };
    let mut dropped = Vec::new();
    if let Some(seq) = apart {
        dropped.push(Dropped {
            from_seq: seq,
            to_seq: seq,
            messages: 1,
        });
    }
    extend(
        &mut dropped,
        Dropped {
            from_seq: summary.filter(|_| user).unwrap_or(oldest.seq),
            to_seq: first_seq - 1,
            messages: first_index.saturating_sub(oldest.index),
        },
    );
    // The summary counts as a record of the context, as a read of all of it counts it.
    Ok(Unread {
        dropped,
        records: first_index.saturating_sub(oldest.index) + u64::from(summary.is_some()),
        turns,
        record_turns,
    })
}

/// Input tokens a response reported (input + cache read + cache creation).
fn reported(message: &Value) -> u64 {
    let Some(u) = message.get("usage") else {
        return 0;
    };
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens")
}

/// The least tokens per character a calibration gives. A response that reported fewer tokens than
/// that for the messages before it was not sent them all (its request was a budgeted context, or
/// the usage came from elsewhere): it does not calibrate, and the default ratio is used.
const MIN_TOKENS_PER_CHAR: f64 = 0.02;

/// The messages of the current context (from the latest compaction: its summary first) and the
/// tokens-per-character ratio for estimates.
pub(crate) fn current_view(
    conn: &crate::storage::db::Db,
    s: &Session,
) -> Result<(Vec<ViewRecord>, f64)> {
    let (view, ratio, _) = view_and_ratio(conn, s)?;
    Ok((view, ratio))
}

pub(crate) fn view_and_ratio(
    conn: &crate::storage::db::Db,
    s: &Session,
) -> Result<(Vec<ViewRecord>, f64, bool)> {
    view_and_ratio_for(conn, s, false)
}

/// As `view_and_ratio`, for a request to `anthropic` or not (`compaction_point::start_for`).
fn view_and_ratio_for(
    conn: &crate::storage::db::Db,
    s: &Session,
    anthropic: bool,
) -> Result<(Vec<ViewRecord>, f64, bool)> {
    let tail = s.read_tail(conn)?;
    let crate::session::compaction_point::Start {
        seq: start,
        summary,
        tokens_per_char,
    } = crate::session::compaction_point::start_for(conn, s.num, &tail.state, anthropic)?;
    let mut view: Vec<ViewRecord> = summary.into_iter().collect();
    let path = tail
        .next_seq
        .checked_sub(1)
        .map_or(Vec::new(), |last| tail.state.path(last));
    view.extend(crate::storage::records::view_from(
        conn, s.num, start, &path,
    )?);
    let (ratio, calibrated) = match (calibrate(&view), tokens_per_char) {
        ((_, false), Some(before)) => (before, true),
        (found, _) => found,
    };
    Ok((view, ratio, calibrated))
}

/// Tokens per character, from the latest response whose reported input covers messages of this
/// view: (input + cache read + cache creation tokens) / characters of the messages before it.
/// The provider's count also covers the system prompt and tools, so the estimate errs high.
fn calibrate(view: &[ViewRecord]) -> (f64, bool) {
    let mut chars = 0u64;
    let mut found = None;
    for r in view {
        let reported = reported(&r.message);
        if reported > 0 && chars > 0 {
            found = Some(reported as f64 / chars as f64);
        }
        chars += estimate_chars(&r.message);
    }
    match found {
        Some(r) if r >= MIN_TOKENS_PER_CHAR => (r.min(2.0), true),
        _ => (DEFAULT_TOKENS_PER_CHAR, false),
    }
}

/// Characters of a message as a request carries it: its content blocks as JSON. The fields
/// around them (usage, ids, model) are not sent, and a response stored as several records is
/// sent as one message: counting blocks gives both the same count.
pub(crate) fn estimate_chars(message: &Value) -> u64 {
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().map(json_chars).sum(),
        Some(other) => json_chars(other),
        None => 0,
    }
}

/// Characters of a value as compact JSON (what `serde_json::to_string` gives), counted without
/// writing it: estimates count every message two or three times, and serialising was most of it.
pub(crate) fn json_chars(v: &Value) -> u64 {
    match v {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => {
            let mut count = CharCount(0);
            // Writing to the counter cannot fail.
            let _ = std::fmt::Write::write_fmt(&mut count, format_args!("{n}"));
            count.0
        }
        Value::String(s) => string_chars(s),
        Value::Array(items) => {
            2 + items.iter().map(json_chars).sum::<u64>() + items.len().saturating_sub(1) as u64
        }
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| string_chars(k) + 1 + json_chars(v))
                .sum::<u64>()
                + map.len().saturating_sub(1) as u64
        }
    }
}

/// Characters of `s` as a JSON string: its quotes, its characters, and what serde_json's
/// escapes add (`\"`, `\\` and `\n`-style escapes one each, `\u00XX` five). Sixteen bytes at a
/// time (eight without SSE2) while they are ASCII, most of a context's text: this runs over
/// every message's text two or three times per `buildContext`, and a byte at a time it was a
/// fifth of the instructions of a resume.
fn string_chars(s: &str) -> u64 {
    let mut n: u64 = 2;
    let rest = s.as_bytes();
    #[cfg(target_arch = "x86_64")]
    let rest = {
        let mut chunks = rest.chunks_exact(16);
        for chunk in &mut chunks {
            n += sse2::chunk_chars(chunk);
        }
        // The rest (a key, a short text) padded with spaces, which add one each.
        let rest = chunks.remainder();
        let mut padded = [b' '; 16];
        padded[..rest.len()].copy_from_slice(rest);
        n += sse2::chunk_chars(&padded) - (16 - rest.len() as u64);
        &[] as &[u8]
    };
    n + chunk_chars(rest)
}

/// What `bytes` add to a JSON string's text, eight at a time while they are ASCII.
fn chunk_chars(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let mut n: u64 = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        n += match ascii_chars(u64::from_le_bytes(word)) {
            Some(c) => c,
            None => chunk.iter().map(|&b| byte_chars(b)).sum(),
        };
    }
    n + chunks
        .remainder()
        .iter()
        .map(|&b| byte_chars(b))
        .sum::<u64>()
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };

    /// The bytes of `v` equal to `b`, as a bit mask.
    #[target_feature(enable = "sse2")]
    fn equal(v: __m128i, b: u8) -> u32 {
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8))) as u32
    }

    /// `chunk_chars` of sixteen bytes.
    pub(super) fn chunk_chars(chunk: &[u8]) -> u64 {
        assert_eq!(chunk.len(), 16);
        // SAFETY: SSE2 is part of every x86_64 target.
        unsafe { chars16(chunk) }
    }

    #[target_feature(enable = "sse2")]
    fn chars16(chunk: &[u8]) -> u64 {
        // SAFETY: the load reads the 16 bytes of `chunk` (checked by the caller); unaligned
        // loads are allowed.
        let v = unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) };
        if _mm_movemask_epi8(v) != 0 {
            return super::chunk_chars(chunk);
        }
        // all bytes are below 0x80 here, so the signed comparison is the unsigned one
        let control = _mm_movemask_epi8(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20))) as u32;
        let escaped = equal(v, b'"') | equal(v, b'\\');
        if control | escaped == 0 {
            return 16;
        }
        let short =
            equal(v, b'\n') | equal(v, b'\t') | equal(v, b'\r') | equal(v, 0x08) | equal(v, 0x0c);
        16 + u64::from(escaped.count_ones())
            + u64::from(control.count_ones())
            + 4 * u64::from((control & !short).count_ones())
    }
}

/// What one byte of a string adds to its JSON text: a continuation byte of a UTF-8 sequence
/// nothing (its character is counted at its first byte), an escaped byte its escape's length.
fn byte_chars(b: u8) -> u64 {
    match b {
        b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
        0..=0x1f => 6,
        0x80..=0xbf => 0,
        _ => 1,
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that equals `b` (exact: no carry crosses a byte).
fn bytes_equal(w: u64, b: u8) -> u64 {
    let x = w ^ (ONES * u64::from(b));
    !(((x & !HIGH) + !HIGH) | x) & HIGH
}

/// What eight bytes add to the JSON text when all are ASCII (`byte_chars` of each, summed); None
/// otherwise.
fn ascii_chars(w: u64) -> Option<u64> {
    if w & HIGH != 0 {
        return None;
    }
    // ASCII bytes below 0x20 are those that adding 0x60 leaves below 0x80
    let control = !(w + ONES * 0x60) & HIGH;
    let escaped = bytes_equal(w, b'"') | bytes_equal(w, b'\\');
    if control | escaped == 0 {
        return Some(8);
    }
    let short = [b'\n', b'\t', b'\r', 0x08, 0x0c]
        .iter()
        .fold(0, |m, &b| m | bytes_equal(w, b));
    Some(
        8 + u64::from(escaped.count_ones())
            + u64::from(control.count_ones())
            + 4 * u64::from((control & !short).count_ones()),
    )
}

/// A `fmt::Write` that counts the characters written.
struct CharCount(u64);

impl std::fmt::Write for CharCount {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.chars().count() as u64;
        Ok(())
    }
}

/// Indices of the view where a turn starts (a prompt; the first message always).
pub(crate) fn turn_starts(view: &[ViewRecord]) -> Vec<usize> {
    let messages: Vec<&Value> = view.iter().map(|r| &r.message).collect();
    starts(&messages)
}

fn starts(messages: &[&Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if i == 0 || is_prompt(m) {
            out.push(i);
        }
    }
    out
}

pub(crate) fn is_prompt(m: &Value) -> bool {
    m.get("role").and_then(Value::as_str) == Some("user")
        && blocks(m).iter().any(crate::model::message::is_human_block)
}

fn blocks(m: &Value) -> &[Value] {
    m.get("content")
        .and_then(Value::as_array)
        .map_or(&[], |v| v.as_slice())
}

fn block_type(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// The text of a tool result's content.
pub(crate) fn result_text(b: &Value) -> String {
    match b.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Per message: thinking as the reasoning mode allows (never unsigned), long results previewed.
fn shape(view: Vec<ViewRecord>, o: &ContextOptions, stats: &mut ContextStats) -> Vec<Msg> {
    view.into_iter()
        .map(|r| {
            let mut message = r.message;
            let keep_thinking = match o.reasoning {
                Reasoning::Keep => true,
                Reasoning::Drop => false,
                Reasoning::SameModel => same_model(&message, r.provider.as_deref(), o),
            };
            if let Some(Value::String(text)) = message.get("content") {
                // Stored messages hold blocks; a string is one text block.
                let block = json!({"type": "text", "text": text});
                message["content"] = Value::Array(vec![block]);
            }
            if let Some(Value::Array(content)) = message.get_mut("content") {
                // Kept in the history (lossless), never sent: the provider refuses empty text.
                content.retain(|b| !is_blank_text(b));
                for b in content.iter_mut() {
                    if let Some(Value::Array(inner)) = b.get_mut("content") {
                        inner.retain(|x| !is_blank_text(x));
                    }
                }
                let before = content.len();
                content.retain(|b| match block_type(b) {
                    "thinking" => {
                        keep_thinking
                            && b.get("signature")
                                .and_then(Value::as_str)
                                .is_some_and(|s| !s.is_empty())
                    }
                    "redacted_thinking" | "openai_reasoning" => keep_thinking,
                    _ => true,
                });
                stats.dropped_thinking += (before - content.len()) as u64;
                if let Some(max) = o.tool_result_preview_chars {
                    for b in content
                        .iter_mut()
                        .filter(|b| block_type(b) == "tool_result")
                    {
                        preview(b, max, stats);
                    }
                }
            }
            Msg {
                message,
                first_seq: r.seq,
                last_seq: r.seq,
                records: 1,
            }
        })
        .collect()
}

/// A text block with nothing but whitespace: the provider refuses it ("text content blocks must
/// be non-empty", "... must contain non-whitespace text").
pub(crate) fn is_blank_text(b: &Value) -> bool {
    block_type(b) == "text"
        && b.get("text")
            .and_then(Value::as_str)
            .is_none_or(|t| t.trim().is_empty())
}

/// Thinking goes back only to the provider and model that wrote it (signatures are theirs).
fn same_model(message: &Value, provider: Option<&str>, o: &ContextOptions) -> bool {
    // Without a provider in the envelope, a message that carries Responses reasoning came from
    // OpenAI; anything else is taken as Anthropic's (the stored shape).
    let inferred = if blocks(message)
        .iter()
        .any(|b| block_type(b) == "openai_reasoning")
    {
        "openai"
    } else {
        "anthropic"
    };
    let provider = provider.unwrap_or(inferred);
    if provider != o.target.provider() {
        return false;
    }
    match (&o.model, message.get("model").and_then(Value::as_str)) {
        (Some(want), Some(wrote)) => want == wrote,
        (Some(_), None) => false,
        (None, _) => true,
    }
}

fn preview(b: &mut Value, max: usize, stats: &mut ContextStats) {
    let text = result_text(b);
    let chars = text.chars().count();
    if chars <= max {
        return;
    }
    let id = b
        .get("tool_use_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let head: String = text.chars().take(max).collect();
    let note = format!(
        "\n\n[Output truncated: {max} of {chars} characters shown. The full output is stored: read it with read_tool_output(tool_use_id: \"{id}\").]"
    );
    if let Value::Object(o) = b {
        o.insert("content".into(), Value::String(format!("{head}{note}")));
    }
    stats.previewed.push(Previewed {
        tool_use_id: id,
        chars,
        shown_chars: max,
    });
}

/// Consecutive messages of one role become one (Claude Code writes a response as several
/// records; the provider wants alternating roles). Tool results go first in a user message.
fn merge(msgs: Vec<Msg>) -> Vec<Msg> {
    let mut out: Vec<Msg> = Vec::new();
    for m in msgs {
        let role = m.message.get("role").cloned();
        match out.last_mut() {
            Some(last) if last.message.get("role") == role.as_ref() => {
                let add = blocks(&m.message).to_vec();
                if let Some(Value::Array(c)) = last.message.get_mut("content") {
                    c.extend(add);
                    if role.as_ref().and_then(Value::as_str) == Some("user") {
                        c.sort_by_key(|b| block_type(b) != "tool_result");
                    }
                }
                last.last_seq = m.last_seq;
                last.records += m.records;
            }
            _ => out.push(m),
        }
    }
    out
}

/// Leaves out tool calls whose result is not in the next message and results whose call is not
/// in the message before (a second use of one call id, a second result for one call too), then
/// messages left empty, and what comes before the first user message: the request must be
/// valid. Leaving a message out can orphan its neighbours' calls or results, so this runs until
/// nothing more is left out.
fn pair(mut msgs: Vec<Msg>, stats: &mut ContextStats, anthropic: bool) -> Vec<Msg> {
    loop {
        let before: usize = msgs.iter().map(|m| blocks(&m.message).len()).sum();
        let count = msgs.len();
        msgs = pair_once(msgs, stats, anthropic);
        let after: usize = msgs.iter().map(|m| blocks(&m.message).len()).sum();
        if after == before && msgs.len() == count {
            return msgs;
        }
    }
}

fn pair_once(msgs: Vec<Msg>, stats: &mut ContextStats, anthropic: bool) -> Vec<Msg> {
    let msgs = drop_leading(msgs, stats, anthropic);
    let ids = |m: &Msg, ty: &str, key: &str| -> Vec<String> {
        blocks(&m.message)
            .iter()
            .filter(|b| block_type(b) == ty)
            .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    let n = msgs.len();
    let calls: Vec<Vec<String>> = msgs.iter().map(|m| ids(m, "tool_use", "id")).collect();
    let results: Vec<Vec<String>> = msgs
        .iter()
        .map(|m| ids(m, "tool_result", "tool_use_id"))
        .collect();
    // A call id seen once already (the provider wants ids unique in the request).
    let mut used: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    for (i, mut m) in msgs.into_iter().enumerate() {
        let is_user = m.message.get("role").and_then(Value::as_str) == Some("user");
        let answered = results.get(i + 1).cloned().unwrap_or_default();
        // The calls of the message before, each kept only on its first use and answered once.
        let mut asked: Vec<String> = if i > 0 && is_user {
            calls[i - 1].clone()
        } else {
            Vec::new()
        };
        if let Some(Value::Array(content)) = m.message.get_mut("content") {
            content.retain(|b| {
                let (keep, id) = match block_type(b) {
                    "tool_use" => {
                        let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
                        let keep = !is_user
                            && answered.iter().any(|a| a == id)
                            && used.insert(id.to_string());
                        (keep, id)
                    }
                    "tool_result" => {
                        let id = b
                            .get("tool_use_id")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        let keep = match asked.iter().position(|a| a == id) {
                            Some(k) => {
                                asked.swap_remove(k);
                                true
                            }
                            None => false,
                        };
                        (keep, id)
                    }
                    _ => (true, ""),
                };
                if !keep {
                    stats
                        .unpaired
                        .push(json!({"type": block_type(b), "id": id}));
                }
                keep
            });
            if is_user {
                // Results first in their message, as the provider wants them.
                content.sort_by_key(|b| block_type(b) != "tool_result");
            }
        }
        if !blocks(&m.message).is_empty() {
            out.push(m);
        }
    }
    // Leaving messages out can put two of one role side by side again.
    drop_leading(merge(out), stats, anthropic)
}

/// A request starts with a user message, and its results have no call before them: what comes
/// before the first user message with something besides results goes (in one step: one by one,
/// each assistant message left out would orphan the results after it, over and over). System
/// messages before it stay. To Anthropic, a request may start at the assistant message holding a
/// `compaction` block (the server reads from there on).
fn drop_leading(msgs: Vec<Msg>, stats: &mut ContextStats, anthropic: bool) -> Vec<Msg> {
    let lead = msgs
        .iter()
        .position(|m| {
            let role = m.message.get("role").and_then(Value::as_str);
            (role == Some("user")
                && blocks(&m.message)
                    .iter()
                    .any(|b| block_type(b) != "tool_result"))
                || (anthropic
                    && role == Some("assistant")
                    && blocks(&m.message)
                        .iter()
                        .any(|b| block_type(b) == "compaction"))
        })
        .unwrap_or(msgs.len());
    let is_system = |m: &Msg| m.message.get("role").and_then(Value::as_str) == Some("system");
    if lead == 0 || lead < msgs.len() && msgs[..lead].iter().all(is_system) {
        return msgs;
    }
    let mut msgs = msgs;
    let rest = msgs.split_off(lead);
    let mut out = Vec::with_capacity(rest.len() + 1);
    for m in msgs {
        // Kept in place before the first prompt, unless nothing follows to be sent.
        if is_system(&m) && !rest.is_empty() {
            out.push(m);
            continue;
        }
        for b in blocks(&m.message) {
            let id = match block_type(b) {
                "tool_use" => b.get("id"),
                "tool_result" => b.get("tool_use_id"),
                _ => continue,
            };
            let id = id.and_then(Value::as_str).unwrap_or_default();
            stats
                .unpaired
                .push(json!({"type": block_type(b), "id": id}));
        }
    }
    out.extend(rest);
    out
}

/// The system prompt as an OpenAI target sends it (the first message): as given, less its empty or
/// whitespace-only text blocks; none when nothing is left (an empty message is refused).
fn sendable_system(system: Option<&Value>) -> Option<Value> {
    match system? {
        Value::String(s) if s.trim().is_empty() => None,
        Value::Array(blocks) => {
            let kept: Vec<Value> = blocks
                .iter()
                .filter(|b| !is_blank_text(b))
                .cloned()
                .collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Null => None,
        other => Some(other.clone()),
    }
}

/// The system prompt goes to the provider as given: a string or text blocks.
fn check_system(system: Option<&Value>) -> Result<()> {
    let bad = |what: String| Err(Error::InvalidInput(format!("options.system{what}")));
    match system {
        None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => {
            for (i, b) in blocks.iter().enumerate() {
                if block_type(b) != "text" || !b.get("text").is_some_and(Value::is_string) {
                    return bad(format!(
                        "[{i}]: expected a text block {{ type: 'text', text: string }}"
                    ));
                }
            }
            Ok(())
        }
        Some(other) => bad(format!(
            ": expected a string or an array of text blocks, got {}",
            json_kind(other)
        )),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn tokens_of(chars: u64, ratio: f64) -> u64 {
    (chars as f64 * ratio).ceil() as u64
}

fn system_tokens(o: &ContextOptions, ratio: f64) -> u64 {
    o.system
        .as_ref()
        .map_or(0, |s| tokens_of(json_chars(s), ratio))
}

/// Estimated tokens of a request: the system prompt and the messages.
fn estimate(msgs: &[Msg], o: &ContextOptions, ratio: f64) -> u64 {
    system_tokens(o, ratio)
        + msgs
            .iter()
            .map(|m| tokens_of(estimate_chars(&m.message), ratio))
            .sum::<u64>()
}

fn fits(o: &ContextOptions, tokens: u64, messages: usize) -> bool {
    o.max_tokens.is_none_or(|t| tokens <= t) && o.max_messages.is_none_or(|m| messages as u64 <= m)
}

/// Whole turns, oldest first, until the rest fits `max_tokens` and `max_messages`. The latest
/// turn always stays.
fn budget(msgs: Vec<Msg>, o: &ContextOptions, ratio: f64, stats: &mut ContextStats) -> Vec<Msg> {
    // Each message is counted once: serialising is most of what an estimate costs.
    let tokens: Vec<u64> = msgs
        .iter()
        .map(|m| tokens_of(estimate_chars(&m.message), ratio))
        .collect();
    let refs: Vec<&Value> = msgs.iter().map(|m| &m.message).collect();
    let turns = starts(&refs);
    // Cut at a turn, the results at the head of its prompt lose their call and are left out.
    let orphaned = |i: usize| -> u64 {
        if i == 0 {
            return 0;
        }
        let results = blocks(&msgs[i].message)
            .iter()
            .filter(|b| block_type(b) == "tool_result")
            .map(json_chars)
            .sum::<u64>();
        tokens_of(results, ratio).min(tokens[i])
    };
    let mut sum = system_tokens(o, ratio) + tokens.iter().sum::<u64>();
    let mut cut_turn = 0;
    while cut_turn + 1 < turns.len()
        && !fits(
            o,
            sum - orphaned(turns[cut_turn]),
            msgs.len() - turns[cut_turn],
        )
    {
        let (a, b) = (turns[cut_turn], turns[cut_turn + 1]);
        sum -= tokens[a..b].iter().sum::<u64>();
        cut_turn += 1;
    }
    let cut = turns.get(cut_turn).copied().unwrap_or(0);
    stats.kept_turns = (turns.len() - cut_turn) as u64;
    stats.dropped_turns = cut_turn as u64;
    let mut msgs = msgs;
    let kept = msgs.split_off(cut);
    stats.dropped = dropped_ranges(&msgs);
    stats.dropped_records = msgs.iter().map(|m| m.records).sum();
    stats.kept_records = kept.iter().map(|m| m.records).sum();
    kept
}

/// The seq ranges of dropped messages. A compaction's summary carries the seq of the compaction
/// record, after the records it kept: it is a range of its own.
fn dropped_ranges(msgs: &[Msg]) -> Vec<Dropped> {
    let mut out: Vec<Dropped> = Vec::new();
    for m in msgs {
        match out.last_mut() {
            Some(d) if m.first_seq > d.to_seq => {
                d.to_seq = m.last_seq;
                d.messages += 1;
            }
            _ => out.push(Dropped {
                from_seq: m.first_seq,
                to_seq: m.last_seq,
                messages: 1,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::json_chars;
    use serde_json::{json, Value};

    #[test]
    fn json_chars_counts_what_serde_json_writes() {
        let texts = [
            r#"{"a":"plain","b":[1,2.5,-3,1E+2,123456789012345678901234567890],"c":null,"d":true,"e":false}"#,
            r#""quote \" backslash \\ newline \n tab \t cr \r bs \b ff \f nul \u0000 esc \u001b del \u007f""#,
            r#"{"ünïcödé":"日本語のテキスト 🎉 emoji","nested":{"deep":[[],{},[{"x":""}]]}}"#,
            r#"[]"#,
            r#"{}"#,
            r#""""#,
            r#"0"#,
        ];
        for text in texts {
            let v: Value = serde_json::from_str(text).unwrap();
            let written = serde_json::to_string(&v).unwrap();
            assert_eq!(json_chars(&v), written.chars().count() as u64, "{text}");
        }
        // each kind of byte (plain, escaped, control, multi-byte) at each offset of an eight-byte word
        let pieces = [
            "plain text ",
            "\"",
            "\\",
            "\n",
            "\t",
            "\r",
            "\u{8}",
            "\u{c}",
            "\u{1}",
            "\u{7f}",
            "é",
            "日本",
            "🎉",
            " ",
            "\u{1f}",
        ];
        for seed in 0..400u64 {
            let mut s = String::new();
            let mut x = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for _ in 0..(seed % 40) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s.push_str(pieces[(x >> 33) as usize % pieces.len()]);
            }
            let v = Value::String(s);
            let written = serde_json::to_string(&v).unwrap();
            assert_eq!(json_chars(&v), written.chars().count() as u64, "{v}");
        }
        let v = json!({ "content": [{ "type": "text", "text": "a\u{1}b\u{1f}c\"\\" }] });
        assert_eq!(
            json_chars(&v),
            serde_json::to_string(&v).unwrap().chars().count() as u64
        );
    }
}
