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
