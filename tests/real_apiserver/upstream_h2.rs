//! Suite item 5: upstream HTTP/2 against the real server. The SETTINGS it sends; more watches and
//! held requests than its stream limit per connection, none of them waiting anywhere but in the
//! fair queues; bookmarks; and a 410 for a resourceVersion the apiserver no longer has, reaching
//! the client as the apiserver sends it, then a re-list and re-watch (client-go's loop).
//!
//! The shared apiserver runs with `--http2-max-streams-per-connection=16`
//! ([`crate::support::kube_apiserver`]) so that "more than its limit" stays small.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::task::JoinHandle;

use crate::kubectl_modes::dev_namespace;
use crate::support::app::{metric_sum, request, TestClient};
use crate::support::kube_apiserver::{KubeApiserver, ALICE_TOKEN, STREAMS_PER_CONNECTION};
use crate::support::{channel_body, read_body};
use crate::Front;

const NS: &str = "rt-h2";

fn addr(api: &KubeApiserver) -> SocketAddr {
    api.server
        .trim_start_matches("https://")
        .parse()
        .expect("server address")
}

/// The SETTINGS_MAX_CONCURRENT_STREAMS of the SETTINGS frame the apiserver sends first on a raw
/// HTTP/2 connection (None when it sends no such setting: unlimited).
async fn advertised_streams(api: &KubeApiserver) -> Option<u32> {
    use rustls_pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ca = std::fs::read(api.path("ca.crt")).expect("ca.crt");
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls_pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(der.expect("pem")).expect("root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr(api))
        .await
        .expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    // The client preface and an empty SETTINGS frame.
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .expect("preface");
    let read = async {
        let mut header = [0u8; 9];
        tls.read_exact(&mut header).await.expect("frame header");
        let length =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        assert_eq!(header[3], 0x4, "the server's first frame is SETTINGS");
        let mut payload = vec![0u8; length];
        tls.read_exact(&mut payload)
            .await
            .expect("settings payload");
        payload
    };
    let payload = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("SETTINGS within 10 s");
    payload.chunks(6).find_map(|setting| {
        let id = u16::from_be_bytes([setting[0], setting[1]]);
        (id == 0x3).then(|| u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]))
    })
}

/// A create whose body arrives only when the returned sender completes it: it holds a seat in
/// the proxy and in the apiserver, and an upstream stream.
fn held_create(
    client: &TestClient,
    conn: &crate::support::app::Conn,
    name: &str,
) -> (
    tokio::sync::mpsc::Sender<Bytes>,
    JoinHandle<http::Response<Incoming>>,
) {
    let _ = client;
    let (sender, body) = channel_body();
    let request = Request::post(format!("/api/v1/namespaces/{NS}/configmaps"))
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {ALICE_TOKEN}"))
        .body(body)
        .expect("request");
    let task = conn.spawn_h2(request);
    let head = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"#);
    let first = sender.clone();
    tokio::spawn(async move {
        let _ = first.send(Bytes::from(head)).await;
    });
    (sender, task)
}

/// Reads watch events (one JSON object per line) from `body` until `check` accepts one; at most
/// 30 s.
async fn next_event(
    body: &mut Incoming,
    buffer: &mut Vec<u8>,
    check: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let wait = async {
        loop {
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let event: serde_json::Value = serde_json::from_slice(&line).expect("event json");
                if check(&event) {
                    return event;
                }
            }
            let frame = body
                .frame()
                .await
                .expect("the watch goes on")
                .expect("frame");
            if let Ok(data) = frame.into_data() {
                buffer.extend_from_slice(&data);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the event arrives within 30 s")
}

fn watch(path: &str) -> Request<crate::support::TestBody> {
    request("GET", path, Some(ALICE_TOKEN), Bytes::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_http2_streams_watches_bookmarks_and_410() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let advertised = advertised_streams(api).await;
    assert_eq!(
        advertised,
        Some(STREAMS_PER_CONNECTION as u32),
        "SETTINGS_MAX_CONCURRENT_STREAMS"
    );
    let limit = STREAMS_PER_CONNECTION;
    dev_namespace(api, NS).await;
    let front = Front::start(api, &["--identity-forwarding=passthrough".to_string()]).await;

    // Watches: twice the stream limit, all on one client connection.
    let client = front.app.client_with(None, Version::HTTP_2);
    let conn = client.connect().await;
    let list = front
        .app
        .client()
        .get(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            Some(ALICE_TOKEN),
        )
        .await;
    assert_eq!(list.status(), StatusCode::OK);
    let list: serde_json::Value =
        serde_json::from_slice(&read_body(list).await.expect("body")).expect("json");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let watches = 2 * limit;
    let mut open = Vec::new();
    for _ in 0..watches {
        open.push(conn.spawn_h2(watch(&format!(
            "/api/v1/namespaces/{NS}/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion={rv}"
        ))));
    }
    let mut bodies = Vec::new();
    for task in open {
        let response = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("watch head")
            .expect("join");
        assert_eq!(response.status(), StatusCode::OK);
        bodies.push(response.into_body());
    }

    // Held creates: more than one connection's streams, all executing upstream at once.
    let held: Vec<_> = (0..limit + 4)
        .map(|n| held_create(&client, &conn, &format!("held-{n}")))
        .collect();
    let level = front.app.level("global-default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while front.app.level("global-default").executing < (limit + 4) as u32 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "every held create executes in the proxy: {level:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let executing = r#"apiserver_flowcontrol_current_executing_requests{flow_schema="global-default",priority_level="global-default"}"#;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = api.admin_ok(&["get", "--raw", "/metrics"], None).await;
        let upstream = metric_sum(&text, executing);
        if upstream >= (limit + 4) as f64 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "all {} held creates execute in the apiserver at once (it shows {upstream}): none waits for an upstream stream",
            limit + 4
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A GET still answers at once.
    let started = tokio::time::Instant::now();
    let get = front
        .app
        .client()
        .get("/api/v1/namespaces", Some(ALICE_TOKEN))
        .await;
    assert_ne!(get.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(started.elapsed() < Duration::from_secs(2));
    let text = front.app.app.metrics().encode();
    assert_eq!(
        metric_sum(
            &text,
            "apf_proxy_upstream_streams_in_use{route=\"long-running\"}"
        ),
        watches as f64,
        "{text}"
    );
    assert!(
        metric_sum(&text, "apf_proxy_upstream_connections{protocol=\"h2\"}") >= 3.0,
        "watches and held requests over more than one upstream connection: {text}"
    );
    for (n, (sender, task)) in held.into_iter().enumerate() {
        sender
            .send(Bytes::from_static(br#""data":{"k":"v"}}"#))
            .await
            .expect("send the rest");
        drop(sender);
        let response = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the held create finishes")
            .expect("join");
        assert_eq!(response.status(), StatusCode::CREATED, "held-{n}");
    }
    // Every watch saw every create.
    for body in &mut bodies {
        let mut buffer = Vec::new();
        next_event(body, &mut buffer, |e| {
            e["type"] == "ADDED" && e["object"]["metadata"]["name"] == format!("held-{}", limit + 3)
        })
        .await;
    }
    drop(bodies);

    // Bookmarks: the end of the initial events (WatchList), through the proxy.
    let response = front
        .app
        .client_with(None, Version::HTTP_2)
        .connect()
        .await
        .send(watch(&format!(
            "/api/v1/namespaces/{NS}/configmaps?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        )))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut buffer = Vec::new();
    let bookmark = next_event(&mut body, &mut buffer, |e| e["type"] == "BOOKMARK").await;
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
        "{bookmark}"
    );
    drop(body);

    // 410: a watch from a resourceVersion etcd has compacted away (every 10 s here), of
    // PodTemplates, which have no watch cache here (the cache of a young apiserver still holds
    // every configmap event since its start). The apiserver sends it as an ERROR event in a 200
    // stream; through the proxy it arrives the same.
    let old = format!("/api/v1/namespaces/{NS}/podtemplates?watch=true&resourceVersion=1");
    let ca = std::fs::read_to_string(api.path("ca.crt")).expect("ca.crt");
    let (cert, key) = api.client_cert(front.app.dir.path(), "erin", "erin", &["dev"]);
    let erin = crate::support::pki::Issued::from_files(&cert, &key);
    let direct = TestClient::to_server(addr(api), &ca, Some(&erin));
    // The first event of a watch from revision 1, if one comes within 3 s (before the compaction,
    // etcd has the whole history and no PodTemplate ever changed: nothing comes).
    let first_event = |client: TestClient, token: Option<&'static str>| {
        let old = old.clone();
        async move {
            let response = client.send(request("GET", &old, token, Bytes::new())).await;
            assert_eq!(response.status(), StatusCode::OK);
            let mut body = response.into_body();
            let mut buffer = Vec::new();
            tokio::time::timeout(
                Duration::from_secs(3),
                next_event(&mut body, &mut buffer, |_| true),
            )
            .await
            .ok()
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let direct_event = loop {
        let event = first_event(direct.clone(), None).await;
        if let Some(event) = event {
            break event;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "etcd compacts revision 1 within 60 s"
        );
    };
    let proxied_event = first_event(front.app.client(), Some(ALICE_TOKEN))
        .await
        .expect("the 410 through the proxy");
    for event in [&direct_event, &proxied_event] {
        assert_eq!(event["type"], "ERROR", "{event}");
        assert_eq!(event["object"]["code"], 410, "{event}");
        assert_eq!(event["object"]["reason"], "Expired", "{event}");
    }
    let prefix = |event: &serde_json::Value| {
        event["object"]["message"]
            .as_str()
            .map(|m| m.split(':').next().unwrap_or_default().to_string())
    };
    assert_eq!(
        prefix(&direct_event),
        prefix(&proxied_event),
        "the same 410 direct and through the proxy"
    );
    // client-go's answer to 410: list again, watch from the new resourceVersion.
    let relist = front
        .app
        .client()
        .get(
            &format!("/api/v1/namespaces/{NS}/configmaps"),
            Some(ALICE_TOKEN),
        )
        .await;
    assert_eq!(relist.status(), StatusCode::OK);
    let relist: serde_json::Value =
        serde_json::from_slice(&read_body(relist).await.expect("body")).expect("json");
    assert_eq!(
        relist["items"].as_array().map(Vec::len),
        Some(limit + 4),
        "the re-list has every object"
    );
    let rv = relist["metadata"]["resourceVersion"].as_str().expect("rv");
    let response = front
        .app
        .client()
        .send(watch(&format!(
            "/api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion={rv}"
        )))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    api.admin_ok(&["-n", NS, "delete", "configmap", "held-0"], None)
        .await;
    let mut buffer = Vec::new();
    next_event(&mut body, &mut buffer, |e| {
        e["type"] == "DELETED" && e["object"]["metadata"]["name"] == "held-0"
    })
    .await;
}
