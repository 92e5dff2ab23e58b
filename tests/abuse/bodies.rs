//! Slowloris on request bodies: a client that trickles a body and never finishes it. The
//! apiserver bounds a non-long-running request with `--request-timeout` (its timeout filter
//! answers 504 and the seat is released); so does the proxy, for HTTP/1.1 and HTTP/2, and the
//! seat comes back.

use bytes::Bytes;
use futures_util::stream;
use http::Version;
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::mpsc;

use crate::support::app::{within, AppBuilder};
use crate::support::fake_apiserver::FakeApiserver;
use crate::support::{BoxError, TestBody};
use crate::LEVELS;

/// A body fed by `sender`; it ends only when the sender is dropped.
fn trickle() -> (mpsc::Sender<Bytes>, TestBody) {
    let (sender, receiver) = mpsc::channel::<Bytes>(1);
    let frames = stream::unfold(receiver, |mut receiver| async move {
        let chunk = receiver.recv().await?;
        Some((Ok::<_, BoxError>(http_body::Frame::data(chunk)), receiver))
    });
    (sender, StreamBody::new(frames).boxed_unsync())
}

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
        let (sender, body) = trickle();
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
