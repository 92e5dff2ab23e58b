//! Forwarding through `proxy::Forwarder` to the in-process fake apiserver: methods and bodies,
//! watches, upgrades, identity modes, header hygiene, and upstream failures.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, Version};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use kube_apf_proxy::auth::Identity;
use kube_apf_proxy::proxy::{
    ForgeableHeaders, Forwarder, ForwarderConfig, ForwarderConfigError, IdentityForwarding,
    TokenReviewTransport, UpstreamClient, UpstreamConfig,
};
use support::fake_apiserver::{FakeApiserver, FakeOptions, FakeTls, ReviewedUser};
use support::pki::TestCa;
use support::{body, h2c_client, http1_client, read_body, read_json, TestProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

fn alice() -> Identity {
    let mut identity = Identity::authenticated("alice", "alice-uid", vec!["dev".into()]);
    identity.extra = BTreeMap::from([("example.org/team".into(), vec!["blue".into()])]);
    identity
}

fn forwarder_config(mode: IdentityForwarding, request_timeout: Duration) -> ForwarderConfig {
    ForwarderConfig {
        mode,
        request_timeout,
        forgeable: ForgeableHeaders::new(&["X-Forwarded-User".into()], &[]),
    }
}

fn plain_forwarder(url: &str, request_timeout: Duration) -> Forwarder {
    let upstream = UpstreamConfig {
        upstream: Some(url.to_string()),
        ..UpstreamConfig::default()
    };
    let client = UpstreamClient::new(upstream.resolve().expect("resolve")).expect("client");
    Forwarder::new(
        client,
        forwarder_config(IdentityForwarding::Passthrough, request_timeout),
    )
    .expect("forwarder")
}

async fn plain_setup() -> (FakeApiserver, TestProxy) {
    let fake = FakeApiserver::start_plain().await;
    let proxy = TestProxy::start(plain_forwarder(&fake.url, REQUEST_TIMEOUT), alice()).await;
    (fake, proxy)
}

fn get(url: &str) -> Request<support::TestBody> {
    Request::get(url)
        .header("authorization", "Bearer caller-token")
        .body(body(Bytes::new()))
        .expect("request")
}

/// A TLS fake apiserver that verifies client certificates, and the files a proxy needs for it.
struct TlsWorld {
    fake: FakeApiserver,
    dir: tempfile::TempDir,
    config: UpstreamConfig,
}

impl TlsWorld {
    async fn start(h2: bool) -> Self {
        let ca = TestCa::new("upstream-ca");
        let client_ca = TestCa::new("client-ca");
        let dir = tempfile::tempdir().expect("tempdir");
        let proxy_cert = client_ca.client_cert("front-proxy", Some("proxies"));
        let (cert_file, key_file) = proxy_cert.write(dir.path(), "proxy");
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "proxy-token\n").expect("write token");
        let config = UpstreamConfig {
            upstream: None,
            ca_file: Some(ca.write(dir.path(), "ca.crt")),
            client_cert_file: Some(cert_file),
            client_key_file: Some(key_file),
            token_file: Some(token_file),
            kubeconfig: None,
        };
        let tokens = HashMap::from([(
            "good".to_string(),
            ReviewedUser {
                username: "bob".into(),
                uid: "bob-uid".into(),
                groups: vec!["team".into()],
            },
        )]);
        let fake = FakeApiserver::start(FakeOptions {
            tls: Some(FakeTls {
                serving: ca.server_cert(),
                client_ca: Some(client_ca),
                h2,
            }),
            tokens,
        })
        .await;
        let config = UpstreamConfig {
            upstream: Some(fake.url.clone()),
            ..config
        };
        TlsWorld { fake, dir, config }
    }

    fn client(&self) -> UpstreamClient {
        UpstreamClient::new(self.config.resolve().expect("resolve")).expect("client")
    }

    async fn proxy(&self, mode: IdentityForwarding) -> TestProxy {
        let forwarder = Forwarder::new(self.client(), forwarder_config(mode, REQUEST_TIMEOUT))
            .expect("forwarder");
        TestProxy::start(forwarder, alice()).await
    }
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

// === identity modes over TLS ===

#[tokio::test]
async fn passthrough_sends_the_callers_token_and_no_proxy_certificate() {
    let world = TlsWorld::start(false).await;
    let proxy = world.proxy(IdentityForwarding::Passthrough).await;
    let response = http1_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods")))
        .await
        .expect("list");
    assert_eq!(response.status(), StatusCode::OK);
    let seen = world.fake.last_request();
    assert_eq!(seen.header_values("authorization"), ["Bearer caller-token"]);
    assert!(
        seen.peer_certificates.is_none(),
        "passthrough must not present the proxy's cert"
    );
    assert!(seen.header_values("impersonate-user").is_empty());
}

#[tokio::test]
async fn impersonate_mode_sends_impersonation_headers_with_proxy_credentials() {
    let world = TlsWorld::start(false).await;
    let proxy = world.proxy(IdentityForwarding::Impersonate).await;
    let response = http1_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods")))
        .await
        .expect("list");
    assert_eq!(response.status(), StatusCode::OK);
    let seen = world.fake.last_request();
    assert_eq!(seen.header_values("authorization"), ["Bearer proxy-token"]);
    assert!(seen.peer_certificates.is_some());
    assert_eq!(seen.header_values("impersonate-user"), ["alice"]);
    assert_eq!(seen.header_values("impersonate-uid"), ["alice-uid"]);
    assert_eq!(seen.header_values("impersonate-group"), ["dev"]);
    assert_eq!(
        seen.header_values("impersonate-extra-example.org%2fteam"),
        ["blue"]
    );
}

#[tokio::test]
async fn impersonate_mode_refuses_a_callers_own_impersonation() {
    let world = TlsWorld::start(false).await;
    let proxy = world.proxy(IdentityForwarding::Impersonate).await;
    let request = Request::get(proxy.url("/api/v1/namespaces/ns/pods"))
        .header("impersonate-user", "system:admin")
        .body(body(Bytes::new()))
        .expect("request");
    let response = http1_client().request(request).await.expect("list");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let status = read_json(response).await;
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Forbidden");
    assert!(
        world.fake.requests().is_empty(),
        "nothing reaches the upstream"
    );
}

#[tokio::test]
async fn requestheader_mode_sends_x_remote_headers_with_the_front_proxy_certificate() {
    let world = TlsWorld::start(false).await;
    let proxy = world.proxy(IdentityForwarding::Requestheader).await;
    let response = http1_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods")))
        .await
        .expect("list");
    assert_eq!(response.status(), StatusCode::OK);
    let seen = world.fake.last_request();
    assert!(seen.header_values("authorization").is_empty());
    assert_eq!(seen.peer_certificates.as_ref().map(Vec::len), Some(1));
    assert_eq!(seen.header_values("x-remote-user"), ["alice"]);
    assert_eq!(seen.header_values("x-remote-uid"), ["alice-uid"]);
    assert_eq!(seen.header_values("x-remote-group"), ["dev"]);
    assert_eq!(
        seen.header_values("x-remote-extra-example.org%2fteam"),
        ["blue"]
    );
}

#[tokio::test]
async fn modes_refuse_to_start_without_the_credentials_they_need() {
    let fake = FakeApiserver::start_plain().await;
    let client = UpstreamClient::new(
        UpstreamConfig {
            upstream: Some(fake.url.clone()),
            ..UpstreamConfig::default()
        }
        .resolve()
        .expect("resolve"),
    )
    .expect("client");
    let cases = [
        (
            IdentityForwarding::Impersonate,
            ForwarderConfigError::ImpersonateNeedsCredentials,
        ),
        (
            IdentityForwarding::Requestheader,
            ForwarderConfigError::RequestheaderNeedsClientCertificate,
        ),
    ];
    for (mode, want) in cases {
        let got = Forwarder::new(client.clone(), forwarder_config(mode, REQUEST_TIMEOUT));
        assert_eq!(got.err(), Some(want));
    }
}

#[tokio::test]
async fn http2_is_used_when_the_upstream_offers_it() {
    let world = TlsWorld::start(true).await;
    let proxy = world.proxy(IdentityForwarding::Passthrough).await;
    for _ in 0..2 {
        let response = http1_client()
            .request(get(&proxy.url("/api/v1/namespaces/ns/pods/web")))
            .await
            .expect("get");
        assert_eq!(response.status(), StatusCode::OK);
    }
    let seen = world.fake.requests();
    assert!(
        seen.iter().all(|r| r.version == Version::HTTP_2),
        "{seen:?}"
    );
}

#[tokio::test]
async fn token_review_goes_upstream_with_the_proxys_credentials() {
    let world = TlsWorld::start(true).await;
    let review = br#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"good"}}"#;
    let (status, answer) = world
        .client()
        .review(Bytes::from_static(review))
        .await
        .expect("review");
    assert_eq!(status, StatusCode::CREATED);
    let answer: serde_json::Value = serde_json::from_slice(&answer).expect("json");
    assert_eq!(answer["status"]["user"]["username"], "bob");
    let seen = world.fake.last_request();
    assert_eq!(seen.path, "/apis/authentication.k8s.io/v1/tokenreviews");
    assert_eq!(seen.header_values("authorization"), ["Bearer proxy-token"]);
    assert!(seen.peer_certificates.is_some());
    let _ = &world.dir;
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
