use std::time::Duration;

use tokio::time::Instant;

use super::*;

fn info(verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: verb.into(),
        api_prefix: if group.is_empty() { "api" } else { "apis" }.into(),
        api_group: group.into(),
        api_version: "v1".into(),
        namespace: namespace.into(),
        resource: resource.into(),
        name: name.into(),
        ..RequestInfo::default()
    }
}

/// `info` with the options of the query string `query`.
fn with_query(info: &RequestInfo, query: Option<&str>) -> RequestInfo {
    RequestInfo {
        options: crate::request_info::RequestOptions::from_query(query.unwrap_or_default()),
        ..info.clone()
    }
}

/// `est`'s estimate of `info` with the query string `query`.
fn estimate(
    est: &WorkEstimator,
    info: &RequestInfo,
    query: Option<&str>,
    max_seats: Option<u32>,
    now: Instant,
) -> WorkEstimate {
    est.estimate(&with_query(info, query), max_seats, now)
}

fn seats(initial: u32, final_seats: u32, latency_ms: u64) -> WorkEstimate {
    WorkEstimate {
        initial_seats: initial,
        final_seats,
        additional_latency: Duration::from_millis(latency_ms),
    }
}

// === verbs ===

#[tokio::test(start_paused = true)]
async fn verbs_without_an_estimator_take_one_seat() {
    let est = WorkEstimator::default();
    let now = Instant::now();
    est.objects().set(
        "pods",
        ObjectStats {
            object_count: 100_000,
            average_object_size_bytes: 5000,
        },
        now,
    );
    for verb in [
        "get",
        "deletecollection",
        "proxy",
        "connect",
        "post",
        "put",
        "head",
    ] {
        let e = estimate(&est, &info(verb, "", "pods", "ns", ""), None, Some(15), now);
        assert_eq!(e, WorkEstimate::ONE, "{verb}");
    }
    let non_resource = RequestInfo {
        verb: "get".into(),
        path: "/healthz".into(),
        ..RequestInfo::default()
    };
    assert_eq!(
        estimate(&est, &non_resource, None, None, now),
        WorkEstimate::ONE
    );
}

// === list estimator ===

const PODS: ObjectStats = ObjectStats {
    object_count: 1000,
    average_object_size_bytes: 2000,
};

fn list_estimator(list_cost: ListCostEstimate, stats: ObjectStats, now: Instant) -> WorkEstimator {
    let est = WorkEstimator::new(WorkEstimatorConfig::with_list_cost(list_cost));
    est.objects().set("pods", stats, now);
    est
}

#[tokio::test(start_paused = true)]
async fn size_based_list_table() {
    let now = Instant::now();
    let est = list_estimator(ListCostEstimate::SizeBased, PODS, now);
    // (verb, name, query, level max seats, expected initial seats); 1000 pods of 2000 B.
    let cases: &[(&str, &str, &str, Option<u32>, u32)] = &[
        // Consistent read served by the cache: 2 MB capped at 1 MB streamed.
        ("list", "", "", None, 10),
        ("list", "", "resourceVersion=0", None, 10),
        ("list", "", "limit=100", None, 2),
        (
            "list",
            "",
            "resourceVersionMatch=NotOlderThan&resourceVersion=5",
            None,
            10,
        ),
        // Legacy exact match (limit + RV): storage, 500 × 2000 B.
        ("list", "", "limit=500&resourceVersion=123", None, 10),
        (
            "list",
            "",
            "resourceVersionMatch=Exact&resourceVersion=123",
            None,
            20,
        ),
        ("list", "", "resourceVersionMatch=Bogus", None, 20),
        // Storage with a selector: max(limited, n / 2) objects.
        (
            "list",
            "",
            "resourceVersionMatch=Exact&resourceVersion=1&limit=100&labelSelector=a%3Db",
            None,
            10,
        ),
        (
            "list",
            "",
            "resourceVersionMatch=Exact&resourceVersion=1&limit=100",
            None,
            2,
        ),
        ("list", "", "continue=abc", None, 20),
        ("list", "", "continue=abc&limit=50", None, 1),
        (
            "list",
            "p1",
            "fieldSelector=metadata.name%3Dp1&resourceVersionMatch=Exact",
            None,
            1,
        ),
        // Per-level caps.
        ("list", "", "continue=abc", Some(8), 8),
        ("list", "", "continue=abc", Some(0), 20),
        ("list", "", "continue=abc", Some(500), 20),
        // Options that do not convert: the cap.
        ("list", "", "limit=ten", None, 100),
        ("list", "", "limit=ten", Some(15), 15),
        ("list", "", "timeoutSeconds=1m", Some(15), 15),
        // Watches: cheap unless they send initial events.
        ("watch", "", "resourceVersion=123", None, 1),
        (
            "watch",
            "",
            "resourceVersion=123&sendInitialEvents=false",
            None,
            1,
        ),
        (
            "watch",
            "",
            "resourceVersion=123&sendInitialEvents=true",
            None,
            10,
        ),
        ("watch", "", "", None, 10),
        ("watch", "", "resourceVersion=0&limit=5", None, 1),
        (
            "watch",
            "",
            "resourceVersionMatch=Exact&resourceVersion=0",
            None,
            10,
        ),
    ];
    for (verb, name, query, max_seats, want) in cases {
        let e = estimate(
            &est,
            &info(verb, "", "pods", "", name),
            Some(query),
            *max_seats,
            now,
        );
        assert_eq!(e, seats(*want, 0, 0), "{verb} {query} max {max_seats:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn count_based_list_table() {
    let now = Instant::now();
    let stats = ObjectStats {
        object_count: 350,
        average_object_size_bytes: 0,
    };
    let est = list_estimator(ListCostEstimate::CountBased, stats, now);
    assert_eq!(est.config().maximum_list_seats_limit, 10);
    let cases: &[(&str, &str, &str, u32)] = &[
        // From cache: n objects.
        ("list", "", "", 4),
        ("list", "", "resourceVersion=0&limit=10", 4),
        ("watch", "", "", 4),
        // Storage, no selector: 2 × limited.
        ("list", "", "resourceVersionMatch=Exact", 7),
        ("list", "", "limit=100&resourceVersion=9", 2),
        // Storage with a selector: n + limited.
        (
            "list",
            "",
            "limit=100&resourceVersion=9&fieldSelector=a%3Db",
            5,
        ),
        ("list", "x", "limit=100&resourceVersion=9", 1),
        ("list", "", "limit=x", 10),
    ];
    for (verb, name, query, want) in cases {
        let e = estimate(
            &est,
            &info(verb, "", "pods", "", name),
            Some(query),
            None,
            now,
        );
        assert_eq!(e.initial_seats, *want, "{verb} {query}");
    }
}

#[tokio::test(start_paused = true)]
async fn unknown_resources_take_one_seat() {
    let now = Instant::now();
    let est = list_estimator(ListCostEstimate::SizeBased, PODS, now);
    for (group, resource) in [
        ("", "secrets"),
        ("metrics.k8s.io", "pods"),
        ("apps", "pods"),
    ] {
        let e = estimate(
            &est,
            &info("list", group, resource, "", ""),
            Some("resourceVersionMatch=Exact"),
            None,
            now,
        );
        assert_eq!(e, WorkEstimate::ONE, "{group}/{resource}");
    }
}

#[tokio::test(start_paused = true)]
async fn stale_counts_are_charged_as_the_worst_case() {
    let start = Instant::now();
    let est = list_estimator(ListCostEstimate::SizeBased, PODS, start);
    let pods = info("list", "", "pods", "", "");
    let exact = Some("resourceVersionMatch=Exact");
    let fresh = start + STALE_TOLERATION;
    assert_eq!(
        estimate(&est, &pods, exact, None, fresh).initial_seats,
        20,
        "3 min is not stale"
    );
    let stale = fresh + Duration::from_millis(1);
    assert_eq!(estimate(&est, &pods, exact, None, stale).initial_seats, 100);
    assert_eq!(
        estimate(&est, &pods, None, None, stale).initial_seats,
        10,
        "cache: 1 MB"
    );
    assert_eq!(
        estimate(&est, &pods, exact, Some(37), stale).initial_seats,
        37
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_object_size_is_taken_as_one_and_a_half_megabytes() {
    let now = Instant::now();
    let est = list_estimator(
        ListCostEstimate::SizeBased,
        ObjectStats {
            object_count: 3,
            average_object_size_bytes: 0,
        },
        now,
    );
    let pods = info("list", "", "pods", "", "");
    assert_eq!(
        estimate(&est, &pods, Some("resourceVersionMatch=Exact"), None, now).initial_seats,
        45
    );
    assert_eq!(estimate(&est, &pods, None, None, now).initial_seats, 10);
    est.objects().set("pods", ObjectStats::default(), now);
    assert_eq!(
        estimate(&est, &pods, Some("resourceVersionMatch=Exact"), None, now).initial_seats,
        1,
        "no objects"
    );
}

#[tokio::test(start_paused = true)]
async fn without_consistent_reads_from_cache_unversioned_lists_read_storage() {
    let now = Instant::now();
    let config = WorkEstimatorConfig {
        consistent_list_from_cache: false,
        ..WorkEstimatorConfig::default()
    };
    let est = WorkEstimator::new(config);
    est.objects().set("pods", PODS, now);
    let pods = info("list", "", "pods", "", "");
    assert_eq!(estimate(&est, &pods, None, None, now).initial_seats, 20);
    assert_eq!(
        estimate(&est, &pods, Some("resourceVersion=0"), None, now).initial_seats,
        10
    );
}

#[tokio::test(start_paused = true)]
async fn watches_take_one_seat_without_the_watch_list_gate() {
    let now = Instant::now();
    let config = WorkEstimatorConfig {
        watch_list: false,
        ..WorkEstimatorConfig::default()
    };
    let est = WorkEstimator::new(config);
    est.objects().set("pods", PODS, now);
    let e = estimate(
        &est,
        &info("watch", "", "pods", "", ""),
        Some("sendInitialEvents=true"),
        None,
        now,
    );
    assert_eq!(e, WorkEstimate::ONE);
}

#[tokio::test(start_paused = true)]
async fn group_resources_are_keyed_resource_dot_group() {
    let now = Instant::now();
    let est = WorkEstimator::default();
    est.objects().set("deployments.apps", PODS, now);
    let e = estimate(
        &est,
        &info("list", "apps", "deployments", "", ""),
        Some("continue=x"),
        None,
        now,
    );
    assert_eq!(e.initial_seats, 20);
}

// === mutating estimator ===

fn register_n(
    tracker: &WatchTracker,
    n: usize,
    watch: &RequestInfo,
    query: Option<&str>,
) -> Vec<WatchGuard> {
    (0..n)
        .map(|_| {
            tracker
                .register(&with_query(watch, query))
                .expect("a watch")
        })
        .collect()
}

#[test]
fn mutating_requests_pay_for_interested_watchers() {
    // (watchers, level max seats, expected estimate)
    let cases = [
        (0, None, WorkEstimate::ONE),
        (9, None, WorkEstimate::ONE),
        (10, None, seats(1, 1, 5)),
        (29, None, seats(1, 3, 5)),
        (199, None, seats(1, 10, 10)),
        (1000, None, seats(1, 10, 50)),
        (1000, Some(0), seats(1, 10, 50)),
        (1000, Some(50), seats(1, 10, 50)),
        // leader-election's maxSeats 4: 20 seats × 5 ms reshaped into 4 seats × 25 ms.
        (199, Some(4), seats(1, 4, 25)),
    ];
    let watch = info("watch", "", "configmaps", "", "");
    for (watchers, max_seats, want) in cases {
        let est = WorkEstimator::default();
        let _guards = register_n(est.watches(), watchers, &watch, None);
        for verb in ["create", "update", "patch", "delete"] {
            let e = estimate(
                &est,
                &info(verb, "", "configmaps", "ns", "cm"),
                None,
                max_seats,
                Instant::now(),
            );
            assert_eq!(
                e, want,
                "{verb} with {watchers} watchers, max {max_seats:?}"
            );
        }
    }
}

#[test]
fn three_watchers_times_fifteen_milliseconds_split_over_two_seats() {
    // 13 watchers → 2 final seats; a cap of 1 seat holds it for 10 ms.
    let est = WorkEstimator::default();
    let _g = register_n(
        est.watches(),
        13,
        &info("watch", "", "secrets", "", ""),
        None,
    );
    let e = estimate(
        &est,
        &info("update", "", "secrets", "ns", "s"),
        None,
        Some(1),
        Instant::now(),
    );
    assert_eq!(e, seats(1, 1, 10));
}

#[test]
fn service_account_tokens_wake_no_watchers() {
    let est = WorkEstimator::default();
    let _g = register_n(
        est.watches(),
        100,
        &info("watch", "", "serviceaccounts", "", ""),
        None,
    );
    let mut token = info("create", "", "serviceaccounts", "ns", "sa");
    token.subresource = "token".into();
    assert_eq!(
        estimate(&est, &token, None, None, Instant::now()),
        WorkEstimate::ONE
    );
    let sa = info("update", "", "serviceaccounts", "ns", "sa");
    assert_eq!(
        estimate(&est, &sa, None, None, Instant::now()),
        seats(1, 10, 5)
    );
}

#[test]
fn disabled_mutating_estimator_charges_the_minimum() {
    let config = WorkEstimatorConfig {
        mutating_enabled: false,
        minimum_seats: 2,
        ..WorkEstimatorConfig::default()
    };
    let est = WorkEstimator::new(config);
    let _g = register_n(est.watches(), 100, &info("watch", "", "pods", "", ""), None);
    let e = estimate(
        &est,
        &info("create", "", "pods", "ns", ""),
        None,
        None,
        Instant::now(),
    );
    assert_eq!(e, seats(2, 0, 0));
}

mod objects;
mod watches;
