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
macro_rules! record_columns {
    () => {
        concat!(
            content_columns!(),
            ", uuid, parent_uuid, type, role, provider, timestamp, turn_start, response_key, \
             input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, state, meta_crc, written_ms"
        )
    };
}

mod blob;
mod branch;
mod checkpoint;
mod checksum;
mod clock;
mod compaction;
mod context;
pub mod convert;
mod encode;
mod envelope;
mod error;
mod fork;
mod journal;
mod json;
mod message;
mod number_text;
mod open_file;
mod options;
mod owner;
mod readahead;
pub mod recall;
mod recovery;
mod response;
mod schema;
mod session;
mod snapshot;
mod state;
mod store;
mod stream;
mod txn;
mod usage;
mod validate;
mod verify;
mod write_order;

pub use branch::Branch;
pub use compaction::{CompactOptions, CompactionPlan};
pub use context::{Context, ContextOptions, ContextStats, Reasoning, Target};
pub use convert::{
    from_anthropic, from_openai_chat, from_openai_responses, to_anthropic, to_openai_chat,
    to_openai_responses, validate_openai_chat, validate_openai_responses, Converted, FromConverted,
    Warning,
};
pub use envelope::Draft;
pub use error::{Error, Result};
pub use journal::CallState;
pub use json::{parse, MAX_RECORD_BYTES};
pub use message::Role;
pub use options::{
    from_json, Durability, SessionFilter, SessionInfo, SessionOptions, Status, StoreOptions,
};
pub use readahead::{message_pages, pages, PageStream, Source};
pub use recall::{Field, RecallOptions, RecallTools, SearchHit, SearchOptions, SearchPage};
pub use recovery::{RecoverOptions, RecoveryReport, Repair, RepairKind, UnknownOutcome};
pub use response::{ResponseOptions, ResponseWriter};
pub use session::{ContextFill, MessageView, Page, RestoreReport, Session, Skipped, PAGE_BYTES};
pub use state::{TokenPatch, TokenTracker, Turn, TurnStatus};
pub use store::{default_store_path, Store};
pub use stream::{Assembler, Pushed};
pub use usage::Usage;
pub use validate::{validate_messages, Problem, ProblemCode};
pub use verify::{Damage, VerifyOptions, VerifyReport, MAX_DAMAGED};
