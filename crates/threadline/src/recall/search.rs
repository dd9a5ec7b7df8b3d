//! `Store::search`: BM25 ranking over the fields asked for (FTS5's `bm25`, recency breaking
//! ties), filters, snippets cut from the records, and cursor paging.

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
        let plan = Plan::of(text, o)?;
        let conn = self.shared().lock()?;
        // What was committed since the last search is indexed first (a readonly store searches
        // what its writers have indexed).
        // A large backlog is indexed over several searches (`index::INDEX_BUDGET` each): until
        // then, the page says how many records it could not see.
        let writable = !self.options().readonly;
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
            hits.push(hit(conn, row, &plan.fields, query)?);
        }
        let next_cursor = more.then(|| cursor(plan.offset + plan.limit, plan.key));
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
    /// identifies the query and its options, so a cursor is not used for another search
    key: u32,
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
            Some(r) => r
                .iter()
                .map(|r| match r {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                })
                .collect(),
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
        let key = crc32fast::hash(
            format!(
                "{text}\u{0}{}",
                serde_json::to_string(&keyed).unwrap_or_default()
            )
            .as_bytes(),
        );
        let offset = match &o.cursor {
            None => 0,
            Some(c) => parse_cursor(c, key)?,
        };
        Ok(Plan {
            o,
            fields,
            roles,
            since_ms: time(&o.since, "since")?,
            until_ms: time(&o.until, "until")?,
            limit,
            offset,
            key,
        })
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

/// The char index of the first match of any of `marks` in `text`, matched without regard to
/// case at the start of a word.
fn find(text: &str, marks: &[Vec<char>]) -> Option<usize> {
    let chars: Vec<char> = text.chars().collect();
    (0..chars.len()).find(|&i| find_at(&chars, marks, i).is_some())
}

fn lower(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// About `SNIPPET_CHARS` characters of `text` around char `at`, on one line, matches marked.
fn cut(text: &str, at: usize, marks: &[Vec<char>]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let start = at.saturating_sub(SNIPPET_CHARS / 3);
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let wchars = &chars[start..end];
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let mut i = 0;
    while i < wchars.len() {
        match find_at(wchars, marks, i) {
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

/// The length of the longest mark matching at `i`, the start of a word.
fn find_at(chars: &[char], marks: &[Vec<char>], i: usize) -> Option<usize> {
    // A match starts a word, a camelCase part of one (the index finds `renderer` in
    // `TranscriptRenderer`), or is CJK (indexed character by character).
    if i > 0
        && chars[i - 1].is_alphanumeric()
        && !crate::storage::search_index::is_cjk(chars[i])
        && !crate::storage::search_index::camel_start(chars, i)
    {
        return None;
    }
    marks
        .iter()
        .filter(|m| {
            !m.is_empty()
                && i + m.len() <= chars.len()
                && chars[i..i + m.len()]
                    .iter()
                    .map(|&c| lower(c))
                    .eq(m.iter().copied())
        })
        .map(Vec::len)
        .max()
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

fn cursor(offset: u64, key: u32) -> String {
    format!("{offset}.{key:08x}")
}

fn parse_cursor(c: &str, key: u32) -> Result<u64> {
    let bad = || {
        Error::InvalidInput(
            "options.cursor: not a cursor of this search (pass back nextCursor with the same query and options)".into(),
        )
    };
    let (offset, k) = c.split_once('.').ok_or_else(bad)?;
    if k != format!("{key:08x}") {
        return Err(bad());
    }
    offset.parse().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

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
