//! PostgreSQL errors as the store's codes. The server's SQLSTATE decides where there is one: a
//! wait that ran out (lock or statement timeout, serialization failure, deadlock) is STORE_BUSY;
//! a lost connection, a server shutting down, refused credentials, a full disk are STORE_IO;
//! data the server reports as corrupted is STORE_CORRUPT.

use tokio_postgres::error::SqlState;

use crate::error::Error;

pub(crate) fn mapped(e: tokio_postgres::Error) -> Error {
    let Some(db) = e.as_db_error() else {
        // No answer from the server: connection refused, closed or timed out, or a TLS
        // handshake that failed. The causes say which (a certificate's fault is only there).
        let mut text = format!("PostgreSQL: {e}");
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            let said = c.to_string();
            if !text.contains(&said) {
                text.push_str(": ");
                text.push_str(&said);
            }
            cause = c.source();
        }
        return Error::StoreIo(text);
    };
    let code = db.code();
    let text = format!("PostgreSQL: {} ({})", db.message(), code.code());
    if [
        SqlState::LOCK_NOT_AVAILABLE,
        SqlState::QUERY_CANCELED,
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
    ]
    .contains(code)
    {
        return Error::StoreBusy(text);
    }
    if [SqlState::DATA_CORRUPTED, SqlState::INDEX_CORRUPTED].contains(code) {
        return Error::StoreCorrupt(text);
    }
    Error::StoreIo(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::postgres::test_server;

    #[test]
    fn a_server_that_is_not_there_is_store_io_within_the_timeout() {
        // A port nobody listens on (the test server's port + 1 is not guaranteed free, so a
        // reserved one: 1 is tcpmux, never a PostgreSQL server).
        let url =
            crate::storage::postgres::PgUrl::parse("postgres://x@127.0.0.1:1/db?schema=t").unwrap();
        let options = crate::model::options::StoreOptions {
            busy_timeout_ms: 500,
            ..Default::default()
        };
        let t = std::time::Instant::now();
        let e = crate::storage::postgres::connect(&url, &options)
            .err()
            .unwrap();
        assert_eq!(e.code(), "STORE_IO", "{}", e.message());
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_lock_held_past_the_busy_timeout_is_store_busy() {
        let Some(base) = test_server::url() else {
            return;
        };
        let url = test_server::with_schema(&base, "busy");
        let url = crate::storage::postgres::PgUrl::parse(&url).unwrap();
        let options = crate::model::options::StoreOptions {
            busy_timeout_ms: 200,
            ..Default::default()
        };
        let mut a = crate::storage::postgres::connect(&url, &options).unwrap();
        let mut b = crate::storage::postgres::connect(&url, &options).unwrap();
        let s = url.quoted_schema();
        a.batch_execute(&format!(
            "BEGIN; LOCK TABLE {s}.sessions IN ACCESS EXCLUSIVE MODE"
        ))
        .unwrap();
        let e = b
            .batch_execute(&format!("SELECT count(*) FROM {s}.sessions"))
            .map_err(mapped)
            .err()
            .unwrap();
        assert_eq!(e.code(), "STORE_BUSY", "{}", e.message());
        a.batch_execute("ROLLBACK").unwrap();
        b.batch_execute(&format!("DROP SCHEMA {s} CASCADE"))
            .unwrap();
    }
}
