//! The context part of `NativeSession`: building requests, tool output, compaction.

use napi_derive::napi;
use threadline::{CompactOptions, ContextOptions};

use crate::error::{parse_json, to_js, to_json, OrThrow, Result};
use crate::session::NativeSession;
use crate::text::{to_ascii_json, Latin1};

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompactJson {
    summary: String,
    first_kept_uuid: Option<String>,
    keep_turns: Option<usize>,
    trigger: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PlanJson {
    target_tokens: u64,
    keep_turns: Option<usize>,
}

fn from<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T> {
    threadline::from_json(parse_json(json, what)?, what).map_err(to_js)
}

#[napi]
impl NativeSession {
    #[napi(catch_unwind, ts_return_type = "string")]
    pub fn build_context(&self, options_json: String) -> Result<Latin1> {
        crate::error::guard("buildContext", || {
            let o: ContextOptions = from(&options_json, "buildContext: options")?;
            to_ascii_json(&self.inner.build_context(&o).or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn read_tool_output(&self, id: String) -> Result<String> {
        crate::error::guard("readToolOutput", || {
            to_json(&self.inner.read_tool_output(&id).or_throw()?)
        })
    }

    #[napi(catch_unwind)]
    pub fn compaction_plan(&self, options_json: String) -> Result<String> {
        crate::error::guard("compactionPlan", || {
            let o: PlanJson = from(&options_json, "compactionPlan: options")?;
            to_json(
                &self
                    .inner
                    .compaction_plan(o.target_tokens, o.keep_turns)
                    .or_throw()?,
            )
        })
    }

    #[napi(catch_unwind)]
    pub fn rewind(&self, to_uuid: String) -> Result<()> {
        crate::error::guard("rewind", || self.inner.rewind(&to_uuid).or_throw())
    }

    #[napi(catch_unwind)]
    pub fn branches(&self) -> Result<String> {
        crate::error::guard("branches", || to_json(&self.inner.branches().or_throw()?))
    }

    #[napi(catch_unwind)]
    pub fn compact(&self, options_json: String) -> Result<String> {
        crate::error::guard("compact", || {
            let o: CompactJson = from(&options_json, "compact: options")?;
            let env = self
                .inner
                .compact(CompactOptions {
                    summary: o.summary,
                    first_kept_uuid: o.first_kept_uuid,
                    keep_turns: o.keep_turns,
                    trigger: o.trigger,
                })
                .or_throw()?;
            to_json(&env)
        })
    }
}
