//! Work of the `threadline/promise` API: a method of a native class run on libuv's thread pool.
//! Each `...Async` method clones its object's handle (the core objects are shared and
//! thread-safe) and runs the synchronous method of the same name there, so both APIs share one
//! implementation. Errors reject with the code before a NUL in the message (see `async_error`).

use napi::bindgen_prelude::{ToNapiValue, TypeName};
use napi::{Env, Task};

use crate::error::Code;

type Work<T> = Box<dyn FnOnce() -> crate::error::Result<T> + Send>;

pub struct Job<T> {
    work: Option<Work<T>>,
}

impl<T> Job<T> {
    pub fn task(
        work: impl FnOnce() -> crate::error::Result<T> + Send + 'static,
    ) -> napi::bindgen_prelude::AsyncTask<Job<T>>
    where
        Job<T>: Task,
    {
        napi::bindgen_prelude::AsyncTask::new(Job {
            work: Some(Box::new(work)),
        })
    }
}

impl<T: ToNapiValue + TypeName + Send + 'static> Task for Job<T> {
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<T> {
        let work = self
            .work
            .take()
            .ok_or_else(|| coded(Code("INVALID_INPUT"), "a task ran twice"))?;
        // The synchronous methods guard their own panics; this catches one outside them.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .unwrap_or_else(|p| {
                Err(crate::error::to_js(crate::error::panicked(
                    "async task",
                    p.as_ref(),
                )))
            })
            .map_err(|e| coded(e.status, &e.reason))
    }

    fn resolve(&mut self, _: Env, out: T) -> napi::Result<T> {
        Ok(out)
    }
}

fn coded(code: Code, message: &str) -> napi::Error {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!("{}\u{0}{message}", code.0),
    )
}

/// For each `(async_name => name(args) -> Ret, "ts type")`: a method `async_name` on `$ty` that
/// runs `name` on the thread pool and resolves with its result.
macro_rules! async_twins {
    ($ty:ident { $( $async_name:ident => $name:ident ( $( $arg:ident : $argty:ty ),* ) -> $ret:ty, $ts:literal; )* }) => {
        #[napi_derive::napi]
        impl $ty {
            $(
                #[napi(ts_return_type = $ts)]
                pub fn $async_name(&self, $( $arg : $argty ),* ) -> napi::bindgen_prelude::AsyncTask<crate::job::Job<$ret>> {
                    let this = self.handle();
                    crate::job::Job::task(move || this.$name($( $arg.into() ),*))
                }
            )*
        }
    };
}
