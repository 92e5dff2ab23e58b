//! Client certificates: verifying a chain against one CA bundle and reading the subject.
//!
//! Mirrors `pkg/authentication/request/x509/x509.go`. Verification uses rustls'
//! `WebPkiClientVerifier` (one per bundle), which, like the apiserver's `DefaultVerifyOptions`,
//! requires the client-auth extended key usage when the certificate lists any.
//!
//! As in the apiserver, this is the only place a client chain is verified: the TLS handshake
//! requests a certificate without checking who signed it (`tls.RequestClientCert`, see
//! `server::tls`), so a chain from any CA reaches [`CaBundle::verify`]. One that does not verify
//! is an error of the authenticator that asked (x509 or requestheader), which the union collects
//! while it tries the others: a valid token on the same request still authenticates, and without
//! one the request gets 401, never anonymous.

use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};
use sha2::{Digest, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::der_parser::oid;
use x509_parser::extensions::ParsedExtension;
use x509_parser::prelude::FromDer;

use super::config::AuthConfigError;
use super::error::CertError;
use super::Identity;

/// The `extra` key under which the apiserver records the certificate fingerprint.
pub(crate) const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

mod verified;

pub use verified::earliest_not_after;
use verified::VerifiedChains;
pub(crate) use verified::VerifiedLeaf;

/// A CA bundle read from a file, and the verifier built over it; [`CaBundle::reload`] reads the
/// file again and swaps in the new set atomically (mirrors `DynamicFileCAContent`: an unusable
/// file is refused and the last good set stays).
pub(crate) struct CaBundle {
    /// The flag and the file, for reloads and errors; `None` for a bundle given as text.
    source: Option<(&'static str, PathBuf)>,
    current: RwLock<Arc<CaSet>>,
}

/// One generation of a bundle: its certificates, verifier and verified-chain cache.
struct CaSet {
    certs: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
    verified: VerifiedChains,
    /// SHA-256 of the PEM text it was parsed from.
    digest: [u8; 32],
}

impl CaBundle {
    /// Reads a PEM bundle; `what` names the flag in errors.
    pub(crate) fn load(what: &'static str, path: &Path) -> Result<Self, AuthConfigError> {
        let set = read_ca_set(what, path)?;
        Ok(CaBundle {
            source: Some((what, path.to_path_buf())),
            current: RwLock::new(Arc::new(set)),
        })
    }

    /// Parses a PEM bundle of one or more CA certificates.
    #[cfg(test)]
    pub(crate) fn from_pem(pem: &[u8]) -> Result<Self, String> {
        Ok(CaBundle {
            source: None,
            current: RwLock::new(Arc::new(CaSet::from_pem(pem)?)),
        })
    }

    /// Reads the file again; `Ok(true)` when its content changed and the new set is in use,
    /// `Ok(false)` when nothing changed (or the bundle has no file). On error the current set
    /// stays.
    pub(crate) fn reload(&self) -> Result<bool, AuthConfigError> {
        let Some((what, path)) = &self.source else {
            return Ok(false);
        };
        let pem = read_pem(what, path)?;
        if Sha256::digest(&pem).as_slice() == self.current().digest {
            return Ok(false);
        }
        let set = parse_ca_set(what, path, &pem)?;
        *self.current.write() = Arc::new(set);
        tracing::info!(flag = what, file = %path.display(), "Client CA bundle reloaded");
        Ok(true)
    }

    fn current(&self) -> Arc<CaSet> {
        Arc::clone(&self.current.read())
    }

    /// The CA certificates in use, DER.
    pub(crate) fn certs(&self) -> Vec<CertificateDer<'static>> {
        self.current().certs.clone()
    }

    /// Verifies `chain` (leaf first, then intermediates) against this bundle at `now` and reads
    /// its leaf; a chain that verified in the last minute (and has not expired since) is neither
    /// verified nor read again.
    pub(crate) fn verify(
        &self,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<Arc<VerifiedLeaf>, CertError> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err(CertError::Parse("empty certificate chain".to_string()));
        };
        let set = self.current();
        if let Some(known) = set.verified.get(chain, now) {
            return known;
        }
        if let Err(e) = set.verifier.verify_client_cert(leaf, intermediates, now) {
            let error = CertError::Verify {
                id: certificate_identifier(leaf),
                reason: e.to_string(),
            };
            if e == rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) {
                set.verified
                    .insert_unknown_issuer(chain, now, error.clone());
            }
            return Err(error);
        }
        let read = Arc::new(VerifiedLeaf::read(leaf));
        set.verified.insert_verified(chain, now, Arc::clone(&read));
        Ok(read)
    }
}

fn read_pem(what: &'static str, path: &Path) -> Result<Vec<u8>, AuthConfigError> {
    std::fs::read(path).map_err(|source| AuthConfigError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn read_ca_set(what: &'static str, path: &Path) -> Result<CaSet, AuthConfigError> {
    parse_ca_set(what, path, &read_pem(what, path)?)
}

fn parse_ca_set(what: &'static str, path: &Path, pem: &[u8]) -> Result<CaSet, AuthConfigError> {
    CaSet::from_pem(pem).map_err(|message| AuthConfigError::CaBundle {
        what,
        path: path.to_path_buf(),
        message,
    })
}

impl CaSet {
    fn from_pem(pem: &[u8]) -> Result<Self, String> {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("not a PEM certificate bundle: {e}"))?;
        if certs.is_empty() {
            return Err("holds no certificate".to_string());
        }
        let mut roots = RootCertStore::empty();
        for cert in &certs {
            roots
                .add(cert.clone())
                .map_err(|e| format!("unusable CA certificate: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| format!("building the verifier: {e}"))?;
        Ok(CaSet {
            certs,
            verifier,
            verified: VerifiedChains::default(),
            digest: Sha256::digest(pem).into(),
        })
    }
}

/// The parts of a leaf certificate's subject the authenticators use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subject {
    /// The CN; Go's `pkix.Name` keeps the last one when there are several.
    pub(crate) common_name: String,
    /// Every O, in order.
    pub(crate) organizations: Vec<String>,
    /// Every UID attribute (OID 0.9.2342.19200300.100.1.1); `None` when not a string.
    uids: Vec<Option<String>>,
}

impl Subject {
    /// Reads the subject of a DER certificate.
    pub(crate) fn parse(der: &[u8]) -> Result<Self, CertError> {
        let (_, cert) =
            X509Certificate::from_der(der).map_err(|e| CertError::Parse(e.to_string()))?;
        let name = cert.subject();
        // Go's FillFromRDNSequence skips non-string values and lets a later CN win.
        let common_name = name
            .iter_common_name()
            .filter_map(|a| a.as_str().ok())
            .last()
            .unwrap_or_default()
            .to_string();
        let organizations = name
            .iter_organization()
            .filter_map(|a| a.as_str().ok().map(str::to_string))
            .collect();
        let uid_oid = oid!(0.9.2342 .19200300 .100 .1 .1);
        let uids = name
            .iter_by_oid(&uid_oid)
            .map(|a| a.as_str().ok().map(str::to_string))
            .collect();
        Ok(Subject {
            common_name,
            organizations,
            uids,
        })
    }

    /// Mirrors `parseUIDFromCert` (AllowParsingUserUIDFromCertAuth, on by default): at most one
    /// UID attribute, a non-empty string.
    pub(crate) fn uid(&self) -> Result<String, CertError> {
        match self.uids.as_slice() {
            [] => Ok(String::new()),
            [None] => Err(CertError::Uid(
                "unable to parse UID into a string".to_string(),
            )),
            [Some(uid)] if uid.is_empty() => {
                Err(CertError::Uid("UID cannot be an empty string".to_string()))
            }
            [Some(uid)] => Ok(uid.clone()),
            many => {
                let shown: Vec<&str> = many.iter().map(|u| u.as_deref().unwrap_or("?")).collect();
                Err(CertError::Uid(format!(
                    "expected 1 UID, but found multiple: [{}]",
                    shown.join(" ")
                )))
            }
        }
    }
}

/// Authenticates a verified client certificate as its CN. Mirrors `x509.Authenticator` with
/// `CommonNameUserConversion`.
pub(crate) struct ClientCertAuthenticator {
    ca: CaBundle,
}

impl ClientCertAuthenticator {
    pub(crate) fn new(ca: CaBundle) -> Self {
        ClientCertAuthenticator { ca }
    }

    /// The CA bundle, for the server's TLS verifier.
    pub(crate) fn ca(&self) -> &CaBundle {
        &self.ca
    }

    /// `Ok(None)` when no certificate was presented or its CN is empty; an error when the
    /// presented chain does not verify.
    pub(crate) fn authenticate(
        &self,
        chain: Option<&[CertificateDer<'static>]>,
        now: UnixTime,
    ) -> Result<Option<Identity>, CertError> {
        let Some(chain) = chain.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let leaf = self.ca.verify(chain, now)?;
        let subject = leaf.subject.as_ref().map_err(Clone::clone)?;
        if subject.common_name.is_empty() {
            return Ok(None);
        }
        let uid = subject.uid()?;
        let mut identity = Identity {
            user: subject.common_name.clone(),
            uid,
            groups: subject.organizations.clone(),
            ..Identity::default()
        };
        identity.extra.insert(
            CREDENTIAL_ID_KEY.to_string(),
            vec![format!("X509SHA256={}", leaf.fingerprint)],
        );
        Ok(Some(identity))
    }
}

/// `SN=<decimal serial>, SKID=<AA:BB..>, AKID=<AA:BB..>`, as `certificateIdentifier` writes it.
fn certificate_identifier(der: &CertificateDer<'_>) -> String {
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return "<unparsable certificate>".to_string();
    };
    let (mut skid, mut akid) = (String::new(), String::new());
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(id) => skid = column_separated_hex(id.0),
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                if let Some(id) = &aki.key_identifier {
                    akid = column_separated_hex(id.0);
                }
            }
            _ => {}
        }
    }
    format!(
        "SN={}, SKID={skid}, AKID={akid}",
        cert.tbs_certificate.serial
    )
}

fn column_separated_hex(bytes: &[u8]) -> String {
    let parts: Vec<String> = bytes.iter().map(|b| format!("{b:02X}")).collect();
    parts.join(":")
}

/// Lower-case hex, without a `format!` per byte (this runs on every client-certificate request).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests;
