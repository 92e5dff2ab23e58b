//! Fed on a thread of its own or on the caller's: the same replay.

use std::time::Duration;

use super::super::engine::{simulate_fed, SimOptions};
use super::*;
use crate::auth::Identity;

/// A busy trace of `n` events over many batches: GETs of many pods (new targets), lists,
/// updates, a request target the apiserver refuses, and watches that end later.
fn trace(n: u64) -> Vec<TraceEvent> {
    let mut events = Vec::new();
    for i in 0..n {
        let (user, method, uri) = match i % 6 {
            0 | 1 => (
                format!("system:node:node-{}", i % 7),
                "GET",
                format!("/api/v1/namespaces/ns-{}/pods/pod-{i}", i % 5),
            ),
            2 => (
                "controller".to_string(),
                "GET",
                "/apis/apps/v1/replicasets?limit=500".to_string(),
            ),
            3 => (
                format!("user-{}", i % 3),
                "PUT",
                format!("/api/v1/namespaces/team/configmaps/cm-{}", i % 11),
            ),
            4 => (
                "bad".to_string(),
                "GET",
                "/api/v1/namespaces//pods/%zz".to_string(),
            ),
            _ => (
                "watcher".to_string(),
                "GET",
                format!("/api/v1/namespaces/ns-{}/pods?watch=true", i % 5),
            ),
        };
        let watch = i % 6 == 5;
        let arrival = Duration::from_millis(i * 3);
        events.push(TraceEvent::Request(TraceRequest {
            line: i + 1,
            key: format!("id-{i}"),
            arrival,
            duration: (!watch).then(|| Duration::from_millis(5 + (i * 7919) % 400)),
            first_byte: None,
            method: method.parse().expect("method"),
            uri,
            identity: Identity::authenticated(user, "", Vec::new()),
            status: None,
        }));
        if watch {
            events.push(TraceEvent::Ended {
                key: format!("id-{i}"),
                at: arrival + Duration::from_secs(2),
            });
        }
    }
    events.sort_by_key(|e| match e {
        TraceEvent::Request(r) => r.arrival,
        TraceEvent::Ended { at, .. } => *at,
    });
    events
}

#[test]
fn fed_on_a_thread_of_its_own_or_on_the_callers_the_replay_is_the_same() {
    let config = crate::config::bootstrap();
    for limit in [4, 40, 600] {
        let options = SimOptions {
            server_concurrency_limit: limit,
            ..SimOptions::default()
        };
        let events = trace(3_000);
        let inline = simulate_fed(
            events.clone().into_iter(),
            &[&config, &config],
            &options,
            false,
        )
        .expect("simulate");
        let ahead = simulate_fed(events.into_iter(), &[&config, &config], &options, true)
            .expect("simulate");
        assert_eq!(ahead, inline, "server limit {limit}");
        assert_eq!(inline[0].requests, 3_000);
        if limit == 4 {
            // Queues were in play: something waited or was turned away.
            let rejected: u64 = inline[0]
                .priority_levels
                .iter()
                .map(|l| l.rejected.queue_full + l.rejected.time_out)
                .sum();
            assert!(rejected > 0, "{:?}", inline[0].priority_levels);
        }
    }
}

#[test]
#[should_panic(expected = "the trace blew up")]
fn a_panic_on_the_feeding_thread_is_the_callers() {
    let config = crate::config::bootstrap();
    let events = trace(600).into_iter().enumerate().map(|(i, event)| {
        assert!(i < 400, "the trace blew up");
        event
    });
    let _ = simulate_fed(events, &[&config], &SimOptions::default(), true);
}

#[test]
fn fed_alike_holds_for_a_busy_trace_and_an_empty_one() {
    assert!(fed_alike(&trace(3_000)));
    assert!(fed_alike(&[]));
}
