use rustls::crypto::ring::cipher_suite as ring;

use super::{
    build_server_tls, enabled_suites, fingerprint, load_certificates, TlsCipherSuite, TlsError,
    TlsFlagError, TlsMinVersion, TlsSettings,
};

/// A self-signed certificate, TLS 1.2 and up, every suite, no client CAs.
fn self_signed() -> TlsSettings {
    TlsSettings {
        cert_file: None,
        key_file: None,
        min_version: TlsMinVersion::Tls12,
        cipher_suites: Vec::new(),
        client_ca_roots: Vec::new(),
    }
}

fn suites(names: &[&str]) -> Vec<TlsCipherSuite> {
    names
        .iter()
        .map(|n| TlsCipherSuite::parse(n).expect("known suite"))
        .collect()
}

#[test]
fn cipher_suite_lists_restrict_tls12_and_keep_tls13_in_gos_order() {
    let tls13 = [
        ring::TLS13_AES_128_GCM_SHA256,
        ring::TLS13_AES_256_GCM_SHA384,
        ring::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    let cases: Vec<(Vec<&str>, Vec<rustls::SupportedCipherSuite>)> = vec![
        (
            vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
            vec![ring::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256],
        ),
        (
            vec![
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            ],
            // The flag's order is ignored: AES-GCM ranks above ChaCha20, as in Go.
            vec![
                ring::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                ring::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            ],
        ),
        (vec!["TLS_AES_128_GCM_SHA256"], vec![]),
    ];
    for (names, tls12) in cases {
        let expected: Vec<_> = tls13.iter().copied().chain(tls12).collect();
        assert_eq!(enabled_suites(&suites(&names)), expected, "{names:?}");
    }
    let all = enabled_suites(&[]);
    assert_eq!(
        all,
        [
            &tls13[..],
            &[
                ring::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                ring::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                ring::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                ring::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                ring::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                ring::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ][..]
        ]
        .concat()
    );
}

/// Hands `client`'s and `server`'s records to each other until neither has more to say.
fn handshake(client: &mut rustls::ClientConnection, server: &mut rustls::ServerConnection) {
    for _ in 0..10 {
        let mut wire = Vec::new();
        client.write_tls(&mut wire).expect("client writes");
        server.read_tls(&mut wire.as_slice()).expect("server reads");
        server.process_new_packets().expect("server accepts");
        wire.clear();
        server.write_tls(&mut wire).expect("server writes");
        client.read_tls(&mut wire.as_slice()).expect("client reads");
        client.process_new_packets().expect("client accepts");
        if !client.is_handshaking() && !server.is_handshaking() {
            return;
        }
    }
    panic!("the handshake did not complete");
}

#[test]
fn the_server_picks_the_suite_by_its_own_order_as_go_does() {
    let settings = self_signed();
    let tls = build_server_tls(&settings).expect("TLS");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(tls.self_signed_cert.clone().expect("self-signed"))
        .expect("root");
    // Clients that list AES-256-GCM (or ChaCha20) first, as OpenSSL's defaults do, get
    // AES-128-GCM on both versions.
    for (version, offered, expected) in [
        (
            &rustls::version::TLS13,
            vec![
                ring::TLS13_AES_256_GCM_SHA384,
                ring::TLS13_CHACHA20_POLY1305_SHA256,
                ring::TLS13_AES_128_GCM_SHA256,
            ],
            ring::TLS13_AES_128_GCM_SHA256,
        ),
        (
            &rustls::version::TLS12,
            vec![
                ring::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                ring::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                ring::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                ring::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                ring::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            ],
            // The self-signed key's type decides between the ECDSA and RSA suites.
            ring::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
    ] {
        let provider = rustls::crypto::CryptoProvider {
            cipher_suites: offered,
            ..rustls::crypto::ring::default_provider()
        };
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
            .with_protocol_versions(&[version])
            .expect("versions")
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
        let mut client =
            rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("client");
        let mut server = rustls::ServerConnection::new(tls.config.clone()).expect("server");
        handshake(&mut client, &mut server);
        assert_eq!(server.negotiated_cipher_suite(), Some(expected));
    }
}

#[test]
fn tls_flag_values_are_parsed_with_clear_errors() {
    assert_eq!(
        TlsMinVersion::parse("VersionTLS12"),
        Ok(TlsMinVersion::Tls12)
    );
    assert_eq!(
        TlsMinVersion::parse("VersionTLS13"),
        Ok(TlsMinVersion::Tls13)
    );
    assert_eq!(
        TlsMinVersion::parse("VersionTLS10"),
        Err(TlsFlagError::UnsupportedVersion("VersionTLS10".into()))
    );
    assert_eq!(
        TlsMinVersion::parse("1.2"),
        Err(TlsFlagError::UnknownVersion("1.2".into()))
    );
    assert_eq!(TlsMinVersion::Tls13.to_string(), "VersionTLS13");
    assert_eq!(
        TlsCipherSuite::parse("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA"),
        Err(TlsFlagError::UnsupportedCipherSuite(
            "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA".into()
        ))
    );
    assert_eq!(
        TlsCipherSuite::parse("tls_aes_128_gcm_sha256"),
        Err(TlsFlagError::UnknownCipherSuite(
            "tls_aes_128_gcm_sha256".into()
        ))
    );
    let message = TlsFlagError::UnknownCipherSuite("X".into()).to_string();
    assert!(
        message.contains("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
        "{message}"
    );
}

#[test]
fn self_signed_certificate_is_generated_with_alpn() {
    let settings = self_signed();
    let tls = build_server_tls(&settings).expect("TLS");
    assert_eq!(
        tls.config.alpn_protocols,
        [b"h2".to_vec(), b"http/1.1".to_vec()]
    );
    let cert = tls.self_signed_cert.expect("self-signed");
    assert_eq!(tls.cert.current().cert[0], cert);
    let print = fingerprint(&cert);
    assert_eq!(print.len(), 32 * 3 - 1);
    assert!(print
        .chars()
        .all(|c| c == ':' || c.is_ascii_digit() || ('A'..='F').contains(&c)));
}

#[test]
fn unreadable_pem_files_name_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "no PEM here\n").expect("write");
    assert!(
        matches!(load_certificates(&empty, "--client-ca-file"), Err(TlsError::NoCertificates { path, .. }) if path == empty)
    );

    let missing = dir.path().join("missing.pem");
    let err = load_certificates(&missing, "--client-ca-file").expect_err("missing file");
    assert!(err.to_string().contains("missing.pem"), "{err}");

    let settings = TlsSettings {
        cert_file: Some(missing.clone()),
        key_file: Some(empty),
        ..self_signed()
    };
    let err = build_server_tls(&settings).expect_err("missing certificate");
    assert!(err.to_string().contains("missing.pem"), "{err}");
}

#[test]
fn naming_only_tls13_suites_still_builds() {
    let settings = TlsSettings {
        cipher_suites: suites(&["TLS_AES_128_GCM_SHA256"]),
        ..self_signed()
    };
    assert!(build_server_tls(&settings).is_ok());
}

mod request_client_cert {
    use rustls::server::danger::ClientCertVerifier;
    use rustls::{CertificateError, Error};
    use rustls_pki_types::{CertificateDer, UnixTime};

    use super::super::client_auth::RequestClientCert;
    use super::super::TlsError;
    use crate::auth::test_pki::{ClientSpec, TestCa};

    fn subject(cert: &CertificateDer<'_>) -> Vec<u8> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).expect("x509");
        parsed.subject().as_raw().to_vec()
    }

    fn leaf(ca: &TestCa, spec: ClientSpec<'_>) -> CertificateDer<'static> {
        ca.client(spec).remove(0)
    }

    #[test]
    fn names_the_client_cas_and_takes_any_well_formed_chain() {
        let (client_ca, front_proxy_ca) = (TestCa::new("client-ca"), TestCa::new("front-proxy-ca"));
        let provider = rustls::crypto::ring::default_provider();
        let verifier = RequestClientCert::new(&[client_ca.der(), front_proxy_ca.der()], &provider)
            .expect("verifier");
        assert!(verifier.offer_client_auth() && !verifier.client_auth_mandatory());
        let hints: Vec<&[u8]> = verifier
            .root_hint_subjects()
            .iter()
            .map(|h| h.as_ref())
            .collect();
        assert_eq!(
            hints,
            [subject(&client_ca.der()), subject(&front_proxy_ca.der())]
        );
        assert_eq!(
            verifier.supported_verify_schemes(),
            provider
                .signature_verification_algorithms
                .supported_schemes()
        );

        let stranger = TestCa::new("stranger-ca");
        let intermediate = client_ca.intermediate("intermediate-ca");
        let garbage = CertificateDer::from(b"not a certificate".to_vec());
        let mallory = |ca: &TestCa| leaf(ca, spec(false, false));
        // The authenticators refuse every accepted chain but the first two; the handshake takes
        // them all, and refuses only what does not parse.
        let cases = [
            ("from a client CA", vec![mallory(&client_ca)], true),
            (
                "through an intermediate",
                vec![mallory(&intermediate), intermediate.der()],
                true,
            ),
            ("from an unknown CA", vec![mallory(&stranger)], true),
            ("expired", vec![leaf(&client_ca, spec(true, false))], true),
            (
                "for servers",
                vec![leaf(&client_ca, spec(false, true))],
                true,
            ),
            ("an unparsable leaf", vec![garbage.clone()], false),
            (
                "an unparsable intermediate",
                vec![mallory(&client_ca), garbage],
                false,
            ),
        ];
        for (name, chain, accepted) in cases {
            let got = verifier.verify_client_cert(&chain[0], &chain[1..], UnixTime::now());
            let want = Error::InvalidCertificate(CertificateError::BadEncoding);
            if accepted {
                assert!(got.is_ok(), "{name}: {:?}", got.err());
            } else {
                assert_eq!(got.err(), Some(want), "{name}");
            }
        }
    }

    fn spec(expired: bool, server_auth_only: bool) -> ClientSpec<'static> {
        ClientSpec {
            cn: Some("mallory"),
            expired,
            server_auth_only,
            ..Default::default()
        }
    }

    #[test]
    fn a_client_ca_that_cannot_be_a_trust_anchor_is_refused() {
        let provider = rustls::crypto::ring::default_provider();
        let good = TestCa::new("client-ca").der();
        let garbage = CertificateDer::from(b"not a certificate".to_vec());
        let err = RequestClientCert::new(&[good, garbage], &provider).expect_err("garbage CA");
        assert!(matches!(err, TlsError::ClientCa { index: 1, .. }), "{err}");
    }
}
