//! The search index: an FTS5 table with one row per conversation record (rowid = the record's
//! id), a column per field.
//!
//! When it is written: each session's row notes how many of its records are indexed
//! (`sessions.indexed`, beside `sessions.records`), and every search first indexes what was
//! committed since, in one write transaction (batches of `BATCH` records), then asks. So a
//! committed record is always found, a rolled-back one never, and an append does not pay for
//! FTS5's segment flush at its commit (about 85 µs for a 2.7 KB message here, which would make
//! an append 1.9x as long); many records indexed in one transaction share one flush. A store
//! from before the index, or one whose index was damaged or lost, is indexed the same way.
//!
//! Tokenizer: FTS5's `unicode61` (case and diacritics folded), fed text prepared so that it
//! also serves code and CJK:
//! - compatibility characters folded (NFKC, `fold`): fullwidth `Ｔｈｒｅａｄ ２０２６` is indexed as
//!   `Thread 2026`, halfwidth katakana as katakana, ligatures and superscripts as their letters
//!   and digits; a query is folded the same way;
//! - identifiers: unicode61 splits `parse_json` and `src/auth/login.ts` at the punctuation
//!   (a query for `parse_json` is the phrase "parse json"), and each camelCase word is followed
//!   by its parts, so `fooBar` is found by `foobar`, `foo` and `bar`;
//! - CJK: each Han, kana or hangul character is a token of its own (text without spaces
//!   between words is otherwise one token per sentence), and a CJK query is the phrase of its
//!   characters, so any run of characters is found, two-character words too (the trigram
//!   tokenizer needs three).
//!
//! The table keeps no copy of the text (`content=''`): snippets are cut from the record itself.
//!
//! On PostgreSQL the table holds a `tsvector` per field (GIN-indexed), written from the same
//! prepared text cut into the same tokens as a query's (`tsvector_of`), with their positions, so
//! words, phrases and prefixes match as on SQLite; ranking is `ts_rank` with the same field
//! weights. It is filled the same way, at the next search.

use std::borrow::Cow;
use std::cell::Cell;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};
use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};

use crate::error::{Error, Result};
use crate::model::fields::{self, Field};
/// Han, kana and hangul characters are indexed one character a token.
pub(crate) use crate::model::tokens::is_cjk;
use crate::storage::db::{args, Db};
use crate::storage::schema::SEQ_BITS;

pub(crate) use crate::storage::schema::CREATE_SEARCH as CREATE;

/// Text indexed per field of a record, at most (a tool output of megabytes is found by what its
/// first 64 KiB say).
const MAX_FIELD_BYTES: usize = 64 * 1024;

/// Records indexed per write transaction.
const BATCH: u64 = 500;

/// The version of the tokens the index holds (how text is folded and cut): an index of other
/// tokens (none recorded: from before text was folded) is made anew by a writer's next search,
/// and its records indexed again.
pub(crate) const TOKENS: i64 = 2;

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

/// Indexes record `id` (its message).
fn add(db: &Db, id: i64, message: &Value) -> Result<()> {
    let texts = fields::texts(message);
    if texts.iter().all(String::is_empty) {
        return Ok(());
    }
    let prepared: Vec<String> = texts.iter().map(|t| prepare(&fold(capped(t)))).collect();
    let Db::Sqlite(conn, ..) = db else {
        let v: Vec<String> = prepared.iter().map(|t| tsvector_of(t)).collect();
        // Held back and sent with the next statement: a batch's rows go in one round trip.
        db.execute_later(
            "INSERT INTO search(id, text, thinking, tool_input, tool_output)
             VALUES (?1, CAST(CAST(?2 AS text) AS tsvector), CAST(CAST(?3 AS text) AS tsvector), CAST(CAST(?4 AS text) AS tsvector), CAST(CAST(?5 AS text) AS tsvector))
             ON CONFLICT DO NOTHING",
            &args![id, v[0], v[1], v[2], v[3]],
        )?;
        return Ok(());
    };
    conn.prepare_cached(
        "INSERT INTO search(rowid, text, thinking, tool_input, tool_output) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(rusqlite::params![id, prepared[0], prepared[1], prepared[2], prepared[3]])?;
    Ok(())
}

/// Removes the rows of session `num` (its records' ids are one range).
pub(crate) fn delete_session(db: &Db, num: i64) -> Result<()> {
    let (lo, hi) = crate::storage::schema::range(num);
    let Db::Sqlite(conn, ..) = db else {
        return db.execute_later(
            "DELETE FROM search WHERE id BETWEEN ?1 AND ?2",
            &args![lo, hi],
        );
    };
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

/// Makes the index anew, empty, every record to be indexed again. Inside a write transaction.
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
    conn.execute_batch("UPDATE sessions SET indexed = 0")?;
    conn.execute_batch(CREATE_META)?;
    conn.execute(
        "INSERT OR REPLACE INTO search_meta VALUES ('tokens', ?1)",
        [TOKENS],
    )?;
    Ok(())
}

/// The index's settings, kept beside it: on SQLite in `search_meta` (made by the first search of
/// a writer), on PostgreSQL in the schema's `meta` table (`search_*` keys).
#[derive(Debug, Default)]
pub(crate) struct Meta {
    /// the version of the index's tokens (0: not recorded)
    pub tokens: i64,
    /// the key that signs search cursors (recall/search.rs): random, made once per store, so a
    /// cursor is good for the store that gave it, in any process, and for no other
    pub cursor_key: Option<Vec<u8>>,
}

const CREATE_META: &str =
    "CREATE TABLE IF NOT EXISTS search_meta(key TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID";

/// The index's settings as stored (none yet: a store no writer has searched since they were
/// kept, or a readonly one).
pub(crate) fn meta(db: &Db) -> Result<Meta> {
    let mut m = Meta::default();
    let Db::Sqlite(conn, ..) = db else {
        let rows = db.rows(
            "SELECT key, value FROM meta WHERE key IN ('search_tokens', 'search_key_1', 'search_key_2') ORDER BY key",
            &[],
            |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)),
        )?;
        let keys: Vec<i64> = rows
            .iter()
            .filter(|(k, _)| k.starts_with("search_key_"))
            .map(|(_, v)| *v)
            .collect();
        if keys.len() == 2 {
            m.cursor_key = Some(keys.iter().flat_map(|v| v.to_be_bytes()).collect());
        }
        m.tokens = rows
            .iter()
            .find(|(k, _)| k == "search_tokens")
            .map_or(0, |(_, v)| *v);
        return Ok(m);
    };
    let mut stmt = match conn.prepare_cached("SELECT key, value FROM search_meta") {
        Ok(s) => s,
        Err(rusqlite::Error::SqliteFailure(_, Some(msg))) if msg.contains("no such table") => {
            return Ok(m)
        }
        Err(e) => return Err(e.into()),
    };
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        match r.get_ref(0)?.as_str().ok() {
            Some("cursor_key") => m.cursor_key = r.get_ref(1)?.as_blob().ok().map(<[u8]>::to_vec),
            Some("tokens") => m.tokens = r.get_ref(1)?.as_i64().unwrap_or(0),
            _ => {}
        }
    }
    Ok(m)
}

/// The index's settings, made if missing, and an index of other tokens made anew (a writer's
/// search, before it indexes).
pub(crate) fn settle(db: &Db) -> Result<Meta> {
    let m = meta(db)?;
    if m.cursor_key.is_some() && m.tokens == TOKENS {
        return Ok(m);
    }
    let tx = crate::storage::txn::Txn::immediate(db)?;
    if let Db::Sqlite(conn, ..) = &*tx {
        conn.execute_batch(CREATE_META)?;
        conn.execute(
            "INSERT OR IGNORE INTO search_meta VALUES ('cursor_key', randomblob(32))",
            [],
        )?;
        // Read again under the write lock: another process may have made it anew meanwhile.
        let tokens: Option<i64> = conn
            .query_row(
                "SELECT value FROM search_meta WHERE key = 'tokens'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        if tokens != Some(TOKENS) {
            reset(conn)?;
        }
    } else {
        // 60 random bits of a version 4 uuid each (the server's strong random source).
        tx.execute_later(
            "INSERT INTO meta VALUES
               ('search_key_1', CAST(CAST('x' || substr(translate(CAST(gen_random_uuid() AS text), '-', ''), 1, 16) AS bit(64)) AS bigint)),
               ('search_key_2', CAST(CAST('x' || substr(translate(CAST(gen_random_uuid() AS text), '-', ''), 1, 16) AS bit(64)) AS bigint))
             ON CONFLICT (key) DO NOTHING",
            &[],
        )?;
        // The row locked (made first if missing): one process makes the index anew.
        tx.execute_later(
            "INSERT INTO meta VALUES ('search_tokens', 0) ON CONFLICT (key) DO NOTHING",
            &[],
        )?;
        let tokens = tx.query_row(
            "SELECT value FROM meta WHERE key = 'search_tokens' FOR UPDATE",
            &[],
            |r| r.get::<i64>(0),
        )?;
        if tokens != Some(TOKENS) {
            // Sent with the COMMIT, one round trip: the UPDATE locks every session's row, which
            // appends update, so it is never held while this process is between two calls.
            tx.execute_later("TRUNCATE search", &[])?;
            tx.execute_later("UPDATE sessions SET indexed = 0", &[])?;
            tx.execute_later(
                "UPDATE meta SET value = ?1 WHERE key = 'search_tokens'",
                &args![TOKENS],
            )?;
        }
    }
    tx.commit()?;
    meta(db)
}

/// Whether records are waiting to be indexed.
pub(crate) fn pending(db: &Db) -> Result<bool> {
    Ok(db
        .query_row(
            "SELECT 1 FROM sessions WHERE indexed < records LIMIT 1",
            &[],
            |_| Ok(()),
        )?
        .is_some())
}

/// How many records are waiting to be indexed.
pub(crate) fn unindexed(db: &Db) -> Result<u64> {
    let n: Option<i64> = db.query_row(
        "SELECT CAST(coalesce(sum(records - indexed), 0) AS bigint) FROM sessions WHERE indexed < records",
        &[],
        |r| r.get(0),
    )?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

/// How long a search may spend indexing before it answers. What was committed since the last
/// search is usually indexed well within it (about 20 to 30 µs a record); a larger backlog (a
/// store written for long without a search, an import, a store from before the index) is
/// indexed over the following searches, this long each, and meanwhile a search says how many
/// records it could not see yet (`SearchPage::unindexed`).
pub(crate) const INDEX_BUDGET: Duration = Duration::from_millis(1500);

thread_local! {
    /// The budget in place of `INDEX_BUDGET` on this thread (tests of a search that returns
    /// before the index caught up).
    static BUDGET: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// Sets (or, with `None`, resets) how long a search on this thread may index before it answers.
pub fn set_index_budget(budget: Option<Duration>) {
    BUDGET.with(|b| b.set(budget));
}

/// The budget of a search on this thread.
pub(crate) fn index_budget() -> Duration {
    BUDGET.with(Cell::get).unwrap_or(INDEX_BUDGET)
}

/// Indexes the records committed and not indexed yet, `BATCH` records a write transaction (so
/// that the appends of other processes wait for one batch at most), until none is left or
/// `budget` has passed (one batch at least). Returns how many records are still waiting.
pub(crate) fn catch_up(db: &Db, budget: Duration) -> Result<u64> {
    let started = Instant::now();
    // This connection's open batch of appends first: its sessions' record counts, which say what
    // is left to index, are written when it commits (storage/batch.rs).
    db.commit_batch()?;
    let mut first = true;
    while pending(db)? {
        if !first && started.elapsed() >= budget {
            return unindexed(db);
        }
        first = false;
        let tx = crate::storage::txn::Txn::immediate(db)?;
        if let Db::Sqlite(conn, ..) = &*tx {
            let exists = conn
                .query_row(
                    "SELECT 1 FROM sqlite_master WHERE name = 'search'",
                    [],
                    |_| Ok(()),
                )
                .optional()?
                .is_some();
            if !exists {
                reset(conn)?;
            }
        }
        if tx.is_postgres() {
            // Indexers take turns on a lock of their own, never the session's row: the row is
            // what every append to the session updates, and an indexer stopped mid-batch (a
            // SIGSTOP, a debugger) must not hold up the session's writer.
            tx.query_row(
                "SELECT pg_advisory_xact_lock(hashtext('threadline search'), hashtext(current_schema()))",
                &[],
                |_| Ok(()),
            )?;
        }
        // Read again under the write lock (on PostgreSQL, the indexers'): another process may
        // have indexed it meanwhile.
        let next: Option<(i64, u64, u64)> = tx.query_row(
            "SELECT num, indexed, records FROM sessions WHERE indexed < records ORDER BY num LIMIT 1",
            &[],
            |r| Ok((r.get(0)?, r.get::<i64>(1)? as u64, r.get::<i64>(2)? as u64)),
        )?;
        let written = match next {
            Some((num, from, records)) => {
                let to = records.min(from + BATCH);
                index_range(&tx, num, from, to).and_then(|()| {
                    // Sent with the COMMIT (one round trip on PostgreSQL): the row is locked only
                    // while the server runs the two. No row (the session deleted meanwhile)
                    // divides by zero there: the batch is undone, NOT_FOUND.
                    tx.execute_later(
                        tx.pick(
                            "UPDATE sessions SET indexed = ?1 WHERE num = ?2",
                            "WITH u AS (UPDATE sessions SET indexed = ?1 WHERE num = ?2 RETURNING 1) SELECT 1 / count(*) FROM u",
                        ),
                        &args![to as i64, num],
                    )
                })
            }
            None => Ok(()),
        };
        match written.and_then(|()| tx.commit()) {
            // PostgreSQL: the session was deleted while it was indexed (its row is not locked
            // here); its batch went with it, and the next look finds what is left.
            Err(Error::NotFound(_)) if db.is_postgres() => {}
            done => done?,
        }
    }
    Ok(0)
}

/// Indexes records `from..to` of session `num` (inside the caller's write transaction).
fn index_range(db: &Db, num: i64, from: u64, to: u64) -> Result<()> {
    let (lo, _) = crate::storage::schema::range(num);
    for env in crate::storage::records::records_between(db, num, from, to - 1)? {
        let Value::Object(env) = env else { continue };
        if !indexable(&env) {
            continue;
        }
        let seq = env.get("seq").and_then(Value::as_u64).unwrap_or(from);
        add(
            db,
            lo + seq as i64,
            env.get("message").unwrap_or(&Value::Null),
        )?;
    }
    Ok(())
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

/// `text` with compatibility characters folded (NFKC): fullwidth and halfwidth forms, ligatures,
/// superscripts, circled digits and the like as their plain characters. Text already in that
/// form (ASCII, most text) is given back as it is.
pub(crate) fn fold(text: &str) -> Cow<'_, str> {
    if text.is_ascii() || is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.nfkc().collect())
}

/// One character as `fold` folds it alone, lowercased, each character given to `out`: what a
/// snippet compares with a query's words.
pub(crate) fn fold_char(c: char, mut out: impl FnMut(char)) {
    if c.is_ascii() {
        out(c.to_ascii_lowercase());
        return;
    }
    for f in std::iter::once(c).nfkc() {
        f.to_lowercase().for_each(&mut out);
    }
}

/// Text as the index takes it (folded): CJK characters apart, camelCase words followed by their
/// parts.
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

/// Prepared text as a `tsvector` literal: its tokens as a query cuts them (runs of letters and
/// digits, lowercased; each CJK character one), each with its position (PostgreSQL keeps
/// positions up to 16,383: later tokens share the last). Lexemes need no quoting beyond `'`:
/// they hold letters and digits only.
pub(crate) fn tsvector_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut pos = 0u32;
    let mut word = String::new();
    let mut emit = |tok: &str, out: &mut String| {
        pos = (pos + 1).min(16_383);
        // PostgreSQL refuses lexemes over 2 KiB (its own parser drops them too).
        if tok.len() > 2046 {
            return;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push('\'');
        out.push_str(tok);
        out.push_str("':");
        out.push_str(&pos.to_string());
    };
    for c in text.chars() {
        if c.is_alphanumeric() && !is_cjk(c) {
            word.extend(c.to_lowercase());
            continue;
        }
        if !word.is_empty() {
            emit(&word, &mut out);
            word.clear();
        }
        if is_cjk(c) {
            emit(c.encode_utf8(&mut [0; 4]), &mut out);
        }
    }
    if !word.is_empty() {
        emit(&word, &mut out);
    }
    out
}

/// Whether a camelCase part starts at char `i` of a word (`fooBar` at `B`, `parseJSON` at `J`,
/// `HTMLParser` at `P`): where the index splits a word, and so where a snippet finds a match.
pub(crate) fn camel_start(chars: &[char], i: usize) -> bool {
    if i == 0 || i >= chars.len() {
        return false;
    }
    let (p, c) = (chars[i - 1], chars[i]);
    let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
    (p.is_lowercase() || p.is_numeric()) && c.is_uppercase()
        || p.is_uppercase() && c.is_uppercase() && next_lower
}

/// The parts of a camelCase word (`fooBarBaz`: foo bar baz; `parseJSON`: parse json), added to
/// `out`; nothing for a word of one case.
fn camel_parts(word: &str, out: &mut String) {
    let chars: Vec<char> = word.chars().collect();
    let mut starts = vec![0];
    for i in 1..chars.len() {
        if camel_start(&chars, i) {
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

/// What a ranked query asks for: an FTS5 match expression and the filters on its records.
pub(crate) struct Filter<'a> {
    pub matching: &'a str,
    /// 'user', 'assistant' or both
    pub roles: &'a [&'static str],
    pub project: Option<&'a str>,
    pub session_id: Option<&'a str>,
    pub exclude_session_id: Option<&'a str>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub limit: u64,
    pub offset: u64,
}

/// A record that matches, with its rank (lower is better) and its session.
pub(crate) struct Ranked {
    pub id: i64,
    pub rank: f64,
    pub session_id: String,
    pub title: Option<String>,
    pub project: Option<String>,
}

/// `ranked` on PostgreSQL: `tsquery` is the query's tsquery text, `fields` which of the four
/// fields (text, thinking, tool_input, tool_output) are searched. Rank: `ts_rank` of each field
/// searched, weighted as on SQLite, negated (lower is better, as bm25).
pub(crate) fn ranked_pg(
    db: &Db,
    tsquery: &str,
    fields: [bool; 4],
    f: &Filter<'_>,
) -> Result<Vec<Ranked>> {
    let role = |i: usize| {
        f.roles
            .get(i)
            .or(f.roles.first())
            .copied()
            .unwrap_or("user")
    };
    db.rows(
        r"SELECT x.id,
           -(CASE WHEN ?9 THEN ts_rank(coalesce(x.text, ''), q) ELSE 0 END * 1.0
             + CASE WHEN ?10 THEN ts_rank(coalesce(x.thinking, ''), q) ELSE 0 END * 0.6
             + CASE WHEN ?11 THEN ts_rank(coalesce(x.tool_input, ''), q) ELSE 0 END * 0.8
             + CASE WHEN ?12 THEN ts_rank(coalesce(x.tool_output, ''), q) ELSE 0 END * 0.5)::float8 AS rank,
           s.id, s.title, s.project
         FROM search x
         CROSS JOIN CAST(CAST(?1 AS text) AS tsquery) q
         JOIN records r ON r.id = x.id
         JOIN sessions s ON s.num = (x.id >> ?15)
         WHERE ((?9 AND x.text @@ q) OR (?10 AND x.thinking @@ q)
                OR (?11 AND x.tool_input @@ q) OR (?12 AND x.tool_output @@ q))
           AND (r.role = ?13 OR r.role = ?14)
           AND (CAST(?2 AS text) IS NULL OR s.project = ?2)
           AND (CAST(?3 AS text) IS NULL OR s.id = ?3)
           AND (CAST(?4 AS text) IS NULL OR s.id <> ?4)
           AND (CAST(?5 AS bigint) IS NULL OR (CASE WHEN r.timestamp ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}'
                THEN extract(epoch from CAST(r.timestamp AS timestamptz)) * 1000 END) >= ?5)
           AND (CAST(?6 AS bigint) IS NULL OR (CASE WHEN r.timestamp ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}'
                THEN extract(epoch from CAST(r.timestamp AS timestamptz)) * 1000 END) <= ?6)
         ORDER BY rank, x.id DESC
         LIMIT ?7 OFFSET ?8",
        &args![
            tsquery,
            f.project,
            f.session_id,
            f.exclude_session_id,
            f.since_ms,
            f.until_ms,
            f.limit as i64,
            f.offset as i64,
            fields[0],
            fields[1],
            fields[2],
            fields[3],
            role(0),
            role(1),
            i64::from(SEQ_BITS),
        ],
        |r| {
            Ok(Ranked {
                id: r.get(0)?,
                rank: r.get(1)?,
                session_id: r.get(2)?,
                title: r.get(3)?,
                project: r.get(4)?,
            })
        },
    )
}

/// The records that match, best first (ties: stored later first), `limit` of them from `offset`.
pub(crate) fn ranked(conn: &Connection, f: &Filter<'_>) -> rusqlite::Result<Vec<Ranked>> {
    let roles = f
        .roles
        .iter()
        .map(|r| format!("'{r}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let unfiltered = f.project.is_none()
        && f.session_id.is_none()
        && f.exclude_session_id.is_none()
        && f.since_ms.is_none()
        && f.until_ms.is_none()
        && f.roles.len() == 2;
    // Ranked in FTS5 alone first: without filters the page is cut there, and only its rows
    // are joined with their records and sessions (a common word matches a large part of a
    // store). Weights of the columns (text, thinking, tool_input, tool_output): what was said
    // counts more than what a tool printed. Ties go to the record stored later.
    let page = if unfiltered {
        "ORDER BY rank, id DESC LIMIT ?7 OFFSET ?8"
    } else {
        ""
    };
    let sql = format!(
        "WITH ranked AS (
           SELECT rowid AS id, bm25(search, 1.0, 0.6, 0.8, 0.5) AS rank FROM search
           WHERE search MATCH ?1 {page})
         SELECT ranked.id, ranked.rank, s.id, s.title, s.project
         FROM ranked
         JOIN records r ON r.id = ranked.id
         JOIN sessions s ON s.num = (ranked.id >> {SEQ_BITS})
         WHERE r.role IN ({roles})
           AND (?2 IS NULL OR s.project = ?2) AND (?3 IS NULL OR s.id = ?3)
           AND (?4 IS NULL OR s.id <> ?4)
           AND (?5 IS NULL OR unixepoch(r.timestamp, 'subsec') * 1000 >= ?5)
           AND (?6 IS NULL OR unixepoch(r.timestamp, 'subsec') * 1000 <= ?6)
         ORDER BY ranked.rank, ranked.id DESC
         {}",
        if unfiltered { "" } else { "LIMIT ?7 OFFSET ?8" }
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt
        .query_map(
            rusqlite::params![
                f.matching,
                f.project,
                f.session_id,
                f.exclude_session_id,
                f.since_ms,
                f.until_ms,
                f.limit as i64,
                f.offset as i64,
            ],
            |r| {
                Ok(Ranked {
                    id: r.get(0)?,
                    rank: r.get(1)?,
                    session_id: r.get(2)?,
                    title: r.get(3)?,
                    project: r.get(4)?,
                })
            },
        )?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tsvector_holds_the_tokens_a_query_makes_with_positions() {
        assert_eq!(
            tsvector_of(&prepare("Call fooBar; 漢字 x")),
            "'call':1 'foobar':2 '漢':3 '字':4 'x':5 'foo':6 'bar':7"
        );
        // A token PostgreSQL would refuse (over 2 KiB) is left out; the positions go on.
        let long = "a".repeat(3000);
        assert_eq!(tsvector_of(&format!("x {long} y")), "'x':1 'y':3");
        assert_eq!(tsvector_of(""), "");
    }

    #[test]
    fn compatibility_characters_folded() {
        assert_eq!(fold("Ｔｈｒｅａｄ ２０２６"), "Thread 2026");
        assert_eq!(fold("ﬁle x² ①"), "file x2 1");
        // halfwidth katakana, its voiced mark joined
        assert_eq!(fold("ｶﾞｲﾄﾞ"), "ガイド");
        assert!(matches!(fold("plain text, 漢字"), Cow::Borrowed(_)));
        let mut out = String::new();
        fold_char('Ｔ', |c| out.push(c));
        fold_char('ﬁ', |c| out.push(c));
        assert_eq!(out, "tfi");
    }

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
