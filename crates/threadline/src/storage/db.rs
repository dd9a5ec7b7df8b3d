//! One handle on a store's database, whichever engine holds it: the storage modules write their
//! statements once (SQLite's `?N` placeholders, SQL both engines read) and run them here. Values
//! cross as SQLite's `ValueRef` on both engines, so a PostgreSQL row gives the checksummed
//! columns the same typed values, and the same checksums, as the SQLite file.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use bytes::BytesMut;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::Connection;
use tokio_postgres as postgres;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use crate::error::{Error, Result};
use crate::storage::batch::Batch;
use crate::storage::postgres::client::PgClient;
use crate::storage::postgres::error::mapped;
use crate::storage::postgres::tails;

/// A store's connection: the SQLite file's, or a PostgreSQL client.
pub(crate) enum Db {
    /// The file's connection, and its batch of appends (`batch.rs`).
    Sqlite(Connection, Box<Batch>),
    Postgres(Box<Pg>),
}

/// A PostgreSQL client with its prepared statements (by their SQLite text), and the statements
/// it holds back to send with the next one: a transaction's BEGIN and the writes no caller reads
/// (`execute_later`). An append is then two round trips (BEGIN with the tail check; the INSERT,
/// the session row and COMMIT), not five.
pub(crate) struct Pg {
    client: RefCell<PgClient>,
    statements: RefCell<HashMap<&'static str, postgres::Statement>>,
    /// whether a transaction is open (begun by `Txn`)
    in_txn: Cell<bool>,
    /// whether the open transaction has reached the server (its BEGIN was sent)
    begun: Cell<bool>,
    /// statements held back, sent ahead of the next one in the same round trip
    held: RefCell<Vec<Held>>,
    /// the store's random id (`tails.rs`)
    store: i64,
    /// sessions whose tail the open transaction noted (`tails.rs`) and where it left them: taken
    /// back unless it commits, acknowledged if it does
    noted: RefCell<Vec<(i64, u64)>>,
    /// whether the open transaction writes after a tail known here rather than read from the
    /// server (`tails.rs`): then it is not sent again on a new connection, whose server may
    /// end the session elsewhere (a failover)
    relied: Cell<bool>,
    /// how many times the connection was made anew (`generation`)
    generation: Cell<u64>,
    /// the schema the URL names (the client's search_path)
    pub schema: String,
    /// a new connection like the first, for when the server dropped this one
    reconnect: Reconnect,
    /// `busyTimeoutMs`: how long a lost connection is tried again (a failover's new primary
    /// takes a moment to be promoted)
    busy: std::time::Duration,
}

/// The pause between tries of a lost connection's hosts.
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// A statement held back, with its parameters.
struct Held {
    sql: &'static str,
    params: Vec<Value>,
}

pub(crate) use crate::storage::postgres::client::Reconnect;

impl Pg {
    pub fn new(
        client: PgClient,
        schema: String,
        store: i64,
        reconnect: Reconnect,
        busy: std::time::Duration,
    ) -> Pg {
        Pg {
            busy,
            store,
            noted: RefCell::new(Vec::new()),
            relied: Cell::new(false),
            generation: Cell::new(0),
            reconnect,
            client: RefCell::new(client),
            statements: RefCell::new(HashMap::new()),
            in_txn: Cell::new(false),
            begun: Cell::new(false),
            held: RefCell::new(Vec::new()),
            schema,
        }
    }

    /// Closes the connection (a Terminate message to the server).
    pub fn close(self) -> Result<()> {
        self.client.into_inner().close().map_err(mapped)
    }

    /// The client, for what is written for PostgreSQL only (the lease, the schema), with what
    /// was held back sent first.
    pub fn client(&self) -> Result<std::cell::RefMut<'_, PgClient>> {
        self.flush()?;
        self.live()?;
        Ok(self.client.borrow_mut())
    }

    /// A connection the server closed (a restart, a network failure) is made anew before the
    /// next statement, unless a transaction had reached the server on it: that one is lost, and
    /// the caller's operation fails with STORE_IO (a retry with the same uuid is stored once).
    /// The new connection goes to whichever of the URL's hosts now is what it asks for (after a
    /// failover, the new primary), tried again for up to `busyTimeoutMs` while none is. What
    /// this process knew of its sessions' tails is forgotten: the next write of each asks the
    /// server, which may be another one now.
    fn live(&self) -> Result<()> {
        if !self.client.borrow().is_closed() {
            return Ok(());
        }
        if self.begun.get() {
            return Err(Error::StoreIo(
                "the connection to the PostgreSQL server was lost during the transaction".into(),
            ));
        }
        let until = std::time::Instant::now() + self.busy;
        let fresh = loop {
            match (self.reconnect)() {
                Ok(c) => break c,
                Err(Error::StoreIo(_) | Error::StoreBusy(_))
                    if std::time::Instant::now() + RETRY_PAUSE < until =>
                {
                    std::thread::sleep(RETRY_PAUSE)
                }
                Err(e) => return Err(e),
            }
        };
        tails::forget_store(self.store);
        self.generation.set(self.generation.get() + 1);
        *self.client.borrow_mut() = fresh;
        self.statements.borrow_mut().clear();
        Ok(())
    }

    fn statement(&self, sql: &'static str) -> Result<postgres::Statement> {
        if let Some(s) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let s = self
            .client
            .borrow_mut()
            .prepare(&placeholders(sql))
            .map_err(mapped)?;
        self.statements.borrow_mut().insert(sql, s.clone());
        Ok(s)
    }

    /// Begins (`open`) or ends a transaction. A BEGIN is held back for the transaction's first
    /// statement; a transaction that sent nothing ends without a word to the server.
    fn control(&self, sql: &'static str, open: bool) -> Result<()> {
        self.relied.set(false);
        if open {
            // A connection the server ended while idle (a failover) is made anew now, before
            // the transaction decides whether it knows its sessions' tails (`tails.rs`).
            self.client.borrow_mut().check();
            self.live()?;
            self.held.borrow_mut().push(Held {
                sql,
                params: Vec::new(),
            });
            self.in_txn.set(true);
            self.begun.set(false);
            return Ok(());
        }
        let commit = sql == "COMMIT";
        let nothing_sent = !self.begun.get();
        // A ROLLBACK drops what is held; so does a COMMIT of a transaction that wrote nothing.
        if !commit || (nothing_sent && self.held.borrow().len() <= 1) {
            self.held.borrow_mut().clear();
        }
        let done = if nothing_sent && self.held.borrow().is_empty() {
            Ok(())
        } else {
            self.send(sql, &[]).map(|_| ())
        };
        // COMMIT and ROLLBACK end it either way (a COMMIT whose connection dropped is never run
        // again).
        for (num, next) in self.noted.take() {
            if commit && done.is_ok() {
                tails::confirm(self.store, num, next);
            } else {
                tails::forget(self.store, num);
            }
        }
        self.in_txn.set(false);
        self.begun.set(false);
        done
    }

    /// Holds back a write whose result nobody reads, inside a transaction; runs it now outside
    /// one.
    fn execute_later(&self, sql: &'static str, params: &[ValueRef<'_>]) -> Result<()> {
        if !self.in_txn.get() {
            return self.send(sql, params).map(|_| ());
        }
        self.held.borrow_mut().push(Held {
            sql,
            params: params.iter().map(|v| Value::from(*v)).collect(),
        });
        Ok(())
    }

    /// Sends what is held back, if anything.
    fn flush(&self) -> Result<()> {
        let Some(last) = self.held.borrow_mut().pop() else {
            return Ok(());
        };
        let params: Vec<ValueRef<'_>> = last.params.iter().map(ValueRef::from).collect();
        self.send(last.sql, &params).map(|_| ())
    }

    fn query(&self, sql: &'static str, params: &[ValueRef<'_>]) -> Result<Vec<postgres::Row>> {
        self.send(sql, params).map(|(rows, _)| rows)
    }

    fn execute(&self, sql: &'static str, params: &[ValueRef<'_>]) -> Result<usize> {
        self.send(sql, params).map(|(_, n)| n as usize)
    }

    /// Sends what is held back and then `sql`, in one round trip: `sql`'s rows and the number of
    /// rows it changed. When the server had dropped the connection and nothing of an open
    /// transaction had reached it, all of it is sent once more on a new connection: a restart
    /// between two appends costs the next one nothing. A COMMIT is never sent twice.
    fn send(
        &self,
        sql: &'static str,
        params: &[ValueRef<'_>],
    ) -> Result<(Vec<postgres::Row>, u64)> {
        let held = self.held.take();
        let fresh = !self.begun.get();
        if fresh {
            // A session the server ended while this connection was idle is found before a
            // transaction is sent on it (its COMMIT would otherwise fail with an outcome that
            // looks unknown, and never be sent again).
            self.client.borrow_mut().check();
        }
        let attempt = || -> Result<(Vec<postgres::Row>, u64)> {
            self.live()?;
            let mut statements = Vec::with_capacity(held.len());
            for h in &held {
                statements.push(self.statement(h.sql)?);
            }
            let last = self.statement(sql)?;
            let held_args: Vec<Vec<PgArg<'_>>> = held
                .iter()
                .map(|h| h.params.iter().map(|v| PgArg(ValueRef::from(v))).collect())
                .collect();
            let held_refs: Vec<Vec<&(dyn ToSql + Sync)>> = held_args
                .iter()
                .map(|a| a.iter().map(|x| x as _).collect())
                .collect();
            let first: Vec<(&postgres::Statement, &[&(dyn ToSql + Sync)])> = statements
                .iter()
                .zip(&held_refs)
                .map(|(s, r)| (s, r.as_slice()))
                .collect();
            let args: Vec<PgArg<'_>> = params.iter().map(|v| PgArg(*v)).collect();
            let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
            self.client
                .borrow_mut()
                .pipeline(&first, (&last, &refs), sql)
                .map_err(mapped)
        };
        // A connection found closed (STORE_IO) is tried again; not one that got no answer
        // (STORE_BUSY, closed by the client): the server may have run what was sent, and would
        // be waited on again.
        let out = match attempt() {
            Err(Error::StoreIo(_))
                if fresh
                    && sql != "COMMIT"
                    && !self.relied.get()
                    && self.client.borrow().is_closed() =>
            {
                attempt()
            }
            Err(Error::StoreBusy(m)) if sql == "COMMIT" && self.client.borrow().is_closed() => {
                Err(Error::StoreBusy(format!(
                    "{m}; the transaction may have been committed (an append retried with the same uuid is stored once)"
                )))
            }
            r => r,
        };
        if self.in_txn.get() {
            self.begun.set(true);
        }
        out
    }
}

/// A row of a result, from either engine.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl<'r> Row<'r> {
    /// Column `i` as SQLite would type it.
    pub fn get_ref(&self, i: usize) -> Result<ValueRef<'r>> {
        match *self {
            Row::Sqlite(r) => Ok(r.get_ref(i)?),
            Row::Postgres(r) => pg_value(r, i),
        }
    }

    pub fn get<T: FromValue>(&self, i: usize) -> Result<T> {
        T::from_value(self.get_ref(i)?).ok_or_else(|| {
            Error::StoreCorrupt(format!("column {i} holds a value of the wrong type"))
        })
    }
}

fn pg_value<'r>(r: &'r postgres::Row, i: usize) -> Result<ValueRef<'r>> {
    let ty = r
        .columns()
        .get(i)
        .ok_or_else(|| Error::StoreCorrupt(format!("no column {i}")))?
        .type_()
        .clone();
    let v = match ty {
        Type::INT8 => r
            .try_get::<_, Option<i64>>(i)
            .map(|v| v.map(ValueRef::Integer)),
        Type::INT4 => r
            .try_get::<_, Option<i32>>(i)
            .map(|v| v.map(|v| ValueRef::Integer(v.into()))),
        Type::INT2 => r
            .try_get::<_, Option<i16>>(i)
            .map(|v| v.map(|v| ValueRef::Integer(v.into()))),
        Type::BOOL => r
            .try_get::<_, Option<bool>>(i)
            .map(|v| v.map(|v| ValueRef::Integer(v.into()))),
        Type::FLOAT8 => r
            .try_get::<_, Option<f64>>(i)
            .map(|v| v.map(ValueRef::Real)),
        Type::FLOAT4 => r
            .try_get::<_, Option<f32>>(i)
            .map(|v| v.map(|v| ValueRef::Real(v.into()))),
        Type::BYTEA => r
            .try_get::<_, Option<&[u8]>>(i)
            .map(|v| v.map(ValueRef::Blob)),
        Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => r
            .try_get::<_, Option<&str>>(i)
            .map(|v| v.map(|s| ValueRef::Text(s.as_bytes()))),
        other => {
            return Err(Error::StoreCorrupt(format!(
                "column {i} has type {other}, which the store does not use"
            )))
        }
    };
    Ok(v.map_err(mapped)?.unwrap_or(ValueRef::Null))
}

/// A value read from a column.
pub(crate) trait FromValue: Sized {
    fn from_value(v: ValueRef<'_>) -> Option<Self>;
}

impl FromValue for i64 {
    fn from_value(v: ValueRef<'_>) -> Option<Self> {
        match v {
            ValueRef::Integer(i) => Some(i),
            _ => None,
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: ValueRef<'_>) -> Option<Self> {
        match v {
            ValueRef::Real(f) => Some(f),
            ValueRef::Integer(i) => Some(i as f64),
            _ => None,
        }
    }
}

impl FromValue for String {
    fn from_value(v: ValueRef<'_>) -> Option<Self> {
        match v {
            ValueRef::Text(t) => String::from_utf8(t.to_vec()).ok(),
            _ => None,
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: ValueRef<'_>) -> Option<Self> {
        match v {
            ValueRef::Blob(b) | ValueRef::Text(b) => Some(b.to_vec()),
            _ => None,
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: ValueRef<'_>) -> Option<Self> {
        match v {
            ValueRef::Null => Some(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// A statement parameter.
pub(crate) trait Arg {
    fn arg(&self) -> ValueRef<'_>;
}

impl Arg for i64 {
    fn arg(&self) -> ValueRef<'_> {
        ValueRef::Integer(*self)
    }
}

impl Arg for bool {
    fn arg(&self) -> ValueRef<'_> {
        ValueRef::Integer(*self as i64)
    }
}

impl Arg for f64 {
    fn arg(&self) -> ValueRef<'_> {
        ValueRef::Real(*self)
    }
}

impl Arg for str {
    fn arg(&self) -> ValueRef<'_> {
        ValueRef::Text(self.as_bytes())
    }
}

impl Arg for String {
    fn arg(&self) -> ValueRef<'_> {
        ValueRef::Text(self.as_bytes())
    }
}

impl Arg for [u8] {
    fn arg(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl Arg for Vec<u8> {
    fn arg(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl Arg for ValueRef<'_> {
    fn arg(&self) -> ValueRef<'_> {
        *self
    }
}

impl<T: Arg> Arg for Option<T> {
    fn arg(&self) -> ValueRef<'_> {
        self.as_ref().map_or(ValueRef::Null, Arg::arg)
    }
}

impl<T: Arg + ?Sized> Arg for &T {
    fn arg(&self) -> ValueRef<'_> {
        (**self).arg()
    }
}

/// Statement parameters: `args![a, b]`.
macro_rules! args {
    ($($x:expr),* $(,)?) => {
        [$($crate::storage::db::Arg::arg(&$x)),*]
    };
}
pub(crate) use args;

impl Db {
    pub fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// A listener of the store's committed changes (of session `only`, or of all) on a
    /// connection of its own (`postgres/listen.rs`); None on SQLite, whose watches are woken
    /// by the file (lib/watch.js).
    pub fn listener(
        &self,
        only: Option<i64>,
    ) -> Result<Option<crate::storage::postgres::listen::Listener>> {
        match self {
            Db::Sqlite(..) => Ok(None),
            Db::Postgres(p) => Ok(Some(crate::storage::postgres::listen::Listener::new(
                p.reconnect.clone(),
                p.schema.clone(),
                only,
            )?)),
        }
    }

    /// `sqlite` on SQLite, `postgres` on PostgreSQL: for the few statements the engines spell
    /// differently.
    pub fn pick(&self, sqlite: &'static str, postgres: &'static str) -> &'static str {
        match self {
            Db::Sqlite(..) => sqlite,
            Db::Postgres(_) => postgres,
        }
    }

    /// Runs `f`, a write of session `num`, as the only write of it in this process (PostgreSQL:
    /// `postgres/writers.rs`; SQLite's one connection per file already is).
    pub fn writing<T>(&self, num: i64, f: impl FnOnce() -> T) -> T {
        match self {
            Db::Sqlite(..) => f(),
            Db::Postgres(p) => crate::storage::postgres::writers::writing(p.store, num).hold(f),
        }
    }

    pub fn is_sqlite(&self) -> bool {
        matches!(self, Db::Sqlite(..))
    }

    /// Whether a transaction is open on this connection.
    pub fn in_transaction(&self) -> bool {
        match self {
            Db::Sqlite(c, ..) => !c.is_autocommit(),
            Db::Postgres(p) => p.in_txn.get(),
        }
    }

    /// Runs a statement that begins (`open`) or ends a transaction. A transaction begins after
    /// the batch of appends, if any, is flushed.
    pub(crate) fn transaction_control(&self, sql: &'static str, open: bool) -> Result<()> {
        match self {
            Db::Sqlite(c, batch) if open => {
                if batch.transaction_begins(c)? {
                    return Ok(());
                }
                c.run(sql)
            }
            Db::Sqlite(c, batch) => {
                if batch.transaction_ends() {
                    return Ok(());
                }
                let r = c.run(sql);
                batch.transaction_ended(sql == "COMMIT" && r.is_ok());
                r
            }
            Db::Postgres(p) => p.control(sql, open),
        }
    }

    /// The SQLite connection's batch of appends (`batch.rs`); None on PostgreSQL.
    pub fn batch(&self) -> Option<&Batch> {
        match self {
            Db::Sqlite(_, batch) => Some(batch),
            Db::Postgres(_) => None,
        }
    }

    /// Starts or joins the batch of appends (`batch.rs`): true if the append is to be staged in
    /// it, false if it is to commit in a transaction of its own.
    pub fn join_batch(&self, durability: crate::model::options::Durability) -> Result<bool> {
        match self {
            Db::Sqlite(c, batch) => batch.join(c, durability),
            Db::Postgres(_) => Ok(false),
        }
    }

    /// Has SQLite's waits on this connection last `ms` (the store's busyTimeoutMs).
    pub fn use_busy_timeout(&self, ms: u32) -> Result<()> {
        match self {
            Db::Sqlite(c, batch) => batch.use_busy_timeout(c, ms),
            Db::Postgres(_) => Ok(()),
        }
    }

    /// Acknowledges an append of the batch: its frame is written to the append log.
    pub fn log_append(&self, payload: &[u8]) -> Result<()> {
        match self {
            Db::Sqlite(_, batch) => batch.log(payload),
            Db::Postgres(_) => Ok(()),
        }
    }

    /// An append that joined the batch ends, acknowledged or not (`Batch::end_append`).
    pub fn end_append(&self, ok: bool) -> Result<()> {
        match self {
            Db::Sqlite(c, batch) => batch.end_append(c, ok),
            Db::Postgres(_) => Ok(()),
        }
    }

    /// Runs `read`, a read of session `num` looking up `probe`, without the writes the batch
    /// staged when they cannot affect it (`Batch::read_unaffected`).
    pub fn read_unaffected<T>(
        &self,
        num: i64,
        probe: crate::storage::batch::Probe<'_>,
        read: impl FnOnce() -> T,
    ) -> T {
        match self {
            Db::Sqlite(_, batch) => batch.read_unaffected(num, probe, read),
            Db::Postgres(_) => read(),
        }
    }

    /// Notes a record of session `num` staged in the batch (its uuid and response key), for the
    /// reads that need not see it.
    pub fn note_record(&self, num: i64, uuid: &str, key: Option<&str>) {
        if let Db::Sqlite(_, batch) = self {
            batch.note_record(num, uuid, key);
        }
    }

    /// Notes a tool call's journal row of session `num` as a staged write leaves it: made
    /// (`changed` false: the first row of an id holds) or changed (`Batch::note_call`).
    pub fn note_call(&self, num: i64, entry: &crate::model::tool_call::Entry, changed: bool) {
        if let Db::Sqlite(_, batch) = self {
            batch.note_call(num, entry, changed);
        }
    }

    /// The journal row of call `id` of session `num` an append of the open batch staged, as the
    /// staged writes leave it (`Batch::staged_call`); None on PostgreSQL (nothing is staged).
    pub fn staged_call(&self, num: i64, id: &str) -> Option<crate::model::tool_call::Entry> {
        match self {
            Db::Sqlite(_, batch) => batch.staged_call(num, id),
            Db::Postgres(_) => None,
        }
    }

    /// Runs `read` inside an append without the writes the batch staged: it sees what was
    /// committed before the batch (`Batch::read_without_staged`).
    pub fn read_without_staged<T>(&self, read: impl FnOnce() -> T) -> T {
        match self {
            Db::Sqlite(_, batch) => batch.read_without_staged(read),
            Db::Postgres(_) => read(),
        }
    }

    /// Whether a write's update of session `num`'s row waits for the batch's flush
    /// (`Batch::defer_touch`).
    pub fn defer_touch(&self, touch: crate::storage::batch::Touch) -> bool {
        match self {
            Db::Sqlite(_, batch) => batch.defer_touch(touch),
            Db::Postgres(_) => false,
        }
    }

    /// The record count session `num`'s row holds, once the batch is flushed, when the batch
    /// wrote to it (`Batch::pending_count`).
    pub fn pending_count(&self, num: i64) -> Option<u64> {
        match self {
            Db::Sqlite(_, batch) => batch.pending_count(num),
            Db::Postgres(_) => None,
        }
    }

    /// Flushes the batch if it is full or old enough, unless the write lock is taken.
    pub fn commit_batch_if_due(&self) -> Result<()> {
        match self {
            Db::Sqlite(c, batch) => batch.commit_if_due(c),
            Db::Postgres(_) => Ok(()),
        }
    }

    /// Flushes the batch if it began `age` ago or earlier, unless the write lock is taken.
    pub fn commit_batch_if_older(&self, age: std::time::Duration) -> Result<()> {
        match self {
            Db::Sqlite(c, batch) => batch.flush_if_older(c, age),
            Db::Postgres(_) => Ok(()),
        }
    }

    /// Flushes the batch, if any, waiting for the write lock as any write does.
    pub fn commit_batch(&self) -> Result<()> {
        match self {
            Db::Sqlite(c, batch) => batch.commit(c),
            Db::Postgres(_) => Ok(()),
        }
    }

    /// Closes the append log after its batch was flushed (the process exits).
    pub fn close_log(&self) {
        if let Db::Sqlite(_, batch) = self {
            batch.close_log();
        }
    }

    pub fn batch_open(&self) -> bool {
        matches!(self, Db::Sqlite(_, batch) if batch.is_open())
    }

    /// The frames of acknowledged appends that a failed flush left out of SQLite.
    pub fn owed_appends(&self) -> Result<Option<crate::storage::append_log::LogRead>> {
        match self {
            Db::Sqlite(_, batch) => batch.owed(),
            Db::Postgres(_) => Ok(None),
        }
    }

    /// The owed appends are committed: the append log starts over.
    pub fn owed_paid(&self) -> Result<()> {
        match self {
            Db::Sqlite(_, batch) => batch.emptied(),
            Db::Postgres(_) => Ok(()),
        }
    }

    /// A write whose result nobody reads before the transaction commits (an append's INSERT):
    /// on PostgreSQL it is held back and sent with the next statement, one round trip for
    /// several, and a failure fails that statement or the COMMIT.
    /// On SQLite, inside an append that joined the batch, it is staged for the batch's flush.
    pub fn execute_later(&self, sql: &'static str, params: &[ValueRef<'_>]) -> Result<()> {
        match self {
            Db::Sqlite(_, batch) if batch.staging() => {
                batch.stage(sql, params.iter().map(|v| Value::from(*v)).collect());
                Ok(())
            }
            Db::Sqlite(..) => self.execute(sql, params).map(|_| ()),
            Db::Postgres(p) => p.execute_later(sql, params),
        }
    }

    /// Whether this process knows session `num` to end before seq `next` (PostgreSQL only,
    /// `postgres/tails.rs`): then a write need not ask the server.
    pub fn tail_known(&self, num: i64, next: u64) -> bool {
        match self {
            Db::Sqlite(_, batch) => batch.tail_known(num, next),
            Db::Postgres(p) => {
                let known = tails::is(p.store, num, next);
                if known {
                    p.relied.set(true);
                }
                known
            }
        }
    }

    /// With session `num`'s end as the server has it (`next`): on PostgreSQL, after the store's
    /// connection was made anew (a failover), STORE_CORRUPT if the server lacks records this
    /// process was acknowledged (`tails::lost`), naming them. Said once per reconnection: the
    /// operation that finds it fails, and the session goes on from what the server holds.
    pub fn check_acknowledged(&self, num: i64, id: &str, next: u64) -> Result<()> {
        let Db::Postgres(p) = self else {
            return Ok(());
        };
        let Some(end) = tails::lost(p.store, num, next) else {
            return Ok(());
        };
        let missing = end - next;
        let range = if missing == 1 {
            format!("seq {next}")
        } else {
            format!("seq {next} to {}", end - 1)
        };
        Err(Error::StoreCorrupt(format!(
            "session '{id}' lost {missing} acknowledged record{} ({range}) when the connection \
             was made anew: the server now ends it at seq {next} (a failover to a standby that \
             had not received them); nothing was written after the gap",
            if missing == 1 { "" } else { "s" }
        )))
    }

    /// How many times the connection was made anew (PostgreSQL; 0 on SQLite): a store that sees
    /// it change claims its sessions again at their next write, on the server it now reaches.
    pub fn generation(&self) -> u64 {
        match self {
            Db::Sqlite(..) => 0,
            Db::Postgres(p) => p.generation.get(),
        }
    }

    /// Notes, inside the transaction that made session `num`, that this process made it: its
    /// records and their response keys are all known here (PostgreSQL).
    pub fn note_created(&self, num: i64) {
        if let Db::Postgres(p) = self {
            tails::created(p.store, num);
            p.noted.borrow_mut().push((num, 0));
        }
    }

    /// At the start of a write, with session `num`'s tail as the server has it: whether every
    /// response key of its records is known here (PostgreSQL; `postgres/tails.rs`).
    pub fn keys_hold(&self, num: i64, next: u64) -> bool {
        match self {
            Db::Sqlite(..) => false,
            Db::Postgres(p) => tails::keys_hold(p.store, num, next),
        }
    }

    /// Whether no record of session `num` holds response key `key`, as far as is known here.
    pub fn key_unseen(&self, num: i64, key: &str) -> bool {
        match self {
            Db::Sqlite(..) => false,
            Db::Postgres(p) => tails::key_unseen(p.store, num, key),
        }
    }

    /// Notes that a record of session `num` written in this transaction holds response key `key`.
    pub fn note_key(&self, num: i64, key: &str) {
        if let Db::Postgres(p) = self {
            tails::note_key(p.store, num, key);
        }
    }

    /// Notes, inside a write's transaction, that session `num` now ends before seq `next`.
    pub fn note_tail(&self, num: i64, next: u64) {
        if let Db::Postgres(p) = self {
            tails::note(p.store, num, next);
            p.noted.borrow_mut().push((num, next));
        }
    }

    /// The SQLite connection, for what only the file has (pages, checkpoints, its FTS index),
    /// the batch of appends flushed first.
    pub fn sqlite(&self) -> Result<&Connection> {
        match self {
            Db::Sqlite(c, batch) => {
                batch.before_read(c)?;
                Ok(c)
            }
            Db::Postgres(_) => Err(Error::InvalidInput(
                "this operation is not available on PostgreSQL stores yet".into(),
            )),
        }
    }

    pub fn execute(&self, sql: &'static str, params: &[ValueRef<'_>]) -> Result<usize> {
        match self {
            Db::Sqlite(c, batch) => {
                batch.before_write(c)?;
                Ok(c.prepare_cached(sql)?.execute(sqlite_params(params))?)
            }
            Db::Postgres(p) => p.execute(sql, params),
        }
    }

    /// The first row's `f`, or None when there is no row.
    pub fn query_row<T>(
        &self,
        sql: &'static str,
        params: &[ValueRef<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        match self {
            Db::Sqlite(c, batch) => {
                batch.before_read(c)?;
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(sqlite_params(params))?;
                match rows.next()? {
                    Some(r) => f(&Row::Sqlite(r)).map(Some),
                    None => Ok(None),
                }
            }
            Db::Postgres(p) => match p.query(sql, params)?.first() {
                Some(r) => f(&Row::Postgres(r)).map(Some),
                None => Ok(None),
            },
        }
    }

    /// Calls `f` on each row until it returns false.
    pub fn each(
        &self,
        sql: &'static str,
        params: &[ValueRef<'_>],
        mut f: impl FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        match self {
            Db::Sqlite(c, batch) => {
                batch.before_read(c)?;
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(sqlite_params(params))?;
                while let Some(r) = rows.next()? {
                    if !f(&Row::Sqlite(r))? {
                        break;
                    }
                }
                Ok(())
            }
            // Fetched whole before `f` runs: `f` may use the client (blobs of a record).
            Db::Postgres(p) => {
                for r in &p.query(sql, params)? {
                    if !f(&Row::Postgres(r))? {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    /// Every row's `f`.
    pub fn rows<T>(
        &self,
        sql: &'static str,
        params: &[ValueRef<'_>],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each(sql, params, |r| {
            out.push(f(r)?);
            Ok(true)
        })?;
        Ok(out)
    }
}

fn sqlite_params<'a>(params: &'a [ValueRef<'a>]) -> impl rusqlite::Params + 'a {
    rusqlite::params_from_iter(params.iter().map(|v| ToSqlOutput::Borrowed(*v)))
}

/// SQLite's `?N` placeholders as PostgreSQL's `$N` (outside quoted text).
fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => out.push('$'),
            c => out.push(c),
        }
    }
    out
}

/// A value bound to a PostgreSQL parameter, converted to the type the server expects there.
#[derive(Debug)]
struct PgArg<'a>(ValueRef<'a>);

impl ToSql for PgArg<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            ValueRef::Null => Ok(IsNull::Yes),
            ValueRef::Integer(i) => match *ty {
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                Type::FLOAT8 => (i as f64).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => i.to_string().to_sql(ty, out),
                _ => i.to_sql(ty, out),
            },
            ValueRef::Real(f) => f.to_sql(ty, out),
            ValueRef::Text(t) => std::str::from_utf8(t)?.to_sql(ty, out),
            ValueRef::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Runs a statement with no parameters (transaction control).
trait Run {
    fn run(&self, sql: &'static str) -> Result<()>;
}

impl Run for Connection {
    fn run(&self, sql: &'static str) -> Result<()> {
        self.prepare_cached(sql)?.execute([])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::placeholders;

    #[test]
    fn placeholders_outside_quotes_become_dollars() {
        assert_eq!(
            placeholders("SELECT '?1', x FROM t WHERE a = ?1 AND b = ?12"),
            "SELECT '?1', x FROM t WHERE a = $1 AND b = $12"
        );
    }
}
