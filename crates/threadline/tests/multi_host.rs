//! libpq's multi-host URLs on PostgreSQL: the hosts are tried in order, `target_session_attrs`
//! passes over a host that is not what it asks for, and a connection lost mid-run is made anew
//! to whichever host now is (a failover's new primary), within `busyTimeoutMs`. Run against the
//! suite's server (`THREADLINE_TEST_POSTGRES`) and a second one this file starts whose database
//! defaults to read-only transactions, as a standby's sessions are (`scripts/postgres.js start
//! --read-only`).

use std::process::Command;
use std::sync::Mutex;

use serde_json::json;
use threadline::{SessionOptions, Store, StoreOptions};

/// The suite's server as `(user@, host:port, /db)`; None (said) when there is none.
fn server() -> Option<(String, String, String)> {
    let base = match std::env::var("THREADLINE_TEST_POSTGRES") {
        Ok(b) if !b.is_empty() => b,
        _ => {
            assert!(
                std::env::var_os("THREADLINE_REQUIRE_POSTGRES").is_none(),
                "THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not"
            );
            eprintln!("THREADLINE_TEST_POSTGRES is not set: multi-host tests not run");
            return None;
        }
    };
    let rest = base.strip_prefix("postgres://").expect("a postgres:// URL");
    let (user, rest) = rest.split_once('@').expect("a user in the URL");
    let (hostport, db) = rest.split_at(rest.find('/').expect("a database in the URL"));
    let db = db.split('?').next().unwrap();
    Some((format!("{user}@"), hostport.to_string(), db.to_string()))
}

fn schema(name: &str) -> String {
    let s = format!("t_mh_{name}_{}", std::process::id());
    if let Some((user, hostport, db)) = server() {
        let mut c =
            postgres::Client::connect(&format!("postgres://{user}{hostport}{db}"), postgres::NoTls)
                .unwrap();
        c.batch_execute(&format!("DROP SCHEMA IF EXISTS {s} CASCADE"))
            .unwrap();
    }
    s
}

/// A second server, started for this file: its database's sessions are read-only by default
/// until `writable(true)`. Stopped when dropped.
struct Second {
    state: String,
    hostport: String,
    url: String,
}

/// One at a time: the tests that start a second server each flip it.
static SECOND: Mutex<()> = Mutex::new(());

impl Second {
    fn start() -> Second {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres.js");
        let out = Command::new("node")
            .args([script, "start", "--read-only"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "postgres.js start --read-only: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .unwrap()
                .to_string()
        };
        let url = var("THREADLINE_TEST_POSTGRES");
        let hostport = url.split('@').nth(1).unwrap().split('/').next().unwrap();
        Second {
            state: var("THREADLINE_TEST_POSTGRES_STATE"),
            hostport: hostport.to_string(),
            url: url.clone(),
        }
    }

    fn admin(&self) -> postgres::Client {
        let url = self.url.replace("/threadline_test", "/postgres");
        postgres::Client::connect(&url, postgres::NoTls).unwrap()
    }

    /// Whether new sessions of its database may write.
    fn writable(&self, yes: bool) {
        let on = if yes { "off" } else { "on" };
        self.admin()
            .batch_execute(&format!(
                "ALTER DATABASE threadline_test SET default_transaction_read_only = {on}"
            ))
            .unwrap();
    }

    /// Ends every connection to its database (what a server's crash or a failover does to
    /// them), and waits until they are gone.
    fn cut_off(&self) {
        let mut admin = self.admin();
        admin
            .batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'threadline_test'",
            )
            .unwrap();
        while admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = 'threadline_test'",
                &[],
            )
            .unwrap()
            .get::<_, i64>(0)
            > 0
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Second {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres.js");
        let _ = Command::new("node")
            .args([script, "stop"])
            .env("THREADLINE_TEST_POSTGRES_STATE", &self.state)
            .status();
    }
}

/// A message as a session reads it back.
fn said(role: &str, text: &str) -> serde_json::Value {
    json!({"role": role, "content": [{"type": "text", "text": text}]})
}

fn options(busy: u32) -> StoreOptions {
    StoreOptions {
        busy_timeout_ms: busy,
        ..Default::default()
    }
}

fn session(store: &Store, id: &str) -> threadline::Session {
    store
        .create_session(SessionOptions {
            id: Some(id.into()),
            ..Default::default()
        })
        .unwrap()
}

/// Session `id`'s messages as a store opened on `url` alone reads them.
fn messages_at(url: &str, id: &str) -> Vec<serde_json::Value> {
    let store = Store::open(Some(url), options(5000)).unwrap();
    let messages = store.open_session(id, None).unwrap().messages().unwrap();
    store.close().unwrap();
    messages
}

#[test]
fn a_url_naming_a_dead_port_first_opens_on_the_live_server_and_works() {
    let Some((user, live, db)) = server() else {
        return;
    };
    let s = schema("dead_first");
    // Port 1 (tcpmux) is never a PostgreSQL server: refused at once.
    let url = format!("postgres://{user}127.0.0.1:1,{live}{db}?schema={s}&connect_timeout=2");
    let store = Store::open(Some(&url), options(5000)).unwrap();
    let a = session(&store, "a");
    a.append(json!("hello"), None).unwrap();
    a.append(json!({"role": "assistant", "content": "hi"}), None)
        .unwrap();
    store.close().unwrap();
    // What was written is on the live server, read through its own URL.
    let url = format!("postgres://{user}{live}{db}?schema={s}");
    assert_eq!(
        messages_at(&url, "a"),
        [said("user", "hello"), said("assistant", "hi")]
    );
}

#[test]
fn when_no_host_takes_the_connection_the_error_says_what_each_did() {
    let Some((user, _, db)) = server() else {
        return;
    };
    let url = format!("postgres://{user}127.0.0.1:1,127.0.0.1:2{db}?schema=t_none");
    let e = Store::open(Some(&url), options(1000)).err().unwrap();
    assert_eq!(e.code(), "STORE_IO", "{}", e.message());
    let m = e.message();
    assert!(m.contains("none of the 2 hosts took the connection"), "{m}");
    assert!(m.contains("127.0.0.1 port 1: "), "{m}");
    assert!(m.contains("127.0.0.1 port 2: "), "{m}");
}

#[test]
fn read_write_passes_over_a_read_only_server_and_primary_does_not() {
    let Some((user, live, db)) = server() else {
        return;
    };
    let _one = SECOND.lock().unwrap_or_else(|e| e.into_inner());
    let ro = Second::start();
    let s = schema("rw");
    let both = |attrs: &str| {
        format!(
            "postgres://{user}{},{live}{db}?schema={s}&target_session_attrs={attrs}",
            ro.hostport
        )
    };
    let store = Store::open(Some(&both("read-write")), options(5000)).unwrap();
    session(&store, "a")
        .append(json!("on the live one"), None)
        .unwrap();
    store.close().unwrap();
    let url = format!("postgres://{user}{live}{db}?schema={s}");
    assert_eq!(messages_at(&url, "a"), [said("user", "on the live one")]);
    // `any` and `primary` keep the first host that answers (read-only by default, but not a
    // standby): there the store's schema cannot be made, and the open says why.
    for attrs in ["any", "primary"] {
        let e = Store::open(Some(&both(attrs)), options(5000))
            .err()
            .unwrap();
        assert!(
            e.message().contains("read-only transaction"),
            "{attrs}: {} {}",
            e.code(),
            e.message()
        );
    }
    // Only read-only hosts: refused, naming the reason.
    let url = format!(
        "postgres://{user}{}{db}?schema={s}&target_session_attrs=read-write",
        ro.hostport
    );
    let e = Store::open(Some(&url), options(5000)).err().unwrap();
    assert_eq!(e.code(), "STORE_IO");
    assert!(
        e.message().contains(
            "its sessions are read-only, and the URL asks for target_session_attrs=read-write"
        ),
        "{}",
        e.message()
    );
}

#[test]
fn a_connection_lost_mid_run_is_made_anew_to_the_host_that_can_write_within_busy_timeout() {
    let Some((user, _, db)) = server() else {
        return;
    };
    let _one = SECOND.lock().unwrap_or_else(|e| e.into_inner());
    let b = Second::start();
    b.writable(true);
    // A dead host first, then the second server: every reconnection tries both.
    let url = format!(
        "postgres://{user}127.0.0.1:1,{}{db}?schema=t_lost&target_session_attrs=read-write",
        b.hostport
    );
    let store = Store::open(Some(&url), options(10_000)).unwrap();
    let s = session(&store, "a");
    s.append(json!("before"), None).unwrap();
    // The server can no longer write and drops the store's connection, as a failing primary
    // does; it can write again a moment later, as a promoted standby does.
    b.writable(false);
    b.cut_off();
    let flip = std::thread::spawn({
        let url = b.url.clone();
        move || {
            std::thread::sleep(std::time::Duration::from_millis(700));
            let mut c = postgres::Client::connect(
                &url.replace("/threadline_test", "/postgres"),
                postgres::NoTls,
            )
            .unwrap();
            c.batch_execute(
                "ALTER DATABASE threadline_test SET default_transaction_read_only = off",
            )
            .unwrap();
        }
    });
    // The append waits for a host that can write, within busyTimeoutMs, and is stored once.
    s.append(json!({"role": "assistant", "content": "after"}), None)
        .unwrap();
    flip.join().unwrap();
    s.append(json!("and on"), None).unwrap();
    assert_eq!(
        s.messages().unwrap(),
        [
            said("user", "before"),
            said("assistant", "after"),
            said("user", "and on"),
        ]
    );
    store.close().unwrap();
    let again = Store::open(Some(&url), options(5000)).unwrap();
    assert_eq!(
        again
            .open_session("a", None)
            .unwrap()
            .messages()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn a_session_that_lost_acknowledged_records_in_a_failover_is_reported_and_not_written_past() {
    let Some((user, live, db)) = server() else {
        return;
    };
    let s = schema("lost_tail");
    let name = format!("t_lost_tail_{}", std::process::id());
    let url = format!("postgres://{user}{live}{db}?schema={s}&application_name={name}");
    let store = Store::open(Some(&url), options(5000)).unwrap();
    let a = session(&store, "a");
    for text in ["one", "two", "three", "four"] {
        a.append(json!(text), None).unwrap();
    }
    // What a promoted standby that had not received the last two commits holds: the session
    // without its last two records. Then the writer's connection ends, as a failover ends it.
    let mut admin =
        postgres::Client::connect(&format!("postgres://{user}{live}{db}"), postgres::NoTls)
            .unwrap();
    let num: i64 = admin
        .query_one(&format!("SELECT num FROM {s}.sessions WHERE id = 'a'"), &[])
        .unwrap()
        .get(0);
    let lo = num << 36;
    let seqs = |admin: &mut postgres::Client| -> Vec<i64> {
        admin
            .query(
                &format!("SELECT id - $1 FROM {s}.records WHERE id >= $1 AND id < $2 ORDER BY id"),
                &[&lo, &(lo + (1 << 36))],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let before = seqs(&mut admin);
    assert_eq!(before.len(), 4, "{before:?}");
    let kept = before[2];
    admin
        .batch_execute(&format!(
            "DELETE FROM {s}.search WHERE id >= {}; DELETE FROM {s}.records WHERE id >= {};
             UPDATE {s}.sessions SET records = {kept} WHERE num = {num};
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{name}'",
            lo + kept,
            lo + kept
        ))
        .unwrap();
    while admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&name],
        )
        .unwrap()
        .get::<_, i64>(0)
        > 0
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The next append reconnects, finds the gap, says which records are missing, and writes
    // nothing after it.
    let e = a.append(json!("five"), None).err().unwrap();
    assert_eq!(e.code(), "STORE_CORRUPT", "{}", e.message());
    let m = e.message();
    assert!(
        m.contains(&format!(
            "session 'a' lost 2 acknowledged records (seq {kept} to {})",
            kept + 1
        )),
        "{m}"
    );
    assert_eq!(seqs(&mut admin), before[..2]);
    // The store's telemetry hears of it.
    let notices = store.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.kind == "records_lost" && n.message.contains("session 'a' lost 2")),
        "{notices:?}"
    );
    // Said once: the writer that was told goes on from what the server holds (it may append
    // the lost records again, with their uuids).
    a.append(json!("three again"), None).unwrap();
    assert_eq!(
        messages_at(&format!("postgres://{user}{live}{db}?schema={s}"), "a"),
        [
            said("user", "one"),
            said("user", "two"),
            said("user", "three again"),
        ]
    );
    store.close().unwrap();
}
