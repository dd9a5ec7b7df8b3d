//! Python objects <-> JSON text, walked here rather than through Python's `json`, which loses
//! number text (`1E+2`, big integers) and accepts NaN. Values come back built from the stored
//! JSON: key order kept, integers exact, a float as Python's float of its text.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;
use std::collections::HashMap;

/// The deepest nesting accepted: the core's own limit for JSON text (model/json.rs).
const MAX_DEPTH: usize = 128;

/// The largest integer accepted, in digits (Python's default `sys.get_int_max_str_digits()`),
/// and in bits: any int of at most this many bits has at most that many digits.
const MAX_INT_DIGITS: usize = 4300;
const MAX_INT_BITS: u64 = 14_280;

/// Why a Python value cannot be stored, with the path of the offending part.
pub struct Refused(pub String);

/// Writes `obj` as JSON text into `out`; `path` names it in errors (`message.content[0]`).
pub fn to_json_text(obj: &Bound<'_, PyAny>, path: &str) -> Result<String, Refused> {
    let mut out = String::new();
    let mut at = path.to_string();
    write(obj, &mut at, 0, &mut out)?;
    Ok(out)
}

fn refuse(path: &str, why: impl std::fmt::Display) -> Refused {
    Refused(format!("{path}: {why}"))
}

fn write(
    obj: &Bound<'_, PyAny>,
    path: &mut String,
    depth: usize,
    out: &mut String,
) -> Result<(), Refused> {
    if depth > MAX_DEPTH {
        return Err(refuse(
            path,
            format!("nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    if obj.is_none() {
        out.push_str("null");
    } else if let Ok(b) = obj.cast::<PyBool>() {
        // before int: bool is a subclass of int
        out.push_str(if b.is_true() { "true" } else { "false" });
    } else if let Ok(s) = obj.cast::<PyString>() {
        let s = s.to_cow().map_err(|_| {
            refuse(
                path,
                "a string holds a lone surrogate, which is not valid Unicode text",
            )
        })?;
        write_str(&s, out);
    } else if obj.cast::<PyInt>().is_ok() {
        // The same bound on every Python version: 3.11+ refuses to write an int of more than
        // 4300 digits as text (int_max_str_digits), 3.9 and 3.10 would store it.
        let bits: u64 = obj
            .call_method0("bit_length")
            .and_then(|b| b.extract())
            .map_err(|e| refuse(path, e))?;
        if bits > MAX_INT_BITS {
            return Err(refuse(
                path,
                format!(
                    "an integer of {bits} bits is too large (more than {MAX_INT_DIGITS} digits)"
                ),
            ));
        }
        // int.__repr__, not str(): an IntEnum member's str() is its name
        let text = obj
            .py()
            .get_type::<PyInt>()
            .call_method1("__repr__", (obj,))
            .and_then(|t| t.extract::<String>())
            .map_err(|e| {
                refuse(
                    path,
                    format!("an integer that cannot be written as text ({e})"),
                )
            })?;
        out.push_str(&text);
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        let v = f.value();
        if !v.is_finite() {
            return Err(refuse(
                path,
                format!("{v} is not a JSON number (NaN and infinities cannot be stored)"),
            ));
        }
        // Python's repr is the shortest text that reads back as the same float, and always
        // shows a float as one ("100.0", "1e+100"), so it comes back a float.
        let text = PyFloat::new(obj.py(), v)
            .repr()
            .and_then(|t| t.extract::<String>())
            .map_err(|e| refuse(path, e))?;
        out.push_str(&text);
    } else if let Ok(d) = obj.cast::<PyDict>() {
        out.push('{');
        let mark = path.len();
        for (i, (k, v)) in d.iter().enumerate() {
            let Ok(k) = k.cast::<PyString>() else {
                return Err(refuse(
                    path,
                    format!(
                        "a key is {}, not a str (JSON keys are strings)",
                        type_name(&k)
                    ),
                ));
            };
            let k = k.to_cow().map_err(|_| {
                refuse(
                    path,
                    "a key holds a lone surrogate, which is not valid Unicode text",
                )
            })?;
            if i > 0 {
                out.push(',');
            }
            write_str(&k, out);
            out.push(':');
            path.push('.');
            path.push_str(&k);
            write(&v, path, depth + 1, out)?;
            path.truncate(mark);
        }
        out.push('}');
    } else if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        out.push('[');
        let mark = path.len();
        for (i, item) in obj.try_iter().map_err(|e| refuse(path, e))?.enumerate() {
            let item = item.map_err(|e| refuse(path, e))?;
            if i > 0 {
                out.push(',');
            }
            path.push_str(&format!("[{i}]"));
            write(&item, path, depth + 1, out)?;
            path.truncate(mark);
        }
        out.push(']');
    } else {
        return Err(refuse(
            path,
            format!(
                "expected a dict, list, str, int, float, bool or None, got {}",
                type_name(obj)
            ),
        ));
    }
    Ok(())
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}

fn write_str(s: &str, out: &mut String) {
    // serde_json's escaping of a &str cannot fail
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// The Python value of a stored JSON value.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Builder::new(py).value(v)
}

/// The Python list of some stored JSON values (records read in bulk share one key cache).
pub fn to_py_list<'py>(py: Python<'py>, values: &[Value]) -> PyResult<Bound<'py, PyAny>> {
    let mut b = Builder::new(py);
    let items = values
        .iter()
        .map(|v| b.value(v))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.into_any())
}

/// Builds Python values, making each distinct dict key's str once: records repeat the same few
/// keys, and a key made once is also hashed once (a str caches its hash), which is most of the
/// cost of reading a long session into dicts.
struct Builder<'py, 'v> {
    py: Python<'py>,
    keys: HashMap<&'v str, Bound<'py, PyString>>,
}

impl<'py, 'v> Builder<'py, 'v> {
    fn new(py: Python<'py>) -> Self {
        Builder {
            py,
            keys: HashMap::new(),
        }
    }

    fn value(&mut self, v: &'v Value) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match v {
            Value::Null => py.None().into_bound(py),
            Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
            Value::String(s) => PyString::new(py, s).into_any(),
            Value::Number(n) => number(py, n.as_str())?,
            Value::Array(a) => {
                let items = a
                    .iter()
                    .map(|item| self.value(item))
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, items)?.into_any()
            }
            Value::Object(o) => {
                let d = PyDict::new(py);
                for (k, item) in o {
                    let key = match self.keys.get(k.as_str()) {
                        Some(key) => key.clone(),
                        None => {
                            let key = PyString::new(py, k);
                            // bounded: keys of generated or foreign data need not repeat
                            if self.keys.len() < 4096 {
                                self.keys.insert(k.as_str(), key.clone());
                            }
                            key
                        }
                    };
                    d.set_item(key, self.value(item)?)?;
                }
                d.into_any()
            }
        })
    }
}

fn number<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    if text.contains(['.', 'e', 'E']) {
        let f: f64 = text
            .parse()
            .map_err(|_| PyTypeError::new_err(format!("stored number {text} is not a float")))?;
        return Ok(PyFloat::new(py, f).into_any());
    }
    if let Ok(i) = text.parse::<i64>() {
        return Ok(i.into_pyobject(py)?.into_any());
    }
    // exact, whatever its size
    py.get_type::<PyInt>().call1((text,))
}
