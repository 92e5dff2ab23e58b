//! Abuse (RELIABILITY.md): path tricks aimed at a more privileged FlowSchema, forged identity
//! headers aimed at the exempt level, a request body trickled forever, and an HTTP/2
//! CONTINUATION flood. Each gets a bounded cost and the apiserver's answer; nothing leaks.
//! (Header size and count limits, header slowloris, idle and connection limits and rapid reset
//! are pinned at the listener in tests/server/limits.rs.)

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, Version};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use kube_apf_proxy::auth::Identity;
use kube_apf_proxy::classify::classify;
use kube_apf_proxy::request_info;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::app::{metric_sum, request, within, AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;

/// Dispatches per FlowSchema so far.
fn dispatched(app: &TestApp, flow_schema: &str) -> f64 {
    metric_sum(
        &app.app.metrics().encode(),
        &format!("apiserver_flowcontrol_dispatched_requests_total{{flow_schema=\"{flow_schema}\""),
    )
}

fn anonymous() -> Identity {
    Identity {
        user: "system:anonymous".to_string(),
        groups: vec!["system:unauthenticated".to_string()],
        ..Identity::default()
    }
}

/// Paths that try to look like a probe, a lease or another namespace while naming something
/// else. The apiserver classifies the path it serves, as it arrives (its RequestInfo filter does
/// not clean it), and so must the proxy, which forwards it unchanged.
const TRICKS: &[&str] = &[
    "/healthz/../api/v1/namespaces/kube-system/secrets",
    "//healthz",
    "/healthz/",
    "/livez%2F..%2Fapi%2Fv1%2Fsecrets",
    "/api/v1/namespaces/kube-system/%2E%2E/default/pods",
    "/api//v1//namespaces/kube-node-lease/leases",
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/../../../kube-system/leases/x",
    "/api/v1/namespaces/kube-system/pods/a%2Fb",
    "/./api/v1/nodes",
    "/readyz?verbose&exclude=../../api",
];

#[tokio::test]
async fn path_tricks_are_classified_as_the_path_the_upstream_serves() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let config = kube_apf_proxy::config::bootstrap();
    for path in TRICKS {
        let info = request_info::parse("GET", path).expect("the proxy accepts it");
        let want = classify(&config, &anonymous(), &info);
        let fs = want.flow_schema.name.clone();
        let before = dispatched(&app, &fs);
        let _ = app.client().get(path, None).await;
        assert_eq!(dispatched(&app, &fs), before + 1.0, "{path}: lands in {fs}");
        let forwarded = fake.requests().into_iter().rfind(|r| r.path == *path);
        assert!(forwarded.is_some(), "{path}: forwarded byte for byte");
        // The apiserver's own rule (rule.go) matches `/healthz` as a prefix of `/healthz/...`,
        // so `/healthz/../api/...` is a probe there too; what it serves for it is the health
        // handler's sub-path (a 404), never the resource the dots point at. So a privileged
        // FlowSchema is only ever reached by a path the upstream routes to a health handler.
        if fs == "exempt" || fs == "probes" {
            // `info.path` is the decoded path, which the apiserver routes by (Go's URL.Path).
            let health = ["/healthz", "/readyz", "/livez"].iter().any(|p| {
                info.path
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?']))
            });
            assert!(health, "{path}: privileged FlowSchema {fs}");
        }
    }
    app.assert_settled().await;
}

#[tokio::test]
async fn forged_identity_headers_never_reach_the_exempt_level() {
    let fake = FakeApiserver::start_plain().await;
    // (requestheader mode needs an upstream client certificate: authn.rs covers its stripping.)
    for mode in ["passthrough", "impersonate"] {
        let mut builder = AppBuilder::new(&fake.url).flag(format!("--identity-forwarding={mode}"));
        if mode == "impersonate" {
            builder = builder.upstream_token("proxy-token");
        }
        let app = builder.start().await;
        let mut get = request(
            "GET",
            "/api/v1/namespaces/kube-system/secrets",
            None,
            Bytes::new(),
        );
        for (name, value) in [
            ("x-remote-user", "system:admin"),
            ("x-remote-group", "system:masters"),
            ("impersonate-user", "system:admin"),
            ("impersonate-group", "system:masters"),
        ] {
            get.headers_mut()
                .append(name, value.parse().expect("value"));
        }
        let response = app.client().send(get).await;
        assert_ne!(
            response.status(),
            StatusCode::OK,
            "{mode}: not served as an admin"
        );
        assert_eq!(dispatched(&app, "exempt"), 0.0, "{mode}: nothing in exempt");
        let seen = fake.requests();
        assert!(
            seen.iter()
                .all(|r| r.header_values("x-remote-group").is_empty()),
            "{mode}: forged X-Remote-* stripped"
        );
        app.assert_settled().await;
    }
}

#[tokio::test]
async fn a_body_trickled_forever_is_cut_at_the_request_timeout_and_frees_its_seat() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .flag("--request-timeout=500ms")
        .start()
        .await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, crate::support::BoxError>>(1);
    let trickle = tokio::spawn(async move {
        for _ in 0..600 {
            if tx
                .send(Ok(Frame::data(Bytes::from_static(b"x"))))
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let body = StreamBody::new(tokio_stream_from(rx)).boxed_unsync();
    let post = Request::post("/api/v1/namespaces/ns/pods")
        .header("content-type", "application/json")
        .header("content-length", "100000")
        .body(body)
        .expect("request");
    let response = within("the timeout answers", app.client().try_send(post)).await;
    match response {
        Ok(response) => assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT),
        Err(closed) => assert!(!closed.is_empty(), "the connection was closed instead"),
    }
    trickle.abort();
    app.assert_settled().await;
    let (answered, abandoned) = app.accounted();
    assert_eq!(answered + abandoned, 1);
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// An HTTP/2 frame header: length, type, flags, stream.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK literal header field without indexing, new name (lengths < 127).
fn literal(name: &str, value: &str) -> Vec<u8> {
    let mut out = vec![0x00, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
    out
}

#[tokio::test]
async fn an_http2_continuation_flood_is_cut_off_after_a_bounded_amount() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let mut tls = within(
        "h2 connection",
        app.client_with(None, Version::HTTP_2).tls_stream(),
    )
    .await;
    let mut start = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    start.extend(frame(0x4, 0, 0, &[])); // SETTINGS
                                         // :method GET, :scheme https, :path /, then one literal; no END_HEADERS.
    let mut block = vec![0x82, 0x87, 0x84];
    block.extend(literal("x-first", "1"));
    start.extend(frame(0x1, 0x1, 1, &block)); // HEADERS, END_STREAM
    tls.write_all(&start).await.expect("preface");
    let (mut reader, mut writer) = tokio::io::split(tls);
    let value = "v".repeat(120);
    let continuation = frame(0x9, 0, 1, &literal("x-flood", &value).repeat(100));
    let mut sent = 0usize;
    let cut_off = within("the server closes the connection", async {
        let mut buf = vec![0u8; 65536];
        while sent < 64 << 20 {
            tokio::select! {
                written = writer.write_all(&continuation) => {
                    if written.is_err() { return true; }
                    sent += continuation.len();
                }
                read = reader.read(&mut buf) => {
                    // SETTINGS, its ACK, then GOAWAY or the end of the connection.
                    match read { Ok(0) | Err(_) => return true, Ok(_) => {} }
                }
            }
        }
        false
    })
    .await;
    assert!(cut_off, "still accepting after {sent} bytes");
    assert!(sent < 8 << 20, "accepted {sent} bytes of one header block");
    let response = app.client().get("/api/v1/namespaces/ns/pods/x", None).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "other connections are served"
    );
    app.assert_settled().await;
}
