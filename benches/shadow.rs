//! What a shadow configuration costs: CPU per request through the release proxy with no shadow,
//! with `--shadow-config-dir` (the configuration in force again, so every request is classified,
//! estimated and queued twice), and in `--flow-control=dry-run`, side by side in one run, in
//! alternating rounds to spread the machine's noise. BENCHMARKS.md; never part of `cargo test`.
//! Run with `cargo bench --bench shadow`; knobs `SHADOW_ROUNDS` (3), `SHADOW_SECS` (8),
//! `SHADOW_CONCURRENCY` (32).

#[path = "overload/common.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use common::*;

fn main() {
    let runtime = bench_runtime();
    runtime.block_on(run());
}

async fn run() {
    let rounds = knob("SHADOW_ROUNDS", 3);
    let run_for = secs("SHADOW_SECS", 8);
    let concurrency = knob("SHADOW_CONCURRENCY", 32) as usize;
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::generate(dir.path());
    let upstream = Upstream::start_with(UpstreamOptions {
        service: Duration::from_millis(1),
        capacity: 100_000,
        event_interval: Duration::from_secs(1),
        tls: None,
    })
    .await;
    let config = [
        level("work", 100, 64, 6, 50),
        schema("work", "work", "work", 500),
    ]
    .concat();
    let users: Vec<(String, String)> = (0..concurrency)
        .map(|i| (format!("u-{i}"), "work".to_string()))
        .collect();
    let flags = write_setup(dir.path(), &config, &users);
    let shadow_flag = format!(
        "--shadow-config-dir={}",
        dir.path().join("flowcontrol").display()
    );
    let variants: [(&str, Vec<String>); 3] = [
        ("no shadow", flags.clone()),
        (
            "one shadow (--shadow-config-dir)",
            [flags.clone(), vec![shadow_flag]].concat(),
        ),
        (
            "dry-run (--flow-control=dry-run)",
            [flags.clone(), vec!["--flow-control=dry-run".to_string()]].concat(),
        ),
    ];
    let mut totals = vec![(0u64, 0.0f64); variants.len()];
    for _ in 0..rounds {
        for (i, (_, flags)) in variants.iter().enumerate() {
            let sub = dir.path().join(format!("v{i}"));
            std::fs::create_dir_all(&sub).expect("dir");
            let (proxy, url, _) = start_proxy(&sub, &pki, upstream.addr, flags).await;
            let client = Arc::new(https_client(&pki.client));
            // Warm up the connections, then measure.
            let _ = closed_loop(
                Arc::clone(&client),
                format!("{url}{POD_PATH}"),
                "tok-u-0".into(),
                concurrency,
                Instant::now() + Duration::from_secs(1),
                Duration::from_millis(10),
            )
            .await;
            let cpu_before = cpu_seconds(proxy.0.id());
            let workers: Vec<_> = (0..concurrency)
                .map(|u| {
                    let (client, url) = (Arc::clone(&client), format!("{url}{POD_PATH}"));
                    tokio::spawn(closed_loop(
                        client,
                        url,
                        format!("tok-u-{u}"),
                        1,
                        Instant::now() + run_for,
                        Duration::from_millis(10),
                    ))
                })
                .collect();
            let mut ok = 0;
            for w in workers {
                ok += w.await.expect("worker").1.ok;
            }
            let cpu = cpu_seconds(proxy.0.id()) - cpu_before;
            totals[i].0 += ok;
            totals[i].1 += cpu;
            drop(proxy);
        }
    }
    println!(
        "## Shadow cost: {rounds} rounds of {} s, {concurrency} closed-loop clients, GET through one level",
        run_for.as_secs()
    );
    println!();
    println!("| proxy | requests/s | CPU per request (µs) | vs no shadow |");
    println!("|---|---|---|---|");
    let base = totals[0].1 * 1e6 / totals[0].0.max(1) as f64;
    for ((name, _), (ok, cpu)) in variants.iter().zip(&totals) {
        let per = cpu * 1e6 / (*ok).max(1) as f64;
        println!(
            "| {name} | {:.0} | {per:.1} | {:.2}× |",
            *ok as f64 / (run_for.as_secs_f64() * rounds as f64),
            per / base
        );
    }
}
