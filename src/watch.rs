//! `NativeListener`: what wakes a live watch on PostgreSQL (the core's `Listener`). The facade's
//! `session.watch` (lib/watch.js) waits on it off the main thread; SQLite stores have none (the
//! facade watches the store's file).

use std::sync::Arc;

use napi::bindgen_prelude::AsyncTask;
use napi_derive::napi;
use serde_json::json;
use threadline::{Listener, Wake, WatchScope};

use crate::error::{to_json, OrThrow};
use crate::job::Job;
use crate::session::NativeSession;
use crate::store::NativeStore;

#[napi]
pub struct NativeListener {
    inner: Arc<Listener>,
}

fn wrap(l: Option<Listener>) -> Option<NativeListener> {
    l.map(|l| NativeListener { inner: Arc::new(l) })
}

#[napi]
impl NativeListener {
    /// Waits on the thread pool for the next commit the listener hears of, a reconnection or
    /// `cancel`: `{"wake":"changes","changes":[{"num","records"}]}` (records null: deleted),
    /// `{"wake":"reconnected"}` or `{"wake":"cancelled"}`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn wait_async(&self) -> AsyncTask<Job<String>> {
        let l = self.inner.clone();
        Job::task(move || {
            let v = match l.wait().or_throw()? {
                Wake::Changes(c) => json!({
                    "wake": "changes",
                    "changes": c.iter().map(|c| json!({ "num": c.num, "records": c.records })).collect::<Vec<_>>(),
                }),
                Wake::Reconnected => json!({ "wake": "reconnected" }),
                Wake::Cancelled => json!({ "wake": "cancelled" }),
            };
            to_json(&v)
        })
    }

    /// Ends the wait under way (it resolves `cancelled`) and every later one; the connection
    /// closes then.
    #[napi]
    pub fn cancel(&self) {
        self.inner.cancel();
    }
}

#[napi]
impl NativeSession {
    /// A listener of this session's commits, made on the thread pool; null on SQLite.
    #[napi(ts_return_type = "Promise<NativeListener | null>")]
    pub fn listen_async(&self) -> AsyncTask<Job<Option<NativeListener>>> {
        let s = self.inner.clone();
        Job::task(move || Ok(wrap(s.listener().or_throw()?)))
    }
}

#[napi]
impl NativeStore {
    /// A listener of every session's commits, made on the thread pool; null on SQLite.
    #[napi(ts_return_type = "Promise<NativeListener | null>")]
    pub fn listen_async(&self) -> AsyncTask<Job<Option<NativeListener>>> {
        let s = self.inner.clone();
        Job::task(move || Ok(wrap(s.listener().or_throw()?)))
    }
}

#[napi]
impl NativeStore {
    /// `store.watch`'s look at the store, on the thread pool: the sessions of the scope (project,
    /// session id) written after `after` (all when null), among `nums` when given, as
    /// `{"marks":[{"num","id","status","records","writeSeq"}],"lastWrite","deletions"}`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn watch_scan_async(
        &self,
        project: Option<String>,
        session_id: Option<String>,
        after: Option<i64>,
        nums: Option<Vec<i64>>,
    ) -> AsyncTask<Job<String>> {
        let s = self.inner.clone();
        Job::task(move || {
            let scope = WatchScope {
                project,
                session_id,
            };
            let scan = s.watch_scan(&scope, after, nums.as_deref()).or_throw()?;
            let marks: Vec<_> = scan
                .marks
                .iter()
                .map(|m| {
                    json!({
                        "num": m.num,
                        "id": m.id,
                        "status": m.status.as_str(),
                        "records": m.records,
                        "writeSeq": m.write_seq,
                    })
                })
                .collect();
            to_json(&json!({
                "marks": marks,
                "lastWrite": scan.last_write,
                "deletions": scan.deletions,
            }))
        })
    }

    /// The SessionInfo of sessions `nums` (a deleted one left out), as `[[num, info], ...]`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn session_infos_async(&self, nums: Vec<i64>) -> AsyncTask<Job<String>> {
        let s = self.inner.clone();
        Job::task(move || to_json(&s.session_infos(&nums).or_throw()?))
    }
}
