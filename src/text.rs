//! Strings that cross to JS as one-byte (latin1) strings: stored JSON is pure ASCII, so V8 takes
//! it without decoding UTF-8 or widening to two bytes per character.

use napi::bindgen_prelude::{ToNapiValue, TypeName, ValueType};
use napi::{check_status, sys};

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
