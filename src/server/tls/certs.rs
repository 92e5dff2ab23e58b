//! The serving certificate: loaded from PEM files or generated self-signed, behind a resolver that
//! can be swapped at run time (certificate reload).

use parking_lot::RwLock;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

use super::TlsError;

/// The serving certificate, shared by every handshake and replaceable without a restart.
///
/// A `ResolvesServerCert` over a read-mostly cell: a handshake clones one `Arc`, a reload swaps it.
#[derive(Debug)]
pub struct ReloadableCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ReloadableCert {
    /// Serves `key` until it is replaced.
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        Self {
            current: RwLock::new(key),
        }
    }

    /// The certificate new handshakes get.
    pub fn current(&self) -> Arc<CertifiedKey> {
        // A poisoned lock still holds a whole Arc: a panicking writer cannot leave it half-written.
        self.current.read().clone()
    }

    /// Serves `key` to every later handshake; established connections keep theirs.
    pub fn replace(&self, key: Arc<CertifiedKey>) {
        *self.current.write() = key;
    }
}

impl ResolvesServerCert for ReloadableCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Loads a certificate chain and its private key from PEM files and checks that they match.
pub fn load_certified_key(
    cert_file: &Path,
    key_file: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let chain = load_certificates(cert_file, "--tls-cert-file")?;
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|error| TlsError::Pem {
        flag: "--tls-private-key-file",
        path: key_file.to_owned(),
        what: "private key",
        error,
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|error| TlsError::KeyPair {
        cert_file: cert_file.to_owned(),
        key_file: key_file.to_owned(),
        error,
    })
}

/// Reads every certificate of a PEM file (a chain or a CA bundle) that `flag` named; at least
/// one is required.
pub fn load_certificates(
    path: &Path,
    flag: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem_error = |error| TlsError::Pem {
        flag,
        path: path.to_owned(),
        what: "certificate",
        error,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificates {
            flag,
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// A self-signed serving certificate made at start, as kube-apiserver makes one without
/// `--tls-cert-file` (it writes it to `--cert-dir`; we keep it in memory only).
#[derive(Debug)]
pub struct SelfSigned {
    /// The certificate and key for rustls.
    pub key: CertifiedKey,
    /// The certificate, for clients (e.g. tests) that want to trust it.
    pub cert_der: CertificateDer<'static>,
    /// Its subject alternative names.
    pub names: Vec<String>,
}

/// Generates a self-signed certificate for `localhost`, `127.0.0.1`, `::1` and `extra_names`.
pub fn self_signed(
    extra_names: &[String],
    provider: &CryptoProvider,
) -> Result<SelfSigned, TlsError> {
    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    for name in extra_names {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let generated = rcgen::generate_simple_self_signed(names.clone())?;
    let cert_der = generated.cert.der().clone();
    let key_der = PrivatePkcs8KeyDer::from(generated.key_pair.serialize_der());
    let key = CertifiedKey::from_der(vec![cert_der.clone()], key_der.into(), provider)
        .map_err(TlsError::SelfSignedKey)?;
    Ok(SelfSigned {
        key,
        cert_der,
        names,
    })
}

/// This machine's host name, when it is a usable DNS name (for the self-signed certificate).
pub fn host_name() -> Option<String> {
    let name = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())?;
    let name = name.trim().to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    valid.then_some(name)
}

/// The SHA-256 fingerprint of a certificate, as `openssl x509 -fingerprint -sha256` prints it.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = Sha256::digest(cert.as_ref());
    let mut out = String::with_capacity(digest.len() * 3);
    for (i, byte) in digest.iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{byte:02X}");
    }
    out
}

/// Where a certificate came from, for the start-up log line.
#[derive(Debug, Clone)]
pub enum CertSource {
    /// `--tls-cert-file` / `--tls-private-key-file`.
    Files {
        /// The certificate file.
        cert_file: PathBuf,
        /// The key file.
        key_file: PathBuf,
    },
    /// Generated at start.
    SelfSigned {
        /// Its subject alternative names.
        names: Vec<String>,
    },
}
