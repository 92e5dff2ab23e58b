//! TLS: ALPN, certificates from files or self-signed, client certificates, versions and suites,
//! certificate reload.

use super::*;

#[tokio::test]
async fn serves_http2_and_http1_as_chosen_by_alpn() {
    let server = start(
        settings(),
        ConnectionLimits::default(),
        echo_handler(),
        None,
    )
    .await;
    let cases: [(Vec<&'static [u8]>, Version); 4] = [
        (vec![b"h2", b"http/1.1"], Version::HTTP_2),
        (vec![b"http/1.1"], Version::HTTP_11),
        (vec![b"h2"], Version::HTTP_2),
        // No ALPN at all: the protocol is recognised from the first bytes.
        (vec![], Version::HTTP_11),
    ];
    for (alpn, version) in cases {
        let stream = connect(
            server.addr,
            &server.trust,
            ClientOptions {
                alpn,
                ..Default::default()
            },
        )
        .await
        .expect("handshake");
        let local_port = stream.get_ref().0.local_addr().expect("local addr").port();
        let (got, status, body) = get(stream, "/api/v1/pods").await.expect("response");
        assert_eq!((got, status), (version, StatusCode::OK));
        assert_eq!(
            body,
            format!("{version:?} /api/v1/pods peers=0 port={local_port}")
        );
    }
}

#[tokio::test]
async fn self_signed_certificate_covers_loopback_names() {
    let tls = kube_apf_proxy::server::build_server_tls(&settings()).expect("TLS");
    let der = tls.self_signed_cert.clone().expect("self-signed");
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).expect("x509");
    let san = cert
        .subject_alternative_name()
        .expect("SAN ext")
        .expect("SAN present");
    let names: Vec<String> = san
        .value
        .general_names
        .iter()
        .map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => d.to_string(),
            x509_parser::extensions::GeneralName::IPAddress(ip) => match ip.len() {
                4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*ip).expect("v4")).to_string(),
                _ => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*ip).expect("v6")).to_string(),
            },
            other => format!("{other:?}"),
        })
        .collect();
    for expected in ["localhost", "127.0.0.1", "::1"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    let server = start(
        settings(),
        ConnectionLimits::default(),
        echo_handler(),
        None,
    )
    .await;
    for server_name in ["localhost", "127.0.0.1"] {
        let options = ClientOptions {
            server_name,
            ..Default::default()
        };
        let stream = connect(server.addr, &server.trust, options)
            .await
            .expect("handshake");
        assert_eq!(get(stream, "/").await.expect("response").1, StatusCode::OK);
    }
}

#[tokio::test]
async fn serves_a_certificate_chain_and_key_from_pem_files() {
    let ca = Ca::new("serving-ca");
    let leaf = ca.server_cert();
    let dir = tempfile::tempdir().expect("tempdir");
    let cert_file = dir.path().join("tls.crt");
    let key_file = dir.path().join("tls.key");
    std::fs::write(&cert_file, format!("{}{}", leaf.cert_pem, ca.cert.pem())).expect("write cert");
    std::fs::write(&key_file, &leaf.key_pem).expect("write key");
    let tls = TlsSettings {
        cert_file: Some(cert_file.clone()),
        key_file: Some(key_file),
        ..settings()
    };
    let server = start(
        tls,
        ConnectionLimits::default(),
        echo_handler(),
        Some(ca.der()),
    )
    .await;
    let stream = connect(server.addr, &server.trust, ClientOptions::default())
        .await
        .expect("handshake");
    let chain = stream
        .get_ref()
        .1
        .peer_certificates()
        .expect("server chain")
        .to_vec();
    assert_eq!(chain, [leaf.cert.clone(), ca.der()]);
    assert_eq!(get(stream, "/").await.expect("response").1, StatusCode::OK);

    let other = ca.server_cert();
    let mismatched = dir.path().join("other.key");
    std::fs::write(&mismatched, &other.key_pem).expect("write key");
    let bad = TlsSettings {
        cert_file: Some(cert_file),
        key_file: Some(mismatched),
        ..settings()
    };
    let err = kube_apf_proxy::server::build_server_tls(&bad).expect_err("mismatched key");
    assert!(err.to_string().contains("tls.crt"), "{err}");
}

#[tokio::test]
async fn a_presented_client_certificate_is_in_connection_info() {
    let ca = Ca::new("client-ca");
    let alice = ca.client_cert("alice");
    let tls = TlsSettings {
        client_ca_roots: vec![ca.der()],
        ..settings()
    };
    let handler = Arc::new(|request: Request<Incoming>| async move {
        let info = request
            .extensions()
            .get::<ConnectionInfo>()
            .cloned()
            .expect("info");
        let chain = info
            .peer_certificates
            .map(|c| c.to_vec())
            .unwrap_or_default();
        let leaf_len = chain.first().map_or(0, |c| c.as_ref().len());
        support::text(if leaf_len > 0 { "certificate" } else { "none" })
    });
    let server = start(tls, ConnectionLimits::default(), handler, None).await;

    for alpn in [&b"h2"[..], b"http/1.1"] {
        let options = ClientOptions {
            alpn: vec![alpn],
            client_cert: Some((alice.cert.clone(), alice.key())),
            ..Default::default()
        };
        let stream = connect(server.addr, &server.trust, options)
            .await
            .expect("handshake");
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(alpn));
        let (_, status, body) = get(stream, "/").await.expect("response");
        assert_eq!((status, body.as_str()), (StatusCode::OK, "certificate"));
    }

    // A client without a certificate still connects, to authenticate by token or as anonymous.
    let stream = connect(server.addr, &server.trust, ClientOptions::default())
        .await
        .expect("handshake");
    assert_eq!(get(stream, "/").await.expect("response").2, "none");
}

/// Connects with `options` and sends one GET; the body, or why the handshake or the exchange
/// failed (with TLS 1.3 a client learns that the server refused its certificate on its first
/// read).
async fn exchange(server: &support::TestServer, options: ClientOptions) -> Result<String, String> {
    let stream = connect(server.addr, &server.trust, options)
        .await
        .map_err(|e| e.to_string())?;
    get(stream, "/")
        .await
        .map(|(_, _, body)| body)
        .map_err(|e| e.to_string())
}

/// The DER subject of a certificate, as a certificate request names its CA.
fn subject(cert: &rustls::pki_types::CertificateDer<'_>) -> Vec<u8> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).expect("x509");
    parsed.subject().as_raw().to_vec()
}

static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

#[tokio::test]
async fn a_client_certificate_from_an_unknown_ca_is_requested_but_not_verified() {
    // As kube-apiserver's tls.RequestClientCert: the handshake names the client CAs and takes any
    // chain whose key the client holds; the authenticators decide per request.
    let trusted = Ca::new("client-ca");
    let rogue = Ca::new("rogue-ca").client_cert("mallory");
    let tls = TlsSettings {
        client_ca_roots: vec![trusted.der()],
        ..settings()
    };
    let server = start(tls, ConnectionLimits::default(), echo_handler(), None).await;
    for versions in [TLS12_ONLY, TLS13_ONLY] {
        let presenting = support::Presenting::new(&rogue);
        let options = ClientOptions {
            alpn: vec![b"http/1.1"],
            presenting: Some(presenting.clone()),
            versions,
            ..Default::default()
        };
        let body = exchange(&server, options).await.expect("served");
        assert!(body.contains("peers=1"), "{versions:?}: {body}");
        assert_eq!(presenting.hints(), [[subject(&trusted.der())]]);
    }
    assert_eq!(server.stats.tls_handshake_errors(), 0);
}

#[tokio::test]
async fn a_client_certificate_without_its_private_key_fails_the_handshake() {
    // Verifying no chain must not mean verifying no signature: the client still proves that it
    // holds the key of the certificate it presents.
    let ca = Ca::new("client-ca");
    let (alice, mallory) = (ca.client_cert("alice"), ca.client_cert("mallory"));
    let tls = TlsSettings {
        client_ca_roots: vec![ca.der()],
        ..settings()
    };
    let server = start(tls, ConnectionLimits::default(), echo_handler(), None).await;
    for (n, versions) in [TLS12_ONLY, TLS13_ONLY].into_iter().enumerate() {
        let options = ClientOptions {
            alpn: vec![b"http/1.1"],
            presenting: Some(support::Presenting::with_key_of(&alice, &mallory)),
            versions,
            ..Default::default()
        };
        let outcome = exchange(&server, options).await;
        assert!(outcome.is_err(), "{versions:?}: {outcome:?}");
        tokio::time::timeout(PROMPTLY, async {
            while server.stats.tls_handshake_errors() <= n as u64 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the failed handshake is counted");
    }
}

#[tokio::test]
async fn the_certificate_request_names_the_client_cas_in_force() {
    let (first, rotated) = (Ca::new("client-ca"), Ca::new("rotated-ca"));
    let alice = first.client_cert("alice");
    let settings = TlsSettings {
        client_ca_roots: vec![first.der()],
        ..settings()
    };
    let tls = kube_apf_proxy::server::build_server_tls(&settings).expect("TLS");
    let trust = tls.self_signed_cert.clone().expect("self-signed");
    let server = kube_apf_proxy::server::SecureServer::bind_loopback(
        tls.cell.clone(),
        ConnectionLimits::default(),
    )
    .await
    .expect("bind");
    let addr = server.local_addr();
    let (_trigger, signal) = kube_apf_proxy::server::shutdown_channel();
    tokio::spawn(server.serve(echo_handler(), signal));
    let hints_of_a_handshake = || async {
        let presenting = support::Presenting::new(&alice);
        let options = ClientOptions {
            presenting: Some(presenting.clone()),
            ..Default::default()
        };
        let stream = connect(addr, &trust, options).await.expect("handshake");
        (stream, presenting.hints())
    };
    let (before, hints) = hints_of_a_handshake().await;
    assert_eq!(hints, [[subject(&first.der())]]);
    tls.set_client_ca_roots(&[rotated.der(), first.der()])
        .expect("replace the client CAs");
    let (_, hints) = hints_of_a_handshake().await;
    assert_eq!(hints, [[subject(&rotated.der()), subject(&first.der())]]);
    // The connection made before keeps its certificate.
    let (_, status, body) = get(before, "/").await.expect("response");
    assert_eq!((status, body.contains("peers=1")), (StatusCode::OK, true));

    let unusable = rustls::pki_types::CertificateDer::from(b"not a certificate".to_vec());
    assert!(tls.set_client_ca_roots(&[unusable]).is_err());
    let (_, hints) = hints_of_a_handshake().await;
    assert_eq!(
        hints,
        [[subject(&rotated.der()), subject(&first.der())]],
        "the last good CAs stay"
    );
}

#[tokio::test]
async fn tls_min_version_and_cipher_suites_are_enforced() {
    let suite = TlsCipherSuite::parse("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384").expect("suite");
    let tls12 = TlsSettings {
        cipher_suites: vec![suite],
        ..settings()
    };
    let server = start(tls12, ConnectionLimits::default(), echo_handler(), None).await;
    let offer = |name: &str| ClientOptions {
        versions: TLS12_ONLY,
        suites: Some(vec![TlsCipherSuite::parse(name).expect("suite").suite()]),
        ..Default::default()
    };
    let ok = connect(
        server.addr,
        &server.trust,
        offer("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
    )
    .await;
    assert!(ok.is_ok(), "{:?}", ok.err());
    let refused = connect(
        server.addr,
        &server.trust,
        offer("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
    )
    .await;
    assert!(
        refused.is_err(),
        "a suite outside --tls-cipher-suites must be refused"
    );

    let tls13 = TlsSettings {
        min_version: TlsMinVersion::Tls13,
        ..settings()
    };
    let server = start(tls13, ConnectionLimits::default(), echo_handler(), None).await;
    let tls12_only = ClientOptions {
        versions: TLS12_ONLY,
        ..Default::default()
    };
    assert!(connect(server.addr, &server.trust, tls12_only)
        .await
        .is_err());
    assert!(
        connect(server.addr, &server.trust, ClientOptions::default())
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_replaced_certificate_is_served_to_new_handshakes() {
    let tls = kube_apf_proxy::server::build_server_tls(&settings()).expect("TLS");
    let first = tls.self_signed_cert.clone().expect("self-signed");
    let server = kube_apf_proxy::server::SecureServer::bind_loopback(
        tls.config.clone(),
        ConnectionLimits::default(),
    )
    .await
    .expect("bind");
    let addr = server.local_addr();
    let (_trigger, signal) = kube_apf_proxy::server::shutdown_channel();
    tokio::spawn(server.serve(echo_handler(), signal));

    let before = connect(addr, &first, ClientOptions::default())
        .await
        .expect("handshake");
    let provider = rustls::crypto::ring::default_provider();
    let second = kube_apf_proxy::server::tls::self_signed(&[], &provider).expect("generate");
    tls.cert.replace(Arc::new(second.key));
    let after = connect(addr, &second.cert_der, ClientOptions::default())
        .await
        .expect("handshake with the new certificate");
    assert_eq!(
        after.get_ref().1.peer_certificates().expect("chain")[0],
        second.cert_der
    );
    // The connection made before the swap keeps working.
    assert_eq!(get(before, "/").await.expect("response").1, StatusCode::OK);
    assert!(connect(addr, &first, ClientOptions::default())
        .await
        .is_err());
}

#[tokio::test]
async fn reload_serves_rewritten_certificate_files() {
    let ca = Ca::new("serving-ca");
    let (first, second) = (ca.server_cert(), ca.server_cert());
    let dir = tempfile::tempdir().expect("tempdir");
    let cert_file = dir.path().join("tls.crt");
    let key_file = dir.path().join("tls.key");
    let write = |leaf: &support::Leaf| {
        std::fs::write(&cert_file, &leaf.cert_pem).expect("write cert");
        std::fs::write(&key_file, &leaf.key_pem).expect("write key");
    };
    write(&first);
    let settings = TlsSettings {
        cert_file: Some(cert_file.clone()),
        key_file: Some(key_file.clone()),
        ..settings()
    };
    let tls = kube_apf_proxy::server::build_server_tls(&settings).expect("TLS");
    let server = kube_apf_proxy::server::SecureServer::bind_loopback(
        tls.config.clone(),
        ConnectionLimits::default(),
    )
    .await
    .expect("bind");
    let addr = server.local_addr();
    let (_trigger, signal) = kube_apf_proxy::server::shutdown_channel();
    tokio::spawn(server.serve(echo_handler(), signal));
    let served = |stream: &tokio_rustls::client::TlsStream<tokio::net::TcpStream>| {
        stream.get_ref().1.peer_certificates().expect("chain")[0].clone()
    };
    let before = connect(addr, &ca.der(), ClientOptions::default())
        .await
        .expect("handshake");
    assert_eq!(served(&before), first.cert);

    write(&second);
    assert!(tls.reload().expect("reload"));
    let after = connect(addr, &ca.der(), ClientOptions::default())
        .await
        .expect("handshake");
    assert_eq!(served(&after), second.cert);

    // A broken file leaves the current certificate in place.
    std::fs::write(&key_file, "garbage").expect("write key");
    assert!(tls.reload().is_err());
    let still = connect(addr, &ca.der(), ClientOptions::default())
        .await
        .expect("handshake");
    assert_eq!(served(&still), second.cert);
}
