//! What several test files share.

use serde_json::Value;

/// A real Claude Code session file of `fixtures/claude-code`, a JSON string per line, as
/// `restore_messages` takes a transcript.
#[allow(dead_code)]
pub fn fixture_lines(name: &str) -> Vec<Value> {
    let path = format!(
        "{}/../../fixtures/claude-code/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| Value::String(l.to_string()))
        .collect()
}

/// The engines a test runs on: a SQLite file in `dir`, and PostgreSQL when the suite has a
/// server (`THREADLINE_TEST_POSTGRES`, which `npm test` and `.ci/run` set; with
/// `THREADLINE_REQUIRE_POSTGRES` set and no server, the test fails rather than skip it).
/// Each gives a store location of its own: a file, or a schema named for `test`.
#[allow(dead_code)]
pub fn engines(dir: &std::path::Path, test: &str) -> Vec<(&'static str, String)> {
    let mut out = vec![(
        "sqlite",
        dir.join(format!("{test}.db"))
            .to_string_lossy()
            .into_owned(),
    )];
    match std::env::var("THREADLINE_TEST_POSTGRES") {
        Ok(base) if !base.is_empty() => {
            let sep = if base.contains('?') { '&' } else { '?' };
            let schema = format!("t_{test}_{}", std::process::id());
            drop_schema(&base, &schema);
            out.push(("postgres", format!("{base}{sep}schema={schema}")));
        }
        _ => {
            assert!(
                std::env::var_os("THREADLINE_REQUIRE_POSTGRES").is_none(),
                "THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not"
            );
            eprintln!("THREADLINE_TEST_POSTGRES is not set: {test} runs on SQLite only");
        }
    }
    out
}

/// Where a test's store lives: the file `name` in `dir`, or, when the suite runs on PostgreSQL
/// (`THREADLINE_TEST_ENGINE=postgres`, which `npm test` sets for a second run of the files that
/// use this), a schema of its own on the test server (`THREADLINE_TEST_POSTGRES`).
#[allow(dead_code)]
pub fn location(dir: &std::path::Path, name: &str) -> String {
    if std::env::var("THREADLINE_TEST_ENGINE").as_deref() != Ok("postgres") {
        return dir.join(name).to_string_lossy().into_owned();
    }
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = std::env::var("THREADLINE_TEST_POSTGRES")
        .expect("THREADLINE_TEST_ENGINE=postgres needs THREADLINE_TEST_POSTGRES");
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let word: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let schema = format!("t_{word}_{}_{n}", std::process::id());
    drop_schema(&base, &schema);
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}schema={schema}")
}

/// A schema left by an earlier run of the same test is dropped first.
fn drop_schema(base: &str, schema: &str) {
    let mut c = postgres::Client::connect(base, postgres::NoTls).expect("the test server");
    c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .unwrap();
}
