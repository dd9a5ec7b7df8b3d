//! The Claude Agent SDK's `SessionStore` on a store: the SDK mirrors every line Claude Code
//! writes to its JSONL transcript (`append(key, entries)`) and reads them back on resume
//! (`load(key)`). A mirrored session is the session `threadline import claude-code` makes of the
//! same file: the entries go through the importer's mapping (records keep their uuids, an entry
//! without one gets one derived and marked `importedWithout`, messages are messages with their
//! envelope, other entries events, a subagent's transcript a session linked to its parent), so
//! export and every reader treat both alike.
//!
//! A key `{projectKey, sessionId, subpath?}` names session `sessionId`; a subpath
//! `subagents/agent-X[/subagents/agent-Y]` names `sessionId/agent-X[/agent-Y]` as the importer
//! names a subagent's file, any other subpath `sessionId/<subpath>`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::interop::export::claude_code::{as_imported, STRING_CONTENT};
use crate::interop::import::claude_code::{
    first_model, first_str, link, spawn_of, title, with_rewinds_after, Before, Place,
};
use crate::interop::import::{date_undated, ended, mark_filled, token_patch, Line};
use crate::model::envelope::{Draft, REWIND};
use crate::model::options::{SessionOptions, SessionUpdate};
use crate::session::Writer;
use crate::storage::sessions;
use crate::store::Store;

/// The event an entry Threadline cannot store as it is (not an object, no string `type`, a
/// message it refuses) is kept in, whole under `entry`, so a load still gives it back.
pub const REFUSED_ENTRY: &str = "claude-agent-sdk-entry";

/// The SDK's `SessionKey`, and the project a new session is to have (else its first `cwd`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Key {
    pub project_key: String,
    pub session_id: String,
    #[serde(default)]
    pub subpath: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
}

impl Key {
    /// Reads a key from JSON, naming the offending field.
    pub fn from_json(text: &str) -> Result<Key> {
        let v = crate::model::json::parse(text).map_err(|e| prefix("key", e))?;
        let Value::Object(o) = &v else {
            return Err(Error::InvalidInput(format!(
                "key: expected an object, got {}",
                crate::model::json::kind(&v)
            )));
        };
        for (field, optional) in [
            ("projectKey", false),
            ("sessionId", false),
            ("subpath", true),
            ("project", true),
        ] {
            match o.get(field) {
                Some(Value::String(s)) if !s.is_empty() => {}
                None if optional => {}
                Some(Value::Null) if optional => {}
                Some(Value::String(_)) => {
                    return Err(Error::InvalidInput(format!(
                        "key.{field}: must not be empty"
                    )))
                }
                None => {
                    return Err(Error::InvalidInput(format!(
                        "key.{field}: required, a string"
                    )))
                }
                Some(other) => {
                    return Err(Error::InvalidInput(format!(
                        "key.{field}: expected a string, got {}",
                        crate::model::json::kind(other)
                    )))
                }
            }
        }
        let key: Key =
            serde_json::from_value(v).map_err(|e| Error::InvalidInput(format!("key: {e}")))?;
        // a `/` would make a main session's id look like a subagent's
        if key.session_id.contains('/') {
            return Err(Error::InvalidInput(format!(
                "key.sessionId: must not contain '/', got '{}'",
                key.session_id
            )));
        }
        Ok(key)
    }

    /// The store's id of the session the key names.
    pub fn store_id(&self) -> String {
        self.place().id
    }

    /// The store's id of the session the key names, and where it sits (parent, agent id).
    pub(crate) fn place(&self) -> Place {
        let sid = &self.session_id;
        match &self.subpath {
            None => Place {
                id: sid.clone(),
                parent: None,
                agent: None,
            },
            Some(sub) if is_agent_path(sub) => Place::of(Path::new(&format!("{sid}/{sub}.jsonl"))),
            Some(sub) => Place {
                id: format!("{sid}/{sub}"),
                parent: Some(sid.clone()),
                agent: None,
            },
        }
    }
}

/// `subagents/agent-X`, nested any depth (`subagents/agent-X/subagents/agent-Y`).
fn is_agent_path(sub: &str) -> bool {
    let parts: Vec<&str> = sub.split('/').collect();
    parts.len().is_multiple_of(2)
        && parts.chunks(2).all(|p| {
            p[0] == "subagents"
                && p[1].len() > "agent-".len()
                && p[1].starts_with("agent-")
                && p[1] != "."
                && p[1] != ".."
        })
}

/// What an append did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendReport {
    /// the store's id of the session
    pub session_id: String,
    /// whether this append made it
    pub created: bool,
    /// records stored by this append (entries already stored are left out)
    pub new_records: u64,
    /// entries Threadline could not store as they are: each kept whole as a
    /// `claude-agent-sdk-entry` event (a load gives it back), with why
    pub skipped: Vec<SkippedEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedEntry {
    pub index: usize,
    pub reason: String,
}

/// One entry of a batch on its way in.
enum Entry {
    /// an object with a string `type`
    Record(Line),
    /// anything else, and why
    Refused(String),
}

/// Appends `entries_json` (a JSON array of the SDK's entries) to the session `key` names, making
/// it when missing, and merges `sidecar` into its `metadata.claudeAgentSdk`: all in one
/// transaction. Entries whose uuid is stored already are left out (the SDK retries, and
/// `importSessionToStore` replays); an entry without a uuid is stored once per call. The session
/// stays claimed by this store after the call (the next append of it neither claims it again nor
/// reads its end) until `release`, `delete` or the store's `close`.
pub fn append(
    store: &Store,
    key: &Key,
    entries_json: &str,
    sidecar: Option<Map<String, Value>>,
) -> Result<AppendReport> {
    let run = || -> Result<AppendReport> {
        let entries =
            match crate::model::json::parse(entries_json).map_err(|e| prefix("entries", e))? {
                Value::Array(a) => a,
                other => {
                    return Err(Error::InvalidInput(format!(
                        "entries: expected an array, got {}",
                        crate::model::json::kind(&other)
                    )))
                }
            };
        let place = key.place();
        let entries: Vec<Entry> = entries
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Object(o) if o.get("type").is_some_and(Value::is_string) => {
                    Entry::Record(Line {
                        line: Some(i as u64),
                        record: o,
                    })
                }
                Value::Object(o) => Entry::Refused(match o.get("type") {
                    None => format!("entries[{i}].type: required, a string"),
                    Some(t) => format!(
                        "entries[{i}].type: expected a string, got {}",
                        crate::model::json::kind(t)
                    ),
                }),
                other => Entry::Refused(format!(
                    "entries[{i}]: expected an object, got {}",
                    crate::model::json::kind(&other)
                )),
            })
            .collect();
        let lines: Vec<&Line> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Record(l) => Some(l),
                Entry::Refused(_) => None,
            })
            .collect();
        let derived = Derived::of(&lines);
        let options = new_options(key, &place, &lines, &derived, sidecar.clone());
        drop(lines);
        let mut report = AppendReport {
            session_id: place.id.clone(),
            ..AppendReport::default()
        };
        store.write_upserting(&place.id, options, |w, created| {
            report.created = created;
            write(w, created, &place, entries, entries_json, &mut report)?;
            if !created {
                update_row(w, key, &derived, sidecar)?;
            }
            if let Some(agent) = &place.agent {
                link_agent(w, &place, agent, created, &derived)?;
            }
            note_spawned(w, &derived.spawned)?;
            Ok(())
        })?;
        Ok(report)
    };
    run().map_err(|e| e.during("claudeCodeAppend"))
}

/// What a batch says of its session besides its records.
struct Derived {
    title: Option<(String, bool)>,
    model: Option<String>,
    cwd: Option<String>,
    /// the last `agent_metadata` entry (a subagent's `.meta.json`), without its `type`
    agent_meta: Option<Value>,
    /// (agent id, tool call) of every spawn the batch's records name
    spawned: Vec<(String, String)>,
}

impl Derived {
    fn of(lines: &[&Line]) -> Derived {
        let is = |l: &Line, ty: &str| l.record.get("type").and_then(Value::as_str) == Some(ty);
        // the importer's title, and whether it is a custom title (a summary does not replace one)
        let custom = lines.iter().any(|l| {
            is(l, "custom-title") && l.record.get("customTitle").is_some_and(Value::is_string)
        });
        let title = title(lines).map(|t| (t, custom));
        let agent_meta = lines
            .iter()
            .rev()
            .find(|l| is(l, "agent_metadata"))
            .map(|l| {
                let mut m = l.record.clone();
                m.shift_remove("type");
                Value::Object(m)
            });
        Derived {
            title,
            model: first_model(lines),
            cwd: first_str(lines, "cwd"),
            agent_meta,
            spawned: lines
                .iter()
                .filter_map(|l| spawn_of(&l.record))
                .map(|(a, c)| (a.to_string(), c.to_string()))
                .collect(),
        }
    }
}

/// The options of a session made by its first batch, as the importer derives them.
fn new_options(
    key: &Key,
    place: &Place,
    lines: &[&Line],
    d: &Derived,
    sidecar: Option<Map<String, Value>>,
) -> SessionOptions {
    let mut o = SessionOptions {
        project: key
            .project
            .clone()
            .or_else(|| d.cwd.clone())
            .or_else(|| Some(key.project_key.clone())),
        title: d.title.as_ref().map(|(t, _)| t.clone()),
        model: d.model.clone(),
        ..SessionOptions::default()
    };
    if o.model.is_some() {
        o.provider = Some("anthropic".into());
    }
    let m = o.metadata.get_or_insert_with(Map::new);
    let mut from = Map::new();
    from.insert("format".into(), Value::String("claude-code".into()));
    from.insert("via".into(), Value::String("claude-agent-sdk".into()));
    m.insert("importedFrom".into(), Value::Object(from));
    m.insert(
        "claudeAgentSdk".into(),
        Value::Object(sdk_meta(key, d.title.as_ref(), sidecar)),
    );
    if let Some(agent) = &place.agent {
        link(
            &mut o,
            place.parent.clone().unwrap_or_default(),
            agent,
            None,
            d.agent_meta.clone(),
        );
        // where in the parent the agent began (a compaction agent names its record)
        let first = lines
            .first()
            .and_then(|l| l.record.get("parentUuid"))
            .and_then(Value::as_str);
        if let Some(uuid) = first {
            o.metadata
                .get_or_insert_with(Map::new)
                .insert("parentRecordUuid".into(), Value::String(uuid.into()));
        }
    } else if let Some(parent) = &place.parent {
        o.metadata
            .get_or_insert_with(Map::new)
            .insert("parentSessionId".into(), Value::String(parent.clone()));
    }
    o
}

/// `metadata.claudeAgentSdk` of a new session: its key, the sidecar, and whether its title is a
/// custom title (a later summary does not replace one).
fn sdk_meta(
    key: &Key,
    title: Option<&(String, bool)>,
    sidecar: Option<Map<String, Value>>,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("projectKey".into(), Value::String(key.project_key.clone()));
    if let Some(s) = &key.subpath {
        m.insert("subpath".into(), Value::String(s.clone()));
    }
    if title.is_some_and(|(_, custom)| *custom) {
        m.insert("customTitle".into(), Value::Bool(true));
    }
    m.extend(sidecar.unwrap_or_default());
    m
}

/// Writes the batch's records in order; an entry the store refuses is kept as a
/// `claude-agent-sdk-entry` event in its place.
fn write(
    w: &mut Writer,
    created: bool,
    place: &Place,
    entries: Vec<Entry>,
    entries_json: &str,
    report: &mut AppendReport,
) -> Result<()> {
    let base = w.tail.next_seq;
    let session = place.id.as_str();
    // An id for an entry without one: from the session, the entry, where the call began in the
    // log and the entry's place in it, so the same entry in another call is another record.
    let derive = |text: &str, i: usize| {
        crate::model::derived_uuid::from_parts(&[
            session.as_bytes(),
            &[0],
            text.as_bytes(),
            &base.to_le_bytes(),
            &(i as u64).to_le_bytes(),
        ])
    };
    let mut lines: Vec<Line> = Vec::with_capacity(entries.len());
    let mut refused: Vec<(usize, String)> = Vec::new();
    for (i, e) in entries.into_iter().enumerate() {
        let mut r = match e {
            Entry::Record(l) => l.record,
            Entry::Refused(reason) => {
                refused.push((i, reason));
                continue;
            }
        };
        mark_filled(&mut r);
        if !r.contains_key("uuid") {
            let text = Value::Object(r.clone()).to_string();
            r.insert("uuid".into(), Value::String(derive(&text, i)));
        }
        let string_content = r
            .get("message")
            .and_then(|m| m.get("content"))
            .is_some_and(Value::is_string);
        if string_content {
            r.insert(STRING_CONTENT.into(), Value::Bool(true));
        }
        lines.push(Line {
            line: Some(i as u64),
            record: r,
        });
    }
    // the importer's rewinds, where a prompt points back past messages (stored before or not)
    let mut stored = Stored {
        conn: w.conn,
        num: w.num(),
        offset: base as usize,
        failed: None,
    };
    let lines = with_rewinds_after(session, lines, &mut stored);
    if let Some(e) = stored.failed {
        return Err(e);
    }
    let mut drafts: Vec<(usize, Draft)> = Vec::with_capacity(lines.len());
    for l in lines {
        let i = l.line.unwrap_or_default() as usize;
        match Draft::from_envelope(l.record) {
            Ok(mut d) => {
                d.tokens = token_patch(&d);
                drafts.push((i, d));
            }
            Err(e) => refused.push((i, format!("entries[{i}]: {}", e.message()))),
        }
    }
    date_after_stored(w, &mut drafts)?;
    date_undated(&mut drafts);
    let status = created.then(|| ended(&drafts));
    let span = drafts
        .iter()
        .filter_map(|(_, d)| d.str_field("timestamp"))
        .filter_map(crate::model::clock::parse_ms)
        .min();
    // the originals of refused entries, read again from the text (rare: not kept for every one)
    let mut originals: Option<Vec<Value>> = None;
    let mut original = |i: usize| -> Value {
        let all = originals.get_or_insert_with(|| match crate::model::json::parse(entries_json) {
            Ok(Value::Array(a)) => a,
            _ => Vec::new(),
        });
        all.get(i).cloned().unwrap_or(Value::Null)
    };
    refused.sort_by_key(|(i, _)| *i);
    let mut refused = refused.into_iter().peekable();
    let mut drafts = drafts.into_iter().peekable();
    loop {
        let next_refused = refused.peek().map(|(i, _)| *i);
        let next_draft = drafts.peek().map(|(i, _)| *i);
        match (next_refused, next_draft) {
            (None, None) => break,
            (Some(r), d) if d.is_none_or(|d| r < d) => {
                let (i, reason) = refused.next().unwrap_or_default();
                keep_refused(w, original(i), i, &reason, &derive)?;
                report.skipped.push(SkippedEntry { index: i, reason });
            }
            _ => {
                let Some((i, d)) = drafts.next() else { break };
                match w.insert_or_rewind(d) {
                    Ok(()) => {}
                    Err(Error::InvalidInput(reason) | Error::NotFound(reason)) => {
                        let reason = format!("entries[{i}]: {reason}");
                        keep_refused(w, original(i), i, &reason, &derive)?;
                        report.skipped.push(SkippedEntry { index: i, reason });
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    report.new_records = w.tail.next_seq - base;
    if created {
        if let Some(status) = status {
            sessions::set_status(w.conn, w.num(), status, crate::model::clock::now_ms())?;
        }
        if let Some(first) = span {
            sessions::set_created(w.conn, w.num(), first)?;
        }
    }
    Ok(())
}

/// The session's records stored before a batch, for the importer's rewinds.
struct Stored<'a> {
    conn: &'a crate::storage::db::Db,
    num: i64,
    offset: usize,
    failed: Option<Error>,
}

impl Stored<'_> {
    fn ok<T>(&mut self, r: Result<Option<T>>) -> Option<T> {
        r.unwrap_or_else(|e| {
            self.failed.get_or_insert(e);
            None
        })
    }
}

impl Before for Stored<'_> {
    fn offset(&self) -> usize {
        self.offset
    }

    fn position(&mut self, uuid: &str) -> Option<usize> {
        let r = crate::storage::records::find_uuid(self.conn, self.num, uuid);
        self.ok(r).map(|s| s as usize)
    }

    fn last_message(&mut self) -> Option<usize> {
        let user = crate::storage::records::latest_of_role(self.conn, self.num, "user");
        let user = self.ok(user);
        let assistant = crate::storage::records::latest_of_role(self.conn, self.num, "assistant");
        let assistant = self.ok(assistant);
        user.max(assistant).map(|s| s as usize)
    }

    fn last_own(&mut self) -> Option<String> {
        // the last few records: a uuid derived for an entry without one is not its own, nor is
        // a rewind's
        let mut seq = self.offset.checked_sub(1)?;
        for _ in 0..64 {
            let r = crate::storage::records::record(self.conn, self.num, seq as u64);
            let r = self.ok(r)?;
            let own = r.get("type").and_then(Value::as_str) != Some(REWIND)
                && !r
                    .get("importedWithout")
                    .and_then(Value::as_array)
                    .is_some_and(|k| k.iter().any(|k| k == "uuid"));
            if own {
                return r.get("uuid").and_then(Value::as_str).map(str::to_string);
            }
            seq = seq.checked_sub(1)?;
        }
        None
    }
}

/// Keeps an entry the store refused as an event holding it whole: its id derived from its own
/// uuid when it has one (a retry finds it stored), else from the call as for any entry.
fn keep_refused(
    w: &mut Writer,
    entry: Value,
    i: usize,
    reason: &str,
    derive: &dyn Fn(&str, usize) -> String,
) -> Result<()> {
    let uuid = match entry.get("uuid").and_then(Value::as_str) {
        Some(u) => crate::model::derived_uuid::from_parts(&[
            w.session_id().as_bytes(),
            &[0],
            b"refused ",
            u.as_bytes(),
        ]),
        None => derive(&entry.to_string(), i),
    };
    let mut r = Map::new();
    r.insert("type".into(), Value::String(REFUSED_ENTRY.into()));
    r.insert("uuid".into(), Value::String(uuid));
    if let Some(t) = entry.get("timestamp").filter(|t| t.is_string()) {
        r.insert("timestamp".into(), t.clone());
    }
    r.insert("reason".into(), Value::String(reason.into()));
    r.insert("entry".into(), entry);
    w.insert(Draft::from_envelope(r)?)?;
    Ok(())
}

/// A batch that begins undated (a `last-prompt`, a `cost-state`) is dated at the last record
/// stored before it, as the importer dates such a line at the line before it in the file.
fn date_after_stored(w: &mut Writer, drafts: &mut [(usize, Draft)]) -> Result<()> {
    let undated_first = drafts
        .first()
        .is_some_and(|(_, d)| !d.env.contains_key("timestamp"));
    let Some(last) = w.tail.next_seq.checked_sub(1).filter(|_| undated_first) else {
        return Ok(());
    };
    let Some(stored) = crate::storage::records::record(w.conn, w.num(), last)? else {
        return Ok(());
    };
    let Some(t) = stored.get("timestamp").filter(|t| t.is_string()) else {
        return Ok(());
    };
    for (_, d) in drafts.iter_mut() {
        if d.env.contains_key("timestamp") {
            break;
        }
        d.env.insert("timestamp".into(), t.clone());
    }
    Ok(())
}

/// A later batch: the title, model, project the first did not have, and the sidecar.
fn update_row(
    w: &mut Writer,
    key: &Key,
    d: &Derived,
    sidecar: Option<Map<String, Value>>,
) -> Result<()> {
    let wants_title = d.title.is_some();
    let wants_model = d.model.is_some();
    let wants_project = d.cwd.is_some() && key.project.is_none();
    if sidecar.is_none() && !wants_title && !wants_model && !wants_project {
        return Ok(());
    }
    let num = w.num();
    let (row, mut meta) = row_and_metadata(w, num)?;
    let mut u = SessionUpdate::default();
    let sdk = meta
        .entry("claudeAgentSdk")
        .or_insert_with(|| Value::Object(Map::new()));
    if !sdk.is_object() {
        *sdk = Value::Object(Map::new());
    }
    let Value::Object(sdk) = sdk else {
        return Ok(());
    };
    let mut meta_changed = false;
    if let Some(side) = sidecar {
        sdk.extend(side);
        meta_changed = true;
    }
    // The importer's title: the first custom title, else the first summary.
    let custom_before = sdk.get("customTitle") == Some(&Value::Bool(true));
    match &d.title {
        Some((t, true)) if !custom_before => {
            u.title = Some(Some(t.clone()));
            sdk.insert("customTitle".into(), Value::Bool(true));
            meta_changed = true;
        }
        Some((t, false)) if row.title.is_none() => u.title = Some(Some(t.clone())),
        _ => {}
    }
    if meta_changed {
        u.metadata = Some(Some(meta));
    }
    if row.model.is_none() {
        u.model = d.model.clone().map(Some);
    }
    // A first batch without a `cwd` (the SDK's queue operations) left the project at the key.
    let project_from_key = row.project.as_deref() == Some(key.project_key.as_str());
    let project = match &d.cwd {
        Some(cwd) if wants_project && project_from_key => Some(cwd.as_str()),
        _ => row.project.as_deref(),
    };
    let provider = match (&row.provider, &u.model) {
        (None, Some(Some(_))) => Some("anthropic"),
        (p, _) => p.as_deref(),
    };
    if project != row.project.as_deref() || provider != row.provider.as_deref() {
        sessions::set_project_provider(w.conn, num, project, provider)?;
    }
    if u.title.is_some() || u.metadata.is_some() || u.model.is_some() {
        sessions::update(w.conn, num, &u, crate::model::clock::now_ms())?;
    }
    Ok(())
}

/// A session's row and its metadata as a map (empty when it has none).
fn row_and_metadata(w: &Writer, num: i64) -> Result<(sessions::Row, Map<String, Value>)> {
    let row = sessions::read_row(w.conn, num)?;
    let meta = row
        .metadata
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    Ok((row, meta))
}

/// A subagent's session: its `agent_metadata` entry as `metadata.agent`, and when it is new the
/// tool call that spawned it, if its parent's records name it already (else the parent's later
/// append links it: `note_spawned`).
fn link_agent(
    w: &mut Writer,
    place: &Place,
    agent: &str,
    created: bool,
    d: &Derived,
) -> Result<()> {
    let parent = place.parent.as_deref().unwrap_or_default();
    let call = match created {
        true => spawning_call(w, parent, agent)?,
        false => None,
    };
    if call.is_none() && (created || d.agent_meta.is_none()) {
        return Ok(());
    }
    let num = w.num();
    let (_, mut meta) = row_and_metadata(w, num)?;
    if let Some(call) = call {
        meta.insert("parentToolUseId".into(), Value::String(call));
    }
    if let (false, Some(a)) = (created, &d.agent_meta) {
        meta.insert("agent".into(), a.clone());
    }
    let u = SessionUpdate {
        metadata: Some(Some(meta)),
        ..SessionUpdate::default()
    };
    sessions::update(w.conn, num, &u, crate::model::clock::now_ms())
}

/// The tool call of session `parent` that spawned `agent`, from the parent's stored records.
fn spawning_call(w: &mut Writer, parent: &str, agent: &str) -> Result<Option<String>> {
    let Some(num) = sessions::num_of(w.conn, parent)? else {
        return Ok(None);
    };
    let last = crate::storage::records::last_seq(w.conn, num)?;
    let Some(last) = last else {
        return Ok(None);
    };
    for r in crate::storage::records::records_between(w.conn, num, 0, last)? {
        if let Value::Object(r) = r {
            if let Some((a, call)) = spawn_of(&r) {
                if a == agent {
                    return Ok(Some(call.to_string()));
                }
            }
        }
    }
    Ok(None)
}

/// Records of this batch that name the call spawning an agent whose session is stored already
/// (the SDK mirrors a subagent's transcript before the parent's tool result): the agent's session
/// learns its `parentToolUseId`, the first call that names it, as the importer links it.
fn note_spawned(w: &mut Writer, spawned: &[(String, String)]) -> Result<()> {
    for (agent, call) in spawned {
        let id = format!("{}/agent-{agent}", w.session_id());
        let Some(num) = sessions::num_of(w.conn, &id)? else {
            continue;
        };
        let (_, mut meta) = row_and_metadata(w, num)?;
        if meta.contains_key("parentToolUseId") {
            continue;
        }
        meta.insert("parentToolUseId".into(), Value::String(call.clone()));
        let u = SessionUpdate {
            metadata: Some(Some(meta)),
            ..SessionUpdate::default()
        };
        sessions::update(w.conn, num, &u, crate::model::clock::now_ms())?;
    }
    Ok(())
}

/// The entries of the session `key` names, as the JSON array text the SDK appended (in order,
/// keys and number text as given; the keys the store filled in and the importer's rewinds left
/// out), or `None` when there is no such session. The text is ASCII, characters outside it
/// `\uXXXX` escapes. Records are read as the store's text and given back as text
/// (`entry_text`): only a record the store changed (a filled-in key, a string content) is parsed.
pub fn load(store: &Store, key: &Key) -> Result<Option<String>> {
    let run = || -> Result<Option<String>> {
        let id = key.place().id;
        // A session this store holds is read through its handle: closing another one would let
        // go of it.
        if let Some(out) = store.with_held(&id, entries_text) {
            return out.map(Some);
        }
        let session = match store.open_session(&id, None) {
            Ok(s) => s,
            Err(Error::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let out = entries_text(&session);
        session.close();
        out.map(Some)
    };
    run().map_err(|e| e.during("claudeCodeLoad"))
}

/// Every entry of `session` as one JSON array text in ASCII: characters outside it as `\uXXXX`
/// escapes, as the store keeps them, so a JS caller gets a one-byte string V8 need not decode.
fn entries_text(session: &crate::session::Session) -> Result<String> {
    let mut out: Vec<u8> = Vec::with_capacity(1 << 12);
    out.push(b'[');
    let mut first = true;
    let mut from = Some(0);
    while let Some(f) = from {
        let page = session.envelopes_page(f, u64::MAX, crate::session::PAGE_BYTES)?;
        let records = elements(&page.json).ok_or_else(damaged)?;
        for (a, b) in records {
            let r = &page.json[a..b];
            let start = out.len();
            if !first {
                out.push(b',');
            }
            let kept = match entry_text(r, &mut out) {
                Some(kept) => kept,
                None => {
                    // the store changed the record (or it is not plain): parsed
                    out.truncate(start + usize::from(!first));
                    let Value::Object(o) =
                        crate::model::number_text::parse_stored(r).map_err(|_| damaged())?
                    else {
                        return Err(damaged());
                    };
                    match as_entry(o) {
                        Some(e) => {
                            crate::model::json::to_ascii(&e, &mut out)?;
                            true
                        }
                        None => false,
                    }
                }
            };
            if kept {
                first = false;
            } else {
                out.truncate(start);
            }
        }
        from = page.next;
    }
    out.push(b']');
    String::from_utf8(out).map_err(|_| damaged())
}

fn damaged() -> Error {
    Error::StoreCorrupt("a stored record is damaged: not JSON".into())
}

/// Writes the entry stored as record text `r` (compact JSON in ASCII, as the store writes it) to
/// `out` when the store added nothing to it but `seq`: its other members as stored, so the text
/// parses to what `as_entry` makes of it. `Some(false)`: a record of the store's own (a rewind),
/// no entry; `None`: `as_entry` has to see it.
fn entry_text(r: &[u8], out: &mut Vec<u8>) -> Option<bool> {
    if !r.is_ascii() {
        return None;
    }
    let members = members(r)?;
    for &(k, v, _) in &members {
        match &r[k..v - 1] {
            b"\"importedWithout\"" | b"\"importedStringContent\"" => return None,
            b"\"type\"" => match &r[v..] {
                t if t.starts_with(b"\"rewind\"") => return Some(false),
                t if t.starts_with(b"\"claude-agent-sdk-entry\"") => return None,
                _ => {}
            },
            _ => {}
        }
    }
    out.push(b'{');
    let mut first = true;
    for (k, v, end) in members {
        if &r[k..v - 1] == b"\"seq\"" {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(&r[k..end]);
    }
    out.push(b'}');
    Some(true)
}

/// The end (exclusive) of the JSON value that starts at `i` of compact text `t`.
fn value_end(t: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_str = false;
    while i < t.len() {
        match (in_str, t[i]) {
            (true, b'\\') => i += 1,
            (true, b'"') => {
                in_str = false;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            (true, _) => {}
            (false, b'"') => in_str = true,
            (false, b'{' | b'[') => depth += 1,
            (false, b'}' | b']') => {
                if depth == 0 {
                    return Some(i);
                }
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            (false, b',') if depth == 0 => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The elements of compact JSON array text, as (start, end).
fn elements(t: &[u8]) -> Option<Vec<(usize, usize)>> {
    if t.first() != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    if t.get(1) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = value_end(t, i)?;
        out.push((i, end));
        match t.get(end)? {
            b',' => i = end + 1,
            b']' => return Some(out),
            _ => return None,
        }
    }
}

/// The members of compact JSON object text, as (key start, value start, value end).
fn members(t: &[u8]) -> Option<Vec<(usize, usize, usize)>> {
    if t.first() != Some(&b'{') || t.last() != Some(&b'}') {
        return None;
    }
    let mut out = Vec::with_capacity(16);
    let mut i = 1;
    if t.get(1) == Some(&b'}') {
        return Some(out);
    }
    loop {
        if t.get(i) != Some(&b'"') {
            return None;
        }
        let colon = value_end(t, i)?;
        if t.get(colon) != Some(&b':') {
            return None;
        }
        let end = value_end(t, colon + 1)?;
        out.push((i, colon + 1, end));
        match t.get(end)? {
            b',' => i = end + 1,
            b'}' if end + 1 == t.len() => return Some(out),
            _ => return None,
        }
    }
}

/// A stored record as the entry the SDK appended; `None` for a record of the store's own (a
/// rewind the importer wrote).
fn as_entry(r: Map<String, Value>) -> Option<Value> {
    match r.get("type").and_then(Value::as_str) {
        Some(REWIND) => return None,
        Some(REFUSED_ENTRY) => {
            let mut r = r;
            return r.shift_remove("entry");
        }
        _ => {}
    }
    let r = as_imported(r, true);
    Some(Value::Object(r))
}

/// Lets go of the session `key` names if this store holds it from an `append` (an append keeps
/// its session claimed for the next: SESSION_LOCKED for another process until this, the
/// session's `delete` or the store's `close`); whether it held it.
pub fn release(store: &Store, key: &Key) -> Result<bool> {
    Ok(store.release_held(&key.place().id, false))
}

/// A session `sessions` lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    pub session_id: String,
    pub mtime: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Value>,
}

/// The main sessions of `project_key`: those mirrored under it, and those `import claude-code`
/// made whose project the SDK sanitises to it. `mtime`: the sidecar's, else when the session was
/// last written (ms). One query, whatever the number of sessions.
pub fn sessions(store: &Store, project_key: &str) -> Result<Vec<Listed>> {
    let run = || -> Result<Vec<Listed>> {
        let conn = store.reader()?;
        let mut out = Vec::new();
        for s in sessions::listed(&conn, None)? {
            let meta: Map<String, Value> = s
                .metadata
                .as_deref()
                .and_then(|m| serde_json::from_str(m).ok())
                .unwrap_or_default();
            let sdk = meta.get("claudeAgentSdk").and_then(Value::as_object);
            let ours = match sdk {
                Some(sdk) => sdk.get("projectKey").and_then(Value::as_str) == Some(project_key),
                None => {
                    meta.get("importedFrom")
                        .and_then(|f| f.get("format"))
                        .and_then(Value::as_str)
                        == Some("claude-code")
                        && !meta.contains_key("parentSessionId")
                        && s.project.as_deref().map(sanitize).as_deref() == Some(project_key)
                }
            };
            if !ours {
                continue;
            }
            let mtime = sdk
                .and_then(|m| m.get("mtime"))
                .filter(|m| m.is_number())
                .cloned()
                .unwrap_or_else(|| Value::from(s.updated_ms));
            out.push(Listed {
                session_id: s.id,
                mtime,
                summary: sdk.and_then(|m| m.get("summary")).cloned(),
            });
        }
        Ok(out)
    };
    run().map_err(|e| e.during("claudeCodeSessions"))
}

/// The subpaths of session `session_id`'s subagents: as mirrored, or `subagents/agent-X[/...]`
/// for imported ones.
pub fn subkeys(store: &Store, session_id: &str) -> Result<Vec<String>> {
    let run = || -> Result<Vec<String>> {
        let conn = store.reader()?;
        let prefix = format!("{session_id}/");
        let mut out = Vec::new();
        for s in sessions::listed(&conn, Some(&prefix))? {
            let meta: Map<String, Value> = s
                .metadata
                .as_deref()
                .and_then(|m| serde_json::from_str(m).ok())
                .unwrap_or_default();
            let mirrored = meta
                .get("claudeAgentSdk")
                .and_then(|m| m.get("subpath"))
                .and_then(Value::as_str);
            if let Some(sub) = mirrored {
                out.push(sub.to_string());
                continue;
            }
            let rest = &s.id[prefix.len()..];
            if meta.contains_key("agentId") && rest.split('/').all(|p| p.starts_with("agent-")) {
                let parts: Vec<String> =
                    rest.split('/').map(|p| format!("subagents/{p}")).collect();
                out.push(parts.join("/"));
            }
        }
        Ok(out)
    };
    run().map_err(|e| e.during("claudeCodeSubkeys"))
}

/// Deletes the session `key` names: a main key with all its subagents' sessions, a subpath key
/// that one only; nothing when it does not exist. Subagents go first, so a refused delete
/// (SESSION_LOCKED) leaves the main session, and a second call finishes.
pub fn delete(store: &Store, key: &Key) -> Result<()> {
    let run = || -> Result<()> {
        let id = key.place().id;
        // held by this store's appends: let go first (the delete checks no one else holds it)
        store.release_held(&id, key.subpath.is_none());
        let mut ids = Vec::new();
        if key.subpath.is_none() {
            let conn = store.reader()?;
            let prefix = format!("{id}/");
            ids.extend(
                sessions::listed(&conn, Some(&prefix))?
                    .into_iter()
                    .map(|s| s.id),
            );
            // deepest first
            ids.sort_by_key(|i| std::cmp::Reverse(i.matches('/').count()));
        }
        ids.push(id);
        for id in ids {
            match store.delete_session(&id) {
                Ok(()) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    };
    run().map_err(|e| e.during("claudeCodeDelete"))
}

/// How the SDK names a project folder: every character but ASCII letters and digits becomes `-`
/// (per UTF-16 unit, as JavaScript's replace counts them); past 200 units, the first 200 and a
/// hash of the path.
pub fn sanitize(path: &str) -> String {
    let units: Vec<u16> = path.encode_utf16().collect();
    let s: String = units
        .iter()
        .map(|&u| match u {
            0x30..=0x39 | 0x41..=0x5a | 0x61..=0x7a => u as u8 as char,
            _ => '-',
        })
        .collect();
    if s.len() <= 200 {
        return s;
    }
    // djb2 over UTF-16 units in 32-bit arithmetic, as the SDK's `(h << 5) - h + c | 0`
    let mut h: i32 = 0;
    for &u in &units {
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(u as i32);
    }
    format!("{}-{}", &s[..200], base36((h as i64).unsigned_abs()))
}

fn base36(mut n: u64) -> String {
    if n == 0 {
        return "0".into();
    }
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// An error about a part of the input, named.
fn prefix(what: &str, e: Error) -> Error {
    match e {
        Error::InvalidInput(m) => Error::InvalidInput(format!("{what}: {m}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_keys_are_sanitised_as_the_sdk_does() {
        assert_eq!(sanitize("/tmp/sdk/work"), "-tmp-sdk-work");
        // per UTF-16 unit: the emoji is two
        assert_eq!(sanitize("/a/\u{e9}\u{1F600}"), "-a----");
        // what the SDK 0.2's `la` gives for it (run in Node)
        let long = format!("/home/{}\u{e9}", "x".repeat(250));
        assert_eq!(sanitize(&long), format!("-home-{}-8swa3c", "x".repeat(194)));
    }

    #[test]
    fn subpaths_name_sessions_as_the_importer_names_files() {
        let key = |sub: Option<&str>| Key {
            project_key: "p".into(),
            session_id: "s".into(),
            subpath: sub.map(str::to_string),
            project: None,
        };
        assert_eq!(key(None).place().id, "s");
        let a = key(Some("subagents/agent-a1")).place();
        assert_eq!(
            (a.id.as_str(), a.agent.as_deref()),
            ("s/agent-a1", Some("a1"))
        );
        let b = key(Some("subagents/agent-A/subagents/agent-B")).place();
        assert_eq!(b.id, "s/agent-A/agent-B");
        assert_eq!(b.parent.as_deref(), Some("s/agent-A"));
        assert_eq!(key(Some("other/x")).place().id, "s/other/x");
    }
}
