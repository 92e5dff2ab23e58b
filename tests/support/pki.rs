//! Test PKI made at run time: a CA, a serving certificate for 127.0.0.1/localhost, client
//! certificates with a CN and an O, and rustls configurations around them.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate with its key, as DER and PEM.
pub struct Issued {
    /// The certificate.
    pub cert: CertificateDer<'static>,
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PEM.
    pub key_pem: String,
}

impl Issued {
    /// The key as rustls wants it.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).expect("test key parses")
    }

    /// A certificate and key read from PEM files (e.g. minted by the kube-apiserver harness).
    pub fn from_files(cert: &Path, key: &Path) -> Issued {
        let cert_pem = std::fs::read_to_string(cert).expect("read certificate");
        let key_pem = std::fs::read_to_string(key).expect("read key");
        Issued {
            cert: CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("certificate PEM"),
            cert_pem,
            key_pem,
        }
    }

    /// Writes `<name>.crt` and `<name>.key` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&cert, &self.cert_pem).expect("write cert");
        std::fs::write(&key, &self.key_pem).expect("write key");
        (cert, key)
    }
}

/// A certificate authority that issues test certificates.
pub struct TestCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl TestCa {
    /// A fresh self-signed CA named `name`.
    pub fn new(name: &str) -> Self {
        Self::valid_until(name, None)
    }

    /// A fresh self-signed CA named `name` that expires at the start of `(year, month, day)`
    /// (UTC); rcgen's far-future default without one.
    pub fn valid_until(name: &str, not_after: Option<(i32, u8, u8)>) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        if let Some((year, month, day)) = not_after {
            params.not_after = rcgen::date_time_ymd(year, month, day);
        }
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("ca key");
        let cert = params.self_signed(&key).expect("ca cert");
        TestCa { cert, key }
    }

    /// The CA certificate.
    pub fn cert(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// Writes the CA certificate to `dir/<name>`.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.cert_pem()).expect("write ca");
        path
    }

    /// A serving certificate for `127.0.0.1` and `localhost`.
    pub fn server_cert(&self) -> Issued {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string()]).expect("server params");
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate with CN `user` and, if given, O `group` (rcgen keeps one value per
    /// attribute type).
    pub fn client_cert(&self, user: &str, group: Option<&str>) -> Issued {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name.push(DnType::CommonName, user);
        if let Some(group) = group {
            params
                .distinguished_name
                .push(DnType::OrganizationName, group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    fn issue(&self, params: CertificateParams) -> Issued {
        let key = KeyPair::generate().expect("leaf key");
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("leaf cert");
        Issued {
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration: `serving` certificate, ALPN `alpn`, and client certificates verified
/// against `client_ca` when given (optional: clients without one are let in).
pub fn server_config(serving: &Issued, client_ca: Option<&TestCa>, alpn: &[&[u8]]) -> ServerConfig {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions");
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            roots.add(ca.cert()).expect("client ca");
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .allow_unauthenticated()
                .build()
                .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(vec![serving.cert.clone()], serving.key())
        .expect("server cert");
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// A client configuration trusting `ca`, presenting `identity` when given.
pub fn client_config(ca: &TestCa, identity: Option<&Issued>, alpn: &[&[u8]]) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert()).expect("ca");
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    let mut config = match identity {
        Some(id) => builder
            .with_client_auth_cert(vec![id.cert.clone()], id.key())
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}
