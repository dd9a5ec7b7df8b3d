//! The append log of a SQLite store: where an append is acknowledged before its SQLite
//! transaction commits (`batch.rs` says why).
//!
//! Each process that writes a store keeps one log file beside it, `<store>-tl-<pid>-<random>`,
//! holding an exclusive lock on it (`flock`) for as long as it is open. A frame is the length of
//! its payload, a CRC-32, its epoch and the payload; it is written with one `pwrite(2)` to the page
//! cache, which a killed process leaves behind. The log is emptied when the records it holds are
//! committed to SQLite: the next frames are written over the old ones (the file keeps its blocks,
//! so a write allocates none), with the next epoch, and the file's first 8 bytes say which epoch
//! was committed last (for readers in other processes, `await_live`). A log whose lock can be
//! taken belongs to a process that is gone: its frames of an epoch not yet committed were
//! acknowledged and may not have reached SQLite, so they are replayed (a replayed record already
//! stored is found by its uuid and left as it is), then the file is removed.
//!
//! A writer kept waiting for SQLite's write lock says so to the one that holds it for a batch by
//! setting the modification time of every log of the store an hour ahead (`raise_hand`); the
//! holder looks at its own log's before it keeps its batch open, and commits each append on its
//! own for a while after it saw one.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::error::{Error, Result};

/// A frame's header: the payload's length, the CRC-32 of the epoch and payload, the epoch (how
/// many times the log was emptied before it was written), little-endian.
const HEADER: usize = 16;
/// The file's own header, before the first frame: the last epoch committed to SQLite (u64), and
/// 8 bytes reserved. A frame of a later epoch is not in SQLite yet.
const HEAD: u64 = 16;
/// How long after a waiter last said so a holder keeps committing each append on its own.
const CONTENDED_FOR: Duration = Duration::from_millis(200);
/// Free space below which appends commit on their own.
const LOW_SPACE: u64 = 64 << 20;

/// This process's log of a store.
pub(crate) struct AppendLog {
    file: File,
    path: PathBuf,
    /// where the next frame goes: the bytes written since the log was last emptied
    pos: u64,
    /// the number of times the log was emptied, plus one: in every frame's header
    epoch: u64,
    /// until when appends commit on their own: a waiter raised its hand
    contended_until: Option<Instant>,
    /// when `contended` last looked at the file
    checked: Option<Instant>,
}

/// A log left by a process that is gone, locked by this one until it is removed.
pub(crate) struct Orphan {
    file: File,
    path: PathBuf,
}

fn prefix(store: &Path) -> String {
    let name = store
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    format!("{name}-tl-")
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    let hint = if e.kind() == std::io::ErrorKind::StorageFull {
        ": free some space and retry"
    } else {
        ""
    };
    Error::StoreIo(format!("{what} {}: {e}{hint}", path.display()))
}

impl AppendLog {
    /// A new, empty log for the store file at `store`, locked by this process.
    pub fn create(store: &Path) -> Result<AppendLog> {
        let random: u32 = rand_u32();
        let mut path = store.as_os_str().to_owned();
        path.push(format!("-tl-{}-{random:08x}", std::process::id()));
        let path = PathBuf::from(path);
        let file = private(OpenOptions::new().read(true).write(true).create_new(true))
            .open(&path)
            .map_err(|e| io("cannot create the append log", &path, e))?;
        file.try_lock().map_err(|e| {
            Error::StoreIo(format!(
                "cannot lock the append log {}: {e}",
                path.display()
            ))
        })?;
        write_at(&file, &[0; HEAD as usize], 0).map_err(|e| io("cannot write", &path, e))?;
        Ok(AppendLog {
            file,
            path,
            pos: HEAD,
            epoch: 1,
            contended_until: None,
            checked: None,
        })
    }

    /// Writes one frame; when it returns, a killed process leaves it behind.
    pub fn write(&mut self, payload: &[u8], buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(&[0; 4]);
        buf.extend_from_slice(&self.epoch.to_le_bytes());
        buf.extend_from_slice(payload);
        let crc = crc32fast::hash(&buf[8..]);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        // Written over what the log held before it was last emptied: the file keeps its blocks,
        // so a write allocates none. (A frame cut short is written over by the next.)
        write_at(&self.file, buf, self.pos)
            .map_err(|e| io("cannot write the append log", &self.path, e))?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    /// Empties the log: everything in it is committed to SQLite. Its frames stay in the file
    /// until written over, of an older epoch than the next, which ends the log for a reader.
    pub fn clear(&mut self) -> Result<()> {
        if self.pos > HEAD {
            // For readers in other processes that wait for it (`await_live`); one that finds it
            // unwritten only waits longer.
            let _ = write_at(&self.file, &self.epoch.to_le_bytes(), 0);
            self.pos = HEAD;
            self.epoch += 1;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.pos == HEAD
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The frames written since the log was last emptied.
    pub fn frames(&self) -> Result<Vec<Vec<u8>>> {
        let mut f = File::open(&self.path).map_err(|e| io("cannot read", &self.path, e))?;
        let mut frames = read_frames(&mut f, &self.path)?;
        frames.truncate(self.frames_in(&frames));
        Ok(frames)
    }

    /// How many of `frames` (read from the start of the file) are this epoch's.
    fn frames_in(&self, frames: &[Vec<u8>]) -> usize {
        let mut at = HEAD;
        let mut n = 0;
        for f in frames {
            if at >= self.pos {
                break;
            }
            at += (HEADER + f.len()) as u64;
            n += 1;
        }
        n
    }

    /// Whether another process waited for the write lock a moment ago (it raised its hand in the
    /// last `CONTENDED_FOR`).
    pub fn contended(&mut self) -> bool {
        let now = Instant::now();
        // Looked at most every millisecond: a waiter raises its hand again every few.
        if self
            .checked
            .is_some_and(|t| now.duration_since(t) < Duration::from_millis(1))
        {
            return self.contended_until.is_some_and(|t| now < t);
        }
        self.checked = Some(now);
        let raised = self
            .file
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > SystemTime::now() + Duration::from_secs(60));
        if raised {
            // Seen: put the time back, so the next raised hand is told from this one.
            let _ = self.file.set_modified(SystemTime::now());
            self.contended_until = Some(now + CONTENDED_FOR);
        }
        self.contended_until.is_some_and(|t| now < t)
    }

    /// Whether the log's file system has room to spare: below `LOW_SPACE` free, appends commit
    /// on their own, so a disk that fills up fails the append that does not fit rather than the
    /// commit of a batch of acknowledged ones.
    pub fn roomy(&self) -> bool {
        free_bytes(&self.file).is_none_or(|free| free >= LOW_SPACE)
    }
}

#[cfg(unix)]
// The fields are u64 on Linux, narrower elsewhere.
#[allow(clippy::unnecessary_cast)]
fn free_bytes(f: &File) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: the descriptor is open for as long as `f`; `st` is written by the call.
    let rc = unsafe { libc::fstatvfs(f.as_raw_fd(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: the call succeeded, so it filled `st`.
    let st = unsafe { st.assume_init() };
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(not(unix))]
fn free_bytes(_: &File) -> Option<u64> {
    None
}

/// Tells the process holding the write lock of `store` that this one waits (see the top).
pub(crate) fn raise_hand(store: &Path) {
    let prefix = prefix(store);
    let ahead = SystemTime::now() + Duration::from_secs(3600);
    for path in logs(store, &prefix) {
        if let Ok(f) = OpenOptions::new().write(true).open(&path) {
            let _ = f.set_modified(ahead);
        }
    }
}

/// The paths of the append logs of `store`.
fn logs(store: &Path, prefix: &str) -> Vec<PathBuf> {
    let dir = match store.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect()
}

impl Drop for AppendLog {
    /// A log with nothing left to replay goes with its store; one that still holds frames (its
    /// last commit failed) stays, for the next process that opens the store.
    fn drop(&mut self) {
        if self.pos == HEAD {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The logs of `store` left by processes that are gone, each locked by this process.
pub(crate) fn orphans(store: &Path) -> Vec<Orphan> {
    let mut found: Vec<Orphan> = logs(store, &prefix(store))
        .into_iter()
        .filter_map(|path| {
            let file = OpenOptions::new().read(true).write(true).open(&path).ok()?;
            file.try_lock().ok()?;
            Some(Orphan { file, path })
        })
        .collect();
    // Each log holds other sessions (a session changes hands only after its holder's log was
    // replayed), so any order will do; by name, for a stable one.
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

impl Orphan {
    pub fn frames(&mut self) -> Result<Vec<Vec<u8>>> {
        read_frames(&mut self.file, &self.path)
    }

    /// Removes the log: its frames are committed.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The frames of a log's latest epoch, from the start of the file up to the first frame that is
/// cut short, damaged (a write the process was killed in the middle of, so never acknowledged)
/// or of an older epoch (left from before the log was last emptied, so committed).
fn read_frames(f: &mut File, path: &Path) -> Result<Vec<Vec<u8>>> {
    let mut all = Vec::new();
    f.read_to_end(&mut all)
        .map_err(|e| io("cannot read", path, e))?;
    let committed = u64::from_le_bytes(
        all.get(..8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_default(),
    );
    let mut frames = Vec::new();
    let mut at = HEAD as usize;
    let mut epoch = None;
    while all.len().saturating_sub(at) >= HEADER {
        let word =
            |i: usize| u32::from_le_bytes(all[at + i..at + i + 4].try_into().unwrap_or_default());
        let (len, crc) = (word(0) as usize, word(4));
        let this = u64::from_le_bytes(all[at + 8..at + 16].try_into().unwrap_or_default());
        let Some(payload) = all.get(at + HEADER..at + HEADER + len) else {
            break;
        };
        if crc32fast::hash(&all[at + 8..at + HEADER + len]) != crc
            || *epoch.get_or_insert(this) != this
            || this <= committed
        {
            break;
        }
        frames.push(payload.to_vec());
        at += HEADER + len;
    }
    Ok(frames)
}

/// Waits, at most `timeout`, until every live writer of `store` but `own` has committed the
/// appends it acknowledged so far (its batch commits within `batch::MAX_AGE`): a process that
/// opens a session sees every append acknowledged before, as when each append committed alone.
pub(crate) fn await_live(store: &Path, own: Option<&Path>, timeout: Duration) {
    let start = Instant::now();
    for path in logs(store, &prefix(store)) {
        if own == Some(path.as_path()) {
            continue;
        }
        let Ok(f) = File::open(&path) else { continue };
        if f.try_lock().is_ok() {
            continue; // a log whose writer is gone: replayed by the next write
        }
        while !caught_up(&f) && start.elapsed() < timeout {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Whether a live log's first frame, if any, is of an epoch already committed.
fn caught_up(f: &File) -> bool {
    let mut head = [0u8; HEAD as usize + HEADER];
    if read_at(f, &mut head, 0).is_err() {
        return true;
    }
    let committed = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
    let first = u64::from_le_bytes(head[24..32].try_into().unwrap_or_default());
    let len = u32::from_le_bytes(head[16..20].try_into().unwrap_or_default());
    len == 0 || first <= committed
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], pos: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.read_exact_at(buf, pos)
}

#[cfg(not(unix))]
fn read_at(mut f: &File, buf: &mut [u8], pos: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(pos))?;
    f.read_exact(buf)
}

#[cfg(unix)]
fn write_at(f: &File, buf: &[u8], pos: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(buf, pos)
}

#[cfg(not(unix))]
fn write_at(mut f: &File, buf: &[u8], pos: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    f.seek(SeekFrom::Start(pos))?;
    f.write_all(buf)
}

fn private(o: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o
}

fn rand_u32() -> u32 {
    // The last bytes of a v7 uuid are random.
    let b = uuid::Uuid::now_v7();
    u32::from_le_bytes(b.as_bytes()[12..].try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_until_one_is_cut_short_or_older() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.db");
        let mut log = AppendLog::create(&store).unwrap();
        let mut buf = Vec::new();
        log.write(b"one", &mut buf).unwrap();
        log.write(b"two", &mut buf).unwrap();
        log.write(b"three", &mut buf).unwrap();
        assert_eq!(
            log.frames().unwrap(),
            vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]
        );
        // Emptied, then written over: what follows the new frames is older, and not read.
        log.clear().unwrap();
        assert!(log.frames().unwrap().is_empty());
        log.write(b"four", &mut buf).unwrap();
        assert_eq!(log.frames().unwrap(), vec![b"four".to_vec()]);
        let mut raw = File::open(&log.path).unwrap();
        assert_eq!(
            read_frames(&mut raw, &log.path).unwrap(),
            vec![b"four".to_vec()],
            "an older frame ends the log"
        );
        // A frame the writer was killed in the middle of ends it too.
        let torn = OpenOptions::new().write(true).open(&log.path).unwrap();
        write_at(&torn, &[9, 0, 0, 0, 1, 2], log.pos).unwrap();
        assert_eq!(
            read_frames(&mut File::open(&log.path).unwrap(), &log.path)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_live_log_is_no_orphan_and_a_dropped_one_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.db");
        let mut log = AppendLog::create(&store).unwrap();
        log.write(b"x", &mut Vec::new()).unwrap();
        assert!(orphans(&store).is_empty(), "locked by its live owner");
        let path = log.path.clone();
        drop(log);
        // Left with a frame in it (as after a failed commit), it is an orphan once unlocked.
        let mut found = orphans(&store);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].frames().unwrap(), vec![b"x".to_vec()]);
        found.pop().unwrap().remove();
        assert!(!path.exists());
        let empty = AppendLog::create(&store).unwrap();
        let path = empty.path.clone();
        drop(empty);
        assert!(!path.exists(), "an empty log goes with its store");
    }

    #[test]
    fn a_raised_hand_is_seen_once_and_for_a_moment() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.db");
        let mut a = AppendLog::create(&store).unwrap();
        a.write(b"x", &mut Vec::new()).unwrap();
        assert!(!a.contended(), "its own writes are no raised hand");
        raise_hand(&store);
        a.checked = None;
        assert!(a.contended());
        a.checked = None;
        assert!(a.contended(), "for CONTENDED_FOR after");
        a.contended_until = Some(Instant::now());
        a.checked = None;
        assert!(!a.contended(), "the hand seen once is not seen again");
    }
}
