//! The search query syntax, turned into an FTS5 expression. Words must all match; "exact
//! phrases"; prefix*; `OR` between two terms; -excluded. Every term reaches FTS5 as a quoted
//! string of its tokens, so nothing a caller writes is FTS5 syntax (no column filters, NEAR,
//! `^` or unbalanced parentheses get through): what the syntax refuses is INVALID_INPUT. The
//! query is folded as the index's text is (`search_index::fold`: `Ｔｈｒｅａｄ` asks for `thread`).

use crate::error::{Error, Result};
use crate::storage::search_index::{fold, is_cjk};

const MAX_QUERY_CHARS: usize = 2_000;
const MAX_TERMS: usize = 32;

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// the FTS5 MATCH expression
    pub expression: String,
    /// the same query as PostgreSQL `tsquery` text (lexemes quoted, phrases with `<->`)
    pub tsquery: String,
    /// the tokens of the terms that must or may match (not the excluded), lowercased, to mark
    /// in snippets; a CJK term is one token of its characters
    pub marks: Vec<String>,
}

#[derive(Debug)]
struct Term {
    tokens: Vec<String>,
    prefix: bool,
    excluded: bool,
}

#[derive(Debug)]
enum Item {
    Term(Term),
    Or,
}

pub fn parse(text: &str) -> Result<Query> {
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(invalid(format!("longer than {MAX_QUERY_CHARS} characters")));
    }
    let items = scan(&fold(text))?;
    let terms = items.iter().filter(|i| matches!(i, Item::Term(_))).count();
    if terms > MAX_TERMS {
        return Err(invalid(format!("more than {MAX_TERMS} terms")));
    }
    build(items)
}

fn invalid(why: String) -> Error {
    Error::InvalidInput(format!("query: {why}"))
}

fn scan(text: &str) -> Result<Vec<Item>> {
    let chars: Vec<char> = text.chars().collect();
    let mut items = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let excluded = c == '-' && chars.get(i + 1).is_some_and(|n| !n.is_whitespace());
        if excluded {
            i += 1;
        }
        if chars[i] == '"' {
            let close = chars[i + 1..]
                .iter()
                .position(|&c| c == '"')
                .ok_or_else(|| {
                    invalid(format!(
                        "the quote at character {} is not closed (a phrase is written \"like this\")",
                        i + 1
                    ))
                })?;
            let inner: String = chars[i + 1..i + 1 + close].iter().collect();
            i += close + 2;
            let prefix = chars.get(i) == Some(&'*');
            if prefix {
                i += 1;
            }
            items.push(Item::Term(Term {
                tokens: tokens(&inner),
                prefix,
                excluded,
            }));
            continue;
        }
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != '"' {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        if word == "OR" && !excluded {
            items.push(Item::Or);
            continue;
        }
        let prefix = word.ends_with('*');
        items.push(Item::Term(Term {
            tokens: tokens(word.trim_end_matches('*')),
            prefix,
            excluded,
        }));
    }
    Ok(items)
}

/// The tokens of a term as the index's tokenizer makes them: runs of letters and digits, each
/// CJK character one (joined back into one token here: a CJK run is matched as a phrase).
fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in s.chars() {
        if c.is_alphanumeric() && !is_cjk(c) {
            word.extend(c.to_lowercase());
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if is_cjk(c) {
            out.push(c.to_string());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn build(items: Vec<Item>) -> Result<Query> {
    // Groups of terms joined by OR; the groups are all required.
    let mut groups: Vec<Vec<Term>> = Vec::new();
    let mut excluded: Vec<Term> = Vec::new();
    let mut after_or = false;
    for item in items {
        match item {
            Item::Or => {
                if after_or || groups.is_empty() {
                    return Err(invalid("OR needs a term on each side".into()));
                }
                after_or = true;
            }
            Item::Term(t) if t.tokens.is_empty() => {
                if after_or {
                    return Err(invalid("OR needs a term on each side".into()));
                }
            }
            Item::Term(t) if t.excluded => {
                if after_or {
                    return Err(invalid("OR cannot join an excluded term (-word)".into()));
                }
                excluded.push(t);
            }
            Item::Term(t) => {
                match groups.last_mut() {
                    Some(g) if after_or => g.push(t),
                    _ => groups.push(vec![t]),
                }
                after_or = false;
            }
        }
    }
    if after_or {
        return Err(invalid("OR needs a term on each side".into()));
    }
    if groups.is_empty() {
        return Err(invalid(if excluded.is_empty() {
            "no words to search for".into()
        } else {
            "only excluded words: say what to search for too".into()
        }));
    }
    let mut marks = Vec::new();
    let tsquery = ts_expression(&groups, &excluded);
    let required: Vec<String> = groups
        .iter()
        .map(|g| {
            let alts: Vec<String> = g.iter().map(phrase).collect();
            marks.extend(g.iter().flat_map(mark_tokens));
            if alts.len() == 1 {
                alts.into_iter().next().unwrap_or_default()
            } else {
                format!("({})", alts.join(" OR "))
            }
        })
        .collect();
    let mut expression = required.join(" AND ");
    for t in &excluded {
        expression = format!("({expression}) NOT {}", phrase(t));
    }
    marks.sort();
    marks.dedup();
    Ok(Query {
        expression,
        tsquery,
        marks,
    })
}

/// The query as `tsquery` text: groups joined by `&`, a group's terms by `|`, excluded terms
/// `& !`; a term's tokens in a row (`<->`), the last one a prefix (`:*`) for `word*`.
fn ts_expression(groups: &[Vec<Term>], excluded: &[Term]) -> String {
    let term = |t: &Term| {
        let last = t.tokens.len().saturating_sub(1);
        let lexemes: Vec<String> = t
            .tokens
            .iter()
            .enumerate()
            .map(|(i, tok)| {
                let star = if t.prefix && i == last { ":*" } else { "" };
                format!("'{tok}'{star}")
            })
            .collect();
        format!("({})", lexemes.join(" <-> "))
    };
    let mut parts: Vec<String> = groups
        .iter()
        .map(|g| format!("({})", g.iter().map(term).collect::<Vec<_>>().join(" | ")))
        .collect();
    parts.extend(excluded.iter().map(|t| format!("!{}", term(t))));
    parts.join(" & ")
}

/// A term as an FTS5 string: its tokens, CJK characters apart, quoted (a quote in a token is
/// impossible: tokens are letters and digits).
fn phrase(t: &Term) -> String {
    let text = t.tokens.join(" ");
    format!("\"{}\"{}", text, if t.prefix { "*" } else { "" })
}

/// What to mark in snippets for a term: each token, a run of CJK characters as one.
fn mark_tokens(t: &Term) -> Vec<String> {
    let mut out = Vec::new();
    let mut cjk = String::new();
    for tok in &t.tokens {
        if tok.chars().all(is_cjk) {
            cjk.push_str(tok);
        } else {
            if !cjk.is_empty() {
                out.push(std::mem::take(&mut cjk));
            }
            out.push(tok.clone());
        }
    }
    if !cjk.is_empty() {
        out.push(cjk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(q: &str) -> String {
        parse(q).unwrap().expression
    }

    #[test]
    fn the_same_query_as_tsquery_text() {
        let ts = |q: &str| parse(q).unwrap().tsquery;
        assert_eq!(ts("foo bar"), "(('foo')) & (('bar'))");
        assert_eq!(ts("\"mix phx.server\""), "(('mix' <-> 'phx' <-> 'server'))");
        assert_eq!(ts("pars* OR json"), "(('pars':*) | ('json'))");
        assert_eq!(ts("test -phoenix"), "(('test')) & !('phoenix')");
        assert_eq!(ts("漢字"), "(('漢' <-> '字'))");
    }

    #[test]
    fn the_syntax() {
        assert_eq!(expr("auth flow"), r#""auth" AND "flow""#);
        assert_eq!(expr(r#""auth flow" pkce*"#), r#""auth flow" AND "pkce"*"#);
        assert_eq!(
            expr("parse_json src/a.ts"),
            r#""parse json" AND "src a ts""#
        );
        assert_eq!(expr("a OR b c"), r#"("a" OR "b") AND "c""#);
        assert_eq!(expr("token -refresh"), r#"("token") NOT "refresh""#);
        assert_eq!(expr("漢字"), r#""漢 字""#);
        assert_eq!(expr("fooBar or"), r#""foobar" AND "or""#);
        assert_eq!(parse("漢字 Auth").unwrap().marks, vec!["auth", "漢字"]);
        assert_eq!(expr("Ｔｈｒｅａｄ ２０２６"), r#""thread" AND "2026""#);
        assert_eq!(parse("ＴＨＲＥＡＤ").unwrap().marks, vec!["thread"]);
    }

    #[test]
    fn refused_queries_say_why() {
        for (q, why) in [
            ("\"open", "not closed"),
            ("OR a", "OR needs"),
            ("a OR", "OR needs"),
            ("a OR OR b", "OR needs"),
            ("a OR -b", "excluded"),
            ("-a", "only excluded"),
            ("", "no words"),
            ("*** ---", "no words"),
        ] {
            let e = parse(q).unwrap_err();
            assert_eq!(e.code(), "INVALID_INPUT");
            assert!(e.message().contains(why), "{q}: {}", e.message());
        }
        // FTS5 syntax is only text.
        assert_eq!(
            expr("text:secret NEAR(a b) ^x"),
            r#""text secret" AND "near a" AND "b" AND "x""#
        );
    }
}
