//! Flow control in the request path, against the one-seat level of [`crate::TINY_LEVEL`]:
//! 429 with `Retry-After` when the queue is full or the wait too long, exempt and long-running
//! traffic beside a full level, and watches that give their seats back early. The helpers here
//! (a held seat, a queued request) serve [`crate::seats`] too.

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::task::JoinHandle;

use crate::support::app::{eventually, request, within, AppBuilder, Conn, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::{assert_status, body_bytes, pf_headers, uids, ONE_SEAT, TINY_LEVEL};

/// The one-seat level.
pub(crate) const TINY: &str = "tiny";

/// The APF headers of requests in the `tenants` FlowSchema.
pub(crate) fn tenants() -> (Option<String>, Option<String>) {
    uids("tenants-fs-uid", "tiny-pl-uid")
}

/// The static tokens of [`tiny_app`]: `admin` (`system:masters`) and `rita`. In passthrough
/// mode a caller is classified by the token that travels, not by a client certificate.
pub(crate) const TINY_TOKENS: &str =
    "admin-token,admin,admin-uid,\"system:masters\"\nrita-token,rita,rita-uid\n";
/// `admin`'s token in [`TINY_TOKENS`].
pub(crate) const ADMIN_TOKEN: &str = "admin-token";
/// `rita`'s token in [`TINY_TOKENS`].
pub(crate) const RITA_TOKEN: &str = "rita-token";

/// An app over [`TINY_LEVEL`] with one seat, accepting client certificates and [`TINY_TOKENS`].
pub(crate) async fn tiny_app(fake: &FakeApiserver) -> TestApp {
    AppBuilder::new(&fake.url)
        .config(TINY_LEVEL)
        .flag(ONE_SEAT[0])
        .flag(ONE_SEAT[1])
        .client_ca()
        .token_file_with(TINY_TOKENS)
        .start()
        .await
}

/// Occupies the level's one seat with a `/hang` request the fake holds open; returns its task.
pub(crate) async fn occupy(app: &TestApp, fake: &FakeApiserver) -> JoinHandle<(StatusCode, Bytes)> {
    let client = app.client();
    let task = tokio::spawn(async move {
        let mut conn = client.connect().await;
        let response = conn
            .send_unbounded(request("GET", "/hang", None, Bytes::new()))
            .await;
        let status = response.status();
        (status, body_bytes(response).await)
    });
    eventually("the /hang request reaches the fake", || {
        fake.requests().iter().any(|r| r.path == "/hang")
    })
    .await;
    assert_eq!(app.level(TINY).executing, 1);
    task
}

/// Queues a GET behind the occupied seat on its own connection; returns the connection's task.
pub(crate) async fn queue_one(app: &TestApp) -> JoinHandle<StatusCode> {
    let client = app.client();
    let task = tokio::spawn(async move {
        let mut conn: Conn = client.connect().await;
        let get = request(
            "GET",
            "/api/v1/namespaces/ns/pods/queued",
            None,
            Bytes::new(),
        );
        conn.send_unbounded(get).await.status()
    });
    app.wait_level(TINY, "a request waits", |s| s.waiting == 1)
        .await;
    task
}

/// Waits until the level has nothing waiting, executing or seated.
pub(crate) async fn assert_drained(app: &TestApp) {
    app.wait_level(TINY, "every seat is back", |s| {
        s.waiting == 0 && s.executing == 0 && s.seats_in_use == 0
    })
    .await;
}

#[tokio::test]
async fn a_full_queue_rejects_with_429_retry_after_and_a_status_body() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let hanging = occupy(&app, &fake).await;
    let queued = queue_one(&app).await;

    let response = app.client().get("/api/v1/namespaces/ns/pods/x", None).await;
    assert_eq!(
        pf_headers(&response),
        tenants(),
        "a rejection names its flow"
    );
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!(retry_after >= 1);
    let status = assert_status(response, 429, "TooManyRequests").await;
    assert_eq!(status["details"]["retryAfterSeconds"], retry_after);
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.path != "/api/v1/namespaces/ns/pods/x"),
        "a rejected request never reaches the upstream"
    );

    fake.release_hanging();
    let (status, body) = within("the held request ends", hanging)
        .await
        .expect("join");
    assert_eq!((status, body.as_ref()), (StatusCode::OK, &b"released"[..]));
    let status = within("the queued request is served", queued)
        .await
        .expect("join");
    assert_eq!(status, StatusCode::OK);
    assert_drained(&app).await;
}

#[tokio::test]
async fn exempt_and_long_running_requests_pass_a_full_level() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let hanging = occupy(&app, &fake).await;
    let queued = queue_one(&app).await;

    let client = app.client_with(None, http::Version::HTTP_11);
    let response = client
        .get("/api/v1/namespaces/ns/pods/x", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(response.status(), StatusCode::OK, "exempt is never queued");
    assert_eq!(
        pf_headers(&response),
        uids("exempt-fs-uid", "exempt-pl-uid")
    );
    body_bytes(response).await;

    let mut exec = request(
        "POST",
        "/api/v1/namespaces/ns/pods/web/exec?command=sh",
        None,
        Bytes::new(),
    );
    exec.headers_mut()
        .insert("connection", "Upgrade".parse().expect("v"));
    exec.headers_mut()
        .insert("upgrade", "SPDY/3.1".parse().expect("v"));
    let response = app.client().send(exec).await;
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(
        pf_headers(&response),
        (None, None),
        "exec bypasses flow control"
    );
    assert_eq!(app.level(TINY).waiting, 1, "the queued request still waits");

    fake.release_hanging();
    within("the held request ends", hanging)
        .await
        .expect("join");
    within("the queued request is served", queued)
        .await
        .expect("join");
    assert_drained(&app).await;
}

#[tokio::test]
async fn a_watch_gives_its_seat_back_once_its_response_head_arrives() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let client = app.client();
    let watch = tokio::spawn(async move {
        client
            .get("/api/v1/namespaces/ns/pods?watch=true", None)
            .await
    });
    let events = within("the watch reaches the fake", fake.next_watch()).await;
    let response = within("watch head", watch).await.expect("join");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(pf_headers(&response), tenants());
    let mut body = response.into_body();

    // The one seat is free while the watch streams on.
    app.wait_level(TINY, "the watch's seat is back", |s| s.seats_in_use == 0)
        .await;
    let get = app.client().get("/api/v1/namespaces/ns/pods/x", None).await;
    assert_eq!(get.status(), StatusCode::OK);
    assert_eq!(pf_headers(&get), tenants());
    body_bytes(get).await;

    events
        .send(Bytes::from_static(b"{\"type\":\"ADDED\"}\n"))
        .await
        .expect("send");
    let frame = within("a watch event", body.frame())
        .await
        .expect("open")
        .expect("frame");
    assert_eq!(
        frame.into_data().expect("data").as_ref(),
        b"{\"type\":\"ADDED\"}\n"
    );
    drop(events);
    assert!(within("end of the watch", body.frame()).await.is_none());
    assert_drained(&app).await;
}

#[tokio::test]
async fn a_request_that_waits_past_its_queue_wait_limit_gets_429() {
    let fake = FakeApiserver::start_plain().await;
    // A quarter of the request timeout: 500 ms in the queue at most.
    let app = AppBuilder::new(&fake.url)
        .config(TINY_LEVEL)
        .flag(ONE_SEAT[0])
        .flag(ONE_SEAT[1])
        .flag("--request-timeout=2s")
        .start()
        .await;
    let hanging = occupy(&app, &fake).await;
    let started = tokio::time::Instant::now();
    let response = app.client().get("/api/v1/namespaces/ns/pods/x", None).await;
    let waited = started.elapsed();
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(pf_headers(&response), tenants());
    assert_status(response, 429, "TooManyRequests").await;
    assert!(
        waited >= std::time::Duration::from_millis(450),
        "it waited in the queue first ({waited:?})"
    );
    fake.release_hanging();
    within("the held request ends", hanging)
        .await
        .expect("join");
    assert_drained(&app).await;
}

#[tokio::test]
async fn exempt_requests_are_counted_while_they_run() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let client = app.client_with(None, http::Version::HTTP_2);
    let held = tokio::spawn(async move {
        let mut conn = client.connect().await;
        let response = conn
            .send_unbounded(request("GET", "/hang", Some(ADMIN_TOKEN), Bytes::new()))
            .await;
        (pf_headers(&response), body_bytes(response).await)
    });
    app.wait_level("exempt", "the exempt request is counted", |s| {
        s.executing == 1
    })
    .await;
    assert_eq!(app.level("exempt").waiting, 0);
    assert_eq!(
        app.level(TINY).executing,
        0,
        "exempt traffic takes no seat of tiny"
    );
    eventually("the /hang request reaches the fake", || {
        fake.requests().iter().any(|r| r.path == "/hang")
    })
    .await;
    fake.release_hanging();
    let (headers, body) = within("the exempt request ends", held).await.expect("join");
    assert_eq!(headers, uids("exempt-fs-uid", "exempt-pl-uid"));
    assert_eq!(body.as_ref(), b"released");
    app.wait_level("exempt", "the exempt request is done", |s| s.executing == 0)
        .await;
}

#[tokio::test]
async fn long_running_requests_other_than_watch_bypass_a_full_level() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let hanging = occupy(&app, &fake).await;
    let queued = queue_one(&app).await;
    // (method, path, upgrade): the fake answers upgrades with 101 and the rest with 404.
    let cases = [
        (
            "POST",
            "/api/v1/namespaces/ns/pods/web/attach?stdin=true",
            true,
        ),
        ("POST", "/api/v1/namespaces/ns/pods/web/portforward", true),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/web/log?follow=true",
            false,
        ),
        ("GET", "/api/v1/namespaces/ns/pods/web/proxy/metrics", false),
    ];
    for (method, path, upgrade) in cases {
        let mut req = request(method, path, None, Bytes::new());
        if upgrade {
            req.headers_mut()
                .insert("connection", "Upgrade".parse().expect("v"));
            req.headers_mut()
                .insert("upgrade", "SPDY/3.1".parse().expect("v"));
        }
        let response = app.client().send(req).await;
        let expected = if upgrade {
            StatusCode::SWITCHING_PROTOCOLS
        } else {
            StatusCode::NOT_FOUND
        };
        assert_eq!(response.status(), expected, "{path}");
        assert_eq!(
            pf_headers(&response),
            (None, None),
            "{path} bypasses flow control"
        );
        fake.last_request_to(path.split('?').next().expect("path"));
    }
    assert_eq!(app.level(TINY).waiting, 1);
    fake.release_hanging();
    within("the held request ends", hanging)
        .await
        .expect("join");
    within("the queued request is served", queued)
        .await
        .expect("join");
    assert_drained(&app).await;
}

#[tokio::test]
async fn a_level_that_rejects_answers_429_at_once_when_its_seat_is_taken() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let client = app.client_with(None, http::Version::HTTP_11);
    let held_client = client.clone();
    let held = tokio::spawn(async move {
        let mut conn = held_client.connect().await;
        let response = conn
            .send_unbounded(request("GET", "/hang", Some(RITA_TOKEN), Bytes::new()))
            .await;
        (pf_headers(&response), response.status())
    });
    app.wait_level("strict", "rita's request runs", |s| s.executing == 1)
        .await;
    let started = tokio::time::Instant::now();
    let response = client.get("/version", Some(RITA_TOKEN)).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "never queued"
    );
    assert_eq!(pf_headers(&response), uids("rita-fs-uid", "strict-pl-uid"));
    assert!(response.headers().contains_key("retry-after"));
    assert_status(response, 429, "TooManyRequests").await;
    assert_eq!(app.level(TINY).executing, 0, "other levels are untouched");

    eventually("the /hang request reaches the fake", || {
        fake.requests().iter().any(|r| r.path == "/hang")
    })
    .await;
    fake.release_hanging();
    let (headers, status) = within("the held request ends", held).await.expect("join");
    assert_eq!(
        (headers, status),
        (uids("rita-fs-uid", "strict-pl-uid"), StatusCode::OK)
    );
    app.wait_level("strict", "the seat is back", |s| {
        s.executing == 0 && s.seats_in_use == 0
    })
    .await;
}

#[tokio::test]
async fn the_last_rejected_requests_are_listed_with_their_classification_explained() {
    let fake = FakeApiserver::start_plain().await;
    let app = tiny_app(&fake).await;
    let hang = occupy(&app, &fake).await;
    let queued = queue_one(&app).await;
    let refused = app
        .client()
        .send(request(
            "GET",
            "/api/v1/namespaces/ns/pods/refused?limit=3",
            None,
            Bytes::new(),
        ))
        .await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let admin = app.app.running().admin_addr();
    let path = "/debug/api_priority_and_fairness/rejected?priorityLevel=tiny&limit=5";
    let (status, body) = crate::admin::admin_get(admin, path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let listed = listed.as_array().expect("an array");
    assert_eq!(listed.len(), 1, "{body}");
    let r = &listed[0];
    assert_eq!(r["reason"], "queue-full");
    assert_eq!(r["priorityLevel"], TINY);
    assert_eq!(r["flowSchema"], "tenants");
    assert_eq!(r["url"], "/api/v1/namespaces/ns/pods/refused?limit=3");
    assert_eq!(r["user"], "system:anonymous");
    assert_eq!(r["explanation"]["priorityLevel"], TINY);
    assert!(r["explanation"]["flowSchemas"].is_array(), "{body}");
    let other = "/debug/api_priority_and_fairness/rejected?priorityLevel=global-default";
    assert_eq!(crate::admin::admin_get(admin, other).await.1.trim(), "[]");
    for bad in ["limit=lots", "level=tiny"] {
        let path = format!("/debug/api_priority_and_fairness/rejected?{bad}");
        let status = crate::admin::admin_get(admin, &path).await.0;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }
    fake.release_hanging();
    assert_eq!(hang.await.expect("hang").0, StatusCode::OK);
    assert_eq!(queued.await.expect("queued"), StatusCode::OK);
}
