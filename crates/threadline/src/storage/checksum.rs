//! Checksums of stored rows, so damage is detected, never returned.
//!
//! Every record row carries two CRC-32s, written in the same statement as the record, covering
//! every column but `written_ms` (each value with its SQLite type and length, so a value that
//! changes type or moves between columns is damage too):
//! - `crc`: the id (so the record's session and seq), `msg_index`, `has_blobs`, the envelope body
//!   and the message: everything a bulk read (`messages`, `envelopes`) returns or decides by;
//! - `meta_crc`: the id again, the indexed copies of envelope fields (uuid, type, provider, ...),
//!   the token columns and the running state.
//!
//! Bulk reads check `crc` (reading six columns a row, not twenty); every read that uses the other
//! columns (opening a session, turns, the context view, lookups by uuid) checks both. A blob row
//! carries its own `crc` over its hash, size and literal, checked whenever the literal is spliced
//! into a record; `verify` also checks a blob's content against its SHA-256. Tool-call journal
//! rows carry one too (journal.rs).
//!
//! Why CRC-32: it finds every change of up to 32 consecutive bits (one changed byte, a flipped
//! bit, a `"` turned into another character) with certainty, and any other damage with odds of
//! 2^-32 of a miss; it runs at tens of GB/s (crc32fast, SIMD), so checking costs little next to
//! reading. It is no defence against someone who edits the file on purpose: they can recompute
//! it (a keyed MAC would be needed for that).

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use crate::storage::db::{args, Db, Row};

use crate::error::{Error, Result};

/// Positions in `record_columns!()` (the first `CONTENT` are `content_columns!()`).
pub(crate) mod col {
    pub const ID: usize = 0;
    pub const MSG_INDEX: usize = 1;
    pub const HAS_BLOBS: usize = 2;
    pub const BODY: usize = 3;
    pub const MESSAGE: usize = 4;
    pub const CRC: usize = 5;
    /// columns of `content_columns!()`
    pub const CONTENT: usize = 6;
    pub const UUID: usize = 6;
    pub const PARENT: usize = 7;
    pub const TYPE: usize = 8;
    pub const PROVIDER: usize = 10;
    pub const TURN_START: usize = 12;
    pub const INPUT_TOKENS: usize = 14;
    pub const STATE: usize = 18;
    pub const META_CRC: usize = 19;
    pub const WRITTEN_MS: usize = 20;
    /// every column but `written_ms`
    pub const ALL: usize = 20;
}

/// The two checksums of a record's values, given in the order of `record_columns!()` without
/// `written_ms` (the checksum slots are skipped).
pub(crate) fn record_sums(v: &[ValueRef<'_>; col::ALL]) -> (u32, u32) {
    (content_sum(v), meta_sum(v))
}

fn content_sum(v: &[ValueRef<'_>]) -> u32 {
    sum(&v[..col::CRC])
}

fn meta_sum(v: &[ValueRef<'_>]) -> u32 {
    let mut all = [ValueRef::Null; col::META_CRC - col::UUID + 1];
    all[0] = v[col::ID];
    all[1..].copy_from_slice(&v[col::UUID..col::META_CRC]);
    sum(&all)
}

/// The checksum of a row's values: each value's type tag, then its length for text and blobs,
/// then its bytes (integers as 8 little-endian bytes).
pub(crate) fn sum(values: &[ValueRef<'_>]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    // Short values are gathered and hashed in one call; long ones are hashed in place.
    let mut buf = [0u8; 512];
    let mut n = 0;
    for v in values {
        let (tag, head, bytes): (u8, [u8; 8], &[u8]) = match *v {
            ValueRef::Null => (0, [0; 8], &[]),
            ValueRef::Integer(i) => (1, i.to_le_bytes(), &[]),
            ValueRef::Real(f) => (2, f.to_bits().to_le_bytes(), &[]),
            ValueRef::Text(t) => (3, (t.len() as u64).to_le_bytes(), t),
            ValueRef::Blob(b) => (4, (b.len() as u64).to_le_bytes(), b),
        };
        if n + 9 + bytes.len().min(256) > buf.len() {
            h.update(&buf[..n]);
            n = 0;
        }
        buf[n] = tag;
        buf[n + 1..n + 9].copy_from_slice(&head);
        n += 9;
        if bytes.len() <= 256 {
            buf[n..n + bytes.len()].copy_from_slice(bytes);
            n += bytes.len();
        } else {
            h.update(&buf[..n]);
            n = 0;
            h.update(bytes);
        }
    }
    h.update(&buf[..n]);
    h.finalize()
}

/// A record row whose checksums matched: its values are the ones written. `content`, `meta`:
/// which of its two checksums was checked (and so which columns may be used).
pub(crate) struct Stored<'r> {
    v: [ValueRef<'r>; col::ALL],
    content: bool,
    meta: bool,
}

impl<'r> Stored<'r> {
    /// Reads a row selected with `content_columns!()` (or `record_columns!()`) and checks `crc`.
    /// The error is the reason, for the caller to name the record.
    pub fn check_content(row: &Row<'r>) -> std::result::Result<Stored<'r>, String> {
        let mut v = [ValueRef::Null; col::ALL];
        for (i, slot) in v.iter_mut().enumerate().take(col::CONTENT) {
            *slot = row.get_ref(i).map_err(|e| e.to_string())?;
        }
        compare(v[col::CRC], content_sum(&v), "")?;
        Ok(Stored {
            v,
            content: true,
            meta: false,
        })
    }

    /// Reads a row selected with `meta_columns!()` and checks `meta_crc`.
    pub fn check_meta(row: &Row<'r>) -> std::result::Result<Stored<'r>, String> {
        let mut v = [ValueRef::Null; col::ALL];
        v[col::ID] = row.get_ref(col::ID).map_err(|e| e.to_string())?;
        for (i, slot) in v.iter_mut().enumerate().skip(col::CONTENT) {
            *slot = row.get_ref(i).map_err(|e| e.to_string())?;
        }
        compare(v[col::META_CRC], meta_sum(&v), " of its other columns")?;
        Ok(Stored {
            v,
            content: false,
            meta: true,
        })
    }

    /// Reads a row selected with `record_columns!()` and checks both checksums.
    pub fn check(row: &Row<'r>) -> std::result::Result<Stored<'r>, String> {
        let mut v = [ValueRef::Null; col::ALL];
        for (i, slot) in v.iter_mut().enumerate() {
            *slot = row.get_ref(i).map_err(|e| e.to_string())?;
        }
        compare(v[col::CRC], content_sum(&v), "")?;
        compare(v[col::META_CRC], meta_sum(&v), " of its other columns")?;
        Ok(Stored {
            v,
            content: true,
            meta: true,
        })
    }

    pub fn id(&self) -> i64 {
        match self.v[col::ID] {
            ValueRef::Integer(i) => i,
            _ => -1,
        }
    }

    fn value(&self, i: usize) -> Result<ValueRef<'r>> {
        let checked = if i == col::ID {
            true
        } else if i < col::CONTENT {
            self.content
        } else {
            self.meta
        };
        if !checked {
            return Err(Error::StoreCorrupt(
                "a column was read whose checksum was not checked".into(),
            ));
        }
        Ok(self.v[i])
    }

    pub fn int(&self, i: usize) -> Result<Option<i64>> {
        match self.value(i)? {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(x) => Ok(Some(x)),
            _ => Err(mistyped()),
        }
    }

    pub fn bytes(&self, i: usize) -> Result<Option<&'r [u8]>> {
        match self.value(i)? {
            ValueRef::Null => Ok(None),
            ValueRef::Text(b) | ValueRef::Blob(b) => Ok(Some(b)),
            _ => Err(mistyped()),
        }
    }

    pub fn str(&self, i: usize) -> Result<Option<&'r str>> {
        self.bytes(i)?
            .map(|b| std::str::from_utf8(b).map_err(|_| mistyped()))
            .transpose()
    }

    pub fn has_blobs(&self) -> Result<bool> {
        Ok(self.int(col::HAS_BLOBS)?.unwrap_or(0) != 0)
    }

    pub fn in_messages(&self) -> Result<bool> {
        Ok(self.int(col::MSG_INDEX)?.is_some())
    }

    pub fn body(&self) -> Result<&'r [u8]> {
        self.bytes(col::BODY)?.ok_or_else(mistyped)
    }

    pub fn message(&self) -> Result<Option<&'r [u8]>> {
        self.bytes(col::MESSAGE)
    }

    pub fn state(&self) -> Result<&'r str> {
        self.str(col::STATE)?.ok_or_else(mistyped)
    }
}

/// Compares a stored checksum with the one computed.
fn compare(stored: ValueRef<'_>, computed: u32, what: &str) -> std::result::Result<(), String> {
    match stored {
        ValueRef::Integer(c) if c == computed as i64 => Ok(()),
        ValueRef::Integer(c) => Err(format!(
            "checksum mismatch{what} (stored {c:#x}, computed {computed:#x})"
        )),
        ValueRef::Null => Err(format!("its checksum{what} is missing")),
        _ => Err(format!("its checksum{what} is not an integer")),
    }
}

/// A checked row whose values are not what the writer gives (a checksum collision).
fn mistyped() -> Error {
    Error::StoreCorrupt("a record's columns do not have the types written".into())
}

/// STORE_CORRUPT naming the record: its session's id and its seq. A read made of several
/// statements (each statement of a PostgreSQL read, a search's ranking and its hits) sees the
/// store as it is then: a session deleted by another process in the middle of the read is
/// NOT_FOUND, not damage.
pub(crate) fn damaged(conn: &Db, num: i64, seq: u64, reason: &str) -> Error {
    let id = conn
        .query_row("SELECT id FROM sessions WHERE num = ?1", &args![num], |r| {
            r.get::<String>(0)
        })
        .ok();
    if matches!(id, Some(None)) {
        return Error::NotFound(format!("session '#{num}' was deleted while it was read"));
    }
    Error::StoreCorrupt(format!(
        "record seq {seq} of session '{}' is damaged: {reason}",
        id.flatten().unwrap_or_else(|| format!("#{num}"))
    ))
}

/// A session's id for an error message (its number if even that cannot be read).
pub(crate) fn session_id(conn: &Db, num: i64) -> String {
    conn.query_row("SELECT id FROM sessions WHERE num = ?1", &args![num], |r| {
        r.get::<String>(0)
    })
    .ok()
    .flatten()
    .unwrap_or_else(|| format!("#{num}"))
}

/// The checksum of a blob row.
pub(crate) fn blob_sum(hash: &str, bytes: i64, literal: &[u8]) -> u32 {
    sum(&[
        ValueRef::Text(hash.as_bytes()),
        ValueRef::Integer(bytes),
        ValueRef::Blob(literal),
    ])
}

/// Computes the checksums of every record and blob of a store that had none (the migration to
/// schema version 4). Runs inside the migration's transaction.
pub(crate) fn fill(conn: &Connection) -> Result<()> {
    let mut sums: Vec<(i64, u32, u32)> = Vec::new();
    {
        let mut stmt = conn.prepare(concat!("SELECT ", record_columns!(), " FROM records"))?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let mut v = [ValueRef::Null; col::ALL];
            for (i, slot) in v.iter_mut().enumerate() {
                *slot = row.get_ref(i)?;
            }
            let (c, m) = record_sums(&v);
            sums.push((row.get(col::ID)?, c, m));
        }
    }
    let mut update = conn.prepare("UPDATE records SET crc = ?1, meta_crc = ?2 WHERE id = ?3")?;
    for (id, c, m) in sums {
        update.execute([c as i64, m as i64, id])?;
    }
    let mut sums: Vec<(String, u32)> = Vec::new();
    {
        let mut stmt = conn.prepare("SELECT hash, bytes, literal FROM blobs")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let hash: String = row.get(0)?;
            let bytes: i64 = row.get(1)?;
            let literal = row
                .get_ref(2)?
                .as_blob()
                .map_err(|e| Error::StoreCorrupt(e.to_string()))?;
            let crc = blob_sum(&hash, bytes, literal);
            sums.push((hash, crc));
        }
    }
    let mut update = conn.prepare("UPDATE blobs SET crc = ?1 WHERE hash = ?2")?;
    for (hash, crc) in sums {
        update.execute(rusqlite::params![crc as i64, hash])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_value_type_or_boundary_changes_the_sum() {
        let base = [
            ValueRef::Integer(7),
            ValueRef::Text(b"ab"),
            ValueRef::Blob(b"c"),
        ];
        let s = sum(&base);
        assert_ne!(
            s,
            sum(&[
                ValueRef::Integer(7),
                ValueRef::Blob(b"ab"),
                ValueRef::Blob(b"c")
            ])
        );
        assert_ne!(
            s,
            sum(&[
                ValueRef::Integer(7),
                ValueRef::Text(b"a"),
                ValueRef::Blob(b"bc")
            ])
        );
        assert_ne!(
            s,
            sum(&[
                ValueRef::Integer(8),
                ValueRef::Text(b"ab"),
                ValueRef::Blob(b"c")
            ])
        );
        assert_ne!(
            s,
            sum(&[ValueRef::Null, ValueRef::Text(b"ab"), ValueRef::Blob(b"c")])
        );
        // Long values are hashed in place: the same bytes give the same sum however they fall.
        let long = vec![b'x'; 1000];
        let mut joined = vec![3u8];
        joined.extend_from_slice(&(1000u64).to_le_bytes());
        joined.extend_from_slice(&long);
        assert_eq!(sum(&[ValueRef::Text(&long)]), crc32fast::hash(&joined));
    }

    #[test]
    fn every_single_byte_change_is_detected() {
        let body =
            br#"{"type":"user","uuid":"u","message":{"role":"user","content":"hi \"there\""}}"#;
        let s = sum(&[ValueRef::Integer(1), ValueRef::Blob(body)]);
        for i in 0..body.len() {
            for x in [1u8, 0x20, 0x80, 0xff] {
                let mut d = body.to_vec();
                d[i] ^= x;
                assert_ne!(s, sum(&[ValueRef::Integer(1), ValueRef::Blob(&d)]));
            }
        }
    }
}
