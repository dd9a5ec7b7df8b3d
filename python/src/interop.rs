//! Import, export and the Claude Agent SDK mirror (`threadline::interop`), as functions of the
//! native classes: conversions only, as the Node binding's src/interop.rs and src/claude_code.rs.
//! Keys and entries cross through convert.rs (lossless), never through Python's `json`.

use pyo3::prelude::*;
use pyo3::types::PyList;
use serde_json::Value;
use threadline::interop::mirror::{self, Key};
use threadline::interop::{ExportFormat, ExportOptions, Format, ImportOptions, Importer};

use crate::{convert, invalid, json_of, options, py_err, py_of, run, NativeSession, NativeStore};

/// A mirror key (a dict with the core's camelCase names: projectKey, sessionId, subpath?,
/// project?), checked by the core.
fn key_of(key: &Bound<'_, PyAny>, op: &str) -> PyResult<Key> {
    let py = key.py();
    let text = convert::to_json_text(key, &format!("{op}: key")).map_err(|r| invalid(py, r.0))?;
    Key::from_json(&text).map_err(|e| py_err(py, e.during(op)))
}

/// Appends the SDK's entries (a list) to the session the key names, the sidecar (a dict or
/// None) merged into its `metadata.claudeAgentSdk`, in one transaction; the report.
#[pyfunction]
#[pyo3(signature = (store, key, entries, sidecar=None))]
pub fn claude_code_append<'py>(
    py: Python<'py>,
    store: &NativeStore,
    key: &Bound<'py, PyAny>,
    entries: &Bound<'py, PyAny>,
    sidecar: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let key = key_of(key, "claudeCodeAppend")?;
    if !entries.is_instance_of::<PyList>() {
        return Err(invalid(
            py,
            "claudeCodeAppend: entries: expected a list".to_string(),
        ));
    }
    let entries = convert::to_json_text(entries, "claudeCodeAppend: entries")
        .map_err(|r| invalid(py, r.0))?;
    let sidecar = match sidecar {
        None => None,
        Some(s) if s.is_none() => None,
        Some(s) => match json_of(s, "claudeCodeAppend: sidecar")? {
            Value::Object(m) => Some(m),
            _ => {
                return Err(invalid(
                    py,
                    "claudeCodeAppend: sidecar: expected a dict".to_string(),
                ))
            }
        },
    };
    let inner = store.inner.clone();
    let report = run(py, "claudeCodeAppend", move || {
        mirror::append(&inner, &key, &entries, sidecar)
    })?;
    py_of(py, &report)
}

/// The entries of the session the key names, as appended; None when there is no such session.
#[pyfunction]
pub fn claude_code_load<'py>(
    py: Python<'py>,
    store: &NativeStore,
    key: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let key = key_of(key, "claudeCodeLoad")?;
    let inner = store.inner.clone();
    let text = run(py, "claudeCodeLoad", move || {
        match mirror::load(&inner, &key)? {
            None => Ok(None),
            Some(text) => threadline::parse(&text).map(Some),
        }
    })?;
    match text {
        None => Ok(py.None().into_bound(py)),
        Some(v) => convert::to_py(py, &v),
    }
}

/// Lets go of the session the key names if an append of this store holds it; whether one did.
#[pyfunction]
pub fn claude_code_release(
    py: Python<'_>,
    store: &NativeStore,
    key: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let key = key_of(key, "claudeCodeRelease")?;
    let inner = store.inner.clone();
    run(py, "claudeCodeRelease", move || {
        mirror::release(&inner, &key)
    })
}

/// `[{sessionId, mtime, summary?}]` of the main sessions of a project key.
#[pyfunction]
pub fn claude_code_sessions<'py>(
    py: Python<'py>,
    store: &NativeStore,
    project_key: String,
) -> PyResult<Bound<'py, PyAny>> {
    let inner = store.inner.clone();
    let rows = run(py, "claudeCodeSessions", move || {
        mirror::sessions(&inner, &project_key)
    })?;
    py_of(py, &rows)
}

/// The subpaths of a session's subagent transcripts.
#[pyfunction]
pub fn claude_code_subkeys(
    py: Python<'_>,
    store: &NativeStore,
    session_id: String,
) -> PyResult<Vec<String>> {
    let inner = store.inner.clone();
    run(py, "claudeCodeSubkeys", move || {
        mirror::subkeys(&inner, &session_id)
    })
}

/// Deletes the session the key names (a main key: with its subagents); missing: nothing.
#[pyfunction]
pub fn claude_code_delete(
    py: Python<'_>,
    store: &NativeStore,
    key: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let key = key_of(key, "claudeCodeDelete")?;
    let inner = store.inner.clone();
    run(py, "claudeCodeDelete", move || mirror::delete(&inner, &key))
}

/// Imports `path` (a file or a folder) in `format`, one file per step with the GIL released;
/// `on_progress` (a callable or None) gets each step's progress dict between steps. The report.
#[pyfunction]
#[pyo3(signature = (store, format, path, options=None, on_progress=None))]
pub fn import_sessions<'py>(
    py: Python<'py>,
    store: &NativeStore,
    format: String,
    path: String,
    options: Option<&Bound<'py, PyAny>>,
    on_progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let o: ImportOptions = self::options(options, "import: options")?;
    let mut importer = run(py, "import", || {
        let format = Format::parse(&format)?;
        Importer::new(format, std::path::Path::new(&path), o)
    })?;
    let inner = store.inner.clone();
    loop {
        let at = run(py, "import", || importer.step(&inner))?;
        let Some(at) = at else { break };
        if let Some(f) = on_progress.filter(|f| !f.is_none()) {
            // an exception from the callback stops the import there (files done stay imported)
            f.call1((py_of(py, &at)?,))?;
        }
    }
    py_of(py, importer.report())
}

/// The session written out in `format` ('claude-code', 'markdown', 'html', 'snapshot').
#[pyfunction]
#[pyo3(signature = (session, format, options=None))]
pub fn export_session(
    py: Python<'_>,
    session: &NativeSession,
    format: String,
    options: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let o: ExportOptions = self::options(options, "export: options")?;
    let inner = session.inner.clone();
    run(py, "export", move || {
        let format = ExportFormat::parse(&format)?;
        threadline::interop::export_with(&inner, format, &o)
    })
}
