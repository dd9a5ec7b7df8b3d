//! The search index: an FTS5 table with one row per conversation record (rowid = the record's
//! id), a column per field, written in the append's own transaction.
//!
//! Tokenizer: FTS5's `unicode61` (case and diacritics folded), fed text prepared so that it
//! also serves code and CJK:
//! - identifiers: unicode61 splits `parse_json` and `src/auth/login.ts` at the punctuation
//!   (a query for `parse_json` is the phrase "parse json"), and each camelCase word is followed
//!   by its parts, so `fooBar` is found by `foobar`, `foo` and `bar`;
//! - CJK: each Han, kana or hangul character is a token of its own (text without spaces
//!   between words is otherwise one token per sentence), and a CJK query is the phrase of its
//!   characters, so any run of characters is found, two-character words too (the trigram
//!   tokenizer needs three).
//!
//! The table keeps no copy of the text (`content=''`): snippets are cut from the record itself.
//! Existing stores get the index built at the first search, in batches (see `ensure_built`).

use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};

use super::fields::{self, Field};
use crate::error::Result;

pub(crate) const CREATE: &str = "CREATE VIRTUAL TABLE search USING fts5(text, thinking, tool_input, tool_output, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2')";

/// Text indexed per field of a record, at most (a tool output of megabytes is found by what its
/// first 64 KiB say).
const MAX_FIELD_BYTES: usize = 64 * 1024;

/// Records indexed per transaction while building the index of an existing store.
const BUILD_BATCH: usize = 500;

/// Whether a stored record is conversation to index: a message of the context (not an event,
/// a stream record, a compaction summary, a repair or a harness-inserted meta message).
pub(crate) fn indexable(env: &Map<String, Value>) -> bool {
    let ty = env.get("type").and_then(Value::as_str);
    matches!(ty, Some("user" | "assistant" | "tool_result"))
        && env.contains_key("message")
        && !env.contains_key("repair")
        && env.get("includeInContext") != Some(&Value::Bool(false))
        && !["isMeta", "isCompactSummary"]
            .iter()
            .any(|k| env.get(*k) == Some(&Value::Bool(true)))
}

/// Indexes record `id` (its message). Inside the append's transaction.
pub(crate) fn add(conn: &Connection, id: i64, message: &Value) -> Result<()> {
    let texts = fields::texts(message);
    if texts.iter().all(String::is_empty) {
        return Ok(());
    }
    let prepared: Vec<String> = texts.iter().map(|t| prepare(capped(t))).collect();
    let insert = |c: &Connection| {
        c.prepare_cached(
            "INSERT INTO search(rowid, text, thinking, tool_input, tool_output) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(rusqlite::params![id, prepared[0], prepared[1], prepared[2], prepared[3]])
    };
    match insert(conn) {
        Ok(_) => Ok(()),
        // A missing or damaged index never stops an append: it is made anew (empty, to be built
        // again at the next search) and the record goes in.
        Err(e) if is_index_damage(&e) => {
            reset(conn)?;
            insert(conn)?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Removes the rows of session `num` (its records' ids are one range).
pub(crate) fn delete_session(conn: &Connection, num: i64) -> Result<()> {
    let (lo, hi) = crate::schema::range(num);
    match conn.execute("DELETE FROM search WHERE rowid BETWEEN ?1 AND ?2", [lo, hi]) {
        Ok(_) => Ok(()),
        Err(e) if is_index_damage(&e) => reset(conn),
        Err(e) => Err(e.into()),
    }
}

/// An error that says the index is missing or damaged (rebuilt, never fatal).
pub(crate) fn is_index_damage(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(f, msg) => {
            f.code == rusqlite::ErrorCode::DatabaseCorrupt
                || msg
                    .as_deref()
                    .is_some_and(|m| m.contains("no such table: search") || m.contains("fts5"))
        }
        _ => false,
    }
}

/// Makes the index anew, empty, marked to be built from every record.
pub(crate) fn reset(conn: &Connection) -> Result<()> {
    for table in [
        "search",
        "search_data",
        "search_idx",
        "search_docsize",
        "search_config",
    ] {
        // A damaged virtual table may refuse to drop; its shadow tables then go one by one.
        let _ = conn.execute_batch(&format!("DROP TABLE IF EXISTS {table}"));
    }
    conn.execute_batch(CREATE)?;
    conn.execute_batch("DELETE FROM search_build; INSERT INTO search_build(next_id) VALUES (0);")?;
    Ok(())
}

/// Builds what is missing from the index (a store migrated from before it, or an index made
/// anew), in batches of `BUILD_BATCH` records, each its own write transaction so that appends
/// of other processes wait for one batch at most. Records appended meanwhile are indexed by
/// their append: a record already in the index is skipped.
pub(crate) fn ensure_built(conn: &Connection) -> Result<()> {
    while let Some(from) = pending(conn)? {
        let tx = crate::txn::Txn::immediate(conn)?;
        // Read again under the write lock: another process may have built it meanwhile.
        let Some(from) = pending(&tx)?.filter(|&f| f >= from) else {
            tx.commit()?;
            continue;
        };
        let ids: Vec<i64> = tx
            .prepare_cached(
                "SELECT id FROM records WHERE id >= ?1 AND msg_index IS NOT NULL ORDER BY id LIMIT ?2",
            )?
            .query_map(rusqlite::params![from, BUILD_BATCH as i64], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for &id in &ids {
            let (num, seq) = (
                id >> crate::schema::SEQ_BITS,
                id & ((1 << crate::schema::SEQ_BITS) - 1),
            );
            let Some(env) = crate::session::Session::record(&tx, num, seq as u64)? else {
                continue;
            };
            if indexable(&env) && !indexed(&tx, id)? {
                add(&tx, id, env.get("message").unwrap_or(&Value::Null))?;
            }
        }
        match ids.last() {
            Some(last) if ids.len() == BUILD_BATCH => {
                tx.execute("UPDATE search_build SET next_id = ?1", [last + 1])?;
            }
            _ => {
                tx.execute("DELETE FROM search_build", [])?;
            }
        }
        tx.commit()?;
    }
    Ok(())
}

/// Where the build of the index stands: the id to go on from, or None if it is complete.
pub(crate) fn pending(conn: &Connection) -> Result<Option<i64>> {
    Ok(conn
        .query_row("SELECT next_id FROM search_build", [], |r| r.get(0))
        .optional()?)
}

fn indexed(conn: &Connection, id: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM search WHERE rowid = ?1")?
        .query_row([id], |_| Ok(()))
        .optional()?
        .is_some())
}

fn capped(s: &str) -> &str {
    if s.len() <= MAX_FIELD_BYTES {
        return s;
    }
    let mut end = MAX_FIELD_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Whether `c` is written without spaces between words (Han, kana, hangul): indexed one
/// character a token.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF | 0x3040..=0x30FF | 0x3130..=0x318F | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFF66..=0xFF9F | 0x20000..=0x2FA1F)
}

/// Text as the index takes it: CJK characters apart, camelCase words followed by their parts.
pub(crate) fn prepare(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut parts = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, parts: &mut String| {
        camel_parts(word, parts);
        word.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush(&mut word, &mut parts);
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            if c.is_alphanumeric() {
                word.push(c);
            } else {
                flush(&mut word, &mut parts);
            }
            out.push(c);
        }
    }
    flush(&mut word, &mut parts);
    if !parts.is_empty() {
        out.push('\n');
        out.push_str(&parts);
    }
    out
}

/// The parts of a camelCase word (`fooBarBaz`: foo bar baz; `parseJSON`: parse json), added to
/// `out`; nothing for a word of one case.
fn camel_parts(word: &str, out: &mut String) {
    let chars: Vec<char> = word.chars().collect();
    let mut starts = vec![0];
    for i in 1..chars.len() {
        let (p, c) = (chars[i - 1], chars[i]);
        let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
        if (p.is_lowercase() || p.is_numeric()) && c.is_uppercase()
            || p.is_uppercase() && c.is_uppercase() && next_lower
        {
            starts.push(i);
        }
    }
    if starts.len() < 2 {
        return;
    }
    starts.push(chars.len());
    for w in starts.windows(2) {
        out.push(' ');
        out.extend(&chars[w[0]..w[1]]);
    }
}

/// The index columns of `fields`, as an FTS5 column filter.
pub(crate) fn column_filter(fields: &[Field]) -> String {
    let names: Vec<&str> = fields.iter().map(|f| f.as_str()).collect();
    format!("{{{}}}", names.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_apart_and_camel_case_parts_appended() {
        assert_eq!(prepare("漢字です ok"), " 漢  字  で  す  ok");
        assert_eq!(
            prepare("call fooBar and parseJSON"),
            "call fooBar and parseJSON\n foo Bar parse JSON"
        );
        assert_eq!(
            prepare("snake_case path/to/file.ts"),
            "snake_case path/to/file.ts"
        );
    }
}
