//! Token usage as the provider reports it, and the arithmetic session state does with it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Path, Result};
use crate::model::json::kind;

/// The four counters of a response's `usage`. Other usage fields stay in the stored message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

impl Usage {
    pub fn from_json(v: &Value, path: &Path) -> Result<Usage> {
        let Value::Object(o) = v else {
            return Err(Error::invalid(
                path,
                format!("expected an object, got {}", kind(v)),
            ));
        };
        let field = |k: &str| -> Result<u64> {
            match o.get(k) {
                None | Some(Value::Null) => Ok(0),
                Some(Value::Number(n)) => n.as_u64().ok_or_else(|| {
                    Error::invalid(
                        &path.key(k),
                        format!("expected a whole number >= 0, got {n}"),
                    )
                }),
                Some(v) => Err(Error::invalid(
                    &path.key(k),
                    format!("expected a number, got {}", kind(v)),
                )),
            }
        };
        Ok(Usage {
            input_tokens: field("input_tokens")?,
            output_tokens: field("output_tokens")?,
            cache_read_input_tokens: field("cache_read_input_tokens")?,
            cache_creation_input_tokens: field("cache_creation_input_tokens")?,
        })
    }

    /// What the response's prompt and output occupy in the context window.
    pub fn context_total(&self) -> u64 {
        self.input_tokens
            + self.cache_read_input_tokens
            + self.cache_creation_input_tokens
            + self.output_tokens
    }

    /// `self + new - old`, never below zero: re-counting a response whose usage was recorded again.
    pub fn replace(&self, old: &Usage, new: &Usage) -> Usage {
        let f = |a: u64, o: u64, n: u64| (a + n).saturating_sub(o);
        Usage {
            input_tokens: f(self.input_tokens, old.input_tokens, new.input_tokens),
            output_tokens: f(self.output_tokens, old.output_tokens, new.output_tokens),
            cache_read_input_tokens: f(
                self.cache_read_input_tokens,
                old.cache_read_input_tokens,
                new.cache_read_input_tokens,
            ),
            cache_creation_input_tokens: f(
                self.cache_creation_input_tokens,
                old.cache_creation_input_tokens,
                new.cache_creation_input_tokens,
            ),
        }
    }
}
