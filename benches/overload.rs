//! Overload, soak and fairness through the running proxy (RELIABILITY.md, BENCHMARKS.md).
//!
//! `cargo bench --bench overload -- soak` and `-- fairness` (scripts/soak.sh and
//! scripts/fairness.sh): the release proxy binary in front of an in-process fake apiserver with
//! a fixed service time, driven over HTTPS/HTTP/2 on loopback, for a bounded time (`SOAK_SECS`,
//! `FAIR_SECS`). Never part of `cargo test`.
//!
//! - soak: memory per thousand queued requests and per thousand open watches, a flood of many
//!   times a level's limit while exempt and high-priority flows keep their latency, and the
//!   accounting: every request the clients sent is answered or counted as abandoned.
//! - fairness: one heavy and several light flows in one priority level, then flows across two
//!   levels; each flow's share and latency through the proxy and through nginx, which queues
//!   nothing and so serves flows in proportion to their concurrency.

#[path = "overload/common.rs"]
mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use common::*;

fn main() {
    let mode = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let runtime = bench_runtime();
    match mode.as_str() {
        "soak" => runtime.block_on(soak()),
        "fairness" => runtime.block_on(fairness()),
        // `cargo bench` without a mode (as CI's `--no-run` build implies): nothing to do.
        _ => {
            eprintln!("overload: give `soak` or `fairness` (scripts/soak.sh, scripts/fairness.sh)")
        }
    }
}

async fn soak() {
    let flood_for = secs("SOAK_SECS", 30);
    // Knobs for a harsher flood: workers per flooding user, the low level's queue length (small
    // values make it refuse with 429), and how long a refused worker backs off.
    let per_user = knob("FLOOD_PER_USER", 6) as usize;
    let queue_length = knob("QUEUE_LENGTH", 50) as u32;
    let backoff = Duration::from_millis(knob("BACKOFF_MS", 10));
    let (queued_target, watch_target, flooders) = (3000usize, 2000usize, 100usize);
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::generate(dir.path());
    let upstream = Upstream::start(Duration::from_millis(5), 10_000).await;
    let config = [
        level("soak-low", 20, 128, 6, queue_length),
        level("soak-high", 20, 16, 4, 50),
        schema("flood", "flooders", "soak-low", 1000),
        schema("vip", "vips", "soak-high", 500),
    ]
    .concat();
    let mut users: Vec<(String, String)> = (0..flooders)
        .map(|i| (format!("flood-{i}"), "flooders".to_string()))
        .collect();
    users.push(("vip".into(), "vips".into()));
    users.push(("admin".into(), "system:masters".into()));
    let mut flags = write_setup(dir.path(), &config, &users);
    flags.push("--max-requests-inflight=40".into());
    flags.push("--max-mutating-requests-inflight=0".into());
    let (proxy, url, admin) = start_proxy(dir.path(), &pki, upstream.addr, &flags).await;
    let pod_url = format!("{url}{POD_PATH}");
    let mut sent = Outcomes::default();

    // Latency of the exempt (system:masters) and high-priority flows with nothing else going on.
    let probe = |user: &'static str, until: Instant| {
        closed_loop(
            Arc::new(https_client(&pki.client)),
            pod_url.clone(),
            format!("tok-{user}"),
            2,
            until,
            Duration::from_millis(10),
        )
    };
    let until = Instant::now() + Duration::from_secs(3);
    let ((mut admin_idle, a), (mut vip_idle, v)) =
        tokio::join!(probe("admin", until), probe("vip", until));
    sent.add(&a);
    sent.add(&v);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, base_rss) = proxy.memory_kib();

    // Thousands queued: the upstream stalls, so the level's seats stay taken and the rest waits.
    upstream.stall(true);
    let clients: Vec<_> = (0..6)
        .map(|_| Arc::new(https_client(&pki.client)))
        .collect();
    let queued: Vec<_> = (0..queued_target)
        .map(|i| {
            let client = Arc::clone(&clients[i % clients.len()]);
            let (url, token) = (pod_url.clone(), format!("tok-flood-{}", i % flooders));
            tokio::spawn(async move { get(&client, &url, &token).await })
        })
        .collect();
    let mut in_queue = 0.0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let text = scrape(&admin).await;
        in_queue = metric_sum(&text, "apiserver_flowcontrol_current_inqueue_requests{");
        let executing = metric_sum(&text, "apiserver_flowcontrol_current_executing_requests{");
        if in_queue + executing >= queued_target as f64 {
            break;
        }
    }
    let (_, queued_rss) = proxy.memory_kib();
    upstream.stall(false);
    let mut queued_outcomes = Outcomes::default();
    for request in queued {
        queued_outcomes.count(request.await.expect("request task"));
    }
    sent.add(&queued_outcomes);

    // Thousands of watches, kept open through the flood.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, before_watches_rss) = proxy.memory_kib();
    let watch_clients: Vec<_> = (0..4)
        .map(|_| Arc::new(https_client(&pki.client)))
        .collect();
    let mut watches = Vec::new();
    for i in 0..watch_target {
        let client = Arc::clone(&watch_clients[i % watch_clients.len()]);
        let url = format!("{url}/api/v1/namespaces/ns/pods?watch=1");
        let token = format!("tok-flood-{}", i % flooders);
        watches.push(tokio::spawn(async move {
            let req = http::Request::get(url)
                .header("authorization", format!("Bearer {token}"))
                .body(empty())
                .expect("request");
            let response = client.request(req).await.ok()?;
            let status = response.status();
            let mut body = response.into_body();
            // Hold the stream open, reading its events, until aborted.
            use http_body_util::BodyExt;
            let reader = tokio::spawn(async move { while let Some(Ok(_)) = body.frame().await {} });
            Some((status, reader))
        }));
    }
    let mut open_watches = Vec::new();
    let mut watch_outcomes = Outcomes::default();
    for watch in watches {
        match watch.await.expect("watch task") {
            Some((status, reader)) => {
                watch_outcomes.count(Some(status));
                open_watches.push(reader);
            }
            None => watch_outcomes.count(None),
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, watches_rss) = proxy.memory_kib();

    // The flood: 100 × FLOOD_PER_USER closed-loop workers on a level of 18 seats, beside the
    // exempt and vip flows.
    let until = Instant::now() + flood_for;
    let flood_client = Arc::new(https_client(&pki.client));
    let flood = (0..flooders).map(|i| {
        closed_loop(
            Arc::clone(&flood_client),
            pod_url.clone(),
            format!("tok-flood-{i}"),
            per_user,
            until,
            backoff,
        )
    });
    let (flood_results, (mut admin_busy, a), (mut vip_busy, v)) = tokio::join!(
        futures_util::future::join_all(flood),
        probe("admin", until),
        probe("vip", until)
    );
    sent.add(&a);
    sent.add(&v);
    let mut flood_outcomes = Outcomes::default();
    for (_, o) in &flood_results {
        flood_outcomes.add(o);
    }
    sent.add(&flood_outcomes);
    let (peak_rss, _) = proxy.memory_kib();
    for reader in &open_watches {
        reader.abort();
    }
    drop(open_watches);
    tokio::time::sleep(Duration::from_secs(2)).await;

    let text = scrape(&admin).await;
    let answered = metric_sum(&text, "apf_proxy_requests_total{");
    let abandoned = metric_sum(&text, "apf_proxy_requests_abandoned_total ");
    let rejected = metric_sum(&text, "apiserver_flowcontrol_rejected_requests_total{");
    let dispatched = metric_sum(&text, "apiserver_flowcontrol_dispatched_requests_total{");
    let leaked = metric_sum(&text, "apiserver_flowcontrol_current_executing_seats{")
        + metric_sum(&text, "apiserver_flowcontrol_current_inqueue_requests{");
    let total_sent = sent.sent() + watch_outcomes.sent();

    println!(
        "## Overload and soak ({} s flood: {} workers, queue length {queue_length}, back-off {} ms)\n",
        flood_for.as_secs(),
        per_user * flooders,
        backoff.as_millis()
    );
    println!("| measure | value |\n|---|---|");
    println!("| requests sent by the clients (watches included) | {total_sent} |");
    println!(
        "| client outcomes: 2xx / 429 / other / transport errors | {} / {} / {} / {} |",
        sent.ok + watch_outcomes.ok,
        sent.rejected + watch_outcomes.rejected,
        sent.other + watch_outcomes.other,
        sent.errors + watch_outcomes.errors
    );
    println!("| proxy: answered + abandoned (apf_proxy_requests_total + _abandoned_total) | {answered} + {abandoned} |");
    println!(
        "| lost (sent − answered − abandoned) | {} |",
        total_sent as f64 - answered - abandoned
    );
    println!(
        "| proxy: dispatched / rejected (apiserver_flowcontrol_*) | {dispatched} / {rejected} |"
    );
    println!(
        "| upstream: requests served / watches opened | {} / {} |",
        upstream.served.load(Ordering::Relaxed),
        upstream.watches.load(Ordering::Relaxed)
    );
    println!("| seats or queue slots held at the end | {leaked} |");
    println!(
        "| queued at the peak (in queue, by the metrics) | {in_queue} of {queued_target} sent |"
    );
    println!(
        "| queued phase outcomes: 2xx / 429 / errors | {} / {} / {} |",
        queued_outcomes.ok, queued_outcomes.rejected, queued_outcomes.errors
    );
    let per_thousand = |after: u64, before: u64, n: f64| {
        (after.saturating_sub(before)) as f64 / n * 1000.0 / 1024.0
    };
    println!("| RSS at rest | {:.1} MiB |", base_rss as f64 / 1024.0);
    println!(
        "| RSS per 1000 queued requests | {:.2} MiB ({queued_rss} KiB with {in_queue} queued) |",
        per_thousand(queued_rss, base_rss, in_queue.max(1.0))
    );
    println!(
        "| RSS per 1000 open watches | {:.2} MiB ({watches_rss} KiB with {} open) |",
        per_thousand(
            watches_rss,
            before_watches_rss,
            watch_outcomes.ok.max(1) as f64
        ),
        watch_outcomes.ok
    );
    println!("| peak RSS (VmHWM) | {:.1} MiB |", peak_rss as f64 / 1024.0);
    println!(
        "| flood: 2xx / 429 / errors | {} / {} / {} |",
        flood_outcomes.ok, flood_outcomes.rejected, flood_outcomes.errors
    );
    println!(
        "| exempt (system:masters) p50 / p99, idle → under flood | {} / {} ms → {} / {} ms |",
        ms(admin_idle.percentile(0.5)),
        ms(admin_idle.percentile(0.99)),
        ms(admin_busy.percentile(0.5)),
        ms(admin_busy.percentile(0.99))
    );
    println!(
        "| high-priority level p50 / p99, idle → under flood | {} / {} ms → {} / {} ms |",
        ms(vip_idle.percentile(0.5)),
        ms(vip_idle.percentile(0.99)),
        ms(vip_busy.percentile(0.5)),
        ms(vip_busy.percentile(0.99))
    );
}

/// One flow of the fairness runs: its user (and group), its concurrency.
struct Flow {
    user: &'static str,
    group: &'static str,
    concurrency: usize,
}

async fn fairness() {
    let run_for = secs("FAIR_SECS", 15);
    let same_level = [
        Flow {
            user: "heavy",
            group: "tenants",
            concurrency: 64,
        },
        Flow {
            user: "light-1",
            group: "tenants",
            concurrency: 4,
        },
        Flow {
            user: "light-2",
            group: "tenants",
            concurrency: 4,
        },
        Flow {
            user: "light-3",
            group: "tenants",
            concurrency: 4,
        },
        Flow {
            user: "light-4",
            group: "tenants",
            concurrency: 4,
        },
    ];
    let config = [
        level("shared", 10, 64, 6, 100),
        schema("tenants", "tenants", "shared", 1000),
    ]
    .concat();
    // ServerCL 12: `shared` gets ceil(12 × 10 / 15) = 8 seats (catch-all has 5 shares).
    println!("## Fairness: one heavy and four light flows in one priority level (8 seats, 5 ms service, {} s)\n", run_for.as_secs());
    compare(&same_level, &config, 12, 8, run_for).await;

    let across = [
        Flow {
            user: "a-heavy",
            group: "team-a",
            concurrency: 64,
        },
        Flow {
            user: "b-light",
            group: "team-b",
            concurrency: 8,
        },
    ];
    let config = [
        level("team-a", 10, 64, 6, 100),
        level("team-b", 10, 64, 6, 100),
        schema("team-a", "team-a", "team-a", 1000),
        schema("team-b", "team-b", "team-b", 1000),
    ]
    .concat();
    // ServerCL 20: each team gets ceil(20 × 10 / 25) = 8 seats.
    println!("\n## Fairness across levels: a heavy flow in `team-a`, a light one in `team-b` (8 seats each, {} s)\n", run_for.as_secs());
    compare(&across, &config, 20, 16, run_for).await;
}

/// Runs `flows` through the proxy (with `config` at ServerCL `server_cl`) and through nginx,
/// each in front of an upstream serving `capacity` requests at a time, and prints a table.
async fn compare(flows: &[Flow], config: &str, server_cl: u32, capacity: usize, run_for: Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::generate(dir.path());
    let users: Vec<(String, String)> = flows
        .iter()
        .map(|f| (f.user.to_string(), f.group.to_string()))
        .collect();
    let mut flags = write_setup(dir.path(), config, &users);
    flags.push(format!("--max-requests-inflight={server_cl}"));
    flags.push("--max-mutating-requests-inflight=0".into());
    let mut rows = Vec::new();
    for target in ["kube-apf-proxy", "nginx"] {
        let upstream = Upstream::start(Duration::from_millis(5), capacity).await;
        let nginx_dir = tempfile::tempdir().expect("tempdir");
        let (process, url) = if target == "nginx" {
            match start_nginx(nginx_dir.path(), &pki, upstream.addr).await {
                Some(started) => started,
                None => {
                    println!("(nginx is not installed: scripts/install-test-deps.sh installs it)");
                    continue;
                }
            }
        } else {
            let (process, url, _) = start_proxy(dir.path(), &pki, upstream.addr, &flags).await;
            (process, url)
        };
        let until = Instant::now() + run_for;
        let runs = flows.iter().map(|f| {
            closed_loop(
                Arc::new(https_client(&pki.client)),
                format!("{url}{POD_PATH}"),
                format!("tok-{}", f.user),
                f.concurrency,
                until,
                Duration::from_millis(10),
            )
        });
        let results = futures_util::future::join_all(runs).await;
        drop(process);
        let total: u64 = results.iter().map(|(_, o)| o.ok).sum();
        for (flow, (mut latencies, outcomes)) in flows.iter().zip(results) {
            rows.push(format!(
                "| {target} | {} ({}) | {} | {:.0} | {:.1}% | {} | {} | {} | {} |",
                flow.user,
                flow.group,
                flow.concurrency,
                outcomes.ok as f64 / run_for.as_secs_f64(),
                outcomes.ok as f64 * 100.0 / total.max(1) as f64,
                ms(latencies.percentile(0.5)),
                ms(latencies.percentile(0.9)),
                ms(latencies.percentile(0.99)),
                outcomes.rejected,
            ));
        }
    }
    println!("| through | flow (group) | concurrency | 2xx/s | share | p50 ms | p90 ms | p99 ms | 429s |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}
