//! What a message says, field by field, as search indexes it and snippets quote it: its text,
//! its thinking, its tool calls' inputs and its tool results' outputs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Text,
    Thinking,
    ToolInput,
    ToolOutput,
}

impl Field {
    /// In the order of the index's columns.
    pub const ALL: [Field; 4] = [
        Field::Text,
        Field::Thinking,
        Field::ToolInput,
        Field::ToolOutput,
    ];
    /// What `search` looks in when not told.
    pub const DEFAULT: [Field; 2] = [Field::Text, Field::ToolInput];

    pub fn as_str(self) -> &'static str {
        match self {
            Field::Text => "text",
            Field::Thinking => "thinking",
            Field::ToolInput => "tool_input",
            Field::ToolOutput => "tool_output",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The text of each field of `message` (indexed by `Field::index`), blocks joined by newlines.
pub fn texts(message: &Value) -> [String; 4] {
    let mut out: [String; 4] = Default::default();
    let mut push = |f: Field, s: &str| {
        let t = &mut out[f.index()];
        if !t.is_empty() {
            t.push('\n');
        }
        t.push_str(s);
    };
    match message.get("content") {
        Some(Value::String(s)) => push(Field::Text, s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
                let str_of = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
                match ty {
                    "text" => push(Field::Text, str_of("text")),
                    "thinking" => push(Field::Thinking, str_of("thinking")),
                    "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                        let mut s = str_of("name").to_string();
                        flatten(b.get("input").unwrap_or(&Value::Null), None, &mut s);
                        push(Field::ToolInput, &s);
                    }
                    "tool_result" => {
                        let mut s = String::new();
                        result_text(b.get("content").unwrap_or(&Value::Null), false, &mut s);
                        push(Field::ToolOutput, s.trim_end());
                    }
                    t if t.ends_with("_tool_result") => {
                        let mut s = String::new();
                        flatten(b.get("content").unwrap_or(&Value::Null), None, &mut s);
                        push(Field::ToolOutput, s.trim_start());
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    out
}

/// A tool result's content: its string, or its text blocks, one a line; an image is `[image]`
/// when `images` says so (a transcript shows it, the index has no use for it).
pub(crate) fn result_text(content: &Value, images: bool, out: &mut String) {
    match content {
        Value::String(s) => out.push_str(s),
        Value::Array(blocks) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        out.push_str(b.get("text").and_then(Value::as_str).unwrap_or(""));
                        out.push('\n');
                    }
                    Some("image") if images => out.push_str("[image]\n"),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// A JSON value as lines of `key: value` (strings as they are, not JSON-escaped: a newline in a
/// command must separate words, not become an `n`).
fn flatten(v: &Value, key: Option<&str>, out: &mut String) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                flatten(x, Some(k), out);
            }
        }
        Value::Array(a) => {
            for x in a {
                flatten(x, key, out);
            }
        }
        Value::Null => {}
        scalar => {
            out.push('\n');
            if let Some(k) = key {
                out.push_str(k);
                out.push_str(": ");
            }
            match scalar {
                Value::String(s) => out.push_str(s),
                other => out.push_str(&other.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_block_goes_to_its_field() {
        let m = json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "let me look", "signature": "s"},
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls\nrg parse_json", "n": 2}},
        ]});
        let t = texts(&m);
        assert_eq!(t[0], "Looking.");
        assert_eq!(t[1], "let me look");
        assert_eq!(t[2], "Bash\ncommand: ls\nrg parse_json\nn: 2");
        assert_eq!(t[3], "");
        let r = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
            "content": [{"type": "text", "text": "a.txt"}, {"type": "image", "source": {}}]}]});
        assert_eq!(texts(&r)[3], "a.txt");
    }
}
