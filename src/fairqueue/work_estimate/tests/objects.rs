use std::time::Duration;

use tokio::time::Instant;

use super::*;

#[tokio::test(start_paused = true)]
async fn object_counts_go_stale_then_get_pruned() {
    let start = Instant::now();
    let tracker = ObjectCountTracker::new();
    assert_eq!(tracker.get("pods", start), Err(ObjectCountError::NotFound));
    tracker.set("pods", PODS, start);
    assert_eq!(tracker.get("pods", start + STALE_TOLERATION), Ok(PODS));
    let later = start + STALE_TOLERATION + Duration::from_secs(1);
    assert_eq!(tracker.get("pods", later), Err(ObjectCountError::Stale));
    tracker.prune(start + PRUNE_INTERVAL - Duration::from_secs(1));
    assert_eq!(tracker.len(), 1);
    tracker.prune(start + PRUNE_INTERVAL);
    assert!(tracker.is_empty());
    assert_eq!(tracker.get("pods", later), Err(ObjectCountError::NotFound));
}

#[tokio::test(start_paused = true)]
async fn counts_are_found_by_group_and_resource_as_by_their_key() {
    let now = Instant::now();
    let tracker = ObjectCountTracker::new();
    let long_group = format!("{}.example.com", "g".repeat(200));
    for (group, resource) in [
        ("", "pods"),
        ("apps", "deployments"),
        (&long_group[..], "widgets"),
    ] {
        assert_eq!(
            tracker.get_resource(group, resource, now),
            Err(ObjectCountError::NotFound)
        );
        tracker.set(&resource_key(group, resource), PODS, now);
        assert_eq!(
            tracker.get_resource(group, resource, now),
            Ok(PODS),
            "{group}"
        );
    }
    assert_eq!(
        tracker.get_resource("apps", "pods", now),
        Err(ObjectCountError::NotFound),
        "pods.apps is not pods"
    );
}

#[tokio::test(start_paused = true)]
async fn list_responses_teach_counts_and_sizes() {
    let now = Instant::now();
    let tracker = ObjectCountTracker::new();
    tracker.observe_list_bytes("pods", 10, 50_000);
    assert!(tracker.is_empty(), "sizes alone do not track a resource");
    tracker.observe_list("pods", 500, Some(1234), now);
    tracker.observe_list_bytes("pods", 500, 1_000_000);
    tracker.observe_list_bytes("pods", 0, 1_000);
    let want = ObjectStats {
        object_count: 1734,
        average_object_size_bytes: 2000,
    };
    assert_eq!(tracker.get("pods", now), Ok(want));
    tracker.observe_list("pods", 7, None, now);
    assert_eq!(
        tracker.get("pods", now),
        Ok(ObjectStats {
            object_count: 7,
            ..want
        })
    );
}

#[tokio::test(start_paused = true)]
async fn metrics_scrapes_set_counts_and_average_sizes() {
    let start = Instant::now();
    let tracker = ObjectCountTracker::new();
    let scrape = "apiserver_storage_objects{resource=\"pods\"} 1234\n\
        apiserver_resource_objects{group=\"apps\",resource=\"deployments\"} 10\n\
        apiserver_resource_size_estimate_bytes{group=\"apps\",resource=\"deployments\"} 25000\n\
        apiserver_resource_objects{group=\"\",resource=\"secrets\"} 4\n\
        apiserver_resource_size_estimate_bytes{group=\"\",resource=\"secrets\"} -1\n\
        apiserver_resource_objects{group=\"\",resource=\"events\"} -1\n";
    assert_eq!(tracker.apply_metrics(scrape, start), 3);
    let get = |key: &str, at| tracker.get(key, at);
    assert_eq!(
        get("pods", start),
        Ok(ObjectStats {
            object_count: 1234,
            average_object_size_bytes: 0
        })
    );
    assert_eq!(
        get("deployments.apps", start),
        Ok(ObjectStats {
            object_count: 10,
            average_object_size_bytes: 2500
        })
    );
    assert_eq!(
        get("secrets", start),
        Ok(ObjectStats {
            object_count: 4,
            average_object_size_bytes: 0
        })
    );
    assert_eq!(get("events", start), Err(ObjectCountError::NotFound));

    // A failed poll upstream (−1) does not refresh the entry, which then goes stale.
    let later = start + Duration::from_secs(120);
    tracker.apply_metrics(
        "apiserver_resource_objects{group=\"apps\",resource=\"deployments\"} -1\n\
        apiserver_storage_objects{resource=\"pods\"} 1300\n",
        later,
    );
    let stale_for_first = start + STALE_TOLERATION + Duration::from_secs(1);
    assert_eq!(
        get("deployments.apps", stale_for_first),
        Err(ObjectCountError::Stale)
    );
    assert_eq!(
        get("pods", stale_for_first).map(|s| s.object_count),
        Ok(1300)
    );

    // Without a size family the size learnt from list responses is kept.
    tracker.observe_list_bytes("pods", 100, 300_000);
    tracker.apply_metrics("apiserver_storage_objects{resource=\"pods\"} 1400\n", later);
    assert_eq!(
        get("pods", later),
        Ok(ObjectStats {
            object_count: 1400,
            average_object_size_bytes: 3000
        })
    );
}

#[test]
fn full_list_requests_table() {
    let mut sub = info("list", "", "pods", "", "");
    sub.subresource = "status".into();
    let non_resource = RequestInfo {
        verb: "list".into(),
        ..RequestInfo::default()
    };
    let cases = [
        (info("list", "", "pods", "", ""), None, true),
        (
            info("list", "", "pods", "", ""),
            Some("limit=500&resourceVersion=0"),
            true,
        ),
        (info("list", "apps", "deployments", "", ""), Some(""), true),
        (info("list", "", "pods", "ns", ""), None, false),
        (info("list", "", "pods", "", "p"), None, false),
        (info("watch", "", "pods", "", ""), None, false),
        (
            info("list", "", "pods", "", ""),
            Some("labelSelector=a"),
            false,
        ),
        (
            info("list", "", "pods", "", ""),
            Some("fieldSelector=a%3Db"),
            false,
        ),
        (
            info("list", "", "pods", "", ""),
            Some("continue=tok"),
            false,
        ),
        (info("list", "", "pods", "", ""), Some("limit=x"), false),
        (sub, None, false),
        (non_resource, None, false),
    ];
    for (i, (req, query, want)) in cases.iter().enumerate() {
        assert_eq!(
            list_counts_all_objects(&with_query(req, *query)),
            *want,
            "case {i}: {query:?}"
        );
    }
}
