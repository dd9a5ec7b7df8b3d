//! The integrity check of a store's file (`verify`): SQLite's own check, then every record's
//! checksums, seqs and JSON, each session's row and journal, the blobs records use, and what
//! belongs to nothing. Damage is reported, not repaired.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::storage::checksum::{self, Stored};
use crate::storage::db::{args, Db};
use crate::storage::encode::{BLOB_MARK, MESSAGE_MARK};
use crate::storage::schema::{self, SEQ_BITS};
use serde::Serialize;

/// At most this many damaged records are listed; `moreDamaged` counts the rest.
pub const MAX_DAMAGED: usize = 1000;

/// What `verify` found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// nothing damaged found
    pub ok: bool,
    /// sessions checked
    pub sessions: u64,
    /// records read and checked
    pub records: u64,
    /// distinct blobs checked (checksum and SHA-256)
    pub blobs: u64,
    /// what is damaged, in store order: the first `MAX_DAMAGED`
    pub damaged: Vec<Damage>,
    /// damaged entries left out of `damaged`
    pub more_damaged: u64,
}

/// One damaged thing: a record (`sessionId` and `seq`), a session's row (`seq` null), or the
/// file itself or a blob no record uses (both null).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Damage {
    pub session_id: Option<String>,
    pub seq: Option<u64>,
    pub reason: String,
}

pub(crate) struct Checker<'c> {
    db: &'c Db,
    report: VerifyReport,
    /// blobs checked so far: None if sound, else why not
    blobs: HashMap<String, Option<String>>,
    /// the tool calls of the messages of the session being checked, with their record's seq
    calls: Vec<(String, u64)>,
}

impl<'c> Checker<'c> {
    pub(crate) fn new(db: &'c Db) -> Self {
        Checker {
            db,
            report: VerifyReport::default(),
            blobs: HashMap::new(),
            calls: Vec::new(),
        }
    }

    pub(crate) fn finish(mut self) -> VerifyReport {
        self.report.ok = self.report.damaged.is_empty();
        self.report.blobs = self.blobs.len() as u64;
        self.report
    }

    pub(crate) fn push(&mut self, session_id: Option<&str>, seq: Option<u64>, reason: String) {
        if self.report.damaged.len() < MAX_DAMAGED {
            self.report.damaged.push(Damage {
                session_id: session_id.map(str::to_string),
                seq,
                reason,
            });
        } else {
            self.report.more_damaged += 1;
        }
    }

    /// SQLite's check of the file's structure: pages, B-trees, (unless quick) indexes.
    /// On PostgreSQL, nothing: the server keeps its own pages (its data checksums, `amcheck`).
    pub(crate) fn file(&mut self, quick: bool) {
        let Db::Sqlite(conn, ..) = self.db else {
            return;
        };
        let pragma = if quick {
            "PRAGMA quick_check"
        } else {
            "PRAGMA integrity_check"
        };
        let lines: rusqlite::Result<Vec<String>> = conn
            .prepare(pragma)
            .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect());
        match lines {
            Ok(lines) => {
                for l in lines.into_iter().filter(|l| l != "ok") {
                    self.push(None, None, format!("sqlite: {l}"));
                }
            }
            Err(e) => self.push(None, None, format!("sqlite: {e}")),
        }
    }

    pub(crate) fn session(&mut self, num: i64, id: &str) {
        self.report.sessions += 1;
        match crate::storage::sessions::read_row(self.db, num) {
            Err(e) => self.push(
                Some(id),
                None,
                format!("the session's row: {}", e.message()),
            ),
            Ok(row) => {
                if let Some(m) = row.problem() {
                    self.push(Some(id), None, format!("the session's row: {m}"));
                }
            }
        }
        self.calls.clear();
        let count = self.records(num, id);
        match crate::storage::journal::damaged(self.db, num) {
            Ok(list) => {
                for why in list {
                    self.push(Some(id), None, why);
                }
            }
            Err(e) => self.push(Some(id), None, format!("the journal: {}", e.message())),
        }
        self.journal_complete(num, id);
        let stored = self
            .db
            .query_row(
                "SELECT records FROM sessions WHERE num = ?1",
                &args![num],
                |r| r.get::<i64>(0),
            )
            .and_then(|n| n.ok_or_else(|| Error::NotFound("the row is gone".into())));
        match stored {
            Ok(n) if n > count as i64 => self.push(
                Some(id),
                Some(count),
                format!("the session's last records are missing: its row says {n} records, {count} are stored"),
            ),
            Ok(n) if n < count as i64 => self.push(
                Some(id),
                None,
                format!("the session's row says {n} records, but {count} are stored"),
            ),
            Ok(_) => {}
            Err(e) => self.push(Some(id), None, format!("the session's row: {}", e.message())),
        }
    }

    /// Every call of the session's messages has its journal row (a damaged page of the table can
    /// lose a row unnoticed).
    fn journal_complete(&mut self, num: i64, id: &str) {
        let known = self.db.rows(
            "SELECT id FROM tool_calls WHERE session = ?1",
            &args![num],
            |r| r.get::<String>(0),
        );
        let known = known.map(|k| k.into_iter().collect::<std::collections::HashSet<_>>());
        let Ok(known) = known else {
            return; // reported by the journal's own check
        };
        for (call, seq) in std::mem::take(&mut self.calls) {
            if !known.contains(&call) {
                self.push(Some(id), Some(seq), crate::storage::journal::lost(&call));
            }
        }
    }

    /// Every record of session `num`. Where SQLite cannot read on (a damaged page), the scan
    /// starts again further on, ever further, so records past the damage are still checked.
    /// Returns the seq after the last record found.
    fn records(&mut self, num: i64, id: &str) -> u64 {
        let (lo, hi) = schema::range(num);
        let mut from = lo;
        let mut skip = 1i64;
        let mut end = lo;
        while from <= hi {
            match self.scan(num, id, from, hi, &mut end) {
                Ok(()) => break,
                Err((at, e)) => {
                    let seq = (at - lo) as u64;
                    self.push(
                        Some(id),
                        Some(seq),
                        format!("SQLite cannot read the records from here on: {e}"),
                    );
                    from = at.saturating_add(skip);
                    skip = skip.saturating_mul(2).min(1 << SEQ_BITS);
                }
            }
        }
        (end - lo) as u64
    }

    /// Checks records `from..=hi` (ids); on a SQLite error, where it happened.
    fn scan(
        &mut self,
        num: i64,
        id: &str,
        from: i64,
        hi: i64,
        end: &mut i64,
    ) -> Result<(), (i64, Error)> {
        let lo = schema::range(num).0;
        let db = self.db;
        let mut expected = from;
        let scanned = db.each(
            concat!(
                "SELECT ",
                record_columns!(),
                " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id"
            ),
            &args![from, hi],
            |row| {
                let rid: i64 = row.get(checksum::col::ID)?;
                if rid > expected {
                    let (a, b) = ((expected - lo) as u64, (rid - 1 - lo) as u64);
                    let what = if a == b {
                        format!("record seq {a} is missing")
                    } else {
                        format!("records seq {a} to {b} are missing")
                    };
                    self.push(Some(id), Some(a), what);
                }
                if rid < expected {
                    let seq = (rid - lo) as u64;
                    self.push(Some(id), Some(seq), "stored out of order".into());
                    return Ok(true);
                }
                expected = rid + 1;
                *end = expected;
                self.report.records += 1;
                let seq = (rid - lo) as u64;
                match Stored::check(row) {
                    Err(why) => self.push(Some(id), Some(seq), why),
                    Ok(stored) => {
                        if let Err(why) = self.record(&stored, seq) {
                            self.push(Some(id), Some(seq), why);
                        }
                    }
                }
                Ok(true)
            },
        );
        scanned.map_err(|e| (expected, e))
    }

    /// What a sound checksum leaves to check: the state, the text (JSON, with its blobs sound).
    /// Records migrated from schema version 3 got their checksum from what was stored then.
    fn record(&mut self, stored: &Stored<'_>, seq: u64) -> std::result::Result<(), String> {
        let fail = |e: Error| e.message().to_string();
        serde_json::from_str::<crate::model::state::State>(stored.state().map_err(fail)?)
            .map_err(|e| format!("its state is not valid: {e}"))?;
        let body = stored.body().map_err(fail)?;
        let message = stored.message().map_err(fail)?;
        let has_blobs = stored.has_blobs().map_err(fail)?;
        let mut text = Vec::with_capacity(body.len() + message.map_or(0, <[u8]>::len));
        for part in body.split_inclusive(|&b| b == MESSAGE_MARK) {
            match part.split_last() {
                Some((&MESSAGE_MARK, head)) => {
                    self.splice(&mut text, head, has_blobs)?;
                    self.splice(&mut text, message.unwrap_or(b"null"), has_blobs)?;
                }
                _ => self.splice(&mut text, part, has_blobs)?,
            }
        }
        serde_json::from_slice::<serde::de::IgnoredAny>(&text)
            .map_err(|e| format!("its text is not JSON: {e}"))?;
        if let Some(m) = message {
            if !body.contains(&MESSAGE_MARK) {
                return Err("its message has no place in its envelope".into());
            }
            let mut one = Vec::with_capacity(m.len());
            self.splice(&mut one, m, has_blobs)?;
            let value: serde_json::Value = serde_json::from_slice(&one)
                .map_err(|e| format!("its message is not JSON: {e}"))?;
            if stored.in_messages().map_err(fail)? {
                let ids = crate::model::message::call_ids(&value).map(|c| (c.to_string(), seq));
                self.calls.extend(ids);
            }
        }
        Ok(())
    }

    /// Appends `text` with each blob mark replaced by an empty string literal, checking the blob.
    fn splice(
        &mut self,
        out: &mut Vec<u8>,
        text: &[u8],
        has_blobs: bool,
    ) -> std::result::Result<(), String> {
        let mut rest = text;
        while let Some(at) = rest.iter().position(|&b| b == BLOB_MARK) {
            if !has_blobs {
                return Err("a blob mark in a record without blobs".into());
            }
            out.extend_from_slice(&rest[..at]);
            let hash = rest
                .get(at + 1..at + 65)
                .filter(|_| rest.get(at + 65) == Some(&BLOB_MARK))
                .and_then(|h| std::str::from_utf8(h).ok())
                .ok_or("a blob reference is damaged")?;
            if let Some(why) = self.blob(hash) {
                return Err(format!("blob {hash}: {why}"));
            }
            out.extend_from_slice(b"\"\"");
            rest = &rest[at + 66..];
        }
        out.extend_from_slice(rest);
        Ok(())
    }

    /// Why blob `hash` is damaged, if it is (checked once).
    fn blob(&mut self, hash: &str) -> Option<String> {
        if let Some(r) = self.blobs.get(hash) {
            return r.clone();
        }
        let r = check_blob(self.db, hash).err();
        self.blobs.insert(hash.to_string(), r.clone());
        r
    }

    /// Records that belong to no session (their session's row is gone).
    pub(crate) fn orphans(&mut self) {
        let n = self.db.query_row(
            "SELECT count(*) FROM records WHERE (id >> ?1) NOT IN (SELECT num FROM sessions)",
            &args![i64::from(SEQ_BITS)],
            |r| r.get::<i64>(0),
        );
        match n {
            Ok(Some(0)) | Ok(None) => {}
            Ok(Some(n)) => self.push(None, None, format!("{n} records belong to no session")),
            Err(e) => self.push(None, None, format!("the records table: {}", e.message())),
        }
    }

    /// Blobs no checked record led to: checked too, reported without a record.
    pub(crate) fn unused_blobs(&mut self) {
        let hashes = self
            .db
            .rows("SELECT hash FROM blobs", &[], |r| r.get::<String>(0));
        match hashes {
            Ok(hashes) => {
                for h in hashes {
                    if !self.blobs.contains_key(&h) {
                        if let Some(why) = self.blob(&h) {
                            self.push(None, None, format!("blob {h}: {why}"));
                        }
                    }
                }
            }
            Err(e) => self.push(
                None,
                None,
                format!("the blobs table cannot be read: {}", e.message()),
            ),
        }
    }
}

/// A blob's checksum, size and SHA-256 (of the string its literal stands for).
fn check_blob(db: &Db, hash: &str) -> std::result::Result<(), String> {
    let row = db
        .query_row(
            "SELECT bytes, literal, crc FROM blobs WHERE hash = ?1",
            &args![hash],
            |r| {
                Ok((
                    r.get::<i64>(0)?,
                    r.get_ref(1)?.as_blob().map(<[u8]>::to_vec),
                    r.get::<Option<i64>>(2)?,
                ))
            },
        )
        .map_err(|e| e.message().to_string())?
        .ok_or_else(|| "missing".to_string())?;
    let (bytes, literal, crc) = row;
    let literal = literal.map_err(|_| "its literal is not a blob".to_string())?;
    if crc != Some(checksum::blob_sum(hash, bytes, &literal) as i64) {
        return Err("checksum mismatch".into());
    }
    let s: String =
        serde_json::from_slice(&literal).map_err(|e| format!("not a string literal: {e}"))?;
    let sum: String = Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if sum != hash {
        return Err("its content does not match its SHA-256".into());
    }
    Ok(())
}
