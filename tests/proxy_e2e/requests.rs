//! Plain API traffic through the whole app: get, list, create, watch, an upgraded exec stream,
//! and client certificates over HTTP/1.1 and HTTP/2.

use bytes::Bytes;
use http::{StatusCode, Version};
use http_body_util::BodyExt;
use kube_apf_proxy::config::model::derived_uid;

use crate::support::app::{request, within, AppBuilder, STATIC_TOKEN};
use crate::support::channel_body;
use crate::support::fake_apiserver::FakeApiserver;
use crate::support::tls_world::TlsWorld;
use crate::{
    assert_exec_echoes_both_ways, body_bytes, body_json, exec_upgrade, pf_headers, websocket_exec,
};

#[tokio::test]
async fn get_and_list_reach_the_upstream_and_carry_flow_control_headers() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let client = app.client();

    let response = client.get("/api/v1/namespaces/ns/pods/web", None).await;
    assert_eq!(response.status(), StatusCode::OK);
    // The embedded configuration sets no UIDs: each object carries one derived from its name.
    assert_eq!(
        pf_headers(&response),
        (
            Some(derived_uid("FlowSchema", "global-default")),
            Some(derived_uid("PriorityLevelConfiguration", "global-default"))
        ),
        "APF headers on a proxied GET"
    );
    assert_eq!(body_json(response).await["metadata"]["name"], "web");

    let response = client
        .get("/api/v1/namespaces/ns/pods?limit=10", None)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(pf_headers(&response).0.is_some());
    let list = body_json(response).await;
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));

    let paths: Vec<String> = fake.requests().into_iter().map(|r| r.path).collect();
    assert!(
        paths.contains(&"/api/v1/namespaces/ns/pods/web".to_string()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"/api/v1/namespaces/ns/pods?limit=10".to_string()),
        "{paths:?}"
    );
}

#[tokio::test]
async fn create_sends_the_body_upstream() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let pod = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"new"}}"#;
    let mut post = request(
        "POST",
        "/api/v1/namespaces/ns/pods",
        None,
        Bytes::from_static(pod),
    );
    post.headers_mut()
        .insert("content-type", "application/json".parse().expect("value"));
    let response = app.client().send(post).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    assert!(pf_headers(&response).0.is_some());
    assert_eq!(
        body_bytes(response).await.as_ref(),
        pod,
        "the fake echoes what arrived"
    );
    let seen = fake.last_request_to("/api/v1/namespaces/ns/pods");
    assert_eq!(seen.method, http::Method::POST);
    assert_eq!(seen.header_values("content-type"), ["application/json"]);
}

#[tokio::test]
async fn watch_events_arrive_before_the_stream_ends() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let client = app.client();
    let watch = tokio::spawn(async move {
        client
            .get("/api/v1/namespaces/ns/pods?watch=true", None)
            .await
    });
    let events = within("the watch reaches the fake", fake.next_watch()).await;
    let response = within("watch head", watch).await.expect("join");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        pf_headers(&response).0.is_some(),
        "a watch is flow-controlled"
    );
    let mut body = response.into_body();
    for n in 0..3 {
        let event = format!("{{\"type\":\"ADDED\",\"object\":{{\"n\":{n}}}}}\n");
        events.send(Bytes::from(event.clone())).await.expect("send");
        let frame = within("a watch event", body.frame())
            .await
            .expect("stream still open")
            .expect("frame");
        assert_eq!(frame.into_data().expect("data").as_ref(), event.as_bytes());
    }
    drop(events);
    let end = within("end of the watch", body.frame()).await;
    assert!(end.is_none(), "the watch ends when the upstream ends it");
}

#[tokio::test]
async fn exec_upgrades_and_streams_both_ways() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let mut exec = exec_upgrade("POST", "SPDY/3.1");
    exec.headers_mut().insert(
        "x-stream-protocol-version",
        "v4.channel.k8s.io".parse().expect("value"),
    );
    let mut response = app.client().send(exec).await;
    assert_exec_echoes_both_ways(&mut response, "SPDY/3.1").await;
}

#[tokio::test]
async fn a_websocket_exec_upgrades_and_streams_both_ways() {
    // kubectl >= 1.30: WebSocket, the token in a subprotocol, impersonated to a TLS upstream.
    let world = TlsWorld::start(false).await;
    let app = AppBuilder::for_world(&world)
        .token_file()
        .flag("--identity-forwarding=impersonate")
        .start()
        .await;
    let mut response = app.client().send(websocket_exec(STATIC_TOKEN)).await;
    let seen = world
        .fake
        .last_request_to("/api/v1/namespaces/ns/pods/web/exec");
    assert_eq!(seen.header_values("impersonate-user"), ["carol"]);
    assert_exec_echoes_both_ways(&mut response, "websocket").await;
}

#[tokio::test]
async fn client_certificates_authenticate_over_http1_and_http2() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .client_ca()
        .upstream_token("proxy-token")
        .flag("--identity-forwarding=impersonate")
        .start()
        .await;
    let cert = app.user_cert("dave", Some("qa"));
    for version in [Version::HTTP_11, Version::HTTP_2] {
        // Several requests on one connection (keep-alive, or streams of one HTTP/2 connection).
        let mut conn = app.client_with(Some(&cert), version).connect().await;
        for n in 0..3 {
            let path = format!("/api/v1/namespaces/ns/pods/web-{n}");
            let response = conn.send(request("GET", &path, None, Bytes::new())).await;
            assert_eq!(response.status(), StatusCode::OK, "{version:?}");
            assert_eq!(response.version(), version, "ALPN picks the protocol");
            body_bytes(response).await;
            let seen = fake.last_request_to(&path);
            assert_eq!(
                seen.header_values("impersonate-user"),
                ["dave"],
                "{version:?}"
            );
        }
        let seen = fake.last_request_to("/api/v1/namespaces/ns/pods/web-2");
        assert_eq!(
            seen.header_values("impersonate-user"),
            ["dave"],
            "{version:?}"
        );
        // The upstream adds `system:authenticated` to impersonated users itself.
        assert_eq!(
            seen.header_values("impersonate-group"),
            ["qa"],
            "{version:?}"
        );
    }
}

#[tokio::test]
async fn every_path_is_proxied_including_the_upstreams_health_endpoints() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    for path in ["/healthz", "/version", "/apis"] {
        let response = app.client().get(path, None).await;
        assert!(
            pf_headers(&response).0.is_some(),
            "{path} is flow-controlled"
        );
        body_bytes(response).await;
        fake.last_request_to(path);
    }
}

#[tokio::test]
async fn a_watch_streams_over_http2() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let conn = app.client_with(None, Version::HTTP_2).connect().await;
    let watch = conn.spawn_h2(request(
        "GET",
        "/api/v1/namespaces/ns/pods?watch=true",
        None,
        Bytes::new(),
    ));
    let events = within("the watch reaches the fake", fake.next_watch()).await;
    let response = within("watch head", watch).await.expect("join");
    assert_eq!(response.version(), Version::HTTP_2);
    let mut body = response.into_body();
    // A second stream on the same connection is served while the watch is open.
    let get = conn.spawn_h2(request(
        "GET",
        "/api/v1/namespaces/ns/pods/web",
        None,
        Bytes::new(),
    ));
    let get = within("a GET beside the watch", get).await.expect("join");
    assert_eq!(get.status(), StatusCode::OK);
    events
        .send(Bytes::from_static(b"{\"type\":\"DELETED\"}\n"))
        .await
        .expect("send");
    let frame = within("a watch event", body.frame())
        .await
        .expect("open")
        .expect("frame");
    assert_eq!(
        frame.into_data().expect("data").as_ref(),
        b"{\"type\":\"DELETED\"}\n"
    );
    drop(events);
    // HTTP/2 may close the stream with an empty DATA frame: the rest is empty and ends.
    let rest = within("end of the watch", body.collect())
        .await
        .expect("clean end");
    assert!(rest.to_bytes().is_empty());
}

#[tokio::test]
async fn an_open_watch_is_tracked_for_mutating_estimates_until_its_caller_leaves() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let create = kube_apf_proxy::request_info::parse("POST", "/api/v1/namespaces/ns/pods")
        .expect("request info");
    let watchers = || {
        app.app
            .proxy()
            .estimator()
            .watches()
            .interested_watch_count(&create)
    };
    let mut conn = app.client().connect().await;
    let get = conn.send(request(
        "GET",
        "/api/v1/namespaces/ns/pods?watch=true",
        None,
        Bytes::new(),
    ));
    let (events, response) = within("watch", async { tokio::join!(fake.next_watch(), get) }).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(watchers(), 1, "a create in ns would notify the open watch");

    drop(response);
    drop(conn);
    crate::support::app::eventually("the watch is forgotten", || watchers() == 0).await;
    drop(events);
}

#[tokio::test]
async fn large_bodies_stream_through_both_ways() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    // At --max-request-bytes (3 MiB), the largest write the apiserver accepts.
    let payload: Vec<u8> = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let post = request(
            "POST",
            "/api/v1/namespaces/ns/pods",
            None,
            Bytes::from(payload.clone()),
        );
        let response = app.client_with(None, version).send(post).await;
        assert_eq!(response.status(), StatusCode::CREATED, "{version:?}");
        assert!(
            body_bytes(response).await == payload,
            "{version:?}: echoed intact"
        );
    }
}

/// Reads `fake`'s `POST /upload` data frames until `want` has arrived, each within `STEP`.
async fn uploaded(fake: &FakeApiserver, want: &[u8]) {
    let mut received = Vec::new();
    while received.len() < want.len() {
        let chunk = within("bytes at the upstream", fake.next_upload_chunk()).await;
        received.extend_from_slice(&chunk);
    }
    assert_eq!(received, want);
}

#[tokio::test]
async fn a_chunked_request_body_reaches_the_upstream_before_the_caller_has_sent_it_all() {
    // The proxy streams a body of unknown length (as the apiserver reads one) rather than
    // collecting it first: the fake holds the first chunk while the rest is still unsent.
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let (chunks, body) = channel_body();
        let mut post = request("POST", "/upload", None, Bytes::new());
        *post.body_mut() = body;
        let client = app.client_with(None, version);
        let response = tokio::spawn(async move { client.send(post).await });
        chunks
            .send(Bytes::from_static(b"first "))
            .await
            .expect("send");
        uploaded(&fake, b"first ").await;
        chunks
            .send(Bytes::from_static(b"and the rest"))
            .await
            .expect("send");
        drop(chunks);
        uploaded(&fake, b"and the rest").await;
        let response = within("response", response).await.expect("join");
        assert_eq!(response.status(), StatusCode::OK, "{version:?}");
        assert_eq!(body_bytes(response).await.as_ref(), b"first and the rest");
        let seen = fake.last_request_to("/upload");
        assert!(
            seen.header_values("content-length").is_empty(),
            "{version:?}: no length was made up"
        );
    }
}

#[tokio::test]
async fn object_counts_from_the_upstreams_metrics_make_lists_cost_more() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .upstream_token("proxy-token")
        .start()
        .await;
    let estimator = app.app.proxy().estimator().clone();
    crate::support::app::eventually("object counts read at start", || {
        let now = tokio::time::Instant::now();
        estimator
            .objects()
            .get("pods", now)
            .is_ok_and(|s| s.object_count == 5000)
    })
    .await;
    let scrape = fake.last_request_to("/metrics");
    assert_eq!(
        scrape.header_values("authorization"),
        ["Bearer proxy-token"],
        "the proxy reads /metrics with its own credentials"
    );
    let now = tokio::time::Instant::now();
    let list = kube_apf_proxy::request_info::parse("GET", "/api/v1/pods").expect("info");
    // Without a count (configmaps are not in the fake's metrics) a list costs the minimum, as
    // for an aggregated API; 5000 pods of unknown size cost the most a list may.
    let unknown = kube_apf_proxy::request_info::parse("GET", "/api/v1/configmaps").expect("info");
    assert_eq!(estimator.estimate(&unknown, None, now).max_seats(), 1);
    assert!(
        estimator.estimate(&list, None, now).max_seats() > 1,
        "5000 pods"
    );
}
