use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;
use crate::body::BoxError;
use crate::fairqueue::controller::FlowControl;
use crate::server::shutdown_channel;

/// A body fed frame by frame through a channel.
fn channel_body() -> (mpsc::Sender<Bytes>, crate::body::ProxyBody) {
    let (tx, mut rx) = mpsc::channel::<Bytes>(4);
    let stream = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok::<_, BoxError>(Frame::data(b))))
    });
    (tx, StreamBody::new(stream).boxed_unsync())
}

#[tokio::test(start_paused = true)]
async fn a_drainable_body_passes_frames_then_ends_cleanly_when_drained() {
    let (tx, inner) = channel_body();
    let (trigger, signal) = shutdown_channel();
    let mut body = DrainableBody::wrap(inner, signal);
    tx.send(Bytes::from_static(b"event")).await.expect("send");
    let frame = body.frame().await.expect("a frame").expect("data");
    assert_eq!(frame.into_data().ok(), Some(Bytes::from_static(b"event")));
    trigger.trigger();
    assert!(
        body.frame().await.is_none(),
        "the stream ends, without an error"
    );
    assert!(body.is_end_stream());
    // The upstream side sees its receiver go away.
    tx.closed().await;
}

#[tokio::test(start_paused = true)]
async fn a_drainable_body_waits_while_not_drained() {
    let (_tx, inner) = channel_body();
    let (_trigger, signal) = shutdown_channel();
    let mut body = DrainableBody::wrap(inner, signal);
    let waited = tokio::time::timeout(Duration::from_secs(3600), body.frame()).await;
    assert!(waited.is_err(), "an idle watch stays open");
}

#[tokio::test(start_paused = true)]
async fn admin_paths_dump_every_level_and_refuse_unknown_paths() {
    let config = crate::config::bootstrap();
    let (fc, problems) = FlowControl::new(&config, 600, Instant::now()).expect("flow control");
    assert!(problems.is_empty());
    let metrics = crate::metrics::Metrics::new();
    let paths = AdminPaths::new(Arc::clone(&metrics), Arc::new(fc));

    let levels = paths.answer(&format!("{DEBUG_PREFIX}dump_priority_levels"), None);
    assert_eq!(levels.status(), http::StatusCode::OK);
    let text = levels.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8_lossy(&text);
    let names: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap_or(""))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "sorted by name");
    assert_eq!(names.len(), config.priority_levels().count());

    let metrics_page = paths.answer("/metrics", None);
    let content_type = metrics_page.headers().get(http::header::CONTENT_TYPE);
    assert_eq!(
        content_type.and_then(|v| v.to_str().ok()),
        Some(crate::metrics::Metrics::content_type())
    );
    for unknown in [
        "/",
        "/debug/api_priority_and_fairness/dump_all",
        "/debug/pprof",
    ] {
        assert_eq!(
            paths.answer(unknown, None).status(),
            http::StatusCode::NOT_FOUND
        );
    }
}

#[tokio::test(start_paused = true)]
async fn admin_explain_describes_a_request_against_the_live_configuration() {
    let config = crate::config::bootstrap();
    let (fc, _) = FlowControl::new(&config, 600, Instant::now()).expect("flow control");
    let paths = AdminPaths::new(crate::metrics::Metrics::new(), Arc::new(fc));
    let query =
        "url=%2Fapi%2Fv1%2Fnamespaces%2Fns%2Fpods&user=system%3Anode%3An1&group=system%3Anodes";
    let response = paths.answer(&format!("{DEBUG_PREFIX}explain"), Some(query));
    assert_eq!(response.status(), http::StatusCode::OK);
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(v["flowSchema"], "system-nodes");
    assert_eq!(v["flowSchemas"][0]["name"], "exempt");
    for bad in ["user=alice", "url=/x&color=red"] {
        let response = paths.answer(&format!("{DEBUG_PREFIX}explain"), Some(bad));
        assert_eq!(response.status(), http::StatusCode::BAD_REQUEST, "{bad}");
    }
}
