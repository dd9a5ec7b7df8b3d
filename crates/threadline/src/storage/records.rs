//! The records table: one row per record of every session (ids are `num << SEQ_BITS | seq`), its
//! checksummed columns, and the reads that check them: pages of JSON, the log's end, the view of
//! messages, lookups by uuid and by response.

use crate::storage::db::{args, Db, Row};
use rusqlite::types::ValueRef;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::clock;
use crate::model::envelope::REWIND;
use crate::model::options::{ForkedFrom, SessionInfo, Status};
use crate::model::state::State;
use crate::model::usage::Usage;
use crate::storage::batch::Probe;
use crate::storage::blob::{self, Expander};
use crate::storage::checksum;
use crate::storage::encode::{Encoded, MESSAGE_MARK};
use crate::storage::schema::{self, SEQ_BITS};
use crate::storage::txn::Txn;

/// What a handle knows of its session's end: enough to append without reading anything else.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tail {
    pub next_seq: u64,
    pub last_uuid: Option<String>,
    pub last_written_ms: Option<i64>,
    pub state: State,
}

/// A message of the view, with where it is in the log.
#[derive(Debug, Clone)]
pub(crate) struct ViewRecord {
    pub seq: u64,
    /// its place among the messages of its branch (`msg_index`; 0 for a compaction's summary)
    pub index: u64,
    pub uuid: String,
    pub provider: Option<String>,
    pub message: Value,
}

/// A page of a bulk read: a JSON array (ASCII text) and where the next page starts, if anywhere.
#[derive(Debug, Clone)]
pub struct Page {
    pub json: Vec<u8>,
    pub next: Option<u64>,
}

/// Bulk reads are cut into pages of about this many bytes, so memory stays bounded.
pub const PAGE_BYTES: usize = 4 << 20;

/// A page is read by statements of about this many bytes each: a statement holds a snapshot of
/// the store, and while any reader holds an old one the write-ahead log cannot start over.
const STATEMENT_BYTES: usize = 1 << 20;

/// ... and at most this many rows (PostgreSQL fetches a statement's rows whole).
const STATEMENT_ROWS: i64 = 2048;

/// Why a statement of `read_page` stopped.
enum Stop {
    /// no more rows
    Ended,
    /// the page is full; the next starts at this record id
    PageFull(i64),
    /// the statement has read its share; this record id was the last it reached
    Continue(i64),
}

/// A record to insert, as its columns hold it: `insert` computes the checksums.
pub(crate) struct NewRecord<'a> {
    pub id: i64,
    pub msg_index: Option<i64>,
    pub encoded: &'a Encoded,
    pub uuid: &'a str,
    pub parent_uuid: Option<&'a str>,
    pub record_type: &'a str,
    pub role: Option<&'a str>,
    pub provider: Option<&'a str>,
    pub timestamp: &'a str,
    pub turn_start: bool,
    pub response_key: Option<&'a str>,
    pub usage: Option<Usage>,
    pub state: &'a str,
    pub written_ms: i64,
}

/// Inserts one record row and its blobs' references.
pub(crate) fn insert(conn: &Db, r: &NewRecord<'_>) -> Result<()> {
    let enc = r.encoded;
    let usage = r.usage;
    // In the order of `record_columns!()`: the checksums cover exactly what is stored.
    let mut values: [ValueRef<'_>; checksum::col::ALL] = [
        ValueRef::Integer(r.id),
        int(r.msg_index),
        ValueRef::Integer(enc.has_blobs() as i64),
        ValueRef::Blob(&enc.body),
        enc.message
            .as_deref()
            .map_or(ValueRef::Null, ValueRef::Blob),
        ValueRef::Null, // crc
        ValueRef::Text(r.uuid.as_bytes()),
        text(r.parent_uuid),
        ValueRef::Text(r.record_type.as_bytes()),
        text(r.role),
        text(r.provider),
        ValueRef::Text(r.timestamp.as_bytes()),
        ValueRef::Integer(r.turn_start as i64),
        text(r.response_key),
        int(usage.map(|u| u.input_tokens as i64)),
        int(usage.map(|u| u.output_tokens as i64)),
        int(usage.map(|u| u.cache_read_input_tokens as i64)),
        int(usage.map(|u| u.cache_creation_input_tokens as i64)),
        ValueRef::Text(r.state.as_bytes()),
        ValueRef::Null, // meta_crc
    ];
    let (crc, meta) = checksum::record_sums(&values);
    values[checksum::col::CRC] = ValueRef::Integer(crc as i64);
    values[checksum::col::META_CRC] = ValueRef::Integer(meta as i64);
    let written = ValueRef::Integer(r.written_ms);
    let mut all = [ValueRef::Null; checksum::col::ALL + 1];
    all[..checksum::col::ALL].copy_from_slice(&values);
    all[checksum::col::ALL] = written;
    conn.note_record(r.id >> SEQ_BITS, r.uuid, r.response_key);
    conn.execute_later(
        concat!(
            "INSERT INTO records(",
            record_columns!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
        ),
        &all,
    )?;
    blob::put(conn, r.id, &enc.blobs)
}

/// The seq of the record stored under `uuid` in session `num`, unchecked (a uniqueness check
/// before an insert; `seq_of` checks what it reads).
pub(crate) fn find_uuid(conn: &Db, num: i64, uuid: &str) -> Result<Option<u64>> {
    let (lo, hi) = schema::range(num);
    let id: Option<i64> = conn.read_unaffected(num, Probe::Uuid(uuid), || {
        conn.query_row(
            "SELECT id FROM records WHERE uuid = ?1 AND id BETWEEN ?2 AND ?3 LIMIT 1",
            &args![uuid, lo, hi],
            |r| r.get(0),
        )
    })?;
    Ok(id.map(|id| (id - lo) as u64))
}

/// The seq of session `num`'s last record, by a seek.
pub(crate) fn last_seq(conn: &Db, num: i64) -> Result<Option<u64>> {
    let (lo, hi) = schema::range(num);
    Ok(last_id(conn, lo, hi)?.map(|id| (id - lo) as u64))
}

/// Every record's envelope from `from_seq` on.
pub(crate) fn records_from(conn: &Db, num: i64, from_seq: u64) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut from = Some(from_seq);
    while let Some(f) = from {
        let page = read_page(conn, num, f, u64::MAX, PAGE_BYTES, Part::Envelope, false)?;
        out.extend(parse_page(&page)?);
        from = page.next;
    }
    Ok(out)
}

/// The messages from record `from_seq` on, each with its position and the envelope fields
/// context building needs, blobs expanded.
pub(crate) fn view_from(
    conn: &Db,
    num: i64,
    from_seq: u64,
    path: &[(u64, u64)],
) -> Result<Vec<ViewRecord>> {
    let mut out = Vec::new();
    for &(from, to) in path.iter().filter(|&&(_, to)| to >= from_seq) {
        out.extend(view_range(conn, num, from.max(from_seq), to)?);
    }
    Ok(out)
}

fn view_range(conn: &Db, num: i64, from_seq: u64, to_seq: u64) -> Result<Vec<ViewRecord>> {
    let (lo, _) = schema::range(num);
    let start = lo.saturating_add(from_seq.min(1 << SEQ_BITS) as i64);
    let hi = lo.saturating_add(to_seq.min(1 << SEQ_BITS) as i64);
    let mut expander = Expander::new(conn);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut expected = start;
    conn.each(
        concat!(
            "SELECT ",
            record_columns!(),
            " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id"
        ),
        &args![start, hi],
        |row| {
            let stored = checked(conn, num, lo, &mut expected, row, Check::All)?;
            if !stored.in_messages()? {
                return Ok(true);
            }
            let seq = (stored.id() - lo) as u64;
            let bytes = stored.message()?.unwrap_or(b"null");
            buf.clear();
            if stored.has_blobs()? {
                expander
                    .expand_into(&mut buf, bytes)
                    .map_err(|e| in_record(conn, num, seq, e))?;
            } else {
                buf.extend_from_slice(bytes);
            }
            let message = crate::model::number_text::parse_stored(&buf).map_err(|e| {
                checksum::damaged(conn, num, seq, &format!("its message is not JSON: {e}"))
            })?;
            out.push(ViewRecord {
                seq,
                index: stored.int(checksum::col::MSG_INDEX)?.unwrap_or(0) as u64,
                uuid: stored
                    .str(checksum::col::UUID)?
                    .unwrap_or_default()
                    .to_string(),
                provider: stored.str(checksum::col::PROVIDER)?.map(str::to_string),
                message,
            });
            Ok(true)
        },
    )?;
    if expected <= hi {
        return Err(checksum::damaged(
            conn,
            num,
            (expected - lo) as u64,
            "the record is missing",
        ));
    }
    Ok(out)
}

/// The seq of the record with `uuid` in this session.
pub(crate) fn seq_of(conn: &Db, num: i64, uuid: &str) -> Result<Option<u64>> {
    let (lo, hi) = schema::range(num);
    conn.query_row(
        concat!(
            "SELECT ",
            meta_columns!(),
            " FROM records WHERE uuid = ?1 AND id BETWEEN ?2 AND ?3 LIMIT 1"
        ),
        &args![uuid, lo, hi],
        |row| {
            let seq = (row.get::<i64>(checksum::col::ID)? - lo) as u64;
            let stored = checksum::Stored::check_meta(row)
                .map_err(|why| checksum::damaged(conn, num, seq, &why))?;
            if stored.str(checksum::col::UUID)? != Some(uuid) {
                return Err(checksum::damaged(
                    conn,
                    num,
                    seq,
                    "the uuid index lists it under another uuid",
                ));
            }
            Ok(seq)
        },
    )
}

/// The envelopes of records `from_seq..=to_seq`.
pub(crate) fn records_between(
    conn: &Db,
    num: i64,
    from_seq: u64,
    to_seq: u64,
) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut from = Some(from_seq);
    while let Some(f) = from.filter(|&f| f <= to_seq) {
        let page = read_page(
            conn,
            num,
            f,
            to_seq - f + 1,
            PAGE_BYTES,
            Part::Envelope,
            true,
        )?;
        out.extend(parse_page(&page)?);
        from = page.next;
    }
    Ok(out)
}

/// One record's envelope.
pub(crate) fn record(conn: &Db, num: i64, seq: u64) -> Result<Option<Map<String, Value>>> {
    let page = read_page(conn, num, seq, 1, usize::MAX, Part::Envelope, false)?;
    Ok(match parse_page(&page)?.pop() {
        Some(Value::Object(o)) => Some(o),
        _ => None,
    })
}

pub(crate) fn prior_usage(conn: &Db, key: &str, num: i64) -> Result<Option<Usage>> {
    conn.read_unaffected(num, Probe::Key(key), || prior_usage_read(conn, key, num))
}

fn prior_usage_read(conn: &Db, key: &str, num: i64) -> Result<Option<Usage>> {
    let (lo, hi) = schema::range(num);
    conn.query_row(
        concat!(
            "SELECT ",
            meta_columns!(),
            " FROM records WHERE response_key = ?1 AND id BETWEEN ?2 AND ?3 ORDER BY id DESC LIMIT 1"
        ),
        &args![key, lo, hi],
        |row| {
            let seq = (row.get::<i64>(checksum::col::ID)? - lo) as u64;
            let stored = checksum::Stored::check_meta(row)
                .map_err(|why| checksum::damaged(conn, num, seq, &why))?;
            let g = |i| -> Result<u64> {
                Ok(stored.int(checksum::col::INPUT_TOKENS + i)?.unwrap_or(0) as u64)
            };
            Ok(Usage {
                input_tokens: g(0)?,
                output_tokens: g(1)?,
                cache_read_input_tokens: g(2)?,
                cache_creation_input_tokens: g(3)?,
            })
        },
    )
}

pub(crate) fn load_tail(conn: &Db, num: i64) -> Result<Tail> {
    // The last record and the session's record count are compared: both from one snapshot, even
    // while another process appends.
    if !conn.in_transaction() {
        let tx = Txn::deferred(conn)?;
        let tail = load_tail_in(&tx, num)?;
        tx.commit()?;
        return Ok(tail);
    }
    load_tail_in(conn, num)
}

fn load_tail_in(conn: &Db, num: i64) -> Result<Tail> {
    let (lo, hi) = schema::range(num);
    let pending = conn.pending_count(num);
    // One statement, so one snapshot on PostgreSQL too, where a write transaction's statements
    // each see what committed before them.
    let found = conn.query_row(
        concat!(
            "SELECT r.*, s.records FROM sessions s LEFT JOIN (SELECT ",
            meta_columns!(),
            " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id DESC LIMIT 1) r ON 1 = 1 WHERE s.num = ?3"
        ),
        &args![lo, hi, num],
        |row| {
            let stored_count = match pending {
                Some(n) => Some(n as i64),
                None => row.get::<Option<i64>>(checksum::col::WRITTEN_MS + 1)?,
            };
            if matches!(row.get_ref(checksum::col::ID)?, ValueRef::Null) {
                return Ok((None, stored_count));
            }
            tail_of(conn, num, lo, stored_count, row).map(|t| (Some(t), stored_count))
        },
    )?;
    let Some((tail, stored_count)) = found else {
        return Err(Error::NotFound(format!(
            "the session was deleted (no session number {num})"
        )));
    };
    match tail {
        Some(t) => Ok(t),
        None => {
            if let Some(n) = stored_count.filter(|&n| n != 0) {
                return Err(checksum::damaged(
                    conn,
                    num,
                    0,
                    &format!("the session has no records, but its row says {n}"),
                ));
            }
            Ok(Tail::default())
        }
    }
}

/// The tail a session's last record gives, checked against the count in its row.
fn tail_of(conn: &Db, num: i64, lo: i64, stored_count: Option<i64>, row: &Row<'_>) -> Result<Tail> {
    let seq = (row.get::<i64>(checksum::col::ID)? - lo) as u64;
    if let Some(n) = stored_count.filter(|&n| n != seq as i64 + 1) {
        let why = if n > seq as i64 + 1 {
            format!("the session's last records are missing (its row says {n} records, the last stored is seq {seq})")
        } else {
            format!("the session's row says it has {n} records, but seq {seq} is stored")
        };
        return Err(checksum::damaged(conn, num, seq, &why));
    }
    let stored =
        checksum::Stored::check_meta(row).map_err(|why| checksum::damaged(conn, num, seq, &why))?;
    let written: i64 = row.get(checksum::col::WRITTEN_MS)?;
    let uuid = stored.str(checksum::col::UUID)?.unwrap_or_default();
    let parent = stored.str(checksum::col::PARENT)?;
    let ty = stored.str(checksum::col::TYPE)?.unwrap_or_default();
    Ok(Tail {
        next_seq: seq + 1,
        // After a rewind, the next record continues from the record rewound to.
        last_uuid: if ty == REWIND {
            parent.map(str::to_string)
        } else {
            Some(uuid.to_string())
        },
        last_written_ms: Some(written),
        state: state_of(conn, num, seq, &stored)?,
    })
}

/// The state stored with a checked record.
pub(crate) fn state_of(
    conn: &Db,
    num: i64,
    seq: u64,
    stored: &checksum::Stored<'_>,
) -> Result<State> {
    serde_json::from_str(stored.state()?)
        .map_err(|e| checksum::damaged(conn, num, seq, &format!("its state is not valid: {e}")))
}

/// Calls `f` with each record `from_seq..=to_seq` (read with `meta_columns!()`, its state and
/// indexed fields checked); every one of them must be there.
pub(crate) fn each_record(
    conn: &Db,
    num: i64,
    from_seq: u64,
    to_seq: u64,
    mut f: impl FnMut(u64, &checksum::Stored<'_>) -> Result<()>,
) -> Result<()> {
    let (lo, _) = schema::range(num);
    let start = lo.saturating_add(from_seq.min(1 << SEQ_BITS) as i64);
    let end = lo.saturating_add(to_seq.min(1 << SEQ_BITS) as i64);
    let mut expected = start;
    conn.each(
        concat!(
            "SELECT ",
            meta_columns!(),
            " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id"
        ),
        &args![start, end],
        |row| {
            let stored = checked(conn, num, lo, &mut expected, row, Check::Meta)?;
            f((stored.id() - lo) as u64, &stored)?;
            Ok(true)
        },
    )?;
    if expected <= end {
        return Err(checksum::damaged(
            conn,
            num,
            (expected - lo) as u64,
            "the record is missing",
        ));
    }
    Ok(())
}

/// Calls `f` with every turn-start record of session `num` and the record before each (whose
/// state holds the turn that ends there), in order, in one read, each checked.
pub(crate) fn each_turn_edge(
    conn: &Db,
    num: i64,
    mut f: impl FnMut(u64, &checksum::Stored<'_>) -> Result<()>,
) -> Result<()> {
    let (lo, hi) = schema::range(num);
    conn.each(
        concat!(
            "SELECT ",
            meta_columns!(),
            " FROM records WHERE id IN (
           SELECT id FROM records WHERE turn_start = 1 AND id BETWEEN ?1 AND ?2
           UNION SELECT id - 1 FROM records WHERE turn_start = 1 AND id BETWEEN ?1 AND ?2)
         ORDER BY id"
        ),
        &args![lo, hi],
        |row| {
            let seq = (row.get::<i64>(checksum::col::ID)? - lo) as u64;
            let stored = checksum::Stored::check_meta(row)
                .map_err(|why| checksum::damaged(conn, num, seq, &why))?;
            f(seq, &stored)?;
            Ok(true)
        },
    )
}

/// How many records of session `num` in `from_seq..=to_seq` start a turn (by the index of turn
/// starts: no record is read).
pub(crate) fn turn_starts_between(conn: &Db, num: i64, from_seq: u64, to_seq: u64) -> Result<u64> {
    let (lo, _) = schema::range(num);
    let a = lo.saturating_add(from_seq.min(1 << SEQ_BITS) as i64);
    let b = lo.saturating_add(to_seq.min(1 << SEQ_BITS) as i64);
    let n: Option<i64> = conn.query_row(
        "SELECT count(*) FROM records WHERE turn_start = 1 AND id BETWEEN ?1 AND ?2",
        &args![a, b],
        |r| r.get(0),
    )?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

/// The seq of the latest record of session `num` within `segments` (seq ranges, oldest first)
/// whose message reported usage, by the `records_usage` index: no record is read.
pub(crate) fn latest_usage(conn: &Db, num: i64, segments: &[(u64, u64)]) -> Result<Option<u64>> {
    let (lo, _) = schema::range(num);
    for &(from, to) in segments.iter().rev() {
        let a = lo.saturating_add(from.min(1 << SEQ_BITS) as i64);
        let b = lo.saturating_add(to.min(1 << SEQ_BITS) as i64);
        let id: Option<i64> = conn.query_row(
            concat!(
                "SELECT id FROM records WHERE id BETWEEN ?1 AND ?2 AND ",
                usage_reported!(),
                " ORDER BY id DESC LIMIT 1"
            ),
            &args![a, b],
            |r| r.get(0),
        )?;
        if let Some(id) = id {
            return Ok(Some((id - lo) as u64));
        }
    }
    Ok(None)
}

/// The seqs of session `num`'s records of type `ty`, in order.
pub(crate) fn seqs_of_type(conn: &Db, num: i64, ty: &str) -> Result<Vec<u64>> {
    let (lo, hi) = schema::range(num);
    conn.rows(
        "SELECT id FROM records WHERE type = ?1 AND id BETWEEN ?2 AND ?3 ORDER BY id",
        &args![ty, lo, hi],
        |r| Ok((r.get::<i64>(0)? - lo) as u64),
    )
}

/// When a session was last written, for listing: most recent first is the greatest. The time
/// (`updatedAt`, which an imported snapshot keeps from its origin) decides, and the store's write
/// counter breaks its ties: writes in one millisecond list in the order they were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Recency {
    pub updated_ms: i64,
    pub write_seq: i64,
}

/// A session's metadata and when it was last written, for sorting.
pub(crate) fn read_info(conn: &Db, num: i64) -> Result<(SessionInfo, Recency)> {
    let tail = load_tail(conn, num)?;
    /// The row's fields that need parsing, as stored.
    struct Raw {
        status: String,
        window: Option<i64>,
        metadata: Option<String>,
        forked: Option<String>,
    }
    let row = conn.query_row(
        "SELECT id, project, title, provider, model, status, created_ms, updated_ms, context_window, metadata, forked_from, write_seq
             FROM sessions WHERE num = ?1",
        &args![num],
        |r| {
            let created: i64 = r.get(6)?;
            let updated = r.get::<i64>(7)?.max(tail.last_written_ms.unwrap_or(0));
            let info = SessionInfo {
                id: r.get(0)?,
                project: r.get(1)?,
                title: r.get(2)?,
                provider: r.get(3)?,
                model: r.get(4)?,
                status: Status::Active,
                created_at: clock::iso_from_ms(created),
                updated_at: clock::iso_from_ms(updated),
                message_count: tail.state.messages,
                context_window: None,
                forked_from: None,
                metadata: None,
            };
            let raw = Raw {
                status: r.get(5)?,
                window: r.get(8)?,
                metadata: r.get(9)?,
                forked: r.get(10)?,
            };
            let recency = Recency {
                write_seq: r.get(11)?,
                updated_ms: updated,
            };
            Ok((info, raw, recency))
        },
    )?;
    let Some((mut info, raw, recency)) = row else {
        return Err(Error::NotFound("the session was deleted".into()));
    };
    let bad = |what: &str| {
        Error::StoreCorrupt(format!(
            "the row of session '{}' is damaged: its {what} does not parse",
            info.id
        ))
    };
    info.status = Status::parse(&raw.status).ok_or_else(|| bad("status"))?;
    info.context_window = raw
        .window
        .map(|w| u64::try_from(w).map_err(|_| bad("context_window")))
        .transpose()?;
    info.forked_from = raw
        .forked
        .map(|f| serde_json::from_str::<ForkedFrom>(&f).map_err(|_| bad("forked_from")))
        .transpose()?;
    info.metadata = raw
        .metadata
        .map(|m| serde_json::from_str(&m).map_err(|_| bad("metadata")))
        .transpose()?;
    Ok((info, recency))
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Message,
    Envelope,
}

pub(crate) fn read_page(
    conn: &Db,
    num: i64,
    from_seq: u64,
    limit: u64,
    max_bytes: usize,
    part: Part,
    whole: bool,
) -> Result<Page> {
    let (lo, hi) = schema::range(num);
    let start = lo.saturating_add(from_seq.min(1 << SEQ_BITS) as i64);
    let end = hi.min(
        start
            .saturating_add(limit.min(1 << SEQ_BITS) as i64)
            .saturating_sub(1),
    );
    // Every record of the range is read and checked, messages or not: a record whose
    // `msg_index` was damaged is found, not skipped, and a gap in the seqs is a missing record.
    // One statement reads about STATEMENT_BYTES, then the next continues where it stopped: a
    // statement holds a read snapshot, which keeps a log restart waiting while it is open.
    let mut json = Vec::with_capacity(max_bytes.min(1 << 20) + 1024);
    let mut expander = Expander::new(conn);
    let mut next = None;
    let mut expected = start;
    json.push(b'[');
    let mut first = true;
    let mut from = start;
    let mut rescan = false;
    loop {
        let begun = json.len();
        let mut any = false;
        let mut rows = 0;
        let mut stop = Stop::Ended;
        conn.each(
            concat!(
                "SELECT ",
                content_columns!(),
                " FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id LIMIT ?3"
            ),
            &args![from, end, STATEMENT_ROWS],
            |row| {
                any = true;
                rows += 1;
                let id: i64 = row.get(checksum::col::ID)?;
                if json.len() >= max_bytes {
                    stop = Stop::PageFull(id);
                    return Ok(false);
                }
                if json.len() - begun >= STATEMENT_BYTES || rows == STATEMENT_ROWS {
                    stop = Stop::Continue(id);
                    if json.len() - begun >= STATEMENT_BYTES {
                        return Ok(false);
                    }
                }
                let stored = checked(conn, num, lo, &mut expected, row, Check::Content)?;
                if part == Part::Message && !stored.in_messages()? {
                    return Ok(true);
                }
                if !first {
                    json.push(b',');
                }
                first = false;
                append_stored(&mut json, &stored, part, &mut expander, conn, num, lo)?;
                Ok(true)
            },
        )?;
        match stop {
            Stop::PageFull(id) => {
                next = Some((id - lo) as u64);
                break;
            }
            // The statement stopped at its size (that row is read again) or at its row limit
            // (that row was read: the next statement starts after it).
            Stop::Continue(id) if rows == STATEMENT_ROWS && id + 1 == expected => {
                from = expected;
                continue;
            }
            Stop::Continue(id) => {
                from = id;
                continue;
            }
            Stop::Ended => {}
        }
        // The scan ended. A damaged b-tree page can end a scan early with no error from SQLite
        // while a seek still finds later records: if the range's last record lies beyond where
        // the scan stopped, scan again from there (records appended meanwhile are read on), and
        // a second scan that finds nothing there is damage.
        match last_id(conn, expected, end)? {
            Some(_) if rescan && !any => {
                return Err(checksum::damaged(
                    conn,
                    num,
                    (expected - lo) as u64,
                    "the record is missing",
                ))
            }
            Some(_) => {
                rescan = true;
                from = expected;
            }
            None => break,
        }
    }
    json.push(b']');
    // A range known to be stored whole (a segment of the branch, up to the session's last
    // record): stopping short is a missing record.
    if whole && next.is_none() && expected <= end {
        return Err(checksum::damaged(
            conn,
            num,
            (expected - lo) as u64,
            "the record is missing",
        ));
    }
    Ok(Page { json, next })
}

/// The id of the last record stored in `from..=to`, found by a seek (not a scan).
fn last_id(conn: &Db, from: i64, to: i64) -> Result<Option<i64>> {
    // ORDER BY + LIMIT: max() under a WHERE clause would scan the range (see sync_tail).
    conn.query_row(
        "SELECT id FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id DESC LIMIT 1",
        &args![from, to],
        |r| r.get(0),
    )
}

/// Appends a checked record of `read_page` to the JSON array being built.
fn append_stored(
    json: &mut Vec<u8>,
    stored: &checksum::Stored,
    part: Part,
    expander: &mut Expander,
    conn: &Db,
    num: i64,
    lo: i64,
) -> Result<()> {
    let id = stored.id();
    let has_blobs = stored.has_blobs()?;
    let message = stored.message()?;
    let text: &[u8] = match part {
        Part::Message => message.unwrap_or(b"null"),
        Part::Envelope => stored.body()?,
    };
    let mut splice = |out: &mut Vec<u8>, bytes: &[u8]| -> Result<()> {
        if has_blobs {
            expander
                .expand_into(out, bytes)
                .map_err(|e| in_record(conn, num, (id - lo) as u64, e))
        } else {
            out.extend_from_slice(bytes);
            Ok(())
        }
    };
    match (part, message, text.iter().position(|&b| b == MESSAGE_MARK)) {
        (Part::Envelope, Some(m), Some(at)) => {
            splice(json, &text[..at])?;
            splice(json, m)?;
            splice(json, &text[at + 1..])?;
        }
        _ => splice(json, text)?,
    }
    Ok(())
}

fn text(t: Option<&str>) -> ValueRef<'_> {
    t.map_or(ValueRef::Null, |t| ValueRef::Text(t.as_bytes()))
}

fn int(i: Option<i64>) -> ValueRef<'static> {
    i.map_or(ValueRef::Null, ValueRef::Integer)
}

/// Which checksums of a row to check: the row was read with `record_columns!()` (all),
/// `content_columns!()` or `meta_columns!()`.
#[derive(Clone, Copy)]
enum Check {
    All,
    Content,
    Meta,
}

/// Checks a row (its checksums, as `check` says), and that it is the record expected next (no
/// seq between is missing).
fn checked<'r>(
    conn: &Db,
    num: i64,
    lo: i64,
    expected: &mut i64,
    row: &Row<'r>,
    check: Check,
) -> Result<checksum::Stored<'r>> {
    let id: i64 = row.get(checksum::col::ID)?;
    if id != *expected {
        let missing = (*expected - lo) as u64;
        return Err(checksum::damaged(
            conn,
            num,
            missing,
            &format!("the record is missing (the next stored is seq {})", id - lo),
        ));
    }
    *expected += 1;
    let stored = match check {
        Check::All => checksum::Stored::check(row),
        Check::Content => checksum::Stored::check_content(row),
        Check::Meta => checksum::Stored::check_meta(row),
    };
    stored.map_err(|why| checksum::damaged(conn, num, (id - lo) as u64, &why))
}

/// A STORE_CORRUPT error found while reading record `seq` (a damaged blob), naming the record.
fn in_record(conn: &Db, num: i64, seq: u64, e: Error) -> Error {
    match e {
        Error::StoreCorrupt(m) => checksum::damaged(conn, num, seq, &m),
        other => other,
    }
}

pub(crate) fn parse_page(page: &Page) -> Result<Vec<Value>> {
    match crate::model::number_text::parse_stored(&page.json) {
        Ok(Value::Array(records)) => Ok(records),
        Ok(_) => Err(Error::StoreCorrupt(
            "a stored record is damaged: not a list".into(),
        )),
        Err(e) => Err(Error::StoreCorrupt(format!(
            "a stored record is damaged: {e}"
        ))),
    }
}

/// The seq of session `num`'s latest record with role `role`, by a seek from its end.
pub(crate) fn latest_of_role(conn: &Db, num: i64, role: &str) -> Result<Option<u64>> {
    let (lo, hi) = schema::range(num);
    let id: Option<i64> = conn.query_row(
        "SELECT id FROM records WHERE id BETWEEN ?1 AND ?2 AND role = ?3 ORDER BY id DESC LIMIT 1",
        &args![lo, hi, role],
        |r| r.get(0),
    )?;
    Ok(id.map(|id| (id - lo) as u64))
}
