//! Recall tools: `session_list`, `session_search` and `session_read`, defined for Anthropic,
//! OpenAI Chat and OpenAI Responses, and one `handle` that answers a model's call with a
//! `tool_result` block. The flow is discovery -> scroll -> read: list or search, then read a
//! session or the window around a hit; every result is bounded by `max_result_tokens` and says
//! how to read on. A model's bad arguments get an `is_error` result saying what was wrong.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::search::SearchOptions;
use super::transcript;
use crate::error::{Error, Result};
use crate::model::fields::Field;
use crate::model::options::SessionFilter;
use crate::model::tokens::{head_within, quarters};
use crate::store::Store;

pub const NAMES: [&str; 3] = ["session_list", "session_search", "session_read"];
const DEFAULT_MAX_RESULT_TOKENS: u64 = 4_000;
/// Tokens of a query or a project repeated in a result, at most.
const ECHO_TOKENS: u64 = 25;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecallOptions {
    /// the session the model is in: left out of every result
    pub exclude_session_id: Option<String>,
    /// only sessions of this project
    pub project: Option<String>,
    pub max_result_tokens: Option<u64>,
}

/// The tools, bound to a store.
pub struct RecallTools<'s> {
    store: &'s Store,
    options: RecallOptions,
}

impl Store {
    /// The recall tools for this store.
    pub fn recall_tools(&self, options: RecallOptions) -> Result<RecallTools<'_>> {
        if let Some(n) = options.max_result_tokens {
            if !(200..=200_000).contains(&n) {
                return Err(Error::InvalidInput(format!(
                    "recallTools: options.maxResultTokens: expected 200 to 200000, got {n}"
                )));
            }
        }
        Ok(RecallTools {
            store: self,
            options,
        })
    }
}

/// The tools' definitions: name, description, JSON schema of the input.
fn definitions() -> Vec<(&'static str, &'static str, Value)> {
    let time = |what: &str| json!({"type": "string", "description": format!("ISO 8601 date-time: {what}")});
    vec![
        (
            "session_list",
            "List earlier sessions (conversations) of this agent, newest first: id, title or first prompt, project, status, last activity, message count. Use it to find a session by date or topic, then session_read to read it.",
            json!({
                "type": "object",
                "properties": {
                    "since": time("only sessions active at or after it"),
                    "until": time("only sessions active at or before it"),
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "sessions per page (default 20)"},
                    "cursor": {"type": "string", "description": "the cursor a previous result gave, for the next page"}
                },
                "additionalProperties": false
            }),
        ),
        (
            "session_search",
            "Search the messages of earlier sessions. Words must all match; \"exact phrase\"; prefix*; a OR b; -excluded. Returns hits with the session, the record's uuid and the matching text; read around a hit with session_read and around_uuid.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to look for"},
                    "session_id": {"type": "string", "description": "only this session"},
                    "since": time("only messages at or after it"),
                    "until": time("only messages at or before it"),
                    "fields": {"type": "array", "items": {"type": "string", "enum": ["text", "thinking", "tool_input", "tool_output"]}, "description": "where to look (default: text and tool_input)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "hits per page (default 10)"},
                    "cursor": {"type": "string", "description": "the cursor a previous result gave, for more hits"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        ),
        (
            "session_read",
            "Read an earlier session's conversation: from its start, from a record (from_seq), around a search hit (around_uuid), or one record whole (record_seq). Long outputs are previewed; the result says how to read on.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "description": "the session to read"},
                    "around_uuid": {"type": "string", "description": "start a few records before this one (a search hit's uuid)"},
                    "from_seq": {"type": "integer", "minimum": 0, "description": "start at this record"},
                    "record_seq": {"type": "integer", "minimum": 0, "description": "read this one record whole"},
                    "char_offset": {"type": "integer", "minimum": 0, "description": "with record_seq: go on from this character"}
                },
                "required": ["session_id"],
                "additionalProperties": false
            }),
        ),
    ]
}

impl RecallTools<'_> {
    pub fn names(&self) -> Vec<&'static str> {
        NAMES.to_vec()
    }

    /// For Anthropic's `messages.create({ tools })`.
    pub fn anthropic(&self) -> Vec<Value> {
        definitions()
            .into_iter()
            .map(|(name, description, schema)| {
                json!({"name": name, "description": description, "input_schema": schema})
            })
            .collect()
    }

    /// For OpenAI Chat Completions' `tools`.
    pub fn openai_chat(&self) -> Vec<Value> {
        definitions()
            .into_iter()
            .map(|(name, description, schema)| {
                json!({"type": "function", "function": {"name": name, "description": description, "parameters": schema}})
            })
            .collect()
    }

    /// For OpenAI Responses' `tools`.
    pub fn openai_responses(&self) -> Vec<Value> {
        definitions()
            .into_iter()
            .map(|(name, description, schema)| {
                json!({"type": "function", "name": name, "description": description, "parameters": schema, "strict": false})
            })
            .collect()
    }

    /// Answers a call: `{name, input}`, an Anthropic `tool_use` block, an OpenAI Chat tool call
    /// (`{id, function: {name, arguments}}`, or a custom one, `{id, custom: {name, input}}`, whose
    /// input must be a JSON object's text) or a Responses `function_call`. Always a
    /// `tool_result` block: what went wrong is said in an `is_error` one. Errors of the store
    /// itself (closed, damaged) are thrown, and an id that is not a string (INVALID_INPUT: the
    /// provider's SDKs give strings, and a result must name its call by one).
    pub fn handle(&self, call: &Value) -> Result<Value> {
        // A Responses `function_call` item has an id of its own beside the `call_id` its output
        // answers.
        let given = ["call_id", "id"]
            .into_iter()
            .find_map(|k| call.get(k).filter(|v| !v.is_null()).map(|v| (k, v)));
        let id = match given {
            None => String::new(),
            Some((_, Value::String(s))) => s.clone(),
            Some((k, v)) => {
                return Err(Error::InvalidInput(format!(
                    "recallTools.handle: call.{k}: expected a string, got {}",
                    crate::model::message::kind(v)
                )))
            }
        };
        let answer = match Call::of(call) {
            Ok(c) => self.answer(&c),
            Err(why) => Ok(Err(why)),
        }?;
        Ok(match answer {
            Ok(text) => json!({"type": "tool_result", "tool_use_id": id, "content": text}),
            Err(why) => {
                json!({"type": "tool_result", "tool_use_id": id, "content": why, "is_error": true})
            }
        })
    }

    /// The text of a result, or (inner Err) what the model got wrong.
    fn answer(&self, c: &Call) -> Result<std::result::Result<String, String>> {
        let r = match c.name.as_str() {
            "session_list" => self.list(&c.input),
            "session_search" => self.search(&c.input),
            "session_read" => self.read(&c.input),
            other => {
                return Ok(Err(format!(
                    "unknown tool '{other}': expected one of {}",
                    NAMES.join(", ")
                )))
            }
        };
        match r {
            Ok(text) => Ok(Ok(text)),
            // The model's mistakes are its to fix; the store's failures are the caller's.
            Err(Error::InvalidInput(m)) | Err(Error::NotFound(m)) => Ok(Err(m)),
            Err(e) => Err(e),
        }
    }

    /// The room of a result, less what `reserved` will take of it.
    fn budget(&self, reserved: &[&str]) -> Budget {
        let max = self
            .options
            .max_result_tokens
            .unwrap_or(DEFAULT_MAX_RESULT_TOKENS);
        let mut b = Budget { room: max * 4 };
        for r in reserved {
            b.take(r);
        }
        b
    }

    fn list(&self, input: &Map<String, Value>) -> Result<String> {
        let a = Args::new(input, &["since", "until", "limit", "cursor"])?;
        let limit = a.int("limit", 1, 50)?.unwrap_or(20);
        let offset = a.offset()?;
        let filter = SessionFilter {
            project: self.options.project.clone(),
            since: a.time("since")?,
            until: a.time("until")?,
            ..SessionFilter::default()
        };
        let sessions: Vec<_> = self
            .store
            .list_sessions(&filter)?
            .into_iter()
            .filter(|s| Some(&s.id) != self.options.exclude_session_id.as_ref())
            .collect();
        let total = sessions.len() as u64;
        let mut out = String::new();
        let mut shown = 0;
        // The head and the end, at their longest.
        let mut budget = self.budget(&[
            &list_head(u64::MAX, u64::MAX, u64::MAX),
            &list_more(u64::MAX),
            LIST_END,
        ]);
        for s in sessions.iter().skip(offset as usize).take(limit as usize) {
            let title = match &s.title {
                Some(t) => t.clone(),
                None => first_prompt(self.store, &s.id)?.unwrap_or_else(|| "(no prompt)".into()),
            };
            let line = format!(
                "- {} · \"{}\"{} · {} · last active {} · {} messages\n",
                s.id,
                clip(&title, 25),
                s.project
                    .as_ref()
                    .map(|p| format!(" · project {}", clip(p, ECHO_TOKENS)))
                    .unwrap_or_default(),
                s.status.as_str(),
                s.updated_at,
                s.message_count
            );
            match budget.fit(&line, shown == 0) {
                Some(line) => out.push_str(&line),
                None => break,
            }
            shown += 1;
        }
        let next = offset + shown;
        let mut head = list_head(total, offset + 1, next);
        if shown == 0 {
            head = format!(
                "{total} earlier session{}, newest first; none on this page:\n",
                plural(total)
            );
        }
        if next < total {
            out.push_str(&list_more(next));
        }
        out.push_str(LIST_END);
        head.push_str(&out);
        Ok(head)
    }

    fn search(&self, input: &Map<String, Value>) -> Result<String> {
        let a = Args::new(
            input,
            &[
                "query",
                "session_id",
                "since",
                "until",
                "fields",
                "limit",
                "cursor",
            ],
        )?;
        let query = a
            .string("query")?
            .ok_or_else(|| Error::InvalidInput("query: required".into()))?;
        let session_id = a.string("session_id")?;
        if session_id.is_some() && session_id == self.options.exclude_session_id {
            return Err(Error::InvalidInput(
                "session_id: that is the current session: its messages are already in your context"
                    .into(),
            ));
        }
        let fields = match input.get("fields") {
            None => None,
            Some(v) => Some(serde_json::from_value::<Vec<Field>>(v.clone()).map_err(|_| {
                Error::InvalidInput("fields: expected a list of 'text', 'thinking', 'tool_input', 'tool_output'".into())
            })?),
        };
        let options = SearchOptions {
            project: self.options.project.clone(),
            session_id,
            exclude_session_id: self.options.exclude_session_id.clone(),
            since: a.time("since")?,
            until: a.time("until")?,
            roles: None,
            fields,
            limit: Some(a.int("limit", 1, 50)?.unwrap_or(10)),
            cursor: a.string("cursor")?,
        };
        let page = self.store.search(&query, &options).map_err(|e| match e {
            // Named as the tool's arguments are.
            Error::InvalidInput(m) => {
                let m = m.trim_start_matches("search: ");
                Error::InvalidInput(match m.strip_prefix("options.") {
                    Some(m) => m.to_string(),
                    None => m.to_string(),
                })
            }
            other => other,
        })?;
        // The query said back, at most ECHO_TOKENS of it (it may be 2,000 characters).
        let echo = json!(clip(&query, ECHO_TOKENS));
        // A store with a large backlog is indexed over several searches: say what was not seen.
        let unseen = match page.unindexed {
            0 => String::new(),
            n => format!("\n({n} records are not indexed yet and were not searched: search again in a moment to include them.)"),
        };
        if page.hits.is_empty() {
            return Ok(format!(
                "No hits for {echo}. Try fewer or other words, a prefix*, or OR.{unseen}"
            ));
        }
        let mut out = format!("Hits for {echo}, best first:\n");
        let more = page.next_cursor.as_deref().map(search_more);
        let mut budget = self.budget(&[
            &out,
            &search_left_out(page.hits.len()),
            more.as_deref().unwrap_or(""),
            SEARCH_END,
        ]);
        let mut shown = 0;
        for (i, h) in page.hits.iter().enumerate() {
            let title = h
                .session
                .title
                .as_deref()
                .map(|t| format!(" (\"{}\")", clip(t, 15)))
                .unwrap_or_default();
            let entry = format!(
                "{}. session {}{} · seq {} · uuid {} · {} · {} · {}\n   {}\n",
                i + 1,
                h.session_id,
                title,
                h.seq,
                h.uuid,
                h.timestamp,
                role_str(h.role),
                h.field.as_str(),
                h.snippet
            );
            match budget.fit(&entry, shown == 0) {
                Some(entry) => out.push_str(&entry),
                None => break,
            }
            shown += 1;
        }
        if shown < page.hits.len() {
            out.push_str(&search_left_out(page.hits.len() - shown));
        }
        out.push_str(more.as_deref().unwrap_or(""));
        out.push_str(SEARCH_END);
        out.push_str(&unseen);
        Ok(out)
    }

    fn read(&self, input: &Map<String, Value>) -> Result<String> {
        let a = Args::new(
            input,
            &[
                "session_id",
                "around_uuid",
                "from_seq",
                "record_seq",
                "char_offset",
            ],
        )?;
        let id = a
            .string("session_id")?
            .ok_or_else(|| Error::InvalidInput("session_id: required".into()))?;
        let around = a.string("around_uuid")?;
        let from_seq = a.int("from_seq", 0, u64::MAX)?;
        let record_seq = a.int("record_seq", 0, u64::MAX)?;
        let char_offset = a.int("char_offset", 0, u64::MAX)?;
        let given: Vec<&str> = [
            ("around_uuid", around.is_some()),
            ("from_seq", from_seq.is_some()),
            ("record_seq", record_seq.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, g)| g.then_some(k))
        .collect();
        if let [first @ .., last] = given.as_slice() {
            if !first.is_empty() {
                return Err(Error::InvalidInput(format!(
                    "give one of around_uuid, from_seq or record_seq, not {} and {last}",
                    first.join(", ")
                )));
            }
        }
        if char_offset.is_some() && record_seq.is_none() {
            return Err(Error::InvalidInput(
                "char_offset: goes with record_seq (where to go on in that record)".into(),
            ));
        }
        if Some(&id) == self.options.exclude_session_id.as_ref() {
            return Err(Error::InvalidInput(
                "session_id: that is the current session: its messages are already in your context"
                    .into(),
            ));
        }
        let session = self.store.open_session(&id, None).map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(format!(
                "session_id: no session '{id}' (session_list shows them)"
            )),
            other => other,
        })?;
        let info = session.info()?;
        if self.options.project.is_some() && info.project != self.options.project {
            return Err(Error::NotFound(format!(
                "session_id: no session '{id}' (session_list shows them)"
            )));
        }
        if let Some(seq) = record_seq {
            return self.read_record(&session, &id, seq, char_offset.unwrap_or(0));
        }
        let from = match around {
            Some(uuid) => {
                let seq = session.seq_of_uuid(&uuid)?.ok_or_else(|| {
                    Error::NotFound(format!("around_uuid: no record '{uuid}' in session '{id}'"))
                })?;
                seq.saturating_sub(4)
            }
            None => from_seq.unwrap_or(0),
        };
        let title = info
            .title
            .clone()
            .map(|t| format!(" \"{}\"", clip(&t, 20)))
            .unwrap_or_default();
        let mut out = format!(
            "Session {id}{title}{} · {} · {} messages · last active {}\n",
            info.project
                .as_ref()
                .map(|p| format!(" · project {}", clip(p, ECHO_TOKENS)))
                .unwrap_or_default(),
            info.status.as_str(),
            info.message_count,
            info.updated_at
        );
        // The head, and at most a record cut short and the way to read on.
        let mut budget = self.budget(&[&out, &record_cut(&id, u64::MAX), &read_on(&id, u64::MAX)]);
        let mut next = from;
        let mut done = true;
        let mut shown = false;
        'pages: loop {
            let page = session.envelopes(next, Some(64))?;
            if page.is_empty() {
                break;
            }
            for env in page {
                let Value::Object(env) = env else { continue };
                let seq = env.get("seq").and_then(Value::as_u64).unwrap_or(next);
                next = seq + 1;
                if !transcript::shown(&env) {
                    continue;
                }
                let lines = transcript::render(&env, seq, &id, false);
                if budget.fits(&lines) {
                    budget.take(&lines);
                    out.push_str(&lines);
                    shown = true;
                    continue;
                }
                done = false;
                if shown {
                    next = seq;
                } else {
                    // Larger than a result by itself: as much as fits, and where it is whole;
                    // reading on goes on after it.
                    out.push_str(head_within(&lines, budget.room).trim_end());
                    out.push_str(&record_cut(&id, seq));
                }
                break 'pages;
            }
        }
        if done {
            out.push_str("(end of the session)");
        } else {
            out.push_str(&read_on(&id, next));
        }
        Ok(out)
    }

    fn read_record(
        &self,
        session: &crate::session::Session,
        id: &str,
        seq: u64,
        offset: u64,
    ) -> Result<String> {
        let env = session.envelopes(seq, Some(1))?;
        let Some(Value::Object(env)) = env
            .into_iter()
            .next()
            .filter(|e| e.get("seq").and_then(Value::as_u64) == Some(seq))
        else {
            return Err(Error::NotFound(format!(
                "record_seq: session '{id}' has no record {seq}"
            )));
        };
        let text = transcript::render(&env, seq, id, true);
        let chars: Vec<char> = text.chars().collect();
        let len = chars.len() as u64;
        if offset > len {
            return Ok(format!(
                "{END_OF_RECORD} char_offset {offset} is past it: record {seq} has {len} characters."
            ));
        }
        let start = offset as usize;
        let rest: String = chars[start..].iter().collect();
        let budget = self.budget(&[&char_cut(id, seq, u64::MAX, u64::MAX)]);
        let out = head_within(&rest, budget.room);
        let end = start + out.chars().count();
        let mut out = out.to_string();
        if end < chars.len() {
            out.push_str(&char_cut(id, seq, end as u64, len));
        } else {
            // The same end whether the last part was read from its start or from an offset.
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(END_OF_RECORD);
        }
        Ok(out)
    }
}

/// What is left of a result's room, in quarter tokens (`model::tokens`: estimated by script).
struct Budget {
    room: u64,
}

impl Budget {
    fn fits(&self, s: &str) -> bool {
        quarters(s) <= self.room
    }

    fn take(&mut self, s: &str) {
        self.room = self.room.saturating_sub(quarters(s));
    }

    /// `s` if it fits (taken from the room); cut to what fits if it is the `first` of a list
    /// (a list shows one entry at least, or paging would never move on); None: it does not.
    fn fit(&mut self, s: &str, first: bool) -> Option<String> {
        let s = if self.fits(s) {
            s.to_string()
        } else if first {
            let cut = head_within(s, self.room.saturating_sub(quarters("…\n")));
            format!("{}…\n", cut.trim_end())
        } else {
            return None;
        };
        self.take(&s);
        Some(s)
    }
}

/// What a `record_seq` read ends with once it has reached the end of the record.
const END_OF_RECORD: &str = "(end of the record)";
const LIST_END: &str = "Read one: session_read with its session_id.";
const SEARCH_END: &str = "Read around a hit: session_read with its session_id and around_uuid.";

fn list_head(total: u64, first: u64, last: u64) -> String {
    format!(
        "{total} earlier session{}, newest first; {first}-{last}:\n",
        plural(total)
    )
}

fn list_more(next: u64) -> String {
    format!("More: session_list with cursor \"{next}\".\n")
}

fn search_more(cursor: &str) -> String {
    format!("More hits: session_search with the same query and cursor \"{cursor}\".\n")
}

fn search_left_out(n: usize) -> String {
    format!("({n} more hits on this page left out to keep this short: ask with a smaller limit.)\n")
}

fn read_on(id: &str, next: u64) -> String {
    format!(
        "(cut here to stay within the result size) Read on: session_read {{\"session_id\": \"{id}\", \"from_seq\": {next}}}"
    )
}

fn record_cut(id: &str, seq: u64) -> String {
    format!(
        " … [record {seq} is longer than a result; whole: session_read {{\"session_id\": \"{id}\", \"record_seq\": {seq}}}]\n"
    )
}

fn char_cut(id: &str, seq: u64, end: u64, len: u64) -> String {
    format!(
        "\n(cut at character {end} of {len}) Read on: session_read {{\"session_id\": \"{id}\", \"record_seq\": {seq}, \"char_offset\": {end}}}"
    )
}

/// A call in any of the accepted shapes.
struct Call {
    name: String,
    input: Map<String, Value>,
}

impl Call {
    fn of(call: &Value) -> std::result::Result<Call, String> {
        // OpenAI's custom tool call: free text for a tool that takes it. The recall tools take
        // JSON, so text that is a JSON object is taken as the arguments.
        if let Some(custom) = call
            .get("custom")
            .filter(|_| call.get("function").is_none())
        {
            let name = custom
                .get("name")
                .and_then(Value::as_str)
                .ok_or("the call names no tool (expected custom.name)")?
                .to_string();
            let input = match custom.get("input") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
                Some(Value::String(s)) => crate::model::json::parse(s).map_err(|e| {
                    format!(
                        "custom.input: {name} takes a JSON object as its input, got text that is not JSON ({})",
                        e.message()
                    )
                })?,
                Some(other) => other.clone(),
            };
            return match input {
                Value::Object(input) => Ok(Call { name, input }),
                other => Err(format!(
                    "custom.input: {name} takes a JSON object as its input, got {}",
                    crate::model::message::kind(&other)
                )),
            };
        }
        let function = call.get("function");
        let name = call
            .get("name")
            .or_else(|| function.and_then(|f| f.get("name")))
            .and_then(Value::as_str)
            .ok_or("the call names no tool (expected name)")?
            .to_string();
        let input = match call.get("input") {
            Some(v) => v.clone(),
            None => {
                let args = call
                    .get("arguments")
                    .or_else(|| function.and_then(|f| f.get("arguments")));
                match args {
                    None => Value::Object(Map::new()),
                    Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
                    Some(Value::String(s)) => crate::model::json::parse(s)
                        .map_err(|e| format!("arguments: not valid JSON ({})", e.message()))?,
                    Some(other) => other.clone(),
                }
            }
        };
        match input {
            Value::Object(input) => Ok(Call { name, input }),
            other => Err(format!(
                "input: expected an object, got {}",
                crate::model::message::kind(&other)
            )),
        }
    }
}

/// A model's arguments, checked: unknown keys and wrong types say so.
struct Args<'a> {
    input: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn new(input: &'a Map<String, Value>, known: &[&str]) -> Result<Args<'a>> {
        if let Some(k) = input.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(Error::InvalidInput(format!(
                "{k}: unknown argument (expected {})",
                known.join(", ")
            )));
        }
        Ok(Args { input })
    }

    fn string(&self, k: &str) -> Result<Option<String>> {
        match self.input.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(Error::InvalidInput(format!(
                "{k}: expected a string, got {}",
                crate::model::message::kind(v)
            ))),
        }
    }

    fn int(&self, k: &str, min: u64, max: u64) -> Result<Option<u64>> {
        match self.input.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            }) {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ if max == u64::MAX => Err(Error::InvalidInput(format!(
                    "{k}: expected a whole number from {min}, got {v}"
                ))),
                _ => Err(Error::InvalidInput(format!(
                    "{k}: expected a whole number from {min} to {max}, got {v}"
                ))),
            },
        }
    }

    fn time(&self, k: &str) -> Result<Option<String>> {
        let s = self.string(k)?;
        if let Some(t) = &s {
            if crate::model::clock::parse_ms(t).is_none() {
                return Err(Error::InvalidInput(format!(
                    "{k}: expected an ISO 8601 date-time like 2026-11-20T00:00:00Z, got '{t}'"
                )));
            }
        }
        Ok(s)
    }

    /// A session_list cursor: the index of the next session.
    fn offset(&self) -> Result<u64> {
        match self.string("cursor")? {
            None => Ok(0),
            Some(c) => c.parse().map_err(|_| {
                Error::InvalidInput(format!("cursor: '{c}' is not a cursor session_list gave"))
            }),
        }
    }
}

/// The text of a session's first prompt, if it has one.
fn first_prompt(store: &Store, id: &str) -> Result<Option<String>> {
    let session = store.open_session(id, None)?;
    for env in session.envelopes(0, Some(50))? {
        let Value::Object(env) = env else { continue };
        if !crate::storage::search_index::indexable(&env) {
            continue;
        }
        let message = env.get("message").unwrap_or(&Value::Null);
        if message.get("role").and_then(Value::as_str) == Some("user") {
            let text = crate::model::fields::texts(message)[0].clone();
            if !text.trim().is_empty() {
                return Ok(Some(text.split_whitespace().collect::<Vec<_>>().join(" ")));
            }
        }
    }
    Ok(None)
}

/// `s`, or as much of it as `tokens` hold (estimated by script), and `…`.
fn clip(s: &str, tokens: u64) -> String {
    if quarters(s) <= tokens * 4 {
        s.to_string()
    } else {
        format!("{}…", head_within(s, tokens * 4 - quarters("…")))
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn role_str(r: crate::model::message::Role) -> &'static str {
    r.as_str()
}
