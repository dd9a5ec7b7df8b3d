//! Strings that cross to JS as one-byte (latin1) strings: stored JSON is pure ASCII, so V8 takes
//! it without decoding UTF-8 or widening to two bytes per character. And JSON text that comes
//! from JS, copied once.

use napi::bindgen_prelude::{FromNapiValue, ToNapiValue, TypeName, ValueType};
use napi::{check_status, sys};

/// A JS string as UTF-8, converted in one pass: its UTF-16 length (known without reading it)
/// bounds its UTF-8 length at 3 bytes a unit, so no pass to measure it first and no zero fill
/// (napi-rs's `String` does both; an append's message is the largest argument it converts). Its
/// buffer is kept for the next one on the same thread: allocating kilobytes per call showed in
/// an append's profile.
pub struct JsonText(pub String);

/// A buffer larger than this (a rare huge record) is freed, not kept.
const MAX_KEPT_BYTES: usize = 1 << 20;

thread_local! {
    static SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Drop for JsonText {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.0).into_bytes();
        if buf.capacity() <= MAX_KEPT_BYTES {
            buf.clear();
            let _ = SPARE.try_with(|s| s.set(buf));
        }
    }
}

impl TypeName for JsonText {
    fn type_name() -> &'static str {
        "string"
    }
    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl From<String> for JsonText {
    fn from(s: String) -> Self {
        JsonText(s)
    }
}

impl FromNapiValue for JsonText {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        let mut units = 0;
        check_status!(
            unsafe {
                sys::napi_get_value_string_utf16(env, value, std::ptr::null_mut(), 0, &mut units)
            },
            "expected a string"
        )?;
        // One more byte for the NUL that N-API always writes.
        let cap = units * 3 + 1;
        let mut buf = SPARE.try_with(|s| s.take()).unwrap_or_default();
        buf.clear();
        buf.reserve(cap);
        let mut written = 0;
        check_status!(
            unsafe {
                sys::napi_get_value_string_utf8(
                    env,
                    value,
                    buf.as_mut_ptr().cast(),
                    cap,
                    &mut written,
                )
            },
            "reading a string of {} UTF-16 units",
            units
        )?;
        // SAFETY: N-API wrote `written` bytes of UTF-8 (lone surrogates replaced by U+FFFD, never
        // cut short: the buffer holds the longest encoding).
        unsafe { buf.set_len(written) };
        Ok(JsonText(unsafe { String::from_utf8_unchecked(buf) }))
    }
}

pub struct Latin1(pub Vec<u8>);

impl TypeName for Latin1 {
    fn type_name() -> &'static str {
        "string"
    }
    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl ToNapiValue for Latin1 {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let mut out = std::ptr::null_mut();
        check_status!(
            unsafe {
                sys::napi_create_string_latin1(
                    env,
                    val.0.as_ptr().cast(),
                    val.0.len() as isize,
                    &mut out,
                )
            },
            "creating a string of {} bytes",
            val.0.len()
        )?;
        Ok(out)
    }
}

/// `v` as JSON text in ASCII (characters outside it as `\\uXXXX` escapes), for a one-byte JS
/// string: V8 neither checks nor decodes it as UTF-8, and `JSON.parse` reads one byte a
/// character. A context's text was about a tenth of `buildContext`'s instructions in V8's UTF-8
/// decoding alone.
pub fn to_ascii_json<T: serde::Serialize>(v: &T) -> crate::error::Result<Latin1> {
    let mut out = Vec::with_capacity(1 << 12);
    threadline::to_ascii_json(v, &mut out)
        .map_err(|e| napi::Error::new(crate::error::Code("STORE_IO"), e.to_string()))?;
    Ok(Latin1(out))
}

/// A page of a bulk read: `json` is a JSON array; `next` is where the next page starts.
#[napi_derive::napi(object, object_from_js = false)]
pub struct NativePage {
    #[napi(ts_type = "string")]
    pub json: Latin1,
    pub next: Option<f64>,
}

impl From<threadline::Page> for NativePage {
    fn from(p: threadline::Page) -> Self {
        NativePage {
            json: Latin1(p.json),
            next: p.next.map(|n| n as f64),
        }
    }
}

/// Pages of a bulk read, read ahead on another thread while JS parses the current one.
#[napi_derive::napi]
pub struct NativePages {
    inner: threadline::PageStream,
}

impl NativePages {
    pub fn new(inner: threadline::PageStream) -> Self {
        NativePages { inner }
    }
}

#[napi_derive::napi]
impl NativePages {
    /// The next page (a JSON array), or null when there is none.
    #[napi(catch_unwind, ts_return_type = "string | null")]
    pub fn next(&mut self) -> crate::error::Result<Option<Latin1>> {
        match self.inner.next() {
            None => Ok(None),
            Some(page) => Ok(Some(Latin1(crate::error::OrThrow::or_throw(page)?.json))),
        }
    }
}
