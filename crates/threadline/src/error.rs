//! Errors of the core crate. Each variant is one stable code of the public contract; the binding
//! maps them to JS `code` strings in one place.

use std::fmt;

/// Every failure the library reports. The message names the offending path where there is one.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    #[error("{0}")]
    InvalidInput(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    SessionNotEmpty(String),
    #[error("{0}")]
    SessionLocked(String),
    #[error("{0}")]
    Closed(String),
    #[error("{0}")]
    StoreCorrupt(String),
    #[error("{0}")]
    StoreVersion(String),
    #[error("{0}")]
    StoreBusy(String),
    #[error("{0}")]
    StoreIo(String),
    #[error("{0}")]
    SnapshotInvalid(String),
    #[error("{0}")]
    PromptMismatch(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The longest message `bounded_message` gives, in characters.
pub const MAX_MESSAGE_CHARS: usize = 400;

fn bounded(m: &str) -> String {
    // Counted in characters written, escapes included: a message of control characters, each
    // written as `\u{...}`, stays within the bound too.
    let mut out = String::new();
    let mut count = 0;
    for (i, c) in m.char_indices() {
        let shown = match c {
            '\n' => "\\n".to_string(),
            '\r' => "\\r".to_string(),
            '\t' => "\\t".to_string(),
            c if c.is_control() => format!("\\u{{{:04x}}}", c as u32),
            c => c.to_string(),
        };
        let width = shown.chars().count();
        if count + width > MAX_MESSAGE_CHARS {
            let left = m[i..].chars().count();
            out.push_str(&format!("... ({left} more characters)"));
            break;
        }
        out.push_str(&shown);
        count += width;
    }
    out
}

impl Error {
    /// Every code, in the contract's order: the list the JS side exports as `ERROR_CODES` (a node
    /// test checks the two are equal).
    pub const CODES: [&'static str; 11] = [
        "INVALID_INPUT",
        "NOT_FOUND",
        "SESSION_NOT_EMPTY",
        "SESSION_LOCKED",
        "CLOSED",
        "STORE_CORRUPT",
        "STORE_VERSION",
        "STORE_BUSY",
        "STORE_IO",
        "SNAPSHOT_INVALID",
        "PROMPT_MISMATCH",
    ];

    /// The stable string code of the contract's error table.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidInput(_) => "INVALID_INPUT",
            Error::NotFound(_) => "NOT_FOUND",
            Error::SessionNotEmpty(_) => "SESSION_NOT_EMPTY",
            Error::SessionLocked(_) => "SESSION_LOCKED",
            Error::Closed(_) => "CLOSED",
            Error::StoreCorrupt(_) => "STORE_CORRUPT",
            Error::StoreVersion(_) => "STORE_VERSION",
            Error::StoreBusy(_) => "STORE_BUSY",
            Error::StoreIo(_) => "STORE_IO",
            Error::SnapshotInvalid(_) => "SNAPSHOT_INVALID",
            Error::PromptMismatch(_) => "PROMPT_MISMATCH",
        }
    }

    /// The message as it may be shown or logged: control characters escaped (no log injection)
    /// and at most `MAX_MESSAGE_CHARS` characters, so an error never echoes megabytes of input.
    pub fn bounded_message(&self) -> String {
        bounded(self.message())
    }

    pub fn message(&self) -> &str {
        match self {
            Error::InvalidInput(m)
            | Error::NotFound(m)
            | Error::SessionNotEmpty(m)
            | Error::SessionLocked(m)
            | Error::Closed(m)
            | Error::StoreCorrupt(m)
            | Error::StoreVersion(m)
            | Error::StoreBusy(m)
            | Error::StoreIo(m)
            | Error::SnapshotInvalid(m)
            | Error::PromptMismatch(m) => m,
        }
    }

    /// Prefixes the operation's name, as in `append: content[2].tool_use_id: expected a string`.
    pub fn during(self, op: &str) -> Error {
        let wrap = |m: String| format!("{op}: {m}");
        match self {
            Error::InvalidInput(m) => Error::InvalidInput(wrap(m)),
            Error::NotFound(m) => Error::NotFound(wrap(m)),
            Error::SessionNotEmpty(m) => Error::SessionNotEmpty(wrap(m)),
            Error::SessionLocked(m) => Error::SessionLocked(wrap(m)),
            Error::Closed(m) => Error::Closed(wrap(m)),
            Error::StoreCorrupt(m) => Error::StoreCorrupt(wrap(m)),
            Error::StoreVersion(m) => Error::StoreVersion(wrap(m)),
            Error::StoreBusy(m) => Error::StoreBusy(wrap(m)),
            Error::StoreIo(m) => Error::StoreIo(wrap(m)),
            Error::SnapshotInvalid(m) => Error::SnapshotInvalid(wrap(m)),
            Error::PromptMismatch(m) => Error::PromptMismatch(wrap(m)),
        }
    }

    pub(crate) fn invalid(path: &Path, msg: impl fmt::Display) -> Error {
        if path.is_root() {
            Error::InvalidInput(msg.to_string())
        } else {
            Error::InvalidInput(format!("{path}: {msg}"))
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode as C;
        let msg = e.to_string();
        // A stored value of another type than the schema's, text that is not UTF-8, an integer
        // out of range: the file holds what this library never wrote.
        if matches!(
            e,
            rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::IntegralValueOutOfRange(..)
                | rusqlite::Error::Utf8Error(..)
        ) {
            return Error::StoreCorrupt(format!("a stored value is damaged ({msg})"));
        }
        match e.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => Error::StoreBusy(format!(
                "the store stayed locked past busyTimeoutMs ({msg})"
            )),
            Some(C::ReadOnly) => Error::StoreIo(format!(
                "{msg}: the store's file is read-only (a read-only file system or permissions); \
                 once it is writable, open the store again"
            )),
            Some(C::DiskFull) => Error::StoreIo(format!("{msg}: free some space and retry")),
            Some(C::NotADatabase | C::DatabaseCorrupt) => {
                Error::StoreCorrupt(format!("not a Threadline store or damaged ({msg})"))
            }
            _ => Error::StoreIo(msg),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::StoreIo(e.to_string())
    }
}

/// A JSON path for error messages: `message.content[2].tool_use_id`.
#[derive(Debug, Clone, Default)]
pub struct Path(String);

impl Path {
    pub fn root() -> Path {
        Path(String::new())
    }
    pub fn key(&self, k: &str) -> Path {
        if self.0.is_empty() {
            Path(k.to_string())
        } else {
            Path(format!("{}.{k}", self.0))
        }
    }
    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod codes {
    use super::{Error, MAX_MESSAGE_CHARS};

    #[test]
    fn bounded_messages_are_short_and_have_no_control_characters() {
        let e = Error::InvalidInput(format!(
            "x: got '{}\u{1b}[31m\nforged log line'",
            "a".repeat(10_000_000)
        ));
        let m = e.bounded_message();
        assert!(m.chars().count() < MAX_MESSAGE_CHARS + 40, "{}", m.len());
        assert!(m.ends_with("more characters)"));
        // Escapes count: a message of control characters is bounded in what is written.
        let e = Error::InvalidInput(format!("x: {}", "\u{7f}".repeat(1000)));
        let m = e.bounded_message();
        assert!(
            m.chars().count() < MAX_MESSAGE_CHARS + 40,
            "{}",
            m.chars().count()
        );
        assert!(m.ends_with("more characters)"), "{m}");
        let e = Error::InvalidInput("x: '\u{1b}[31m\nforged'".into());
        assert_eq!(e.bounded_message(), "x: '\\u{001b}[31m\\nforged'");
        assert!(!e.bounded_message().chars().any(char::is_control));
    }

    #[test]
    fn every_variant_has_its_code_in_the_list_once() {
        let m = String::new;
        let all = [
            Error::InvalidInput(m()),
            Error::NotFound(m()),
            Error::SessionNotEmpty(m()),
            Error::SessionLocked(m()),
            Error::Closed(m()),
            Error::StoreCorrupt(m()),
            Error::StoreVersion(m()),
            Error::StoreBusy(m()),
            Error::StoreIo(m()),
            Error::SnapshotInvalid(m()),
            Error::PromptMismatch(m()),
        ];
        let codes: Vec<&str> = all.iter().map(Error::code).collect();
        assert_eq!(codes, Error::CODES);
    }
}
