//! Threadline: a lossless, crash-safe session store for LLM agents.
//!
//! Every message is stored exactly as given (Anthropic Messages API wire shape, every field, key
//! order and number text kept), in a SQLite file in WAL mode: an append returns after commit, so
//! an acknowledged record survives the process being killed. A [`Session`] gives back typed
//! messages, turns and token state, kept incrementally as records are appended.
//!
//! ```
//! use threadline::{Store, StoreOptions, SessionOptions};
//! use serde_json::json;
//!
//! # fn main() -> threadline::Result<()> {
//! let store = Store::open(Some(":memory:"), StoreOptions::default())?;
//! let session = store.create_session(SessionOptions::default())?;
//! session.append(json!("What is in src/?"), None)?;
//! session.append(json!({"role": "assistant", "id": "msg_1",
//!     "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "src"}}],
//!     "usage": {"input_tokens": 12, "output_tokens": 9}}), None)?;
//! let turns = session.turns()?;
//! assert_eq!(turns[0].tool_use_count, 1);
//! assert_eq!(session.token_tracker()?.cumulative_output_tokens, 9);
//! # Ok(())
//! # }
//! ```

/// The columns of a record row, in the order its two checksums cover them: first what bulk reads
/// need and `crc` covers (`content_columns!()`), then the rest and `meta_crc`; `written_ms` last.
macro_rules! content_columns {
    () => {
        "id, msg_index, has_blobs, body, message, crc"
    };
}
/// `record_columns!()` with NULL for the content columns, which its reader does not need (the
/// positions stay those of `record_columns!()`).
macro_rules! meta_columns {
    () => {
        "id, NULL, NULL, NULL, NULL, NULL, uuid, parent_uuid, type, role, provider, timestamp, turn_start, \
         response_key, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, state, meta_crc, written_ms"
    };
}
/// A record whose message reported usage (input, cache read and cache creation tokens: what
/// calibrates estimates), as the `records_usage` index is made on both engines.
macro_rules! usage_reported {
    () => {
        "coalesce(input_tokens, 0) + coalesce(cache_read_tokens, 0) + coalesce(cache_creation_tokens, 0) > 0"
    };
}
macro_rules! record_columns {
    () => {
        concat!(
            content_columns!(),
            ", uuid, parent_uuid, type, role, provider, timestamp, turn_start, response_key, \
             input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, state, meta_crc, written_ms"
        )
    };
}

mod context;
mod error;
pub mod interop;
mod model;
pub mod recall;
mod recovery;
mod session;
mod storage;
mod store;

pub use model::convert;

pub use context::compaction::{CompactOptions, CompactionPlan};
pub use context::{Context, ContextOptions, ContextStats, Reasoning, Target};
pub use error::{Error, Result};
pub use model::context_windows::known_context_window;
pub use model::convert::{
    from_anthropic, from_openai_chat, from_openai_responses, to_anthropic, to_openai_chat,
    to_openai_responses, validate_openai_chat, validate_openai_responses, Converted, FromConverted,
    Warning,
};
pub use model::envelope::Draft;
pub use model::json::{parse, to_ascii as to_ascii_json, MAX_RECORD_BYTES};
pub use model::message::Role;
pub use model::options::{
    from_json, Durability, SessionFilter, SessionInfo, SessionOptions, SessionUpdate, Status,
    StoreOptions,
};
pub use model::state::{TokenPatch, TokenTracker, Turn, TurnStatus};
pub use model::stream::{Assembler, Pushed};
pub use model::tokens::estimate_text_tokens;
pub use model::usage::Usage;
pub use model::validate::{validate_messages, Problem, ProblemCode};
pub use recall::{Field, RecallOptions, RecallTools, SearchHit, SearchOptions, SearchPage};
pub use recovery::response::{ResponseOptions, ResponseWriter};
pub use recovery::{RecoverOptions, RecoveryReport, Repair, RepairKind, UnknownOutcome};
pub use session::branch::Branch;
pub use session::readahead::{message_pages, pages, PageStream, Source};
pub use session::{ContextFill, MessageView, Page, RestoreReport, Session, Skipped, PAGE_BYTES};
pub use storage::journal::CallState;
pub use storage::notice::Notice;
pub use storage::postgres::listen::{Change, Listener, Wake};
pub use store::maintenance::{BackupReport, StoreStats, VacuumReport};
pub use store::verify::{Damage, VerifyOptions, VerifyReport, MAX_DAMAGED};
pub use store::watch::{SessionMark, WatchScan, WatchScope};
pub use store::{default_store_path, Store};

/// Hooks for tests; not part of the API.
#[doc(hidden)]
pub mod testing {
    pub use crate::context::compaction::set_summary_cap;
    pub use crate::context::read_whole_context;
    pub use crate::storage::search_index::set_index_budget;
}
