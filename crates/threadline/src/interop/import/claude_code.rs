//! Claude Code's session files: `~/.claude/projects/<project>/<session>.jsonl`, each subagent in
//! `<session>/subagents/agent-<id>.jsonl` (with an `agent-<id>.meta.json` beside it), nested the
//! same way. Records are already envelopes (uuid, parentUuid, sessionId, message): they are
//! stored as they are. Progress, file-history-snapshot, summary, system and unknown records are
//! kept as events.
//!
//! A subagent becomes a session of its own, `<session>/agent-<id>`, linked to its parent session
//! and to the tool call that spawned it (`metadata.parentSessionId`, `metadata.parentToolUseId`).
//! Older files keep subagent conversations inline, marked `isSidechain`: each such chain becomes
//! a session `<session>/sidechain-<n>` the same way.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::files::Found;
use super::lines::JsonLine;
use super::{
    derived_uuid, display, imported_from, mark_filled, rewind_record, Format, ImportOptions,
    Incoming, Line, Read,
};
use crate::error::Result;
use crate::model::options::SessionOptions;

pub(crate) struct Reader {
    /// (parent session's store id, agent id) -> the tool call that spawned the agent
    spawned_by: HashMap<(String, String), String>,
    /// the folder a subagent's `.meta.json` must be in to be read
    root: PathBuf,
}

impl Reader {
    pub fn new(root: PathBuf) -> Reader {
        Reader {
            spawned_by: HashMap::new(),
            root,
        }
    }

    pub fn read(
        &mut self,
        f: &Found,
        lines: Vec<JsonLine>,
        options: &ImportOptions,
    ) -> Result<Read> {
        let file = display(&f.path);
        let mut read = Read::default();
        let place = Place::of(&f.path);
        for l in &lines {
            self.note_spawn(&place.id, &l.value);
        }
        // A subagent's file is all sidechain, and stays whole: in its folder, or on its own (a
        // subagent session exported and imported alone is one session again, not one per chain).
        let whole = place.agent.is_some() || all_sidechain(&lines);
        let (main, chains) = split_sidechains(lines, whole);
        let branched_at = main
            .first()
            .and_then(|l| l.value.get("parentUuid"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut session = self.incoming(&place, &file, main, options);
        if let Some(agent) = &place.agent {
            self.link(&mut session.options, &place, agent, &f.path);
            if let Some(uuid) = branched_at {
                // where in the parent the agent began (a compaction agent names its record)
                meta(&mut session.options).insert("parentRecordUuid".into(), Value::String(uuid));
            }
        }
        read.sessions.push(session);
        for (n, chain) in chains.into_iter().enumerate() {
            let sub = Place {
                id: format!("{}/sidechain-{}", place.id, n + 1),
                parent: Some(place.id.clone()),
                agent: None,
            };
            let mut s = self.incoming(&sub, &file, chain, options);
            meta(&mut s.options).insert("parentSessionId".into(), Value::String(place.id.clone()));
            read.sessions.push(s);
        }
        Ok(read)
    }

    fn incoming(
        &self,
        place: &Place,
        file: &str,
        lines: Vec<JsonLine>,
        options: &ImportOptions,
    ) -> Incoming {
        let records: Vec<Line> = lines
            .into_iter()
            .map(|l| Line {
                line: Some(l.number),
                record: with_id(&place.id, &l.text, l.nth, l.value),
            })
            .collect();
        let records = with_rewinds(&place.id, records);
        let mut o = SessionOptions {
            project: options
                .project
                .clone()
                .or_else(|| first_str(&records, "cwd")),
            title: title(&records),
            model: first_model(&records),
            ..SessionOptions::default()
        };
        if o.model.is_some() {
            o.provider = Some("anthropic".into());
        }
        imported_from(&mut o, Format::ClaudeCode, file);
        Incoming {
            id: place.id.clone(),
            options: o,
            file: file.to_string(),
            records,
            forked_from: None,
        }
    }

    /// Remembers which tool call spawned which agent (`spawn_of`).
    fn note_spawn(&mut self, session: &str, r: &Map<String, Value>) {
        if let Some((agent, call)) = spawn_of(r) {
            self.spawned_by
                .entry((session.to_string(), agent.to_string()))
                .or_insert_with(|| call.to_string());
        }
    }

    fn link(&self, o: &mut SessionOptions, place: &Place, agent: &str, path: &Path) {
        let parent = place.parent.clone().unwrap_or_default();
        let call = self
            .spawned_by
            .get(&(parent.clone(), agent.to_string()))
            .cloned();
        link(o, parent, agent, call, agent_meta(path, &self.root));
    }
}

/// The agent a record says a tool call spawned, and the call: the Task/Agent tool's result names
/// the agent (`toolUseResult.agentId`), and so do the progress records the agent sends while it
/// runs (`data.agentId` beside `parentToolUseID`), which are there even if the result is not.
pub(crate) fn spawn_of(r: &Map<String, Value>) -> Option<(&str, &str)> {
    let from_result = r
        .get("toolUseResult")
        .and_then(|t| t.get("agentId"))
        .and_then(Value::as_str)
        .zip(result_call_id(r));
    let from_progress = r
        .get("data")
        .and_then(|d| d.get("agentId"))
        .and_then(Value::as_str)
        .zip(r.get("parentToolUseID").and_then(Value::as_str));
    from_result.or(from_progress)
}

/// Links a subagent's session to its parent session, the call that spawned it (when known) and
/// what its `.meta.json` says (`described`).
pub(crate) fn link(
    o: &mut SessionOptions,
    parent: String,
    agent: &str,
    call: Option<String>,
    described: Option<Value>,
) {
    let m = meta(o);
    m.insert("parentSessionId".into(), Value::String(parent));
    m.insert("agentId".into(), Value::String(agent.to_string()));
    // Claude Code runs a compaction as an agent of its own, `agent-acompact-<id>`.
    let kind = if agent.starts_with("acompact-") {
        "compaction"
    } else {
        "subagent"
    };
    m.insert("agentKind".into(), Value::String(kind.into()));
    if let Some(call) = call {
        m.insert("parentToolUseId".into(), Value::String(call));
    }
    if let Some(described) = described {
        m.insert("agent".into(), described);
    }
}

/// Where a file sits: its session's id in the store, its parent's, and its agent id.
pub(crate) struct Place {
    pub id: String,
    pub parent: Option<String>,
    pub agent: Option<String>,
}

impl Place {
    /// `<dir>/<session>.jsonl` is `<session>`; `<session>/subagents/agent-<a>.jsonl` is
    /// `<session>/agent-<a>`, and one more level down `<session>/agent-<a>/agent-<b>`.
    pub(crate) fn of(path: &Path) -> Place {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let parts: Vec<String> = path
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let n = parts.len();
        if n < 3 || parts[n - 2] != "subagents" {
            return Place {
                id: stem,
                parent: None,
                agent: None,
            };
        }
        // Walk up through `X/subagents/` pairs: each X is an agent folder or the session's.
        let mut chain = vec![stem.clone()];
        let mut i = n - 2;
        while i >= 1 && parts[i] == "subagents" {
            chain.push(parts[i - 1].clone());
            if i < 2 {
                break;
            }
            i -= 2;
        }
        chain.reverse();
        let id = chain.join("/");
        let parent = chain[..chain.len() - 1].join("/");
        let agent = stem.strip_prefix("agent-").unwrap_or(&stem).to_string();
        Place {
            id,
            parent: Some(parent),
            agent: Some(agent),
        }
    }
}

/// A record as stored: its own uuid, or one derived from its line; the keys a store fills in
/// that it lacked are named in `importedWithout`.
pub(crate) fn with_id(
    session: &str,
    text: &str,
    nth: u64,
    mut r: Map<String, Value>,
) -> Map<String, Value> {
    mark_filled(&mut r);
    if !r.contains_key("uuid") {
        r.insert(
            "uuid".into(),
            Value::String(derived_uuid(session, text, nth)),
        );
    }
    r
}

/// Inline subagent chains (`isSidechain: true` in a session's own file), each apart: a record
/// joins the chain of its parentUuid, or starts one. A subagent's own file is all sidechain and
/// stays whole.
fn split_sidechains(lines: Vec<JsonLine>, whole: bool) -> (Vec<JsonLine>, Vec<Vec<JsonLine>>) {
    if whole {
        return (lines, Vec::new());
    }
    let mut main = Vec::new();
    let mut chains: Vec<Vec<JsonLine>> = Vec::new();
    let mut chain_of: HashMap<String, usize> = HashMap::new();
    for l in lines {
        if l.value.get("isSidechain") != Some(&Value::Bool(true)) {
            main.push(l);
            continue;
        }
        let parent = l.value.get("parentUuid").and_then(Value::as_str);
        let k = match parent.and_then(|p| chain_of.get(p)) {
            Some(&k) => k,
            None => {
                chains.push(Vec::new());
                chains.len() - 1
            }
        };
        if let Some(u) = l.value.get("uuid").and_then(Value::as_str) {
            chain_of.insert(u.to_string(), k);
        }
        chains[k].push(l);
    }
    (main, chains)
}

/// Every line that says is a sidechain's, and some say: a subagent's own file (a session's file
/// has its main conversation).
fn all_sidechain(lines: &[JsonLine]) -> bool {
    let flags = || lines.iter().filter_map(|l| l.value.get("isSidechain"));
    flags().all(|f| f == &Value::Bool(true)) && flags().next().is_some()
}

fn result_call_id(r: &Map<String, Value>) -> Option<&str> {
    r.get("message")?
        .get("content")?
        .as_array()?
        .iter()
        .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))?
        .get("tool_use_id")?
        .as_str()
}

/// The subagent's `.meta.json`, when it is a file the import may read (not a FIFO, not a link out
/// of the folder) and JSON.
fn agent_meta(path: &Path, root: &Path) -> Option<Value> {
    let meta = super::files::check(&path.with_extension("meta.json"), root).ok()?;
    let text = super::files::read_text(&meta).ok()?;
    serde_json::from_str(&text).ok()
}

pub(crate) fn meta(o: &mut SessionOptions) -> &mut Map<String, Value> {
    o.metadata.get_or_insert_with(Map::new)
}

pub(crate) fn first_str<L: Borrow<Line>>(records: &[L], key: &str) -> Option<String> {
    records
        .iter()
        .map(Borrow::borrow)
        .find_map(|l: &Line| l.record.get(key).and_then(Value::as_str))
        .map(str::to_string)
}

pub(crate) fn first_model<L: Borrow<Line>>(records: &[L]) -> Option<String> {
    records
        .iter()
        .map(Borrow::borrow)
        .filter_map(|l: &Line| l.record.get("message")?.get("model")?.as_str())
        .find(|m| !m.starts_with('<'))
        .map(str::to_string)
}

/// The title Claude Code gave the session: a custom title, else its first summary.
pub(crate) fn title<L: Borrow<Line>>(records: &[L]) -> Option<String> {
    let find = |ty: &str, key: &str| {
        records
            .iter()
            .map(Borrow::borrow)
            .filter(|l: &&Line| l.record.get("type").and_then(Value::as_str) == Some(ty))
            .find_map(|l| l.record.get(key).and_then(Value::as_str))
            .map(str::to_string)
    };
    find("custom-title", "customTitle").or_else(|| find("summary", "summary"))
}

/// Claude Code marks a rewind only by where the next prompt points: after going back, the user's
/// prompt names as its parent an earlier record, not the one written before it. Tool results and
/// compaction summaries point back too (to their call, to the boundary), so only a prompt counts
/// (a user message that is not a tool result, not meta, not a summary), and only when messages
/// were written after the record it points to (they are the branch left). There the import
/// writes a Threadline rewind first, so the session's branches are Claude Code's.
pub(crate) fn with_rewinds(session: &str, records: Vec<Line>) -> Vec<Line> {
    with_rewinds_after(session, records, &mut NothingBefore)
}

/// What was stored before the records `with_rewinds_after` reads (a mirror's earlier batches),
/// asked only where a prompt may point back past them. Positions are the log's seqs; the records
/// read come after `offset`.
pub(crate) trait Before {
    fn offset(&self) -> usize;
    /// where record `uuid` is, if it was stored before
    fn position(&mut self, uuid: &str) -> Option<usize>;
    /// where the last message stored before is
    fn last_message(&mut self) -> Option<usize>;
    /// the last record stored before that has a uuid of its own
    fn last_own(&mut self) -> Option<String>;
}

struct NothingBefore;

impl Before for NothingBefore {
    fn offset(&self) -> usize {
        0
    }
    fn position(&mut self, _: &str) -> Option<usize> {
        None
    }
    fn last_message(&mut self) -> Option<usize> {
        None
    }
    fn last_own(&mut self) -> Option<String> {
        None
    }
}

/// `with_rewinds` of records that continue what `before` holds.
pub(crate) fn with_rewinds_after(
    session: &str,
    records: Vec<Line>,
    before: &mut dyn Before,
) -> Vec<Line> {
    let offset = before.offset();
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut last_message: Option<usize> = None;
    let mut prev: Option<String> = None;
    let mut asked_prev = false;
    let mut out = Vec::with_capacity(records.len());
    for (i, l) in records.into_iter().enumerate() {
        let i = offset + i;
        let r = &l.record;
        let own_uuid = r
            .get("uuid")
            .and_then(Value::as_str)
            .filter(|_| !filled(r, "uuid"))
            .map(str::to_string);
        let parent = r.get("parentUuid").and_then(Value::as_str);
        if prev.is_none() && !asked_prev && parent.is_some() && own_uuid.is_some() {
            asked_prev = true;
            prev = before.last_own();
        }
        if let (Some(parent), Some(before_it), Some(uuid)) = (parent, &prev, &own_uuid) {
            // the cheap tests first: the rest may ask `before`
            if parent != before_it && is_prompt(r) {
                let p = at.get(parent).copied().or_else(|| before.position(parent));
                let m = last_message.or_else(|| before.last_message());
                if p.is_some_and(|p| m.is_some_and(|m| m > p)) {
                    out.push(Line {
                        line: l.line,
                        record: rewind_record(session, parent, uuid, r.get("timestamp")),
                    });
                }
            }
        }
        if let Some(u) = own_uuid {
            at.insert(u.clone(), i);
            prev = Some(u);
        }
        if matches!(
            r.get("type").and_then(Value::as_str),
            Some("user" | "assistant")
        ) && r.contains_key("message")
        {
            last_message = Some(i);
        }
        out.push(l);
    }
    out
}

/// Whether the store, not the line, gave the record `key`.
fn filled(r: &Map<String, Value>, key: &str) -> bool {
    r.get("importedWithout")
        .and_then(Value::as_array)
        .is_some_and(|keys| keys.iter().any(|k| k == key))
}

/// A prompt the user typed: a user message that is not a tool result, meta, or a summary.
fn is_prompt(r: &Map<String, Value>) -> bool {
    let flag = |k: &str| r.get(k).and_then(Value::as_bool) == Some(true);
    if r.get("type").and_then(Value::as_str) != Some("user")
        || flag("isMeta")
        || flag("isCompactSummary")
        || flag("isSidechain")
    {
        return false;
    }
    match r.get("message").and_then(|m| m.get("content")) {
        Some(Value::String(_)) => true,
        Some(Value::Array(blocks)) => !blocks
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")),
        _ => false,
    }
}
