//! Python binding for the Threadline core: conversions and classes only. Python values cross as
//! JSON text written and read here (convert.rs); core calls run with the GIL released; every
//! core error becomes one `ThreadlineError` with the contract's `code`, and a panic (a bug)
//! becomes a coded error too, never a `PanicException`.
#![deny(clippy::all)]

mod convert;
mod interop;

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use serde_json::{Map, Value};
use threadline::{
    ContextOptions, MessageView, RecallOptions, RecoverOptions, SearchOptions, Session,
    SessionFilter, SessionOptions, Status, Store, StoreOptions, UnknownOutcome, PAGE_BYTES,
};

create_exception!(
    threadline,
    ThreadlineError,
    PyException,
    "A Threadline error; `.code` is its stable code (INVALID_INPUT, NOT_FOUND, SESSION_LOCKED, ...)."
);

/// The Python exception of a core error: its message, with `.code` set.
fn py_err(py: Python<'_>, e: threadline::Error) -> PyErr {
    coded(py, e.code(), e.bounded_message())
}

fn coded(py: Python<'_>, code: &str, message: String) -> PyErr {
    let err = ThreadlineError::new_err(message);
    // setting an attribute on a fresh exception instance cannot fail
    let _ = err.value(py).setattr("code", code);
    err
}

fn invalid(py: Python<'_>, message: String) -> PyErr {
    coded(py, "INVALID_INPUT", message)
}

/// Runs a core call with the GIL released; a panic becomes a coded INVALID_INPUT naming `op`
/// (as in the Node binding: transactions roll back as the stack unwinds).
fn run<T: Send>(
    py: Python<'_>,
    op: &str,
    f: impl FnOnce() -> threadline::Result<T> + Send,
) -> PyResult<T> {
    let r = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(threadline::Error::InvalidInput(format!(
                "{op}: internal error (a bug in threadline; please report it with the input): {what}"
            )))
        })
    });
    r.map_err(|e| py_err(py, e))
}

/// A page of stored envelopes (a JSON array) with `message` left out of the records holding
/// `key`: those are split at their top-level keys only (the values stay text; the keys may come
/// in another order); the other records are copied as stored.
fn without_message(page: &[u8], key: &str) -> threadline::Result<Vec<u8>> {
    use serde_json::value::RawValue;
    let damaged = |e: serde_json::Error| {
        threadline::Error::StoreCorrupt(format!("a stored record is damaged: {e}"))
    };
    let records: Vec<&RawValue> = serde_json::from_slice(page).map_err(damaged)?;
    let mut out = Vec::with_capacity(page.len());
    out.push(b'[');
    for (i, raw) in records.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let record: HashMap<String, &RawValue> =
            serde_json::from_str(raw.get()).map_err(damaged)?;
        if !record.contains_key(key) {
            out.extend_from_slice(raw.get().as_bytes());
            continue;
        }
        out.push(b'{');
        let mut first = true;
        for (k, v) in record.iter().filter(|(k, _)| *k != "message") {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(serde_json::to_string(k).map_err(damaged)?.as_bytes());
            out.push(b':');
            out.extend_from_slice(v.get().as_bytes());
        }
        out.push(b'}');
    }
    out.push(b']');
    Ok(out)
}

/// A Python value as a JSON value (through text, parsed by the core: its limits apply).
fn json_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let py = obj.py();
    let text = convert::to_json_text(obj, what).map_err(|r| invalid(py, r.0))?;
    threadline::parse(&text).map_err(|e| py_err(py, e.during(what)))
}

/// Options given as a dict (keys already the contract's camelCase names), or None.
fn options<T: serde::de::DeserializeOwned + Default>(
    obj: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<T> {
    match obj {
        None => Ok(T::default()),
        Some(o) if o.is_none() => Ok(T::default()),
        Some(o) => {
            let v = json_of(o, what)?;
            threadline::from_json(v, what).map_err(|e| py_err(o.py(), e))
        }
    }
}

/// Options that must be given, as a dict.
fn required<T: serde::de::DeserializeOwned>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    let v = json_of(obj, what)?;
    threadline::from_json(v, what).map_err(|e| py_err(obj.py(), e))
}

fn py_of<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let v = serde_json::to_value(v).map_err(|e| coded(py, "STORE_IO", e.to_string()))?;
    convert::to_py(py, &v)
}

/// The fields a session fills in on an append, in the order the Node binding returns them.
const FILLED: [&str; 6] = [
    "type",
    "uuid",
    "parentUuid",
    "sessionId",
    "seq",
    "timestamp",
];

fn filled<'py>(py: Python<'py>, env: &Map<String, Value>) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    for k in FILLED {
        if let Some(v) = env.get(k) {
            d.set_item(k, convert::to_py(py, v)?)?;
        }
    }
    Ok(d.into_any())
}

#[pyclass(frozen, module = "threadline._native")]
struct NativeStore {
    inner: Arc<Store>,
}

#[pymethods]
impl NativeStore {
    #[staticmethod]
    #[pyo3(signature = (path=None, options=None))]
    fn open(
        py: Python<'_>,
        path: Option<String>,
        options: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<NativeStore> {
        let o: StoreOptions = self::options(options, "open: options")?;
        let store = run(py, "open", || Store::open(path.as_deref(), o))?;
        Ok(NativeStore {
            inner: Arc::new(store),
        })
    }

    #[getter]
    fn path(&self) -> String {
        self.inner.path().to_string()
    }

    #[pyo3(signature = (options=None))]
    fn create_session(
        &self,
        py: Python<'_>,
        options: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<NativeSession> {
        let o: SessionOptions = self::options(options, "create_session")?;
        let s = run(py, "create_session", || self.inner.create_session(o))?;
        Ok(NativeSession::wrap(s))
    }

    #[pyo3(signature = (id, prompt_key=None))]
    fn open_session(
        &self,
        py: Python<'_>,
        id: String,
        prompt_key: Option<String>,
    ) -> PyResult<NativeSession> {
        let s = run(py, "open_session", || {
            self.inner.open_session(&id, prompt_key.as_deref())
        })?;
        Ok(NativeSession::wrap(s))
    }

    #[pyo3(signature = (filter=None))]
    fn list_sessions<'py>(
        &self,
        py: Python<'py>,
        filter: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f: SessionFilter = options(filter, "list_sessions")?;
        let list = run(py, "list_sessions", || self.inner.list_sessions(&f))?;
        py_of(py, &list)
    }

    fn delete_session(&self, py: Python<'_>, id: String) -> PyResult<()> {
        run(py, "delete_session", || self.inner.delete_session(&id))
    }

    #[pyo3(signature = (query, options=None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: String,
        options: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let o: SearchOptions = self::options(options, "search")?;
        let page = run(py, "search", || self.inner.search(&query, &o))?;
        py_of(py, &page)
    }

    /// The recall tools' definitions: `{anthropic, openaiChat, openaiResponses, names}`.
    #[pyo3(signature = (options=None))]
    fn recall_tools<'py>(
        &self,
        py: Python<'py>,
        options: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let o: RecallOptions = self::options(options, "recall_tools")?;
        let v = run(py, "recall_tools", || {
            let tools = self.inner.recall_tools(o)?;
            Ok(serde_json::json!({
                "anthropic": tools.anthropic(),
                "openaiChat": tools.openai_chat(),
                "openaiResponses": tools.openai_responses(),
                "names": tools.names(),
            }))
        })?;
        convert::to_py(py, &v)
    }

    /// Answers a recall tool call (a tool_use block); the tool_result block.
    #[pyo3(signature = (call, options=None))]
    fn recall_handle<'py>(
        &self,
        py: Python<'py>,
        call: &Bound<'py, PyAny>,
        options: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let o: RecallOptions = self::options(options, "recall_tools")?;
        let call = json_of(call, "recall_tools.handle: call")?;
        let v = run(py, "recall_tools.handle", || {
            self.inner.recall_tools(o)?.handle(&call)
        })?;
        convert::to_py(py, &v)
    }

    fn import_snapshot(&self, py: Python<'_>, text: String) -> PyResult<NativeSession> {
        let s = run(py, "import_snapshot", || self.inner.import_snapshot(&text))?;
        Ok(NativeSession::wrap(s))
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        run(py, "close", || self.inner.close())
    }
}

#[pyclass(frozen, module = "threadline._native")]
struct NativeSession {
    inner: Arc<Session>,
}

impl NativeSession {
    fn wrap(s: Session) -> NativeSession {
        NativeSession { inner: Arc::new(s) }
    }
}

#[pymethods]
impl NativeSession {
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let info = run(py, "info", || self.inner.info())?;
        py_of(py, &info)
    }

    /// Appends a message dict, an envelope dict or a str (a user message); the filled fields.
    fn append<'py>(
        &self,
        py: Python<'py>,
        message: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = json_of(message, "append: message")?;
        let env = run(py, "append", || self.inner.append(v, None))?;
        filled(py, &env)
    }

    /// Appends many in one transaction; the filled fields of each.
    fn append_many<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Value::Array(items) = json_of(messages, "append_many: messages")? else {
            return Err(invalid(py, "append_many: messages: expected a list".into()));
        };
        let envs = run(py, "append_many", || self.inner.append_many(items))?;
        let list = PyList::empty(py);
        for env in &envs {
            list.append(filled(py, env)?)?;
        }
        Ok(list.into_any())
    }

    /// The messages of the current context, or (`full`) every message from the start.
    #[pyo3(signature = (full=false))]
    fn messages<'py>(&self, py: Python<'py>, full: bool) -> PyResult<Bound<'py, PyAny>> {
        let view = if full {
            MessageView::Full
        } else {
            MessageView::Context
        };
        let list = run(py, "messages", || self.inner.messages_in(view))?;
        convert::to_py_list(py, &list)
    }

    /// The stored envelopes (every record, with seq, uuid, timestamp...) from `from_seq`.
    #[pyo3(signature = (from_seq=0, limit=None))]
    fn envelopes<'py>(
        &self,
        py: Python<'py>,
        from_seq: u64,
        limit: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let list = run(py, "envelopes", || self.inner.envelopes(from_seq, limit))?;
        convert::to_py_list(py, &list)
    }

    /// Every envelope from `from_seq` as the stored JSON text, in pages of about PAGE_BYTES
    /// (each a JSON array): for a reader of many records, `json.loads` of a page builds the same
    /// values as `envelopes` (stored text is plain JSON, and a number comes back as Python's int
    /// or float of its text either way) in about a third of the time. `without_message_of`: the
    /// records holding that key come without their `message` (and their top-level keys in any
    /// order): an adapter that keeps its framework's item under the key reads only the item, and
    /// the message was half of what was parsed.
    #[pyo3(signature = (from_seq=0, without_message_of=None))]
    fn envelope_pages<'py>(
        &self,
        py: Python<'py>,
        from_seq: u64,
        without_message_of: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let pages = run(py, "envelopes", || {
            let mut out = Vec::new();
            let mut from = Some(from_seq);
            while let Some(f) = from {
                let page = self.inner.envelopes_page(f, u64::MAX, PAGE_BYTES)?;
                from = page.next;
                out.push(match &without_message_of {
                    Some(key) => without_message(&page.json, key)?,
                    None => page.json,
                });
            }
            Ok(out)
        })?;
        let list = pages
            .iter()
            .map(|p| PyBytes::new(py, p))
            .collect::<Vec<_>>();
        Ok(PyList::new(py, list)?.into_any())
    }

    fn turns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = run(py, "turns", || self.inner.turns())?;
        py_of(py, &t)
    }

    fn token_tracker<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = run(py, "token_tracker", || self.inner.token_tracker())?;
        py_of(py, &t)
    }

    fn context_fill<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = run(py, "context_fill", || self.inner.context_fill())?;
        py_of(py, &t)
    }

    fn build_context<'py>(
        &self,
        py: Python<'py>,
        options: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let o: ContextOptions = required(options, "build_context")?;
        let c = run(py, "build_context", || self.inner.build_context(&o))?;
        py_of(py, &c)
    }

    fn snapshot(&self, py: Python<'_>) -> PyResult<String> {
        run(py, "snapshot", || self.inner.snapshot())
    }

    /// Repairs what a crash left (`unknown_outcome`: "mark" or "leave"); the report.
    #[pyo3(signature = (unknown_outcome=None, replayed=None))]
    fn recover<'py>(
        &self,
        py: Python<'py>,
        unknown_outcome: Option<String>,
        replayed: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let unknown_outcome = match unknown_outcome.as_deref() {
            None | Some("mark") => UnknownOutcome::Mark,
            Some("leave") => UnknownOutcome::Leave,
            Some(other) => {
                return Err(invalid(
                    py,
                    format!("recover: unknown_outcome: expected 'mark' or 'leave', got '{other}'"),
                ))
            }
        };
        let o = RecoverOptions {
            unknown_outcome,
            replayed: replayed.unwrap_or_default(),
        };
        let r = run(py, "recover", || self.inner.recover(&o))?;
        py_of(py, &r)
    }

    /// Appends an app event (`type: 'event'`, never sent to a model); the filled fields.
    #[pyo3(signature = (name, data=None, envelope=None))]
    fn append_event<'py>(
        &self,
        py: Python<'py>,
        name: String,
        data: Option<&Bound<'py, PyAny>>,
        envelope: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let data = match data {
            Some(d) if !d.is_none() => Some(json_of(d, "append_event: data")?),
            _ => None,
        };
        let envelope = match envelope {
            Some(e) if !e.is_none() => match json_of(e, "append_event: envelope")? {
                Value::Object(m) => Some(m),
                _ => {
                    return Err(invalid(
                        py,
                        "append_event: envelope: expected a dict".into(),
                    ))
                }
            },
            _ => None,
        };
        let env = run(py, "append_event", || {
            self.inner.append_event(&name, data, envelope)
        })?;
        filled(py, &env)
    }

    /// Continues the session from record `to_uuid` (the abandoned branch stays in the log).
    fn rewind(&self, py: Python<'_>, to_uuid: String) -> PyResult<()> {
        run(py, "rewind", || self.inner.rewind(&to_uuid))
    }

    /// The current branch and those rewinds left: `[{leafUuid, leafSeq, messageCount, current}]`.
    fn branches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let b = run(py, "branches", || self.inner.branches())?;
        py_of(py, &b)
    }

    /// What `recover()` would do with the default options; writes nothing.
    fn pending_repairs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = run(py, "pending_repairs", || self.inner.pending_repairs())?;
        py_of(py, &r)
    }

    fn set_status(&self, py: Python<'_>, status: String) -> PyResult<()> {
        let Some(s) = Status::parse(&status) else {
            return Err(invalid(py, format!(
                "set_status: status: expected 'active', 'completed', 'failed' or 'interrupted', got '{status}'"
            )));
        };
        run(py, "set_status", || self.inner.set_status(s))
    }

    fn close(&self, py: Python<'_>) {
        py.detach(|| self.inner.close())
    }
}

/// Panics inside `run`, for the test that a panic reaches Python as a coded error.
fn _panic_for_test(py: Python<'_>) -> PyResult<()> {
    run(py, "_panic_for_test", || -> threadline::Result<()> {
        panic!("a deliberate panic")
    })
}

#[pyfunction]
#[pyo3(name = "_panic_for_test")]
fn panic_for_test(py: Python<'_>) -> PyResult<()> {
    _panic_for_test(py)
}

/// Responses API items (a list, or one item) as neutral messages: `{system?, messages,
/// warnings}`; `what` names the items in errors (`add_items: items[2]`).
#[pyfunction]
#[pyo3(signature = (items, what="from_openai_responses: items"))]
fn from_openai_responses<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let list = match json_of(items, what)? {
        Value::Array(list) => list,
        one => vec![one],
    };
    let out = run(py, "from_openai_responses", || {
        threadline::convert::from_openai_responses(&list, None).map_err(|e| e.during(what))
    })?;
    py_of(py, &out)
}

#[pyfunction]
fn default_store_path() -> String {
    threadline::default_store_path()
        .to_string_lossy()
        .into_owned()
}

#[pyfunction]
fn error_codes() -> Vec<&'static str> {
    threadline::Error::CODES.to_vec()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ThreadlineError", m.py().get_type::<ThreadlineError>())?;
    m.add_class::<NativeStore>()?;
    m.add_class::<NativeSession>()?;
    m.add_function(wrap_pyfunction!(default_store_path, m)?)?;
    m.add_function(wrap_pyfunction!(error_codes, m)?)?;
    m.add_function(wrap_pyfunction!(from_openai_responses, m)?)?;
    m.add_function(wrap_pyfunction!(panic_for_test, m)?)?;
    m.add_function(wrap_pyfunction!(interop::claude_code_append, m)?)?;
    m.add_function(wrap_pyfunction!(interop::claude_code_load, m)?)?;
    m.add_function(wrap_pyfunction!(interop::claude_code_release, m)?)?;
    m.add_function(wrap_pyfunction!(interop::claude_code_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(interop::claude_code_subkeys, m)?)?;
    m.add_function(wrap_pyfunction!(interop::claude_code_delete, m)?)?;
    m.add_function(wrap_pyfunction!(interop::import_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(interop::export_session, m)?)?;
    Ok(())
}
