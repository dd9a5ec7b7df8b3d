//! The order in which sessions were last written, store-wide. Clocks tie (two writes in one
//! millisecond); this counter does not: every write to a session (create, append, status change,
//! fork, import) gives it the next number, inside the same transaction, so `listSessions` breaks
//! ties of `updatedAt` in the order the writes were really made.

use rusqlite::Connection;

use crate::error::Result;

/// Marks session `num` as the store's most recently written one. Call inside the write's
/// transaction (the max is read and set under the same write lock).
pub(crate) fn touch(conn: &Connection, num: i64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE sessions SET write_seq = (SELECT coalesce(max(write_seq), 0) + 1 FROM sessions) WHERE num = ?1",
    )?
    .execute([num])?;
    Ok(())
}

/// Like `touch`, after a write that added records: the session's row also notes how many records
/// it has now, so a read can tell a log that lost its last records (damage) from a shorter one.
pub(crate) fn touch_records(conn: &Connection, num: i64, records: u64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE sessions SET write_seq = (SELECT coalesce(max(write_seq), 0) + 1 FROM sessions), records = ?2 WHERE num = ?1",
    )?
    .execute([num, records as i64])?;
    Ok(())
}
