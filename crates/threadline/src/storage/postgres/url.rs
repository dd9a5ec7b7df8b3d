//! `postgres://user:password@host:port/db?schema=name&...`: the libpq-style URL `tokio-postgres`
//! reads, plus `schema`, which names the schema Threadline keeps its tables in (default
//! `threadline`), so several stores can share one database.

use std::str::FromStr;

use super::tls::{Tls, TlsParams};
use crate::error::{Error, Result};

#[derive(Clone)]
pub(crate) struct PgUrl {
    pub config: tokio_postgres::Config,
    pub schema: String,
    pub tls: Tls,
}

pub const DEFAULT_SCHEMA: &str = "threadline";

impl PgUrl {
    pub fn parse(text: &str) -> Result<PgUrl> {
        let bad = |why: String| Error::InvalidInput(format!("path: {why}"));
        let mut url =
            ::url::Url::parse(text).map_err(|e| bad(format!("not a valid PostgreSQL URL: {e}")))?;
        let mut schema = None;
        let mut tls = TlsParams::default();
        let rest: Vec<(String, String)> = url
            .query_pairs()
            .filter_map(|(k, v)| {
                if k == "schema" {
                    schema = Some(v.into_owned());
                    None
                } else if tls.take(&k, &v) {
                    None
                } else {
                    Some((k.into_owned(), v.into_owned()))
                }
            })
            .collect();
        if rest.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(&rest);
        }
        let schema = schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_string());
        check_schema(&schema).map_err(|why| bad(format!("schema '{schema}': {why}")))?;
        let mut config = tokio_postgres::Config::from_str(url.as_str())
            .map_err(|e| bad(format!("not a valid PostgreSQL URL: {e}")))?;
        let tls = super::tls::configure(&tls, &mut config).map_err(bad)?;
        Ok(PgUrl {
            config,
            schema,
            tls,
        })
    }

    /// The URL as a store shows it (`store.path`): without its password.
    pub fn redacted(text: &str) -> String {
        match ::url::Url::parse(text) {
            Ok(mut u) if u.password().is_some() => {
                let _ = u.set_password(Some("***"));
                u.to_string()
            }
            _ => text.to_string(),
        }
    }

    /// The schema, quoted for SQL.
    pub fn quoted_schema(&self) -> String {
        quote(&self.schema)
    }
}

/// A schema name is a plain lowercase identifier: it goes into SQL text, so nothing that needs
/// quoting rules is accepted.
fn check_schema(s: &str) -> std::result::Result<(), &'static str> {
    let mut chars = s.chars();
    match chars.next() {
        None => return Err("must not be empty"),
        Some(c) if !(c.is_ascii_lowercase() || c == '_') => {
            return Err("must start with a lowercase letter or _")
        }
        _ => {}
    }
    if s.len() > 63 {
        return Err("must be at most 63 characters");
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err("may hold only lowercase letters, digits and _");
    }
    if s.starts_with("pg_") {
        return Err("names starting with pg_ are PostgreSQL's own");
    }
    Ok(())
}

pub(crate) fn quote(ident: &str) -> String {
    format!("\"{ident}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_comes_out_of_the_url_and_the_rest_stays() {
        let u = PgUrl::parse("postgres://me:pw@127.0.0.1:5433/db?schema=team_a&connect_timeout=3")
            .unwrap();
        assert_eq!(u.schema, "team_a");
        assert_eq!(u.config.get_user(), Some("me"));
        assert_eq!(u.config.get_dbname(), Some("db"));
        assert_eq!(
            u.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        let d = PgUrl::parse("postgresql://127.0.0.1/db").unwrap();
        assert_eq!(d.schema, DEFAULT_SCHEMA);
    }

    #[test]
    fn schema_names_that_would_need_quoting_are_refused_with_the_reason() {
        for (s, why) in [
            ("", "must not be empty"),
            ("Team", "must start with a lowercase letter or _"),
            ("a-b", "may hold only lowercase letters, digits and _"),
            ("a\";drop", "may hold only lowercase letters, digits and _"),
            ("pg_catalog", "PostgreSQL's own"),
        ] {
            let e = PgUrl::parse(&format!("postgres://h/db?schema={}", s.replace('"', "%22")))
                .err()
                .unwrap();
            assert_eq!(e.code(), "INVALID_INPUT");
            assert!(e.message().contains(why), "{s}: {}", e.message());
        }
    }

    #[test]
    fn tls_parameters_are_taken_out_of_the_url_and_set_the_mode() {
        use tokio_postgres::config::SslMode;
        let u = PgUrl::parse("postgres://h/db?sslmode=require&schema=s&connect_timeout=2").unwrap();
        assert!(matches!(u.tls, Tls::On(_)));
        assert_eq!(u.config.get_ssl_mode(), SslMode::Require);
        assert_eq!(u.schema, "s");
        let d = PgUrl::parse("postgres://h/db?sslmode=disable").unwrap();
        assert!(matches!(d.tls, Tls::Off));
        assert_eq!(d.config.get_ssl_mode(), SslMode::Disable);
        let p = PgUrl::parse("postgres://h/db").unwrap();
        assert!(matches!(p.tls, Tls::On(_)));
        assert_eq!(p.config.get_ssl_mode(), SslMode::Prefer);
    }
}
