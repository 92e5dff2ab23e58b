//! Graceful shutdown: in-flight requests finish, the grace period bounds the drain.

use super::*;

/// A handler that signals when a request arrives and answers when released.
fn gated_handler() -> (
    Arc<dyn kube_apf_proxy::server::Handler>,
    Arc<tokio::sync::Notify>,
    Arc<tokio::sync::Notify>,
) {
    let arrived = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let (a, r) = (arrived.clone(), release.clone());
    let handler = Arc::new(move |_request: Request<Incoming>| {
        let (a, r) = (a.clone(), r.clone());
        async move {
            a.notify_one();
            r.notified().await;
            support::text("finished")
        }
    });
    (handler, arrived, release)
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_requests_and_stops_accepting() {
    for alpn in [&b"h2"[..], b"http/1.1"] {
        let (handler, arrived, release) = gated_handler();
        let server = start(settings(), ConnectionLimits::default(), handler, None).await;
        let options = ClientOptions {
            alpn: vec![alpn],
            ..Default::default()
        };
        let stream = connect(server.addr, &server.trust, options)
            .await
            .expect("handshake");
        let request = tokio::spawn(get(stream, "/slow"));
        arrived.notified().await;

        server.trigger.trigger();
        // The listener closes while the request is still running.
        tokio::time::timeout(PROMPTLY, async {
            while tokio::net::TcpStream::connect(server.addr).await.is_ok() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the listener closes");
        assert!(
            !server.task.is_finished(),
            "the in-flight request keeps the server draining"
        );

        release.notify_one();
        let (_, status, body) = request.await.expect("client task").expect("response");
        assert_eq!((status, body.as_str()), (StatusCode::OK, "finished"));
        tokio::time::timeout(PROMPTLY, server.task)
            .await
            .expect("serve returns once drained")
            .expect("serve task");
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_grace_period_bounds_the_drain() {
    let (handler, arrived, _release) = gated_handler();
    let server = start(settings(), ConnectionLimits::default(), handler, None).await;
    let stream = connect(server.addr, &server.trust, ClientOptions::default())
        .await
        .expect("handshake");
    let request = tokio::spawn(get(stream, "/forever"));
    arrived.notified().await;
    server.trigger.trigger();
    let triggered = tokio::time::Instant::now();
    tokio::time::timeout(PROMPTLY * 10, server.task)
        .await
        .expect("serve returns after the grace period")
        .expect("serve task");
    assert_eq!(triggered.elapsed().as_secs(), 60);
    let outcome = tokio::time::timeout(PROMPTLY, request)
        .await
        .expect("client ends");
    assert!(
        outcome.expect("client task").is_err(),
        "the unfinished request is cut off"
    );
    assert_eq!(server.stats.active(), 0);
}
