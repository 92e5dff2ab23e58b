//! Test certificates made at run time with rcgen: CAs, client certificates with CN/O/UID.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls_pki_types::CertificateDer;

/// A CA that can sign client certificates.
pub(crate) struct TestCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// What to put in a client certificate.
#[derive(Default)]
pub(crate) struct ClientSpec<'a> {
    pub(crate) cn: Option<&'a str>,
    pub(crate) orgs: &'a [&'a str],
    pub(crate) uid: Option<&'a str>,
    pub(crate) server_auth_only: bool,
    pub(crate) expired: bool,
}

impl TestCa {
    pub(crate) fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("self-signed CA");
        TestCa { cert, key }
    }

    /// An intermediate CA signed by this one.
    pub(crate) fn intermediate(&self, name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("signed");
        TestCa { cert, key }
    }

    pub(crate) fn pem(&self) -> String {
        self.cert.pem()
    }

    pub(crate) fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// Writes the CA's PEM into `dir` and returns the path.
    pub(crate) fn write(&self, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.pem()).expect("write CA");
        path
    }

    /// A client certificate chain (leaf only) signed by this CA.
    pub(crate) fn client(&self, spec: ClientSpec<'_>) -> Vec<CertificateDer<'static>> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = spec.cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        // rcgen keeps one value per attribute type; a second O goes in as a custom type with
        // the same OID.
        assert!(
            spec.orgs.len() <= 2,
            "test PKI supports at most two O values"
        );
        for (i, org) in spec.orgs.iter().enumerate() {
            let ty = match i {
                0 => DnType::OrganizationName,
                _ => DnType::CustomDnType(vec![2, 5, 4, 10]),
            };
            params.distinguished_name.push(ty, *org);
        }
        if let Some(uid) = spec.uid {
            let oid = vec![0, 9, 2342, 19200300, 100, 1, 1];
            params
                .distinguished_name
                .push(DnType::CustomDnType(oid), uid);
        }
        params.extended_key_usages = if spec.server_auth_only {
            vec![ExtendedKeyUsagePurpose::ServerAuth]
        } else {
            vec![ExtendedKeyUsagePurpose::ClientAuth]
        };
        if spec.expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("signed");
        vec![cert.der().clone()]
    }
}
