//! TLS to the server, asked for the way libpq is asked: `sslmode` (`disable`, `prefer`, `require`,
//! `verify-ca`, `verify-full`) and `sslrootcert` (a PEM file, or `system` for the operating
//! system's roots). rustls with the ring provider: no OpenSSL to link, so the Linux binary still
//! needs nothing newer than glibc 2.17.
//!
//! As in libpq:
//! - `prefer` (the default) and `require` encrypt without checking who answers, unless a root
//!   certificate is there (named, or `~/.postgresql/root.crt`): then they check the chain as
//!   `verify-ca` does;
//! - `verify-ca` checks the chain, `verify-full` the chain and the host name;
//! - `sslrootcert=system` makes `verify-full` the default and refuses the weaker modes;
//! - `sslcert` and `sslkey` name the certificate the client shows, for servers that ask for one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_postgres::config::SslMode;
use tokio_postgres::{Config, NoTls};

use super::client::PgClient;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How a store connects: in the clear, or with TLS configured as the URL asked.
#[derive(Clone)]
pub(crate) enum Tls {
    Off,
    On(Arc<ClientConfig>),
}

/// The URL's TLS parameters, taken out of it (the `postgres` crate knows only three modes).
#[derive(Default)]
pub(crate) struct TlsParams {
    pub mode: Option<String>,
    pub root_cert: Option<String>,
    /// `sslcert` and `sslkey`: the certificate this client shows, and its key
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
}

impl TlsParams {
    /// Takes the TLS parameters (true); leaves any other (false).
    pub fn take(&mut self, key: &str, value: &str) -> bool {
        match key {
            "sslmode" => self.mode = Some(value.to_string()),
            "sslrootcert" => self.root_cert = Some(value.to_string()),
            "sslcert" => self.client_cert = Some(value.to_string()),
            "sslkey" => self.client_key = Some(value.to_string()),
            _ => return false,
        }
        true
    }
}

/// What is checked of the server's certificate.
enum Check {
    Nothing,
    Chain,
    ChainAndName,
}

/// Where trusted roots come from.
enum Roots {
    File(PathBuf),
    System,
}

/// Sets the connection's `sslmode` on `config` and returns how to connect. Errors name the URL
/// parameter at fault.
pub(crate) fn configure(p: &TlsParams, config: &mut Config) -> Result<Tls, String> {
    let system = p.root_cert.as_deref() == Some("system");
    let mode = p
        .mode
        .as_deref()
        .unwrap_or(if system { "verify-full" } else { "prefer" });
    let (ssl, check) = match mode {
        "disable" => (SslMode::Disable, None),
        "prefer" => (SslMode::Prefer, Some(Check::Nothing)),
        "require" => (SslMode::Require, Some(Check::Nothing)),
        "verify-ca" => (SslMode::Require, Some(Check::Chain)),
        "verify-full" => (SslMode::Require, Some(Check::ChainAndName)),
        "allow" => return Err("sslmode: 'allow' is not supported (use disable, prefer, require, verify-ca or verify-full)".into()),
        other => return Err(format!("sslmode: expected one of disable, prefer, require, verify-ca, verify-full, got '{other}'")),
    };
    config.ssl_mode(ssl);
    let Some(check) = check else {
        return Ok(Tls::Off);
    };
    if system && !matches!(check, Check::ChainAndName) {
        return Err(format!(
            "sslmode: '{mode}' is weaker than sslrootcert=system asks for (use verify-full)"
        ));
    }
    let roots = roots_for(p.root_cert.as_deref(), &check)?;
    let check = match (check, &roots) {
        // libpq: with a root certificate at hand, prefer and require check the chain.
        (Check::Nothing, Some(_)) => Check::Chain,
        (c, _) => c,
    };
    let store = match roots {
        Some(r) => Some(load(&r)?),
        None => None,
    };
    let identity = identity(p)?;
    Ok(Tls::On(Arc::new(client_config(check, store, identity)?)))
}

/// The client's certificate chain and key, when the URL names them (both or neither).
type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn identity(p: &TlsParams) -> Result<Option<Identity>, String> {
    let (cert, key) = match (&p.client_cert, &p.client_key) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (Path::new(c), Path::new(k)),
        (Some(_), None) => return Err("sslkey: sslcert needs the key of its certificate".into()),
        (None, Some(_)) => {
            return Err("sslcert: sslkey needs the certificate it is the key of".into())
        }
    };
    let chain = read_pem("sslcert", cert)?;
    if chain.is_empty() {
        return Err(format!("sslcert: no certificate in '{}'", cert.display()));
    }
    let text =
        std::fs::read(key).map_err(|e| format!("sslkey: cannot read '{}': {e}", key.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&text)
        .map_err(|e| format!("sslkey: no private key in '{}': {e}", key.display()))?;
    Ok(Some((chain, key)))
}

/// The roots a mode uses: the named file, the system's, or libpq's default file when it exists.
fn roots_for(named: Option<&str>, check: &Check) -> Result<Option<Roots>, String> {
    match named {
        Some("system") => return Ok(Some(Roots::System)),
        Some(path) => return Ok(Some(Roots::File(PathBuf::from(path)))),
        None => {}
    }
    let default = dirs::home_dir().map(|h| h.join(".postgresql").join("root.crt"));
    match default {
        Some(d) if d.is_file() => Ok(Some(Roots::File(d))),
        _ if matches!(check, Check::Nothing) => Ok(None),
        _ => Err("sslrootcert: verify-ca and verify-full need the server's root certificate: give sslrootcert=PATH (a PEM file) or sslrootcert=system (~/.postgresql/root.crt does not exist)".into()),
    }
}

fn load(roots: &Roots) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let certs = match roots {
        Roots::File(path) => read_pem("sslrootcert", path)?,
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                return Err(format!(
                    "sslrootcert: no system root certificates found ({} errors)",
                    found.errors.len()
                ));
            }
            found.certs
        }
    };
    // The system's bundle may hold a certificate webpki cannot parse; one bad root is skipped
    // there, as libpq's OpenSSL would. A named file must be all good.
    let (_, bad) = store.add_parsable_certificates(certs);
    if bad > 0 && matches!(roots, Roots::File(_)) {
        return Err(format!(
            "sslrootcert: {bad} certificate(s) in '{}' could not be read",
            shown(roots)
        ));
    }
    if store.is_empty() {
        return Err(format!("sslrootcert: no certificate in '{}'", shown(roots)));
    }
    Ok(store)
}

/// The certificates of the PEM file that URL parameter `param` names.
fn read_pem(param: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = std::fs::read(path)
        .map_err(|e| format!("{param}: cannot read '{}': {e}", path.display()))?;
    CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{param}: '{}' is not PEM: {e}", path.display()))
}

fn shown(roots: &Roots) -> String {
    match roots {
        Roots::File(p) => p.display().to_string(),
        Roots::System => "the system's roots".into(),
    }
}

fn client_config(
    check: Check,
    roots: Option<RootCertStore>,
    identity: Option<Identity>,
) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("sslmode: {e}"))?;
    let webpki = match roots {
        Some(r) => Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(r), provider.clone())
                .build()
                .map_err(|e| format!("sslrootcert: {e}"))?,
        ),
        None => None,
    };
    let config = match (check, webpki) {
        (Check::ChainAndName, Some(v)) => builder.with_webpki_verifier(v),
        (check, webpki) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Lenient {
                chain: if matches!(check, Check::Nothing) {
                    None
                } else {
                    webpki
                },
                algorithms: provider.signature_verification_algorithms,
            })),
    };
    match identity {
        None => Ok(config.with_no_client_auth()),
        Some((chain, key)) => config
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("sslkey: {e}")),
    }
}

impl Tls {
    /// Opens a connection as `config` says, over TLS when this asks for it.
    pub fn connect(&self, config: &Config) -> crate::error::Result<PgClient> {
        match self {
            Tls::Off => PgClient::connect(config, NoTls),
            Tls::On(c) => PgClient::connect(config, MakeRustlsConnect::new(ClientConfig::clone(c))),
        }
    }
}

/// `prefer`/`require` (no check of who answers) and `verify-ca` (the chain, not the name): the
/// handshake's signatures are still verified, so the connection is encrypted to whoever holds
/// the certificate's key.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use crate::model::options::StoreOptions;
    use crate::storage::postgres::{connect, test_server, PgUrl};

    fn refused(url: &str) -> String {
        let e = PgUrl::parse(url).err().expect(url);
        assert_eq!(e.code(), "INVALID_INPUT", "{url}: {}", e.message());
        e.message().to_string()
    }

    #[test]
    fn tls_parameters_that_cannot_be_honoured_are_refused_naming_the_parameter() {
        let base = "postgres://u@127.0.0.1:1/db";
        for (query, says) in [
            ("sslmode=verify", "sslmode: expected one of disable, prefer, require, verify-ca, verify-full, got 'verify'"),
            ("sslmode=allow", "sslmode: 'allow' is not supported"),
            ("sslmode=require&sslrootcert=system", "sslmode: 'require' is weaker than sslrootcert=system"),
            ("sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem", "sslrootcert: cannot read '/nonexistent/ca.pem'"),
            ("sslcert=/c.pem", "sslkey: sslcert needs the key of its certificate"),
            ("sslkey=/k.pem", "sslcert: sslkey needs the certificate it is the key of"),
            ("sslcert=/nonexistent/c.pem&sslkey=/k.pem", "sslcert: cannot read '/nonexistent/c.pem'"),
        ] {
            let m = refused(&format!("{base}?{query}"));
            assert!(m.starts_with("path: "), "{m}");
            assert!(m.contains(says), "{query}: {m}");
        }
        let not_pem = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(not_pem.path(), "not a certificate\n").unwrap();
        let m = refused(&format!(
            "{base}?sslmode=verify-full&sslrootcert={}",
            not_pem.path().display()
        ));
        assert!(m.contains("sslrootcert: no certificate in"), "{m}");
    }

    /// Whether the server sees this connection encrypted, and with which protocol.
    fn encrypted(url: &str) -> crate::error::Result<(bool, Option<String>)> {
        let u = PgUrl::parse(url)?;
        let mut c = connect(&u, &StoreOptions::default())?;
        let row = c
            .query_one(
                "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .unwrap();
        Ok((row.get(0), row.get(1)))
    }

    /// The test server's URL, with a schema of its own and `query` added.
    fn with(base: &str, query: &str) -> String {
        let url = test_server::with_schema(base, "tls");
        if query.is_empty() {
            url
        } else {
            format!("{url}&{query}")
        }
    }

    #[test]
    fn each_sslmode_connects_as_libpq_would_and_the_server_sees_it_encrypted_or_not() {
        let Some((base, ca)) = test_server::url_and_ca() else {
            return;
        };
        let tls13 = (true, Some("TLSv1.3".to_string()));
        // The default is prefer: encrypted when the server can.
        assert_eq!(encrypted(&with(&base, "")).unwrap(), tls13);
        assert_eq!(
            encrypted(&with(&base, "sslmode=disable")).unwrap(),
            (false, None)
        );
        assert_eq!(encrypted(&with(&base, "sslmode=require")).unwrap(), tls13);
        let verify = |mode: &str| with(&base, &format!("sslmode={mode}&sslrootcert={ca}"));
        assert_eq!(encrypted(&verify("verify-ca")).unwrap(), tls13);
        // The certificate names localhost and 127.0.0.1; the URL's host is 127.0.0.1.
        assert_eq!(encrypted(&verify("verify-full")).unwrap(), tls13);
        let localhost = verify("verify-full").replacen("127.0.0.1", "localhost", 1);
        assert_eq!(encrypted(&localhost).unwrap(), tls13);
    }

    #[test]
    fn a_certificate_that_does_not_check_out_is_store_io_saying_why() {
        let Some((base, ca)) = test_server::url_and_ca() else {
            return;
        };
        // The host as the certificate does not name it, reached at the server's address.
        let port = base.split(':').nth(2).unwrap().split('/').next().unwrap();
        let other_name = with(&base, &format!("sslrootcert={ca}")).replacen(
            &format!("127.0.0.1:{port}"),
            &format!("db.example:{port}"),
            1,
        ) + "&hostaddr=127.0.0.1";
        let e = encrypted(&format!("{other_name}&sslmode=verify-full"))
            .err()
            .unwrap();
        assert_eq!(e.code(), "STORE_IO", "{}", e.message());
        assert!(e.message().contains("certificate"), "{}", e.message());
        assert!(e.message().contains("db.example"), "{}", e.message());
        // verify-ca checks the chain only: the same host name is fine.
        assert!(
            encrypted(&format!("{other_name}&sslmode=verify-ca"))
                .unwrap()
                .0
        );
        // The system's roots do not hold the test CA.
        let e = encrypted(&with(&base, "sslrootcert=system")).err().unwrap();
        assert_eq!(e.code(), "STORE_IO", "{}", e.message());
        assert!(e.message().contains("UnknownIssuer"), "{}", e.message());
    }

    #[test]
    fn a_password_role_logs_in_with_scram_bound_to_the_tls_channel_and_not_in_the_clear() {
        let Some((base, ca)) = test_server::url_and_ca() else {
            return;
        };
        // scripts/postgres.js: this role must use SCRAM, and only over TLS
        // (a schema of its own: the other tests' belong to the postgres role)
        let role = |password: &str, query: &str| {
            format!("{}&{query}", test_server::with_schema(&base, "scram")).replacen(
                "postgres@",
                &format!("threadline_scram:{password}@"),
                1,
            )
        };
        let full = format!("sslmode=verify-full&sslrootcert={ca}&channel_binding=require");
        assert_eq!(
            encrypted(&role("scram-secret", &full)).unwrap(),
            (true, Some("TLSv1.3".to_string()))
        );
        let e = encrypted(&role("wrong", &full)).err().unwrap();
        assert_eq!(e.code(), "STORE_IO", "{}", e.message());
        assert!(
            e.message().contains("password authentication failed"),
            "{}",
            e.message()
        );
        let e = encrypted(&role("scram-secret", "sslmode=disable"))
            .err()
            .unwrap();
        assert_eq!(e.code(), "STORE_IO", "{}", e.message());
        assert!(
            e.message().contains("pg_hba.conf rejects"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn a_role_that_logs_in_with_a_client_certificate_gets_in_with_it_and_not_without() {
        let Some((base, ca)) = test_server::url_and_ca() else {
            return;
        };
        // scripts/postgres.js: threadline_cert may log in only over TLS with a certificate the
        // CA signed for it, client.crt/client.key beside the CA's file
        let dir = std::path::Path::new(&ca)
            .parent()
            .unwrap()
            .display()
            .to_string();
        let url = |query: &str| {
            format!("{}&{query}", test_server::with_schema(&base, "cert")).replacen(
                "postgres@",
                "threadline_cert@",
                1,
            )
        };
        let verified = format!("sslmode=verify-full&sslrootcert={ca}");
        let with_cert = format!("{verified}&sslcert={dir}/client.crt&sslkey={dir}/client.key");
        assert!(encrypted(&url(&with_cert)).unwrap().0);
        let e = encrypted(&url(&verified)).err().unwrap();
        assert_eq!(e.code(), "STORE_IO", "{}", e.message());
        assert!(
            e.message().contains("requires a valid client certificate"),
            "{}",
            e.message()
        );
    }
}
