//! Folds the streamed chunks of one assistant response into its message, with no storage: the
//! [`Assembler`] that `ResponseWriter` persists from. The partial JSON parser at the end is a
//! port of the one the Anthropic SDK vendors, so an open tool call shows what the SDK shows.

use std::fmt::Display;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::json;

/// What a chunk did, so a writer knows when to persist (block boundaries) and when the message
/// is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Text, thinking, a signature or tool input grew in the open block.
    Delta,
    /// A new block started (a simple chunk that starts one also closes the one before it).
    BlockOpened,
    /// A block was closed (`content_block_stop`, or a reasoning chunk with its signature).
    BlockClosed,
    /// `message_start`: id, model and usage are known.
    MessageStarted,
    /// `message_delta`: stop reason and usage.
    MessageDelta,
    /// `message_stop`: the response is complete.
    Stopped,
    /// `ping`, `error`, or an event or delta type the SDK also ignores: nothing changed.
    Ignored,
}

/// One stream uses one form; mixing them is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Raw,
    Simple,
}

/// The input of a tool block whose arguments stream in as JSON text.
#[derive(Debug, Clone)]
enum Input {
    /// Still open: the text so far.
    Streaming(String),
    /// Closed, and the text was a JSON object.
    Parsed(Value),
    /// Closed, and the text was not a JSON object: `shown` is what the SDK would show.
    Invalid { shown: Value, reason: String },
}

#[derive(Debug, Clone)]
struct Block {
    /// The block as built. When its input streams in, `input` is not here: it is rendered last.
    value: Map<String, Value>,
    open: bool,
    input: Option<Input>,
}

/// Block types whose `input` is built from `input_json_delta` (the SDK's `tracksToolInput`;
/// `mcp_tool_use` only reaches the beta stream, which treats it the same).
const TOOL_TYPES: [&str; 3] = ["tool_use", "server_tool_use", "mcp_tool_use"];

/// Folds the streamed chunks of one assistant response into its message.
///
/// Two input forms, one per stream (mixing them is INVALID_INPUT):
/// - the Anthropic raw stream events (`message_start`, `content_block_start/delta/stop`,
///   `message_delta`, `message_stop`, `ping`, `error`), folded exactly as the TypeScript SDK's
///   `MessageStream` builds its snapshot (`@anthropic-ai/sdk` 1.12, `#accumulateMessage`), so a
///   finished stream gives `finalMessage()`: same fields, key order and values;
/// - the simple chunks `{type:'text', text}`, `{type:'reasoning', text, signature?}` and
///   `{type:'tool_call_delta', id, name?, delta}` for other providers. A block closes when a
///   chunk of another block arrives, at [`finish`](Assembler::finish), or (reasoning) with its
///   signature. The message is `{role:'assistant', content}`; an empty text or reasoning chunk
///   that would open a block is [`Pushed::Ignored`].
///
/// What the SDK does, mirrored:
/// - a block is the `content_block_start` block as given; deltas replace a field in place;
///   `signature_delta` replaces the signature, it is not appended;
/// - the first `input_json_delta` of a tool block moves `input` after every other key (the SDK
///   re-creates the block with `input` defined last). While the block is open, `input` is the
///   SDK's partial parse of the text so far (ported exactly; `{}` where the SDK's parse would
///   throw); empty text is `{}`; at the block's end, the full parse;
/// - `message_delta` always assigns `stop_reason`, `stop_sequence`, `stop_details` and
///   `usage.output_tokens`, even when the event lacks them: they become `undefined`, which JSON
///   leaves out. `input_tokens`, `cache_creation_input_tokens`, `cache_read_input_tokens`,
///   `server_tool_use`, `output_tokens_details` and `container` are copied when present and not
///   null; any other usage field of the event is not merged;
/// - `ping`, `error` and event or delta types it does not know change nothing.
///
/// Deliberate differences: out-of-order events and deltas that do not fit their block are
/// rejected (the SDK drops them or throws); `finalMessage()` adds `parsed_output: null`, the
/// SDK's own field, not the API's, which is left out; a tool input that is not a JSON object
/// never fails a push (the SDK throws at `content_block_stop` on garbage, yet accepts truncated
/// JSON there): the block shows the partial parse, is left out of [`salvage`](Assembler::salvage)
/// and fails [`finish`](Assembler::finish). Numbers keep their text (the SDK makes doubles).
#[derive(Debug, Clone)]
pub struct Assembler {
    form: Option<Form>,
    /// The message's own fields in order; `content` is a placeholder filled from `blocks`.
    head: Map<String, Value>,
    blocks: Vec<Block>,
    /// Fields a `message_delta` set to `undefined` in the SDK: they keep their place in the
    /// object but JSON leaves them out (`stop_reason`, ..., `usage.output_tokens`).
    hidden: Vec<&'static str>,
    started: bool,
    stopped: bool,
}

impl Default for Assembler {
    fn default() -> Self {
        Self::new()
    }
}

impl Assembler {
    pub fn new() -> Assembler {
        let mut head = Map::new();
        head.insert("role".into(), Value::String("assistant".into()));
        head.insert("content".into(), Value::Array(Vec::new()));
        Assembler {
            form: None,
            head,
            blocks: Vec::new(),
            hidden: Vec::new(),
            started: false,
            stopped: false,
        }
    }

    /// Folds one chunk. A chunk that is rejected (INVALID_INPUT, naming the path from `chunk`)
    /// leaves the assembler unchanged: every check runs before anything is changed.
    pub fn push(&mut self, chunk: &Value) -> Result<Pushed> {
        let obj = chunk
            .as_object()
            .ok_or_else(|| bad("chunk", "expected an object"))?;
        let kind = str_at(obj, "type", "chunk.type")?;
        if self.stopped {
            return Err(bad("chunk", "the stream already ended with message_stop"));
        }
        let form = match form_of(kind) {
            Some(form) => form,
            // The SDK ignores event types it does not know (the API may add some).
            None if self.form == Some(Form::Raw) => return Ok(Pushed::Ignored),
            None => return Err(bad("chunk.type", format!("unknown chunk type {kind:?}"))),
        };
        if self.form.is_some_and(|f| f != form) {
            return Err(bad(
                "chunk.type",
                format!("{kind:?} mixes simple chunks and Anthropic stream events in one stream"),
            ));
        }
        let pushed = match form {
            Form::Raw => self.push_raw(kind, obj)?,
            Form::Simple => self.push_simple(kind, obj)?,
        };
        self.form = Some(form);
        Ok(pushed)
    }

    /// The message so far, as the SDK's snapshot (for a finished raw stream: `finalMessage()`
    /// without the SDK's own `parsed_output`). Open tool blocks show the partial parse.
    pub fn message(&self) -> Value {
        let mut head = self.head.clone();
        for slot in &self.hidden {
            match slot.strip_prefix("usage.") {
                Some(key) => {
                    if let Some(Value::Object(usage)) = head.get_mut("usage") {
                        usage.shift_remove(key);
                    }
                }
                None => {
                    head.shift_remove(*slot);
                }
            }
        }
        let content = self.blocks.iter().map(Block::render).collect();
        head.insert("content".into(), Value::Array(content));
        Value::Object(head)
    }

    /// Closes open simple-form blocks and returns the final message. INVALID_INPUT when a
    /// closed tool block's input is not a JSON object. Open blocks of a raw stream that was cut
    /// off stay as they are (the SDK has no final message for such a stream).
    pub fn finish(mut self) -> Result<Value> {
        if self.form != Some(Form::Raw) {
            self.close_open();
        }
        for (i, block) in self.blocks.iter().enumerate() {
            if let Some(Input::Invalid { reason, .. }) = &block.input {
                let id = block.value.get("id").and_then(Value::as_str).unwrap_or("?");
                let msg = format!("tool call {id}: the arguments are not a JSON object: {reason}");
                return Err(Error::InvalidInput(format!("content[{i}].input: {msg}")));
            }
        }
        Ok(self.message())
    }

    /// Content blocks safe to send back to a model after the stream was cut: text with text
    /// (open or closed), thinking only when closed with a signature, tool calls only when closed
    /// with an input object, any other block only when closed. Order kept.
    pub fn salvage(&self) -> Vec<Value> {
        self.blocks
            .iter()
            .filter(|b| b.is_safe())
            .map(Block::render)
            .collect()
    }

    /// Whether `message_stop` (raw form) was seen.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// How many blocks are open right now (0 or 1 in practice).
    pub fn open_blocks(&self) -> usize {
        self.blocks.iter().filter(|b| b.open).count()
    }

    fn close_open(&mut self) {
        for block in self.blocks.iter_mut().filter(|b| b.open) {
            block.close();
        }
    }

    // ---- raw Anthropic events ----

    fn push_raw(&mut self, kind: &str, obj: &Map<String, Value>) -> Result<Pushed> {
        if kind == "message_start" {
            return self.message_start(obj);
        }
        let needs_start = !matches!(kind, "ping" | "error");
        if needs_start && !self.started {
            return Err(bad("chunk.type", format!("{kind} before message_start")));
        }
        match kind {
            "content_block_start" => self.block_start(obj),
            "content_block_delta" => self.block_delta(obj),
            "content_block_stop" => {
                let i = self.open_index(obj)?;
                self.blocks[i].close();
                Ok(Pushed::BlockClosed)
            }
            "message_delta" => self.message_delta(obj),
            "message_stop" => {
                self.stopped = true;
                Ok(Pushed::Stopped)
            }
            _ => Ok(Pushed::Ignored), // ping, error: the SDK's snapshot does not change
        }
    }

    fn message_start(&mut self, obj: &Map<String, Value>) -> Result<Pushed> {
        if self.started {
            return Err(bad("chunk.type", "a second message_start in one stream"));
        }
        let message = obj_at(obj, "message", "chunk.message")?;
        let content = message
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("chunk.message.content", "expected an array"))?;
        // The API sends `content: []`; blocks given anyway are kept, as closed blocks.
        let blocks = content
            .iter()
            .enumerate()
            .map(|(i, b)| match b.as_object() {
                Some(value) => Ok(Block::closed(value.clone())),
                None => Err(bad(
                    &format!("chunk.message.content[{i}]"),
                    "expected an object",
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut head = message.clone();
        head.insert("content".into(), Value::Array(Vec::new()));
        self.head = head;
        self.blocks = blocks;
        self.started = true;
        Ok(Pushed::MessageStarted)
    }

    fn block_start(&mut self, obj: &Map<String, Value>) -> Result<Pushed> {
        let index = index_at(obj)?;
        if index != self.blocks.len() {
            return Err(bad(
                "chunk.index",
                format!("expected {}: blocks start in order", self.blocks.len()),
            ));
        }
        let block = obj_at(obj, "content_block", "chunk.content_block")?;
        str_at(block, "type", "chunk.content_block.type")?;
        self.blocks.push(Block {
            value: block.clone(),
            open: true,
            input: None,
        });
        Ok(Pushed::BlockOpened)
    }

    fn block_delta(&mut self, obj: &Map<String, Value>) -> Result<Pushed> {
        let i = self.open_index(obj)?;
        let delta = obj_at(obj, "delta", "chunk.delta")?;
        let kind = str_at(delta, "type", "chunk.delta.type")?;
        let block = &mut self.blocks[i];
        let fits = |types: &[&str]| -> Result<()> {
            let have = block.kind();
            if types.contains(&have) {
                return Ok(());
            }
            Err(bad(
                "chunk.delta.type",
                format!("{kind} does not apply to content block {i}, a {have:?} block"),
            ))
        };
        match kind {
            "text_delta" => {
                fits(&["text"])?;
                let text = str_at(delta, "text", "chunk.delta.text")?;
                append(&mut block.value, "text", text);
            }
            "citations_delta" => {
                fits(&["text"])?;
                let citation = obj_at(delta, "citation", "chunk.delta.citation")?;
                add_citation(&mut block.value, citation);
            }
            "input_json_delta" => {
                fits(&TOOL_TYPES)?;
                let part = str_at(delta, "partial_json", "chunk.delta.partial_json")?;
                block.stream_input(part);
            }
            "thinking_delta" => {
                fits(&["thinking"])?;
                let text = str_at(delta, "thinking", "chunk.delta.thinking")?;
                append(&mut block.value, "thinking", text);
            }
            "signature_delta" => {
                fits(&["thinking"])?;
                let signature = str_at(delta, "signature", "chunk.delta.signature")?;
                block.value.insert("signature".into(), signature.into());
            }
            _ => return Ok(Pushed::Ignored), // the SDK ignores delta types it does not know
        }
        Ok(Pushed::Delta)
    }

    fn message_delta(&mut self, obj: &Map<String, Value>) -> Result<Pushed> {
        let delta = obj_at(obj, "delta", "chunk.delta")?;
        let usage = obj_at(obj, "usage", "chunk.usage")?;
        let hidden = &mut self.hidden;
        for key in ["stop_reason", "stop_sequence", "stop_details"] {
            assign(&mut self.head, hidden, key, key, delta.get(key));
        }
        if let Some(container) = present(delta, "container") {
            self.head.insert("container".into(), container.clone());
        }
        // The SDK would throw on a message without usage; an empty one is made instead.
        let target = self
            .head
            .entry("usage")
            .or_insert_with(|| Value::Object(Map::new()));
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        if let Value::Object(target) = target {
            let output = usage.get("output_tokens");
            assign(
                target,
                hidden,
                "usage.output_tokens",
                "output_tokens",
                output,
            );
            // Cumulative totals, omitted when they do not apply: overwritten, never added.
            for key in [
                "input_tokens",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
                "server_tool_use",
                "output_tokens_details",
            ] {
                if let Some(value) = present(usage, key) {
                    target.insert(key.into(), value.clone());
                }
            }
        }
        Ok(Pushed::MessageDelta)
    }

    /// The index of the open block a delta or stop event names.
    fn open_index(&self, obj: &Map<String, Value>) -> Result<usize> {
        let i = index_at(obj)?;
        match self.blocks.get(i) {
            None => Err(bad(
                "chunk.index",
                format!("content block {i} was never started"),
            )),
            Some(b) if !b.open => Err(bad(
                "chunk.index",
                format!("content block {i} is already closed"),
            )),
            Some(_) => Ok(i),
        }
    }

    // ---- simple chunks ----

    fn push_simple(&mut self, kind: &str, obj: &Map<String, Value>) -> Result<Pushed> {
        match kind {
            "text" => {
                let text = str_at(obj, "text", "chunk.text")?;
                Ok(self.simple_text(text))
            }
            "reasoning" => {
                let text = str_at(obj, "text", "chunk.text")?;
                let signature = opt_str_at(obj, "signature", "chunk.signature")?;
                Ok(self.simple_reasoning(text, signature))
            }
            _ => {
                let id = str_at(obj, "id", "chunk.id")?;
                if id.is_empty() {
                    return Err(bad("chunk.id", "expected a non-empty string"));
                }
                let name = opt_str_at(obj, "name", "chunk.name")?;
                let delta = str_at(obj, "delta", "chunk.delta")?;
                self.simple_tool(id, name, delta)
            }
        }
    }

    /// The last block, when it is open and of type `kind`: where a simple chunk appends.
    fn open_last(&mut self, kind: &str) -> Option<&mut Block> {
        self.blocks
            .last_mut()
            .filter(|b| b.open && b.kind() == kind)
    }

    fn open_new(&mut self, value: Map<String, Value>, input: Option<Input>) {
        self.close_open();
        self.blocks.push(Block {
            value,
            open: true,
            input,
        });
    }

    fn simple_text(&mut self, text: &str) -> Pushed {
        if let Some(block) = self.open_last("text") {
            append(&mut block.value, "text", text);
            return Pushed::Delta;
        }
        if text.is_empty() {
            return Pushed::Ignored; // an empty text block is never worth opening
        }
        self.open_new(
            object([("type", "text".into()), ("text", text.into())]),
            None,
        );
        Pushed::BlockOpened
    }

    fn simple_reasoning(&mut self, text: &str, signature: Option<&str>) -> Pushed {
        let appended = match self.open_last("thinking") {
            Some(block) => {
                append(&mut block.value, "thinking", text);
                true
            }
            None if text.is_empty() && signature.is_none() => return Pushed::Ignored,
            None => {
                let value = object([
                    ("type", "thinking".into()),
                    ("thinking", text.into()),
                    ("signature", "".into()),
                ]);
                self.open_new(value, None);
                false
            }
        };
        match (signature, self.blocks.last_mut()) {
            // The signature comes last: it seals the block, later reasoning starts a new one.
            (Some(signature), Some(block)) => {
                block.value.insert("signature".into(), signature.into());
                block.close();
                Pushed::BlockClosed
            }
            _ if appended => Pushed::Delta,
            _ => Pushed::BlockOpened,
        }
    }

    fn simple_tool(&mut self, id: &str, name: Option<&str>, delta: &str) -> Result<Pushed> {
        if let Some(block) = self
            .open_last("tool_use")
            .filter(|b| b.tool_id() == Some(id))
        {
            let have = block
                .value
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if name.is_some_and(|n| n != have) {
                return Err(bad(
                    "chunk.name",
                    format!("tool call {id} is named {have:?}"),
                ));
            }
            block.stream_input(delta);
            return Ok(Pushed::Delta);
        }
        if self.blocks.iter().any(|b| b.tool_id() == Some(id)) {
            return Err(bad(
                "chunk.id",
                format!("tool call {id} was already closed by a chunk of another block"),
            ));
        }
        let name = name.ok_or_else(|| {
            bad(
                "chunk.name",
                "expected a string: the first chunk of a tool call names the tool",
            )
        })?;
        let value = object([
            ("type", "tool_use".into()),
            ("id", id.into()),
            ("name", name.into()),
        ]);
        self.open_new(value, Some(Input::Streaming(delta.to_owned())));
        Ok(Pushed::BlockOpened)
    }
}

impl Block {
    fn closed(value: Map<String, Value>) -> Block {
        Block {
            value,
            open: false,
            input: None,
        }
    }

    fn kind(&self) -> &str {
        self.value.get("type").and_then(Value::as_str).unwrap_or("")
    }

    fn tool_id(&self) -> Option<&str> {
        self.value.get("id").and_then(Value::as_str)
    }

    /// Appends tool input text. The first piece takes `input` out of the block: the SDK puts
    /// it back last, so it ends up after every other key.
    fn stream_input(&mut self, part: &str) {
        match &mut self.input {
            Some(Input::Streaming(buf)) => buf.push_str(part),
            _ => {
                self.value.shift_remove("input");
                self.input = Some(Input::Streaming(part.to_owned()));
            }
        }
    }

    fn close(&mut self) {
        self.open = false;
        if let Some(Input::Streaming(buf)) = &self.input {
            self.input = Some(settle(buf));
        }
    }

    fn render(&self) -> Value {
        let mut value = self.value.clone();
        let input = match &self.input {
            None => return Value::Object(value),
            Some(Input::Streaming(buf)) => shown_input(buf),
            Some(Input::Parsed(input)) => input.clone(),
            Some(Input::Invalid { shown, .. }) => shown.clone(),
        };
        value.insert("input".into(), input);
        Value::Object(value)
    }

    /// Whether the block can be sent back to a model as it is (see [`Assembler::salvage`]).
    fn is_safe(&self) -> bool {
        let text = |key: &str| {
            self.value
                .get(key)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        match self.kind() {
            "text" => text("text"),
            // Unsigned thinking is refused by the API; a half-streamed one is not even whole.
            "thinking" => !self.open && text("signature"),
            kind if TOOL_TYPES.contains(&kind) => !self.open && self.has_input_object(),
            _ => !self.open,
        }
    }

    fn has_input_object(&self) -> bool {
        match &self.input {
            None => self.value.get("input").is_some_and(Value::is_object),
            Some(input) => matches!(input, Input::Parsed(_)),
        }
    }
}

/// A closed tool block's input: the text must be one JSON object (empty text is `{}`).
fn settle(buf: &str) -> Input {
    if buf.is_empty() {
        return Input::Parsed(Value::Object(Map::new()));
    }
    let reason = match json::parse(buf) {
        Ok(value) if value.is_object() => return Input::Parsed(value),
        Ok(_) => "not an object".to_string(),
        Err(e) => e.message().to_string(),
    };
    Input::Invalid {
        shown: shown_input(buf),
        reason,
    }
}

/// What the SDK shows as the input of a tool block from its JSON text: `{}` for no text, else
/// its partial parse; `{}` also where the SDK's parse would throw.
fn shown_input(buf: &str) -> Value {
    if buf.is_empty() {
        return Value::Object(Map::new());
    }
    partial_parse(buf).unwrap_or_else(|| Value::Object(Map::new()))
}

fn form_of(kind: &str) -> Option<Form> {
    match kind {
        "message_start"
        | "content_block_start"
        | "content_block_delta"
        | "content_block_stop"
        | "message_delta"
        | "message_stop"
        | "ping"
        | "error" => Some(Form::Raw),
        "text" | "reasoning" | "tool_call_delta" => Some(Form::Simple),
        _ => None,
    }
}

/// JS `target[key] = value`: a missing value is `undefined`, which keeps the key's place in
/// the object but is left out of JSON, so the key stays (as null) and `slot` is hidden.
fn assign(
    target: &mut Map<String, Value>,
    hidden: &mut Vec<&'static str>,
    slot: &'static str,
    key: &str,
    value: Option<&Value>,
) {
    hidden.retain(|h| *h != slot);
    match value {
        Some(value) => {
            target.insert(key.into(), value.clone());
        }
        None => {
            target.entry(key).or_insert(Value::Null);
            hidden.push(slot);
        }
    }
}

/// Appends to a string field in place (a text grows by thousands of deltas; no copying).
fn append(value: &mut Map<String, Value>, key: &str, text: &str) {
    match value.get_mut(key) {
        Some(Value::String(s)) => s.push_str(text),
        _ => {
            value.insert(key.into(), text.into());
        }
    }
}

fn add_citation(value: &mut Map<String, Value>, citation: &Map<String, Value>) {
    let citation = Value::Object(citation.clone());
    match value.get_mut("citations") {
        Some(Value::Array(list)) => list.push(citation),
        _ => {
            value.insert("citations".into(), Value::Array(vec![citation]));
        }
    }
}

/// A field that is there and not null (JS `!= null`).
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn object<const N: usize>(fields: [(&str, Value); N]) -> Map<String, Value> {
    fields
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn bad(path: &str, msg: impl Display) -> Error {
    Error::InvalidInput(format!("{path}: {msg}"))
}

fn str_at<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(path, "expected a string"))
}

/// An optional string field: absent and null are both "not given".
fn opt_str_at<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<Option<&'a str>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(path, "expected a string")),
    }
}

fn obj_at<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'a Map<String, Value>> {
    obj.get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| bad(path, "expected an object"))
}

fn index_at(obj: &Map<String, Value>) -> Result<usize> {
    obj.get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .ok_or_else(|| bad("chunk.index", "expected a non-negative integer"))
}

/// The SDK's partial JSON parse (its vendored `partial-json-parser`), ported token for token:
/// drops a partial trailing token, closes open brackets, then parses strictly. `None` where
/// the SDK's `JSON.parse` would throw.
pub(crate) fn partial_parse(input: &str) -> Option<Value> {
    let completed = tokenize(input).map(strip).and_then(unstrip);
    let text = match completed {
        Some(tokens) => generate(&tokens),
        None => input.to_string(),
    };
    serde_json::from_str(&text).ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Open(u8),  // `{` or `[`
    Close(u8), // `}` or `]`
    Colon,
    Comma,
    Str,
    Number { unterminated: bool },
    Name,
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    tok: Tok,
    /// The token's text; a string's without its quotes, escapes kept verbatim.
    text: &'a str,
}

const LITERALS: [&str; 3] = ["true", "false", "null"];

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// `None` when the text holds anything but JSON tokens and whitespace outside its strings.
fn tokenize(input: &str) -> Option<Vec<Token<'_>>> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let one = |tok| Token {
            tok,
            text: &input[i..i + 1],
        };
        match c {
            b'{' | b'[' => tokens.push(one(Tok::Open(c))),
            b'}' | b']' => tokens.push(one(Tok::Close(c))),
            b':' => tokens.push(one(Tok::Colon)),
            b',' => tokens.push(one(Tok::Comma)),
            b'"' => {
                match string_end(bytes, i + 1) {
                    Some(end) => {
                        tokens.push(Token {
                            tok: Tok::Str,
                            text: &input[i + 1..end],
                        });
                        i = end;
                    }
                    None => i = bytes.len(), // a dangling string is dropped
                }
            }
            _ if is_ws(c) => {}
            b'0'..=b'9' | b'-' | b'.' => {
                let end = number_end(bytes, i);
                let tok = Tok::Number {
                    unterminated: end == bytes.len(),
                };
                tokens.push(Token {
                    tok,
                    text: &input[i..end],
                });
                i = end;
                continue;
            }
            _ if c.is_ascii_alphabetic() => {
                let end = (i..bytes.len())
                    .find(|&j| !bytes[j].is_ascii_alphabetic())
                    .unwrap_or(bytes.len());
                let word = &input[i..end];
                if LITERALS.contains(&word) {
                    tokens.push(Token {
                        tok: Tok::Name,
                        text: word,
                    });
                } else if !is_truncated_literal(word, &bytes[end..]) {
                    return None;
                }
                i = end;
                continue;
            }
            _ => return None,
        }
        i += 1;
    }
    Some(tokens)
}

/// The index of the quote closing a string whose text starts at `start`: the first `"` after
/// an even number of backslashes.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut from = start;
    loop {
        let end = from + bytes[from..].iter().position(|&b| b == b'"')?;
        let backslashes = bytes[start..end]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if backslashes % 2 == 0 {
            return Some(end);
        }
        from = end + 1;
    }
}

/// Where a number-like run starting at `i` ends: an optional `-`, then digits, `.`, `e`/`E`,
/// and a sign right after the exponent marker.
fn number_end(bytes: &[u8], mut i: usize) -> usize {
    let start = i;
    if bytes[i] == b'-' {
        i += 1;
    }
    while let Some(&c) = bytes.get(i) {
        let after_exponent = i > start && matches!(bytes[i - 1], b'e' | b'E');
        let ok = c.is_ascii_digit()
            || matches!(c, b'.' | b'e' | b'E')
            || (matches!(c, b'-' | b'+') && after_exponent);
        if !ok {
            break;
        }
        i += 1;
    }
    i
}

/// A literal cut off by the end of the text, like `nul`.
fn is_truncated_literal(word: &str, rest: &[u8]) -> bool {
    LITERALS.iter().any(|l| *l != word && l.starts_with(word)) && rest.iter().all(|&b| is_ws(b))
}

fn is_json_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let from = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - from
    };
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Drops what cannot be complete at the end: a colon, a number that may go on or is cut short,
/// an object key without its value, a trailing comma.
fn strip(mut tokens: Vec<Token<'_>>) -> Vec<Token<'_>> {
    let mut open = Vec::new();
    for t in &tokens {
        match t.tok {
            Tok::Open(c) => open.push(c),
            Tok::Close(_) => {
                open.pop();
            }
            _ => {}
        }
    }
    // Brackets are never dropped, so this holds for every token looked at below.
    let in_object = open.last() == Some(&b'{');
    while let Some(last) = tokens.last() {
        let before = tokens.len().checked_sub(2).map(|i| tokens[i].tok);
        let drop = match last.tok {
            Tok::Colon => true,
            Tok::Number { unterminated } => unterminated || !is_json_number(last.text),
            Tok::Str => in_object && matches!(before, Some(Tok::Comma | Tok::Open(b'{'))),
            Tok::Comma => {
                tokens.pop(); // whatever precedes a comma is complete
                break;
            }
            _ => false,
        };
        if !drop {
            break;
        }
        tokens.pop();
    }
    tokens
}

/// Closes the brackets left open; `None` when a closer does not match its opener.
fn unstrip(mut tokens: Vec<Token<'_>>) -> Option<Vec<Token<'_>>> {
    let mut tail = Vec::new();
    for t in &tokens {
        match t.tok {
            Tok::Open(b'{') => tail.push(b'}'),
            Tok::Open(_) => tail.push(b']'),
            Tok::Close(c) => {
                tail.pop().filter(|&want| want == c)?;
            }
            _ => {}
        }
    }
    for c in tail.into_iter().rev() {
        let text = if c == b'}' { "}" } else { "]" };
        tokens.push(Token {
            tok: Tok::Close(c),
            text,
        });
    }
    Some(tokens)
}

fn generate(tokens: &[Token<'_>]) -> String {
    let scalar = |t: &Token<'_>| matches!(t.tok, Tok::Str | Tok::Number { .. } | Tok::Name);
    let mut out = String::new();
    for (i, t) in tokens.iter().enumerate() {
        // Adjacent scalars stay apart, so malformed text like `12 3` still fails the parse.
        if i > 0 && scalar(&tokens[i - 1]) && scalar(t) {
            out.push(' ');
        }
        if t.tok == Tok::Str {
            out.push('"');
            out.push_str(t.text);
            out.push('"');
        } else {
            out.push_str(t.text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::partial_parse;
    use serde_json::json;

    #[test]
    fn partial_parse_matches_the_sdk() {
        let cases = [
            ("{\"a\": 1", json!({})),
            ("{\"a\": 12, \"b", json!({"a": 12})),
            ("{\"a\": \"x", json!({})),
            ("{\"a\": \"x\"", json!({"a": "x"})),
            ("{\"a\": [1, 2", json!({"a": [1]})),
            ("{\"a\": tr", json!({})),
            ("{\"a\": true, \"b\": nu", json!({"a": true})),
            ("{\"a\": \"q\\\"", json!({})),
            ("{\"a\": \"q\\\"\"", json!({"a": "q\""})),
            ("{\"a\": 1.", json!({})),
            ("[1, 2.5e", json!([1])),
            ("{\"a\": {\"b\": []", json!({"a": {"b": []}})),
            ("{\"a\":1} tru", json!({"a": 1})),
        ];
        for (text, want) in cases {
            assert_eq!(partial_parse(text), Some(want), "{text}");
        }
        assert_eq!(partial_parse("{\"a\": x"), None);
        assert_eq!(partial_parse("{\"a\": 1]"), None);
        assert_eq!(partial_parse("42"), None); // a number at the very end may go on
    }
}
