//! The Claude Agent SDK's `SessionStore` on a store (core: `threadline::interop::mirror`), for
//! the hook index.js puts under `Symbol.for('threadline.claudeCode')` and the adapter
//! `threadline/claude-agent-sdk` builds on. Keys, entries and results cross as JSON text.

use napi_derive::napi;
use threadline::interop::mirror::{self, Key};

use crate::error::{parse_json, to_json, OrThrow, Result};
use crate::store::NativeStore;

#[napi]
impl NativeStore {
    /// Appends the SDK's entries (a JSON array) to the session the key names, with the sidecar
    /// merged into its `metadata.claudeAgentSdk`, in one transaction; the report as JSON.
    #[napi(catch_unwind)]
    pub fn claude_code_append(
        &self,
        key_json: String,
        entries_json: String,
        sidecar_json: Option<String>,
    ) -> Result<String> {
        crate::error::guard("claudeCodeAppend", || {
            let key = Key::from_json(&key_json).or_throw()?;
            let sidecar = match sidecar_json {
                None => None,
                Some(text) => match parse_json(&text, "claudeCodeAppend: sidecar")? {
                    serde_json::Value::Object(m) => Some(m),
                    serde_json::Value::Null => None,
                    other => {
                        return Err(crate::error::to_js(threadline::Error::InvalidInput(
                            format!(
                                "claudeCodeAppend: sidecar: expected an object, got {}",
                                json_kind(&other)
                            ),
                        )))
                    }
                },
            };
            let report = mirror::append(&self.shared(), &key, &entries_json, sidecar).or_throw()?;
            to_json(&report)
        })
    }

    /// The entries of the session the key names as one JSON array text, or null.
    #[napi(catch_unwind, ts_return_type = "string | null")]
    pub fn claude_code_load(&self, key_json: String) -> Result<Option<crate::text::Latin1>> {
        crate::error::guard("claudeCodeLoad", || {
            let key = Key::from_json(&key_json).or_throw()?;
            let text = mirror::load(&self.shared(), &key).or_throw()?;
            Ok(text.map(|t| crate::text::Latin1(t.into_bytes())))
        })
    }

    /// Lets go of the session the key names if an append of this store holds it; whether one did.
    #[napi(catch_unwind)]
    pub fn claude_code_release(&self, key_json: String) -> Result<bool> {
        crate::error::guard("claudeCodeRelease", || {
            let key = Key::from_json(&key_json).or_throw()?;
            mirror::release(&self.shared(), &key).or_throw()
        })
    }

    /// `[{ sessionId, mtime, summary? }]` of the main sessions of a project key, as JSON.
    #[napi(catch_unwind)]
    pub fn claude_code_sessions(&self, project_key: String) -> Result<String> {
        crate::error::guard("claudeCodeSessions", || {
            to_json(&mirror::sessions(&self.shared(), &project_key).or_throw()?)
        })
    }

    /// The subpaths of a session's subagents, as JSON.
    #[napi(catch_unwind)]
    pub fn claude_code_subkeys(&self, session_id: String) -> Result<String> {
        crate::error::guard("claudeCodeSubkeys", || {
            to_json(&mirror::subkeys(&self.shared(), &session_id).or_throw()?)
        })
    }

    /// Deletes the session the key names (a main key: with its subagents); missing: nothing.
    #[napi(catch_unwind)]
    pub fn claude_code_delete(&self, key_json: String) -> Result<()> {
        crate::error::guard("claudeCodeDelete", || {
            let key = Key::from_json(&key_json).or_throw()?;
            mirror::delete(&self.shared(), &key).or_throw()
        })
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

async_twins!(NativeStore {
    claude_code_append_async => claude_code_append(key_json: String, entries_json: String, sidecar_json: Option<String>) -> String, "Promise<string>";
    claude_code_release_async => claude_code_release(key_json: String) -> bool, "Promise<boolean>";
    claude_code_load_async => claude_code_load(key_json: String) -> Option<crate::text::Latin1>, "Promise<string | null>";
    claude_code_sessions_async => claude_code_sessions(project_key: String) -> String, "Promise<string>";
    claude_code_subkeys_async => claude_code_subkeys(session_id: String) -> String, "Promise<string>";
    claude_code_delete_async => claude_code_delete(key_json: String) -> (), "Promise<void>";
});
