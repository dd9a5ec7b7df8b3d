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
