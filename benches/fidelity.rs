//! How faithful `simulate` is: one overloaded workload driven through the running release proxy,
//! recorded by its JSON access log, replayed by `simulate` against the same configuration, and the
//! two compared per priority level (BENCHMARKS.md). Loopback only, bounded in time; never part of
//! `cargo test`. Run with `cargo bench --bench fidelity`.
//!
//! The workload: two levels of 4 seats each (server limit 10), open-loop Poisson arrivals from
//! several users per level against an upstream that takes `FIDELITY_SERVICE_MS` (20) per request:
//! `alpha` offered about 1.5× what it can serve (queues fill, requests time out and are refused),
//! `beta` about 0.8× (bursts queue), for `FIDELITY_SECS` (20) seconds.

#[path = "overload/common.rs"]
mod common;

use std::collections::BTreeMap;
use std::io::BufReader;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use common::*;
use kube_apf_proxy::simulate::trace::{TraceOptions, TraceReader};
use kube_apf_proxy::simulate::{simulate, SimOptions};

/// Per level: users and the total rate offered (requests per second).
const LEVELS: [(&str, usize, f64); 2] = [("alpha", 6, 300.0), ("beta", 4, 160.0)];

fn main() {
    let runtime = bench_runtime();
    runtime.block_on(run());
}

/// A small xorshift generator: the same arrivals on every run.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An exponential inter-arrival time at `rate` per second.
    fn gap(&mut self, rate: f64) -> Duration {
        Duration::from_secs_f64(-(1.0 - self.next_f64()).ln() / rate)
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Observed {
    dispatched: u64,
    rejected: u64,
    p50: f64,
    p99: f64,
}

async fn run() {
    let service = Duration::from_millis(knob("FIDELITY_SERVICE_MS", 20));
    let run_for = secs("FIDELITY_SECS", 20);
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::generate(dir.path());
    let upstream = Upstream::start_with(UpstreamOptions {
        service,
        capacity: 10_000,
        event_interval: Duration::from_secs(1),
        tls: None,
    })
    .await;
    let mut config = String::new();
    let mut users = Vec::new();
    for (name, n, _) in LEVELS {
        config += &level(name, 10, 16, 4, 20);
        config += &schema(name, name, name, 500);
        users.extend((0..n).map(|i| (format!("{name}-{i}"), name.to_string())));
    }
    let mut flags = write_setup(dir.path(), &config, &users);
    flags.extend(
        [
            "--max-requests-inflight=10",
            "--max-mutating-requests-inflight=0",
            "--log-format=json",
            "-v=1",
        ]
        .map(String::from),
    );
    let (proxy, url, admin) = start_proxy(dir.path(), &pki, upstream.addr, &flags).await;
    let client = Arc::new(https_client(&pki.client));
    // Open loop: every arrival is its own task, whatever the answers.
    let until = Instant::now() + run_for;
    let mut tasks = Vec::new();
    for (name, n, rate) in LEVELS {
        for i in 0..n {
            let (client, url) = (Arc::clone(&client), format!("{url}{POD_PATH}"));
            let token = format!("tok-{name}-{i}");
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((i as u64 + 1) * 7919) ^ name.len() as u64);
            let per_user = rate / n as f64;
            tasks.push(tokio::spawn(async move {
                let mut next = Instant::now();
                let mut requests = Vec::new();
                loop {
                    next += rng.gap(per_user);
                    if next >= until {
                        break;
                    }
                    tokio::time::sleep_until(next).await;
                    let (client, url, token) = (Arc::clone(&client), url.clone(), token.clone());
                    requests.push(tokio::spawn(
                        async move { get(&client, &url, &token).await },
                    ));
                }
                for r in requests {
                    let _ = r.await;
                }
            }));
        }
    }
    for t in tasks {
        t.await.expect("load");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = scrape(&admin).await;
    drop(proxy);
    let log = dir.path().join("proxy.log");
    let observed = observe(&text, &log);

    // The replay of the recording.
    let loaded = kube_apf_proxy::config::load_dir(&dir.path().join("flowcontrol")).expect("config");
    let reader = TraceReader::new(
        BufReader::new(std::fs::File::open(&log).expect("log")),
        TraceOptions {
            reorder_window: Duration::from_secs(65),
            strict: false,
            keep_recorded_waits: false,
        },
    );
    let options = SimOptions {
        server_concurrency_limit: 10,
        ..SimOptions::default()
    };
    let started = Instant::now();
    // `simulate` runs its own (paused) runtime: on a thread of its own, outside this one.
    let report = std::thread::spawn(move || {
        simulate(reader.filter_map(Result::ok), &[&loaded.config], &options)
            .expect("simulate")
            .remove(0)
    })
    .join()
    .expect("the replay");
    let took = started.elapsed();

    println!(
        "## Fidelity: {} s of open-loop load through the proxy, replayed by `simulate` ({} requests in {:.2} s)",
        run_for.as_secs(),
        report.requests,
        took.as_secs_f64()
    );
    println!();
    println!("| level | dispatched: proxy / simulate | rejected: proxy / simulate | wait p50 (ms): proxy / simulate | wait p99 (ms): proxy / simulate |");
    println!("|---|---|---|---|---|");
    for (name, _, _) in LEVELS {
        let o = observed.get(name).copied().unwrap_or_default();
        let s = report
            .priority_levels
            .iter()
            .find(|l| l.name == name)
            .expect("level simulated");
        let pct = |a: f64, b: f64| {
            if a == 0.0 {
                String::new()
            } else {
                format!(" ({:+.0} %)", (b - a) / a * 100.0)
            }
        };
        println!(
            "| {name} | {} / {}{} | {} / {}{} | {:.1} / {:.1}{} | {:.1} / {:.1}{} |",
            o.dispatched,
            s.dispatched,
            pct(o.dispatched as f64, s.dispatched as f64),
            o.rejected,
            s.rejected.total(),
            pct(o.rejected as f64, s.rejected.total() as f64),
            o.p50 * 1e3,
            s.wait_seconds.p50 * 1e3,
            pct(o.p50, s.wait_seconds.p50),
            o.p99 * 1e3,
            s.wait_seconds.p99 * 1e3,
            pct(o.p99, s.wait_seconds.p99),
        );
    }
}

/// The proxy's own account: dispatches and rejections from its metrics, waits of dispatched
/// requests from its access log.
fn observe(metrics: &str, log: &std::path::Path) -> BTreeMap<&'static str, Observed> {
    let mut waits: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let text = std::fs::read_to_string(log).expect("log");
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["target"] != "kube_apf_proxy::access" || v["status"] != 200 {
            continue;
        }
        let level = v["priority_level"].as_str().unwrap_or_default().to_string();
        let wait = v["queue_wait_ms"].as_f64().unwrap_or_default() / 1e3;
        waits.entry(level).or_default().push(wait);
    }
    LEVELS
        .iter()
        .map(|(name, _, _)| {
            let mut w = waits.remove(*name).unwrap_or_default();
            w.sort_by(f64::total_cmp);
            let at = |q: f64| {
                if w.is_empty() {
                    0.0
                } else {
                    w[((w.len() - 1) as f64 * q).round() as usize]
                }
            };
            let observed = Observed {
                dispatched: metric_sum(
                    metrics,
                    &format!("apiserver_flowcontrol_dispatched_requests_total{{flow_schema=\"{name}\",priority_level=\"{name}\"}}"),
                ) as u64,
                rejected: ["queue-full", "concurrency-limit", "time-out"]
                    .iter()
                    .map(|r| {
                        metric_sum(
                            metrics,
                            &format!("apiserver_flowcontrol_rejected_requests_total{{flow_schema=\"{name}\",priority_level=\"{name}\",reason=\"{r}\"}}"),
                        )
                    })
                    .sum::<f64>() as u64,
                p50: at(0.5),
                p99: at(0.99),
            };
            (*name, observed)
        })
        .collect()
}
