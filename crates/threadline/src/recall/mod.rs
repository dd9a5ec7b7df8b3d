//! Recall: every session of a store searchable (an FTS5 index kept with the records), and tools
//! a model calls to list, search and read its own earlier sessions.

pub mod query;
pub mod search;
pub mod tools;
mod transcript;

pub use crate::model::fields::Field;
pub use search::{HitSession, SearchHit, SearchOptions, SearchPage};
pub use tools::{RecallOptions, RecallTools};
