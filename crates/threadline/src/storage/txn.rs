//! Write transactions with their BEGIN and COMMIT statements prepared once: rusqlite's
//! `Transaction` parses them anew each time, a measurable share of an append.

use std::ops::Deref;

use rusqlite::Connection;

use crate::error::Result;

/// A `BEGIN IMMEDIATE` transaction, rolled back on drop unless committed.
pub struct Txn<'c> {
    conn: &'c Connection,
    done: bool,
}

impl<'c> Txn<'c> {
    pub fn immediate(conn: &'c Connection) -> Result<Txn<'c>> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Txn { conn, done: false })
    }

    /// A read transaction: one consistent view of the store until it is dropped.
    pub fn deferred(conn: &'c Connection) -> Result<Txn<'c>> {
        conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(Txn { conn, done: false })
    }

    pub fn commit(mut self) -> Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.done = true;
        Ok(())
    }
}

impl Deref for Txn<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if !self.done && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}
