//! Closed loops whose numbers are pinned by hand.

use super::*;
use crate::config::load::{load_sources, SourceFile};
use crate::config::parse::Format;
use crate::simulate::workload::parse_workload;

/// A level `work` of `seats` seats (at a server limit of `seats`, against catch-all's 5 shares)
/// for everyone authenticated, by user: `queues` queues (0: `Reject`).
fn config(queues: u32) -> Config {
    let response = if queues == 0 {
        "{type: Reject}".to_string()
    } else {
        format!("{{type: Queue, queuing: {{queues: {queues}, handSize: 1, queueLengthLimit: 50}}}}")
    };
    let yaml = format!(
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n\
         metadata: {{name: work}}\nspec:\n  type: Limited\n  limited:\n    \
         nominalConcurrencyShares: 95\n    lendablePercent: 0\n    borrowingLimitPercent: 0\n    \
         limitResponse: {response}\n---\n\
         apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\n\
         metadata: {{name: everyone}}\nspec:\n  priorityLevelConfiguration: {{name: work}}\n  \
         matchingPrecedence: 500\n  distinguisherMethod: {{type: ByUser}}\n  rules:\n  \
         - subjects: [{{kind: Group, group: {{name: system:authenticated}}}}]\n    \
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

fn run(yaml: &str, config: &Config, seats: u32) -> SimReport {
    let options = SimOptions {
        server_concurrency_limit: seats,
        ..SimOptions::default()
    };
    run_with(yaml, config, &options)
}

fn run_with(yaml: &str, config: &Config, options: &SimOptions) -> SimReport {
    let workload = parse_workload(yaml).expect("valid workload");
    let mut reports = simulate_workload(&workload, &[config], options).expect("runs");
    reports.remove(0)
}

#[test]
fn an_unhindered_client_holds_its_demand() {
    let report = run(
        "duration: 10s\nclients:\n- {name: a, user: alice, threads: 2, execution: 1s, think: 1s}\n",
        &config(4),
        4,
    );
    let level = report
        .priority_levels
        .iter()
        .find(|l| l.name == "work")
        .expect("work");
    assert_eq!(level.nominal_limit, 4);
    let a = &report.clients[0];
    assert_eq!(
        (a.priority_level.as_str(), a.flow_schema.as_str()),
        ("work", "everyone")
    );
    // Calls at 0, 2, 4, 6, 8 s on each thread, each holding one seat for 1 s.
    assert_eq!((a.calls, a.dispatched, a.rejected), (10, 10, 0));
    assert!((a.average_seats - 1.0).abs() < 1e-9, "{a:?}");
    assert_eq!(a.wait_seconds.max, 0.0);
    assert_eq!(level.arrivals, 10);
}

#[test]
fn two_users_on_one_seat_take_turns_and_wait() {
    let report = run(
        "duration: 10s\nclients:\n- {name: a, user: alice, execution: 1s}\n\
         - {name: b, user: bob, execution: 1s}\n",
        &config(2),
        1,
    );
    let (a, b) = (&report.clients[0], &report.clients[1]);
    assert!((a.average_seats - 0.5).abs() < 1e-6, "{a:?}");
    assert!((b.average_seats - 0.5).abs() < 1e-6, "{b:?}");
    // Each call waits the other's execution (b's first only 1 s less 20 ns).
    assert!(b.wait_seconds.p50 > 0.9, "{b:?}");
    assert_eq!(
        a.calls + b.calls,
        10 + 1,
        "one call left waiting at the end"
    );
}

#[test]
fn a_rejected_thread_waits_the_retry_after_before_calling_again() {
    let report = run(
        "duration: 4s\nclients:\n- {name: a, user: alice, threads: 2, execution: 3s}\n",
        &config(0),
        1,
    );
    let a = &report.clients[0];
    // Thread 0 holds the seat 0–3 s and again from 3 s (its next call goes out at its reply);
    // thread 1 is refused at 90 ns, then 1 s, 2 s and 3 s later (+ 90 ns), and stops at the end.
    assert_eq!((a.calls, a.dispatched, a.rejected), (6, 2, 4), "{a:?}");
    assert!((a.average_seats - 1.0).abs() < 1e-6, "{a:?}");
}

#[test]
fn final_seats_linger_after_the_reply() {
    let report = run(
        "duration: 24s\nclients:\n- {name: a, user: alice, execution: 1s, \
         finalSeats: 1, finalDuration: 1s}\n",
        &config(1),
        1,
    );
    // The next call goes out at the reply and waits for the lingering seat: 1 s in every 2.
    let a = &report.clients[0];
    assert!((a.average_seats - 0.5).abs() < 1e-9, "{a:?}");
    // Calls at 0, 2, ..., 22 s, and the one made at 23 s, dispatched at the end (24 s).
    assert_eq!((a.calls, a.dispatched), (13, 13), "{a:?}");
}

#[test]
fn the_same_workload_gives_the_same_numbers() {
    let yaml = "duration: 30s\nclients:\n\
                - {name: a, user: alice, threads: 5, execution: 300ms, think: 7ms}\n\
                - {name: b, user: bob, threads: 3, execution: 1s, think: 250ms, seats: 2}\n";
    let config = config(4);
    assert_eq!(run(yaml, &config, 3), run(yaml, &config, 3));
}

fn run_with_timeline(yaml: &str, config: &Config, seats: u32) -> SimReport {
    let options = SimOptions {
        server_concurrency_limit: seats,
        timeline_interval: Some(Duration::from_secs(1)),
        ..SimOptions::default()
    };
    run_with(yaml, config, &options)
}

fn last_sample(report: &SimReport, level: &str) -> f64 {
    let level = report
        .priority_levels
        .iter()
        .find(|l| l.name == level)
        .expect("level");
    level.timeline.last().expect("sampled").t
}

#[test]
fn the_run_stops_at_the_end_however_far_the_next_call_or_reply() {
    // A think or an execution of 100,000 h: the replay used to follow the virtual clock to it,
    // visiting every borrowing tick (and every timeline sample) on the way.
    let report = run_with_timeline(
        "duration: 10s\nclients:\n- {name: a, user: alice, execution: 1s, think: 100000h}\n\
         - {name: b, user: bob, execution: 100000h}\n",
        &config(2),
        4,
    );
    let (a, b) = (&report.clients[0], &report.clients[1]);
    assert_eq!((a.calls, a.dispatched), (1, 1), "{a:?}");
    assert_eq!((b.calls, b.dispatched), (1, 1), "{b:?}");
    // b held its seat for the whole workload (less its 20-ns stagger), and no longer.
    assert!((b.average_seats - 1.0).abs() < 1e-6, "{b:?}");
    assert_eq!(last_sample(&report, "work"), 10.0);
}

#[test]
fn a_call_still_waiting_at_the_end_is_answered_after_it() {
    // One seat, held for 100,000 h by the first call: the second waits in its queue past the
    // end and is answered by its wait limit, not by the reply a century later.
    let report = run_with_timeline(
        "duration: 10s\nclients:\n- {name: a, user: alice, threads: 2, execution: 100000h}\n",
        &config(2),
        1,
    );
    let a = &report.clients[0];
    assert_eq!((a.calls, a.dispatched, a.rejected), (2, 1, 1), "{a:?}");
    let level = report
        .priority_levels
        .iter()
        .find(|l| l.name == "work")
        .expect("work");
    assert_eq!(level.rejected.time_out, 1, "{level:?}");
    let end = last_sample(&report, "work");
    assert!(end > 10.0 && end <= 10.0 + 65.0, "{end}");
}
