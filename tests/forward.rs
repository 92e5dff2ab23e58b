//! Forwarding through `proxy::Forwarder` to the in-process fake apiserver: methods and bodies,
//! watches, upgrades, identity modes, header hygiene, and upstream failures.

mod support;

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, Version};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use support::fake_apiserver::FakeApiserver;
use support::{
    alice, body, get, h2c_client, http1_client, plain_forwarder, read_body, read_json, TestProxy,
    REQUEST_TIMEOUT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn plain_setup() -> (FakeApiserver, TestProxy) {
    let fake = FakeApiserver::start_plain().await;
    let proxy = TestProxy::start(plain_forwarder(&fake.url, REQUEST_TIMEOUT), alice()).await;
    (fake, proxy)
}

// === plain forwarding ===

#[tokio::test]
async fn get_and_list_reach_the_upstream() {
    let (fake, proxy) = plain_setup().await;
    let client = http1_client();

    let response = client
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods/web")))
        .await
        .expect("get");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(read_json(response).await["metadata"]["name"], "web");

    let response = client
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods?limit=5")))
        .await
        .expect("list");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        read_json(response).await["items"].as_array().map(Vec::len),
        Some(2)
    );

    let seen = fake.last_request();
    assert_eq!(seen.path, "/api/v1/namespaces/ns/pods?limit=5");
    assert_eq!(seen.header_values("authorization"), ["Bearer caller-token"]);
    assert_eq!(seen.header_values("x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(seen.header_values("host"), [fake.addr.to_string()]);
}

#[tokio::test]
async fn create_streams_the_request_body_to_the_upstream() {
    let (fake, proxy) = plain_setup().await;
    let pod = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"new"}}"#;
    let request = Request::post(proxy.url("/api/v1/namespaces/ns/pods"))
        .header("content-type", "application/json")
        .body(body(Bytes::from_static(pod)))
        .expect("request");
    let response = http1_client().request(request).await.expect("create");
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(read_body(response).await.expect("body"), &pod[..]);
    assert_eq!(fake.last_request().method, Method::POST);
}

#[tokio::test]
async fn h2_callers_are_forwarded_too() {
    let (fake, proxy) = plain_setup().await;
    let response = h2c_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods/web")))
        .await
        .expect("get");
    assert_eq!(response.version(), Version::HTTP_2);
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(fake.last_request().version, Version::HTTP_11);
}

#[tokio::test]
async fn watch_events_arrive_before_the_stream_ends() {
    let (fake, proxy) = plain_setup().await;
    let url = proxy.url("/api/v1/namespaces/ns/pods?watch=true");
    let response = tokio::spawn(http1_client().request(get(&url)));
    let events = fake.next_watch().await;
    let response = response.await.expect("join").expect("watch");
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = response.into_body();
    for n in 0..3 {
        let event = format!("{{\"type\":\"ADDED\",\"object\":{{\"n\":{n}}}}}\n");
        events.send(Bytes::from(event.clone())).await.expect("send");
        let frame = stream.frame().await.expect("a frame").expect("ok");
        assert_eq!(frame.into_data().expect("data"), event.as_bytes());
    }
    drop(events);
    assert!(
        stream.frame().await.is_none(),
        "the watch ends when the upstream ends it"
    );
}

#[tokio::test]
async fn upgrades_echo_bytes_both_ways() {
    let (fake, proxy) = plain_setup().await;
    for protocol in ["SPDY/3.1", "websocket"] {
        let stream = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(connection.with_upgrades());
        let request = Request::post("/api/v1/namespaces/ns/pods/web/exec?command=sh")
            .header("host", "proxy")
            .header("connection", "Upgrade")
            .header("upgrade", protocol)
            .header("x-stream-protocol-version", "v4.channel.k8s.io")
            .body(body(Bytes::new()))
            .expect("request");
        let response = sender.send_request(request).await.expect("upgrade request");
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(response.headers()["upgrade"], protocol);
        assert_eq!(
            response.headers()["x-stream-protocol-version"],
            "v4.channel.k8s.io"
        );
        let mut io = TokioIo::new(hyper::upgrade::on(response).await.expect("upgraded"));
        for message in [&b"hello"[..], b"exec me"] {
            io.write_all(message).await.expect("write");
            let mut buf = vec![0u8; message.len()];
            io.read_exact(&mut buf).await.expect("read");
            assert_eq!(buf, message);
        }
        io.shutdown().await.expect("shutdown");
        let mut rest = Vec::new();
        io.read_to_end(&mut rest)
            .await
            .expect("the upstream closes too");
        assert!(rest.is_empty());
        let seen = fake.last_request();
        assert_eq!(seen.header_values("upgrade"), [protocol]);
        assert_eq!(seen.header_values("connection"), ["Upgrade"]);
        assert_eq!(seen.version, Version::HTTP_11);
    }
}

#[tokio::test]
async fn forged_identity_headers_are_stripped() {
    let (fake, proxy) = plain_setup().await;
    let request = Request::get(proxy.url("/api/v1/namespaces/ns/pods"))
        .header("authorization", "Bearer caller-token")
        .header("x-remote-user", "root")
        .header("x-remote-group", "system:masters")
        .header("x-remote-extra-scopes", "all")
        .header("x-forwarded-user", "root")
        .header("connection", "x-hop")
        .header("x-hop", "1")
        .header("proxy-authorization", "Basic cm9vdA==")
        .body(body(Bytes::new()))
        .expect("request");
    let response = http1_client().request(request).await.expect("list");
    assert_eq!(response.status(), StatusCode::OK);
    let seen = fake.last_request();
    for gone in [
        "x-remote-user",
        "x-remote-group",
        "x-remote-extra-scopes",
        "x-forwarded-user",
        "x-hop",
        "proxy-authorization",
    ] {
        assert!(
            seen.header_values(gone).is_empty(),
            "{gone} reached the upstream"
        );
    }
    assert_eq!(seen.header_values("authorization"), ["Bearer caller-token"]);
}

// === upstream failures ===

#[tokio::test]
async fn unreachable_upstream_is_a_503_status() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let proxy = TestProxy::start(
        plain_forwarder(&format!("http://{addr}"), REQUEST_TIMEOUT),
        alice(),
    )
    .await;
    let response = http1_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods")))
        .await
        .expect("response");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["content-type"], "application/json");
    let status = read_json(response).await;
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert_eq!(status["code"], 503);
}

#[tokio::test(start_paused = true)]
async fn slow_upstream_times_out_with_a_504_status() {
    let fake = FakeApiserver::start_plain().await;
    let proxy = TestProxy::start(plain_forwarder(&fake.url, Duration::from_secs(1)), alice()).await;
    let started = tokio::time::Instant::now();
    let response = http1_client()
        .request(get(&proxy.url("/hang")))
        .await
        .expect("response");
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    let status = read_json(response).await;
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(status["code"], 504);
    fake.release_hanging();
}

#[tokio::test(start_paused = true)]
async fn a_shorter_query_timeout_wins_and_a_fast_answer_is_not_cut() {
    let fake = FakeApiserver::start_plain().await;
    let proxy = TestProxy::start(plain_forwarder(&fake.url, REQUEST_TIMEOUT), alice()).await;
    let client = http1_client();

    let started = tokio::time::Instant::now();
    let response = client
        .request(get(&proxy.url("/slow?sleep=5000&timeout=2s")))
        .await
        .expect("response");
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(started.elapsed(), Duration::from_secs(2));

    let response = client
        .request(get(&proxy.url("/slow?sleep=500&timeout=2s")))
        .await
        .expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(read_body(response).await.expect("body"), "slept");
}

#[tokio::test]
async fn an_invalid_query_timeout_is_a_400_status() {
    let (fake, proxy) = plain_setup().await;
    let response = http1_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods?timeout=soon")))
        .await
        .expect("response");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(read_json(response).await["reason"], "BadRequest");
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn an_upstream_reset_mid_stream_aborts_the_callers_body() {
    let (fake, proxy) = plain_setup().await;
    let response = http1_client()
        .request(get(&proxy.url("/reset")))
        .await
        .expect("response head");
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = response.into_body();
    let first = stream.frame().await.expect("a frame").expect("ok");
    assert_eq!(first.into_data().expect("data"), "{\"partial\":");
    fake.break_stream();
    let rest = stream.collect().await;
    assert!(rest.is_err(), "the caller must see the stream abort");
}

#[tokio::test(start_paused = true)]
async fn a_body_still_streaming_at_the_deadline_is_cut() {
    let fake = FakeApiserver::start_plain().await;
    let proxy = TestProxy::start(plain_forwarder(&fake.url, Duration::from_secs(1)), alice()).await;
    let started = tokio::time::Instant::now();
    let response = tokio::spawn(http1_client().request(get(&proxy.url("/stream"))));
    let events = fake.next_watch().await;
    let response = response.await.expect("join").expect("head");
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = response.into_body();
    events
        .send(Bytes::from_static(b"early"))
        .await
        .expect("send");
    let frame = stream.frame().await.expect("a frame").expect("ok");
    assert_eq!(frame.into_data().expect("data"), "early");
    assert!(
        stream.collect().await.is_err(),
        "the body is cut at the deadline"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_watch_has_no_deadline() {
    let fake = FakeApiserver::start_plain().await;
    let proxy = TestProxy::start(plain_forwarder(&fake.url, Duration::from_secs(1)), alice()).await;
    let url = proxy.url("/api/v1/namespaces/ns/pods?watch=true");
    let response = tokio::spawn(http1_client().request(get(&url)));
    let events = fake.next_watch().await;
    let mut stream = response.await.expect("join").expect("head").into_body();
    let idle = tokio::time::timeout(Duration::from_secs(120), stream.frame()).await;
    assert!(
        idle.is_err(),
        "the watch is still open after two idle minutes"
    );
    events
        .send(Bytes::from_static(b"late"))
        .await
        .expect("send");
    let frame = stream.frame().await.expect("a frame").expect("ok");
    assert_eq!(frame.into_data().expect("data"), "late");
}
