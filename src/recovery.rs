//! The recovery part of `NativeSession`: the tool-call journal, repairs, streamed responses.

use std::sync::{Arc, Mutex};

use napi_derive::napi;
use serde_json::Value;
use threadline::{
    CallState, RecoverOptions, ResponseOptions, ResponseWriter, Session, UnknownOutcome,
};

use crate::error::{parse_json, parse_opt, to_js, to_json, Code, OrThrow, Result};
use crate::session::NativeSession;

fn invalid(msg: String) -> napi::Error<Code> {
    to_js(threadline::Error::InvalidInput(msg))
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RecoverJson {
    unknown_outcome: Option<String>,
    #[serde(default)]
    replayed: Vec<String>,
}

#[napi]
impl NativeSession {
    #[napi(catch_unwind)]
    pub fn tool_call_started(&self, id: String) -> Result<()> {
        crate::error::guard("toolCallStarted", || {
            self.inner.tool_call_started(&id).or_throw()
        })
    }

    #[napi(catch_unwind)]
    pub fn record_tool_outcome(&self, id: String, result_json: String) -> Result<()> {
        crate::error::guard("recordToolOutcome", || {
            let result = parse_json(&result_json, "recordToolOutcome: result")?;
            self.inner.record_tool_outcome(&id, result).or_throw()
        })
    }

    #[napi(catch_unwind)]
    pub fn tool_calls(&self, state: Option<String>) -> Result<String> {
        crate::error::guard("toolCalls", || {
            let state = match state {
                None => None,
                Some(s) => Some(CallState::parse(&s).ok_or_else(|| {
                    invalid(format!(
                        "toolCalls: filter.state: expected 'requested', 'started', 'completed', 'failed' or 'denied', got '{s}'"
                    ))
                })?),
            };
            to_json(&self.inner.tool_calls(state).or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn cached_tool_result(&self, id: String) -> Result<Option<String>> {
        crate::error::guard("cachedToolResult", || {
            match self.inner.cached_tool_result(&id).or_throw()? {
                Some(v) => to_json(&v).map(Some),
                None => Ok(None),
            }
        })
    }

    #[napi(catch_unwind)]
    pub fn pending_repairs(&self) -> Result<String> {
        crate::error::guard("pendingRepairs", || {
            to_json(&self.inner.pending_repairs().or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn recover(&self, options_json: Option<String>) -> Result<String> {
        crate::error::guard("recover", || {
            let o: RecoverJson = parse_opt(options_json, "recover: options")?;
            let unknown_outcome = match o.unknown_outcome.as_deref() {
                None | Some("mark") => UnknownOutcome::Mark,
                Some("leave") => UnknownOutcome::Leave,
                Some(other) => {
                    return Err(invalid(format!(
                        "recover: options.unknownOutcome: expected 'mark' or 'leave', got '{other}'"
                    )))
                }
            };
            let options = RecoverOptions {
                unknown_outcome,
                replayed: o.replayed,
            };
            to_json(&self.inner.recover(&options).or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn snapshot(&self) -> Result<String> {
        crate::error::guard("snapshot", || self.inner.snapshot().or_throw())
    }

    #[napi(catch_unwind)]
    pub fn begin_response(&self, options_json: Option<String>) -> Result<NativeResponseWriter> {
        crate::error::guard("beginResponse", || {
            let options: ResponseOptions = parse_opt(options_json, "beginResponse: options")?;
            Ok(NativeResponseWriter {
                writer: Arc::new(Mutex::new(self.inner.begin_response(options))),
                session: self.inner.clone(),
            })
        })
    }
}

/// A response being streamed into its session.
#[napi]
pub struct NativeResponseWriter {
    session: Arc<Session>,
    writer: Arc<Mutex<ResponseWriter>>,
}

impl NativeResponseWriter {
    /// Another handle on the same writer (for work on another thread).
    pub(crate) fn handle(&self) -> NativeResponseWriter {
        NativeResponseWriter {
            session: self.session.clone(),
            writer: self.writer.clone(),
        }
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, ResponseWriter> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[napi]
impl NativeResponseWriter {
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.writer().id().to_string()
    }

    #[napi(catch_unwind)]
    pub fn push(&self, chunk_json: String) -> Result<()> {
        crate::error::guard("push", || {
            let chunk = parse_json(&chunk_json, "push")?;
            self.writer().push(&self.session, chunk).or_throw()
        })
    }

    #[napi(catch_unwind)]
    pub fn finish(&self, message_json: Option<String>) -> Result<String> {
        crate::error::guard("finish", || {
            let message: Option<Value> = message_json
                .map(|m| parse_json(&m, "finish: message"))
                .transpose()?
                .filter(|m| !m.is_null());
            to_json(&self.writer().finish(&self.session, message).or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn fail(&self, message: String, code: Option<String>) -> Result<String> {
        crate::error::guard("fail", || {
            to_json(
                &self
                    .writer()
                    .fail(&self.session, &message, code.as_deref())
                    .or_throw()?,
            )
        })
    }
}
