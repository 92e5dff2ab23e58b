//! The upstream side at scale, end to end: an upstream that advertises few HTTP/2 streams, more
//! watches than that, a GOAWAY while requests are in flight, and the connection bound.

use http::{StatusCode, Version};
use kube_apf_proxy::app::App;

use crate::admin::admin_get;
use crate::support::app::{assert_status, metric_sum, request, within, AppBuilder, TestApp};
use crate::support::tls_world::TlsWorld;
use crate::{body_bytes, body_json};

const WATCH: &str = "/api/v1/namespaces/ns/pods?watch=true";
const POD: &str = "/api/v1/namespaces/ns/pods/web";

async fn metrics(app: &TestApp) -> String {
    let (status, text) = admin_get(admin_addr(&app.app), "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    text
}

fn admin_addr(app: &App) -> std::net::SocketAddr {
    app.running().admin_addr()
}

#[tokio::test]
async fn more_watches_than_the_upstreams_stream_limit_stay_open_and_gets_still_answer() {
    let world = TlsWorld::start_h2_with_max_streams(5).await;
    let app = AppBuilder::for_world(&world).start().await;
    // One HTTP/2 client connection carries every watch, as a controller's would.
    let conn = app.client_with(None, Version::HTTP_2).connect().await;
    let mut watches = Vec::new();
    for _ in 0..12 {
        let response = conn.spawn_h2(request("GET", WATCH, None, Default::default()));
        let events = within("the watch reaches the fake", world.fake.next_watch()).await;
        let response = within("watch head", response).await.expect("join");
        assert_eq!(response.status(), StatusCode::OK);
        watches.push((events, response));
    }
    // HTTP/2 callers' GETs: multiplexed upstream too (an HTTP/1.1 caller's would take an
    // HTTP/1.1 connection, see below).
    let h2 = app.client_with(None, Version::HTTP_2);
    for _ in 0..10 {
        let response = h2.get(POD, None).await;
        assert_eq!(response.status(), StatusCode::OK);
        body_bytes(response).await;
    }
    let seen = world.fake.requests();
    assert!(
        seen.iter().all(|r| r.version == Version::HTTP_2),
        "{seen:?}"
    );
    // 12 watches over 5 streams each (3), one connection for the callers' GETs, and one for
    // the proxy's own requests (readiness), which present its credentials.
    assert_eq!(world.fake.connections(), 5);
    let text = metrics(&app).await;
    assert_eq!(
        metric_sum(
            &text,
            "apf_proxy_upstream_streams_in_use{route=\"long-running\"}"
        ),
        12.0,
        "{text}"
    );
    assert_eq!(
        metric_sum(&text, "apf_proxy_upstream_connections{protocol=\"h2\"}"),
        5.0
    );

    // Every watch still relays its events.
    for (events, response) in &mut watches {
        events
            .send(bytes::Bytes::from_static(b"{\"type\":\"ADDED\"}\n"))
            .await
            .expect("send");
        let frame = within(
            "the event",
            http_body_util::BodyExt::frame(response.body_mut()),
        )
        .await
        .expect("a frame")
        .expect("data");
        assert_eq!(frame.into_data().expect("data"), "{\"type\":\"ADDED\"}\n");
    }
    drop(watches);
    app.assert_settled().await;
}

#[tokio::test]
async fn an_ordinary_request_keeps_its_callers_protocol_and_watches_stay_multiplexed() {
    let world = TlsWorld::start_h2_with_max_streams(100).await;
    let app = AppBuilder::for_world(&world).start().await;
    let h1 = app.client();
    let h2 = app.client_with(None, Version::HTTP_2);
    for client in [&h1, &h2, &h1] {
        let response = client.get(POD, None).await;
        assert_eq!(response.status(), StatusCode::OK);
        body_bytes(response).await;
    }
    // An HTTP/1.1 caller's watch: multiplexed over HTTP/2 all the same.
    let watch = tokio::spawn({
        let h1 = h1.clone();
        async move { h1.get(WATCH, None).await }
    });
    let events = within("the watch reaches the fake", world.fake.next_watch()).await;
    let watch = within("watch head", watch).await.expect("join");
    assert_eq!(watch.status(), StatusCode::OK);

    let seen: Vec<_> = world
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/api/v1/namespaces/ns/pods"))
        .map(|r| r.version)
        .collect();
    assert_eq!(
        seen,
        [
            Version::HTTP_11,
            Version::HTTP_2,
            Version::HTTP_11,
            Version::HTTP_2
        ]
    );
    // The two HTTP/1.1 GETs shared one pooled connection.
    let text = metrics(&app).await;
    assert_eq!(
        metric_sum(
            &text,
            "apf_proxy_upstream_connections{protocol=\"http/1.1\"}"
        ),
        1.0,
        "{text}"
    );
    drop(events);
    drop(watch);
    app.assert_settled().await;
}

#[tokio::test]
async fn a_goaway_from_the_upstream_fails_no_request() {
    let world = TlsWorld::start_h2_with_max_streams(100).await;
    let app = AppBuilder::for_world(&world).start().await;
    // HTTP/2 callers, so that their GETs are multiplexed upstream.
    let h2 = app.client_with(None, Version::HTTP_2);
    let response = h2.get(POD, None).await;
    assert_eq!(response.status(), StatusCode::OK);
    body_bytes(response).await;
    let conn = h2.connect().await;
    let watch = conn.spawn_h2(request("GET", WATCH, None, Default::default()));
    let events = within("the watch reaches the fake", world.fake.next_watch()).await;
    let mut watch = within("watch head", watch).await.expect("join");

    // The upstream closes its connections gracefully (an apiserver shutting down, or its
    // --goaway-chance) while GETs are on their way.
    let gets: Vec<_> = (0..20)
        .map(|_| {
            let client = h2.clone();
            tokio::spawn(async move { client.try_get(POD).await })
        })
        .collect();
    world.fake.goaway();
    for get in gets {
        assert_eq!(
            within("a GET", get).await.expect("join"),
            Ok(StatusCode::OK)
        );
    }
    for _ in 0..5 {
        assert_eq!(h2.try_get(POD).await, Ok(StatusCode::OK));
    }
    // The watch open at the GOAWAY goes on until it ends.
    events
        .send(bytes::Bytes::from_static(b"{\"type\":\"MODIFIED\"}\n"))
        .await
        .expect("send");
    let frame = within(
        "the event",
        http_body_util::BodyExt::frame(watch.body_mut()),
    )
    .await
    .expect("a frame")
    .expect("data");
    assert_eq!(
        frame.into_data().expect("data"),
        "{\"type\":\"MODIFIED\"}\n"
    );
    let text = metrics(&app).await;
    assert!(
        metric_sum(&text, "apf_proxy_upstream_goaways_total") >= 1.0,
        "{text}"
    );
    drop(events);
    drop(watch);
    app.assert_settled().await;
}

#[tokio::test]
async fn at_the_upstream_connection_bound_a_watch_gets_503_and_gets_still_answer() {
    let world = TlsWorld::start_h2_with_max_streams(5).await;
    // Three connections, one of them kept for ordinary requests; the proxy's readiness probe
    // (its own credentials, so a connection of its own) takes one.
    let app = AppBuilder::for_world(&world)
        .flag("--upstream-max-connections=3")
        .start()
        .await;
    let conn = app.client_with(None, Version::HTTP_2).connect().await;
    let mut watches = Vec::new();
    for _ in 0..5 {
        let response = conn.spawn_h2(request("GET", WATCH, None, Default::default()));
        let events = within("the watch reaches the fake", world.fake.next_watch()).await;
        watches.push((events, within("watch head", response).await.expect("join")));
    }
    let refused = within(
        "the sixth watch",
        conn.spawn_h2(request("GET", WATCH, None, Default::default())),
    )
    .await
    .expect("join");
    assert_eq!(
        refused
            .headers()
            .get(http::header::RETRY_AFTER)
            .map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    let status = assert_status(refused, 503, "ServiceUnavailable").await;
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("upstream connection limit is reached (3 connections"),
        "{message}"
    );
    let response = app.client().get(POD, None).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body_json(response).await["metadata"]["name"], "web");
    let text = metrics(&app).await;
    assert_eq!(
        metric_sum(
            &text,
            "apf_proxy_upstream_connection_limit_rejections_total{route=\"long-running\"}"
        ),
        1.0,
        "{text}"
    );
    drop(watches);
    app.assert_settled().await;
}
