//! What this process knows of the PostgreSQL sessions it writes, so an append can skip asking the
//! server: where each session ends (its tail), and for a session made by this process, every
//! response key its records hold (an assistant message of a new response then needs no lookup of
//! an earlier record of that response). Each saves a round trip.
//!
//! Safe because the session's lease keeps every other process from writing it (`lease.rs`) while
//! this one holds it, and every write of this process that adds records notes here where it left
//! the session (`write_order::touch_records`, in the write's transaction) and the keys it stored
//! (`Writer::insert`). A writer whose tail is the one noted has the tail the server has; a tail
//! found otherwise (another process wrote since) makes the keys unknown. A note made by a
//! transaction that did not commit is taken back; were a tail ever wrong, the append's INSERT
//! would collide with the record already there and fail with nothing written. A key noted by a
//! write that did not commit only costs a lookup.
//!
//! Keyed by the store's random id (in its `meta` table), not its URL: two URLs can name one store.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

/// Beyond this many keys a session's are no longer kept (memory); lookups are made instead.
const MAX_KEYS: usize = 100_000;

#[derive(Default)]
struct Known {
    /// the seq after the session's last record
    next: u64,
    /// the seq after its last record a commit of this process acknowledged: `next` may be a
    /// note of a transaction still open (on another handle) that may yet fail
    acked: u64,
    /// every response key of the session's records, when all are known
    keys: Option<HashSet<String>>,
}

type Notes = HashMap<(i64, i64), Known>;

static NOTES: Mutex<Option<Notes>> = Mutex::new(None);

fn notes() -> MutexGuard<'static, Option<Notes>> {
    NOTES.lock().unwrap_or_else(|e| e.into_inner())
}

fn with<T>(f: impl FnOnce(&mut Notes) -> T) -> T {
    f(notes().get_or_insert_with(HashMap::new))
}

/// Session `num` of store `store` was just made by this process: no records, no keys.
pub(crate) fn created(store: i64, num: i64) {
    with(|m| {
        m.insert(
            (store, num),
            Known {
                next: 0,
                acked: 0,
                keys: Some(HashSet::new()),
            },
        )
    });
}

/// Notes that session `num` of store `store` now ends before seq `next`.
pub(crate) fn note(store: i64, num: i64, next: u64) {
    with(|m| m.entry((store, num)).or_default().next = next);
}

/// Takes back what was noted of session `num` (its write did not commit).
pub(crate) fn forget(store: i64, num: i64) {
    with(|m| m.remove(&(store, num)));
}

/// Forgets every session of store `store`: its connection was made anew, perhaps to another
/// server (a failover's new primary), whose sessions may not end where this process left them.
/// Where each ended as this process was acknowledged is kept to be compared (`lost`) with what
/// that server holds: a standby promoted without synchronous replication may lack the last
/// records the old primary acknowledged.
pub(crate) fn forget_store(store: i64) {
    with(|m| {
        m.retain(|&(s, num), k| {
            if s != store {
                return true;
            }
            unchecked_max(s, num, k.acked);
            false
        })
    });
}

/// The transaction that noted session `num` ending before seq `next` committed: those records
/// are acknowledged. If the store's connection was made anew meanwhile (another handle's), the
/// note is gone and the end goes to be compared straight away.
pub(crate) fn confirm(store: i64, num: i64, next: u64) {
    let kept = with(|m| match m.get_mut(&(store, num)) {
        Some(k) => {
            k.acked = k.acked.max(next);
            true
        }
        None => false,
    });
    if !kept {
        unchecked_max(store, num, next);
    }
}

fn unchecked_max(store: i64, num: i64, end: u64) {
    let mut acked = unchecked();
    let e = acked
        .get_or_insert_with(HashMap::new)
        .entry((store, num))
        .or_default();
    *e = (*e).max(end);
}

/// Where sessions ended as this process was acknowledged, by store and session, when their
/// store's connection was made anew; each is compared once with the server's end.
static UNCHECKED: Mutex<Option<HashMap<(i64, i64), u64>>> = Mutex::new(None);

fn unchecked() -> MutexGuard<'static, Option<HashMap<(i64, i64), u64>>> {
    UNCHECKED.lock().unwrap_or_else(|e| e.into_inner())
}

/// With session `num`'s end as the server has it now (`next`, the seq after its last record):
/// the seq after the last record this process was acknowledged, if the server lacks records up
/// to it (lost in a failover). Checked once after each reconnection.
pub(crate) fn lost(store: i64, num: i64, next: u64) -> Option<u64> {
    let mut acked = unchecked();
    let acked = acked.as_mut().filter(|m| !m.is_empty())?;
    let end = acked.remove(&(store, num))?;
    (end > next).then_some(end)
}

/// Whether session `num` ends before seq `next` as this process last wrote it.
pub(crate) fn is(store: i64, num: i64, next: u64) -> bool {
    with(|m| m.get(&(store, num)).is_some_and(|k| k.next == next))
}

/// At the start of a write, with the session's tail as the server has it: whether the session's
/// keys are all known. A tail other than the one noted means another process wrote: its keys
/// are not known any more.
pub(crate) fn keys_hold(store: i64, num: i64, next: u64) -> bool {
    with(|m| match m.get_mut(&(store, num)) {
        Some(k) if k.next == next => k.keys.is_some(),
        Some(k) => {
            k.keys = None;
            false
        }
        None => false,
    })
}

/// Whether no record of session `num` holds response key `key`, as far as is known (false when
/// the keys are not known).
pub(crate) fn key_unseen(store: i64, num: i64, key: &str) -> bool {
    with(|m| {
        m.get(&(store, num))
            .and_then(|k| k.keys.as_ref())
            .is_some_and(|keys| !keys.contains(key))
    })
}

/// Notes that a record of session `num` holds response key `key`.
pub(crate) fn note_key(store: i64, num: i64, key: &str) {
    with(|m| {
        let Some(k) = m.get_mut(&(store, num)) else {
            return;
        };
        if let Some(keys) = k.keys.as_mut() {
            if keys.len() >= MAX_KEYS {
                k.keys = None;
            } else {
                keys.insert(key.to_string());
            }
        }
    });
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

    #[test]
    fn keys_are_known_for_a_session_made_here_until_another_process_writes_it() {
        created(-9, 1);
        assert!(keys_hold(-9, 1, 0));
        assert!(key_unseen(-9, 1, "msg_a"));
        note_key(-9, 1, "msg_a");
        note(-9, 1, 1);
        assert!(keys_hold(-9, 1, 1));
        assert!(!key_unseen(-9, 1, "msg_a"));
        assert!(key_unseen(-9, 1, "msg_b"));
        // The server's tail is further on: someone else wrote. The keys are unknown from then on.
        assert!(!keys_hold(-9, 1, 3));
        assert!(!key_unseen(-9, 1, "msg_b"));
        note(-9, 1, 4);
        assert!(!keys_hold(-9, 1, 4));
        // A session not made here: its keys were never known.
        note(-9, 2, 10);
        assert!(!keys_hold(-9, 2, 10));
        assert!(!key_unseen(-9, 2, "msg_a"));
    }

    #[test]
    fn a_tail_known_before_a_reconnection_is_compared_once_with_the_servers() {
        for (store, num, next) in [(-11, 1, 5), (-11, 2, 3), (-12, 1, 9)] {
            note(store, num, next);
            confirm(store, num, next);
        }
        forget_store(-11);
        assert!(!is(-11, 1, 5));
        assert!(is(-12, 1, 9));
        // The server holds fewer: the seq after the last acknowledged record, once.
        assert_eq!(lost(-11, 1, 3), Some(5));
        assert_eq!(lost(-11, 1, 3), None);
        // As many or more (another process wrote since): nothing lost.
        assert_eq!(lost(-11, 2, 4), None);
        assert_eq!(lost(-12, 1, 0), None);
    }

    #[test]
    fn only_what_a_commit_acknowledged_is_compared_after_a_reconnection() {
        // committed up to 2, then a transaction noted 6 and is still open when another
        // handle's connection is made anew; it then fails: nothing past 2 was acknowledged
        note(-13, 1, 2);
        confirm(-13, 1, 2);
        note(-13, 1, 6);
        forget_store(-13);
        assert_eq!(lost(-13, 1, 2), None);
        // a transaction that commits after the reconnection took its note: compared too
        note(-14, 1, 4);
        forget_store(-14);
        confirm(-14, 1, 4);
        assert_eq!(lost(-14, 1, 1), Some(4));
    }
}
