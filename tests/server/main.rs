//! The secure listener end to end over loopback: TLS, ALPN, client certificates, limits,
//! shutdown; and the admin listener.

mod support;

use std::sync::Arc;
use std::time::Duration;

use http::{Request, StatusCode, Version};
use hyper::body::Incoming;
use kube_apf_proxy::server::tls::{TlsCipherSuite, TlsMinVersion};
use kube_apf_proxy::server::{ConnectionInfo, ConnectionLimits, TlsSettings};
use support::{connect, echo_handler, get, settings, start, Ca, ClientOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

static TLS12_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];

/// Upper bound for anything that should happen promptly; never reached when the code is right.
const PROMPTLY: Duration = Duration::from_secs(10);

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

/// Sends raw HTTP/1.1 bytes over TLS and returns everything the server writes until it closes.
async fn raw_http1(server: &support::TestServer, request: &[u8]) -> String {
    let options = ClientOptions {
        alpn: vec![b"http/1.1"],
        ..Default::default()
    };
    let mut stream = connect(server.addr, &server.trust, options)
        .await
        .expect("handshake");
    // The server may answer and close before reading everything; a failed write is fine.
    let _ = stream.write_all(request).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(PROMPTLY * 10, stream.read_to_end(&mut out))
        .await
        .expect("the server closes the connection");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn oversized_or_too_many_headers_get_431() {
    let limits = ConnectionLimits {
        max_header_bytes: 16 * 1024,
        max_headers: 20,
        ..ConnectionLimits::default()
    };
    let server = start(settings(), limits, echo_handler(), None).await;
    let big = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
        "a".repeat(32 * 1024)
    );
    let many = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\n{}\r\n",
        (0..30)
            .map(|i| format!("X-H{i}: v\r\n"))
            .collect::<String>()
    );
    for request in [big, many] {
        let answer = raw_http1(&server, request.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large"),
            "{answer}"
        );
    }
    let fine = raw_http1(
        &server,
        b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(fine.starts_with("HTTP/1.1 200 OK"), "{fine}");
}

// Paused time works with loopback sockets: tokio polls for I/O before it advances the clock, and
// loopback data is in the peer's buffer as soon as the write returns.
#[tokio::test(start_paused = true)]
async fn slow_header_senders_are_disconnected_after_32s() {
    let server = start(
        settings(),
        ConnectionLimits::default(),
        echo_handler(),
        None,
    )
    .await;
    let started = tokio::time::Instant::now();
    let answer = raw_http1(&server, b"GET / HTTP/1.1\r\nHost: localhost\r\n").await;
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(started.elapsed().as_secs(), 32);
}

#[tokio::test]
async fn http2_stream_limit_is_advertised() {
    let limits = ConnectionLimits {
        http2_max_concurrent_streams: 7,
        ..ConnectionLimits::default()
    };
    let server = start(settings(), limits, echo_handler(), None).await;
    let options = ClientOptions {
        alpn: vec![b"h2"],
        ..Default::default()
    };
    let stream = connect(server.addr, &server.trust, options)
        .await
        .expect("handshake");
    let (client, connection) = h2::client::handshake(stream).await.expect("h2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let request = Request::get("https://localhost/")
        .body(())
        .expect("request");
    let (response, _) = client.send_request(request, true).expect("send");
    // Once a response arrived, the server's SETTINGS have been applied.
    assert_eq!(response.await.expect("response").status(), StatusCode::OK);
    assert_eq!(client.current_max_send_streams(), 7);
}

#[tokio::test(start_paused = true)]
async fn idle_connections_are_closed_after_90s() {
    let server = start(
        settings(),
        ConnectionLimits::default(),
        echo_handler(),
        None,
    )
    .await;
    let options = ClientOptions {
        alpn: vec![b"h2"],
        ..Default::default()
    };
    let stream = connect(server.addr, &server.trust, options)
        .await
        .expect("handshake");
    let (client, connection) = h2::client::handshake(stream).await.expect("h2 handshake");
    let connection = tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let (response, _) = client
        .send_request(
            Request::get("https://localhost/")
                .body(())
                .expect("request"),
            true,
        )
        .expect("send");
    assert_eq!(response.await.expect("response").status(), StatusCode::OK);
    let idle_since = tokio::time::Instant::now();
    tokio::time::timeout(PROMPTLY * 10, connection)
        .await
        .expect("the idle connection is closed")
        .expect("connection task")
        .expect("closed with GOAWAY, not an error");
    assert_eq!(idle_since.elapsed().as_secs(), 90);
}

/// A handler that signals when a request arrives and answers when released.
fn gated_handler() -> (
    Arc<dyn kube_apf_proxy::server::Handler>,
    Arc<tokio::sync::Notify>,
    Arc<tokio::sync::Notify>,
) {
    let arrived = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let (a, r) = (arrived.clone(), release.clone());
    let handler = Arc::new(move |_request: Request<Incoming>| {
        let (a, r) = (a.clone(), r.clone());
        async move {
            a.notify_one();
            r.notified().await;
            support::text("finished")
        }
    });
    (handler, arrived, release)
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_requests_and_stops_accepting() {
    for alpn in [&b"h2"[..], b"http/1.1"] {
        let (handler, arrived, release) = gated_handler();
        let server = start(settings(), ConnectionLimits::default(), handler, None).await;
        let options = ClientOptions {
            alpn: vec![alpn],
            ..Default::default()
        };
        let stream = connect(server.addr, &server.trust, options)
            .await
            .expect("handshake");
        let request = tokio::spawn(get(stream, "/slow"));
        arrived.notified().await;

        server.trigger.trigger();
        // The listener closes while the request is still running.
        tokio::time::timeout(PROMPTLY, async {
            while tokio::net::TcpStream::connect(server.addr).await.is_ok() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the listener closes");
        assert!(
            !server.task.is_finished(),
            "the in-flight request keeps the server draining"
        );

        release.notify_one();
        let (_, status, body) = request.await.expect("client task").expect("response");
        assert_eq!((status, body.as_str()), (StatusCode::OK, "finished"));
        tokio::time::timeout(PROMPTLY, server.task)
            .await
            .expect("serve returns once drained")
            .expect("serve task");
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_grace_period_bounds_the_drain() {
    let (handler, arrived, _release) = gated_handler();
    let server = start(settings(), ConnectionLimits::default(), handler, None).await;
    let stream = connect(server.addr, &server.trust, ClientOptions::default())
        .await
        .expect("handshake");
    let request = tokio::spawn(get(stream, "/forever"));
    arrived.notified().await;
    server.trigger.trigger();
    let triggered = tokio::time::Instant::now();
    tokio::time::timeout(PROMPTLY * 10, server.task)
        .await
        .expect("serve returns after the grace period")
        .expect("serve task");
    assert_eq!(triggered.elapsed().as_secs(), 60);
    let outcome = tokio::time::timeout(PROMPTLY, request)
        .await
        .expect("client ends");
    assert!(
        outcome.expect("client task").is_err(),
        "the unfinished request is cut off"
    );
    assert_eq!(server.stats.active(), 0);
}

mod admin {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use bytes::Bytes;
    use http::{Request, StatusCode};
    use http_body_util::Empty;
    use hyper::body::Incoming;
    use hyper_util::rt::TokioIo;
    use kube_apf_proxy::server::{
        full_body, shutdown_channel, AdminRoutes, AdminServer, ReadyFlag,
    };

    async fn get(addr: SocketAddr, path: &str) -> (StatusCode, String, String) {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        let request = Request::get(path)
            .header("host", "localhost")
            .body(Empty::<Bytes>::new())
            .expect("request");
        let response = sender.send_request(request).await.expect("response");
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (_, status, body) = super::support::read(response).await.expect("body");
        (status, content_type, body)
    }

    #[tokio::test]
    async fn health_endpoints_answer_as_the_apiserver() {
        let ready = ReadyFlag::new(true);
        let admin = AdminServer::bind(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            AdminRoutes::new(ready.clone()),
        )
        .await
        .expect("bind");
        let addr = admin.local_addr();
        let (trigger, signal) = shutdown_channel();
        let task = tokio::spawn(admin.serve(signal));

        for path in ["/healthz", "/livez", "/readyz"] {
            let (status, content_type, body) = get(addr, path).await;
            assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"), "{path}");
            assert_eq!(content_type, "text/plain; charset=utf-8");
        }
        let (status, _, body) = get(addr, "/readyz?verbose").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "[+]ping ok\n[+]shutdown ok\nreadyz check passed\n");

        ready.set(false);
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            "[-]shutdown failed: reason withheld\nreadyz check failed\n"
        );
        let (status, _, _) = get(addr, "/livez").await;
        assert_eq!(status, StatusCode::OK, "liveness does not follow readiness");

        let (status, content_type, body) = get(addr, "/metrics").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(content_type, "application/json");
        let status_json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(status_json["kind"], "Status");
        assert_eq!(status_json["reason"], "NotFound");
        assert_eq!(status_json["code"], 404);

        trigger.trigger();
        task.await.expect("admin task");
    }

    #[tokio::test]
    async fn other_admin_paths_go_to_the_given_routes() {
        let routes = AdminRoutes {
            ready: ReadyFlag::new(true),
            other: Some(Arc::new(|request: Request<Incoming>| async move {
                http::Response::new(full_body(format!("metrics for {}", request.uri().path())))
            })),
        };
        let admin = AdminServer::bind(SocketAddr::from(([127, 0, 0, 1], 0)), routes)
            .await
            .expect("bind");
        let addr = admin.local_addr();
        let (_trigger, signal) = shutdown_channel();
        tokio::spawn(admin.serve(signal));
        assert_eq!(get(addr, "/metrics").await.2, "metrics for /metrics");
        assert_eq!(get(addr, "/healthz").await.2, "ok");
    }
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

#[tokio::test(start_paused = true)]
async fn connections_beyond_the_limit_wait_for_a_slot() {
    let limits = ConnectionLimits {
        max_connections: 1,
        ..ConnectionLimits::default()
    };
    let server = start(settings(), limits, echo_handler(), None).await;
    let first = connect(server.addr, &server.trust, ClientOptions::default())
        .await
        .expect("first handshake");
    let (addr, trust) = (server.addr, server.trust.clone());
    let second = tokio::spawn(async move { connect(addr, &trust, ClientOptions::default()).await });
    // Paused time: a minute passes (less than the idle timeout that would close the first) and
    // the second client is still not served.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!second.is_finished(), "the second connection must wait");
    assert_eq!(server.stats.accepted(), 1);
    drop(first);
    let second = tokio::time::timeout(PROMPTLY, second)
        .await
        .expect("the second connection gets the freed slot")
        .expect("client task")
        .expect("second handshake");
    assert_eq!(get(second, "/").await.expect("response").1, StatusCode::OK);
}

#[tokio::test]
async fn http1_upgrades_reach_the_handler() {
    let handler = Arc::new(|mut request: Request<Incoming>| async move {
        let upgrade = hyper::upgrade::on(&mut request);
        tokio::spawn(async move {
            let Ok(upgraded) = upgrade.await else { return };
            let mut io = hyper_util::rt::TokioIo::new(upgraded);
            let mut buf = [0u8; 5];
            if io.read_exact(&mut buf).await.is_ok() {
                let _ = io.write_all(&buf).await;
            }
        });
        http::Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header("connection", "upgrade")
            .header("upgrade", "echo")
            .body(kube_apf_proxy::server::full_body(""))
            .expect("response")
    });
    let server = start(settings(), ConnectionLimits::default(), handler, None).await;
    let options = ClientOptions {
        alpn: vec![b"http/1.1"],
        ..Default::default()
    };
    let mut stream = connect(server.addr, &server.trust, options)
        .await
        .expect("handshake");
    stream
        .write_all(b"GET /exec HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
        .await
        .expect("write");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.expect("read head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols"),
        "{head}"
    );
    stream.write_all(b"hello").await.expect("write");
    let mut echoed = [0u8; 5];
    tokio::time::timeout(PROMPTLY, stream.read_exact(&mut echoed))
        .await
        .expect("echo arrives")
        .expect("read");
    assert_eq!(&echoed, b"hello");
}

/// Opens `resets` streams and cancels each at once, in one burst (the CVE-2023-44487 pattern),
/// then sends one ordinary request. `Ok` with that request's outcome while the connection
/// survives; `Err` with the connection's error when the server ended it.
async fn after_reset_burst(
    limits: ConnectionLimits,
    resets: usize,
) -> Result<Result<StatusCode, String>, String> {
    let server = start(settings(), limits, echo_handler(), None).await;
    let options = ClientOptions {
        alpn: vec![b"h2"],
        ..Default::default()
    };
    let stream = connect(server.addr, &server.trust, options)
        .await
        .expect("handshake");
    let (client, connection) = h2::client::handshake(stream).await.expect("h2 handshake");
    let connection = tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    for _ in 0..resets {
        let request = Request::get("https://localhost/")
            .body(())
            .expect("request");
        if let Ok((_, mut body)) = client.send_request(request, false) {
            body.send_reset(h2::Reason::CANCEL);
        }
    }
    let answer = async {
        let mut client = client.ready().await.map_err(|e| e.to_string())?;
        let request = Request::get("https://localhost/")
            .body(())
            .expect("request");
        let (response, _) = client
            .send_request(request, true)
            .map_err(|e| e.to_string())?;
        response
            .await
            .map(|r| r.status())
            .map_err(|e| e.to_string())
    };
    let answer = tokio::time::timeout(PROMPTLY, answer)
        .await
        .expect("prompt answer");
    let ended = tokio::time::timeout(PROMPTLY, connection)
        .await
        .expect("connection ends");
    match ended.expect("connection task") {
        Ok(()) => Ok(answer),
        Err(err) => Err(err.to_string()),
    }
}

#[tokio::test]
async fn http2_rapid_reset_floods_close_the_connection() {
    let defaults = ConnectionLimits::default;
    // Below the limit of 20 pending-accept resets, the connection lives on.
    assert_eq!(
        after_reset_burst(defaults(), 10).await,
        Ok(Ok(StatusCode::OK))
    );
    let flood = after_reset_burst(defaults(), 60).await;
    assert!(
        flood.is_err(),
        "a reset flood must end the connection: {flood:?}"
    );
    // The limit is what ends it.
    let tolerant = ConnectionLimits {
        http2_max_pending_accept_reset_streams: 10_000,
        ..defaults()
    };
    let tolerated = after_reset_burst(tolerant, 60).await;
    assert!(tolerated.is_ok(), "{tolerated:?}");
}
