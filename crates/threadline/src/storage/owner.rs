//! Session ownership: the process that writes a session holds it (its pid, host and process
//! start time in the session's row, with a heartbeat). A second live process that tries to write
//! gets SESSION_LOCKED; readers never look. An owner that is gone (its pid no longer runs, or runs
//! a different program started later) holds nothing: its session shows in
//! `interrupted_sessions` if it was left active, and the next writer takes it over.

use std::sync::OnceLock;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};

/// A writer refreshes its heartbeat at most this often.
pub const HEARTBEAT_MS: i64 = 10_000;
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

/// The session's owner, if one is recorded.
pub fn read(conn: &Connection, num: i64) -> Result<Option<Owner>> {
    Ok(conn
        .prepare_cached(
            "SELECT owner_pid, owner_host, owner_start, heartbeat_ms FROM sessions WHERE num = ?1 AND owner_pid IS NOT NULL",
        )?
        .query_row([num], |r| {
            Ok(Owner {
                pid: r.get(0)?,
                host: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                start: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                heartbeat_ms: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
            })
        })
        .optional()?)
}

/// Makes this process the session's owner, inside the caller's write transaction. Returns the
/// time of the heartbeat written. SESSION_LOCKED if another live process owns it.
pub fn claim(conn: &Connection, num: i64, session_id: &str, now_ms: i64) -> Result<i64> {
    if let Some(o) = read(conn, num)? {
        if !o.is_me() && o.alive(now_ms) {
            return Err(locked(session_id, &o));
        }
    }
    let m = me();
    conn.prepare_cached(
        "UPDATE sessions SET owner_pid = ?1, owner_host = ?2, owner_start = ?3, heartbeat_ms = ?4 WHERE num = ?5",
    )?
    .execute(params![m.pid, m.host, m.start, now_ms, num])?;
    Ok(now_ms)
}

/// Gives up ownership if this process holds it.
pub fn release(conn: &Connection, num: i64) -> Result<()> {
    let m = me();
    conn.prepare_cached(
        "UPDATE sessions SET owner_pid = NULL, owner_host = NULL, owner_start = NULL, heartbeat_ms = NULL
         WHERE num = ?1 AND owner_pid = ?2 AND owner_host = ?3 AND owner_start = ?4",
    )?
    .execute(params![num, m.pid, m.host, m.start])?;
    Ok(())
}

/// SESSION_LOCKED unless the session is free, ours, or held by a process that is gone.
pub fn check_free(conn: &Connection, num: i64, session_id: &str, now_ms: i64) -> Result<()> {
    match read(conn, num)? {
        Some(o) if !o.is_me() && o.alive(now_ms) => Err(locked(session_id, &o)),
        _ => Ok(()),
    }
}

/// Sessions left active by an owner that is gone.
pub fn interrupted(conn: &Connection, now_ms: i64) -> Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(
        "SELECT num, owner_pid, owner_host, owner_start, heartbeat_ms FROM sessions
         WHERE status = 'active' AND owner_pid IS NOT NULL",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            Owner {
                pid: r.get(1)?,
                host: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                start: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                heartbeat_ms: r.get::<_, Option<i64>>(4)?.unwrap_or(0),
            },
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (num, o) = row?;
        if !o.alive(now_ms) {
            out.push(num);
        }
    }
    Ok(out)
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
