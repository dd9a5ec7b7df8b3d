//! A store watch's look (`Store::watch_scan`): which sessions of a scope were written since a
//! look, with their record counts and statuses, on both engines; on SQLite writes are numbered in
//! commit order, so a look from the last write number finds exactly the sessions written since;
//! a deletion shows in the count of deletions.

mod common;

use serde_json::json;
use threadline::{SessionOptions, Status, Store, StoreOptions, WatchScope};

fn open(path: &str) -> Store {
    Store::open(Some(path), StoreOptions::default()).unwrap()
}

fn project(p: &str) -> SessionOptions {
    SessionOptions {
        project: Some(p.into()),
        ..SessionOptions::default()
    }
}

fn ids(scan: &threadline::WatchScan) -> Vec<(String, u64, Status)> {
    scan.marks
        .iter()
        .map(|m| (m.id.clone(), m.records, m.status))
        .collect()
}

#[test]
fn a_look_finds_the_sessions_of_its_scope_written_since_the_last_with_their_counts_and_status() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, path) in common::engines(dir.path(), "watch_scan") {
        let writer = open(&path);
        let a = writer.create_session(project("alpha")).unwrap();
        let b = writer.create_session(project("beta")).unwrap();
        a.append(json!("one"), None).unwrap();
        a.append(json!("two"), None).unwrap();
        let watcher = open(&path);
        let all = WatchScope::default();
        let first = watcher.watch_scan(&all, None, None).unwrap();
        let mut got = ids(&first);
        got.sort_by(|x, y| x.0.cmp(&y.0));
        let mut want = vec![
            (a.id().to_string(), 2, Status::Active),
            (b.id().to_string(), 0, Status::Active),
        ];
        want.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(got, want, "{engine}: every session, each with its records");

        let alpha = WatchScope {
            project: Some("alpha".into()),
            session_id: None,
        };
        let scan = watcher.watch_scan(&alpha, None, None).unwrap();
        assert_eq!(
            ids(&scan),
            vec![(a.id().to_string(), 2, Status::Active)],
            "{engine}"
        );
        let one = WatchScope {
            project: None,
            session_id: Some(b.id().to_string()),
        };
        let scan = watcher.watch_scan(&one, None, None).unwrap();
        assert_eq!(
            ids(&scan),
            vec![(b.id().to_string(), 0, Status::Active)],
            "{engine}"
        );

        // Only b is written now: a look from the last write number finds it alone (SQLite), a
        // look at the sessions a notification named finds it (both).
        b.append(json!("three"), None).unwrap();
        b.set_status(Status::Failed).unwrap();
        let nums: Vec<i64> = first
            .marks
            .iter()
            .filter(|m| m.id == b.id())
            .map(|m| m.num)
            .collect();
        let named = watcher.watch_scan(&all, None, Some(&nums)).unwrap();
        assert_eq!(
            ids(&named),
            vec![(b.id().to_string(), 1, Status::Failed)],
            "{engine}"
        );
        if engine == "sqlite" {
            let since = watcher
                .watch_scan(&all, Some(first.last_write), None)
                .unwrap();
            assert_eq!(ids(&since), vec![(b.id().to_string(), 1, Status::Failed)]);
            assert!(since.last_write > first.last_write);
            let none = watcher
                .watch_scan(&all, Some(since.last_write), None)
                .unwrap();
            assert!(none.marks.is_empty(), "nothing written since");
        }
        assert_eq!(first.deletions, 0, "{engine}");
        writer.delete_session(a.id()).unwrap();
        let after = watcher.watch_scan(&all, None, None).unwrap();
        assert_eq!(after.deletions, 1, "{engine}: a deletion counts");
        assert_eq!(
            ids(&after),
            vec![(b.id().to_string(), 1, Status::Failed)],
            "{engine}"
        );

        let infos = watcher
            .session_infos(&[first.marks[0].num, first.marks[1].num])
            .unwrap();
        assert_eq!(infos.len(), 1, "{engine}: a deleted session is left out");
        assert_eq!(infos[0].1.id, b.id(), "{engine}");
        assert_eq!(infos[0].1.status, Status::Failed, "{engine}");
    }
}
