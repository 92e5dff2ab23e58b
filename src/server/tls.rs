//! The rustls server configuration: serving certificate (files or self-signed), minimum version,
//! cipher suites, ALPN `h2` + `http/1.1`, and client certificates requested when a client CA is
//! configured.
//!
//! Mirrors `pkg/server/secure_serving.go` (`tlsConfig`). As there, a client certificate is
//! requested but its chain is not verified at the handshake (`tls.RequestClientCert`, see
//! `tls/client_auth.rs`): `ConnectionInfo::peer_certificates` holds any well-formed chain whose
//! leaf key the client proved it holds, and the authenticators decide per request whether a CA
//! they trust signed it. A client without a certificate still connects and may authenticate by
//! token or as anonymous.

mod certs;
pub(super) mod ciphers;
mod client_auth;

use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls_pki_types::CertificateDer;

pub use certs::{
    fingerprint, host_name, load_certificates, load_certified_key, self_signed, CertSource,
    ReloadableCert, SelfSigned,
};
pub use ciphers::{enabled_suites, TlsCipherSuite, TlsFlagError, TlsMinVersion};
use client_auth::client_verifier;

/// Why the TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("{flag} {}: cannot read {what}: {}", path.display(), pem_reason(error))]
    Pem {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What was expected in it.
        what: &'static str,
        /// The reason (not a `source`: the message says it, without the `I/O error: ` wrapper).
        error: rustls_pki_types::pem::Error,
    },
    /// A PEM file without a single certificate.
    #[error("{flag} {}: no certificate found (a PEM file with BEGIN CERTIFICATE blocks is expected)", path.display())]
    NoCertificates {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The key is unusable or does not belong to the certificate.
    #[error("--tls-cert-file {} and --tls-private-key-file {}: {}", cert_file.display(), key_file.display(), key_pair_reason(error))]
    KeyPair {
        /// The certificate file.
        cert_file: PathBuf,
        /// The key file.
        key_file: PathBuf,
        /// The reason (not a `source`: the message says it in plainer words).
        error: rustls::Error,
    },
    /// A client CA certificate rustls refuses as a trust anchor.
    #[error("client CA certificate {index}: {source}")]
    ClientCa {
        /// Its position in the union of CA bundles.
        index: usize,
        /// The reason.
        source: rustls::Error,
    },
    /// Generating the self-signed certificate failed.
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The generated key was refused.
    #[error("self-signed certificate key: {0}")]
    SelfSignedKey(rustls::Error),
    /// The versions and cipher suites leave nothing to negotiate.
    #[error("TLS versions and cipher suites: {0}")]
    Protocol(rustls::Error),
}

/// A PEM error's reason without the `I/O error: ` prefix, whose cause then follows once.
fn pem_reason(error: &rustls_pki_types::pem::Error) -> String {
    match error {
        rustls_pki_types::pem::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

/// rustls's words for a key that is not the certificate's (`keys may not be consistent:
/// KeyMismatch`), said plainly.
fn key_pair_reason(error: &rustls::Error) -> String {
    match error {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "the private key does not belong to the certificate (is it the key of another certificate?)".to_owned()
        }
        other => other.to_string(),
    }
}

/// The inputs of the server's TLS configuration.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// Serving certificate chain; with `key_file`, or neither for a self-signed certificate.
    pub cert_file: Option<PathBuf>,
    /// Serving private key.
    pub key_file: Option<PathBuf>,
    /// Minimum protocol version.
    pub min_version: TlsMinVersion,
    /// TLS 1.2 cipher suites (empty: all).
    pub cipher_suites: Vec<TlsCipherSuite>,
    /// The client CAs, whose subjects the certificate request names; empty: no certificate is
    /// requested.
    pub client_ca_roots: Vec<CertificateDer<'static>>,
}

/// The server configuration new handshakes use; replaced whole when the client CAs change (the
/// CA names a server sends in its certificate request are part of it, and Go clients pick their
/// certificate by them).
#[derive(Debug, Clone)]
pub struct TlsConfigCell(Arc<RwLock<Arc<rustls::ServerConfig>>>);

impl TlsConfigCell {
    /// The configuration in force.
    pub fn current(&self) -> Arc<rustls::ServerConfig> {
        Arc::clone(&self.0.read())
    }

    fn replace(&self, config: Arc<rustls::ServerConfig>) {
        *self.0.write() = config;
    }
}

impl From<Arc<rustls::ServerConfig>> for TlsConfigCell {
    fn from(config: Arc<rustls::ServerConfig>) -> Self {
        TlsConfigCell(Arc::new(RwLock::new(config)))
    }
}

/// The built configuration and the handles that outlive it.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The configuration built at start.
    pub config: Arc<rustls::ServerConfig>,
    /// The configuration in force (for the acceptor): `config` until the client CAs change.
    pub cell: TlsConfigCell,
    /// The certificate cell, for reloads.
    pub cert: Arc<ReloadableCert>,
    /// Where the certificate came from.
    pub source: CertSource,
    /// The self-signed certificate, when one was generated (for clients that want to trust it).
    pub self_signed_cert: Option<CertificateDer<'static>>,
    /// The provider the key was loaded with, for reloads.
    provider: Arc<CryptoProvider>,
    min_version: TlsMinVersion,
}

impl ServerTls {
    /// Reads `--tls-cert-file` and `--tls-private-key-file` again and serves them to new
    /// handshakes; established connections keep their certificate. On error the current
    /// certificate stays. Returns whether anything was reloaded (nothing for a self-signed one).
    pub fn reload(&self) -> Result<bool, TlsError> {
        let CertSource::Files {
            cert_file,
            key_file,
        } = &self.source
        else {
            return Ok(false);
        };
        let key = load_certified_key(cert_file, key_file, &self.provider)?;
        if let Some(leaf) = key.cert.first() {
            tracing::info!(cert_file = %cert_file.display(), sha256 = %fingerprint(leaf), "Serving certificate reloaded");
        }
        self.cert.replace(Arc::new(key));
        Ok(true)
    }

    /// Names `roots` (the client CAs after a reload) in the certificate request of new
    /// handshakes; established connections keep the certificate they presented, which the
    /// authenticators verify per request against the CAs in force. On error nothing changes.
    pub fn set_client_ca_roots(&self, roots: &[CertificateDer<'static>]) -> Result<(), TlsError> {
        let verifier = client_verifier(roots, &self.provider)?;
        let config = server_config(&self.provider, self.min_version, verifier, &self.cert)?;
        self.cell.replace(Arc::new(config));
        tracing::info!(
            roots = roots.len(),
            "Client CAs of the TLS handshake replaced"
        );
        Ok(())
    }
}

/// The protocols offered by ALPN, in preference order (kube-apiserver's `NextProtos`).
pub const ALPN_PROTOCOLS: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Builds the rustls server configuration and logs the serving certificate's fingerprint.
pub fn build_server_tls(settings: &TlsSettings) -> Result<ServerTls, TlsError> {
    let provider = Arc::new(CryptoProvider {
        cipher_suites: enabled_suites(&settings.cipher_suites),
        ..rustls::crypto::ring::default_provider()
    });
    let (key, source, self_signed_cert) = match (&settings.cert_file, &settings.key_file) {
        (Some(cert_file), Some(key_file)) => {
            let key = load_certified_key(cert_file, key_file, &provider)?;
            let source = CertSource::Files {
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
            };
            (key, source, None)
        }
        _ => {
            let generated = self_signed(host_name().as_slice(), &provider)?;
            let source = CertSource::SelfSigned {
                names: generated.names,
            };
            (generated.key, source, Some(generated.cert_der))
        }
    };
    if let Some(leaf) = key.cert.first() {
        tracing::info!(source = ?source, sha256 = %fingerprint(leaf), "Serving certificate loaded");
    }
    let cert = Arc::new(ReloadableCert::new(Arc::new(key)));
    let verifier = client_verifier(&settings.client_ca_roots, &provider)?;
    let config = Arc::new(server_config(
        &provider,
        settings.min_version,
        verifier,
        &cert,
    )?);
    Ok(ServerTls {
        cell: TlsConfigCell::from(Arc::clone(&config)),
        config,
        cert,
        source,
        self_signed_cert,
        provider,
        min_version: settings.min_version,
    })
}

fn server_config(
    provider: &Arc<CryptoProvider>,
    min_version: TlsMinVersion,
    verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
    cert: &Arc<ReloadableCert>,
) -> Result<rustls::ServerConfig, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(min_version.protocol_versions())
        .map_err(TlsError::Protocol)?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(cert.clone());
    config.alpn_protocols = ALPN_PROTOCOLS.iter().map(|p| p.to_vec()).collect();
    // The suite is chosen by the server's order (see `enabled_suites`), as Go's server does.
    config.ignore_client_order = true;
    Ok(config)
}

/// The client CA bundles whose union the handshake's certificate request names, when the caller
/// does not give the roots itself (the authenticator's `client_ca_roots()` gives the same set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCaFiles {
    /// `--client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-client-ca-file`.
    pub requestheader_client_ca_file: Option<PathBuf>,
}

impl ClientCaFiles {
    /// The files, each with the flag that names it in errors.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, &Path)> {
        [
            ("--client-ca-file", &self.client_ca_file),
            (
                "--requestheader-client-ca-file",
                &self.requestheader_client_ca_file,
            ),
        ]
        .into_iter()
        .filter_map(|(flag, path)| Some((flag, path.as_deref()?)))
    }
}

/// The union of the client CA bundles, the CAs the handshake's certificate request names.
pub fn load_client_ca_roots(
    files: &ClientCaFiles,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let mut roots = Vec::new();
    for (flag, path) in files.named() {
        for cert in load_certificates(path, flag)? {
            if !roots.contains(&cert) {
                roots.push(cert);
            }
        }
    }
    Ok(roots)
}

#[cfg(test)]
mod tests;
