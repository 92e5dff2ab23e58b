//! Fairness against the anchor: the uniform scenarios of k8s.io/apiserver
//! `pkg/util/flowcontrol/fairqueuing/queueset/queueset_test.go`, ported as workload files
//! (`tests/fixtures/workloads/*.yaml`) over configuration directories that give the same
//! concurrency limit, queues, hand size and queue length limit
//! (`tests/fixtures/workloads/config/*`), run through `simulate --workload ... --output json`
//! as a user would. Each client's `averageSeats` is checked against the max-min fair allocation
//! of the clients' demands over the concurrency limit — computed as that file computes it — with
//! the same margins.
//!
//! What cannot be expressed as in Go, and what is done instead:
//! - The Go tests pick flow hashes that do not collide; a workload names users, and the hash
//!   comes from the FlowSchema and the user. The users in the files were picked so that their
//!   shuffle-sharding hands are disjoint, which [`hands_do_not_collide`] shows with our own
//!   classifier and dealer.
//! - The Go queue set has no wait limit; a configured server caps queue waits at 1 min however
//!   long `--request-timeout` is. `TestTooWide`'s 7-seat client waits longer than that, so some
//!   of its calls time out where Go dispatches them all: the test checks they are time-outs only.
//! - `TestNoRestraint`'s no-restraint queue set is the exempt level.
//! - `TestWindup` evaluates two halves: its first half is `windup-first-half.yaml` (the same
//!   clients, 20 s), and the second half is the 40 s run less the first half.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kube_apf_proxy::auth::Identity;
use kube_apf_proxy::server::parse_duration;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/workloads")
}

/// Mirrors `fairAlloc` in queueset_test.go: the max-min fair allocation of `capacity` to
/// `demands`.
fn fair_alloc(demands: &[f64], mut capacity: f64) -> Vec<f64> {
    let count = demands.len();
    let mut indices: Vec<usize> = (0..count).collect();
    indices.sort_by(|&i, &j| demands[i].total_cmp(&demands[j]));
    let mut alloc = vec![0.0; count];
    let mut prev_alloc = 0.0;
    let mut next = 0;
    while next < count {
        let idx = indices[next];
        let demand = demands[idx];
        if demand <= 0.0 {
            next += 1;
            continue;
        }
        let full_capacity_bite = (count - next) as f64 * (demand - prev_alloc);
        if full_capacity_bite > capacity {
            break;
        }
        prev_alloc = demand;
        alloc[idx] = demand;
        capacity -= full_capacity_bite;
        next += 1;
    }
    for &idx in &indices[next..] {
        alloc[idx] = prev_alloc + capacity / (count - next) as f64;
    }
    alloc
}

#[test]
fn fair_alloc_gives_what_the_go_tests_expect() {
    assert_eq!(fair_alloc(&[0.0, 0.0], 42.0), [0.0, 0.0]);
    assert_eq!(fair_alloc(&[47.0, 0.0], 42.0), [42.0, 0.0]);
    assert_eq!(fair_alloc(&[1.0, 47.0], 42.0), [1.0, 41.0]);
    assert_eq!(
        fair_alloc(&[3.0, 7.0, 9.0, 1.0], 14.0),
        [3.0, 5.0, 5.0, 1.0]
    );
    assert_eq!(
        fair_alloc(&[1.0, 9.0, 7.0, 3.0], 21.0),
        [1.0, 9.0, 7.0, 3.0]
    );
}

/// A workload client as the test reads it back from the file.
#[derive(Debug, Clone)]
struct FileClient {
    name: String,
    user: String,
    url: String,
    threads: f64,
    seats: f64,
    execution: f64,
    /// Negative for a negative think.
    think: f64,
}

fn seconds(v: &serde_yaml::Value) -> f64 {
    let text = v.as_str().expect("a duration string");
    match text.strip_prefix('-') {
        Some(rest) => -parse_duration(rest).expect("duration").as_secs_f64(),
        None => parse_duration(text).expect("duration").as_secs_f64(),
    }
}

fn read_clients(workload: &str) -> Vec<FileClient> {
    let text = std::fs::read_to_string(fixtures().join(workload)).expect("read workload");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
    let clients = doc["clients"].as_sequence().expect("clients");
    clients
        .iter()
        .map(|c| FileClient {
            name: c["name"].as_str().expect("name").to_string(),
            user: c["user"].as_str().expect("user").to_string(),
            url: c["url"].as_str().expect("url").to_string(),
            threads: c["threads"].as_u64().unwrap_or(1) as f64,
            seats: c["seats"].as_u64().unwrap_or(1) as f64,
            execution: seconds(&c["execution"]),
            think: c.get("think").map_or(0.0, seconds),
        })
        .collect()
}

/// Mirrors `evalTo`: each client's demand is `threads × initial seats × execution / (think +
/// execution)` (final seats and their duration are not counted; scenarios where they matter give
/// their expected averages).
fn demand(c: &FileClient) -> f64 {
    c.threads * c.seats * c.execution / (c.think + c.execution)
}

/// `simulate --workload` at server limit `concurrency_limit` (all of which goes to the level
/// under test): the JSON report.
fn simulate(config: &str, workload: &str, concurrency_limit: u32) -> serde_json::Value {
    let fixtures = fixtures();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .arg("simulate")
        .arg("--config-dir")
        .arg(fixtures.join("config").join(config))
        .arg("--workload")
        .arg(fixtures.join(workload))
        .args(["--max-requests-inflight", &concurrency_limit.to_string()])
        .args(["--max-mutating-requests-inflight", "0"])
        .args(["--request-timeout", "4h", "--output", "json"])
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{workload}: {stderr}");
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// The clients' `averageSeats`, by name.
fn averages(report: &serde_json::Value) -> BTreeMap<String, f64> {
    report["clients"]
        .as_array()
        .expect("clients")
        .iter()
        .map(|c| {
            let name = c["name"].as_str().expect("name").to_string();
            (name, c["averageSeats"].as_f64().expect("averageSeats"))
        })
        .collect()
}

/// Mirrors the check of `evalTo`: whether `got` is within `margin` (relative) of `expected`.
fn got_fair(got: f64, expected: f64, margin: f64) -> bool {
    if expected > 0.0 {
        ((got - expected) / expected).abs() <= margin
    } else {
        got.abs() <= margin
    }
}

/// What a scenario expects of the calls besides the averages (`expectAllRequests`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Calls {
    AllDispatched,
    /// Some time out (the 1-min wait cap); nothing is rejected for another reason.
    OnlyTimeOuts,
    SomeRejected,
}

#[derive(Debug, Clone)]
struct Scenario {
    name: &'static str,
    workload: String,
    config: &'static str,
    concurrency_limit: u32,
    margin: f64,
    expect_fair: bool,
    /// `expectedAverages`: replaces the fair allocation.
    expected: Option<Vec<f64>>,
    calls: Calls,
}

impl Scenario {
    fn new(name: &'static str, workload: &str, config: &'static str, cl: u32) -> Self {
        Scenario {
            name,
            workload: workload.to_string(),
            config,
            concurrency_limit: cl,
            margin: 0.0,
            expect_fair: true,
            expected: None,
            calls: Calls::AllDispatched,
        }
    }

    fn margin(mut self, margin: f64) -> Self {
        self.margin = margin;
        self
    }

    fn unfair(mut self) -> Self {
        self.expect_fair = false;
        self
    }

    fn calls(mut self, calls: Calls) -> Self {
        self.calls = calls;
        self
    }

    /// Runs it; one line per way it fails.
    fn check(&self) -> Vec<String> {
        let clients = read_clients(&self.workload);
        let demands: Vec<f64> = clients.iter().map(demand).collect();
        let fair = self
            .expected
            .clone()
            .unwrap_or_else(|| fair_alloc(&demands, f64::from(self.concurrency_limit)));
        let report = simulate(self.config, &self.workload, self.concurrency_limit);
        let mut failures = Vec::new();
        let got = averages(&report);
        for (client, expected) in clients.iter().zip(&fair) {
            let average = got[&client.name];
            if got_fair(average, *expected, self.margin) != self.expect_fair {
                failures.push(format!(
                    "{} {}: averageSeats {average} against {expected} (margin {}, expected {})",
                    self.name,
                    client.name,
                    self.margin,
                    if self.expect_fair { "fair" } else { "unfair" }
                ));
            }
        }
        failures.extend(self.check_level(&report));
        failures
    }

    /// The level has the concurrency limit the scenario needs, and the calls went as expected.
    fn check_level(&self, report: &serde_json::Value) -> Vec<String> {
        let mut failures = Vec::new();
        let clients = report["clients"].as_array().expect("clients");
        let level = clients[0]["priorityLevel"].as_str().expect("priorityLevel");
        let levels = report["priorityLevels"].as_array().expect("levels");
        let level = levels
            .iter()
            .find(|l| l["name"] == level)
            .expect("the clients' level");
        if !level["exempt"].as_bool().expect("exempt")
            && level["nominalLimit"] != self.concurrency_limit
        {
            failures.push(format!(
                "{}: nominal limit {} instead of {}",
                self.name, level["nominalLimit"], self.concurrency_limit
            ));
        }
        let rejected = &level["rejected"];
        let count = |reason: &str| rejected[reason].as_u64().expect("count");
        let (queue_full, limit, time_out) = (
            count("queue-full"),
            count("concurrency-limit"),
            count("time-out"),
        );
        let ok = match self.calls {
            Calls::AllDispatched => queue_full + limit + time_out == 0,
            Calls::OnlyTimeOuts => queue_full + limit == 0,
            Calls::SomeRejected => queue_full + limit + time_out > 0,
        };
        if !ok {
            failures.push(format!(
                "{}: {:?} but rejected {rejected}",
                self.name, self.calls
            ));
        }
        failures
    }
}

/// (think, pad, final seats, concurrency limit, clients, expected averages) as in
/// TestSeparations.
type Separation = (
    &'static str,
    &'static str,
    u32,
    u32,
    usize,
    Option<&'static [f64]>,
);

fn separations() -> Vec<Scenario> {
    let cases: [Separation; 24] = [
        ("1s", "0s", 1, 1, 1, None),
        ("1s", "0s", 1, 2, 1, None),
        ("1s", "0s", 2, 2, 1, None),
        ("1s", "0s", 1, 1, 2, None),
        ("1s", "0s", 1, 2, 2, None),
        ("1s", "0s", 2, 2, 2, None),
        ("0s", "1s", 1, 1, 1, Some(&[0.5])),
        ("0s", "1s", 1, 2, 1, None),
        ("0s", "1s", 2, 2, 1, Some(&[0.5])),
        ("0s", "1s", 1, 1, 2, Some(&[0.25, 0.25])),
        ("0s", "1s", 1, 2, 2, Some(&[0.5, 0.5])),
        ("0s", "1s", 2, 2, 2, Some(&[0.25, 0.25])),
        ("1s", "500ms", 1, 1, 1, None),
        ("1s", "500ms", 1, 2, 1, None),
        ("1s", "500ms", 2, 2, 1, None),
        ("1s", "500ms", 1, 1, 2, Some(&[1.0 / 3.0, 1.0 / 3.0])),
        ("1s", "500ms", 1, 2, 2, None),
        ("1s", "500ms", 2, 2, 2, Some(&[1.0 / 3.0, 1.0 / 3.0])),
        ("500ms", "1s", 1, 1, 1, Some(&[0.5])),
        ("500ms", "1s", 1, 2, 1, None),
        ("500ms", "1s", 2, 2, 1, Some(&[0.5])),
        ("500ms", "1s", 1, 1, 2, Some(&[0.25, 0.25])),
        ("500ms", "1s", 1, 2, 2, Some(&[0.5, 0.5])),
        ("500ms", "1s", 2, 2, 2, Some(&[0.25, 0.25])),
    ];
    cases
        .into_iter()
        .map(|(think, pad, final_seats, cl, n, expected)| {
            let file =
                format!("separations/think-{think}-pad-{pad}-final-{final_seats}-clients-{n}.yaml");
            let mut s = Scenario::new("TestSeparations", &file, "q9-h3-l8", cl);
            s.expected = expected.map(<[f64]>::to_vec);
            s
        })
        .collect()
}

fn scenarios() -> Vec<Scenario> {
    let mut all = vec![
        Scenario::new(
            "TestNoRestraint/no-competition",
            "no-restraint.yaml",
            "exempt",
            10,
        )
        .margin(0.001),
        Scenario::new(
            "TestNoRestraint/with-competition",
            "no-restraint.yaml",
            "exempt",
            2,
        )
        .margin(0.25)
        .unfair(),
        Scenario::new("TestBaseline", "baseline.yaml", "q9-h3-l8", 1),
        Scenario::new(
            "TestUniformFlowsHandSize1",
            "uniform-flows-hand-size-1.yaml",
            "q9-h1-l8",
            4,
        )
        .margin(0.01),
        Scenario::new(
            "TestUniformFlowsHandSize3",
            "uniform-flows-hand-size-3.yaml",
            "q8-h3-l16",
            4,
        )
        .margin(0.03),
        Scenario::new(
            "TestDifferentFlowsExpectEqual",
            "different-flows-expect-equal.yaml",
            "q9-h1-l8",
            4,
        )
        .margin(0.01),
        Scenario::new(
            "TestDifferentFlowsExpectUnequal",
            "different-flows-expect-unequal.yaml",
            "q9-h1-l6",
            3,
        )
        .margin(0.01),
        Scenario::new(
            "TestDifferentWidths",
            "different-widths.yaml",
            "q64-h7-l13",
            6,
        )
        .margin(0.155),
        Scenario::new("TestTooWide", "too-wide.yaml", "q64-h7-l35", 6)
            .margin(0.35)
            .calls(Calls::OnlyTimeOuts),
        Scenario::new(
            "TestDifferentFlowsWithoutQueuing",
            "different-flows-without-queuing.yaml",
            "reject",
            4,
        )
        .margin(0.20)
        .unfair()
        .calls(Calls::SomeRejected),
    ];
    all.extend(separations());
    all
}

#[test]
fn the_apiservers_uniform_scenarios_get_their_fair_shares() {
    let failures: Vec<String> = scenarios().iter().flat_map(Scenario::check).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// TestWindup: a flow that cannot use its allocation in the first half (fair there, within
/// 0.01), then can: the second half is unfair by more than 0.1 but no more than 0.26.
#[test]
fn windup_is_fair_then_bounded_as_in_the_apiserver() {
    let first = averages(&simulate("q9-h1-l6", "windup-first-half.yaml", 3));
    let whole = averages(&simulate("q9-h1-l6", "windup.yaml", 3));
    let clients = read_clients("windup.yaml");
    // The first half: client1's second thread has not started.
    let demands = [demand(&clients[0]), demand(&clients[1])];
    let fair = fair_alloc(&demands, 3.0);
    let got = [first["client0"], first["client1"] + first["client1-late"]];
    for i in 0..2 {
        assert!(
            got_fair(got[i], fair[i], 0.01),
            "first half {got:?} {fair:?}"
        );
    }
    // The second half (20 s of 40 s): both flows run two threads.
    let second = |name: &str| 2.0 * whole[name] - first[name];
    let got = [
        second("client0"),
        second("client1") + second("client1-late"),
    ];
    let demands = [
        demand(&clients[0]),
        demand(&clients[1]) + demand(&clients[2]),
    ];
    let fair = fair_alloc(&demands, 3.0);
    for i in 0..2 {
        assert!(
            got_fair(got[i], fair[i], 0.26),
            "upper bound: {got:?} {fair:?}"
        );
    }
    assert!(
        (0..2).any(|i| !got_fair(got[i], fair[i], 0.1)),
        "lower bound: {got:?} {fair:?}"
    );
}

/// Where a Go scenario picks hash values that do not collide, the workload picks users whose
/// hands (dealt by our shuffle sharding from the flow hash of FlowSchema `clients` and the
/// user) share no queue: no two flows ever meet in a queue.
#[test]
fn hands_do_not_collide() {
    let mut files: Vec<(String, &str)> = scenarios()
        .into_iter()
        .map(|s| (s.workload, s.config))
        .collect();
    files.push(("windup.yaml".to_string(), "q9-h1-l6"));
    files.sort();
    files.dedup();
    let mut dealt = 0;
    for (workload, config) in files {
        let loaded = kube_apf_proxy::config::load_dir(&fixtures().join("config").join(config))
            .expect("configuration");
        let index = kube_apf_proxy::classify::MatchIndex::of(&loaded.config);
        let mut hands: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for c in read_clients(&workload) {
            let identity = Identity::authenticated(c.user.clone(), "", Vec::new());
            let info = kube_apf_proxy::request_info::parse("GET", &c.url).expect("URL");
            let classification = kube_apf_proxy::classify::classify(&index, &identity, &info);
            assert_eq!(classification.flow_schema.name, "clients", "{workload}");
            if let Some(hand) = classification.hand() {
                hands.insert(c.user, hand.as_slice().to_vec());
            }
        }
        let all: Vec<usize> = hands.values().flatten().copied().collect();
        let mut distinct = all.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len(), "{workload}: hands {hands:?}");
        dealt += hands.len();
    }
    assert!(dealt > 20, "most scenarios shuffle-shard: {dealt} hands");
}

/// The same workload file gives the same numbers, run after run.
#[test]
fn a_workload_is_deterministic() {
    let once = simulate("q64-h7-l13", "different-widths.yaml", 6);
    let again = simulate("q64-h7-l13", "different-widths.yaml", 6);
    assert_eq!(once, again);
}
