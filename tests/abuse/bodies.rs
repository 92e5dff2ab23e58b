//! Slowloris on request bodies: a client that trickles a body and never finishes it. The
//! apiserver bounds a non-long-running request with `--request-timeout` (its timeout filter
//! answers 504 and the seat is released); so does the proxy, for HTTP/1.1 and HTTP/2, and the
//! seat comes back.

use bytes::Bytes;
use http::Version;

use crate::support::app::{within, AppBuilder};
use crate::support::fake_apiserver::FakeApiserver;
use crate::support::{channel_body, TestBody};
use crate::LEVELS;

#[tokio::test]
async fn a_body_that_never_ends_gets_504_at_the_request_timeout_and_frees_its_seat() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .config(LEVELS)
        .flag("--request-timeout=2s")
        .start()
        .await;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let dispatched = app.level("tiny").counters.dispatched;
        let (sender, body) = channel_body();
        // One byte every 100 ms for as long as the connection takes them.
        let feeder = tokio::spawn(async move {
            while sender.send(Bytes::from_static(b" ")).await.is_ok() {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        });
        let post = http::Request::builder()
            .method("POST")
            .uri("/api/v1/namespaces/ns/pods")
            .header("content-type", "application/json")
            .body(body)
            .expect("request");
        let mut conn = app.client_with(None, version).connect().await;
        // `within` allows 5 s; the request timeout is 2 s.
        let response = within("504 after --request-timeout", conn.send_unbounded(post)).await;
        assert_eq!(response.status(), 504, "{version:?}");
        app.wait_level("tiny", "the trickler's seat is released", |l| {
            l.executing == 0 && l.seats_in_use == 0
        })
        .await;
        assert_eq!(app.level("tiny").counters.dispatched, dispatched + 1);
        drop(conn);
        within("the feeder sees the stream end", feeder)
            .await
            .expect("feeder");
        // The proxy still serves.
        let ok = app
            .client()
            .get("/api/v1/namespaces/ns/pods/web", None)
            .await;
        assert_eq!(ok.status(), 200);
    }
}

/// `method path` with a declared `Content-Length` of `length` and a body that never comes: the
/// answer must not need it.
fn declared(method: &str, path: &str, length: u64) -> http::Request<TestBody> {
    let (sender, body) = channel_body();
    // Keep the body open for the life of the request without sending anything.
    std::mem::forget(sender);
    http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header("content-length", length.to_string())
        .body(body)
        .expect("request")
}

#[tokio::test]
async fn a_declared_body_over_max_request_bytes_gets_413_before_taking_a_seat() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url).config(LEVELS).start().await;
    let limit: u64 = 3 * 1024 * 1024;
    let writes = [
        ("POST", "/api/v1/namespaces/ns/pods"),
        ("PUT", "/api/v1/namespaces/ns/pods/web"),
        ("PATCH", "/api/v1/namespaces/ns/pods/web"),
        ("DELETE", "/api/v1/namespaces/ns/pods/web"),
        ("DELETE", "/api/v1/namespaces/ns/pods"),
    ];
    for version in [Version::HTTP_11, Version::HTTP_2] {
        for (method, path) in writes {
            let mut conn = app.client_with(None, version).connect().await;
            let response = conn.send(declared(method, path, limit + 1)).await;
            let status = crate::assert_status(response, 413, "RequestEntityTooLarge").await;
            assert_eq!(
                status["message"], "Request entity too large: limit is 3145728",
                "{version:?} {method} {path}"
            );
        }
    }
    let tiny = app.level("tiny");
    assert_eq!(tiny.counters.dispatched, 0, "no seat was taken: {tiny:?}");
    assert!(fake.requests().is_empty() || fake.requests().iter().all(|r| r.method == "GET"));
    // At the limit the request goes through (and reaches the upstream).
    let body = vec![b' '; usize::try_from(limit).expect("limit")];
    let post = crate::support::app::request(
        "POST",
        "/api/v1/namespaces/ns/pods",
        None,
        Bytes::from(body),
    );
    let response = app.client().send(post).await;
    assert_eq!(response.status(), 201);
}

#[tokio::test]
async fn max_request_bytes_zero_disables_the_check() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .config(LEVELS)
        .flag("--max-request-bytes=0")
        .start()
        .await;
    let big = Bytes::from(vec![b' '; 4 << 20]);
    let post = crate::support::app::request("POST", "/api/v1/namespaces/ns/pods", None, big);
    assert_eq!(app.client().send(post).await.status(), 201);
}
