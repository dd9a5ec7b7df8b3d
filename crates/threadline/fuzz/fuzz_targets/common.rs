//! What the targets share: the input as lines of text, and the invariant every request built
//! from a session must hold (valid for its provider, for every target and budget).
#![allow(dead_code)]

use serde_json::Value;
use threadline::{
    validate_messages, validate_openai_chat, validate_openai_responses, ContextOptions, Reasoning,
    Session, Target,
};

/// The input as text (invalid UTF-8 replaced), cut into its non-empty lines.
pub fn lines(data: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(data)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Builds the next request for every target under a few budgets (taken from the input's length,
/// so they vary) and system prompts, and checks each is valid for its provider.
pub fn check_contexts(s: &Session, seed: usize) {
    let targets = [
        Target::Anthropic,
        Target::OpenAiChat,
        Target::OpenAiResponses,
    ];
    let budgets = [
        (None, None),
        (Some((seed % 5000) as u64 + 1), None),
        (None, Some((seed % 7) as u64 + 1)),
    ];
    for (k, target) in targets.into_iter().enumerate() {
        for (b, &(max_tokens, max_messages)) in budgets.iter().enumerate() {
            let reasoning = match (seed + k + b) % 3 {
                0 => Reasoning::Keep,
                1 => Reasoning::Drop,
                _ => Reasoning::SameModel,
            };
            let o = ContextOptions {
                target,
                max_tokens,
                max_messages,
                // a system prompt with no text must not become an empty system message
                system: match b {
                    0 => None,
                    1 => Some(serde_json::json!("Be terse.")),
                    _ => Some(serde_json::json!(" ")),
                },
                tool_result_preview_chars: (b == 1).then_some(40),
                reasoning,
                model: None,
            };
            let c = match s.build_context(&o) {
                Ok(c) => c,
                Err(e) => panic!("buildContext failed on a stored session: {e}"),
            };
            let problems = match target {
                Target::Anthropic => validate_messages(&c.messages),
                Target::OpenAiChat => validate_openai_chat(&c.messages),
                Target::OpenAiResponses => validate_openai_responses(&c.messages),
            };
            assert!(
                problems.is_empty(),
                "{target:?} {max_tokens:?} {max_messages:?}: {problems:?}\n{}",
                Value::Array(c.messages.clone())
            );
        }
    }
}
