//! `Store::search`: BM25 ranking over the fields asked for (FTS5's `bm25`, recency breaking
//! ties), filters, snippets cut from the records, and cursor paging.
//!
//! A cursor is the offset of the next page and an HMAC-SHA256 tag over it, the query and every
//! option, under a random key kept in the store (`search_index::Meta`): a cursor altered, cut
//! short, made for another query or options, or by another store is refused, so the offset that
//! reaches the SQL is always one this store gave out (never a wrapped or huge one).

use crate::storage::db::Db;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::query::{self, Query};
use crate::error::{Error, Result};
use crate::model::fields::{self, Field};
use crate::model::message::Role;
use crate::storage::schema::SEQ_BITS;
use crate::storage::search_index as index;
use crate::store::Store;

pub const DEFAULT_LIMIT: u64 = 20;
pub const MAX_LIMIT: u64 = 200;
/// Characters of context a snippet shows around its first match.
const SNIPPET_CHARS: usize = 200;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchOptions {
    pub project: Option<String>,
    pub session_id: Option<String>,
    pub exclude_session_id: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub roles: Option<Vec<Role>>,
    pub fields: Option<Vec<Field>>,
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub session_id: String,
    pub uuid: String,
    pub seq: u64,
    pub timestamp: String,
    pub role: Role,
    pub field: Field,
    /// the match in context, each matching word between `**`
    pub snippet: String,
    /// higher is better (BM25, negated)
    pub score: f64,
    pub session: HitSession,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HitSession {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchPage {
    pub hits: Vec<SearchHit>,
    pub next_cursor: Option<String>,
    /// records committed but not indexed yet, so not searched: 0 unless the store had a large
    /// backlog, which the next searches index (docs/recall.md)
    pub unindexed: u64,
}

impl Store {
    /// Searches every session of the store (see the query syntax in `recall::query`).
    pub fn search(&self, text: &str, options: &SearchOptions) -> Result<SearchPage> {
        self.search_inner(text, options)
            .map_err(|e| e.during("search"))
    }

    fn search_inner(&self, text: &str, o: &SearchOptions) -> Result<SearchPage> {
        let query = query::parse(text)?;
        let mut plan = Plan::of(text, o)?;
        let conn = self.reader()?;
        let writable = !self.options().readonly;
        let meta = if writable {
            index::settle(&conn)?
        } else {
            index::meta(&conn)?
        };
        plan.key = meta.cursor_key.unwrap_or_else(|| process_key().to_vec());
        if let Some(c) = &o.cursor {
            plan.offset = plan.open(c)?;
        }
        // What was committed since the last search is indexed first (a readonly store searches
        // what its writers have indexed). A large backlog is indexed over several searches (`index::INDEX_BUDGET` each): until
        // then, the page says how many records it could not see.
        let mut unindexed = if writable {
            index::catch_up(&conn, index::index_budget())?
        } else {
            index::unindexed(&conn)?
        };
        let Db::Sqlite(lite, ..) = &*conn else {
            let rows = plan.rows_pg(&conn, &query)?;
            return self.page(&conn, rows, &plan, &query, unindexed);
        };
        let rows = match plan.rows(lite, &query) {
            Err(e) if index::is_index_damage(&e) && writable => {
                // A damaged or missing index is made anew, filled, then asked again.
                let tx = crate::storage::txn::Txn::immediate(&conn)?;
                index::reset(tx.sqlite()?)?;
                tx.commit()?;
                unindexed = index::catch_up(&conn, index::index_budget())?;
                plan.rows(lite, &query)?
            }
            other => other?,
        };
        self.page(&conn, rows, &plan, &query, unindexed)
    }

    /// The page of hits of `rows` (one more than the page holds, if another page follows).
    fn page(
        &self,
        conn: &Db,
        rows: Vec<Row>,
        plan: &Plan<'_>,
        query: &Query,
        unindexed: u64,
    ) -> Result<SearchPage> {
        let more = rows.len() as u64 > plan.limit;
        let mut hits = Vec::new();
        for row in rows.into_iter().take(plan.limit as usize) {
            match hit(conn, row, &plan.fields, query) {
                Ok(h) => hits.push(h),
                // Its session was deleted since the index was read (PostgreSQL: `damaged`).
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let next_cursor = more.then(|| plan.cursor(plan.offset + plan.limit));
        Ok(SearchPage {
            hits,
            next_cursor,
            unindexed,
        })
    }
}

/// What one search asks, checked.
struct Plan<'o> {
    o: &'o SearchOptions,
    fields: Vec<Field>,
    roles: Vec<&'static str>,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
    limit: u64,
    offset: u64,
    /// what a cursor of this search signs besides its offset: the query and every option but
    /// the cursor
    signed: Vec<u8>,
    /// the key cursors are signed with
    key: Vec<u8>,
}

use index::Ranked as Row;

impl<'o> Plan<'o> {
    fn of(text: &str, o: &'o SearchOptions) -> Result<Plan<'o>> {
        let fields = match &o.fields {
            None => Field::DEFAULT.to_vec(),
            Some(f) if f.is_empty() => {
                return Err(Error::InvalidInput(
                    "options.fields: name at least one field".into(),
                ))
            }
            Some(f) => Field::ALL.into_iter().filter(|x| f.contains(x)).collect(),
        };
        let roles = match &o.roles {
            None => vec!["user", "assistant"],
            Some(r) if r.is_empty() => {
                return Err(Error::InvalidInput(
                    "options.roles: name at least one role".into(),
                ))
            }
            Some(r) => {
                // System messages are instructions, not conversation: never indexed.
                if let Some(i) = r.iter().position(|r| *r == Role::System) {
                    return Err(Error::InvalidInput(format!(
                        "options.roles[{i}]: expected 'user' or 'assistant' (system messages are not searched), got 'system'"
                    )));
                }
                r.iter().map(|r| r.as_str()).collect()
            }
        };
        let time = |s: &Option<String>, name: &str| -> Result<Option<i64>> {
            s.as_deref()
                .map(|s| {
                    crate::model::clock::parse_ms(s).ok_or_else(|| {
                        Error::InvalidInput(format!(
                            "options.{name}: expected an ISO 8601 date-time, got '{s}'"
                        ))
                    })
                })
                .transpose()
        };
        let limit = o.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::InvalidInput(format!(
                "options.limit: expected 1 to {MAX_LIMIT}, got {limit}"
            )));
        }
        let mut keyed = o.clone();
        keyed.cursor = None;
        let options = serde_json::to_string(&keyed).unwrap_or_default();
        // Each part with its length before it: no two searches sign the same bytes.
        let mut signed = b"threadline search cursor 1".to_vec();
        for part in [text, &options] {
            signed.extend_from_slice(&(part.len() as u64).to_be_bytes());
            signed.extend_from_slice(part.as_bytes());
        }
        Ok(Plan {
            o,
            fields,
            roles,
            since_ms: time(&o.since, "since")?,
            until_ms: time(&o.until, "until")?,
            limit,
            offset: 0,
            signed,
            key: Vec::new(),
        })
    }

    /// The tag of the cursor to the page at `offset`.
    fn tag(&self, offset: u64) -> [u8; CURSOR_TAG] {
        let mac = hmac_sha256(&self.key, &[&self.signed, &offset.to_be_bytes()]);
        let mut tag = [0; CURSOR_TAG];
        tag.copy_from_slice(&mac[..CURSOR_TAG]);
        tag
    }

    /// The cursor to the page at `offset`: the offset and its tag, in hex.
    fn cursor(&self, offset: u64) -> String {
        let mut out = format!("{offset:016x}");
        for b in self.tag(offset) {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }

    /// The offset a cursor of this search leads to.
    fn open(&self, c: &str) -> Result<u64> {
        let bad = || {
            Error::InvalidInput(
                "options.cursor: not a cursor of this search (pass back nextCursor with the same query and options, to the store that gave it)".into(),
            )
        };
        let bytes = hex(c)
            .filter(|b| b.len() == 8 + CURSOR_TAG)
            .ok_or_else(bad)?;
        let mut offset = [0; 8];
        offset.copy_from_slice(&bytes[..8]);
        let offset = u64::from_be_bytes(offset);
        // Every byte compared, wherever the first difference is.
        let diff = self
            .tag(offset)
            .iter()
            .zip(&bytes[8..])
            .fold(0, |d, (a, b)| d | (a ^ b));
        // An offset this search gives is a whole number of pages, and the SQL's OFFSET (an i64)
        // holds it with the page after it.
        if diff != 0 || !offset.is_multiple_of(self.limit) || offset > MAX_OFFSET {
            return Err(bad());
        }
        Ok(offset)
    }

    /// `rows` on PostgreSQL.
    fn rows_pg(&self, db: &Db, q: &Query) -> Result<Vec<Row>> {
        let searched = |f: Field| self.fields.contains(&f);
        index::ranked_pg(
            db,
            &q.tsquery,
            [
                searched(Field::Text),
                searched(Field::Thinking),
                searched(Field::ToolInput),
                searched(Field::ToolOutput),
            ],
            &self.filter(""),
        )
    }

    /// One more row than the page holds (to know whether another page follows).
    fn rows(&self, conn: &rusqlite::Connection, q: &Query) -> rusqlite::Result<Vec<Row>> {
        let matching = format!(
            "{} : ({})",
            index::column_filter(&self.fields),
            q.expression
        );
        index::ranked(conn, &self.filter(&matching))
    }

    /// The filters of this search, `matching` its FTS5 expression (unused on PostgreSQL).
    fn filter<'a>(&'a self, matching: &'a str) -> index::Filter<'a> {
        index::Filter {
            matching,
            roles: &self.roles,
            project: self.o.project.as_deref(),
            session_id: self.o.session_id.as_deref(),
            exclude_session_id: self.o.exclude_session_id.as_deref(),
            since_ms: self.since_ms,
            until_ms: self.until_ms,
            limit: self.limit + 1,
            offset: self.offset,
        }
    }
}

fn hit(conn: &Db, row: Row, fields: &[Field], q: &Query) -> Result<SearchHit> {
    let (num, seq) = (row.id >> SEQ_BITS, (row.id & ((1 << SEQ_BITS) - 1)) as u64);
    let env = crate::storage::records::record(conn, num, seq)?.ok_or_else(|| {
        crate::storage::checksum::damaged(
            conn,
            num,
            seq,
            "the search index names a record that is not stored",
        )
    })?;
    let message = env.get("message").unwrap_or(&Value::Null);
    let texts = fields::texts(message);
    let (field, snippet) = snippet(&texts, fields, &q.marks);
    let str_of = |k: &str| env.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let role = match message.get("role").and_then(Value::as_str) {
        Some("assistant") => Role::Assistant,
        _ => Role::User,
    };
    Ok(SearchHit {
        session_id: row.session_id,
        uuid: str_of("uuid"),
        seq,
        timestamp: str_of("timestamp"),
        role,
        field,
        snippet,
        score: -row.rank,
        session: HitSession {
            title: row.title,
            project: row.project,
        },
    })
}

/// The first field (of those searched) where a word of the query is found, and the text around
/// its first match with every match marked.
pub(crate) fn snippet(texts: &[String; 4], fields: &[Field], marks: &[String]) -> (Field, String) {
    let marks: Vec<Vec<char>> = marks.iter().map(|m| m.chars().collect()).collect();
    let found = fields
        .iter()
        .find_map(|&f| find(&texts[f.index()], &marks).map(|at| (f, at)));
    let (field, at) = found.unwrap_or_else(|| {
        let f = fields
            .iter()
            .copied()
            .find(|f| !texts[f.index()].is_empty())
            .unwrap_or(Field::Text);
        (f, 0)
    });
    (field, cut(&texts[field.index()], at, &marks))
}

/// The char index of the first match of any of `marks` in `text`, matched as the index matches
/// (folded, without regard to case) at the start of a word.
fn find(text: &str, marks: &[Vec<char>]) -> Option<usize> {
    let chars: Vec<char> = text.chars().collect();
    let folded = Folded::of(&chars);
    (0..chars.len()).find(|&i| find_at(&chars, &folded, marks, i).is_some())
}

/// Characters as the index compares them (`search_index::fold_char`: folded, lowercased), each
/// with the character it comes from.
struct Folded {
    chars: Vec<char>,
    /// for each folded character, the index of the character it comes from
    from: Vec<usize>,
    /// for each character, the index of its first folded character
    start: Vec<usize>,
}

impl Folded {
    fn of(chars: &[char]) -> Folded {
        let mut f = Folded {
            chars: Vec::with_capacity(chars.len()),
            from: Vec::with_capacity(chars.len()),
            start: Vec::with_capacity(chars.len()),
        };
        for (i, &c) in chars.iter().enumerate() {
            f.start.push(f.chars.len());
            crate::storage::search_index::fold_char(c, |x| {
                f.chars.push(x);
                f.from.push(i);
            });
        }
        f
    }

    /// The characters `mark` covers from character `i`, if its folded characters start there
    /// and end at the end of a character.
    fn matches(&self, i: usize, mark: &[char]) -> Option<usize> {
        let p = self.start[i];
        let end = p + mark.len();
        if mark.is_empty() || end > self.chars.len() || self.chars[p..end] != *mark {
            return None;
        }
        let last = self.from[end - 1];
        (self.from.get(end) != Some(&last)).then(|| last + 1 - i)
    }
}

/// About `SNIPPET_CHARS` characters of `text` around char `at`, on one line, matches marked.
fn cut(text: &str, at: usize, marks: &[Vec<char>]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let start = at.saturating_sub(SNIPPET_CHARS / 3);
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let wchars = &chars[start..end];
    let folded = Folded::of(wchars);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let mut i = 0;
    while i < wchars.len() {
        match find_at(wchars, &folded, marks, i) {
            Some(len) => {
                out.push_str("**");
                out.extend(&wchars[i..i + len]);
                out.push_str("**");
                i += len;
            }
            None => {
                let c = wchars[i];
                out.push(if c.is_whitespace() { ' ' } else { c });
                i += 1;
            }
        }
    }
    if end < chars.len() {
        out.push('…');
    }
    collapse_spaces(&out)
}

/// The length (in characters of `chars`) of the longest mark matching at `i`, the start of a
/// word.
fn find_at(chars: &[char], folded: &Folded, marks: &[Vec<char>], i: usize) -> Option<usize> {
    // A match starts a word, a camelCase part of one (the index finds `renderer` in
    // `TranscriptRenderer`), or is CJK (indexed character by character).
    if i > 0
        && chars[i - 1].is_alphanumeric()
        && !crate::storage::search_index::is_cjk(chars[i])
        && !crate::storage::search_index::camel_start(chars, i)
    {
        return None;
    }
    marks.iter().filter_map(|m| folded.matches(i, m)).max()
}

fn collapse_spaces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c == ' ' {
            if !space {
                out.push(c);
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
    out.trim().to_string()
}

/// Bytes of the HMAC a cursor carries.
const CURSOR_TAG: usize = 16;
/// The largest offset a cursor may hold: the SQL's OFFSET and LIMIT are i64.
const MAX_OFFSET: u64 = i64::MAX as u64 - 2 * MAX_LIMIT;

/// Lowercase hex as bytes; None if it is not.
fn hex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// HMAC-SHA256 (RFC 2104) of the concatenation of `parts` under `key`.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    for p in parts {
        inner.update(p);
    }
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// A key for the cursors of a store that keeps none (readonly, and no writer has searched it
/// since keys were kept): random, for this process only.
fn process_key() -> &'static [u8] {
    static KEY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut key = Vec::with_capacity(48);
        for _ in 0..2 {
            key.extend_from_slice(uuid::Uuid::now_v7().as_bytes());
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            key.extend_from_slice(&h.finish().to_be_bytes());
        }
        key
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_as_rfc_4231_gives_it() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        // test case 2
        assert_eq!(
            hex(&hmac_sha256(
                b"Jefe",
                &[b"what do ya want ", b"for nothing?"]
            )),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // test case 6: a key longer than a block is hashed first
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                &[b"Test Using Larger Than Block-Size Key - Hash Key First"]
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_camel_case_part_is_found_and_marked() {
        let texts = [
            "use the TranscriptRenderer here".to_string(),
            String::new(),
            String::new(),
            String::new(),
        ];
        let (_, s) = snippet(&texts, &Field::DEFAULT, &["renderer".into()]);
        assert_eq!(s, "use the Transcript**Renderer** here");
        let (_, s) = snippet(&texts, &Field::DEFAULT, &["script".into()]);
        assert!(!s.contains("**"), "not a part: {s}");
    }

    #[test]
    fn a_folded_match_marks_the_characters_it_comes_from() {
        let texts = [
            "the Ｔｈｒｅａｄ of ２０２６, a ﬁle".to_string(),
            String::new(),
            String::new(),
            String::new(),
        ];
        let marks = ["thread".into(), "2026".into(), "file".into(), "f".into()];
        let (_, s) = snippet(&texts, &Field::DEFAULT, &marks);
        assert_eq!(s, "the **Ｔｈｒｅａｄ** of **２０２６**, a **ﬁle**");
    }

    #[test]
    fn snippets_mark_every_match_and_keep_to_one_line() {
        let texts = [
            "We decided the Auth flow\nuses PKCE; auth tokens last an hour.".to_string(),
            String::new(),
            String::new(),
            String::new(),
        ];
        let (f, s) = snippet(&texts, &Field::DEFAULT, &["auth".into()]);
        assert_eq!(f, Field::Text);
        assert_eq!(
            s,
            "We decided the **Auth** flow uses PKCE; **auth** tokens last an hour."
        );
        // a word inside another is not a match
        let (_, s) = snippet(&texts, &Field::DEFAULT, &["uth".into()]);
        assert!(!s.contains("**"), "{s}");
    }
}
