//! PostgreSQL errors as the store's codes. The server's SQLSTATE decides where there is one: a
//! wait that ran out (lock or statement timeout, serialization failure, deadlock, no answer in
//! time) is STORE_BUSY;
//! a lost connection, a server shutting down, refused credentials, a full disk are STORE_IO;
//! data the server reports as corrupted is STORE_CORRUPT.

use tokio_postgres::error::SqlState;

use super::client::PgError;
use crate::error::Error;

pub(crate) fn mapped(e: impl Into<PgError>) -> Error {
    let e = match e.into() {
        PgError::Pg(e) => e,
        // The connection is closed: the next call makes a new one.
        timed_out @ PgError::TimedOut { .. } => {
            return Error::StoreBusy(format!(
                "PostgreSQL: {timed_out} (the server is down, stopped or overloaded; this connection is closed, the next call opens a new one)"
            ))
        }
    };
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
    if code == &SqlState::DIVISION_BY_ZERO {
        // `write_order::touch_records`: the session's row is gone.
        return Error::NotFound(
            "the session was deleted by another process while this write was made: nothing of it was stored"
                .into(),
        );
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
    fn a_server_that_accepts_and_never_answers_is_store_busy_within_the_timeout() {
        // Accepted by the kernel (the listen backlog) and never answered.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        for query in ["sslmode=disable", "sslmode=prefer"] {
            let url = crate::storage::postgres::PgUrl::parse(&format!(
                "postgres://x:pw@127.0.0.1:{port}/db?{query}"
            ))
            .unwrap();
            let options = crate::model::options::StoreOptions {
                busy_timeout_ms: 300,
                ..Default::default()
            };
            let t = std::time::Instant::now();
            let e = crate::storage::postgres::connect(&url, &options)
                .err()
                .unwrap();
            let took = t.elapsed();
            assert_eq!(e.code(), "STORE_BUSY", "{}", e.message());
            assert!(
                e.message().contains("within 300 ms while connecting"),
                "{}",
                e.message()
            );
            assert!(
                e.message().contains(&format!("127.0.0.1 port {port}")),
                "{}",
                e.message()
            );
            assert!(took >= std::time::Duration::from_millis(290), "{took:?}");
            assert!(took < std::time::Duration::from_secs(3), "{took:?}");
        }
    }

    #[test]
    fn a_call_the_server_does_not_answer_in_time_is_store_busy_and_closes_the_connection() {
        let Some(base) = test_server::url() else {
            return;
        };
        let url = test_server::with_schema(&base, "wait");
        let url = crate::storage::postgres::PgUrl::parse(&url).unwrap();
        let options = crate::model::options::StoreOptions {
            busy_timeout_ms: 300,
            ..Default::default()
        };
        let mut c = crate::storage::postgres::connect(&url, &options).unwrap();
        // The server's own bound first: STORE_BUSY, and the connection goes on.
        let e = c
            .batch_execute("SELECT pg_sleep(5)")
            .map_err(mapped)
            .err()
            .unwrap();
        assert_eq!(e.code(), "STORE_BUSY", "{}", e.message());
        assert!(e.message().contains("statement timeout"), "{}", e.message());
        assert!(!c.is_closed());
        // A server that does not answer in time (here: told to take its time): the client's.
        c.batch_execute("SET statement_timeout = 0").unwrap();
        let t = std::time::Instant::now();
        let e = c
            .batch_execute("SELECT pg_sleep(5)")
            .map_err(mapped)
            .err()
            .unwrap();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(e.code(), "STORE_BUSY", "{}", e.message());
        assert!(
            e.message()
                .contains("no answer from the server within 600 ms to `SELECT pg_sleep(5)`"),
            "{}",
            e.message()
        );
        // Closed: nothing is waited on it again.
        assert!(c.is_closed());
        let t = std::time::Instant::now();
        assert!(c.batch_execute("SELECT 1").is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        let mut d = crate::storage::postgres::connect(&url, &options).unwrap();
        d.batch_execute(&format!("DROP SCHEMA {} CASCADE", url.quoted_schema()))
            .unwrap();
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
