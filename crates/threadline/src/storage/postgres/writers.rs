//! One write at a time per session within this process, on PostgreSQL. A session's lease is held
//! by a process (`lease.rs`), so two stores of one process (two threads, each with its own
//! connection) may both write it; without this, their transactions interleave: both append at the
//! same seq, and a claim (which locks the session row first) and an append (which inserts first
//! and updates the row last) can deadlock on the server. On SQLite the process's one connection
//! to the file (`open_file.rs`) does this.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

type Table = HashMap<(i64, i64), Arc<Mutex<()>>>;

fn table() -> MutexGuard<'static, Table> {
    static T: OnceLock<Mutex<Table>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Held while this process writes session `num` of store `store` (its random id).
pub(crate) struct Writing {
    lock: Arc<Mutex<()>>,
    key: (i64, i64),
}

/// Waits until no other thread of this process writes session `num` of store `store`.
pub(crate) fn writing(store: i64, num: i64) -> Writing {
    let key = (store, num);
    let lock = table().entry(key).or_default().clone();
    Writing { lock, key }
}

impl Writing {
    /// Runs `f` while holding the session.
    pub fn hold<T>(&self, f: impl FnOnce() -> T) -> T {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        f()
    }
}

impl Drop for Writing {
    /// The table forgets a session no thread writes or waits for.
    fn drop(&mut self) {
        let mut t = table();
        if Arc::strong_count(&self.lock) == 2 {
            t.remove(&self.key);
        }
    }
}
