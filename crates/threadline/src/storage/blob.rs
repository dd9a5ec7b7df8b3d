//! Content-addressed storage of long strings (tool output, base64 images and documents, long
//! thinking): each distinct string is stored once by its SHA-256, however many records use it,
//! and spliced back where its mark stands when a record is read.

use std::collections::HashMap;

use crate::storage::db::{args, Db};

use crate::error::{Error, Result};
use crate::storage::checksum;
use crate::storage::encode::{Blob, BLOB_MARK};

/// Stores the blobs of record `record` (each once) and notes that the record uses them.
pub fn put(conn: &Db, record: i64, blobs: &[Blob]) -> Result<()> {
    if !blobs.is_empty() && !conn.is_sqlite() {
        // A blob found stored here must still be there when this write commits: a collection
        // in another process waits for this write (SQLite writers take turns anyway). Held back
        // with the INSERTs (sent with the write's COMMIT): a process stopped between two calls
        // while holding it would hold up a collection, and every write of a blob queued behind.
        conn.execute_later(
            "SELECT pg_advisory_xact_lock_shared(hashtext('threadline blobs'), hashtext(current_schema()))",
            &[],
        )?;
    }
    for b in blobs {
        let bytes = b.literal.len() as i64;
        let crc = checksum::blob_sum(&b.hash, bytes, &b.literal) as i64;
        conn.execute_later(
            "INSERT INTO blobs(hash, bytes, literal, crc) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
            &args![b.hash, bytes, b.literal, crc],
        )?;
        conn.execute_later(
            "INSERT INTO blob_refs(record, hash) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            &args![record, b.hash],
        )?;
    }
    Ok(())
}

/// Removes blobs no record uses any more.
pub fn collect_garbage(conn: &Db) -> Result<()> {
    if !conn.is_sqlite() {
        // PostgreSQL: after the writes that use blobs now in progress (`put`), so that the
        // statement below sees their references.
        // Held back with the DELETE (and sent with the caller's COMMIT, `sessions::delete`): the
        // lock holds up every write of a blob, so it is never held across a round trip.
        conn.execute_later(
            "SELECT pg_advisory_xact_lock(hashtext('threadline blobs'), hashtext(current_schema()))",
            &[],
        )?;
    }
    conn.execute_later(
        "DELETE FROM blobs WHERE NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blobs.hash)",
        &[],
    )
}

/// Reads blobs for one read operation, keeping each one it has fetched.
pub struct Expander<'c> {
    conn: &'c Db,
    cache: HashMap<Vec<u8>, Vec<u8>>,
}

impl<'c> Expander<'c> {
    pub fn new(conn: &'c Db) -> Self {
        Expander {
            conn,
            cache: HashMap::new(),
        }
    }

    /// Appends `text` to `out` with every blob mark replaced by its string.
    pub fn expand_into(&mut self, out: &mut Vec<u8>, text: &[u8]) -> Result<()> {
        let mut rest = text;
        while let Some(at) = rest.iter().position(|&b| b == BLOB_MARK) {
            out.extend_from_slice(&rest[..at]);
            let hash = rest.get(at + 1..at + 65).ok_or_else(damaged)?;
            if rest.get(at + 65) != Some(&BLOB_MARK) {
                return Err(damaged());
            }
            out.extend_from_slice(self.literal(hash)?);
            rest = &rest[at + 66..];
        }
        out.extend_from_slice(rest);
        Ok(())
    }

    fn literal(&mut self, hash: &[u8]) -> Result<&[u8]> {
        if !self.cache.contains_key(hash) {
            let key = std::str::from_utf8(hash).map_err(|_| damaged())?;
            let lit = self.conn.query_row(
                "SELECT bytes, literal, crc FROM blobs WHERE hash = ?1",
                &args![key],
                |r| {
                    let bytes: i64 = r.get(0)?;
                    let literal = r.get_ref(1)?.as_blob().map(<[u8]>::to_vec);
                    let crc: Option<i64> = r.get(2)?;
                    Ok(literal.map(|l| {
                        (crc == Some(checksum::blob_sum(key, bytes, &l) as i64)).then_some(l)
                    }))
                },
            )?;
            let lit = match lit {
                None => return Err(Error::StoreCorrupt(format!("blob {key} is missing"))),
                Some(Err(_)) | Some(Ok(None)) => {
                    return Err(Error::StoreCorrupt(format!(
                        "blob {key} is damaged (checksum mismatch)"
                    )))
                }
                Some(Ok(Some(l))) => l,
            };
            self.cache.insert(hash.to_vec(), lit);
        }
        Ok(&self.cache[hash])
    }
}

fn damaged() -> Error {
    Error::StoreCorrupt("a record's blob reference is damaged".into())
}
