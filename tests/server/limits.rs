//! Connection limits: header size and count, header read timeout, HTTP/2 streams and resets,
//! idle timeout, connection count; and upgrades.

use super::*;

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

/// Go's HTTP/2 server closes an idle connection 1 s after its GOAWAY (`goAwayTimeout`), so
/// kube-apiserver holds one about 91 s. A client that never answers (neither the GOAWAY nor the
/// PING sent with it) used to keep it until the keep-alive PING timed out: 200 s.
#[tokio::test(start_paused = true)]
async fn an_idle_http2_client_that_never_answers_is_closed_at_91s() {
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
    let mut stream = connect(server.addr, &server.trust, options)
        .await
        .expect("handshake");
    let connected = tokio::time::Instant::now();
    // The preface and an empty SETTINGS frame; then nothing, not even the SETTINGS or PING acks.
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
    stream.write_all(&hello).await.expect("preface");
    let mut frames = Vec::new();
    // Closed without TLS close_notify: the read ends in an error, after what was sent.
    let _ = tokio::time::timeout(Duration::from_secs(600), stream.read_to_end(&mut frames))
        .await
        .expect("the idle connection is closed");
    assert_eq!(connected.elapsed().as_secs(), 91);
    // A GOAWAY (type 0x7) was sent before the close.
    assert!(
        frames
            .windows(4)
            .any(|w| w[0] == 0x7 && w[1] == 0 && w[2..] == [0, 0]),
        "no GOAWAY in {frames:?}"
    );
}

/// Go's server counts only header bytes (1 MiB); kube-apiserver accepts a request with hundreds
/// of headers (kubectl `exec` with many `--as-group`, SPDY, always HTTP/1.1). hyper used to
/// answer 431 past 100.
#[tokio::test]
async fn a_request_with_150_headers_is_served_over_http1_and_http2() {
    let server = start(
        settings(),
        ConnectionLimits::default(),
        echo_handler(),
        None,
    )
    .await;
    let groups: String = (0..150)
        .map(|i| format!("Impersonate-Group: team-{i}\r\n"))
        .collect();
    let request = format!("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{groups}\r\n");
    let answer = raw_http1(&server, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");

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
    let mut request = Request::get("https://localhost/");
    for i in 0..150 {
        request = request.header("impersonate-group", format!("team-{i}"));
    }
    let (response, _) = client
        .send_request(request.body(()).expect("request"), true)
        .expect("send");
    let response = tokio::time::timeout(PROMPTLY, response)
        .await
        .expect("answered")
        .expect("response");
    assert_eq!(response.status(), StatusCode::OK);
}

/// Past the byte limit both protocols answer 431 (HTTP/2: `SETTINGS_MAX_HEADER_LIST_SIZE`).
#[tokio::test]
async fn more_than_a_mebibyte_of_headers_gets_431_over_http1_and_http2() {
    let server = start(
        settings(),
        ConnectionLimits::default(),
        echo_handler(),
        None,
    )
    .await;
    let value = "a".repeat(64 * 1024);
    let headers: String = (0..17).map(|i| format!("X-Big-{i}: {value}\r\n")).collect();
    let request = format!("GET / HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n");
    let answer = raw_http1(&server, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large"),
        "{}",
        &answer[..answer.len().min(200)]
    );

    let options = ClientOptions {
        alpn: vec![b"h2"],
        ..Default::default()
    };
    let stream = connect(server.addr, &server.trust, options)
        .await
        .expect("handshake");
    let (client, connection) = h2::client::Builder::new()
        .max_header_list_size(4 << 20)
        .handshake::<_, bytes::Bytes>(stream)
        .await
        .expect("h2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    // Once a response arrived, the server's SETTINGS (256 KiB frames) apply: the header block
    // takes 5 frames, within the CONTINUATION flood limit.
    let (small, _) = client
        .send_request(
            Request::get("https://localhost/")
                .body(())
                .expect("request"),
            true,
        )
        .expect("send");
    assert_eq!(small.await.expect("response").status(), StatusCode::OK);
    let mut client = client.ready().await.expect("ready");
    let mut request = Request::get("https://localhost/");
    for i in 0..17 {
        request = request.header(format!("x-big-{i}"), value.as_str());
    }
    let sent = client.send_request(request.body(()).expect("request"), true);
    let status = match sent {
        Ok((response, _)) => tokio::time::timeout(PROMPTLY, response)
            .await
            .expect("answered")
            .map(|r| r.status()),
        Err(error) => Err(error),
    };
    assert_eq!(
        status.expect("an answer, not a reset"),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
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
    // A client that speaks (HTTP/2 preface and SETTINGS), so only the idle timeout applies.
    let (first_client, first_connection) = h2::client::handshake(first)
        .await
        .expect("first h2 handshake");
    let first_connection = tokio::spawn(first_connection);
    let (addr, trust) = (server.addr, server.trust.clone());
    let second = tokio::spawn(async move { connect(addr, &trust, ClientOptions::default()).await });
    // Paused time: a minute passes (less than the idle timeout that would close the first) and
    // the second client is still not served.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!second.is_finished(), "the second connection must wait");
    assert_eq!(server.stats.accepted(), 1);
    drop(first_client);
    first_connection.abort();
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

#[tokio::test(start_paused = true)]
async fn silent_clients_are_dropped_after_the_handshake_timeout() {
    let server = start(
        settings(),
        ConnectionLimits::default(),
        echo_handler(),
        None,
    )
    .await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let started = tokio::time::Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(PROMPTLY * 10, tcp.read_to_end(&mut buf))
        .await
        .expect("the server closes the connection");
    assert!(buf.is_empty(), "{read:?}");
    assert_eq!(started.elapsed().as_secs(), 32);
    assert_eq!(server.stats.tls_handshake_errors(), 1);
}

/// After a TLS handshake, how long the server holds a client that sends `bytes` and then
/// nothing, in whole seconds of paused time (the server's close is the end of the stream).
async fn held_for(alpn: &'static [u8], bytes: &[u8]) -> u64 {
    let server = start(
        settings(),
        ConnectionLimits::default(),
        echo_handler(),
        None,
    )
    .await;
    let options = ClientOptions {
        alpn: vec![alpn],
        ..Default::default()
    };
    let mut stream = connect(server.addr, &server.trust, options)
        .await
        .expect("handshake");
    stream.write_all(bytes).await.expect("write");
    let started = tokio::time::Instant::now();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(PROMPTLY * 10, stream.read_to_end(&mut out))
        .await
        .expect("the server closes the connection");
    started.elapsed().as_secs()
}

/// Go's `http.Server` reads the first request's headers with `ReadHeaderTimeout` (32 s, as
/// kube-apiserver sets it) from the end of the handshake; it used to be held for the 90 s idle
/// timeout.
#[tokio::test(start_paused = true)]
async fn a_client_silent_after_the_handshake_is_closed_after_32s() {
    assert_eq!(held_for(b"http/1.1", b"").await, 32);
}

/// Go's `http2.Server`: the client preface within 10 s (`prefaceTimeout`), then the first
/// SETTINGS within 2 s (`firstSettingsTimeout`); a preface without SETTINGS used to be held 50 s
/// or more.
#[tokio::test(start_paused = true)]
async fn an_http2_client_without_preface_or_settings_is_closed_like_go() {
    assert_eq!(held_for(b"h2", b"").await, 10);
    assert_eq!(
        held_for(b"h2", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await,
        2
    );
    // Half a frame header is no SETTINGS frame either.
    assert_eq!(
        held_for(b"h2", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04").await,
        2
    );
}
