//! Readiness and graceful shutdown of the whole proxy.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_once_the_upstream_answers_and_not_ready_once_shutdown_starts() {
    let mut world = World::start(10, &[]).await;
    until(|| world.app().ready().is_ready()).await;
    let (status, body) = world.admin("/readyz").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    assert!(
        world.fake.requests().iter().any(|r| r.path == "/readyz"),
        "readiness asked the upstream"
    );

    let ready = world.app().ready().clone();
    let app = world.app.take().expect("app");
    let shutdown = tokio::spawn(app.shutdown());
    until(|| !ready.is_ready()).await;
    shutdown.await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_an_upstream_that_does_not_answer() {
    // Nothing listens on the upstream's port.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let world = World::start(10, &[&format!("--upstream=http://127.0.0.1:{port}")]).await;
    until(|| world.app().ready().upstream.failure_reason().is_some()).await;
    assert!(!world.app().ready().is_ready());
    let (status, _) = world.admin("/readyz").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    // The reason is named to a loopback caller: the upstream, which address, and a hint.
    let (_, verbose) = world.admin("/readyz?verbose").await;
    let want = format!(
        "[-]upstream failed: the upstream apiserver is unavailable: connecting to \
         http://127.0.0.1:{port}: tcp connect error: Connection refused (os error 111) \
         (is the upstream apiserver running and listening on 127.0.0.1:{port}?) (attempt "
    );
    assert!(verbose.contains(&want), "{verbose}");
    assert!(verbose.contains("[+]shutdown ok"), "{verbose}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_executing_and_queued_requests_and_ends_watches_cleanly() {
    let mut world = World::start(10, &["--shutdown-delay-duration=200ms"]).await;
    let app = world.app.take().expect("app");
    // `app.shutdown()` takes the app: read `tight` through its flow controller instead.
    let flow_control = Arc::clone(app.proxy().flow_control());
    let ready = app.ready().clone();
    let world = Arc::new(world);
    let tight = move || {
        let snapshot = flow_control.snapshot();
        let stats = snapshot.level("tight").expect("tight").queues().stats();
        (stats.waiting, stats.executing)
    };

    let (watch, _) = world.request("/api/v1/namespaces/ns/pods?watch=true").await;
    assert_eq!(watch.status(), StatusCode::OK);
    let events = world.fake.next_watch().await;
    events
        .send(Bytes::from_static(b"{\"type\":\"ADDED\"}\n"))
        .await
        .expect("event");
    let first = world.spawn_get("/hang");
    until(|| tight() == (0, 1)).await;
    let second = world.spawn_get("/hang");
    until(|| tight() == (1, 1)).await;

    let shutdown = tokio::spawn(app.shutdown());
    until(|| !ready.is_ready()).await;
    let (status, _) = world.admin("/readyz").await;
    assert_eq!(
        status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "draining: not ready"
    );

    // The watch ends cleanly once the listener stops accepting: all its bytes, then the end.
    let streamed = tokio::time::timeout(PROMPTLY, watch.into_body().collect())
        .await
        .expect("the watch ends")
        .expect("a clean end, not an error")
        .to_bytes();
    assert_eq!(&streamed[..], b"{\"type\":\"ADDED\"}\n");

    world.release_hanging(2).await;
    assert_eq!(first.await.expect("first").0, StatusCode::OK);
    assert_eq!(
        second.await.expect("second").0,
        StatusCode::OK,
        "the queued one too"
    );
    tokio::time::timeout(PROMPTLY, shutdown)
        .await
        .expect("shutdown completes")
        .expect("shutdown task");
    drop(events);
}
