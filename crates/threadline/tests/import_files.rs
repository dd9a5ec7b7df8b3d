//! What an import reads and what it skips: regular files only, links only to regular files inside
//! the folder given, every bad entry reported with its reason while the rest imports (issue 23,
//! finding 9). Each import runs on a thread with a time limit, so a regression that hangs (a FIFO
//! opened for reading) fails the test instead of hanging the suite.
#![cfg(unix)]

mod common;

use std::ffi::CString;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use threadline::interop::{import, Format, ImportOptions, ImportReport};
use threadline::{SessionFilter, Store, StoreOptions};

/// What an import gave back: its report and the ids of the sessions in the store after it, or
/// its error's code and message.
type Outcome = Result<(ImportReport, Vec<String>), (String, String)>;

/// Imports `path` into a new store in `dir` on a thread, and fails the test if that takes more
/// than 60 s (the thread is left blocked; the test process ends anyway).
fn import_in_time(dir: &Path, format: Format, path: &Path) -> Outcome {
    let location = common::location(dir, "s.db");
    let path = path.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let store = Store::open(Some(&location), StoreOptions::default()).unwrap();
        let out = import(
            &store,
            format,
            &path,
            &ImportOptions::default(),
            &mut |_| {},
        )
        .map(|report| {
            let mut ids: Vec<String> = store
                .list_sessions(&SessionFilter::default())
                .unwrap()
                .into_iter()
                .map(|s| s.id)
                .collect();
            ids.sort();
            (report, ids)
        })
        .map_err(|e| (e.code().to_string(), e.message().to_string()));
        let _ = tx.send(out);
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the import did not finish within 60 s")
}

/// A Claude Code session file: one user line per uuid.
fn session_file(path: &Path, uuids: &[&str]) {
    let text: String = uuids
        .iter()
        .map(|u| {
            format!(
                "{{\"type\":\"user\",\"uuid\":\"{u}\",\"parentUuid\":null,\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"hello {u}\"}}}}\n"
            )
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

fn shown(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The reason the report gives for skipping `path` as a whole (no line number).
fn reason_for(report: &ImportReport, path: &Path) -> String {
    let file = shown(path);
    let found: Vec<&str> = report
        .skipped
        .iter()
        .filter(|s| s.file == file && s.line.is_none())
        .map(|s| s.reason.as_str())
        .collect();
    assert_eq!(found.len(), 1, "{file} in {:?}", report.skipped);
    found[0].to_string()
}

fn folder(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir(&src).unwrap();
    session_file(&src.join("good.jsonl"), &["g1", "g2"]);
    src
}

#[test]
fn a_fifo_named_like_a_session_file_is_skipped_unopened_and_the_rest_imports() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    mkfifo(&src.join("fifo.jsonl"));
    // a subagent whose `.meta.json` is a FIFO: the side file is not opened either
    let subagents = src.join("good/subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    session_file(&subagents.join("agent-a1.jsonl"), &["a1"]);
    mkfifo(&subagents.join("agent-a1.meta.json"));
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert_eq!(ids, ["good", "good/agent-a1"]);
    assert_eq!(report.records, 3);
    let reason = reason_for(&report, &src.join("fifo.jsonl"));
    assert!(reason.contains("not a regular file"), "{reason}");
    assert!(reason.contains("FIFO"), "{reason}");
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
}

#[test]
fn a_fifo_or_a_device_given_as_the_path_is_invalid_input_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.jsonl");
    mkfifo(&fifo);
    let (code, message) = import_in_time(dir.path(), Format::ClaudeCode, &fifo).unwrap_err();
    assert_eq!(code, "INVALID_INPUT", "{message}");
    assert!(message.contains(&shown(&fifo)), "{message}");
    assert!(
        message.contains("a FIFO, not a file or folder"),
        "{message}"
    );
    let zero = Path::new("/dev/zero");
    let (code, message) = import_in_time(dir.path(), Format::Codex, zero).unwrap_err();
    assert_eq!(code, "INVALID_INPUT", "{message}");
    assert!(
        message.contains("'/dev/zero' is a character device, not a file or folder"),
        "{message}"
    );
    // a link given as the path is followed (the user named it), to the same refusal
    let link = dir.path().join("zero.jsonl");
    symlink(zero, &link).unwrap();
    let (code, message) = import_in_time(dir.path(), Format::Pi, &link).unwrap_err();
    assert_eq!(code, "INVALID_INPUT", "{message}");
    assert!(message.contains("a character device"), "{message}");
}

#[test]
fn a_link_to_dev_zero_is_skipped_as_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    symlink("/dev/zero", src.join("zero.jsonl")).unwrap();
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert_eq!(ids, ["good"]);
    let reason = reason_for(&report, &src.join("zero.jsonl"));
    assert!(
        reason.contains("'/dev/zero', a character device, not a regular file"),
        "{reason}"
    );
}

#[test]
fn links_to_folders_are_not_followed_and_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    session_file(&outside.join("secret.jsonl"), &["x1"]);
    let inside = src.join("sub");
    std::fs::create_dir(&inside).unwrap();
    session_file(&inside.join("sub.jsonl"), &["s1"]);
    symlink("/", src.join("root")).unwrap();
    symlink(&outside, src.join("out")).unwrap();
    symlink(&inside, src.join("again")).unwrap();
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert_eq!(ids, ["good", "sub"]);
    for link in ["root", "out", "again"] {
        let reason = reason_for(&report, &src.join(link));
        assert!(
            reason.contains("a link to a folder: links to folders are not followed"),
            "{reason}"
        );
    }
    assert_eq!(report.skipped.len(), 3, "{:?}", report.skipped);
}

#[test]
fn a_link_to_a_file_is_followed_only_when_its_target_is_inside_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    // inside: a file the walk would not read by its own name, linked as a session file
    std::fs::create_dir(src.join("kept")).unwrap();
    session_file(&src.join("kept/linked.txt"), &["l1"]);
    symlink("kept/linked.txt", src.join("linked.jsonl")).unwrap();
    let outside = dir.path().join("secret.jsonl");
    session_file(&outside, &["x1"]);
    symlink(&outside, src.join("escape.jsonl")).unwrap();
    // `..` through a link inside the folder still ends outside it
    symlink("kept/../../secret.jsonl", src.join("dots.jsonl")).unwrap();
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert_eq!(ids, ["good", "linked"]);
    for link in ["escape.jsonl", "dots.jsonl"] {
        let reason = reason_for(&report, &src.join(link));
        let expected = format!(
            "a link to '{}', outside the folder imported",
            shown(&outside)
        );
        assert!(reason.contains(&expected), "{reason}");
    }
    assert_eq!(report.skipped.len(), 2, "{:?}", report.skipped);
}

#[test]
fn a_dangling_link_and_a_link_loop_are_skipped_and_the_rest_imports() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    symlink("nowhere.jsonl", src.join("dangling.jsonl")).unwrap();
    symlink("loop-b.jsonl", src.join("loop-a.jsonl")).unwrap();
    symlink("loop-a.jsonl", src.join("loop-b.jsonl")).unwrap();
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert_eq!(ids, ["good"]);
    assert_eq!(report.records, 2);
    let reason = reason_for(&report, &src.join("dangling.jsonl"));
    assert!(reason.contains("a link to nothing"), "{reason}");
    for link in ["loop-a.jsonl", "loop-b.jsonl"] {
        let reason = reason_for(&report, &src.join(link));
        assert!(reason.contains("a link loop"), "{reason}");
    }
}

#[test]
fn a_utf8_bom_does_not_cost_the_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    let plain = std::fs::read(src.join("good.jsonl")).unwrap();
    let mut with_bom = b"\xEF\xBB\xBF".to_vec();
    with_bom.extend_from_slice(&plain);
    std::fs::write(src.join("good.jsonl"), with_bom).unwrap();
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(ids, ["good"]);
    assert_eq!(report.records, 2);
}

#[test]
fn a_binary_file_creates_no_session_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    let binary: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 256) as u8).collect();
    std::fs::write(src.join("blob.jsonl"), &binary).unwrap();
    std::fs::write(src.join("rollout-1-text.jsonl"), "hello\nworld\n").unwrap();
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert_eq!(ids, ["good"]);
    let reason = reason_for(&report, &src.join("blob.jsonl"));
    assert!(
        reason.contains("not a Claude Code session file: no line is a JSON object"),
        "{reason}"
    );
    // one entry for the file, not one per line of it
    assert_eq!(report.skipped.len(), 2, "{:?}", report.skipped);
    // a Codex rollout of text given as the path: refused by name, no session made
    let other = tempfile::tempdir().unwrap();
    let file = src.join("rollout-1-text.jsonl");
    let (code, message) = import_in_time(other.path(), Format::Codex, &file).unwrap_err();
    assert_eq!(code, "INVALID_INPUT");
    assert!(message.contains("not a Codex session file"), "{message}");
    let store = Store::open(
        Some(&common::location(other.path(), "s.db")),
        StoreOptions::default(),
    )
    .unwrap();
    assert!(store
        .list_sessions(&SessionFilter::default())
        .unwrap()
        .is_empty());
}

#[test]
fn a_file_over_the_size_cap_is_skipped_unread() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    // sparse: 5 GiB on paper, nothing on disk
    let big = std::fs::File::create(src.join("big.jsonl")).unwrap();
    big.set_len(5 << 30).unwrap();
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert_eq!(ids, ["good"]);
    let reason = reason_for(&report, &src.join("big.jsonl"));
    assert!(reason.contains("larger than 4 GiB"), "{reason}");
}

#[test]
fn a_line_over_the_length_cap_is_skipped_and_the_next_line_read() {
    let dir = tempfile::tempdir().unwrap();
    let src = folder(dir.path());
    let path = src.join("long.jsonl");
    session_file(&path, &["l1"]);
    // line 2: 300 MiB of zero bytes (a hole in the file), then line 3
    let tail = dir.path().join("tail");
    session_file(&tail, &["l3"]);
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let start = f.metadata().unwrap().len();
    f.set_len(start + (300 << 20)).unwrap();
    f.seek(SeekFrom::End(0)).unwrap();
    f.write_all(b"\n").unwrap();
    f.write_all(&std::fs::read(&tail).unwrap()).unwrap();
    drop(f);
    let (report, ids) = import_in_time(dir.path(), Format::ClaudeCode, &src).unwrap();
    assert_eq!(ids, ["good", "long"]);
    assert_eq!(report.records, 4);
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    let s = &report.skipped[0];
    assert_eq!((s.file.as_str(), s.line), (shown(&path).as_str(), Some(2)));
    assert!(s.reason.contains("longer than 256 MiB"), "{}", s.reason);
}

#[test]
fn an_fspec_blob_that_is_a_fifo_is_missing_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fspec");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fspec/data");
    copy_tree(&src, &data);
    let blobs = data.join("blobs");
    let blob = std::fs::read_dir(blobs.join("bc"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&blob).unwrap();
    mkfifo(&blob);
    let (_, ids) = import_in_time(dir.path(), Format::Fspec, &data).unwrap();
    assert_eq!(
        ids.len(),
        std::fs::read_dir(data.join("sessions")).unwrap().count()
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
