//! fspec codelet's data directory (`~/.fspec`, MIT, sengac/fspec):
//! - `messages/messages.jsonl`: every message of every session, one `StoredMessage` a line
//!   (`id`, `content_hash`, `created_at`, `role`, `content` (a text preview), `token_count`,
//!   `blob_refs`, and `metadata`: the message's envelope, in Claude Code's shape: `uuid`,
//!   `parentUuid`, `timestamp`, `type`, `provider`, `message`, `requestId`, with `_blobRefs` and
//!   `_actualTokenCount` beside it);
//! - `sessions/<id>.json`: a manifest per session: `name`, `project`, `provider`, its messages as
//!   ids in order, each with where it came from (`"Native"`, `{"Forked": ..}`, `{"Imported": ..}`),
//!   `forked_from`, `merged_from`, a `compaction` (a summary that stands for the messages before
//!   `compacted_before_index`) and `token_usage`;
//! - `blobs/<2 hex>/<sha256>`: content over 10 KB, named in an envelope by `blob:sha256:<hash>`
//!   (a tool use's input by `{"_blob_ref": ..}`).
//!
//! A manifest becomes a session, its messages records (uuid: the message's id), with the blobs
//! put back. What has no place in a record (the preview, hash, token count, the envelope's own
//! fields, where the message came from) rides along as `fspec`. A compaction becomes a Threadline
//! compaction, token usage a token state, a fork the session's `forkedFrom`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::files::{check, read_bytes, read_text, Found};
use super::lines::JsonLine;
use super::{
    derived_uuid, display, imported_from, mark_filled, unread, Format, ImportOptions, Incoming,
    Line, Read, SkippedLine,
};
use crate::error::Result;
use crate::model::options::SessionOptions;

const BLOB_REF: &str = "blob:sha256:";

/// A messages file's stored messages by id, each with its line.
type Stored = HashMap<String, (u64, Map<String, Value>)>;

/// Reads a data directory: its messages file first (the file walk finds it before the
/// manifests), then each manifest.
pub(crate) struct Reader {
    /// data directory -> message id -> (line, stored message)
    messages: HashMap<PathBuf, Stored>,
    /// the folder the messages file and blobs must be in to be read
    root: PathBuf,
}

impl Reader {
    pub fn new(root: PathBuf) -> Reader {
        Reader {
            messages: HashMap::new(),
            root,
        }
    }

    pub fn read(&mut self, f: &Found, options: &ImportOptions) -> Result<Read> {
        let mut read = Read::default();
        let data = data_dir(&f.path);
        if is_messages_file(&f.path) {
            return match messages(f, &mut read.skipped) {
                Ok(index) => {
                    self.messages.insert(data, index);
                    Ok(read)
                }
                Err(reason) => {
                    // read once: its manifests find no messages rather than try again
                    self.messages.insert(data, Stored::new());
                    unread(f, reason)
                }
            };
        }
        if !self.messages.contains_key(&data) {
            // a manifest read without its data directory's messages file in the walk
            let path = data.join("messages").join("messages.jsonl");
            let index = if path.symlink_metadata().is_err() {
                Stored::new()
            } else {
                match check(&path, &self.root).and_then(|m| messages(&m, &mut read.skipped)) {
                    Ok(index) => index,
                    Err(reason) => {
                        read.skipped.push(SkippedLine {
                            file: display(&path),
                            line: None,
                            reason,
                        });
                        Stored::new()
                    }
                }
            };
            self.messages.insert(data.clone(), index);
        }
        let text = match read_text(f) {
            Ok(text) => text,
            Err(reason) => return unread(f, reason),
        };
        let file = display(&f.path);
        let manifest = match crate::model::json::parse(&text) {
            Ok(Value::Object(m)) if m.get("id").is_some_and(Value::is_string) => m,
            Ok(_) => {
                read.skipped.push(SkippedLine {
                    file,
                    line: None,
                    reason: "not an fspec session manifest (an object with an id)".into(),
                });
                return Ok(read);
            }
            Err(e) => {
                read.skipped.push(SkippedLine {
                    file,
                    line: None,
                    reason: format!("not JSON: {}", e.message()),
                });
                return Ok(read);
            }
        };
        let messages = &self.messages[&data];
        let session = Session {
            manifest: &manifest,
            messages,
            blobs: &data.join("blobs"),
            root: &self.root,
            file: &file,
        };
        let incoming = session.incoming(options, &mut read.skipped);
        read.sessions.push(incoming);
        Ok(read)
    }
}

fn is_messages_file(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "messages.jsonl")
}

/// The data directory of a messages file or a manifest: the folder above theirs.
fn data_dir(path: &Path) -> PathBuf {
    path.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The stored messages of a messages file by id; `Err` says why the file was not read.
fn messages(f: &Found, skipped: &mut Vec<SkippedLine>) -> std::result::Result<Stored, String> {
    let mut bad = Vec::new();
    let lines = super::lines::read(f, &mut bad)?;
    if lines.foreign() {
        return Err("not an fspec messages file: no line is a JSON object".into());
    }
    skipped.append(&mut bad);
    Ok(index(&display(&f.path), lines.lines, skipped))
}

fn index(file: &str, lines: Vec<JsonLine>, skipped: &mut Vec<SkippedLine>) -> Stored {
    let mut out = HashMap::new();
    for l in lines {
        match l.value.get("id").and_then(Value::as_str) {
            Some(id) => {
                out.insert(id.to_string(), (l.number, l.value));
            }
            None => skipped.push(SkippedLine {
                file: file.to_string(),
                line: Some(l.number),
                reason: "a stored message without an id".into(),
            }),
        }
    }
    out
}

/// One manifest and what it needs to become a session.
struct Session<'a> {
    manifest: &'a Map<String, Value>,
    messages: &'a Stored,
    blobs: &'a Path,
    root: &'a Path,
    file: &'a str,
}

impl Session<'_> {
    fn s(&self, k: &str) -> Option<String> {
        self.manifest
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    }

    fn incoming(&self, options: &ImportOptions, skipped: &mut Vec<SkippedLine>) -> Incoming {
        let id = self.s("id").unwrap_or_default();
        let refs: &[Value] = self
            .manifest
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let mut records = Vec::with_capacity(refs.len() + 2);
        let mut uuids: Vec<Option<String>> = Vec::with_capacity(refs.len());
        let mut used = HashSet::new();
        for (i, r) in refs.iter().enumerate() {
            let message_id = r.get("message_id").and_then(Value::as_str).unwrap_or("");
            let Some((line, stored)) = self.messages.get(message_id) else {
                skipped.push(SkippedLine {
                    file: self.file.to_string(),
                    line: None,
                    reason: format!(
                        "messages[{i}]: message '{message_id}' is not in messages/messages.jsonl"
                    ),
                });
                uuids.push(None);
                continue;
            };
            // A message merged in twice is one record each time.
            let uuid = if used.insert(message_id.to_string()) {
                message_id.to_string()
            } else {
                derived_uuid(&id, &format!("{message_id} at {i}"), 0)
            };
            let record = self.record(stored, r.get("source"), &uuid);
            uuids.push(Some(uuid));
            records.push(Line {
                line: Some(*line),
                record,
            });
        }
        if let Some(c) = self.manifest.get("compaction").and_then(Value::as_object) {
            let at = compaction_place(c, &records);
            records.insert(
                at,
                Line {
                    line: None,
                    record: compaction(&id, c, &uuids),
                },
            );
        }
        if let Some(t) = self.manifest.get("token_usage").and_then(token_state) {
            records.push(Line {
                line: None,
                record: with_derived_uuid(&id, t),
            });
        }
        let mut o = SessionOptions {
            project: options.project.clone().or_else(|| self.s("project")),
            title: self.s("name"),
            provider: self.s("provider"),
            ..SessionOptions::default()
        };
        let m = imported_from(&mut o, Format::Fspec, self.file);
        let mut rest = self.manifest.clone();
        for k in ["id", "name", "project", "provider", "messages"] {
            rest.shift_remove(k);
        }
        m.insert("fspec".into(), Value::Object(rest));
        Incoming {
            forked_from: self.forked_from(),
            id,
            options: o,
            file: self.file.to_string(),
            records,
        }
    }

    /// A fork's `forkedFrom`: the source session, and the last message they share.
    fn forked_from(&self) -> Option<Value> {
        let f = self.manifest.get("forked_from")?.as_object()?;
        let source = f.get("source_session_id")?.as_str()?;
        let at = f.get("fork_after_index")?.as_u64()? as usize;
        let uuid = self
            .manifest
            .get("messages")?
            .get(at)?
            .get("message_id")?
            .as_str()?;
        Some(json!({"sessionId": source, "uuid": uuid}))
    }

    /// A stored message as its record.
    fn record(
        &self,
        stored: &Map<String, Value>,
        source: Option<&Value>,
        uuid: &str,
    ) -> Map<String, Value> {
        let mut rest = stored.clone();
        let mut envelope = match rest.shift_remove("metadata") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let role = stored.get("role").and_then(Value::as_str).unwrap_or("user");
        let mut message = envelope.shift_remove("message").unwrap_or_else(|| {
            let text = stored.get("content").cloned().unwrap_or(json!(""));
            json!({"role": role, "content": [{"type": "text", "text": text}]})
        });
        let mut extra = Map::new();
        self.rehydrate(&mut message, &mut extra);
        let mut r = Map::new();
        r.insert(
            "type".into(),
            envelope.get("type").cloned().unwrap_or(json!(role)),
        );
        r.insert("uuid".into(), json!(uuid));
        let time = envelope
            .get("timestamp")
            .or_else(|| stored.get("created_at"))
            .cloned();
        if let Some(t) = time {
            r.insert("timestamp".into(), t);
        }
        r.insert("message".into(), message);
        // where Claude Code keeps it (its readers count a response once per message id and
        // requestId)
        if let Some(id) = envelope.get("requestId").filter(|v| v.is_string()) {
            r.insert("requestId".into(), id.clone());
        }
        if !envelope.is_empty() {
            rest.insert("metadata".into(), Value::Object(envelope));
        }
        if let Some(s) = source.filter(|s| s.as_str() != Some("Native")) {
            rest.insert("source".into(), s.clone());
        }
        rest.extend(extra);
        r.insert("fspec".into(), Value::Object(rest));
        // the parent is the record before (fspec's envelopes leave parentUuid null)
        mark_filled(&mut r);
        r
    }

    /// Puts back what went to `blobs/`; a blob that is missing stays a reference, named in
    /// `missingBlobs`. A tool result's `tool_use_result` (fspec's, not the provider's) moves to
    /// `toolUseResults`.
    fn rehydrate(&self, message: &mut Value, extra: &mut Map<String, Value>) {
        let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
            return;
        };
        let mut missing = Vec::new();
        let mut results = Vec::new();
        for (i, b) in blocks.iter_mut().enumerate() {
            let Some(b) = b.as_object_mut() else { continue };
            if let Some(r) = b.shift_remove("tool_use_result") {
                results.push(json!({"index": i, "value": r}));
            }
            let slot = match b.get("type").and_then(Value::as_str) {
                Some("tool_result") => b.get_mut("content"),
                Some("thinking") => b.get_mut("thinking"),
                Some("image" | "document") => b.get_mut("source").and_then(|s| s.get_mut("data")),
                Some("tool_use") => {
                    let reference = b
                        .get("input")
                        .and_then(|i| i.get("_blob_ref"))
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    if let Some(r) = reference {
                        match self.blob(&r).and_then(|t| serde_json::from_str(&t).ok()) {
                            Some(input) => {
                                b.insert("input".into(), input);
                            }
                            None => missing.push(json!(r)),
                        }
                    }
                    None
                }
                _ => None,
            };
            let Some(slot) = slot else { continue };
            let Some(r) = slot.as_str().filter(|s| s.starts_with(BLOB_REF)) else {
                continue;
            };
            match self.blob(r) {
                Some(text) => *slot = Value::String(text),
                None => missing.push(json!(r)),
            }
        }
        if !missing.is_empty() {
            extra.insert("missingBlobs".into(), Value::Array(missing));
        }
        if !results.is_empty() {
            extra.insert("toolUseResults".into(), Value::Array(results));
        }
    }

    /// The text of blob `blob:sha256:<hash>`, at `blobs/<first two>/<hash>`.
    fn blob(&self, reference: &str) -> Option<String> {
        let hash = reference.strip_prefix(BLOB_REF)?;
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        // a FIFO, a device or a link out of the data directory is a missing blob
        let found = check(&self.blobs.join(&hash[..2]).join(hash), self.root).ok()?;
        let bytes = read_bytes(&found).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Where the compaction goes: after the last message written before it was made (or at the
/// end, when the times don't tell).
fn compaction_place(c: &Map<String, Value>, records: &[Line]) -> usize {
    let ms = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(crate::model::clock::parse_ms)
    };
    let Some(at) = ms(c.get("compacted_at")) else {
        return records.len();
    };
    records
        .iter()
        .rposition(|l| ms(l.record.get("timestamp")).is_some_and(|t| t <= at))
        .map_or(0, |i| i + 1)
}

/// A manifest's compaction: the summary stands for the messages before
/// `compacted_before_index`.
fn compaction(
    session: &str,
    c: &Map<String, Value>,
    uuids: &[Option<String>],
) -> Map<String, Value> {
    let mut spec = Map::new();
    spec.insert(
        "summary".into(),
        c.get("summary").cloned().unwrap_or(json!("")),
    );
    let kept = c
        .get("compacted_before_index")
        .and_then(Value::as_u64)
        .and_then(|i| uuids.get(i as usize..))
        .and_then(|rest| rest.iter().flatten().next());
    if let Some(k) = kept {
        spec.insert("firstKeptUuid".into(), json!(k));
    }
    spec.insert("trigger".into(), json!("auto"));
    let mut r = Map::new();
    r.insert("type".into(), json!("compaction"));
    if let Some(t) = c.get("compacted_at") {
        r.insert("timestamp".into(), t.clone());
    }
    r.insert("compaction".into(), Value::Object(spec));
    r.insert("fspec".into(), Value::Object(c.clone()));
    with_derived_uuid(session, r)
}

/// The manifest's token usage as a token state (none when it is all zero).
fn token_state(u: &Value) -> Option<Map<String, Value>> {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let data = json!({
        "contextTokens": n("current_context_tokens"),
        "cumulativeInputTokens": n("cumulative_billed_input"),
        "cumulativeOutputTokens": n("cumulative_billed_output"),
        "cacheReadInputTokens": n("cache_read_tokens"),
        "cacheCreationInputTokens": n("cache_creation_tokens"),
    });
    if data.as_object()?.values().all(|v| v == &json!(0)) {
        return None;
    }
    let mut r = Map::new();
    r.insert("type".into(), json!("token_state"));
    r.insert("data".into(), data);
    r.insert("fspec".into(), u.clone());
    Some(r)
}

/// A record made from the manifest has no id of its own: one derived from its content, so a
/// second import finds it (and a changed compaction or usage is a new record).
fn with_derived_uuid(session: &str, mut r: Map<String, Value>) -> Map<String, Value> {
    let text = Value::Object(r.clone()).to_string();
    r.insert("uuid".into(), json!(derived_uuid(session, &text, 0)));
    mark_filled(&mut r);
    r
}
