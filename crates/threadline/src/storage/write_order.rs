//! The order in which sessions were last written, store-wide. Clocks tie (two writes in one
//! millisecond); this counter does not: every write to a session (create, append, status change,
//! fork, import) gives it the next number, inside the same transaction, so `listSessions` breaks
//! ties of `updatedAt` in the order the writes were really made.

use crate::storage::batch::Touch;
use crate::storage::db::{args, Db};

use crate::error::Result;

/// Marks session `num` as the store's most recently written one. Call inside the write's
/// transaction (the max is read and set under the same write lock).
pub(crate) fn touch(conn: &Db, num: i64) -> Result<()> {
    conn.execute_later(
        conn.pick(
            "UPDATE sessions SET write_seq = (SELECT coalesce(max(write_seq), 0) + 1 FROM sessions) WHERE num = ?1",
            // Writers of other sessions run at once here: a sequence orders them. The NOTIFY,
            // sent at the commit, tells live watches (`postgres/listen.rs`) of the change; only
            // while one is registered (notifying commits are serialized server-wide).
            "WITH u AS (UPDATE sessions SET write_seq = nextval('write_seq') WHERE num = ?1 RETURNING records) \
             SELECT pg_notify('threadline', current_schema() || ' ' || ?1::bigint::text || ' ' || u.records::text) FROM u \
             WHERE EXISTS (SELECT 1 FROM listeners)",
        ),
        &args![num],
    )
}

/// Like `touch`, after a write that added records: the session's row also notes how many records
/// it has now, so a read can tell a log that lost its last records (damage) from a shorter one.
/// Inside a batch of appends (`batch.rs`) the row is updated once, when the batch commits.
pub(crate) fn touch_records(conn: &Db, num: i64, records: u64) -> Result<()> {
    conn.note_tail(num, records);
    let deferred = Touch {
        sql: TOUCH_RECORDS_SQLITE,
        num,
        records,
    };
    if conn.defer_touch(deferred) {
        return Ok(());
    }
    conn.execute_later(
        conn.pick(
            TOUCH_RECORDS_SQLITE,
            // PostgreSQL: another process may have deleted the session since this write began
            // (each statement sees the store as it is then); the records it added would belong
            // to no session. No row updated divides by zero: the transaction fails, NOT_FOUND
            // (postgres/error.rs), sent with the COMMIT as before (one round trip). The NOTIFY,
            // sent at the commit (never if it fails), wakes live watches (`postgres/listen.rs`),
            // only while one is registered.
            "WITH u AS (UPDATE sessions SET write_seq = nextval('write_seq'), records = ?2 WHERE num = ?1 RETURNING 1) \
             SELECT 1 / count(*), CASE WHEN EXISTS (SELECT 1 FROM listeners) \
             THEN pg_notify('threadline', current_schema() || ' ' || ?1::bigint::text || ' ' || ?2::bigint::text) END FROM u",
        ),
        &args![num, records as i64],
    )
}

/// `touch_records`'s statement on SQLite (also run by a batch's commit).
const TOUCH_RECORDS_SQLITE: &str = "UPDATE sessions SET write_seq = (SELECT coalesce(max(write_seq), 0) + 1 FROM sessions), records = ?2 WHERE num = ?1";
