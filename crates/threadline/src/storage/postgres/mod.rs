//! The PostgreSQL engine's foundation: the `postgres://` URL (with the schema it names), the
//! connection with its timeouts, errors mapped to the store's codes, and the versioned schema.
//! Records keep the SQLite layout (ids `num << SEQ_BITS | seq`, the same checksummed columns),
//! so a session moves between engines as the same rows.

pub(crate) mod client;
pub(crate) mod error;
pub(crate) mod lease;
pub(crate) mod listen;
pub(crate) mod schema;
pub(crate) mod tails;
pub(crate) mod tls;
pub(crate) mod url;
pub(crate) mod writers;

use std::time::Duration;

use self::client::PgClient;

use crate::error::Result;
use crate::model::options::StoreOptions;

pub(crate) use self::url::PgUrl;

/// Whether `path` names a PostgreSQL server rather than a file: a `postgres://` or
/// `postgresql://` URL, the scheme in any case.
pub(crate) fn is_url(path: &str) -> bool {
    url::scheme_len(path).is_some()
}

/// Connects to the server `url` names, with its schema created or brought up to date (a
/// readonly store only checks it). Every wait on the server is bounded by `busyTimeoutMs`
/// (docs/engines.md): the connection as a whole (TCP, TLS, startup and authentication; the URL's
/// `connect_timeout` instead when it gives one), lock waits and statements on the server
/// (`lock_timeout`, `statement_timeout`), and each call on the client, a little longer than the
/// server's own bound, so that a live server's timeout (which leaves the connection usable) comes
/// first and only one that does not answer at all is cut off. TCP keepalive finds a connection
/// the network lost while it was idle.
pub(crate) fn connect(url: &PgUrl, options: &StoreOptions) -> Result<PgClient> {
    let mut config = url.config.clone();
    let ms = options.busy_timeout_ms.max(1);
    let busy = Duration::from_millis(u64::from(ms));
    config.connect_timeout(url.connect_timeout.unwrap_or(busy));
    if !url.keepalives_given {
        config
            .keepalives(true)
            .keepalives_idle(busy.max(Duration::from_secs(1)))
            .keepalives_interval(Duration::from_secs(1))
            .keepalives_retries(3);
    }
    if config.get_application_name().is_none() {
        config.application_name("threadline");
    }
    let mut client = url.tls.connect(&config)?;
    client.set_wait(call_wait(busy));
    client
        .batch_execute(&format!(
            "SET lock_timeout = {ms}; SET statement_timeout = {ms}; SET idle_in_transaction_session_timeout = {}",
            ms.saturating_mul(10).max(60_000),
        ))
        .map_err(error::mapped)?;
    schema::prepare(&mut client, &url.schema, options.readonly, ms)?;
    // The storage layer's statements name tables without their schema.
    client
        .batch_execute(&format!("SET search_path TO {}", url.quoted_schema()))
        .map_err(error::mapped)?;
    Ok(client)
}

/// How long a call waits for the server's answer: `busy`, and as much again up to a second, for
/// the server's own timeout (at `busy`) to arrive first.
pub(crate) fn call_wait(busy: Duration) -> Duration {
    busy + busy.min(Duration::from_secs(1))
}

/// Opens the store a `postgres://` URL names: its connection, as the storage layer uses it.
pub(crate) fn open(text: &str, options: &StoreOptions) -> Result<crate::storage::db::Db> {
    let url = PgUrl::parse(text)?;
    let mut client = connect(&url, options)?;
    let store = schema::store_id(&mut client)?;
    let schema = url.schema.clone();
    let options = options.clone();
    let reconnect = std::sync::Arc::new(move || connect(&url, &options));
    Ok(crate::storage::db::Db::Postgres(Box::new(
        crate::storage::db::Pg::new(client, schema, store, reconnect),
    )))
}

#[cfg(test)]
pub(crate) mod test_server {
    /// The server the tests run against: `THREADLINE_TEST_POSTGRES` (scripts/postgres.js starts
    /// one for `npm test`). None when it is not set: the test says so and passes nothing off as
    /// tested, unless `THREADLINE_REQUIRE_POSTGRES` is set (`.ci/run` sets it), which fails it.
    pub fn url() -> Option<String> {
        required("THREADLINE_TEST_POSTGRES", "PostgreSQL tests")
    }

    /// The server's URL and the file of the CA that signed its TLS certificate
    /// (`THREADLINE_TEST_POSTGRES_CA`, set by scripts/postgres.js beside the URL).
    pub fn url_and_ca() -> Option<(String, String)> {
        let url = url()?;
        Some((url, required("THREADLINE_TEST_POSTGRES_CA", "TLS tests")?))
    }

    /// The variable's value; None (said) when unset, a failure when `.ci/run` requires it.
    fn required(name: &str, tests: &str) -> Option<String> {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => Some(v),
            _ => {
                assert!(
                    std::env::var_os("THREADLINE_REQUIRE_POSTGRES").is_none(),
                    "THREADLINE_REQUIRE_POSTGRES is set, but {name} is not"
                );
                eprintln!("{name} is not set: {tests} not run");
                None
            }
        }
    }

    /// The URL with a schema of its own for one test.
    pub fn with_schema(base: &str, name: &str) -> String {
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}schema=t_{name}_{}", std::process::id())
    }
}
