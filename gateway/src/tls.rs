//! HTTPS on the gateway's own listener (`[server.tls]`): the certificate
//! chain and key come from PEM files and sit behind an `ArcSwap`, so SIGHUP
//! can load renewed files and every new connection gets them while
//! established ones keep theirs. Mobile SDKs force `https://`; plain HTTP
//! stays the default for local use. Over TLS the listener speaks HTTP/2
//! and HTTP/1.1, chosen by ALPN ([`ALPN`]): mobile HTTP stacks (OkHttp,
//! URLSession) and browsers prefer HTTP/2 when the server offers it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::TlsConfig;

/// The protocols offered in the TLS handshake, most preferred first.
/// actix-web puts the same two in front of whatever a configuration lists
/// (its rustls listener always serves both), so this list says what is
/// served rather than choosing it.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A certificate or key file that cannot serve: names the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file is missing or unreadable.
    #[error("TLS file {file}: cannot read it: {source}")]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The certificate file holds no usable PEM certificate.
    #[error("TLS certificate file {file}: {problem}")]
    Certificate {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The key file holds no usable PEM private key.
    #[error("TLS key file {file}: {problem}")]
    Key {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The key does not belong to the chain's first (leaf) certificate.
    #[error("TLS key file {key_file} does not match the certificate in {cert_file}: {problem}")]
    Mismatch {
        /// The certificate file.
        cert_file: PathBuf,
        /// The key file.
        key_file: PathBuf,
        /// How they differ.
        problem: String,
    },
}

/// The certificate every new connection is offered, swapped whole on reload.
#[derive(Debug)]
pub struct CertificateStore {
    /// The PEM files, read again on every reload.
    files: TlsConfig,
    /// The chain and signing key in use.
    current: ArcSwap<CertifiedKey>,
}

impl CertificateStore {
    /// Loads the chain and key named by `files`; refuses files that would not serve.
    pub fn load(files: &TlsConfig) -> Result<Self, TlsError> {
        let key = certified_key(files)?;
        Ok(Self { files: files.clone(), current: ArcSwap::from_pointee(key) })
    }

    /// Reads the files again; on success new connections get the new
    /// certificate, on failure the running one stays and the error says why.
    pub fn reload(&self) -> Result<(), TlsError> {
        let key = certified_key(&self.files)?;
        self.current.store(Arc::new(key));
        Ok(())
    }

    /// The files this store reads.
    pub fn files(&self) -> &TlsConfig {
        &self.files
    }

    /// A rustls server configuration that asks this store for the
    /// certificate on every handshake, offering [`ALPN`].
    pub fn server_config(self: &Arc<Self>) -> rustls::ServerConfig {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(self) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        config
    }
}

impl ResolvesServerCert for CertificateStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// One crypto provider for the whole process (ring: no C toolchain beyond
/// what librdkafka already needs, and no process-wide default to install).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads and checks the chain and key: both parse, the key is a kind rustls
/// can sign with, and it belongs to the leaf certificate.
fn certified_key(files: &TlsConfig) -> Result<CertifiedKey, TlsError> {
    let chain = read_chain(&files.cert_file)?;
    let key = read_key(&files.key_file)?;
    let signing_key = provider().key_provider.load_private_key(key).map_err(|e| TlsError::Key {
        file: files.key_file.clone(),
        problem: format!("not a key rustls can sign with (RSA, ECDSA P-256/P-384 or Ed25519): {e}"),
    })?;
    let certified = CertifiedKey::new(chain, signing_key);
    // Parses the leaf certificate and compares its public key with the key's.
    certified.keys_match().map_err(|e| match e {
        rustls::Error::InvalidCertificate(why) => TlsError::Certificate {
            file: files.cert_file.clone(),
            problem: format!("the first certificate is not a valid X.509 certificate: {why:?}"),
        },
        other => TlsError::Mismatch {
            cert_file: files.cert_file.clone(),
            key_file: files.key_file.clone(),
            problem: other.to_string(),
        },
    })?;
    Ok(certified)
}

fn read_chain(file: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(file)?;
    let problem = |problem: String| TlsError::Certificate { file: file.to_owned(), problem };
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| problem(format!("not PEM: {}", pem_problem(&e))))?;
    if chain.is_empty() {
        return Err(problem("no certificate in it (expected a `-----BEGIN CERTIFICATE-----` block)".into()));
    }
    Ok(chain)
}

fn read_key(file: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(file)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Key {
        file: file.to_owned(),
        problem: match e {
            pem::Error::NoItemsFound => {
                "no private key in it (expected a `-----BEGIN PRIVATE KEY-----`, `RSA PRIVATE KEY` or `EC PRIVATE \
                 KEY` block)"
                    .into()
            }
            other => format!("not PEM: {}", pem_problem(&other)),
        },
    })
}

fn read(file: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(file).map_err(|source| TlsError::Read { file: file.to_owned(), source })
}

fn pem_problem(error: &pem::Error) -> String {
    match error {
        pem::Error::MissingSectionEnd { end_marker } => {
            format!("a section is not closed (missing `{}`)", String::from_utf8_lossy(end_marker))
        }
        pem::Error::IllegalSectionStart { line } => {
            format!("malformed section start `{}`", String::from_utf8_lossy(line))
        }
        pem::Error::Base64Decode(e) => format!("bad base64 in a section: {e}"),
        other => other.to_string(),
    }
}
