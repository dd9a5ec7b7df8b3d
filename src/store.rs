//! `NativeStore`: the core Store for JS. The facade in index.js wraps it as `Store`.

use std::sync::Arc;

use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;
use threadline::{
    RecallOptions, SearchOptions, SessionFilter, SessionOptions, Store, StoreOptions, VerifyOptions,
};

use crate::error::{parse_opt, to_json, OrThrow, Result};
use crate::session::NativeSession;

#[napi]
pub struct NativeStore {
    pub(crate) inner: Arc<Store>,
}

impl NativeStore {
    /// Another handle on the same store (for work on another thread).
    pub(crate) fn handle(&self) -> NativeStore {
        NativeStore {
            inner: self.inner.clone(),
        }
    }

    /// The core store itself, shared.
    pub(crate) fn shared(&self) -> Arc<Store> {
        self.inner.clone()
    }
}

fn open(path: Option<String>, options: Option<String>) -> Result<Store> {
    let options: StoreOptions = parse_opt(options, "open: options")?;
    Store::open(path.as_deref(), options).or_throw()
}

#[napi]
impl NativeStore {
    #[napi(factory, catch_unwind)]
    pub fn open(path: Option<String>, options_json: Option<String>) -> Result<NativeStore> {
        crate::error::guard("open", || {
            Ok(NativeStore {
                inner: Arc::new(open(path, options_json)?),
            })
        })
    }

    #[napi(getter)]
    pub fn path(&self) -> String {
        self.inner.path().to_string()
    }

    /// What the store found and handled on its own since it was last asked (a damaged or
    /// deleted append log...), as JSON `[{ kind, message }]`: the facade emits them as telemetry.
    #[napi]
    pub fn take_notices(&self) -> String {
        let list: Vec<serde_json::Value> = self
            .inner
            .take_notices()
            .into_iter()
            .map(|n| serde_json::json!({ "kind": n.kind, "message": n.message }))
            .collect();
        serde_json::Value::Array(list).to_string()
    }

    #[napi(catch_unwind)]
    pub fn create_session(&self, options_json: Option<String>) -> Result<NativeSession> {
        crate::error::guard("createSession", || {
            let options: SessionOptions = parse_opt(options_json, "createSession: options")?;
            Ok(NativeSession::wrap(
                self.inner.create_session(options).or_throw()?,
            ))
        })
    }

    #[napi(catch_unwind)]
    pub fn open_session(&self, id: String, prompt_key: Option<String>) -> Result<NativeSession> {
        crate::error::guard("openSession", || {
            Ok(NativeSession::wrap(
                self.inner
                    .open_session(&id, prompt_key.as_deref())
                    .or_throw()?,
            ))
        })
    }

    #[napi]
    pub fn open_session_async(
        &self,
        id: String,
        prompt_key: Option<String>,
    ) -> AsyncTask<OpenSession> {
        AsyncTask::new(OpenSession {
            store: self.inner.clone(),
            id,
            prompt_key,
        })
    }

    #[napi(catch_unwind)]
    pub fn list_sessions(&self, filter_json: Option<String>) -> Result<String> {
        crate::error::guard("listSessions", || {
            let filter: SessionFilter = parse_opt(filter_json, "listSessions: filter")?;
            to_json(&self.inner.list_sessions(&filter).or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn import_snapshot(&self, json: String) -> Result<NativeSession> {
        crate::error::guard("importSnapshot", || {
            Ok(NativeSession::wrap(
                self.inner.import_snapshot(&json).or_throw()?,
            ))
        })
    }

    #[napi(catch_unwind)]
    pub fn fork_session(
        &self,
        id: String,
        at_uuid: Option<String>,
        title: Option<String>,
    ) -> Result<NativeSession> {
        crate::error::guard("forkSession", || {
            Ok(NativeSession::wrap(
                self.inner
                    .fork_session(&id, at_uuid.as_deref(), title)
                    .or_throw()?,
            ))
        })
    }

    #[napi(catch_unwind)]
    pub fn interrupted_sessions(&self) -> Result<String> {
        crate::error::guard("interruptedSessions", || {
            to_json(&self.inner.interrupted_sessions().or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn delete_session(&self, id: String) -> Result<()> {
        crate::error::guard("deleteSession", || {
            self.inner.delete_session(&id).or_throw()
        })
    }

    /// Searches every session; the page as JSON.
    #[napi(catch_unwind)]
    pub fn search(&self, query: String, options_json: Option<String>) -> Result<String> {
        crate::error::guard("search", || {
            let options: SearchOptions = parse_opt(options_json, "search: options")?;
            to_json(&self.inner.search(&query, &options).or_throw()?)
        })
    }

    /// The recall tools' definitions as JSON (checks the options).
    #[napi(catch_unwind)]
    pub fn recall_tools(&self, options_json: Option<String>) -> Result<String> {
        crate::error::guard("recallTools", || {
            let options: RecallOptions = parse_opt(options_json, "recallTools: options")?;
            let tools = self.inner.recall_tools(options).or_throw()?;
            to_json(&serde_json::json!({
                "anthropic": tools.anthropic(),
                "openaiChat": tools.openai_chat(),
                "openaiResponses": tools.openai_responses(),
                "names": tools.names(),
            }))
        })
    }

    /// Answers a recall tool call (JSON); the tool_result block as JSON.
    #[napi(catch_unwind)]
    pub fn recall_handle(&self, options_json: Option<String>, call_json: String) -> Result<String> {
        crate::error::guard("recallTools.handle", || {
            let options: RecallOptions = parse_opt(options_json, "recallTools: options")?;
            let tools = self.inner.recall_tools(options).or_throw()?;
            let result = match threadline::parse(&call_json) {
                Ok(call) => tools.handle(&call).or_throw()?,
                // A call that is not JSON we can read is the model's (or its parser's) mistake.
                Err(e) => serde_json::json!({"type": "tool_result", "tool_use_id": "",
                    "content": format!("the call: {}", e.message()), "is_error": true}),
            };
            to_json(&result)
        })
    }

    /// Checks the whole store; the report as JSON.
    #[napi(catch_unwind)]
    pub fn verify(&self, options_json: Option<String>) -> Result<String> {
        let options: VerifyOptions = parse_opt(options_json, "verify: options")?;
        to_json(&self.inner.verify(&options).or_throw()?)
    }

    /// The store's size and what vacuum() could give back, as JSON.
    #[napi(catch_unwind)]
    pub fn stats(&self) -> Result<String> {
        crate::error::guard("stats", || to_json(&self.inner.stats().or_throw()?))
    }

    /// VACUUM; `{ bytesBefore, bytesAfter }` as JSON.
    #[napi(catch_unwind)]
    pub fn vacuum(&self) -> Result<String> {
        crate::error::guard("vacuum", || to_json(&self.inner.vacuum().or_throw()?))
    }

    /// A copy of every session in a new SQLite file at `path`; the report as JSON.
    #[napi(catch_unwind)]
    pub fn backup(&self, path: String) -> Result<String> {
        crate::error::guard("backup", || to_json(&self.inner.backup(&path).or_throw()?))
    }

    #[napi(catch_unwind)]
    pub fn close(&self) -> Result<()> {
        crate::error::guard("close", || self.inner.close().or_throw())
    }
}

pub struct OpenStore {
    path: Option<String>,
    options: StoreOptions,
}

impl Task for OpenStore {
    type Output = Store;
    type JsValue = NativeStore;

    fn compute(&mut self) -> napi::Result<Store> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Store::open(self.path.as_deref(), self.options.clone()).map_err(async_error)
        }))
        .unwrap_or_else(|p| {
            Err(async_error(crate::error::panicked(
                "async task",
                p.as_ref(),
            )))
        })
    }

    fn resolve(&mut self, _: Env, store: Store) -> napi::Result<NativeStore> {
        Ok(NativeStore {
            inner: Arc::new(store),
        })
    }
}

/// Opens a store off the main thread (options are checked here, synchronously).
#[napi(catch_unwind)]
pub fn open_store_async(
    path: Option<String>,
    options_json: Option<String>,
) -> Result<AsyncTask<OpenStore>> {
    crate::error::guard("openStoreAsync", || {
        let options: StoreOptions = parse_opt(options_json, "openAsync: options")?;
        Ok(AsyncTask::new(OpenStore { path, options }))
    })
}

pub struct OpenSession {
    store: Arc<Store>,
    id: String,
    prompt_key: Option<String>,
}

impl Task for OpenSession {
    type Output = threadline::Session;
    type JsValue = NativeSession;

    fn compute(&mut self) -> napi::Result<threadline::Session> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.store
                .open_session(&self.id, self.prompt_key.as_deref())
                .map_err(async_error)
        }))
        .unwrap_or_else(|p| {
            Err(async_error(crate::error::panicked(
                "async task",
                p.as_ref(),
            )))
        })
    }

    fn resolve(&mut self, _: Env, s: threadline::Session) -> napi::Result<NativeSession> {
        Ok(NativeSession::wrap(s))
    }
}

/// Async tasks reject with napi's own error type; the code travels in the message before a NUL
/// and the facade restores it as `err.code`.
pub fn async_error(e: threadline::Error) -> napi::Error {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!("{}\u{0}{}", e.code(), e.bounded_message()),
    )
}
