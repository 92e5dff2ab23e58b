//! `/metrics` after traffic: the APF families, the endpoint counters, the proxy's own.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_account_for_dispatch_queueing_rejection_and_execution() {
    let world = Arc::new(World::start(1, &[]).await);
    let first = world.spawn_get("/hang");
    world.until_tight(0, 1).await;
    let second = world.spawn_get("/hang");
    world.until_tight(1, 1).await;
    // The one queue holds one request: the third is refused at once.
    let (third, _) = world.request("/hang").await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);

    let (status, text) = world.admin("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    let tight = [("priority_level", "tight"), ("flow_schema", "tight-fs")];
    let value = |name: &str, extra: &[(&str, &str)]| {
        let labels: Vec<(&str, &str)> = tight.iter().chain(extra).copied().collect();
        sample(&text, name, &labels)
    };
    let fc = "apiserver_flowcontrol_";
    assert_eq!(
        value(&format!("{fc}current_inqueue_requests"), &[]),
        Some(1.0)
    );
    assert_eq!(value(&format!("{fc}current_inqueue_seats"), &[]), Some(1.0));
    assert_eq!(
        value(&format!("{fc}current_executing_requests"), &[]),
        Some(1.0)
    );
    assert_eq!(
        value(&format!("{fc}current_executing_seats"), &[]),
        Some(1.0)
    );
    assert_eq!(
        value(&format!("{fc}dispatched_requests_total"), &[]),
        Some(1.0)
    );
    let queue_full = [("reason", "queue-full")];
    assert_eq!(
        value(&format!("{fc}rejected_requests_total"), &queue_full),
        Some(1.0)
    );
    let waited_rejected = [("execute", "false")];
    let wait_count = format!("{fc}request_wait_duration_seconds_count");
    assert_eq!(value(&wait_count, &waited_rejected), Some(1.0));
    let queue_length = format!("{fc}request_queue_length_after_enqueue_count");
    assert_eq!(value(&queue_length, &[]), Some(1.0));
    let seats = format!("{fc}work_estimated_seats_count");
    assert_eq!(value(&seats, &[]), Some(3.0));
    for (family, expected) in [("nominal", 1.0), ("lower", 1.0), ("current", 1.0)] {
        let name = format!("{fc}{family}_limit_seats");
        assert_eq!(sample(&text, &name, &tight[..1]), Some(expected), "{name}");
    }
    let dropped = [("request_kind", "readOnly")];
    assert_eq!(
        sample(&text, "apiserver_dropped_requests_total", &dropped),
        Some(1.0)
    );
    let terminated = [("request_kind", "readOnly"), ("code", "429")];
    let terminations = "apiserver_request_terminations_total";
    assert_eq!(sample(&text, terminations, &terminated), Some(1.0));
    assert_eq!(
        sample(&text, "apf_proxy_requests_total", &[("code", "429")]),
        Some(1.0)
    );
    // The listener's and the authenticator's counters are registered.
    let accepted = sample(&text, "apf_proxy_connections_accepted_total", &[]);
    assert!(accepted.is_some_and(|n| n >= 3.0), "{text}");
    // Every connection so far completed its handshake, with TLS 1.3 and a protocol by ALPN.
    let handshakes: f64 = ["h2", "http/1.1", "none"]
        .iter()
        .map(|protocol| {
            let labels = [("protocol", *protocol), ("tls_version", "1.3")];
            sample(&text, "apf_proxy_tls_handshakes_total", &labels).expect("every series listed")
        })
        .sum();
    assert_eq!(Some(handshakes), accepted, "{text}");
    assert!(text.contains("apf_proxy_authentications_total{"), "{text}");

    world.release_hanging(2).await;
    let (first, second) = (first.await.expect("first"), second.await.expect("second"));
    assert_eq!((first.0, second.0), (StatusCode::OK, StatusCode::OK));
    world.until_tight(0, 0).await;

    let (_, text) = world.admin("/metrics").await;
    let value = |name: &str, extra: &[(&str, &str)]| {
        let labels: Vec<(&str, &str)> = tight.iter().chain(extra).copied().collect();
        sample(&text, name, &labels)
    };
    assert_eq!(
        value(&format!("{fc}current_inqueue_requests"), &[]),
        Some(0.0)
    );
    assert_eq!(
        value(&format!("{fc}current_executing_requests"), &[]),
        Some(0.0)
    );
    assert_eq!(
        value(&format!("{fc}current_executing_seats"), &[]),
        Some(0.0)
    );
    assert_eq!(
        value(&format!("{fc}dispatched_requests_total"), &[]),
        Some(2.0)
    );
    assert_eq!(value(&wait_count, &[("execute", "true")]), Some(2.0));
    let executions = format!("{fc}request_execution_seconds_count");
    assert_eq!(value(&executions, &[("type", "regular")]), Some(2.0));
    // The queue set's own readings: R now and at the last dispatch from a queue, and the S
    // values of that dispatch (the second request waited in the level's one queue).
    let level = [("priority_level", "tight")];
    let reading = |name: &str, extra: &[(&str, &str)]| {
        let labels: Vec<(&str, &str)> = level.iter().chain(extra).copied().collect();
        sample(&text, &format!("{fc}{name}"), &labels)
    };
    let current_r = reading("current_r", &[]).expect("current_r of a queuing level");
    let dispatch_r = reading("dispatch_r", &[]).expect("dispatch_r after a dispatch");
    assert!(dispatch_r > 0.0 && dispatch_r <= current_r, "{text}");
    let latest_s = reading("latest_s", &[]).expect("latest_s");
    let s_min = reading("next_s_bounds", &[("bound", "min")]).expect("min");
    let s_max = reading("next_s_bounds", &[("bound", "max")]).expect("max");
    assert!(s_min <= latest_s && latest_s <= s_max, "{text}");
    for bound in ["min", "max"] {
        let discounted = reading("next_discounted_s_bounds", &[("bound", bound)]);
        assert!(discounted.is_some_and(|d| d <= s_max), "{text}");
    }
    // Exempt levels have no queue set, so no R.
    let exempt = [("priority_level", "exempt")];
    assert_eq!(sample(&text, &format!("{fc}current_r"), &exempt), None);
    assert_eq!(
        sample(&text, "apf_proxy_requests_total", &[("code", "200")]),
        Some(2.0)
    );
    let upstream = "apf_proxy_upstream_requests_total";
    assert!(
        sample(&text, upstream, &[("code", "2xx")]).is_some_and(|n| n >= 2.0),
        "{text}"
    );
    // The timing-ratio histograms have members for the level that saw traffic.
    for (family, labels) in [
        (
            "priority_level_request_utilization",
            &[("phase", "waiting")][..],
        ),
        (
            "priority_level_request_utilization",
            &[("phase", "executing")][..],
        ),
        ("priority_level_seat_utilization", &[][..]),
        ("demand_seats", &[][..]),
    ] {
        let name = format!("{fc}{family}_count");
        let labels: Vec<_> = labels.iter().copied().chain([tight[0]]).collect();
        assert!(sample(&text, &name, &labels).is_some(), "{name} {labels:?}");
    }
    let read_vs_write = format!("{fc}read_vs_write_current_requests_count");
    let executing_reads = [("phase", "executing"), ("request_kind", "readOnly")];
    assert!(sample(&text, &read_vs_write, &executing_reads).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_executes_until_initialised_and_counts_as_type_watch() {
    let world = Arc::new(World::start(10, &[]).await);
    let (response, _) = world.request("/api/v1/namespaces/ns/pods?watch=true").await;
    assert_eq!(response.status(), StatusCode::OK);
    // The stream is open, its seat already back.
    world.until_tight(0, 0).await;
    let (_, text) = world.admin("/metrics").await;
    let tight = [("priority_level", "tight"), ("flow_schema", "tight-fs")];
    let labels: Vec<_> = tight.iter().copied().chain([("type", "watch")]).collect();
    let executions = "apiserver_flowcontrol_request_execution_seconds_count";
    assert_eq!(sample(&text, executions, &labels), Some(1.0));
    let executing = "apiserver_flowcontrol_current_executing_requests";
    assert_eq!(sample(&text, executing, &tight), Some(0.0));
    drop(response);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_leaving_its_queue_counts_as_a_time_out_rejection() {
    let world = Arc::new(World::start(10, &[]).await);
    let first = world.spawn_get("/hang");
    world.until_tight(0, 1).await;
    let second = world.spawn_get("/hang");
    world.until_tight(1, 1).await;
    second.abort();
    world.until_tight(0, 1).await;
    let (_, text) = world.admin("/metrics").await;
    let labels = [
        ("priority_level", "tight"),
        ("flow_schema", "tight-fs"),
        ("reason", "time-out"),
    ];
    let rejected = "apiserver_flowcontrol_rejected_requests_total";
    assert_eq!(sample(&text, rejected, &labels), Some(1.0));
    let inqueue = "apiserver_flowcontrol_current_inqueue_requests";
    assert_eq!(sample(&text, inqueue, &labels[..2]), Some(0.0));
    world.release_hanging(1).await;
    assert_eq!(first.await.expect("first").0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_request_samples_the_watches_it_will_notify() {
    let world = Arc::new(World::start(10, &[]).await);
    let (watch, _) = world.request("/api/v1/namespaces/ns/pods?watch=true").await;
    assert_eq!(watch.status(), StatusCode::OK);
    let (created, _) = tls_send(
        world.secure,
        &world.ca,
        http::Method::POST,
        "/api/v1/namespaces/ns/pods",
        None,
    )
    .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let (_, text) = world.admin("/metrics").await;
    let tight = [("priority_level", "tight"), ("flow_schema", "tight-fs")];
    let samples = "apiserver_flowcontrol_watch_count_samples";
    assert_eq!(
        sample(&text, &format!("{samples}_count"), &tight),
        Some(1.0)
    );
    assert_eq!(sample(&text, &format!("{samples}_sum"), &tight), Some(1.0));
    drop(watch);
}
