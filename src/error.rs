//! The one place core errors become JS errors: `err.code` is the contract's stable code.

use napi::Error;

/// A JS error code (`INVALID_INPUT`, `NOT_FOUND`, ...), thrown as the error's `code` property.
#[derive(Debug, Clone, Copy)]
pub struct Code(pub &'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

pub type Result<T> = napi::Result<T, Code>;

pub fn to_js(e: threadline::Error) -> Error<Code> {
    Error::new(Code(e.code()), e.bounded_message())
}

pub trait OrThrow<T> {
    fn or_throw(self) -> Result<T>;
}

impl<T> OrThrow<T> for threadline::Result<T> {
    fn or_throw(self) -> Result<T> {
        self.map_err(to_js)
    }
}

/// Parses JSON text the facade produced; `what` names it in the error.
pub fn parse_json(text: &str, what: &str) -> Result<serde_json::Value> {
    threadline::parse(text).map_err(|e| to_js(e.during(what)))
}

pub fn parse_opt<T: serde::de::DeserializeOwned + Default>(
    text: Option<String>,
    what: &str,
) -> Result<T> {
    match text {
        None => Ok(T::default()),
        Some(t) => {
            let v = parse_json(&t, what)?;
            if v.is_null() {
                return Ok(T::default());
            }
            threadline::from_json(v, what).or_throw()
        }
    }
}

pub fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::new(Code("STORE_IO"), e.to_string()))
}

/// Runs one call of the binding so that a panic (a bug: every input and disk failure is meant to
/// be an `Err`) reaches JS as a coded INVALID_INPUT error naming the operation, never as an
/// uncoded `GenericFailure` or an abort. Transactions roll back as the stack unwinds.
pub fn guard<T>(op: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(to_js(panicked(op, payload.as_ref()))))
}

/// The error a panic in `op` becomes.
pub fn panicked(op: &str, payload: &(dyn std::any::Any + Send)) -> threadline::Error {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    threadline::Error::InvalidInput(format!(
        "{op}: internal error (a bug in threadline; please report it with the input): {what}"
    ))
}
