//! Tokens a text costs, estimated by script: for limits given in tokens on text the library writes
//! (the recall tools' results). No tokenizer is at hand (offline, and each model has its own), so
//! each character counts what it costs in the byte-level BPE tokenizers of current models, on the
//! high side:
//!
//! | characters | tokens each |
//! |---|---|
//! | ASCII (English prose, code) | 1/4: four characters a token, as the rest of the library estimates |
//! | other two-byte UTF-8: Latin with accents, Greek, Cyrillic, Hebrew, Arabic | 1/2 |
//! | Han, kana, hangul (`is_cjk`) | 3/2: one token or more each, some two |
//! | the rest of the BMP: Indic, Thai, symbols, fullwidth forms, joiners, variation selectors | 1 |
//! | beyond the BMP: emoji, rarer Han | 3: four bytes each, rarely merged |
//!
//! Counted in quarter tokens, which add up exactly: the estimate of a text is at most the sum of
//! the estimates of its parts.

/// Whether `c` is written without spaces between words (Han, kana, hangul).
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF | 0x3040..=0x30FF | 0x3130..=0x318F | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFF66..=0xFF9F | 0x20000..=0x2FA1F)
}

/// Quarter tokens of one character (the table above).
pub(crate) fn char_quarters(c: char) -> u64 {
    match c as u32 {
        0..=0x7F => 1,
        0x10000.. => 12,
        _ if is_cjk(c) => 6,
        0x80..=0x7FF => 2,
        _ => 4,
    }
}

/// Quarter tokens of `text`.
pub(crate) fn quarters(text: &str) -> u64 {
    if text.is_ascii() {
        return text.len() as u64;
    }
    text.chars().map(char_quarters).sum()
}

/// The tokens `text` costs at most, about (the table above).
pub fn estimate_text_tokens(text: &str) -> u64 {
    quarters(text).div_ceil(4)
}

/// The longest start of `text` that costs at most `quarter_tokens`, cut between characters.
pub(crate) fn head_within(text: &str, quarter_tokens: u64) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        used += char_quarters(c);
        if used > quarter_tokens {
            return &text[..i];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_script_at_its_rate() {
        assert_eq!(estimate_text_tokens("four"), 1);
        assert_eq!(estimate_text_tokens(&"a".repeat(4000)), 1000);
        assert_eq!(estimate_text_tokens("Привет"), 3);
        assert_eq!(estimate_text_tokens("认证流程"), 6);
        assert_eq!(estimate_text_tokens("カタカナ"), 6);
        assert_eq!(estimate_text_tokens("🚀🔥"), 6);
        // a family emoji: three emoji joined by two joiners
        assert_eq!(estimate_text_tokens("👨\u{200d}👩\u{200d}👧"), 11);
        assert_eq!(estimate_text_tokens("ok 认证 🚀"), 7);
        assert_eq!(estimate_text_tokens(""), 0);
    }

    #[test]
    fn the_head_within_a_cost_ends_between_characters() {
        assert_eq!(head_within("认证流程", 13), "认证");
        assert_eq!(head_within("ab🚀", 13), "ab");
        assert_eq!(head_within("ab🚀", 14), "ab🚀");
        assert_eq!(head_within("abc", 0), "");
        let s = "mixed 认证 🚀 text";
        assert!(quarters(head_within(s, 20)) <= 20);
    }
}
