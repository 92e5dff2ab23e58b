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
async fn verified_client_certificate_is_in_connection_info() {
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

#[tokio::test]
async fn untrusted_client_certificate_is_rejected_at_the_handshake() {
    let trusted = Ca::new("client-ca");
    let rogue = Ca::new("rogue-ca").client_cert("mallory");
    let tls = TlsSettings {
        client_ca_roots: vec![trusted.der()],
        ..settings()
    };
    let server = start(tls, ConnectionLimits::default(), echo_handler(), None).await;
    let options = ClientOptions {
        alpn: vec![b"http/1.1"],
        client_cert: Some((rogue.cert.clone(), rogue.key())),
        ..Default::default()
    };
    // With TLS 1.3 the client learns of the rejection on its first read.
    let outcome = match connect(server.addr, &server.trust, options).await {
        Ok(stream) => get(stream, "/")
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(err) => Err(err.to_string()),
    };
    assert!(
        outcome.is_err(),
        "an untrusted certificate must not be served"
    );
    tokio::time::timeout(PROMPTLY, async {
        while server.stats.tls_handshake_errors() == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the failed handshake is counted");
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
