//! Deterministic replays whose numbers are pinned by hand from the APF semantics.

use std::time::Duration;

use super::*;
use crate::auth::Identity;
use crate::config::load::{load_sources, SourceFile};
use crate::config::parse::Format;
use crate::simulate::report::{LevelReport, Rejected, SchemaReport};

/// One queuing level `work` (one queue, `queue_length_limit` long) for user alice. At a server
/// limit of 6 it gets 6 seats (shares 100 against catch-all's 5; exempt has none).
fn config(queue_length_limit: u32) -> Config {
    let yaml = format!(
        "---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n\
         metadata: {{name: work}}\nspec:\n  type: Limited\n  limited:\n    \
         nominalConcurrencyShares: 100\n    limitResponse:\n      type: Queue\n      \
         queuing: {{queues: 1, handSize: 1, queueLengthLimit: {queue_length_limit}}}\n\
         ---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\n\
         metadata: {{name: alice}}\nspec:\n  priorityLevelConfiguration: {{name: work}}\n  \
         matchingPrecedence: 500\n  rules:\n  - subjects: [{{kind: User, user: {{name: alice}}}}]\n    \
         resourceRules: [{{verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*']}}]\n"
    );
    let file = SourceFile {
        name: "t.yaml".to_string(),
        bytes: yaml.into_bytes(),
        format: Format::Yaml,
    };
    match load_sources(&[file]) {
        Ok(loaded) => loaded.config,
        Err(e) => panic!("{e:?}"),
    }
}

fn options() -> SimOptions {
    SimOptions {
        server_concurrency_limit: 6,
        ..SimOptions::default()
    }
}

fn request(line: u64, at_ms: u64, duration_ms: u64, method: &str, uri: &str) -> TraceEvent {
    TraceEvent::Request(TraceRequest {
        line,
        key: line.to_string(),
        arrival: Duration::from_millis(at_ms),
        duration: Some(Duration::from_millis(duration_ms)),
        first_byte: None,
        recorded_wait: Duration::ZERO,
        method: method.parse().expect("method"),
        uri: uri.to_string(),
        identity: Identity::authenticated("alice", "", Vec::new()),
        status: None,
    })
}

/// `n` GETs of one pod at `at_ms`, each taking `duration_ms`.
fn burst(n: u64, at_ms: u64, duration_ms: u64) -> Vec<TraceEvent> {
    (1..=n)
        .map(|i| {
            request(
                i,
                at_ms,
                duration_ms,
                "GET",
                "/api/v1/namespaces/default/pods/p",
            )
        })
        .collect()
}

fn run(events: Vec<TraceEvent>, configs: &[&Config]) -> Vec<SimReport> {
    simulate(events.into_iter(), configs, &options()).expect("simulate")
}

fn level<'a>(report: &'a SimReport, name: &str) -> &'a LevelReport {
    report
        .priority_levels
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no level {name}"))
}

fn schema<'a>(report: &'a SimReport, name: &str) -> &'a SchemaReport {
    report
        .flow_schemas
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no schema {name}"))
}

#[test]
fn a_burst_fills_the_seats_then_the_queue_and_the_rest_is_rejected() {
    let config = config(5);
    let report = &run(burst(20, 0, 1000), &[&config])[0];
    let work = level(report, "work");
    assert_eq!(work.nominal_limit, 6);
    assert_eq!(work.arrivals, 20);
    // 6 seats at once, 5 queued and dispatched after 1 s, 9 find the queue full.
    assert_eq!(work.dispatched, 11);
    assert_eq!(
        work.rejected,
        Rejected {
            queue_full: 9,
            concurrency_limit: 0,
            time_out: 0
        }
    );
    assert_eq!(work.wait_seconds.p50, 0.0);
    assert!(
        (work.wait_seconds.p90 - 1.0).abs() < 0.01,
        "{:?}",
        work.wait_seconds
    );
    assert!(
        (work.wait_seconds.max - 1.0).abs() < 0.01,
        "{:?}",
        work.wait_seconds
    );
    assert_eq!(work.max_seats_in_use, 6);
    assert_eq!(work.top_flows.len(), 1);
    assert_eq!(work.top_flows[0].flow_schema, "alice");
    assert_eq!(work.top_flows[0].rejected, 9);
    let alice = schema(report, "alice");
    assert_eq!((alice.arrivals, alice.dispatched), (20, 11));
    assert_eq!(alice.rejected.total(), 9);
    assert_eq!(report.requests, 20);
    assert!(
        (report.duration_seconds - 2.0).abs() < 0.01,
        "{}",
        report.duration_seconds
    );
}

#[test]
fn queued_requests_time_out_after_a_quarter_of_the_request_timeout() {
    let config = config(5);
    // Each takes 20 s: the 5 queued ones give up after 15 s (60 s / 4).
    let report = &run(burst(20, 0, 20_000), &[&config])[0];
    let work = level(report, "work");
    assert_eq!(work.dispatched, 6);
    assert_eq!(work.rejected.queue_full, 9);
    assert_eq!(work.rejected.time_out, 5);
}

#[test]
fn the_request_timeout_in_the_query_shortens_the_wait_limit() {
    let config = config(5);
    let events = (1..=7)
        .map(|i| {
            request(
                i,
                0,
                20_000,
                "GET",
                "/api/v1/namespaces/default/pods/p?timeout=8s",
            )
        })
        .collect();
    let report = &run(events, &[&config])[0];
    // The 7th waits 8 s / 4 = 2 s, then times out (the 6 seats are held for 20 s).
    assert_eq!(level(report, "work").rejected.time_out, 1);
}

#[test]
fn two_configurations_see_the_same_requests_side_by_side() {
    let (small, large) = (config(5), config(50));
    let reports = run(burst(20, 0, 1000), &[&small, &large]);
    assert_eq!(level(&reports[0], "work").rejected.queue_full, 9);
    let candidate = level(&reports[1], "work");
    assert_eq!(candidate.rejected.total(), 0);
    assert_eq!(candidate.dispatched, 20);
    // 6 at once, then 6 after 1 s, 6 after 2 s, 2 after 3 s.
    assert!((candidate.wait_seconds.max - 3.0).abs() < 0.01);
}

#[test]
fn spread_out_requests_never_wait() {
    let config = config(5);
    let events = (1..=100)
        .map(|i| request(i, i * 100, 500, "GET", "/api/v1/namespaces/default/pods/p"))
        .collect();
    let work = level(&run(events, &[&config])[0], "work").clone();
    // 5 in flight at a time (500 ms every 100 ms) within 6 seats.
    assert_eq!((work.dispatched, work.rejected.total()), (100, 0));
    assert_eq!(work.wait_seconds.max, 0.0);
    assert_eq!(work.max_seats_in_use, 5);
}

#[test]
fn long_running_requests_other_than_watches_bypass_and_watches_hold_seats_until_initialised() {
    let config = config(5);
    let mut events = vec![request(
        1,
        0,
        600_000,
        "POST",
        "/api/v1/namespaces/default/pods/p/exec?command=sh",
    )];
    // Six watches take every seat for 1 s (their first byte), then give them back while they
    // stay open.
    for i in 2..=7 {
        let TraceEvent::Request(mut r) = request(
            i,
            0,
            600_000,
            "GET",
            "/api/v1/namespaces/default/pods?watch=true",
        ) else {
            unreachable!()
        };
        r.first_byte = Some(Duration::from_secs(1));
        events.push(TraceEvent::Request(r));
    }
    // At 0.5 s no seat is free: it waits until the watches are initialised. At 2 s all are free.
    events.push(request(
        8,
        500,
        100,
        "GET",
        "/api/v1/namespaces/default/pods/p",
    ));
    events.push(request(
        9,
        2000,
        100,
        "GET",
        "/api/v1/namespaces/default/pods/p",
    ));
    let report = &run(events, &[&config])[0];
    assert_eq!(report.bypassed, 1);
    let work = level(report, "work");
    assert_eq!(work.arrivals, 8);
    assert_eq!(work.dispatched, 8);
    assert!(
        (work.wait_seconds.max - 0.5).abs() < 0.01,
        "{:?}",
        work.wait_seconds
    );
}

#[test]
fn open_ended_watches_end_with_their_ended_event_and_late_arrivals_are_replayed_at_once() {
    let config = config(5);
    let TraceEvent::Request(mut watch) =
        request(1, 0, 0, "GET", "/api/v1/namespaces/default/pods?watch=true")
    else {
        unreachable!()
    };
    watch.duration = None;
    let events = vec![
        TraceEvent::Request(watch),
        request(2, 5000, 100, "GET", "/api/v1/namespaces/default/pods/p"),
        // Arrived before the previous one: replayed at once and counted.
        request(3, 4000, 100, "GET", "/api/v1/namespaces/default/pods/p"),
        TraceEvent::Ended {
            key: "1".to_string(),
            at: Duration::from_secs(30),
        },
    ];
    let report = &run(events, &[&config])[0];
    assert_eq!(report.late, 1);
    assert_eq!(level(report, "work").dispatched, 3);
    assert!(
        (report.duration_seconds - 30.0).abs() < 0.01,
        "{}",
        report.duration_seconds
    );
}

#[test]
fn a_timeline_samples_every_level() {
    let config = config(5);
    let options = SimOptions {
        timeline_interval: Some(Duration::from_millis(500)),
        ..options()
    };
    let report =
        &simulate(burst(20, 0, 1000).into_iter(), &[&config], &options).expect("simulate")[0];
    let work = level(report, "work");
    assert!(work.timeline.len() >= 3, "{}", work.timeline.len());
    let first = work.timeline[0];
    assert_eq!(
        (first.seats_in_use, first.waiting, first.rejected),
        (6, 5, 9)
    );
    assert_eq!(first.concurrency_limit, 6);
    let dispatched: u64 = work.timeline.iter().map(|s| s.dispatched).sum();
    assert_eq!(dispatched, 11);
}

#[test]
fn a_request_the_recording_server_rejected_executes_for_the_mean_of_its_method() {
    let config = config(5);
    let mut events = burst(6, 0, 1000);
    let TraceEvent::Request(mut rejected) =
        request(7, 0, 1, "GET", "/api/v1/namespaces/default/pods/p")
    else {
        unreachable!()
    };
    rejected.status = Some(429);
    events.push(TraceEvent::Request(rejected));
    let report = &run(events, &[&config])[0];
    let work = level(report, "work");
    // Queued behind the six, dispatched at 1 s, then held for the mean GET (1 s), not 1 ms.
    assert_eq!(work.dispatched, 7);
    assert!(
        (work.wait_seconds.max - 1.0).abs() < 0.01,
        "{:?}",
        work.wait_seconds
    );
    assert!(
        (report.duration_seconds - 2.0).abs() < 0.01,
        "{}",
        report.duration_seconds
    );
}

/// Where no task but the periodic ones is alive, the driver skips yields and moves the clock
/// itself (`Clock::quiet_at`); a watch kept open by another user, at another level, keeps a
/// task alive all along, so the same replay then takes every yield and every sleep. The level
/// both replays share must come out the same, timeline included.
#[test]
fn a_replay_moves_through_quiet_stretches_as_it_would_through_busy_ones() {
    let config = config(20);
    let options = SimOptions {
        server_concurrency_limit: 6,
        timeline_interval: Some(Duration::from_millis(50)),
        object_counts: vec![(
            "pods".to_string(),
            ObjectStats {
                object_count: 100,
                average_object_size_bytes: 0,
            },
        )],
        ..SimOptions::default()
    };
    // Sparse phases (a request every 3.1 ms, each 1–2 ms: quiet between them) alternate with
    // dense ones (every 0.3 ms, each 3–11 ms: queues build, tasks wait).
    let mut at = Duration::ZERO;
    let mut alice = Vec::new();
    for i in 0..2_000u64 {
        let dense = (i / 200) % 2 == 1;
        at += Duration::from_micros(if dense { 300 } else { 3_100 });
        let took = if dense {
            3_000 + (i * 7_919) % 8_000
        } else {
            1_000 + (i * 31) % 1_000
        };
        let TraceEvent::Request(mut r) =
            request(i + 2, 0, 0, "GET", "/api/v1/namespaces/default/pods/p")
        else {
            unreachable!()
        };
        r.arrival = at;
        r.duration = Some(Duration::from_micros(took));
        alice.push(TraceEvent::Request(r));
    }
    let TraceEvent::Request(mut watch) = request(
        1,
        0,
        0,
        "GET",
        "/api/v1/namespaces/other/configmaps?watch=true",
    ) else {
        unreachable!()
    };
    watch.identity = Identity::authenticated("bob", "", Vec::new());
    // With alice's first request: the trace starts at the same instant in both replays.
    watch.arrival = Duration::from_micros(3_100);
    watch.duration = Some(at + Duration::from_secs(1));
    let quiet = &simulate(alice.clone().into_iter(), &[&config], &options).expect("simulate")[0];
    let busy = std::iter::once(TraceEvent::Request(watch)).chain(alice);
    let busy = &simulate(busy, &[&config], &options).expect("simulate")[0];
    let watched: u64 = busy
        .priority_levels
        .iter()
        .filter(|l| l.name != "work")
        .map(|l| l.dispatched)
        .sum();
    assert_eq!(watched, 1, "the watch is admitted elsewhere and stays open");
    let (quiet, busy) = (level(quiet, "work"), level(busy, "work"));
    assert!(
        quiet.wait_seconds.max > 0.0,
        "the dense phases queue: {quiet:?}"
    );
    assert!(
        quiet.rejected.queue_full > 0,
        "and overflow: {:?}",
        quiet.rejected
    );
    assert_eq!(quiet.dispatched, busy.dispatched);
    assert_eq!(quiet.rejected, busy.rejected);
    assert_eq!(quiet.wait_seconds, busy.wait_seconds);
    assert_eq!(quiet.max_seats_in_use, busy.max_seats_in_use);
    assert!(quiet.timeline.len() > 50, "{}", quiet.timeline.len());
    assert_eq!(quiet.timeline[..], busy.timeline[..quiet.timeline.len()]);
}
