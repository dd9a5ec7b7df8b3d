//! `postgres://user:password@host:port/db?schema=name&...`: libpq's connection URI, plus
//! `schema`, which names the schema Threadline keeps its tables in (default `threadline`), so
//! several stores can share one database.
//!
//! Read here, by libpq's grammar, rather than by a general URL parser (which refuses what libpq
//! takes: a multi-host list, an unencoded ':' in a password) or by tokio-postgres (which cannot
//! say which parameters were given, nor read `target_session_attrs=primary`). Errors name
//! the part at fault and never echo the user name and password part, a `password` parameter, or
//! text that could be a misplaced piece of a password.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use tokio_postgres::config::{ChannelBinding, LoadBalanceHosts, SslNegotiation};

use super::tls::{Tls, TlsParams};
use crate::error::{Error, Result};

/// What a host must be for a connection to stay with it (libpq's `target_session_attrs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attrs {
    Any,
    /// `SHOW transaction_read_only` is off (a standby, or a server or role whose
    /// transactions default to read-only, is passed over)
    ReadWrite,
    ReadOnly,
    /// not in recovery (`pg_is_in_recovery()`): not a standby
    Primary,
}

/// One host of the URL's list, with its address and port as the lists pair them.
#[derive(Clone)]
pub(crate) struct Target {
    host: Option<Host>,
    hostaddr: Option<IpAddr>,
    port: Option<u16>,
}

#[derive(Clone)]
pub(crate) struct PgUrl {
    /// every setting, the whole host list included (what the URL says)
    pub config: tokio_postgres::Config,
    /// every setting but the hosts: each host's connection is this with one host
    base: tokio_postgres::Config,
    targets: Vec<Target>,
    pub attrs: Attrs,
    pub schema: String,
    pub tls: Tls,
    /// `connect_timeout` when the URL gives one above zero: it bounds the whole connection
    /// (TCP, TLS, startup and authentication) as in libpq, where 1 s counts as 2 s
    pub connect_timeout: Option<Duration>,
    /// whether the URL sets TCP keepalive itself (`keepalives*`): then Threadline's are not used
    pub keepalives_given: bool,
}

pub const DEFAULT_SCHEMA: &str = "threadline";

/// The URI schemes libpq takes, in any case (RFC 3986 schemes are case-insensitive).
const SCHEMES: [&str; 2] = ["postgresql://", "postgres://"];

/// The length of the URL's scheme and `://`, when `text` starts with one of libpq's.
pub(crate) fn scheme_len(text: &str) -> Option<usize> {
    SCHEMES
        .iter()
        .find(|s| {
            text.get(..s.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(s))
        })
        .map(|s| s.len())
}

/// The parameters Threadline reads besides `password` (docs/engines.md lists them too).
const KNOWN: [&str; 23] = [
    "application_name",
    "channel_binding",
    "connect_timeout",
    "dbname",
    "fallback_application_name",
    "host",
    "hostaddr",
    "keepalives",
    "keepalives_count",
    "keepalives_idle",
    "keepalives_interval",
    "load_balance_hosts",
    "options",
    "port",
    "schema",
    "sslcert",
    "sslkey",
    "sslmode",
    "sslnegotiation",
    "sslrootcert",
    "target_session_attrs",
    "tcp_user_timeout",
    "user",
];

/// libpq's other parameters: refused by name, even after a password (see `read`).
const LIBPQ_OTHER: [&str; 27] = [
    "client_encoding",
    "gssdelegation",
    "gssencmode",
    "gsslib",
    "krbsrvname",
    "max_protocol_version",
    "min_protocol_version",
    "oauth_client_id",
    "oauth_client_secret",
    "oauth_issuer",
    "oauth_scope",
    "passfile",
    "replication",
    "require_auth",
    "requirepeer",
    "requiressl",
    "service",
    "ssl_max_protocol_version",
    "ssl_min_protocol_version",
    "sslcertmode",
    "sslcompression",
    "sslcrl",
    "sslcrldir",
    "sslkeylogfile",
    "sslpassword",
    "sslsni",
    "target_server_type",
];

/// A URL cut into libpq's parts (still percent-encoded).
struct Parts<'a> {
    userinfo: Option<&'a str>,
    hostspec: &'a str,
    dbname: Option<&'a str>,
    query: Option<&'a str>,
}

/// Cuts `rest` (the URL after `scheme://`) as libpq does: the user name and password end at the
/// first '@' before any '/'; the host list at the first '/' or '?'; the database name at '?'.
fn split(rest: &str) -> std::result::Result<Parts<'_>, String> {
    let (userinfo, rest) = match rest.find(['@', '/']) {
        Some(i) if rest.as_bytes()[i] == b'@' => (Some(&rest[..i]), &rest[i + 1..]),
        _ => (None, rest),
    };
    // Another '@' is most likely one in a password, or a '/' before the '@' that ends it: where
    // the password ends cannot be told, so nothing of the URL is echoed.
    if rest.contains('@') {
        return Err(
            "an '@' that does not end the user name and password: in a password (or any part) write '@' as %40, '/' as %2F".into(),
        );
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (hostspec, rest) = rest.split_at(end);
    let (dbname, query) = match rest.strip_prefix('/') {
        Some(path) => match path.split_once('?') {
            Some((db, q)) => (Some(db), Some(q)),
            None => (Some(path), None),
        },
        None => (None, rest.strip_prefix('?')),
    };
    Ok(Parts {
        userinfo,
        hostspec,
        dbname,
        query,
    })
}

/// libpq's percent-decoding: `%XX` is a byte; a '%' without two hex digits, or `%00`, is an
/// error (the part named, never its text: it may be a password).
fn decode(s: &str, part: &str) -> std::result::Result<Vec<u8>, String> {
    let bad = || {
        format!("{part}: a '%' must be followed by two hex digits (write '%' itself as %25), and %00 is not allowed")
    };
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .filter(|&v| v != 0)
                .ok_or_else(bad)?;
            out.push(byte);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn decode_text(s: &str, part: &str) -> std::result::Result<String, String> {
    String::from_utf8(decode(s, part)?).map_err(|_| format!("{part}: not UTF-8 once decoded"))
}

/// A parameter name fit to echo: a plain word. Anything else is named by its place.
fn key_shown(key: &str, index: usize) -> String {
    if !key.is_empty()
        && key.len() <= 40
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        format!("'{key}'")
    } else {
        format!("number {}", index + 1)
    }
}

/// A whole number of seconds, as libpq reads one (zero or less: not set).
fn seconds(key: &str, value: &str) -> std::result::Result<Option<Duration>, String> {
    let n: i64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{key}: expected a whole number of seconds"))?;
    Ok((n > 0).then(|| Duration::from_secs(n as u64)))
}

fn not_one_of(key: &str, value: &str, what: &str) -> String {
    format!("{key}: '{value}' is not one of {what}")
}

/// Where the server is: a host name or IP address, or the directory of its Unix socket.
#[derive(Clone)]
enum Host {
    Tcp(String),
    #[cfg_attr(not(unix), allow(dead_code))]
    Socket(std::path::PathBuf),
}

/// A host as written in the URL's host list or in `?host=` (decoded): a path is a socket's
/// directory.
fn host(decoded: String) -> std::result::Result<Host, String> {
    if decoded.is_empty() {
        return Err("host: empty".into());
    }
    if decoded.starts_with('/') {
        #[cfg(unix)]
        return Ok(Host::Socket(decoded.into()));
        #[cfg(not(unix))]
        return Err("host: a Unix socket's directory, and this system has none".into());
    }
    if decoded.contains(['[', ']', '/', ' ']) {
        return Err("host: not a host name or address".into());
    }
    Ok(Host::Tcp(decoded))
}

/// A port number. Its text is echoed only when it is digits (other text may be a password
/// typed where the URL has its port).
fn port(s: &str) -> std::result::Result<u16, String> {
    let s = decode_text(s, "port")?;
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err("port: not a number".into());
    }
    match s.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Ok(p as u16),
        _ if s.len() <= 12 => Err(format!("port {s}: expected a number from 1 to 65535")),
        _ => Err("port: expected a number from 1 to 65535".into()),
    }
}

/// The URL's host list: `host[:port]` or `[ipv6][:port]`, several separated by ',' (libpq's
/// multi-host form). Empty: no host given.
fn hostspec(spec: &str) -> std::result::Result<Vec<HostPort>, String> {
    if spec.is_empty() {
        return Ok(Vec::new());
    }
    spec.split(',').map(one_host).collect()
}

/// A host of the list (none: only a port given) and its port (none: the default).
type HostPort = (Option<Host>, Option<u16>);

fn one_host(spec: &str) -> std::result::Result<HostPort, String> {
    let (name, port_text) = if let Some(inner) = spec.strip_prefix('[') {
        let Some((addr, after)) = inner.split_once(']') else {
            return Err("host: '[' opens an IPv6 address without its closing ']'".into());
        };
        if addr.parse::<Ipv6Addr>().is_err() {
            return Err("host: what '[...]' holds is not an IPv6 address".into());
        }
        let port_text = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or("host: after ']' comes ':' and the port")?,
            ),
        };
        return Ok((
            Some(Host::Tcp(addr.to_string())),
            port_text.map(port).transpose()?,
        ));
    } else {
        match spec.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (spec, None),
        }
    };
    let name = decode_text(name, "host")?;
    // `host:` with an empty port: libpq's default port
    let port = match port_text {
        Some("") | None => None,
        Some(p) => Some(port(p)?),
    };
    let host = if name.is_empty() {
        None
    } else {
        Some(host(name)?)
    };
    Ok((host, port))
}

/// A comma-separated list of a parameter (`host`, `hostaddr`, `port`), each item read by `one`;
/// an empty item is None (libpq's default for that host).
fn list<T>(
    value: &str,
    one: impl Fn(String) -> std::result::Result<T, String>,
) -> std::result::Result<Vec<Option<T>>, String> {
    value
        .split(',')
        .map(|v| match v.trim() {
            "" => Ok(None),
            v => one(v.to_string()).map(Some),
        })
        .collect()
}

impl PgUrl {
    pub fn parse(text: &str) -> Result<PgUrl> {
        Self::read(text).map_err(|why| Error::InvalidInput(format!("path: {why}")))
    }

    fn read(text: &str) -> std::result::Result<PgUrl, String> {
        let n = scheme_len(text).ok_or("not a postgres:// or postgresql:// URL")?;
        let parts = split(&text[n..])?;
        let mut config = tokio_postgres::Config::new();
        let (mut hosts, mut ports): (Vec<_>, Vec<_>) =
            hostspec(parts.hostspec)?.into_iter().unzip();
        let mut hostaddrs: Vec<Option<IpAddr>> = Vec::new();
        let mut attrs = Attrs::Any;
        if let Some(userinfo) = parts.userinfo {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            if user.contains('?') {
                return Err("user name: write '?' as %3F (and '@' in a parameter as %40)".into());
            }
            if !user.is_empty() {
                config.user(decode_text(user, "user name")?);
            }
            if let Some(p) = password {
                config.password(decode(p, "password")?);
            }
        }
        if let Some(db) = parts.dbname.filter(|d| !d.is_empty()) {
            config.dbname(decode_text(db, "database name")?);
        }
        let mut schema = None;
        let mut tls = TlsParams::default();
        let mut connect_timeout = None;
        let mut keepalives_given = false;
        let mut fallback_name = None;
        let mut secret_before = false;
        let params = parts.query.unwrap_or("").split('&');
        for (i, param) in params.enumerate().filter(|(_, p)| !p.is_empty()) {
            let Some((key, value)) = param.split_once('=') else {
                return Err(format!(
                    "parameter {} has no '=' (write parameters as key=value)",
                    i + 1
                ));
            };
            let key = decode_text(key, &format!("parameter {}", i + 1))?;
            let shown = key_shown(&key, i);
            if key == "password" {
                config.password(decode(value, "password")?);
                secret_before = true;
                continue;
            }
            let value = decode_text(value, &format!("parameter {shown}"))?;
            let enumerated = |what: &str| not_one_of(&key, &value, what);
            match key.as_str() {
                "schema" => schema = Some(value),
                "user" => {
                    config.user(value);
                }
                "dbname" => {
                    config.dbname(value);
                }
                "host" => hosts = list(&value, self::host)?,
                "hostaddr" => {
                    hostaddrs = list(&value, |v| {
                        v.parse::<IpAddr>()
                            .map_err(|_| "hostaddr: not an IP address".to_string())
                    })?
                }
                "port" => ports = list(&value, |v| self::port(&v))?,
                "application_name" => {
                    config.application_name(value);
                }
                "fallback_application_name" => fallback_name = Some(value),
                "options" => {
                    config.options(value);
                }
                "connect_timeout" => {
                    // libpq: a timeout of 1 s is taken as 2 s
                    connect_timeout = seconds(&key, &value)?.map(|d| d.max(Duration::from_secs(2)))
                }
                "tcp_user_timeout" => {
                    // libpq reads it in milliseconds
                    let ms: i64 = value
                        .trim()
                        .parse()
                        .map_err(|_| format!("{key}: expected a whole number of milliseconds"))?;
                    if ms > 0 {
                        config.tcp_user_timeout(Duration::from_millis(ms as u64));
                    }
                }
                "keepalives" => {
                    keepalives_given = true;
                    match value.trim() {
                        "0" => config.keepalives(false),
                        "1" => config.keepalives(true),
                        _ => return Err(enumerated("0, 1")),
                    };
                }
                "keepalives_idle" | "keepalives_interval" => {
                    keepalives_given = true;
                    if let Some(d) = seconds(&key, &value)? {
                        if key == "keepalives_idle" {
                            config.keepalives_idle(d);
                        } else {
                            config.keepalives_interval(d);
                        }
                    }
                }
                "keepalives_count" => {
                    keepalives_given = true;
                    let n = value
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| format!("{key}: expected a whole number"))?;
                    config.keepalives_retries(n);
                }
                // Checked by Threadline on each host it connects to (`postgres::connect`), so
                // that `primary` is read too, and the message says what a host was.
                "target_session_attrs" => {
                    attrs = match value.as_str() {
                        "any" => Attrs::Any,
                        "read-write" => Attrs::ReadWrite,
                        "primary" => Attrs::Primary,
                        "read-only" => Attrs::ReadOnly,
                        _ => return Err(enumerated("any, read-write, primary, read-only")),
                    };
                }
                "channel_binding" => {
                    config.channel_binding(match value.as_str() {
                        "disable" => ChannelBinding::Disable,
                        "prefer" => ChannelBinding::Prefer,
                        "require" => ChannelBinding::Require,
                        _ => return Err(enumerated("disable, prefer, require")),
                    });
                }
                "sslnegotiation" => {
                    config.ssl_negotiation(match value.as_str() {
                        "postgres" => SslNegotiation::Postgres,
                        "direct" => SslNegotiation::Direct,
                        _ => return Err(enumerated("postgres, direct")),
                    });
                }
                "load_balance_hosts" => {
                    config.load_balance_hosts(match value.as_str() {
                        "disable" => LoadBalanceHosts::Disable,
                        "random" => LoadBalanceHosts::Random,
                        _ => return Err(enumerated("disable, random")),
                    });
                }
                k if tls.take(k, &value) => {}
                _ => {
                    // After a password parameter, an unknown one may be the rest of a password
                    // holding an unencoded '&': not echoed, unless it is libpq's.
                    let shown = if secret_before && !LIBPQ_OTHER.contains(&key.as_str()) {
                        format!("number {}", i + 1)
                    } else {
                        shown
                    };
                    return Err(format!(
                        "parameter {shown} is not supported (docs/engines.md lists those Threadline reads)"
                    ));
                }
            }
        }
        if let (None, Some(name)) = (config.get_application_name(), fallback_name) {
            config.application_name(name);
        }
        // libpq pairs the lists: N hosts (or N addresses), N addresses or none, N ports, one
        // or none.
        let n = hosts.len().max(hostaddrs.len());
        if !hosts.is_empty() && !hostaddrs.is_empty() && hosts.len() != hostaddrs.len() {
            return Err(format!(
                "hostaddr: {} addresses for {} hosts (give one address per host, or none)",
                hostaddrs.len(),
                hosts.len()
            ));
        }
        if ports.len() > 1 && ports.len() != n {
            return Err(format!(
                "port: {} ports for {n} hosts (give one port per host, or one for all)",
                ports.len()
            ));
        }
        let targets: Vec<Target> = (0..n)
            .map(|i| Target {
                host: hosts.get(i).cloned().flatten(),
                hostaddr: hostaddrs.get(i).copied().flatten(),
                port: if ports.len() == 1 {
                    ports[0]
                } else {
                    ports.get(i).copied().flatten()
                },
            })
            .collect();
        if targets.is_empty()
            || targets
                .iter()
                .any(|t| t.host.is_none() && t.hostaddr.is_none())
        {
            return Err(
                "no host: give one (postgres://HOST/db, or ?host=/directory/of/the/socket)".into(),
            );
        }
        let base = config.clone();
        let any_port = targets.iter().any(|t| t.port.is_some());
        for t in &targets {
            t.apply(&mut config, any_port);
        }
        let schema = schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_string());
        check_schema(&schema).map_err(|why| format!("schema '{schema}': {why}"))?;
        let tls = super::tls::configure(&tls, &mut config)?;
        let mut base = base;
        base.ssl_mode(config.get_ssl_mode());
        Ok(PgUrl {
            config,
            base,
            targets,
            attrs,
            schema,
            tls,
            connect_timeout,
            keepalives_given,
        })
    }

    /// The URL as a store shows it (`store.path`, messages): its password, and the value of
    /// any parameter whose name holds `password`, shown as `***`. A URL with an '@' that does
    /// not end its user name and password (refused by `parse`) shows `***` for all before its
    /// last '@': where a password ends there cannot be told.
    pub fn redacted(text: &str) -> String {
        let Some(n) = scheme_len(text) else {
            return text.to_string();
        };
        let (scheme, rest) = text.split_at(n);
        let mut out = String::with_capacity(text.len());
        out.push_str(scheme);
        let rest = match (split(rest), rest.rfind('@')) {
            (
                Ok(Parts {
                    userinfo: Some(u), ..
                }),
                Some(at),
            ) => {
                match u.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":***");
                    }
                    None => out.push_str(u),
                }
                out.push('@');
                &rest[at + 1..]
            }
            (_, Some(at)) => {
                out.push_str("***@");
                &rest[at + 1..]
            }
            (_, None) => rest,
        };
        // A port that is not a number may be a password written where the URL has its port
        // (`postgres://me:secret/db`: host `me`, port `secret` by libpq's grammar).
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (hosts, rest) = rest.split_at(end);
        for (i, chunk) in hosts.split(',').enumerate() {
            if i > 0 {
                out.push(',');
            }
            let port_at = if chunk.starts_with('[') {
                chunk.find("]:").map(|i| i + 1)
            } else {
                chunk.find(':')
            };
            match port_at {
                Some(at) if !chunk[at + 1..].bytes().all(|c| c.is_ascii_digit()) => {
                    out.push_str(&chunk[..at]);
                    out.push_str(":***");
                }
                _ => out.push_str(chunk),
            }
        }
        out.push_str(rest);
        // Parameters, wherever a '?' or '&' starts one (a user name holding '?' included). After
        // a secret, a parameter Threadline does not know may be the rest of a password that
        // holds an unencoded '&': hidden too, as is one without '='.
        let mut shown = String::with_capacity(out.len());
        let mut after_secret = false;
        let mut start = 0;
        let cuts = out.char_indices().filter(|(_, c)| *c == '?' || *c == '&');
        for (i, end) in cuts.map(|(i, _)| i).chain([out.len()]).enumerate() {
            let param = &out[start..end];
            let key = param.split_once('=').map(|(k, _)| k);
            match key {
                _ if i == 0 => shown.push_str(param),
                Some(k) if is_secret(k) => {
                    after_secret = true;
                    shown.push_str(k);
                    shown.push_str("=***");
                }
                Some(k) if !after_secret || KNOWN.contains(&k) || LIBPQ_OTHER.contains(&k) => {
                    shown.push_str(param)
                }
                _ => shown.push_str("***"),
            }
            if end < out.len() {
                shown.push_str(&out[end..end + 1]);
            }
            start = end + 1;
        }
        shown
    }

    /// Each host's connection settings, in the URL's order (libpq tries them in turn;
    /// `load_balance_hosts=random` shuffles them, as tokio-postgres does).
    pub fn host_configs(&self) -> Vec<tokio_postgres::Config> {
        let mut out: Vec<_> = self
            .targets
            .iter()
            .map(|t| {
                let mut c = self.base.clone();
                t.apply(&mut c, false);
                c
            })
            .collect();
        if self.config.get_load_balance_hosts() == LoadBalanceHosts::Random {
            // Fisher-Yates, seeded by the standard library's random hasher keys.
            use std::hash::{BuildHasher, Hasher};
            let mut seed = std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish();
            for i in (1..out.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                out.swap(i, (seed % (i as u64 + 1)) as usize);
            }
        }
        out
    }

    /// The schema, quoted for SQL.
    pub fn quoted_schema(&self) -> String {
        quote(&self.schema)
    }
}

impl Target {
    /// Adds this host to `config`'s list; with `paired`, a port for it even when the URL gives
    /// none (5432), so that ports and hosts pair up when some hosts have one.
    fn apply(&self, config: &mut tokio_postgres::Config, paired: bool) {
        match &self.host {
            Some(Host::Tcp(h)) => {
                config.host(h);
            }
            #[cfg(unix)]
            Some(Host::Socket(dir)) => {
                config.host_path(dir);
            }
            #[cfg(not(unix))]
            Some(Host::Socket(_)) => {}
            None => {}
        }
        if let Some(a) = self.hostaddr {
            config.hostaddr(a);
        }
        match self.port {
            Some(p) => {
                config.port(p);
            }
            None if paired => {
                config.port(5432);
            }
            None => {}
        }
    }
}

/// Whether a parameter's value is a secret: `password`, libpq's `sslpassword`, however encoded
/// or cased.
fn is_secret(key: &str) -> bool {
    let decoded = decode(key, "").unwrap_or_else(|_| key.as_bytes().to_vec());
    String::from_utf8_lossy(&decoded)
        .to_ascii_lowercase()
        .contains("password")
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
    use tokio_postgres::config::Host as PgHost;

    #[test]
    fn the_schema_comes_out_of_the_url_and_the_rest_stays() {
        let u = PgUrl::parse("postgres://me:pw@127.0.0.1:5433/db?schema=team_a&connect_timeout=3")
            .unwrap();
        assert_eq!(u.schema, "team_a");
        assert_eq!(u.config.get_user(), Some("me"));
        assert_eq!(u.config.get_password(), Some(&b"pw"[..]));
        assert_eq!(u.config.get_dbname(), Some("db"));
        assert_eq!(u.config.get_ports(), [5433]);
        assert_eq!(u.connect_timeout, Some(Duration::from_secs(3)));
        let d = PgUrl::parse("postgresql://127.0.0.1/db").unwrap();
        assert_eq!(d.schema, DEFAULT_SCHEMA);
        assert_eq!(d.connect_timeout, None);
        assert_eq!(d.config.get_ports(), [] as [u16; 0]);
    }

    #[test]
    fn the_scheme_is_read_in_any_case() {
        for s in [
            "postgres://h/db",
            "postgresql://h/db",
            "POSTGRES://h/db",
            "PostgreSQL://h/db",
            "pOsTgReS://h/db",
        ] {
            assert!(scheme_len(s).is_some(), "{s}");
            let u = PgUrl::parse(s).unwrap();
            assert_eq!(u.config.get_hosts(), [PgHost::Tcp("h".into())], "{s}");
        }
        for s in [
            "postgres:/h/db",
            "postgre://h",
            "db.sqlite",
            "./postgres://x",
            "",
        ] {
            assert!(scheme_len(s).is_none(), "{s}");
        }
    }

    #[test]
    fn libpq_url_forms_are_read_as_libpq_reads_them() {
        // percent-encoding anywhere; ':' and '?' in a password need none (libpq)
        let u = PgUrl::parse("postgres://m%C3%A9:p%40ss%3Aw%2Frd@h/my%20db").unwrap();
        assert_eq!(u.config.get_user(), Some("mé"));
        assert_eq!(u.config.get_password(), Some(&b"p@ss:w/rd"[..]));
        assert_eq!(u.config.get_dbname(), Some("my db"));
        let u = PgUrl::parse("postgres://me:a:b?c@h/db").unwrap();
        assert_eq!(u.config.get_password(), Some(&b"a:b?c"[..]));
        assert_eq!(u.config.get_hosts(), [PgHost::Tcp("h".into())]);
        // IPv6 in brackets, with and without a port
        let u = PgUrl::parse("postgres://[::1]:5432/db").unwrap();
        assert_eq!(u.config.get_hosts(), [PgHost::Tcp("::1".into())]);
        assert_eq!(u.config.get_ports(), [5432]);
        let u = PgUrl::parse("postgres://[2001:db8::7]/db").unwrap();
        assert_eq!(u.config.get_hosts(), [PgHost::Tcp("2001:db8::7".into())]);
        // a Unix socket: ?host=/dir, or the directory percent-encoded as the host
        for s in [
            "postgres:///db?host=/var/run/postgresql",
            "postgres://%2Fvar%2Frun%2Fpostgresql/db",
            "postgres://me@/db?host=%2Fvar%2Frun%2Fpostgresql&port=5433",
        ] {
            let u = PgUrl::parse(s).unwrap();
            assert_eq!(
                u.config.get_hosts(),
                [PgHost::Unix("/var/run/postgresql".into())],
                "{s}"
            );
        }
        // parameters override the parts before them; hostaddr alone is a host
        let u = PgUrl::parse(
            "postgres://a@h:1/x?user=b&dbname=y&port=7&host=k&options=-c%20work_mem%3D64MB&application_name=agent&sslmode=disable",
        )
        .unwrap();
        assert_eq!(u.config.get_user(), Some("b"));
        assert_eq!(u.config.get_dbname(), Some("y"));
        assert_eq!(u.config.get_ports(), [7]);
        assert_eq!(u.config.get_hosts(), [PgHost::Tcp("k".into())]);
        assert_eq!(u.config.get_options(), Some("-c work_mem=64MB"));
        assert_eq!(u.config.get_application_name(), Some("agent"));
        let u =
            PgUrl::parse("postgres:///db?hostaddr=10.0.0.5&fallback_application_name=f").unwrap();
        assert_eq!(
            u.config.get_hostaddrs(),
            ["10.0.0.5".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(u.config.get_application_name(), Some("f"));
        // libpq's timeouts: connect_timeout in seconds (1 is 2, 0 is none), tcp_user_timeout in ms
        let u = PgUrl::parse("postgres://h/db?connect_timeout=1&tcp_user_timeout=2500").unwrap();
        assert_eq!(u.connect_timeout, Some(Duration::from_secs(2)));
        assert_eq!(
            u.config.get_tcp_user_timeout(),
            Some(&Duration::from_millis(2500))
        );
        assert_eq!(
            PgUrl::parse("postgres://h/db?connect_timeout=0")
                .unwrap()
                .connect_timeout,
            None
        );
        assert!(!PgUrl::parse("postgres://h/db").unwrap().keepalives_given);
        let u = PgUrl::parse("postgres://h/db?keepalives_idle=30&keepalives_count=2").unwrap();
        assert!(u.keepalives_given);
        assert_eq!(u.config.get_keepalives_idle(), Duration::from_secs(30));
        assert_eq!(u.config.get_keepalives_retries(), Some(2));
    }

    #[test]
    fn a_multi_host_url_is_read_as_libpq_reads_it() {
        let hosts = |u: &PgUrl| -> Vec<(Vec<PgHost>, Vec<IpAddr>, Vec<u16>)> {
            u.host_configs()
                .iter()
                .map(|c| {
                    (
                        c.get_hosts().to_vec(),
                        c.get_hostaddrs().to_vec(),
                        c.get_ports().to_vec(),
                    )
                })
                .collect()
        };
        let tcp = |h: &str| vec![PgHost::Tcp(h.into())];
        // each host with its port, or the default; in the URL's order
        let u = PgUrl::parse(
            "postgres://u@h1:5432,[::1]:5433,h3/db?target_session_attrs=read-write&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(
            hosts(&u),
            [
                (tcp("h1"), vec![], vec![5432]),
                (tcp("::1"), vec![], vec![5433]),
                (tcp("h3"), vec![], vec![]),
            ]
        );
        assert_eq!(u.attrs, Attrs::ReadWrite);
        assert_eq!(u.connect_timeout, Some(Duration::from_secs(3)));
        assert_eq!(u.config.get_user(), Some("u"));
        assert_eq!(u.config.get_ports(), [5432, 5433, 5432]);
        // parameters: a list of hosts, one port for all or one each, an address for each
        let u = PgUrl::parse("postgres:///db?host=a,b&port=6000").unwrap();
        assert_eq!(
            hosts(&u),
            [
                (tcp("a"), vec![], vec![6000]),
                (tcp("b"), vec![], vec![6000])
            ]
        );
        let u = PgUrl::parse(
            "postgres:///db?host=a,b&hostaddr=10.0.0.1,10.0.0.2&port=1,2&target_session_attrs=primary",
        )
        .unwrap();
        let ip = |s: &str| vec![s.parse::<IpAddr>().unwrap()];
        assert_eq!(
            hosts(&u),
            [
                (tcp("a"), ip("10.0.0.1"), vec![1]),
                (tcp("b"), ip("10.0.0.2"), vec![2])
            ]
        );
        assert_eq!(u.attrs, Attrs::Primary);
        for (v, a) in [
            ("any", Attrs::Any),
            ("read-write", Attrs::ReadWrite),
            ("primary", Attrs::Primary),
            ("read-only", Attrs::ReadOnly),
        ] {
            let u = PgUrl::parse(&format!("postgres://h/db?target_session_attrs={v}")).unwrap();
            assert_eq!(u.attrs, a, "{v}");
        }
        assert_eq!(PgUrl::parse("postgres://h/db").unwrap().attrs, Attrs::Any);
        // the password of a multi-host URL is hidden as any other
        assert_eq!(
            PgUrl::redacted("postgres://me:pw@h1:5432,h2:5433/db"),
            "postgres://me:***@h1:5432,h2:5433/db"
        );
    }

    /// The message `text` is refused with (INVALID_INPUT), checked to hold no secret.
    fn refused(text: &str, secret: &str) -> String {
        let e = PgUrl::parse(text)
            .err()
            .unwrap_or_else(|| panic!("{text}: taken"));
        assert_eq!(e.code(), "INVALID_INPUT", "{text}: {}", e.message());
        let m = e.message().to_string();
        assert!(m.starts_with("path: "), "{m}");
        assert!(
            !m.contains(secret),
            "{text}: the message shows the secret: {m}"
        );
        m
    }

    #[test]
    fn a_refused_url_says_what_is_wrong_and_never_shows_the_password() {
        let pw = "S3cret-pw";
        for (text, says) in [
            (
                format!("postgres://me:p@ss:w/rd{pw}@127.0.0.1:5432/db"),
                "'@' as %40",
            ),
            (format!("postgres://me:{pw}/x@127.0.0.1/db"), "'/' as %2F"),
            (
                format!("postgres://me:{pw}@127.0.0.1:99999/db"),
                "port 99999: expected a number from 1 to 65535",
            ),
            (
                format!("postgres://me:{pw}@127.0.0.1:0/db"),
                "port 0: expected",
            ),
            (
                format!("postgres://me:{pw}@127.0.0.1:54x/db"),
                "port: not a number",
            ),
            (format!("postgres://me:{pw}/db"), "port: not a number"),
            (
                format!("postgres://me:{pw}@[::1/db"),
                "without its closing ']'",
            ),
            (
                format!("postgres://me:{pw}@[nothost]:5432/db"),
                "not an IPv6 address",
            ),
            (format!("postgres://me:{pw}@[::1]x/db"), "after ']'"),
            (
                format!("postgres://me:{pw}@h1:5432,h2:99999/db"),
                "port 99999: expected",
            ),
            (format!("postgres://me:{pw}@h1,,h3/db"), "no host"),
            (
                format!("postgres://h/db?host=a,b&hostaddr=10.0.0.1&password={pw}"),
                "hostaddr: 1 addresses for 2 hosts",
            ),
            (
                format!("postgres://me:{pw}@h1,h2,h3/db?port=5432,5433"),
                "port: 2 ports for 3 hosts",
            ),
            (
                format!("postgres://h/db?hostaddr=10.0.0.1,db.example&password={pw}"),
                "hostaddr: not an IP address",
            ),
            (
                format!("postgres://me:{pw}%zz@h/db"),
                "password: a '%' must be followed",
            ),
            (
                format!("postgres://me:{pw}%00@h/db"),
                "password: a '%' must be followed",
            ),
            (
                format!("postgres://h/db?password={pw}%4"),
                "password: a '%'",
            ),
            (
                format!("postgres://h/db?password={pw}&passfile=/x"),
                "parameter 'passfile' is not supported",
            ),
            (
                format!("postgres://h/db?password={pw}&{pw}"),
                "parameter 2 has no '='",
            ),
            (
                format!("postgres://h/db?password=a&{pw}=b"),
                "parameter number 2 is not supported",
            ),
            (
                format!("postgres://h/db?password={pw}&sslmode=sometimes"),
                "sslmode: expected one of",
            ),
            (
                format!("postgres://h/db?password={pw}&target_session_attrs=standby"),
                "target_session_attrs: 'standby' is not one of any, read-write, primary, read-only",
            ),
            (
                format!("postgres://h/db?password={pw}&target_session_attrs=prefer-standby"),
                "target_session_attrs: 'prefer-standby' is not one of",
            ),
            (
                format!("postgres://h/db?password={pw}&connect_timeout=soon"),
                "connect_timeout: expected a whole number of seconds",
            ),
            (
                format!("postgres://h/db?password={pw}&hostaddr=db.example"),
                "hostaddr: not an IP address",
            ),
            (format!("postgres://me:{pw}@/db"), "no host"),
            (
                format!("postgres://me:{pw}@h/db?schema=Bad"),
                "schema 'Bad'",
            ),
            (
                format!("postgres://h?application_name=a@b&password={pw}"),
                "user name: write '?' as %3F",
            ),
        ] {
            let m = refused(&text, pw);
            assert!(m.contains(says), "{text}: {m}");
            let shown = PgUrl::redacted(&text);
            assert!(!shown.contains(pw), "{text}: shown as {shown}");
        }
    }

    #[test]
    fn the_shown_url_hides_every_password() {
        for (text, shown) in [
            (
                "postgres://me:pw@h:5432/db?schema=s",
                "postgres://me:***@h:5432/db?schema=s",
            ),
            ("POSTGRES://me:pw@h/db", "POSTGRES://me:***@h/db"),
            (
                "postgres://me@h/db?password=pw&schema=s",
                "postgres://me@h/db?password=***&schema=s",
            ),
            (
                "postgres://h/db?PassWord=pw&sslpassword=x&pass%77ord=y",
                "postgres://h/db?PassWord=***&sslpassword=***&pass%77ord=***",
            ),
            ("postgres://me:p@ss@h/db", "postgres://***@h/db"),
            ("postgres://me:p/ss@h/db", "postgres://***@h/db"),
            ("postgres://me:a:b?c@h/db", "postgres://me:***@h/db"),
            ("postgres://h/db", "postgres://h/db"),
            ("postgres://me:pw/db", "postgres://me:***/db"),
            (
                "postgres://h/db?password=a&b&c=d&sslmode=disable",
                "postgres://h/db?password=***&***&***&sslmode=disable",
            ),
            (
                "postgres://h/db?x&password=p",
                "postgres://h/db?***&password=***",
            ),
            (
                "postgres://[::1]:5432,h:x/db",
                "postgres://[::1]:5432,h:***/db",
            ),
            ("/tmp/me:pw@x.db", "/tmp/me:pw@x.db"),
        ] {
            assert_eq!(PgUrl::redacted(text), shown, "{text}");
        }
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
