//! Tool-call ids a target does not accept, mapped deterministically and back.
//!
//! What each target accepts:
//! - Anthropic: `tool_use.id` must match `^[a-zA-Z0-9_-]+$` (the API's 400 error says
//!   "String should match pattern '^[a-zA-Z0-9_-]+$'"); no length limit is documented.
//! - OpenAI Chat Completions: `tool_calls[].id` at most 40 characters (the API's 400 error says
//!   "Invalid 'messages[3].tool_calls[0].id': string too long. Expected a string with maximum
//!   length 40").
//! - OpenAI Responses: `call_id` at most 64 characters ("Invalid 'input[95].call_id': string too
//!   long. Expected a string with maximum length 64").
//!
//! An id the target accepts is kept. Any other becomes `tl_` + the first 32 hex digits of the
//! SHA-256 of the original id (35 characters of `[a-z0-9_]`, accepted by all three targets), so
//! the same original id maps to the same target id in every conversion, on the call and on its
//! result alike. Within one list, a mapped id never equals another id of the list: kept ids are
//! reserved first, and a taken candidate is re-hashed with a counter.

use std::collections::{HashMap, HashSet};

use sha2::{Digest, Sha256};

use super::IdMap;

/// Whose id rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdTarget {
    Anthropic,
    OpenAiChat,
    OpenAiResponses,
}

/// Longest tool_call id Chat Completions accepts.
pub const OPENAI_CHAT_MAX_ID: usize = 40;
/// Longest call_id the Responses API accepts.
pub const OPENAI_RESPONSES_MAX_ID: usize = 64;

/// Whether `target` accepts `id` as a tool-call id as it is.
pub fn accepts_id(target: IdTarget, id: &str) -> bool {
    if id.is_empty() {
        return false;
    }
    match target {
        IdTarget::Anthropic => id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'),
        IdTarget::OpenAiChat => id.chars().count() <= OPENAI_CHAT_MAX_ID,
        IdTarget::OpenAiResponses => id.chars().count() <= OPENAI_RESPONSES_MAX_ID,
    }
}

pub(crate) struct IdMapper {
    target: IdTarget,
    mapped: HashMap<String, String>,
    used: HashSet<String>,
    pub reverse: IdMap,
}

impl IdMapper {
    /// A mapper for the ids of one list (`all`: every tool-call id in it).
    pub fn new(target: IdTarget, all: &[String]) -> Self {
        let used = all
            .iter()
            .filter(|id| accepts_id(target, id))
            .cloned()
            .collect();
        IdMapper {
            target,
            mapped: HashMap::new(),
            used,
            reverse: IdMap::new(),
        }
    }

    /// The id to send for `original`.
    pub fn map(&mut self, original: &str) -> String {
        if accepts_id(self.target, original) {
            return original.to_string();
        }
        if let Some(m) = self.mapped.get(original) {
            return m.clone();
        }
        let mut n = 0u64;
        let id = loop {
            let candidate = hashed(original, n);
            if !self.used.contains(&candidate) {
                break candidate;
            }
            n += 1;
        };
        self.used.insert(id.clone());
        self.mapped.insert(original.to_string(), id.clone());
        self.reverse.insert(id.clone(), original.to_string());
        id
    }
}

fn hashed(original: &str, n: u64) -> String {
    let mut h = Sha256::new();
    h.update(original.as_bytes());
    if n > 0 {
        h.update([0u8]);
        h.update(n.to_string().as_bytes());
    }
    let digest = h.finalize();
    let mut s = String::with_capacity(35);
    s.push_str("tl_");
    for b in &digest[..16] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_the_target_accepts_are_kept_others_hashed() {
        let long = "x".repeat(41);
        let all = vec!["toolu_01".to_string(), "a.b:c".to_string(), long.clone()];
        let mut m = IdMapper::new(IdTarget::Anthropic, &all);
        assert_eq!(m.map("toolu_01"), "toolu_01");
        let a = m.map("a.b:c");
        assert!(a.starts_with("tl_") && a.len() == 35 && accepts_id(IdTarget::Anthropic, &a));
        assert_eq!(m.map("a.b:c"), a);
        assert_eq!(m.map(&long), long);
        let mut c = IdMapper::new(IdTarget::OpenAiChat, &all);
        assert_eq!(c.map("a.b:c"), "a.b:c");
        let l = c.map(&long);
        assert_ne!(l, long);
        assert_eq!(c.reverse.get(&l), Some(&long));
        // the same original maps the same way for every target
        let mut r = IdMapper::new(IdTarget::OpenAiResponses, &["y".repeat(65)]);
        assert_eq!(r.map(&"y".repeat(65)), hashed(&"y".repeat(65), 0));
    }

    #[test]
    fn a_mapped_id_never_takes_an_id_of_the_list() {
        let bad = "a b".to_string();
        let taken = hashed(&bad, 0);
        let all = vec![taken.clone(), bad.clone()];
        let mut m = IdMapper::new(IdTarget::Anthropic, &all);
        let mapped = m.map(&bad);
        assert_ne!(mapped, taken);
        assert_eq!(mapped, hashed(&bad, 1));
        assert_eq!(m.map(&taken), taken);
    }
}
