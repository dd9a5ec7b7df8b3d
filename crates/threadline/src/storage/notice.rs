//! What the store found and handled on its own that a user must still hear of: an append log
//! deleted under its process, a damaged log kept aside, a log that could not be replayed. Each is
//! kept, by store file, until the store takes it (`Store::take_notices`, which the binding turns
//! into telemetry events); `verify()` reports what lasts (damaged logs on disk).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// One thing found: its kind (a stable name) and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub kind: &'static str,
    pub message: String,
}

/// At most this many notices wait per process: a store nobody asks loses the oldest.
const KEPT: usize = 256;

fn queue() -> MutexGuard<'static, Vec<(PathBuf, Notice)>> {
    static Q: OnceLock<Mutex<Vec<(PathBuf, Notice)>>> = OnceLock::new();
    Q.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Keeps a notice about the store whose file is `store` (its canonical path).
pub(crate) fn note(store: &Path, kind: &'static str, message: String) {
    let mut q = queue();
    if q.len() >= KEPT {
        q.remove(0);
    }
    q.push((store.to_path_buf(), Notice { kind, message }));
}

/// Takes the notices about the store whose file is `store`.
pub(crate) fn take(store: &Path) -> Vec<Notice> {
    let mut q = queue();
    let mut out = Vec::new();
    q.retain(|(p, n)| {
        if p == store {
            out.push(n.clone());
            false
        } else {
            true
        }
    });
    out
}
