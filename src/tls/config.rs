//! Loading the server's TLS configuration from PEM files, with every
//! failure named by its file and reason (the CLI turns it into one line and
//! exit 2 before anything listens; a worker started for a SIGHUP roll that
//! fails here leaves the old workers serving).
//!
//! Keys: PKCS#8, PKCS#1 (RSA) and SEC1 (EC) in PEM, and encrypted PKCS#8
//! (PBES2) with `--ssl-keyfile-password`. OpenSSL's legacy encrypted PEM
//! (`Proc-Type: 4,ENCRYPTED` inside a PKCS#1 or SEC1 block) is refused with a
//! hint: it uses MD5 as its key derivation, and `openssl pkcs8 -topk8`
//! converts it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// The application protocols (RFC 7301) served: HTTP/1.1 and HTTP/2.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";
pub const ALPN_H2: &[u8] = b"h2";

/// Whether and how clients present certificates (`--ssl-cert-reqs`,
/// Python's `ssl.CERT_*` names in lowercase).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// No certificate is asked for.
    #[default]
    None,
    /// Asked for; a client without one is served, one with a bad one is not.
    Optional,
    /// A client without a valid certificate fails the handshake.
    Required,
}

/// The oldest protocol version accepted (`--ssl-protocol-min`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MinVersion {
    #[default]
    Tls12,
    Tls13,
}

/// What the TLS flags name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Files {
    pub certfile: PathBuf,
    pub keyfile: PathBuf,
    pub password: Option<String>,
    pub ca_certs: Option<PathBuf>,
    pub client_auth: ClientAuth,
    pub min_version: MinVersion,
    pub kernel: super::kernel::Mode,
}

/// A failure to load the configuration: which file, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The flag whose file is at fault, and the file.
    pub what: &'static str,
    pub path: PathBuf,
    pub why: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.what, self.path.display(), self.why)
    }
}

impl std::error::Error for LoadError {}

/// A loaded configuration: what rustls needs, and the server's own
/// certificate as the ASGI `tls` extension reports it.
pub struct Settings {
    pub config: Arc<ServerConfig>,
    /// The leaf certificate, PEM-encoded.
    pub server_cert_pem: Arc<str>,
    /// `--ssl-ktls`: rustls gives its secrets up for the kernel when `Auto`.
    pub kernel: super::kernel::Mode,
}

impl Settings {
    /// Offer these application protocols, the first preferred (HTTP/1.1
    /// alone until told).
    pub fn offer(&mut self, protocols: &[&[u8]]) {
        let mut config = (*self.config).clone();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        self.config = Arc::new(config);
    }

    /// Seal session tickets with the keys every worker derives from `seed`
    /// (the supervisor's), instead of keys of this process's own.
    pub fn share_tickets(&mut self, seed: &super::tickets::Seed) {
        let mut config = (*self.config).clone();
        config.ticketer = Arc::new(super::tickets::Tickets::new(seed));
        self.config = Arc::new(config);
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings").finish_non_exhaustive()
    }
}

impl Files {
    /// Read and check every file, and build the server configuration.
    pub fn load(&self) -> Result<Settings, LoadError> {
        let provider = Arc::new(provider());
        let chain = read_certs("--ssl-certfile", &self.certfile)?;
        let key = read_key(&self.keyfile, self.password.as_deref())?;
        let versions: &[&rustls::SupportedProtocolVersion] = match self.min_version {
            MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
            MinVersion::Tls13 => &[&rustls::version::TLS13],
        };
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| LoadError {
                what: "--ssl-protocol-min",
                path: PathBuf::new(),
                why: e.to_string(),
            })?;
        let builder = match self.client_verifier(&provider)? {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let server_cert_pem: Arc<str> = pem("CERTIFICATE", &chain[0]).into();
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| LoadError {
                what: "--ssl-keyfile",
                path: self.keyfile.clone(),
                why: match e {
                    rustls::Error::InconsistentKeys(_) => format!(
                        "the key does not match the certificate in {}",
                        self.certfile.display()
                    ),
                    other => format!("unusable key: {other}"),
                },
            })?;
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
        config.enable_secret_extraction = self.kernel == super::kernel::Mode::Auto;
        // The server's order of cipher suites, not the client's (see `provider`).
        config.ignore_client_order = true;
        // Resumption: stateless tickets (TLS 1.3, and 1.2's ticket
        // extension) under keys this process makes and rotates, and 1.2's
        // session cache. Both are per worker process: a client that comes
        // back to another worker gets a full handshake, as without them.
        // A full handshake costs both sides a signature and its check.
        config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| LoadError {
            what: "--ssl-certfile",
            path: self.certfile.clone(),
            why: format!("making the session ticket key: {e}"),
        })?;
        Ok(Settings {
            config: Arc::new(config),
            server_cert_pem,
            kernel: self.kernel,
        })
    }

    fn client_verifier(
        &self,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, LoadError> {
        let path = match (&self.ca_certs, self.client_auth) {
            (_, ClientAuth::None) => return Ok(None),
            (Some(path), _) => path,
            (None, _) => {
                return Err(LoadError {
                    what: "--ssl-cert-reqs",
                    path: PathBuf::new(),
                    why: "client certificates need --ssl-ca-certs to check them against".into(),
                })
            }
        };
        let bad = |why: String| LoadError {
            what: "--ssl-ca-certs",
            path: path.clone(),
            why,
        };
        let mut roots = RootCertStore::empty();
        for cert in read_certs("--ssl-ca-certs", path)? {
            roots
                .add(cert)
                .map_err(|e| bad(format!("not a usable CA certificate: {e}")))?;
        }
        let builder =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
        let builder = match self.client_auth {
            ClientAuth::Optional => builder.allow_unauthenticated(),
            _ => builder,
        };
        builder
            .build()
            .map(Some)
            .map_err(|e| bad(format!("cannot verify clients with it: {e}")))
    }
}

/// rustls' ring provider with the AES-128-GCM suites first. OpenSSL
/// clients (curl, wrk, Python) list AES-256-GCM-SHA384 first, whose key
/// schedule runs on SHA-384, whose SHA-512 blocks showed high in the core
/// thread's profile on a new connection per request (bench/tls.sh), where
/// SHA-256 has the CPU's SHA extensions. AES-128 is as sound a choice
/// for TLS (Go's server makes it too); every suite rustls offers stays
/// available to a client that lacks this one.
fn provider() -> CryptoProvider {
    use rustls::CipherSuite::{
        TLS13_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    };
    let mut provider = rustls::crypto::ring::default_provider();
    // A stable sort: the rest keep ring's order (TLS 1.3's before 1.2's).
    provider.cipher_suites.sort_by_key(|s| match s.suite() {
        TLS13_AES_128_GCM_SHA256 => 0,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 | TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 1,
        _ if s.version() == &rustls::version::TLS13 => 1,
        _ => 2,
    });
    provider
}

/// Every certificate of a PEM file, in order; at least one.
fn read_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, LoadError> {
    let bad = |why: String| LoadError {
        what,
        path: path.to_path_buf(),
        why,
    };
    let bytes = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("malformed PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    for cert in &certs {
        x509_parser::parse_x509_certificate(cert)
            .map_err(|e| bad(format!("malformed certificate: {e}")))?;
    }
    Ok(certs)
}

/// The private key of a PEM file, decrypted with `password` when it is an
/// encrypted PKCS#8 one.
fn read_key(path: &Path, password: Option<&str>) -> Result<PrivateKeyDer<'static>, LoadError> {
    const WHAT: &str = "--ssl-keyfile";
    let bad = |why: String| LoadError {
        what: WHAT,
        path: path.to_path_buf(),
        why,
    };
    let bytes = read(WHAT, path)?;
    let text = String::from_utf8_lossy(&bytes);
    if let Some(block) = pem_block(&text, "ENCRYPTED PRIVATE KEY") {
        let password = password.ok_or_else(|| {
            bad("the key is encrypted: give its password with --ssl-keyfile-password".into())
        })?;
        let (_, doc) = pkcs8::Document::from_pem(block)
            .map_err(|e| bad(format!("malformed encrypted key: {e}")))?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes())
            .map_err(|e| bad(format!("malformed encrypted key: {e}")))?;
        let plain = info
            .decrypt(password)
            .map_err(|_| bad("wrong password, or a cipher this build cannot decrypt".into()))?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(bad(
            "OpenSSL's legacy encrypted PEM is not supported: convert it with `openssl pkcs8 -topk8` (encrypted PKCS#8)".into(),
        ));
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            bad("no PEM private key (PKCS#8, PKCS#1 or SEC1) in it".into())
        }
        other => bad(format!("malformed PEM: {other}")),
    })
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(path).map_err(|e| LoadError {
        what,
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// The first `-----BEGIN label-----` ... `-----END label-----` block of `text`.
fn pem_block<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start + end.len();
    Some(&text[start..stop])
}

/// `der` as a PEM block labelled `label` (64-column base64, as OpenSSL writes).
pub fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
