//! The files an import reads: one file, or every file of the format under a folder, in path
//! order (so a Claude Code session's file comes before its subagents' files).

use std::path::{Path, PathBuf};

use super::Format;
use crate::error::{Error, Result};

pub(crate) struct Found {
    pub path: PathBuf,
    pub bytes: u64,
}

pub(crate) fn find(format: Format, path: &Path) -> Result<Vec<Found>> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, &e))?;
    if meta.is_file() {
        return Ok(vec![Found {
            path: path.to_path_buf(),
            bytes: meta.len(),
        }]);
    }
    let mut out = Vec::new();
    walk(format, path, &mut out)?;
    out.sort_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
    Ok(out)
}

fn walk(format: Format, dir: &Path, out: &mut Vec<Found>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| io_error(dir, &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, &e))?;
        let path = entry.path();
        let meta = std::fs::metadata(&path).map_err(|e| io_error(&path, &e))?;
        if meta.is_dir() {
            walk(format, &path, out)?;
        } else if wanted(format, &path) {
            out.push(Found {
                path,
                bytes: meta.len(),
            });
        }
    }
    Ok(())
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

/// The file's text; bytes that are not UTF-8 become U+FFFD (the line is still read, and a line
/// that no longer parses is reported).
pub(crate) fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| io_error(path, &e))?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
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
