//! Snapshots: one JSON document with everything needed to resume a session elsewhere (its row,
//! every record's envelope with blob content inline, the tool-call journal), sealed with a
//! SHA-256 of its body. Importing checks the seal first and writes everything in one transaction:
//! a truncated or altered snapshot writes nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::envelope::Draft;
use crate::error::{Error, Result};
use crate::journal::{self, Entry};
use crate::session::Session;
use crate::state::TokenPatch;
use crate::store::Store;
use crate::txn::Txn;

pub const FORMAT: &str = "threadline.snapshot";
pub const VERSION: u64 = 1;

/// The session's row as a snapshot carries it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Row {
    id: String,
    project: Option<String>,
    title: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    status: String,
    created_ms: i64,
    updated_ms: i64,
    context_window: Option<i64>,
    prompt_key: Option<String>,
    metadata: Option<String>,
    forked_from: Option<String>,
}

#[derive(Debug, Serialize)]
struct Body {
    session: Row,
    records: Vec<Map<String, Value>>,
    journal: Vec<Entry>,
}

/// The body as read back, the records aside: they are taken from the parsed value as they are,
/// because deserializing a value again would rewrite the text of their numbers.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Head {
    session: Row,
    #[serde(rename = "records")]
    _records: serde::de::IgnoredAny,
    journal: Vec<Entry>,
}

impl Session {
    /// The session as one JSON document (`Store::import_snapshot` brings it back).
    pub fn snapshot(&self) -> Result<String> {
        let run = || {
            let conn = self.conn()?;
            let tx = Txn::deferred(&conn)?;
            let row = read_row(&tx, self.num)?;
            // A row no session could have is damage here, not an invalid snapshot.
            check_row(&row).map_err(|e| {
                Error::StoreCorrupt(format!(
                    "the row of session '{}' is damaged: {}",
                    row.id,
                    e.message()
                ))
            })?;
            let records = Session::records_from(&tx, self.num, 0)?
                .into_iter()
                .filter_map(|r| match r {
                    Value::Object(o) => Some(o),
                    _ => None,
                })
                .collect::<Vec<_>>();
            let journal = journal::list(&tx, self.num)?;
            journal::check_complete(&journal, &records, &row.id)?;
            seal(&Body {
                session: row,
                records,
                journal,
            })
        };
        run().map_err(|e: Error| e.during("snapshot"))
    }
}

impl Store {
    /// Brings a snapshot back as a new session of this store, with the same id. SNAPSHOT_INVALID
    /// if it is truncated, altered or not a snapshot; INVALID_INPUT if the id is taken.
    pub fn import_snapshot(&self, text: &str) -> Result<Session> {
        let run = || {
            let body = unseal(text)?;
            self.import(body)
        };
        run().map_err(|e: Error| e.during("importSnapshot"))
    }

    fn import(&self, body: Body) -> Result<Session> {
        check_row(&body.session)?;
        let shared = self.shared();
        shared.writable()?;
        let conn = shared.lock()?;
        let tx = Txn::immediate(&conn)?;
        let r = &body.session;
        let taken: i64 = tx.query_row(
            "SELECT count(*) FROM sessions WHERE id = ?1",
            [&r.id],
            |x| x.get(0),
        )?;
        if taken > 0 {
            return Err(Error::InvalidInput(format!(
                "a session '{}' already exists in this store",
                r.id
            )));
        }
        tx.execute(
            "INSERT INTO sessions(id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            rusqlite::params![r.id, r.project, r.title, r.provider, r.model, r.status, r.created_ms, r.updated_ms,
                r.context_window, r.prompt_key, r.metadata, r.forked_from],
        )?;
        let num = tx.last_insert_rowid();
        let session = Session::fresh(shared.clone(), num, r.id.clone());
        let (_, next, heartbeat) = session.stage(&tx, |w| {
            for (seq, env) in body.records.into_iter().enumerate() {
                let bad = |e: Error| match e {
                    Error::InvalidInput(m) => invalid(format!("records[{seq}]: {m}")),
                    other => other,
                };
                w.insert(draft(env, seq).map_err(bad)?).map_err(bad)?;
            }
            for e in &body.journal {
                journal::import(w.conn, num, e)?;
            }
            Ok(())
        })?;
        // The session keeps the time it was last written, not the time of the import.
        let (lo, hi) = crate::schema::range(num);
        tx.execute(
            "UPDATE records SET written_ms = min(written_ms, ?1) WHERE id BETWEEN ?2 AND ?3",
            [r.updated_ms, lo, hi],
        )?;
        tx.execute(
            "UPDATE sessions SET updated_ms = ?1 WHERE num = ?2",
            [r.updated_ms, num],
        )?;
        tx.commit()?;
        session.committed(next, heartbeat);
        Ok(session)
    }
}

/// A stored envelope back into a draft for the same position.
fn draft(env: Map<String, Value>, seq: usize) -> Result<Draft> {
    if env.get("seq").and_then(Value::as_u64) != Some(seq as u64) {
        return Err(Error::InvalidInput(format!("seq: expected {seq}")));
    }
    let tokens = match (env.get("type").and_then(Value::as_str), env.get("data")) {
        (Some("token_state"), Some(d)) => Some(
            serde_json::from_value::<TokenPatch>(d.clone())
                .map_err(|e| Error::InvalidInput(format!("data: {e}")))?,
        ),
        _ => None,
    };
    let mut d = Draft::from_envelope(env)?;
    d.tokens = tokens;
    Ok(d)
}

fn seal(body: &Body) -> Result<String> {
    let body = serde_json::to_string(body).map_err(|e| Error::StoreIo(e.to_string()))?;
    let sum = hex(&Sha256::digest(body.as_bytes()));
    Ok(format!(
        r#"{{"format":"{FORMAT}","version":{VERSION},"sha256":"{sum}","body":{body}}}"#
    ))
}

fn unseal(text: &str) -> Result<Body> {
    let doc = match crate::number_text::parse_text(text) {
        Ok(Value::Object(doc)) => doc,
        Ok(_) => return Err(invalid("expected a JSON object".into())),
        Err(e) => {
            return Err(invalid(format!(
                "not a complete JSON document (truncated?): {e}"
            )))
        }
    };
    if doc.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(invalid(format!("format: expected '{FORMAT}'")));
    }
    match doc.get("version").and_then(Value::as_u64) {
        Some(VERSION) => {}
        Some(v) if v > VERSION => {
            return Err(invalid(format!(
                "version {v} is newer than this library's {VERSION}: upgrade threadline"
            )))
        }
        _ => return Err(invalid(format!("version: expected {VERSION}"))),
    }
    let sum = doc
        .get("sha256")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("sha256: required".into()))?;
    let body = doc
        .get("body")
        .ok_or_else(|| invalid("body: required".into()))?;
    // The body was written compactly by serde_json with key order and number text kept, so
    // writing it again gives back the exact bytes that were sealed.
    let text = serde_json::to_string(body).map_err(|e| invalid(e.to_string()))?;
    if hex(&Sha256::digest(text.as_bytes())) != sum {
        return Err(invalid(
            "checksum mismatch: the snapshot was altered or damaged".into(),
        ));
    }
    let head: Head =
        serde_json::from_value(body.clone()).map_err(|e| invalid(format!("body: {e}")))?;
    let records = match doc.get("body").and_then(|b| b.get("records")) {
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, r)| match r {
                Value::Object(o) => Ok(o.clone()),
                _ => Err(invalid(format!("body.records[{i}]: expected an object"))),
            })
            .collect::<Result<_>>()?,
        _ => return Err(invalid("body.records: expected a list".into())),
    };
    Ok(Body {
        session: head.session,
        records,
        journal: head.journal,
    })
}

pub(crate) fn read_row(conn: &rusqlite::Connection, num: i64) -> Result<Row> {
    Ok(conn.query_row(
        "SELECT id, project, title, provider, model, status, created_ms, updated_ms, context_window, prompt_key, metadata, forked_from
         FROM sessions WHERE num = ?1",
        [num],
        |r| {
            Ok(Row {
                id: r.get(0)?,
                project: r.get(1)?,
                title: r.get(2)?,
                provider: r.get(3)?,
                model: r.get(4)?,
                status: r.get(5)?,
                created_ms: r.get(6)?,
                updated_ms: r.get(7)?,
                context_window: r.get(8)?,
                prompt_key: r.get(9)?,
                metadata: r.get(10)?,
                forked_from: r.get(11)?,
            })
        },
    )?)
}

/// A sealed snapshot can still carry a row no session could have: refuse it.
pub(crate) fn check_row(r: &Row) -> Result<()> {
    let bad = |field: &str, why: &str| Err(invalid(format!("session.{field}: {why}")));
    if r.id.is_empty() {
        return bad("id", "must not be empty");
    }
    if crate::options::Status::parse(&r.status).is_none() {
        return bad(
            "status",
            "expected 'active', 'completed', 'failed' or 'interrupted'",
        );
    }
    if r.context_window.is_some_and(|w| w < 0) {
        return bad("contextWindow", "must not be negative");
    }
    let is_object = |t: &Option<String>| {
        t.as_ref()
            .is_none_or(|t| matches!(serde_json::from_str::<Value>(t), Ok(Value::Object(_))))
    };
    if !is_object(&r.metadata) {
        return bad("metadata", "expected the JSON text of an object");
    }
    if !is_object(&r.forked_from) {
        return bad("forkedFrom", "expected the JSON text of an object");
    }
    Ok(())
}

fn invalid(m: String) -> Error {
    Error::SnapshotInvalid(m)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
