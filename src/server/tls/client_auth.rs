//! Client certificates at the handshake: requested, not verified.
//!
//! Mirrors kube-apiserver's `pkg/server/secure_serving.go` (`tlsConfig`): with a client CA
//! configured it sets `ClientAuth = tls.RequestClientCert` and `ClientCAs` to the union of
//! `--client-ca-file` and `--requestheader-client-ca-file`. The certificate request names those
//! CAs (Go clients pick their certificate by them), a client without a certificate still connects,
//! and a presented chain is not verified there: the requestheader and x509 authenticators verify
//! it per request against their own bundle, so a certificate from a CA neither trusts is a
//! rejected credential (401, or another credential on the request wins), never a failed
//! handshake. What the handshake still checks, as Go's does: every presented certificate parses,
//! and the client proves it holds the leaf's private key (the `CertificateVerify` signature).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::TlsError;

/// Go's `tls.RequestClientCert` over a set of client CAs: offers their subjects as hints, takes
/// any well-formed chain whose leaf key signed the handshake, and requires none.
#[derive(Debug)]
pub(crate) struct RequestClientCert {
    hints: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl RequestClientCert {
    /// Hints the subjects of `roots`, each of which must be usable as a trust anchor (the
    /// authenticators verify against the same certificates); signatures are checked with
    /// `provider`'s algorithms.
    pub(crate) fn new(
        roots: &[CertificateDer<'static>],
        provider: &CryptoProvider,
    ) -> Result<Self, TlsError> {
        let mut store = RootCertStore::empty();
        for (index, root) in roots.iter().enumerate() {
            store
                .add(root.clone())
                .map_err(|source| TlsError::ClientCa { index, source })?;
        }
        Ok(RequestClientCert {
            hints: store.subjects(),
            algorithms: provider.signature_verification_algorithms,
        })
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    // Go's `processCertsFromClient` parses every certificate and, under `RequestClientCert`,
    // verifies nothing more.
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let parses = |der: &CertificateDer<'_>| x509_parser::parse_x509_certificate(der).is_ok();
        if parses(end_entity) && intermediates.iter().all(parses) {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::BadEncoding,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// No client certificate is requested when no client CA is configured (Go's `NoClientCert`);
/// otherwise [`RequestClientCert`] over `roots`.
pub(crate) fn client_verifier(
    roots: &[CertificateDer<'static>],
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    if roots.is_empty() {
        return Ok(rustls::server::WebPkiClientVerifier::no_client_auth());
    }
    Ok(Arc::new(RequestClientCert::new(roots, provider)?))
}
