//! Seats come back in every way a request can end: the caller leaves while its request waits
//! in the queue or runs (HTTP/1.1 connection closed, HTTP/2 stream reset), a streamed body ends,
//! is abandoned or runs past its deadline.

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;

use crate::flow_control::{assert_drained, occupy, queue_one, tenants, tiny_app, TINY};
use crate::support::app::{request, within, AppBuilder, Conn, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::{pf_headers, ONE_SEAT, TINY_LEVEL};

#[tokio::test]
async fn a_queued_request_whose_client_leaves_leaves_its_queue() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let hanging = occupy(&app, &fake).await;
    let queued = queue_one(&app).await;

    queued.abort();
    app.wait_level(TINY, "the queue empties", |s| s.waiting == 0)
        .await;
    assert_eq!(app.level(TINY).executing, 1, "the held request still runs");

    fake.release_hanging();
    within("the held request ends", hanging)
        .await
        .expect("join");
    assert_drained(&app).await;
    assert!(
        fake.requests().iter().all(|r| !r.path.ends_with("/queued")),
        "the abandoned request never reaches the upstream"
    );
    // The seat is usable again.
    let response = app.client().get("/api/v1/namespaces/ns/pods/y", None).await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_queued_http2_stream_that_is_reset_leaves_its_queue() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let hanging = occupy(&app, &fake).await;
    let conn = app.client_with(None, http::Version::HTTP_2).connect().await;
    let queued = conn.spawn_h2(request(
        "GET",
        "/api/v1/namespaces/ns/pods/queued",
        None,
        Bytes::new(),
    ));
    app.wait_level(TINY, "a request waits", |s| s.waiting == 1)
        .await;

    queued.abort();
    app.wait_level(TINY, "the queue empties", |s| s.waiting == 0)
        .await;
    // The connection is still usable: its next stream waits for the seat and gets it.
    let next = conn.spawn_h2(request(
        "GET",
        "/api/v1/namespaces/ns/pods/next",
        None,
        Bytes::new(),
    ));
    app.wait_level(TINY, "the next stream waits", |s| s.waiting == 1)
        .await;
    fake.release_hanging();
    within("the held request ends", hanging)
        .await
        .expect("join");
    let response = within("the next stream is served", next)
        .await
        .expect("join");
    assert_eq!(response.status(), StatusCode::OK);
    assert_drained(&app).await;
    assert!(fake.requests().iter().all(|r| !r.path.ends_with("/queued")));
}

/// Starts a non-long-running streamed GET (`/stream`) that holds the level's seat while its body
/// streams; returns the events sender and the response.
async fn streaming(
    app: &TestApp,
    fake: &FakeApiserver,
    version: http::Version,
) -> (
    tokio::sync::mpsc::Sender<Bytes>,
    Conn,
    hyper::body::Incoming,
) {
    let mut conn = app.client_with(None, version).connect().await;
    let send = conn.send(request("GET", "/stream", None, Bytes::new()));
    let (events, response) =
        within("stream", async { tokio::join!(fake.next_watch(), send) }).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(pf_headers(&response), tenants());
    (events, conn, response.into_body())
}

#[tokio::test]
async fn a_streamed_response_holds_its_seat_until_the_caller_goes_away() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let (events, conn, mut body) = streaming(&app, &fake, http::Version::HTTP_11).await;
    events
        .send(Bytes::from_static(b"chunk"))
        .await
        .expect("send");
    within("a chunk", body.frame())
        .await
        .expect("open")
        .expect("frame");
    assert_eq!(
        app.level(TINY).seats_in_use,
        1,
        "the seat is held while the body streams"
    );

    drop(body);
    drop(conn);
    assert_drained(&app).await;
    drop(events);
}

#[tokio::test]
async fn a_streamed_response_ends_with_an_error_at_the_request_timeout_and_frees_its_seat() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .config(TINY_LEVEL)
        .flag(ONE_SEAT[0])
        .flag(ONE_SEAT[1])
        .flag("--request-timeout=500ms")
        .start()
        .await;
    let (events, _conn, body) = streaming(&app, &fake, http::Version::HTTP_11).await;
    let rest = within("the deadline", body.collect()).await;
    assert!(rest.is_err(), "the body is cut off at the deadline");
    assert_drained(&app).await;
    drop(events);
}

#[tokio::test]
async fn a_streamed_http2_response_frees_its_seat_when_the_caller_resets_the_stream() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let (events, conn, body) = streaming(&app, &fake, http::Version::HTTP_2).await;
    assert_eq!(app.level(TINY).seats_in_use, 1);
    drop(body);
    assert_drained(&app).await;
    // The connection lives on and the seat serves its next stream.
    let next = conn.spawn_h2(request(
        "GET",
        "/api/v1/namespaces/ns/pods/x",
        None,
        Bytes::new(),
    ));
    let next = within("the next stream", next).await.expect("join");
    assert_eq!(next.status(), StatusCode::OK);
    drop(events);
}

#[tokio::test]
async fn an_executing_request_whose_caller_leaves_gives_its_seat_back() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    for version in [http::Version::HTTP_11, http::Version::HTTP_2] {
        let client = app.client_with(None, version);
        let held = tokio::spawn(async move {
            let mut conn = client.connect().await;
            conn.send_unbounded(request("GET", "/hang", None, Bytes::new()))
                .await
        });
        app.wait_level(TINY, "the /hang request runs", |s| s.executing == 1)
            .await;
        held.abort();
        app.wait_level(TINY, "the seat is back", |s| {
            s.executing == 0 && s.seats_in_use == 0
        })
        .await;
    }
}
