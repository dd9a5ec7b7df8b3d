//! Snapshots: one JSON document with everything needed to resume a session elsewhere (its row,
//! every record's envelope with blob content inline, the tool-call journal), sealed with a
//! SHA-256 of its body. Importing checks the seal first and writes everything in one transaction:
//! a truncated or altered snapshot writes nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::envelope::Draft;
use crate::model::state::TokenPatch;
use crate::session::Session;
use crate::storage::journal::{self, Entry};
use crate::storage::sessions::{self, Row};
use crate::storage::txn::Txn;
use crate::store::Store;

pub const FORMAT: &str = "threadline.snapshot";
pub const VERSION: u64 = 1;

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
            let row = sessions::read_row(&tx, self.num)?;
            // A row no session could have is damage here, not an invalid snapshot.
            check_row(&row).map_err(|e| {
                Error::StoreCorrupt(format!(
                    "the row of session '{}' is damaged: {}",
                    row.id,
                    e.message()
                ))
            })?;
            let records = crate::storage::records::records_from(&tx, self.num, 0)?
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
        if sessions::num_of(&tx, &r.id)?.is_some() {
            return Err(Error::InvalidInput(format!(
                "a session '{}' already exists in this store",
                r.id
            )));
        }
        let num = sessions::insert_row(&tx, r)?;
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
        sessions::backdate(&tx, num, r.updated_ms)?;
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
    let doc = match crate::model::number_text::parse_text(text) {
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

/// A sealed snapshot can still carry a row no session could have: refuse it.
pub(crate) fn check_row(r: &Row) -> Result<()> {
    match r.problem() {
        Some(why) => Err(invalid(format!("session.{why}"))),
        None => Ok(()),
    }
}

fn invalid(m: String) -> Error {
    Error::SnapshotInvalid(m)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
