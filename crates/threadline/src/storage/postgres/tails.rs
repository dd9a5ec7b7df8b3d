//! Where this process last left each session it wrote on a PostgreSQL store, so an append can
//! skip asking the server for the session's tail: one round trip of the two an append makes.
//!
//! Safe because the session's lease keeps every other process from writing it (`lease.rs`) while
//! this one holds it, and every write of this process that adds records notes here where it left
//! the session (`write_order::touch_records`, in the write's transaction). A writer whose tail is
//! the one noted therefore has the tail the server has. A note made by a transaction that did
//! not commit is taken back; were one ever wrong, the append's INSERT would collide with the
//! record already there, fail with nothing written, and the next append asks the server.
//!
//! Keyed by the store's random id (in its `meta` table), not its URL: two URLs can name one store.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

static NEXT_SEQ: Mutex<Option<HashMap<(i64, i64), u64>>> = Mutex::new(None);

fn notes() -> MutexGuard<'static, Option<HashMap<(i64, i64), u64>>> {
    NEXT_SEQ.lock().unwrap_or_else(|e| e.into_inner())
}

/// Notes that session `num` of store `store` now ends before seq `next`.
pub(crate) fn note(store: i64, num: i64, next: u64) {
    notes()
        .get_or_insert_with(HashMap::new)
        .insert((store, num), next);
}

/// Takes back what was noted of session `num` (its write did not commit).
pub(crate) fn forget(store: i64, num: i64) {
    if let Some(m) = notes().as_mut() {
        m.remove(&(store, num));
    }
}

/// Whether session `num` ends before seq `next` as this process last wrote it.
pub(crate) fn is(store: i64, num: i64, next: u64) -> bool {
    notes()
        .as_ref()
        .and_then(|m| m.get(&(store, num)))
        .is_some_and(|&n| n == next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_per_store_and_session_and_can_be_taken_back() {
        note(-7, 1, 5);
        assert!(is(-7, 1, 5));
        assert!(!is(-7, 1, 4));
        assert!(!is(-8, 1, 5));
        assert!(!is(-7, 2, 5));
        forget(-7, 1);
        assert!(!is(-7, 1, 5));
    }
}
