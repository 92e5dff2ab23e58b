//! Upstream failures through the whole app: down (503, and 401 for a TokenReview that cannot
//! reach it), slow (504 after --request-timeout or a shorter `?timeout=`), a body broken off
//! mid-stream, and a malformed target (400); seats come back each time.

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;

use crate::support::app::{request, within, AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::{assert_status, pf_headers};

/// Every request of the default configuration's `global-default` level ends.
async fn assert_no_seats_held(app: &TestApp) {
    app.wait_level("global-default", "every seat is back", |s| {
        s.waiting == 0 && s.executing == 0 && s.seats_in_use == 0
    })
    .await;
}

#[tokio::test]
async fn an_upstream_that_is_down_gives_503() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let app = AppBuilder::new(&url).start().await;
    let response = app
        .client()
        .get("/api/v1/namespaces/ns/pods/web", None)
        .await;
    assert!(
        pf_headers(&response).0.is_some(),
        "classified before forwarding"
    );
    assert_status(response, 503, "ServiceUnavailable").await;
    assert_no_seats_held(&app).await;
}

#[tokio::test]
async fn a_slow_upstream_gives_504_after_the_request_timeout() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .flag("--request-timeout=300ms")
        .start()
        .await;
    let started = tokio::time::Instant::now();
    let response = app.client().get("/slow?sleep=4000", None).await;
    let status = assert_status(response, 504, "Timeout").await;
    assert!(status["message"].is_string());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "answered at the timeout, not when the upstream did"
    );
    assert_no_seats_held(&app).await;
}

#[tokio::test]
async fn a_body_broken_off_upstream_aborts_the_callers_body() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let response = app.client().get("/reset", None).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = within("first chunk", body.frame())
        .await
        .expect("a chunk")
        .expect("ok");
    assert_eq!(first.into_data().expect("data").as_ref(), b"{\"partial\":");
    fake.break_stream();
    let rest = within("the broken stream", body.collect()).await;
    assert!(rest.is_err(), "the caller sees the stream abort");
    assert_no_seats_held(&app).await;
}

#[tokio::test]
async fn a_shorter_timeout_parameter_wins_over_the_request_timeout() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let started = tokio::time::Instant::now();
    let response = app
        .client()
        .get(
            "/api/v1/namespaces/ns/pods?timeout=300ms&labelSelector=app",
            None,
        )
        .await;
    // The fake answers lists at once; /slow shows the deadline.
    assert_eq!(response.status(), StatusCode::OK);
    let response = app
        .client()
        .get("/slow?sleep=4000&timeout=300ms", None)
        .await;
    assert_status(response, 504, "Timeout").await;
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    assert_no_seats_held(&app).await;
}

#[tokio::test]
async fn a_malformed_target_gets_400_and_never_reaches_the_upstream() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).start().await;
    let response = app.client().get("/api/v1/namespaces/%zz/pods", None).await;
    assert_status(response, 400, "BadRequest").await;
    assert!(fake.requests().iter().all(|r| !r.path.contains("%zz")));
    let response = app
        .client()
        .get("/api/v1/namespaces/ns/pods?timeout=soon", None)
        .await;
    assert_status(response, 400, "BadRequest").await;
    assert!(fake
        .requests()
        .iter()
        .all(|r| !r.path.contains("timeout=soon")));
}

#[tokio::test]
async fn an_invalid_timeout_gets_400_before_authentication_and_flow_control() {
    // The apiserver's RequestDeadline filter runs outside authentication and APF.
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .token_file()
        .flag("--anonymous-auth=false")
        .start()
        .await;
    let response = app
        .client()
        .get("/api/v1/namespaces/ns/pods?timeout=soon", None)
        .await;
    assert_eq!(pf_headers(&response), (None, None), "never classified");
    assert_status(response, 400, "BadRequest").await;
    assert!(fake.requests().iter().all(|r| !r.path.contains("/pods")));
}

#[tokio::test]
async fn a_watch_to_an_upstream_that_is_down_gives_503_and_its_seat_back() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let app = AppBuilder::new(&url).start().await;
    let response = app
        .client()
        .get("/api/v1/namespaces/ns/pods?watch=true", None)
        .await;
    assert_status(response, 503, "ServiceUnavailable").await;
    assert_no_seats_held(&app).await;
}

#[tokio::test]
async fn a_token_review_that_cannot_reach_the_upstream_fails_closed_with_401() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let app = AppBuilder::new(&url)
        .flag("--authentication-token-webhook")
        .start()
        .await;
    // The TokenReview is retried with the apiserver's webhook backoff (about 4 s in all).
    let mut conn = app.client().connect().await;
    let get = request(
        "GET",
        "/api/v1/namespaces/ns/pods/web",
        Some("some-token"),
        Bytes::new(),
    );
    let response = tokio::time::timeout(Duration::from_secs(15), conn.send_unbounded(get))
        .await
        .expect("the review gives up");
    assert_eq!(
        pf_headers(&response),
        (None, None),
        "rejected before classification"
    );
    assert_status(response, 401, "Unauthorized").await;
}
