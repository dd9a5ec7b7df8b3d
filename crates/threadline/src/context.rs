//! Building the next request from a session: from the latest compaction, the messages of the
//! current context, cut to a budget by whole turns (a tool call never apart from its result, the
//! latest prompt always kept), long tool results previewed, thinking kept only where a model may
//! see it again, and the result valid for the provider, always.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::journal;
use crate::session::{Session, ViewRecord};
use crate::validate::validate_messages;

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
    /// where the context starts: the latest compaction's record, else 0
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

const SUMMARY_PREAMBLE: &str =
    "This session continues from an earlier conversation, summarised here:\n\n";

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
            let conn = self.conn()?;
            let (view, ratio, calibrated) = view_and_ratio(&conn, self)?;
            let mut stats = ContextStats {
                start_seq: view.first().map_or(0, |r| r.seq),
                compacted: self.read_tail(&conn)?.state.compaction.is_some(),
                tokens_per_char: ratio,
                calibrated,
                ..Default::default()
            };
            drop(conn);
            let msgs = shape(view, options, &mut stats);
            let msgs = pair(merge(msgs), &mut stats);
            // A turn can start with the results of the response before it (merged into the
            // prompt's message): cut there, those results lose their call.
            let kept = pair(budget(msgs, options, ratio, &mut stats), &mut stats);
            let messages: Vec<Value> = kept.into_iter().map(|m| m.message).collect();
            debug_assert!(validate_messages(&messages).is_empty());
            stats.messages = messages.len() as u64;
            let system = options.system.clone();
            match options.target {
                Target::Anthropic => Ok(Context {
                    system,
                    messages,
                    stats,
                }),
                other => Err(Error::InvalidInput(format!(
                    "target: '{}' is not supported yet",
                    serde_json::to_value(other)
                        .unwrap_or_default()
                        .as_str()
                        .unwrap_or_default()
                ))),
            }
        };
        run().map_err(|e: Error| e.during("buildContext"))
    }

    /// The full output of a tool call (what a preview in the context stands for).
    pub fn read_tool_output(&self, id: &str) -> Result<Value> {
        let run = || {
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

/// The messages of the current context (from the latest compaction: its summary first) and the
/// tokens-per-character ratio for estimates.
pub(crate) fn current_view(
    conn: &rusqlite::Connection,
    s: &Session,
) -> Result<(Vec<ViewRecord>, f64)> {
    let (view, ratio, _) = view_and_ratio(conn, s)?;
    Ok((view, ratio))
}

fn view_and_ratio(
    conn: &rusqlite::Connection,
    s: &Session,
) -> Result<(Vec<ViewRecord>, f64, bool)> {
    let tail = s.read_tail(conn)?;
    let mut view = Vec::new();
    let mut start = 0;
    if let Some(cp) = &tail.state.compaction {
        start = cp.kept;
        let record = Session::record(conn, s.num, cp.seq)?.unwrap_or_default();
        let summary = record
            .get("compaction")
            .and_then(|c| c.get("summary"))
            .and_then(Value::as_str);
        if let Some(summary) = summary {
            view.push(ViewRecord {
                seq: cp.seq,
                uuid: record.get("uuid").and_then(Value::as_str).unwrap_or_default().to_string(),
                provider: None,
                message: json!({"role": "user", "content": [{"type": "text", "text": format!("{SUMMARY_PREAMBLE}{summary}")}]}),
            });
        }
    }
    let path = tail
        .next_seq
        .checked_sub(1)
        .map_or(Vec::new(), |last| tail.state.path(last));
    view.extend(Session::view_from(conn, s.num, start, &path)?);
    let (ratio, calibrated) = calibrate(&view);
    Ok((view, ratio, calibrated))
}

/// Tokens per character, from the latest response whose reported input covers messages of this
/// view: (input + cache read + cache creation tokens) / characters of the messages before it.
/// The provider's count also covers the system prompt and tools, so the estimate errs high.
fn calibrate(view: &[ViewRecord]) -> (f64, bool) {
    let mut chars = 0u64;
    let mut found = None;
    for r in view {
        if let Some(u) = r.message.get("usage") {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            let reported =
                n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens");
            if reported > 0 && chars > 0 {
                found = Some((reported as f64 / chars as f64).clamp(0.02, 2.0));
            }
        }
        chars += estimate_chars(&r.message);
    }
    match found {
        Some(r) => (r, true),
        None => (DEFAULT_TOKENS_PER_CHAR, false),
    }
}

/// Characters of a message as JSON (what the estimate counts).
pub(crate) fn estimate_chars(message: &Value) -> u64 {
    serde_json::to_string(message).map_or(0, |s| s.chars().count() as u64)
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

fn is_prompt(m: &Value) -> bool {
    m.get("role").and_then(Value::as_str) == Some("user")
        && blocks(m).iter().any(|b| block_type(b) != "tool_result")
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
            if let Some(Value::Array(content)) = message.get_mut("content") {
                let before = content.len();
                content.retain(|b| match block_type(b) {
                    "thinking" => {
                        keep_thinking
                            && b.get("signature")
                                .and_then(Value::as_str)
                                .is_some_and(|s| !s.is_empty())
                    }
                    "redacted_thinking" => keep_thinking,
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

/// Thinking goes back only to the provider and model that wrote it (signatures are theirs).
fn same_model(message: &Value, provider: Option<&str>, o: &ContextOptions) -> bool {
    let provider = provider.unwrap_or("anthropic");
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
/// in the message before, then messages left empty: the request must be valid.
fn pair(msgs: Vec<Msg>, stats: &mut ContextStats) -> Vec<Msg> {
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
    let mut out = Vec::with_capacity(n);
    for (i, mut m) in msgs.into_iter().enumerate() {
        let answered = results.get(i + 1).cloned().unwrap_or_default();
        let asked = if i > 0 {
            calls[i - 1].clone()
        } else {
            Vec::new()
        };
        if let Some(Value::Array(content)) = m.message.get_mut("content") {
            content.retain(|b| {
                let (keep, id) = match block_type(b) {
                    "tool_use" => {
                        let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
                        (answered.iter().any(|a| a == id), id)
                    }
                    "tool_result" => {
                        let id = b
                            .get("tool_use_id")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        (asked.iter().any(|a| a == id), id)
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
        }
        if !blocks(&m.message).is_empty() {
            out.push(m);
        }
    }
    // Leaving messages out can put two of one role side by side again.
    let out = merge(out);
    drop_leading_assistant(out)
}

/// A request starts with a user message.
fn drop_leading_assistant(mut msgs: Vec<Msg>) -> Vec<Msg> {
    while msgs
        .first()
        .is_some_and(|m| m.message.get("role").and_then(Value::as_str) != Some("user"))
    {
        msgs.remove(0);
    }
    msgs
}

/// Whole turns, oldest first, until the rest fits `max_tokens` and `max_messages`. The latest
/// turn always stays.
fn budget(msgs: Vec<Msg>, o: &ContextOptions, ratio: f64, stats: &mut ContextStats) -> Vec<Msg> {
    let tokens = |m: &Msg| (estimate_chars(&m.message) as f64 * ratio).ceil() as u64;
    let system = o
        .system
        .as_ref()
        .map_or(0, |s| (estimate_chars(s) as f64 * ratio).ceil() as u64);
    let refs: Vec<&Value> = msgs.iter().map(|m| &m.message).collect();
    let turns = starts(&refs);
    let total: u64 = system + msgs.iter().map(tokens).sum::<u64>();
    let fits = |from: usize, sum: u64| {
        o.max_tokens.is_none_or(|t| sum <= t)
            && o.max_messages
                .is_none_or(|m| (msgs.len() - from) as u64 <= m)
    };
    let mut sum = total;
    let mut cut_turn = 0;
    while cut_turn + 1 < turns.len() && !fits(turns[cut_turn], sum) {
        let (a, b) = (turns[cut_turn], turns[cut_turn + 1]);
        sum -= msgs[a..b].iter().map(tokens).sum::<u64>();
        cut_turn += 1;
    }
    let cut = turns.get(cut_turn).copied().unwrap_or(0);
    stats.fits = fits(cut, sum);
    stats.estimated_tokens = sum;
    stats.kept_turns = (turns.len() - cut_turn) as u64;
    stats.dropped_turns = cut_turn as u64;
    let mut msgs = msgs;
    let kept = msgs.split_off(cut);
    if let (Some(first), Some(last)) = (msgs.first(), msgs.last()) {
        stats.dropped.push(Dropped {
            from_seq: first.first_seq,
            to_seq: last.last_seq,
            messages: msgs.len() as u64,
        });
    }
    stats.dropped_records = msgs.iter().map(|m| m.records).sum();
    stats.kept_records = kept.iter().map(|m| m.records).sum();
    kept
}
