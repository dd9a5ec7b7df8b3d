//! Write transactions with their BEGIN and COMMIT statements prepared once: rusqlite's
//! `Transaction` parses them anew each time, a measurable share of an append.

use std::ops::Deref;

use crate::error::Result;
use crate::storage::db::Db;

/// A write transaction (`BEGIN IMMEDIATE` on SQLite), rolled back on drop unless committed.
pub(crate) struct Txn<'c> {
    conn: &'c Db,
    done: bool,
}

impl<'c> Txn<'c> {
    pub fn immediate(conn: &'c Db) -> Result<Txn<'c>> {
        conn.transaction_control(conn.pick("BEGIN IMMEDIATE", "BEGIN"), true)?;
        Ok(Txn { conn, done: false })
    }

    /// A read transaction: one consistent view of the store until it is dropped.
    pub fn deferred(conn: &'c Db) -> Result<Txn<'c>> {
        conn.transaction_control(
            conn.pick("BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
            true,
        )?;
        Ok(Txn { conn, done: false })
    }

    pub fn commit(mut self) -> Result<()> {
        self.conn.transaction_control("COMMIT", false)?;
        self.done = true;
        Ok(())
    }
}

impl Deref for Txn<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.conn
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // SQLite may have rolled back already (some errors end the transaction).
        if self.conn.in_transaction() {
            let _ = self.conn.transaction_control("ROLLBACK", false);
        }
    }
}
