//! The append log of a SQLite store: where an append is acknowledged before its rows are
//! committed to SQLite (`batch.rs` says why).
//!
//! Each process that writes a store keeps one log file beside the store's real file (symlinks
//! resolved, so every path to the store finds the same logs), `<store>-tl-<pid>-<random>`,
//! holding an exclusive lock on it (`flock`) for as long as it is open. A frame is the length of
//! its payload, a CRC-32, its epoch and the payload; every write is a frame followed by an end
//! marker (a frame with no payload), in one `pwrite(2)` to the page cache, which a killed process
//! leaves behind. The log is emptied when the records it holds are committed to SQLite: the next
//! frames are written over the old ones, with the next epoch, and the file's header (the last
//! epoch committed, with its CRC) says which epoch was committed last. A log whose lock can be
//! taken belongs to a process that is gone: its frames of an epoch not yet committed were
//! acknowledged and may not have reached SQLite, so they are replayed (`session/replay.rs`).
//!
//! Damage is told from a write cut short by a kill: a kill cuts a write only at a page boundary
//! (the kernel copies a write into the page cache page by page and stops between pages), and the
//! frames of an epoch are written one after the other, each ending in an end marker. So a valid
//! frame or marker of the epoch after one that does not check out, a header that does not check
//! out, or a log that ends without its end marker elsewhere than at a page boundary is damage:
//! reported (`LogRead::damage`), never read past in silence.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A frame's header: the payload's length, the CRC-32 of the epoch and payload, the epoch (how
/// many times the log was emptied before it was written, plus one), little-endian.
const HEADER: usize = 16;
/// The file's header, before the first frame: the last epoch committed to SQLite (u64), the
/// CRC-32 of those 8 bytes, and 4 bytes reserved. A frame of a later epoch is not in SQLite yet.
const HEAD: u64 = 16;
/// A write cut short by a kill ends at a multiple of this (the page size; larger pages are
/// multiples of it).
const TEAR: usize = 4096;
/// Free space below which appends commit on their own.
const LOW_SPACE: u64 = 64 << 20;
/// The suffix a damaged log is renamed with: kept for inspection, never replayed again.
pub(crate) const DAMAGED: &str = ".damaged";

/// This process's log of a store.
pub(crate) struct AppendLog {
    file: File,
    path: PathBuf,
    /// where the next frame goes: the bytes written since the log was last emptied
    pos: u64,
    /// the number of times the log was emptied, plus one: in every frame's header
    epoch: u64,
    /// the path is no longer this log's (it was deleted under the process): left alone on drop
    disowned: bool,
}

/// What a log holds: the frames of its latest epoch not yet committed, in order.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LogRead {
    pub frames: Vec<Vec<u8>>,
    /// the epoch of `frames` (None when the log holds nothing uncommitted)
    pub epoch: Option<u64>,
    /// why the log is damaged, if it is: frames may be missing from `frames`
    pub damage: Option<String>,
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

fn head(committed: u64) -> [u8; HEAD as usize] {
    let mut h = [0u8; HEAD as usize];
    h[..8].copy_from_slice(&committed.to_le_bytes());
    let crc = crc32fast::hash(&h[..8]);
    h[8..12].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Appends a frame of `payload` (empty: an end marker) of `epoch` to `buf`.
fn frame(buf: &mut Vec<u8>, epoch: u64, payload: &[u8]) {
    let start = buf.len();
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&epoch.to_le_bytes());
    buf.extend_from_slice(payload);
    let crc = crc32fast::hash(&buf[start + 8..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

impl AppendLog {
    /// A new, empty log for the store file at `store` (its canonical path), locked by this
    /// process.
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
        let mut start = head(0).to_vec();
        frame(&mut start, 1, &[]);
        if let Err(e) = write_at(&file, &start, 0) {
            // A full disk: no log is left behind that another process would take for damaged.
            let _ = std::fs::remove_file(&path);
            return Err(io("cannot write", &path, e));
        }
        Ok(AppendLog {
            file,
            path,
            pos: HEAD,
            epoch: 1,
            disowned: false,
        })
    }

    /// Writes one frame; when it returns, a killed process leaves it behind.
    pub fn write(&mut self, payload: &[u8], buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        frame(buf, self.epoch, payload);
        let len = buf.len() as u64;
        frame(buf, self.epoch, &[]);
        // Written over what the log held before it was last emptied: the file keeps its blocks,
        // so a write allocates none. (A frame cut short is written over by the next.)
        if let Err(e) = write_at(&self.file, buf, self.pos) {
            // Cut short (a full disk): the end marker goes back where it was, so the log ends
            // as it did and the part written is not taken for damage. Its block is allocated.
            let mut end = Vec::with_capacity(HEADER);
            frame(&mut end, self.epoch, &[]);
            let _ = write_at(&self.file, &end, self.pos);
            return Err(io("cannot write the append log", &self.path, e));
        }
        self.pos += len;
        Ok(())
    }

    /// Empties the log: everything in it is committed to SQLite. Its frames stay in the file
    /// until written over, of an epoch the header now says is committed.
    pub fn clear(&mut self) -> Result<()> {
        if self.pos > HEAD {
            // For readers in other processes that wait for it (`LiveLog::caught_up`); one that
            // finds it unwritten only waits longer, and a replay of committed frames changes
            // nothing.
            let _ = write_at(&self.file, &head(self.epoch), 0);
            self.pos = HEAD;
            self.epoch += 1;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.pos == HEAD
    }

    /// Lets go of a log deleted under this process: whatever its path names now is not removed.
    pub fn disown(mut self) {
        self.disowned = true;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The frames written since the log was last emptied.
    pub fn frames(&self) -> Result<LogRead> {
        let mut f = File::open(&self.path).map_err(|e| io("cannot read", &self.path, e))?;
        read(&mut f, &self.path)
    }

    /// Whether the file was deleted (or renamed away) under this process: its frames would be
    /// lost with the process, and no other process could find them.
    pub fn unlinked(&self) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            self.file.metadata().is_ok_and(|m| m.nlink() == 0)
        }
        #[cfg(not(unix))]
        {
            !self.path.exists()
        }
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

/// The paths of the append logs of `store` (damaged ones, kept for inspection, aside).
fn logs(store: &Path) -> Vec<PathBuf> {
    let prefix = prefix(store);
    let Ok(entries) = std::fs::read_dir(dir_of(store)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(&prefix) && !name.ends_with(DAMAGED)
        })
        .map(|e| e.path())
        .collect()
}

fn dir_of(store: &Path) -> PathBuf {
    match store.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The logs of `store` kept as damaged (`DAMAGED`), for `verify()`.
pub(crate) fn damaged_logs(store: &Path) -> Vec<PathBuf> {
    let prefix = prefix(store);
    let Ok(entries) = std::fs::read_dir(dir_of(store)) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(&prefix) && name.ends_with(DAMAGED)
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

impl Drop for AppendLog {
    /// A log with nothing left to replay goes with its store; one that still holds frames (its
    /// last commit failed) stays, for the next process that opens the store.
    fn drop(&mut self) {
        if self.pos == HEAD && !self.disowned {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Another process's log of the store: one whose process is gone (its lock could be taken, and
/// is held by this process until the `Orphan` is dropped), or one a live process holds.
pub(crate) enum OtherLog {
    Orphan(Orphan),
    Live(LiveLog),
}

/// A log left by a process that is gone, locked by this one until it is removed or dropped.
pub(crate) struct Orphan {
    file: File,
    path: PathBuf,
}

/// A log a live process holds.
pub(crate) struct LiveLog {
    file: File,
    path: PathBuf,
}

/// The logs of `store` but `own`, each an orphan or a live one.
pub(crate) fn others(store: &Path, own: Option<&Path>) -> Vec<OtherLog> {
    let mut paths = logs(store);
    paths.retain(|p| Some(p.as_path()) != own);
    // Each log holds other sessions (a session changes hands only after its holder's log was
    // replayed), so any order will do; by name, for a stable one.
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let file = OpenOptions::new().read(true).write(true).open(&path).ok()?;
            Some(if file.try_lock().is_ok() {
                OtherLog::Orphan(Orphan { file, path })
            } else {
                OtherLog::Live(LiveLog { file, path })
            })
        })
        .collect()
}

/// The logs of `store` left by processes that are gone, each locked by this process.
pub(crate) fn orphans(store: &Path) -> Vec<Orphan> {
    others(store, None)
        .into_iter()
        .filter_map(|l| match l {
            OtherLog::Orphan(o) => Some(o),
            OtherLog::Live(_) => None,
        })
        .collect()
}

impl Orphan {
    pub fn read(&mut self) -> Result<LogRead> {
        read(&mut self.file, &self.path)
    }

    /// Removes the log: its frames are committed.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// Keeps a damaged log beside the store for inspection, under a name no replay reads again.
    pub fn keep_damaged(self) -> PathBuf {
        let mut to = self.path.as_os_str().to_owned();
        to.push(DAMAGED);
        let to = PathBuf::from(to);
        let _ = std::fs::rename(&self.path, &to);
        to
    }
}

impl LiveLog {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The epoch of the frames its process acknowledged and has not committed yet, if any.
    pub fn pending(&self) -> Option<u64> {
        // Read more than once if the header does not check out: its process may be writing it.
        for _ in 0..3 {
            let mut h = [0u8; HEAD as usize + HEADER];
            if read_at(&self.file, &mut h, 0).is_err() {
                return None;
            }
            let Some(committed) = committed(&h) else {
                continue;
            };
            let first = u64::from_le_bytes(h[24..32].try_into().unwrap_or_default());
            return (first > committed).then_some(first);
        }
        // A header that never checks out: its frames are read (and the damage told) in full.
        Some(u64::MAX)
    }

    /// Whether its process has committed every frame of `epoch`.
    pub fn caught_up(&self, epoch: u64) -> bool {
        let mut h = [0u8; HEAD as usize];
        read_at(&self.file, &mut h, 0).is_ok() && committed(&h).is_some_and(|c| c >= epoch)
    }

    pub fn read(&self) -> Result<LogRead> {
        let mut f = &self.file;
        let mut all = Vec::new();
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(0))
            .and_then(|_| f.read_to_end(&mut all))
            .map_err(|e| io("cannot read", &self.path, e))?;
        let mut r = parse(&all);
        // Its process writes the header as it commits: a header caught half-written is not
        // damage; the frames are read as uncommitted, which a replay takes as they are.
        if r.damage.as_deref() == Some(BAD_HEAD) {
            r.damage = None;
        }
        Ok(r)
    }
}

/// The committed epoch a file header holds, if it checks out.
fn committed(h: &[u8]) -> Option<u64> {
    let epoch = h.get(..8)?;
    let crc = u32::from_le_bytes(h.get(8..12)?.try_into().ok()?);
    (crc32fast::hash(epoch) == crc)
        .then(|| u64::from_le_bytes(epoch.try_into().unwrap_or_default()))
}

fn read(f: &mut File, path: &Path) -> Result<LogRead> {
    let mut all = Vec::new();
    f.read_to_end(&mut all)
        .map_err(|e| io("cannot read", path, e))?;
    Ok(parse(&all))
}

const BAD_HEAD: &str = "its header does not check out";

/// A frame at `at`: its epoch and payload (empty: an end marker), if it checks out.
fn frame_at(all: &[u8], at: usize) -> Option<(u64, &[u8])> {
    let h = all.get(at..at + HEADER)?;
    let len = u32::from_le_bytes(h[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(h[4..8].try_into().ok()?);
    let epoch = u64::from_le_bytes(h[8..16].try_into().ok()?);
    let body = all.get(at + 8..(at + HEADER).checked_add(len)?)?;
    (crc32fast::hash(body) == crc).then(|| (epoch, &body[8..]))
}

/// What a log's bytes hold: the frames of its latest epoch, up to its end marker, if that epoch
/// is not committed; and any damage (see the top).
pub(crate) fn parse(all: &[u8]) -> LogRead {
    if all.len() < HEAD as usize {
        // Made and not yet written (its process was killed at once): nothing in it.
        return LogRead::default();
    }
    let committed_at = committed(all);
    let mut damage = committed_at.is_none().then(|| BAD_HEAD.to_string());
    let committed = committed_at.unwrap_or(0);
    let mut frames = Vec::new();
    let mut epoch = None;
    let mut at = HEAD as usize;
    let ended = loop {
        match frame_at(all, at) {
            Some((e, payload)) if epoch.is_none_or(|x| x == e) => {
                epoch = Some(e);
                if payload.is_empty() {
                    break true;
                }
                frames.push(payload.to_vec());
                at += HEADER + payload.len();
            }
            _ => break false,
        }
    };
    let uncommitted = epoch.is_some_and(|e| e > committed);
    if !ended && damage.is_none() {
        damage = damage_after(all, at, epoch, committed);
    }
    if !uncommitted {
        // Everything in it is committed (or it holds nothing): damage to old frames loses
        // nothing, unless the header is the damage (then what it holds is replayed, which a
        // replay of committed records leaves as it is).
        frames.clear();
        if damage.as_deref() != Some(BAD_HEAD) {
            return LogRead {
                damage: damage.filter(|_| epoch.is_none()),
                ..LogRead::default()
            };
        }
    }
    LogRead {
        epoch: (!frames.is_empty()).then_some(epoch).flatten(),
        frames,
        damage,
    }
}

/// Why the bytes from `at`, where the frames of `epoch` stopped checking out before their end
/// marker, are damage rather than a write cut short by a kill, if they are.
fn damage_after(all: &[u8], at: usize, epoch: Option<u64>, committed: u64) -> Option<String> {
    let ours = |e: u64| epoch.map_or(e > committed, |x| e == x);
    // A frame or marker of the epoch further on: the frames are written one after the other, so
    // something between was lost.
    let further = (at + 1..all.len().saturating_sub(HEADER - 1)).find(|&i| {
        let e = u64::from_le_bytes(all[i + 8..i + 16].try_into().unwrap_or_default());
        ours(e) && frame_at(all, i).is_some()
    });
    if let Some(i) = further {
        return Some(format!(
            "the frame at byte {at} does not check out, and a later one at byte {i} does"
        ));
    }
    // A write of the epoch cut short by a kill: the cut is at a page boundary, or the frame's
    // header was written and the rest of it is older bytes (a cut write over old frames). A frame
    // that runs past the end of a file that does not end at a page boundary was cut otherwise:
    // the file was truncated (or a full disk cut the write, which was then not acknowledged).
    if (at..=at + HEADER).any(|i| i.is_multiple_of(TEAR)) {
        return None;
    }
    let header = all.get(at..at + HEADER);
    let cut_header =
        header.is_some_and(|h| ours(u64::from_le_bytes(h[8..16].try_into().unwrap_or_default())));
    if cut_header {
        let len = header.map_or(0, |h| {
            u32::from_le_bytes(h[..4].try_into().unwrap_or_default())
        });
        let past_end = at + HEADER + len as usize > all.len();
        if !past_end || all.len().is_multiple_of(TEAR) {
            return None;
        }
        return Some(format!(
            "it ends at byte {} inside the frame at byte {at} (cut short)",
            all.len()
        ));
    }
    Some(if at >= all.len() {
        format!("it ends at byte {at} without its end marker (cut short)")
    } else {
        format!("the frame at byte {at} does not check out")
    })
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

    fn log_with(frames: &[&[u8]]) -> (tempfile::TempDir, AppendLog) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = AppendLog::create(&dir.path().join("s.db")).unwrap();
        let mut buf = Vec::new();
        for f in frames {
            log.write(f, &mut buf).unwrap();
        }
        (dir, log)
    }

    fn bytes(log: &AppendLog) -> Vec<u8> {
        std::fs::read(&log.path).unwrap()
    }

    #[test]
    fn frames_come_back_until_the_end_marker_and_not_once_committed() {
        let (_dir, mut log) = log_with(&[b"one", b"two", b"three"]);
        let r = log.frames().unwrap();
        assert_eq!(
            r.frames,
            vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]
        );
        assert_eq!((r.epoch, r.damage), (Some(1), None));
        // Emptied, then written over: what follows the new frames is older, and not read.
        log.clear().unwrap();
        assert_eq!(log.frames().unwrap(), LogRead::default());
        let mut buf = Vec::new();
        log.write(b"four", &mut buf).unwrap();
        let r = log.frames().unwrap();
        assert_eq!(
            (r.frames, r.epoch, r.damage),
            (vec![b"four".to_vec()], Some(2), None)
        );
        // A file made and never written holds nothing; a header without its first end marker is
        // a log cut short (it is made with both in one write).
        assert_eq!(parse(&[]), LogRead::default());
        let cut = parse(&head(0));
        assert!(cut.frames.is_empty() && cut.damage.is_some());
    }

    #[test]
    fn a_write_cut_short_by_a_kill_is_no_damage() {
        let (_dir, log) = log_with(&[b"one", b"two"]);
        let clean = bytes(&log);
        // The next frame's header written over older bytes, its payload not (a write cut short).
        let mut torn = clean[..log.pos as usize].to_vec();
        let mut next = Vec::new();
        frame(&mut next, 1, &[7u8; 100]);
        torn.extend_from_slice(&next[..40]);
        torn.extend_from_slice(&[0xAB; 200]);
        let r = parse(&torn);
        assert_eq!((r.frames.len(), r.damage), (2, None));
        // A long frame cut at a page boundary, its header with the rest of the first page.
        let long = vec![b'x'; 3 * TEAR];
        let mut cut = clean[..log.pos as usize].to_vec();
        let mut next = Vec::new();
        frame(&mut next, 1, &long);
        cut.extend_from_slice(&next);
        cut.truncate(TEAR);
        let r = parse(&cut);
        assert_eq!((r.frames.len(), r.damage), (2, None));
    }

    #[test]
    fn damage_is_told_from_a_torn_write() {
        let (_dir, log) = log_with(&[b"first frame", b"second frame", b"third frame"]);
        let clean = bytes(&log);
        let second = HEAD as usize + HEADER + b"first frame".len();
        // A bit flipped in the second frame: the third still checks out.
        let mut flipped = clean.clone();
        flipped[second + HEADER + 2] ^= 0x10;
        let r = parse(&flipped);
        assert_eq!(r.frames, vec![b"first frame".to_vec()]);
        assert!(r.damage.unwrap().contains(&format!("byte {second}")));
        // The last frame flipped: its end marker still checks out.
        let mut last = clean.clone();
        let third = log.pos as usize - b"third frame".len();
        last[third] ^= 1;
        assert!(parse(&last).damage.is_some());
        // Zeroed from the second frame on, or cut short mid-frame or at a frame's end.
        let mut zeroed = clean.clone();
        zeroed[second..].fill(0);
        assert!(parse(&zeroed).damage.is_some());
        assert!(parse(&clean[..second + 5]).damage.is_some());
        assert!(
            parse(&clean[..second + 23]).damage.is_some(),
            "cut inside a payload"
        );
        assert!(parse(&clean[..log.pos as usize]).damage.is_some());
        // The header zeroed, or the whole log: told, and what it holds is still given.
        let mut head_zero = clean.clone();
        head_zero[..HEAD as usize].fill(0);
        let r = parse(&head_zero);
        assert_eq!((r.frames.len(), r.damage.as_deref()), (3, Some(BAD_HEAD)));
        assert!(parse(&vec![0; clean.len()]).damage.is_some());
    }

    #[test]
    fn a_live_log_is_no_orphan_and_a_dropped_one_is_removed() {
        let (dir, log) = log_with(&[b"x"]);
        let store = dir.path().join("s.db");
        assert!(orphans(&store).is_empty(), "locked by its live owner");
        match others(&store, None).pop() {
            Some(OtherLog::Live(l)) => {
                assert_eq!(l.pending(), Some(1));
                assert!(!l.caught_up(1));
                assert_eq!(l.read().unwrap().frames, vec![b"x".to_vec()]);
            }
            _ => panic!("expected the live log"),
        }
        let path = log.path.clone();
        drop(log);
        // Left with a frame in it (as after a failed commit), it is an orphan once unlocked.
        let mut found = orphans(&store);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].read().unwrap().frames, vec![b"x".to_vec()]);
        found.pop().unwrap().remove();
        assert!(!path.exists());
        let empty = AppendLog::create(&store).unwrap();
        let path = empty.path.clone();
        drop(empty);
        assert!(!path.exists(), "an empty log goes with its store");
    }

    #[test]
    fn a_deleted_log_is_noticed_and_a_damaged_one_kept_aside() {
        let (dir, log) = log_with(&[b"x"]);
        let store = dir.path().join("s.db");
        assert!(!log.unlinked());
        std::fs::remove_file(&log.path).unwrap();
        assert!(log.unlinked());
        let path = log.path.clone();
        std::fs::write(&path, b"garbage that is no log at all").unwrap();
        drop(log);
        let mut found = orphans(&store);
        assert!(found[0].read().unwrap().damage.is_some());
        let kept = found.pop().unwrap().keep_damaged();
        assert!(kept.exists() && !path.exists());
        assert!(
            orphans(&store).is_empty(),
            "a damaged log is not replayed again"
        );
        assert_eq!(damaged_logs(&store), vec![kept]);
    }
}
