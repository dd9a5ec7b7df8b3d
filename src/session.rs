//! `NativeSession`: the core Session for JS. The facade in index.js wraps it as `Session`.

use std::sync::Arc;

use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;
use serde_json::{Map, Value};
use threadline::{MessageView, Session, SessionOptions, Source, Status, TokenPatch, PAGE_BYTES};

use crate::error::{parse_json, parse_opt, to_js, to_json, Code, OrThrow, Result};
use crate::store::async_error;
use crate::text::{JsonText, NativePage, NativePages};

#[napi]
pub struct NativeSession {
    pub(crate) inner: Arc<Session>,
}

impl NativeSession {
    pub fn wrap(s: Session) -> NativeSession {
        NativeSession { inner: Arc::new(s) }
    }

    /// Another handle on the same session (for work on another thread).
    pub(crate) fn handle(&self) -> NativeSession {
        NativeSession {
            inner: self.inner.clone(),
        }
    }
}

/// The fields a session fills in, in the order they are added: the facade builds the returned
/// envelope from the caller's own object plus these, instead of parsing the whole record back.
const FILLED: [&str; 6] = [
    "type",
    "uuid",
    "parentUuid",
    "sessionId",
    "seq",
    "timestamp",
];

/// Those fields of an envelope, serialized straight from it (no copy of them).
struct Filled<'a>(&'a Map<String, Value>);

impl serde::Serialize for Filled<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for k in FILLED {
            if let Some(v) = self.0.get(k) {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

fn filled(env: &Map<String, Value>) -> Filled<'_> {
    Filled(env)
}

fn object(text: Option<String>, what: &str) -> Result<Option<Map<String, Value>>> {
    match text.map(|t| parse_json(&t, what)).transpose()? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(_) => Err(napi::Error::new(
            Code("INVALID_INPUT"),
            format!("{what}: expected an object"),
        )),
    }
}

fn array(text: &str, what: &str) -> Result<Vec<Value>> {
    match parse_json(text, what)? {
        Value::Array(a) => Ok(a),
        _ => Err(napi::Error::new(
            Code("INVALID_INPUT"),
            format!("{what}: expected an array"),
        )),
    }
}

fn page_bytes(max: Option<u32>) -> usize {
    max.map_or(PAGE_BYTES, |m| m.max(1) as usize)
}

#[napi]
impl NativeSession {
    /// A session in memory only.
    #[napi(constructor, catch_unwind)]
    pub fn new(options_json: Option<String>) -> Result<Self> {
        crate::error::guard("new", || {
            let options: SessionOptions = parse_opt(options_json, "Session: options")?;
            Ok(NativeSession::wrap(Session::in_memory(options).or_throw()?))
        })
    }

    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id().to_string()
    }

    #[napi(catch_unwind)]
    pub fn info(&self) -> Result<String> {
        crate::error::guard("info", || to_json(&self.inner.info().or_throw()?))
    }

    /// Appends JSON text of a message / envelope / string; returns the filled-in fields as JSON.
    #[napi(
        catch_unwind,
        ts_args_type = "json: string, envelopeJson?: string | undefined | null"
    )]
    pub fn append(&self, json: JsonText, envelope_json: Option<String>) -> Result<String> {
        crate::error::guard("append", || {
            let input = parse_json(&json.0, "append")?;
            let extra = object(envelope_json, "append: envelope")?;
            let env = self.inner.append(input, extra).or_throw()?;
            to_json(&filled(&env))
        })
    }

    /// Appends a JSON array of records in one transaction; returns the filled-in fields of each.
    #[napi(catch_unwind, ts_args_type = "json: string")]
    pub fn append_many(&self, json: JsonText) -> Result<String> {
        crate::error::guard("appendMany", || {
            let items = array(&json.0, "appendMany")?;
            let envs = self.inner.append_many(items).or_throw()?;
            to_json(&envs.iter().map(filled).collect::<Vec<_>>())
        })
    }

    /// Returns the whole envelope as JSON.
    #[napi(catch_unwind)]
    pub fn append_event(
        &self,
        name: String,
        data_json: Option<String>,
        envelope_json: Option<String>,
    ) -> Result<String> {
        crate::error::guard("appendEvent", || {
            let data = data_json
                .map(|d| parse_json(&d, "appendEvent: data"))
                .transpose()?;
            let extra = object(envelope_json, "appendEvent: envelope")?;
            to_json(&self.inner.append_event(&name, data, extra).or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn restore_messages(&self, json: String) -> Result<String> {
        crate::error::guard("restoreMessages", || {
            let items = array(&json, "restoreMessages")?;
            to_json(&self.inner.restore_messages(items).or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn restore_token_state(&self, json: String) -> Result<()> {
        crate::error::guard("restoreTokenState", || {
            let patch: TokenPatch = parse_opt(Some(json), "restoreTokenState: state")?;
            self.inner.restore_token_state(patch).or_throw()
        })
    }

    /// The messages of the current context (`full`: every message from the start), page by
    /// page, the next page read while JS parses the current one.
    #[napi(catch_unwind)]
    pub fn read_messages(&self, full: bool) -> NativePages {
        let view = if full {
            MessageView::Full
        } else {
            MessageView::Context
        };
        NativePages::new(threadline::message_pages(&self.inner, view, PAGE_BYTES))
    }

    /// Envelopes of records `from_seq` to `from_seq + limit - 1`, read ahead like `read_messages`.
    #[napi(catch_unwind)]
    pub fn read_envelopes(&self, from_seq: f64, limit: f64) -> NativePages {
        let from = from_seq as u64;
        let end = from.saturating_add(limit as u64);
        NativePages::new(threadline::pages(
            &self.inner,
            Source::Envelopes { end },
            from,
            PAGE_BYTES,
        ))
    }

    /// One page of envelopes, read off the main thread.
    #[napi]
    pub fn envelopes_page_async(
        &self,
        from_seq: f64,
        limit: f64,
        max_bytes: Option<u32>,
    ) -> AsyncTask<ReadPage> {
        AsyncTask::new(ReadPage {
            session: self.inner.clone(),
            from: from_seq as u64,
            limit: limit as u64,
            max_bytes: page_bytes(max_bytes),
        })
    }

    #[napi(catch_unwind)]
    pub fn turns(&self) -> Result<String> {
        crate::error::guard("turns", || to_json(&self.inner.turns().or_throw()?))
    }

    #[napi(catch_unwind)]
    pub fn token_tracker(&self) -> Result<String> {
        crate::error::guard("tokenTracker", || {
            to_json(&self.inner.token_tracker().or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn context_fill(&self) -> Result<String> {
        crate::error::guard("contextFill", || {
            to_json(&self.inner.context_fill().or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn set_status(&self, status: String) -> Result<()> {
        crate::error::guard("setStatus", || {
            let status = Status::parse(&status).ok_or_else(|| {
                to_js(threadline::Error::InvalidInput(format!(
                    "setStatus: status: expected 'active', 'completed', 'failed' or 'interrupted', got '{status}'"
                )))
            })?;
            self.inner.set_status(status).or_throw()
        })
    }

    /// Changes title / metadata / contextWindow / model (JSON of the changes); the new info.
    #[napi(catch_unwind)]
    pub fn update(&self, json: String) -> Result<String> {
        crate::error::guard("update", || {
            let changes = threadline::SessionUpdate::from_json(parse_json(&json, "update")?)
                .map_err(|e| to_js(e.during("update")))?;
            to_json(&self.inner.update(changes).or_throw()?)
        })
    }

    /// Checks every record of the session; the report as JSON.
    #[napi(catch_unwind)]
    pub fn verify(&self) -> Result<String> {
        to_json(&self.inner.verify().or_throw()?)
    }

    #[napi]
    pub fn close(&self) {
        self.inner.close()
    }
}

pub struct ReadPage {
    session: Arc<Session>,
    from: u64,
    limit: u64,
    max_bytes: usize,
}

impl Task for ReadPage {
    type Output = threadline::Page;
    type JsValue = NativePage;

    fn compute(&mut self) -> napi::Result<threadline::Page> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.session
                .envelopes_page(self.from, self.limit, self.max_bytes)
                .map_err(async_error)
        }))
        .unwrap_or_else(|p| {
            Err(async_error(crate::error::panicked(
                "async task",
                p.as_ref(),
            )))
        })
    }

    fn resolve(&mut self, _: Env, page: threadline::Page) -> napi::Result<NativePage> {
        Ok(page.into())
    }
}
