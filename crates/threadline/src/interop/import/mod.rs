//! Import: sessions other agents wrote (Claude Code, Codex, pi, fspec codelet) brought into a
//! store. Each reader turns its files into [`Incoming`] sessions of records; this module writes
//! them. Records keep their own ids (or an id derived from the line that holds them), so a second
//! import of a grown file adds only what is new.

pub(crate) mod claude_code;
mod codex;
mod files;
mod fspec;
mod lines;
mod pi;
mod recognise;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::envelope::Draft;
use crate::model::options::SessionOptions;
use crate::store::Store;

/// The formats `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    ClaudeCode,
    Codex,
    Pi,
    Fspec,
}

impl Format {
    pub fn parse(s: &str) -> Result<Format> {
        match s {
            "claude-code" => Ok(Format::ClaudeCode),
            "codex" => Ok(Format::Codex),
            "pi" => Ok(Format::Pi),
            "fspec" => Ok(Format::Fspec),
            other => Err(Error::InvalidInput(format!(
                "source.format: expected 'claude-code', 'codex', 'pi' or 'fspec', got '{other}'"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Pi => "pi",
            Format::Fspec => "fspec",
        }
    }

    /// Its name for a person.
    pub fn title(self) -> &'static str {
        match self {
            Format::ClaudeCode => "Claude Code",
            Format::Codex => "Codex",
            Format::Pi => "pi",
            Format::Fspec => "fspec codelet",
        }
    }

    /// The files a walk of a folder looks for (see `files.rs`), for a person.
    fn looked_for(self) -> &'static str {
        match self {
            Format::ClaudeCode | Format::Pi => "*.jsonl files",
            Format::Codex => "rollout-*.jsonl files",
            Format::Fspec => "messages/messages.jsonl and sessions/*.json",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportOptions {
    /// the project of every imported session (else the one the files name)
    pub project: Option<String>,
    /// import sessions that were deleted from the store again (else they are skipped)
    #[serde(default)]
    pub include_deleted: bool,
}

/// How far an import has got, given after each file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub files: u64,
    pub total_files: u64,
    pub records: u64,
    pub bytes: u64,
    pub total_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedLine {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// sessions found in the source
    pub sessions: u64,
    /// of them, sessions the store did not have
    pub new_sessions: u64,
    /// records found in the source (lines that were not skipped)
    pub records: u64,
    /// of them, records the store did not have
    pub new_records: u64,
    /// lines not imported, with the reason; also files not read (no `line`): a FIFO, a device, a
    /// link that is dangling, loops, leads out of the folder or to a folder, a binary file
    pub skipped: Vec<SkippedLine>,
    /// records kept as events (not messages), counted by their type, unknown types included
    pub events: BTreeMap<String, u64>,
}

/// One session as a reader found it: its id in the store, its options when it is new, and its
/// records in order, each with the line it came from.
pub(crate) struct Incoming {
    pub id: String,
    pub options: SessionOptions,
    pub file: String,
    pub records: Vec<Line>,
    /// `{sessionId, uuid}`: the session and record a new session was forked from
    pub forked_from: Option<Value>,
}

pub(crate) struct Line {
    pub line: Option<u64>,
    pub record: Map<String, Value>,
}

/// What a reader gives back for one file: sessions, and lines it could not read.
#[derive(Default)]
pub(crate) struct Read {
    pub sessions: Vec<Incoming>,
    pub skipped: Vec<SkippedLine>,
    /// the file is not of the format: why (also in `skipped`)
    pub foreign: Option<String>,
}

/// Imports every file of `format` at `path` (a file, or a folder searched to any depth), calling
/// `progress` after each file.
pub fn import(
    store: &Store,
    format: Format,
    path: &Path,
    options: &ImportOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ImportReport> {
    let mut importer = Importer::new(format, path, options.clone())?;
    while let Some(at) = importer.step(store)? {
        progress(&at);
    }
    Ok(importer.into_report())
}

/// An import in steps of one file, so a caller can report progress between them (and run each
/// step where it likes: the Node binding runs them on the thread pool).
pub struct Importer {
    path: std::path::PathBuf,
    /// files found that were not of the format, and the first one's reason
    foreign: (usize, Option<String>),
    files: Vec<files::Found>,
    next: usize,
    reader: Reader,
    options: ImportOptions,
    at: Progress,
    report: ImportReport,
}

impl Importer {
    pub fn new(format: Format, path: &Path, options: ImportOptions) -> Result<Importer> {
        let walk = files::find(format, path).map_err(|e| e.during("import"))?;
        // An import that found nothing to read says so: `0 new of 0 sessions` would read as
        // success for a mistyped format or folder.
        if walk.files.is_empty() {
            let mut message = format!(
                "source.path: no {} session files were found in '{}' (looked for {} in it and the folders below)",
                format.title(),
                path.display(),
                format.looked_for()
            );
            if let Some(s) = walk.skipped.first() {
                message.push_str(&format!(
                    "; {} skipped, the first '{}': {}",
                    walk.skipped.len(),
                    s.file,
                    s.reason
                ));
            }
            return Err(Error::InvalidInput(message).during("import"));
        }
        let at = Progress {
            total_files: walk.files.len() as u64,
            total_bytes: walk.files.iter().map(|f| f.bytes).sum(),
            ..Progress::default()
        };
        Ok(Importer {
            path: path.to_path_buf(),
            foreign: (0, None),
            files: walk.files,
            next: 0,
            reader: Reader::new(format, walk.side_root),
            options,
            at,
            report: ImportReport {
                skipped: walk.skipped,
                ..ImportReport::default()
            },
        })
    }

    /// Imports the next file; `None` when every file is done. A file's sessions are each written
    /// in one transaction.
    pub fn step(&mut self, store: &Store) -> Result<Option<Progress>> {
        let Some(f) = self.files.get(self.next) else {
            return Ok(None);
        };
        let mut run = || {
            let read = self.reader.read(f, &self.options)?;
            self.report.skipped.extend(read.skipped);
            if let Some(reason) = read.foreign {
                self.foreign.0 += 1;
                self.foreign
                    .1
                    .get_or_insert(format!("'{}': {reason}", display(&f.path)));
            }
            for incoming in read.sessions {
                self.at.records += write(store, incoming, &self.options, &mut self.report)?;
            }
            Ok(())
        };
        run().map_err(|e: Error| e.during("import"))?;
        // Every file found was of another format (`import claude-code` of a Codex folder): an
        // error, not a report of nothing imported.
        if self.next + 1 == self.files.len() && self.foreign.0 == self.files.len() {
            return Err(Error::InvalidInput(format!(
                "source.path: none of the {} files found in '{}' is a {} session file ({})",
                self.files.len(),
                self.path.display(),
                self.reader.format().title(),
                self.foreign.1.as_deref().unwrap_or_default()
            ))
            .during("import"));
        }
        self.next += 1;
        self.at.files += 1;
        self.at.bytes += f.bytes;
        Ok(Some(self.at))
    }

    pub fn report(&self) -> &ImportReport {
        &self.report
    }

    pub fn into_report(self) -> ImportReport {
        self.report
    }
}

/// The reader of a format; it may carry what one file tells about another (a parent session's
/// tool calls, for its subagents).
enum Reader {
    ClaudeCode(claude_code::Reader),
    Codex,
    Pi,
    Fspec(fspec::Reader),
}

impl Reader {
    /// `root`: the folder side files (a subagent's `.meta.json`, fspec's blobs) must be in.
    fn new(format: Format, root: std::path::PathBuf) -> Reader {
        match format {
            Format::ClaudeCode => Reader::ClaudeCode(claude_code::Reader::new(root)),
            Format::Codex => Reader::Codex,
            Format::Pi => Reader::Pi,
            Format::Fspec => Reader::Fspec(fspec::Reader::new(root)),
        }
    }

    fn format(&self) -> Format {
        match self {
            Reader::ClaudeCode(_) => Format::ClaudeCode,
            Reader::Codex => Format::Codex,
            Reader::Pi => Format::Pi,
            Reader::Fspec(_) => Format::Fspec,
        }
    }

    fn read(&mut self, f: &files::Found, options: &ImportOptions) -> Result<Read> {
        if let Reader::Fspec(r) = self {
            return r.read(f, options);
        }
        let mut bad = Vec::new();
        let lines = match lines::read(f, &mut bad) {
            Ok(lines) => lines,
            Err(reason) => return unread(f, reason),
        };
        // One entry for a file that is not JSONL at all, rather than one per line of it, and
        // no session made of it.
        if lines.foreign() {
            let reason = format!(
                "not a {} session file: no line is a JSON object",
                self.format().title()
            );
            return foreign(f, reason);
        }
        // An empty file (Claude Code leaves some behind) is no session: made one, it would be
        // an empty session listed first.
        if lines.lines.is_empty() {
            let reason = match lines.nonblank {
                0 if f.bytes == 0 => "empty file (0 bytes): no session to import".to_string(),
                0 => "no records in this file (only blank lines): no session to import".into(),
                _ => "no line of this file could be read: no session to import".into(),
            };
            let mut read = Read::skipped(f, reason);
            bad.append(&mut read.skipped);
            read.skipped = bad;
            return Ok(read);
        }
        if let Some(reason) = recognise::not_of(self.format(), &lines.lines) {
            return foreign(f, reason);
        }
        let mut read = match self {
            Reader::ClaudeCode(r) => r.read(f, lines.lines, options),
            Reader::Codex => codex::read(f, lines.lines, options),
            Reader::Pi => pi::read(f, lines.lines, options),
            Reader::Fspec(_) => Ok(Read::default()),
        }?;
        bad.append(&mut read.skipped);
        read.skipped = bad;
        Ok(read)
    }
}

impl Read {
    /// A file not read, and why.
    fn skipped(f: &files::Found, reason: String) -> Read {
        Read {
            sessions: Vec::new(),
            skipped: vec![SkippedLine {
                file: display(&f.path),
                line: None,
                reason,
            }],
            foreign: None,
        }
    }
}

/// A file of another format: refused when it is the path given (nothing is imported), skipped
/// when a walk found it (the folder may hold other files).
fn foreign(f: &files::Found, reason: String) -> Result<Read> {
    if f.explicit {
        return Err(Error::InvalidInput(format!(
            "source.path: '{}' is {reason}",
            f.path.display()
        )));
    }
    let mut read = Read::skipped(f, reason.clone());
    read.foreign = Some(reason);
    Ok(read)
}

/// A file that could not be opened or read: skipped and reported when a walk found it, an error
/// when it is the path the import was given.
pub(crate) fn unread(f: &files::Found, reason: String) -> Result<Read> {
    if f.explicit {
        return Err(Error::InvalidInput(format!(
            "source.path: cannot read '{}': {reason}",
            f.path.display()
        )));
    }
    Ok(Read::skipped(f, reason))
}

/// Writes one incoming session: created if the store lacks it, then its records, those already
/// stored left out. Returns how many records it had.
fn write(
    store: &Store,
    incoming: Incoming,
    options: &ImportOptions,
    report: &mut ImportReport,
) -> Result<u64> {
    let mut created = false;
    let session = match store.open_session(&incoming.id, None) {
        Ok(s) => s,
        Err(Error::NotFound(_))
            if !options.include_deleted && deleted(store, &incoming, report)? =>
        {
            return Ok(0)
        }
        Err(Error::NotFound(_)) => {
            created = true;
            report.new_sessions += 1;
            let mut options = incoming.options;
            options.id = Some(incoming.id.clone());
            store.create_session(options)?
        }
        Err(e) => return Err(e),
    };
    report.sessions += 1;
    let mut lines = Vec::with_capacity(incoming.records.len());
    let mut drafts = Vec::with_capacity(incoming.records.len());
    let mut skipped = Vec::new();
    for (i, l) in incoming.records.into_iter().enumerate() {
        lines.push(l.line);
        let ty = l
            .record
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string);
        match Draft::from_envelope(l.record) {
            Ok(mut d) => {
                d.tokens = token_patch(&d);
                if d.message.is_none() {
                    *report.events.entry(ty.unwrap_or_default()).or_default() += 1;
                }
                drafts.push((i, d));
            }
            Err(e) => skipped.push(crate::session::Skipped {
                index: i,
                reason: e.message().to_string(),
            }),
        }
    }
    date_undated(&mut drafts);
    // every record the file had; those skipped (here or by the write) are not counted
    let count = lines.len() as u64;
    // A new session keeps the times of its source: it began at its first record and was last
    // written at its last (so `ls` lists imported sessions by when they happened).
    let origin = crate::session::Origin {
        status: created.then(|| ended(&drafts)),
        dated: created.then(|| span(&drafts)).flatten(),
        forked_from: incoming.forked_from.filter(|_| created),
    };
    report.new_records += session.import_records(drafts, &mut skipped, origin)?;
    report.records += count - skipped.len() as u64;
    skipped.sort_by_key(|s| s.index);
    report
        .skipped
        .extend(skipped.into_iter().map(|s| SkippedLine {
            file: incoming.file.clone(),
            line: lines[s.index],
            // the store's reason names the field; the reader needs to know what it means
            reason: format!(
                "not imported, a record Threadline cannot store: {}",
                s.reason
            ),
        }));
    session.close();
    Ok(count)
}

/// Whether the store deleted the session `incoming` would create: then it is not brought back
/// (an import on a schedule would undo every delete), and the report says so.
fn deleted(store: &Store, incoming: &Incoming, report: &mut ImportReport) -> Result<bool> {
    let Some(ms) = store.deleted_at(&incoming.id)? else {
        return Ok(false);
    };
    let when = crate::model::clock::iso_from_ms(ms);
    report.skipped.push(SkippedLine {
        file: incoming.file.clone(),
        line: None,
        reason: format!(
            "session '{}' was deleted on {} {} UTC; --include-deleted (includeDeleted: true) brings it back",
            incoming.id,
            when.get(..10).unwrap_or(&when),
            when.get(11..16).unwrap_or_default()
        ),
    });
    Ok(true)
}

/// How an imported session ended, as far as its records tell: `interrupted` when its last
/// response asked for tools that nothing answered (the agent was stopped while they ran), else
/// `completed` (the source holds a conversation that is over; none says more).
pub(crate) fn ended(drafts: &[(usize, Draft)]) -> crate::model::options::Status {
    use crate::model::options::Status;
    let mut pending = 0usize;
    for (_, d) in drafts {
        let Some(m) = d.env.get("message") else {
            continue;
        };
        let blocks = m.get("content").and_then(Value::as_array);
        let uses = blocks.map_or(0, |b| {
            b.iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .count()
        });
        match m.get("role").and_then(Value::as_str) {
            // whatever the user sent next answered or replaced the calls before it
            Some("user") => pending = 0,
            Some("assistant") => pending += uses,
            _ => {}
        }
    }
    if pending > 0 {
        Status::Interrupted
    } else {
        Status::Completed
    }
}

/// An id for a record that has none of its own, the same on every import of the same file:
/// derived from the session, the line's text and how many identical lines came before it.
pub(crate) fn derived_uuid(session: &str, text: &str, nth: u64) -> String {
    crate::model::derived_uuid::from_parts(&[
        session.as_bytes(),
        &[0],
        text.as_bytes(),
        &nth.to_le_bytes(),
    ])
}

/// The rewind an importer writes where its source went back to record `to` and continued with
/// record `before` (dated at it); the uuid is derived from them, so a second import finds it.
pub(crate) fn rewind_record(
    session: &str,
    to: &str,
    before: &str,
    at: Option<&Value>,
) -> Map<String, Value> {
    let mut r = Map::new();
    if let Some(t) = at {
        r.insert("timestamp".into(), t.clone());
    }
    r.insert(
        "type".into(),
        Value::String(crate::model::envelope::REWIND.into()),
    );
    r.insert(
        "uuid".into(),
        Value::String(derived_uuid(
            session,
            &format!("rewind to {to} before {before}"),
            0,
        )),
    );
    r.insert("parentUuid".into(), Value::String(to.into()));
    r.insert("includeInContext".into(), Value::Bool(false));
    let mut w = Map::new();
    w.insert("toUuid".into(), Value::String(to.into()));
    r.insert("rewind".into(), Value::Object(w));
    r
}

/// The keys `append` fills in when a record lacks them. An imported record that lacked some gets
/// `importedWithout` naming them, so an export can give the record back as it was.
pub(crate) const FILLED_KEYS: [&str; 4] = ["uuid", "parentUuid", "sessionId", "timestamp"];

pub(crate) fn mark_filled(record: &mut Map<String, Value>) {
    let missing: Vec<Value> = FILLED_KEYS
        .iter()
        .filter(|k| !record.contains_key(**k))
        .map(|k| Value::String((*k).to_string()))
        .collect();
    if !missing.is_empty() {
        record.insert("importedWithout".into(), Value::Array(missing));
    }
}

/// Notes where a session came from (`metadata.importedFrom`: format and file) and gives back its
/// metadata for more.
pub(crate) fn imported_from<'a>(
    o: &'a mut SessionOptions,
    format: Format,
    file: &str,
) -> &'a mut Map<String, Value> {
    let m = o.metadata.get_or_insert_with(Map::new);
    let mut source = Map::new();
    source.insert("format".into(), Value::String(format.as_str().into()));
    source.insert("file".into(), Value::String(file.into()));
    m.insert("importedFrom".into(), Value::Object(source));
    m
}

pub(crate) fn display(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// A `token_state` record (Threadline's own, or one an importer made) sets the token tracker.
pub(crate) fn token_patch(d: &Draft) -> Option<crate::model::state::TokenPatch> {
    if d.record_type() != "token_state" {
        return None;
    }
    serde_json::from_value(d.env.get("data")?.clone()).ok()
}

/// A record its source left undated (a legacy Codex item, a token count or compaction an
/// importer made) takes the time of the dated record before it, or of the first dated one: it
/// happened then, not at the import, and `usage` by day and `ls` count it there. Where the key
/// was missing from a kept line, `importedWithout` already says so and an export removes it.
pub(crate) fn date_undated(drafts: &mut [(usize, Draft)]) {
    let dated = |d: &Draft| {
        d.str_field("timestamp")
            .filter(|t| crate::model::clock::parse_ms(t).is_some())
            .map(str::to_string)
    };
    let Some(mut last) = drafts.iter().find_map(|(_, d)| dated(d)) else {
        return;
    };
    for (_, d) in drafts.iter_mut() {
        if let Some(t) = dated(d) {
            last = t;
        } else if !d.env.contains_key("timestamp") {
            d.env
                .insert("timestamp".into(), Value::String(last.clone()));
        }
    }
}

/// The earliest and latest timestamps of the records, in ms.
pub(crate) fn span(drafts: &[(usize, Draft)]) -> Option<(i64, i64)> {
    let times = drafts
        .iter()
        .filter_map(|(_, d)| d.str_field("timestamp"))
        .filter_map(crate::model::clock::parse_ms);
    times.fold(None, |acc, t| match acc {
        None => Some((t, t)),
        Some((lo, hi)) => Some((lo.min(t), hi.max(t))),
    })
}
