//! The files an import reads: one file, or every file of the format under a folder, in path
//! order (so a Claude Code session's file comes before its subagents' files).
//!
//! Only regular files are read. A link is followed only to a regular file inside the folder
//! given; links to folders are not followed at all (a link to `/` would walk the filesystem, a
//! link to a folder inside would import its files twice). Anything else the walk meets under a
//! name the format reads (a FIFO, a socket, a device, a link to one, a dangling link, a link
//! loop, a link out of the folder, a file it cannot read or one over [`MAX_FILE_BYTES`]) is
//! reported as skipped with its reason, and the rest imports. Side files a reader opens (a Claude
//! Code subagent's `.meta.json`, fspec's messages file and blobs) go through the same checks.

use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::{Format, SkippedLine};
use crate::error::{Error, Result};

/// The largest file an import reads: real Claude Code session files reach hundreds of MB, and a
/// file is held in memory while its sessions are written.
pub(crate) const MAX_FILE_BYTES: u64 = 4 << 30;
pub(crate) const MAX_FILE_SHOWN: &str = "4 GiB";

pub(crate) struct Found {
    /// where the walk found it (a link's own path: its name says which session it is)
    pub path: PathBuf,
    pub bytes: u64,
    /// what is opened: the path, or a link's canonical target
    target: PathBuf,
    /// the file the checks looked at (device, inode): the one opened must be it, so a file
    /// swapped for a FIFO or a link after the walk is not read
    id: (u64, u64),
    /// the path the import was given, not found by a walk: a failure to read it is an error
    pub explicit: bool,
}

impl Found {
    /// A file by its name alone, for readers' unit tests (never opened).
    #[cfg(test)]
    pub fn named(path: &Path) -> Found {
        Found {
            path: path.to_path_buf(),
            bytes: 0,
            target: path.to_path_buf(),
            id: (0, 0),
            explicit: false,
        }
    }
}

/// The files to read, the entries skipped on the way, and the folders links must stay in.
pub(crate) struct Walk {
    pub files: Vec<Found>,
    pub skipped: Vec<SkippedLine>,
    /// the folder given (canonical): a link the walk finds must lead into it
    root: PathBuf,
    /// the folder a side file a reader opens must be in (see [`side_root`])
    pub side_root: PathBuf,
}

pub(crate) fn find(format: Format, path: &Path) -> Result<Walk> {
    // The path given is followed even when it is a link: the user named it.
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, &e))?;
    let root = std::fs::canonicalize(path).map_err(|e| io_error(path, &e))?;
    if meta.is_file() {
        let found = Found {
            path: path.to_path_buf(),
            bytes: meta.len(),
            target: root.clone(),
            id: file_id(&meta),
            explicit: true,
        };
        // Side files stay beside it, in its folder.
        let folder = root.parent().unwrap_or(&root).to_path_buf();
        return Ok(Walk {
            files: vec![found],
            skipped: Vec::new(),
            root: folder.clone(),
            side_root: side_root(format, folder),
        });
    }
    if !meta.is_dir() {
        return Err(Error::InvalidInput(format!(
            "source.path: '{}' is {}, not a file or folder",
            path.display(),
            kind(&meta)
        )));
    }
    let mut walk = Walk {
        files: Vec::new(),
        skipped: Vec::new(),
        side_root: side_root(format, root.clone()),
        root,
    };
    let entries = std::fs::read_dir(path).map_err(|e| io_error(path, &e))?;
    walk_entries(format, path, entries, &mut walk);
    walk.files
        .sort_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
    walk.skipped.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(walk)
}

/// The folder a side file must be in: the one given (a file's own), or for fspec's `sessions`
/// folder (or a manifest in it) the data directory above it, which holds the messages file and
/// the blobs.
fn side_root(format: Format, folder: PathBuf) -> PathBuf {
    match folder.parent() {
        Some(up) if format == Format::Fspec && folder.file_name() == Some("sessions".as_ref()) => {
            up.to_path_buf()
        }
        _ => folder,
    }
}

fn walk_dir(format: Format, dir: &Path, walk: &mut Walk) {
    match std::fs::read_dir(dir) {
        Ok(entries) => walk_entries(format, dir, entries, walk),
        Err(e) => skip(walk, dir, format!("cannot read this folder: {e}")),
    }
}

fn walk_entries(format: Format, dir: &Path, entries: std::fs::ReadDir, walk: &mut Walk) {
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                skip(walk, dir, format!("cannot read this folder: {e}"));
                return;
            }
        };
        let path = entry.path();
        // the entry itself, not what a link points to
        let ty = match entry.file_type() {
            Ok(t) => t,
            Err(e) => {
                if wanted(format, &path) {
                    skip(walk, &path, format!("cannot read: {e}"));
                }
                continue;
            }
        };
        if ty.is_dir() {
            walk_dir(format, &path, walk);
        } else if ty.is_symlink() {
            // A link to a folder is reported whatever its name (it might hold session files);
            // any other link only under a name the format reads.
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => skip(
                    walk,
                    &path,
                    "a link to a folder: links to folders are not followed".into(),
                ),
                _ if !wanted(format, &path) => {}
                _ => match check(&path, &walk.root) {
                    Ok(found) => walk.files.push(found),
                    Err(reason) => skip(walk, &path, reason),
                },
            }
        } else if wanted(format, &path) {
            match check(&path, &walk.root) {
                Ok(found) => walk.files.push(found),
                Err(reason) => skip(walk, &path, reason),
            }
        }
    }
}

fn skip(walk: &mut Walk, path: &Path, reason: String) {
    walk.skipped.push(SkippedLine {
        file: super::display(path),
        line: None,
        reason,
    });
}

/// A file the import may read: a regular file, or a link to a regular file inside `root`, no
/// larger than [`MAX_FILE_BYTES`]. Else why not, for the report.
pub(crate) fn check(path: &Path, root: &Path) -> std::result::Result<Found, String> {
    let own = std::fs::symlink_metadata(path).map_err(|e| cannot_read(&e))?;
    let (target, meta) = if own.file_type().is_symlink() {
        let target = std::fs::canonicalize(path).map_err(|e| broken_link(path, &e))?;
        let meta = std::fs::metadata(&target).map_err(|e| cannot_read(&e))?;
        let shown = target.display();
        if meta.is_dir() {
            return Err("a link to a folder: links to folders are not followed".into());
        }
        if !meta.is_file() {
            return Err(format!(
                "a link to '{shown}', {}, not a regular file: not read",
                kind(&meta)
            ));
        }
        if !target.starts_with(root) {
            return Err(format!(
                "a link to '{shown}', outside the folder imported: not followed"
            ));
        }
        (target, meta)
    } else if own.is_file() {
        (path.to_path_buf(), own)
    } else {
        return Err(format!("not a regular file ({}): not read", kind(&own)));
    };
    too_large(meta.len())?;
    Ok(Found {
        path: path.to_path_buf(),
        bytes: meta.len(),
        target,
        id: file_id(&meta),
        explicit: false,
    })
}

/// Opens a found file to read, checked again on the open file: the walk's checks and the open
/// are not one step, and a FIFO opened for reading would block until a writer came.
pub(crate) fn open(f: &Found) -> std::result::Result<(File, u64), String> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO returns at once; O_NOFOLLOW: a link put in its place fails
        o.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let file = o.open(&f.target).map_err(|e| {
        // the target was a regular file (a link's canonical target has no link in it)
        if is_loop(&e) {
            "replaced by a link while the import ran: not read".to_string()
        } else {
            cannot_read(&e)
        }
    })?;
    let meta = file.metadata().map_err(|e| cannot_read(&e))?;
    if !meta.is_file() {
        return Err(format!("not a regular file ({}): not read", kind(&meta)));
    }
    if file_id(&meta) != f.id {
        return Err("replaced by another file while the import ran: not read".into());
    }
    too_large(meta.len())?;
    Ok((file, meta.len()))
}

/// The file's bytes, read whole (an fspec blob), only as many as it held when opened: a file
/// that keeps growing is not read without end.
pub(crate) fn read_bytes(f: &Found) -> std::result::Result<Vec<u8>, String> {
    let (file, len) = open(f)?;
    let mut bytes = Vec::new();
    file.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| cannot_read(&e))?;
    Ok(bytes)
}

/// The text of a JSON file read whole (an fspec manifest, a subagent's `.meta.json`), a UTF-8
/// BOM left out; bytes that are not UTF-8 become U+FFFD.
pub(crate) fn read_text(f: &Found) -> std::result::Result<String, String> {
    let bytes = read_bytes(f)?;
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    Ok(String::from_utf8_lossy(text).into_owned())
}

fn too_large(len: u64) -> std::result::Result<(), String> {
    if len > MAX_FILE_BYTES {
        return Err(format!(
            "{len} bytes, larger than {MAX_FILE_SHOWN} (the most an import reads from one file): not read"
        ));
    }
    Ok(())
}

fn broken_link(path: &Path, e: &std::io::Error) -> String {
    if is_loop(e) {
        return "a link loop: not followed".into();
    }
    if e.kind() == std::io::ErrorKind::NotFound {
        let to = std::fs::read_link(path)
            .map(|t| format!(" ('{}' does not exist)", t.display()))
            .unwrap_or_default();
        return format!("a link to nothing{to}: not followed");
    }
    format!("cannot follow this link: {e}")
}

fn cannot_read(e: &std::io::Error) -> String {
    if is_loop(e) {
        return "a link loop: not followed".into();
    }
    format!("cannot read: {e}")
}

#[cfg(unix)]
fn is_loop(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(not(unix))]
fn is_loop(_: &std::io::Error) -> bool {
    false
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn file_id(_: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// What a file that is not a regular file or a folder is, in words.
fn kind(m: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    if m.is_dir() {
        return "a folder";
    }
    "an unknown kind of file"
}

fn wanted(format: Format, path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match format {
        Format::ClaudeCode => name.ends_with(".jsonl"),
        Format::Codex => name.starts_with("rollout-") && name.ends_with(".jsonl"),
        Format::Pi => name.ends_with(".jsonl"),
        // a data directory's messages file (read first: path order) and its manifests
        Format::Fspec => {
            let parent = path
                .parent()
                .and_then(|p| p.file_name())
                .and_then(|n| n.to_str());
            (name == "messages.jsonl" && parent == Some("messages"))
                || (name.ends_with(".json") && parent == Some("sessions"))
        }
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> Error {
    let shown = path.display();
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::NotFound(format!("source.path: no such file or folder '{shown}'"))
        }
        _ => Error::InvalidInput(format!("source.path: cannot read '{shown}': {e}")),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A file checked by the walk, then swapped for a FIFO before it is read: the open neither
    /// blocks (O_NONBLOCK) nor reads it, and a link put in its place is not followed either.
    #[test]
    fn a_file_swapped_after_the_walk_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "{}\n").unwrap();
        let found = check(&path, dir.path()).unwrap();
        std::fs::remove_file(&path).unwrap();
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(open(&found).map(|_| ()));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("opening the FIFO blocked");
        assert_eq!(got.unwrap_err(), "not a regular file (a FIFO): not read");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.path().join("b"), "{}\n").unwrap();
        std::os::unix::fs::symlink("b", &path).unwrap();
        let found = Found {
            path: path.clone(),
            bytes: 3,
            target: path.clone(),
            id: (0, 0),
            explicit: false,
        };
        assert_eq!(
            open(&found).unwrap_err(),
            "replaced by a link while the import ran: not read"
        );
        // and a different regular file in its place is not the one checked
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "{}\n").unwrap();
        let swapped = Found {
            id: (u64::MAX, u64::MAX),
            ..found
        };
        assert_eq!(
            open(&swapped).unwrap_err(),
            "replaced by another file while the import ran: not read"
        );
    }
}
