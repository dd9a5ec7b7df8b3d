//! The model: messages, envelopes, usage, turn and token state, options, converters. Pure data
//! and functions on it; nothing here knows how or where records are stored.

pub(crate) mod clock;
pub(crate) mod context_windows;
pub mod convert;
pub(crate) mod derived_uuid;
pub(crate) mod envelope;
pub(crate) mod fields;
pub(crate) mod json;
pub(crate) mod message;
pub(crate) mod number_text;
pub(crate) mod options;
pub(crate) mod state;
pub(crate) mod stream;
pub(crate) mod tokens;
pub(crate) mod tool_call;
pub(crate) mod usage;
pub(crate) mod validate;
