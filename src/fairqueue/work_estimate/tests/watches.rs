use super::*;

#[test]
fn interested_watchers_are_cluster_namespace_and_object_watches() {
    let tracker = WatchTracker::new();
    let _g = [
        register_n(
            &tracker,
            1,
            &info("watch", "apps", "deployments", "", ""),
            None,
        ),
        register_n(
            &tracker,
            2,
            &info("watch", "apps", "deployments", "ns", ""),
            None,
        ),
        register_n(
            &tracker,
            4,
            &info("watch", "apps", "deployments", "ns", "d"),
            None,
        ),
        register_n(
            &tracker,
            8,
            &info("watch", "apps", "deployments", "other", ""),
            None,
        ),
        register_n(
            &tracker,
            16,
            &info("watch", "", "deployments", "", ""),
            None,
        ),
    ];
    let cases = [
        ("update", "ns", "d", 7),
        ("update", "ns", "e", 3),
        ("create", "ns", "", 3),
        ("delete", "other", "d", 9),
        ("update", "", "", 1),
        ("get", "ns", "d", 0),
        ("list", "ns", "", 0),
        ("watch", "ns", "", 0),
        ("proxy", "ns", "d", 0),
    ];
    for (verb, ns, name, want) in cases {
        let got = tracker.interested_watch_count(&info(verb, "apps", "deployments", ns, name));
        assert_eq!(got, want, "{verb} {ns}/{name}");
    }
}

#[test]
fn pod_watches_indexed_by_node_are_not_counted() {
    let tracker = WatchTracker::new();
    let pods = info("watch", "", "pods", "", "");
    let queries = [
        (Some("fieldSelector=spec.nodeName%3Dnode-1"), 0),
        (Some("fieldSelector=spec.nodeName%3D%3Dnode-1"), 0),
        (Some("fieldSelector=spec.nodeName%3D"), 1),
        (Some("fieldSelector=spec.nodeName!%3Dnode-1"), 1),
        (Some("fieldSelector=status.phase%3DRunning"), 1),
        (Some("fieldSelector=spec.nodeName%3Dnode-1&limit=x"), 1),
        (None, 1),
    ];
    let update = info("update", "", "pods", "ns", "p");
    for (query, counted) in queries {
        let guard = tracker
            .register(&with_query(&pods, query))
            .expect("a watch");
        assert_eq!(
            tracker.interested_watch_count(&update),
            counted,
            "{query:?}"
        );
        drop(guard);
        assert_eq!(tracker.interested_watch_count(&update), 0);
    }
    // Other resources have no index: a nodeName selector is just a selector.
    let other = info("watch", "", "events", "", "");
    let _g = tracker.register(&with_query(&other, Some("fieldSelector=spec.nodeName%3Dn")));
    assert_eq!(
        tracker.interested_watch_count(&info("create", "", "events", "ns", "")),
        1
    );
}

#[test]
fn dropping_guards_forgets_watches_and_their_identifiers() {
    let tracker = WatchTracker::new();
    let watch = info("watch", "", "configmaps", "ns", "");
    let guards = register_n(&tracker, 3, &watch, None);
    let clone = tracker.clone();
    assert_eq!(
        clone.interested_watch_count(&info("create", "", "configmaps", "ns", "")),
        3
    );
    drop(guards);
    assert_eq!(
        tracker.interested_watch_count(&info("create", "", "configmaps", "ns", "")),
        0
    );
    assert_eq!(tracker.tracked_identifiers(), 0);
}

#[test]
fn only_watches_are_registered() {
    let tracker = WatchTracker::new();
    assert!(tracker
        .register(&info("list", "", "pods", "", ""))
        .is_none());
    assert_eq!(tracker.tracked_identifiers(), 0);
}
