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

use tokio_postgres::Config;

use self::client::PgClient;
use self::url::Attrs;

use crate::error::{Error, Result};
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
///
/// With several hosts (libpq's multi-host URL) each is tried in the URL's order, each within that
/// bound (as libpq's `connect_timeout` is per host), and the first that answers and is what
/// `target_session_attrs` asks for is kept; when none is, the error names what each host did.
pub(crate) fn connect(url: &PgUrl, options: &StoreOptions) -> Result<PgClient> {
    let ms = options.busy_timeout_ms.max(1);
    let configs = url.host_configs();
    let several = configs.len() > 1;
    let mut failures = Vec::new();
    let mut chosen = None;
    for config in configs {
        let at = client::server(&config);
        match connect_host(url, config, options) {
            Ok(c) => {
                chosen = Some(c);
                break;
            }
            Err(e) if !several => return Err(e),
            Err(e) => failures.push((at, e)),
        }
    }
    let Some(mut client) = chosen else {
        return Err(no_host(url.attrs, failures));
    };
    schema::prepare(&mut client, &url.schema, options.readonly, ms)?;
    // The storage layer's statements name tables without their schema.
    client
        .batch_execute(&format!("SET search_path TO {}", url.quoted_schema()))
        .map_err(error::mapped)?;
    Ok(client)
}

/// One host's connection, with its session's timeouts set, when it is what
/// `target_session_attrs` asks for.
fn connect_host(url: &PgUrl, mut config: Config, options: &StoreOptions) -> Result<PgClient> {
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
    if url.attrs != Attrs::Any {
        // libpq's checks: read-write and read-only by the session's default (a standby's is
        // read-only, and so is one whose server, database or role defaults to it); primary by
        // whether the server is in recovery (a standby).
        let row = client
            .query_one(
                "SELECT current_setting('transaction_read_only') = 'on', pg_is_in_recovery()",
                &[],
            )
            .map_err(error::mapped)?;
        let read_only: bool = row.get(0);
        let standby: bool = row.get(1);
        let wrong = match url.attrs {
            Attrs::Any => None,
            Attrs::ReadWrite if read_only => Some("its sessions are read-only"),
            Attrs::ReadOnly if !read_only => Some("its sessions are not read-only"),
            Attrs::Primary if standby => Some("it is a standby (in recovery)"),
            _ => None,
        };
        if let Some(why) = wrong {
            let _ = client.close();
            return Err(Error::StoreIo(format!(
                "PostgreSQL: {why}, and the URL asks for target_session_attrs={}",
                attrs_name(url.attrs)
            )));
        }
    }
    Ok(client)
}

fn attrs_name(a: Attrs) -> &'static str {
    match a {
        Attrs::Any => "any",
        Attrs::ReadWrite => "read-write",
        Attrs::ReadOnly => "read-only",
        Attrs::Primary => "primary",
    }
}

/// No host of several took the connection: STORE_BUSY when none answered in time, else STORE_IO;
/// the message says what each did.
fn no_host(attrs: Attrs, failures: Vec<(String, Error)>) -> Error {
    let busy = failures
        .iter()
        .all(|(_, e)| matches!(e, Error::StoreBusy(_)));
    let each: Vec<String> = failures
        .iter()
        .map(|(at, e)| {
            let m = e.message();
            format!("{at}: {}", m.strip_prefix("PostgreSQL: ").unwrap_or(m))
        })
        .collect();
    let wanted = match attrs {
        Attrs::Any => String::new(),
        a => format!(" (target_session_attrs={})", attrs_name(a)),
    };
    let m = format!(
        "PostgreSQL: none of the {} hosts took the connection{wanted}: {}",
        failures.len(),
        each.join("; ")
    );
    if busy {
        Error::StoreBusy(m)
    } else {
        Error::StoreIo(m)
    }
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
    let busy = Duration::from_millis(u64::from(options.busy_timeout_ms.max(1)));
    let reconnect = std::sync::Arc::new(move || connect(&url, &options));
    Ok(crate::storage::db::Db::Postgres(Box::new(
        crate::storage::db::Pg::new(client, schema, store, reconnect, busy),
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
