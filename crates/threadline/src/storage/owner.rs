//! Who holds a session: a process, named by its pid, host and process start time (as stored in
//! the session's row), and whether it still runs. `ownership.rs` claims and releases sessions
//! with it on both engines.

use std::sync::OnceLock;

use crate::error::Error;

/// An owner on another host is considered gone when its heartbeat is older than this.
pub const REMOTE_STALE_MS: i64 = 60_000;

/// Who a process is, as stored in a session row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub pid: i64,
    pub host: String,
    /// process start time (clock ticks since boot on Linux), 0 where unknown
    pub start: i64,
    pub heartbeat_ms: i64,
}

/// This process.
pub fn me() -> &'static Owner {
    static ME: OnceLock<Owner> = OnceLock::new();
    ME.get_or_init(|| {
        let pid = std::process::id() as i64;
        Owner {
            pid,
            host: host_name(),
            start: start_time(pid).unwrap_or(0),
            heartbeat_ms: 0,
        }
    })
}

impl Owner {
    pub(crate) fn is_me(&self) -> bool {
        let m = me();
        self.pid == m.pid && self.host == m.host && self.start == m.start
    }

    /// Whether the owning process still runs.
    pub fn alive(&self, now_ms: i64) -> bool {
        if self.is_me() {
            return true;
        }
        if self.host != me().host {
            return now_ms - self.heartbeat_ms < REMOTE_STALE_MS;
        }
        if !pid_runs(self.pid) {
            return false;
        }
        // The pid may have been reused by a later process.
        match start_time(self.pid) {
            Some(s) if self.start != 0 => s == self.start,
            _ => true,
        }
    }
}

pub(crate) fn locked(session_id: &str, o: &Owner) -> Error {
    Error::SessionLocked(format!(
        "session '{session_id}' is being written by another live process (pid {} on {}); \
         open it from a read-only store to read it, or wait until that process closes it",
        o.pid, o.host
    ))
}

#[cfg(unix)]
fn pid_runs(pid: i64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn pid_runs(_pid: i64) -> bool {
    // Without a portable check, an owner on this host counts as alive; its session is taken over
    // only after it closes it.
    true
}

/// Linux: field 22 of /proc/<pid>/stat (start time in clock ticks since boot).
fn start_time(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn host_name() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it on success.
        let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if r == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            return String::from_utf8_lossy(&buf[..end]).into_owned();
        }
    }
    std::env::var("COMPUTERNAME").unwrap_or_default()
}

/// NOT_FOUND for a session deleted (by this process or another) while a handle was open on it.
pub(crate) fn gone(session_id: &str) -> crate::error::Error {
    crate::error::Error::NotFound(format!("session '{session_id}' was deleted"))
}
