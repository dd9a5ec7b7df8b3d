//! What several test files share.

use serde_json::Value;

/// A real Claude Code session file of `fixtures/claude-code`, a JSON string per line, as
/// `restore_messages` takes a transcript.
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

/// A schema left by an earlier run of the same test is dropped first.
fn drop_schema(base: &str, schema: &str) {
    let mut c = postgres::Client::connect(base, postgres::NoTls).expect("the test server");
    c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .unwrap();
}
