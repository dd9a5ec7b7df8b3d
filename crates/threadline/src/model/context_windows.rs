//! The context windows of current Anthropic and OpenAI models, by model id, so that
//! `contextFill` has a window when the caller gave none (docs/context.md lists them).

/// (model id prefix, context window in tokens). A dated or suffixed id (`claude-sonnet-4-5-
/// 20250929`, `gpt-4o-mini-2024-07-18`) matches its family's prefix; the longest prefix wins.
const WINDOWS: &[(&str, u64)] = &[
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-3-7", 200_000),
    ("claude-3-5", 200_000),
    ("claude-3", 200_000),
    ("gpt-4o", 128_000),
    ("gpt-4o-mini", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
];

/// The context window of model `id`, if it is one of the table's. A provider's prefix
/// (`anthropic/`, `openai/`, as routers spell ids) is ignored; case is not.
pub fn known_context_window(id: &str) -> Option<u64> {
    let id = id.trim();
    let id = id.rsplit('/').next().unwrap_or(id).to_ascii_lowercase();
    WINDOWS
        .iter()
        .filter(|(prefix, _)| {
            // `gpt-4o` is not `gpt-4`'s, nor `o3` of `o3x`: the prefix ends at a separator.
            id.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.', ':', '@']))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|&(_, window)| window)
}

#[cfg(test)]
mod tests {
    use super::known_context_window as w;

    #[test]
    fn dated_and_suffixed_ids_match_their_family() {
        assert_eq!(w("claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(w("claude-opus-4-1"), Some(200_000));
        assert_eq!(w("claude-3-5-haiku-latest"), Some(200_000));
        assert_eq!(w("gpt-4o-mini-2024-07-18"), Some(128_000));
        assert_eq!(w("gpt-4.1-nano"), Some(1_047_576));
        assert_eq!(w("gpt-5.1"), Some(400_000));
        assert_eq!(w("o3-mini"), Some(200_000));
        assert_eq!(w("openai/gpt-5-codex"), Some(400_000));
    }

    #[test]
    fn other_ids_are_unknown() {
        assert_eq!(w("gpt-4"), None);
        assert_eq!(w("o30"), None);
        assert_eq!(w("llama-3-70b"), None);
        assert_eq!(w(""), None);
    }
}
