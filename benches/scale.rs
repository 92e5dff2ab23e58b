//! Cluster scale through the running proxy (BENCHMARKS.md, RELIABILITY.md): tens of thousands of
//! watches over HTTP/2 both ways, an upstream with a stream limit, memory per open watch and per
//! queued request, and the relay of watch events beside nginx. Never part of `cargo test`.
//!
//! - `memory` (scripts/scale.sh): `SCALE_WATCHES` watches (20,000) over `SCALE_CONNS` client
//!   HTTP/2 connections (250), through the release proxy to an in-process TLS upstream that
//!   advertises `SCALE_UPSTREAM_STREAMS` streams (250) and sends each watch an event every
//!   `SCALE_EVENT_SECS` (5); the proxy's RSS per watch, GET latency with and without the watches,
//!   then `SCALE_QUEUED` requests (5,000) queued behind a stalled upstream and the RSS per
//!   queued request. `SCALE_PROTOCOL=h1` runs it over HTTP/1.1 both ways instead (a client
//!   connection and an upstream connection per watch; mind the open-file limit).
//!   `SCALE_PROFILE_QUEUED=1` ends the run there, the proxy killed while its requests wait, for
//!   a heap profile (BENCHMARKS.md).
//! - `relay`: `RELAY_WATCHES` watches (1,000) with an event every `RELAY_EVENT_MS` (50) for
//!   `RELAY_SECS` (10), through the proxy and through nginx (`proxy_buffering off`) in one run:
//!   events per second and CPU per event of each.
//! - `soak` (`scripts/scale.sh soak`): waves of `SOAK_WAVE_WATCHES` watches (5,000) opened and
//!   closed `SOAK_WAVES` times (4) while GETs run, the upstream sending GOAWAY every
//!   `SOAK_GOAWAY_SECS` (3) and restarting once; every request accounted for, no seat or stream
//!   left, and memory back at its resting level.

#[path = "overload/common.rs"]
mod common;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use tokio::time::Instant;

use common::*;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Body>;

fn main() {
    let mode = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let runtime = bench_runtime();
    match mode.as_str() {
        "memory" => runtime.block_on(memory()),
        "relay" => runtime.block_on(relay()),
        "soak" => runtime.block_on(soak()),
        _ => eprintln!("scale: give `memory`, `relay` or `soak` (scripts/scale.sh)"),
    }
}

/// One level for everything, big enough to queue thousands; users `u-0..` in group `scale`.
fn setup(dir: &std::path::Path, users: usize) -> Vec<String> {
    let config = [
        level("scale", 100, 256, 6, 100),
        schema("scale", "scale", "scale", 1000),
    ]
    .concat();
    let users: Vec<(String, String)> = (0..users)
        .map(|i| (format!("u-{i}"), "scale".to_string()))
        .collect();
    write_setup(dir, &config, &users)
}

async fn tls_upstream(pki: &Pki, streams: u32, event_interval: Duration) -> Arc<Upstream> {
    Upstream::start_with(UpstreamOptions {
        service: Duration::from_millis(1),
        capacity: 100_000,
        event_interval,
        tls: Some((pki.server_config(), streams)),
    })
    .await
}

/// Open watches: how many got their head, and events received per watch.
struct Watches {
    opened: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    /// Events each watch has read.
    events: Arc<Vec<AtomicU32>>,
    /// Watches whose stream ended or failed after their head.
    cut: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watches {
    /// Opens `n` watches on `clients` (round robin), at most `burst` opening at once.
    async fn open(clients: &[Arc<HttpsClient>], url: &str, n: usize, users: usize) -> Watches {
        let events: Arc<Vec<AtomicU32>> = Arc::new((0..n).map(|_| AtomicU32::new(0)).collect());
        let (opened, failed, cut) = (Arc::default(), Arc::default(), Arc::default());
        let gate = Arc::new(tokio::sync::Semaphore::new(500));
        let mut tasks = Vec::with_capacity(n);
        for i in 0..n {
            let client = Arc::clone(&clients[i % clients.len()]);
            let url = format!("{url}/api/v1/namespaces/ns/pods?watch=1");
            let token = format!("tok-u-{}", i % users);
            let (opened, failed, cut, events, gate): (
                Arc<AtomicU64>,
                Arc<AtomicU64>,
                Arc<AtomicU64>,
                _,
                _,
            ) = (
                Arc::clone(&opened),
                Arc::clone(&failed),
                Arc::clone(&cut),
                Arc::clone(&events),
                Arc::clone(&gate),
            );
            tasks.push(tokio::spawn(async move {
                let permit = gate.acquire_owned().await.expect("gate");
                let request = http::Request::get(url)
                    .header("authorization", format!("Bearer {token}"))
                    .body(empty())
                    .expect("request");
                let Ok(response) = client.request(request).await else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                drop(permit);
                if !response.status().is_success() {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                opened.fetch_add(1, Ordering::Relaxed);
                let mut body = response.into_body();
                loop {
                    match body.frame().await {
                        Some(Ok(frame)) => {
                            if let Some(data) = frame.data_ref() {
                                let lines = data.iter().filter(|b| **b == b'\n').count();
                                events[i].fetch_add(lines as u32, Ordering::Relaxed);
                            }
                        }
                        _ => {
                            cut.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            }));
        }
        Watches {
            opened,
            failed,
            events,
            cut,
            tasks,
        }
    }

    /// Waits (bounded) until every watch got its head or failed.
    async fn settle(&self, n: usize, within: Duration) {
        let until = Instant::now() + within;
        while Instant::now() < until {
            let done = self.opened.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed);
            if done >= n as u64 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn with_at_least(&self, events: u32) -> usize {
        self.events
            .iter()
            .filter(|e| e.load(Ordering::Relaxed) >= events)
            .count()
    }

    fn total_events(&self) -> u64 {
        self.events
            .iter()
            .map(|e| u64::from(e.load(Ordering::Relaxed)))
            .sum()
    }

    fn close(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// GET latency: `workers` closed-loop workers for `for_`.
async fn get_latency(
    client: &Arc<HttpsClient>,
    url: &str,
    for_: Duration,
) -> (Latencies, Outcomes) {
    closed_loop(
        Arc::clone(client),
        format!("{url}{POD_PATH}"),
        "tok-u-0".into(),
        8,
        Instant::now() + for_,
        Duration::from_millis(10),
    )
    .await
}

fn clients(pki: &Pki, n: usize) -> Vec<Arc<HttpsClient>> {
    (0..n)
        .map(|_| Arc::new(https_client(&pki.client)))
        .collect()
}

fn kib_per(delta_kib: u64, n: usize) -> String {
    format!("{:.2}", delta_kib as f64 / n.max(1) as f64)
}

async fn memory() {
    let h1 = std::env::var("SCALE_PROTOCOL").is_ok_and(|p| p == "h1");
    let watches_n = knob("SCALE_WATCHES", 20_000) as usize;
    let conns = if h1 {
        watches_n
    } else {
        knob("SCALE_CONNS", 250) as usize
    };
    let streams = knob("SCALE_UPSTREAM_STREAMS", 250) as u32;
    let event_every = secs("SCALE_EVENT_SECS", 5);
    let queued_n = knob("SCALE_QUEUED", 5_000) as usize;
    let users = 500;
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::generate(dir.path());
    let upstream = if h1 {
        Upstream::start_with(UpstreamOptions {
            service: Duration::from_millis(1),
            capacity: 100_000,
            event_interval: event_every,
            tls: None,
        })
        .await
    } else {
        tls_upstream(&pki, streams, event_every).await
    };
    let mut flags = setup(dir.path(), users);
    flags.push("--max-requests-inflight=20".into());
    flags.push("--max-mutating-requests-inflight=10".into());
    let upstream_url = if h1 {
        format!("http://{}", upstream.addr)
    } else {
        format!("https://{}", upstream.addr)
    };
    let (proxy, url, admin) = start_proxy_to(dir.path(), &pki, &upstream_url, &flags).await;
    let getter = Arc::new(https_client(&pki.client));

    // Warm up (connections, allocator), then the resting RSS and GET latency alone.
    let _ = get_latency(&getter, &url, Duration::from_secs(2)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, rest_rss) = proxy.memory_kib();
    let (mut alone, alone_outcomes) = get_latency(&getter, &url, secs("SCALE_LAT_SECS", 5)).await;

    // The client connections alone (each makes one request and stays open), then the watches.
    let clients: Vec<Arc<HttpsClient>> = if h1 {
        vec![Arc::new(https1_client(&pki.client))]
    } else {
        clients(&pki, conns)
    };
    if !h1 {
        for client in &clients {
            let _ = get(client, &format!("{url}{POD_PATH}"), "tok-u-0").await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, conns_rss) = proxy.memory_kib();
    let started = Instant::now();
    let watches = Watches::open(&clients, &url, watches_n, users).await;
    watches.settle(watches_n, Duration::from_secs(120)).await;
    let open_time = started.elapsed();
    // Two event periods: every watch should have its first event and at least one more.
    tokio::time::sleep(event_every * 2 + Duration::from_secs(1)).await;
    let (_, watches_rss) = proxy.memory_kib();
    let text = scrape(&admin).await;
    let (mut loaded, loaded_outcomes) = get_latency(&getter, &url, secs("SCALE_LAT_SECS", 5)).await;
    let with_events = watches.with_at_least(2);
    let opened = watches.opened.load(Ordering::Relaxed);
    let failed = watches.failed.load(Ordering::Relaxed);

    if h1 {
        println!(
            "## Scale over HTTP/1.1: {watches_n} watches, a client and an upstream connection each"
        );
    } else {
        println!("## Scale: {watches_n} watches over {conns} client HTTP/2 connections, upstream h2 with {streams} streams");
    }
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| watches opened / failed | {opened} / {failed} (in {:.1} s) |",
        open_time.as_secs_f64()
    );
    println!(
        "| watches with ≥ 2 events after {} s | {with_events} |",
        (event_every * 2).as_secs() + 1
    );
    println!("| events received | {} |", watches.total_events());
    println!(
        "| upstream connections (h2) / streams in use (long-running) | {} / {} |",
        metric_sum(&text, "apf_proxy_upstream_connections{protocol=\"h2\"}"),
        metric_sum(
            &text,
            "apf_proxy_upstream_streams_in_use{route=\"long-running\"}"
        )
    );
    println!(
        "| proxy RSS at rest | {:.1} MiB |",
        rest_rss as f64 / 1024.0
    );
    if !h1 {
        println!(
            "| proxy RSS with {conns} idle client connections | {:.1} MiB (**{} KiB per connection**) |",
            conns_rss as f64 / 1024.0,
            kib_per(conns_rss.saturating_sub(rest_rss), conns)
        );
    }
    println!(
        "| proxy RSS with the watches | {:.1} MiB |",
        watches_rss as f64 / 1024.0
    );
    println!(
        "| **RSS per open watch** (beyond its client connection's) | **{} KiB** |",
        kib_per(watches_rss.saturating_sub(conns_rss), opened as usize)
    );
    println!(
        "| RSS per open watch, connections included | {} KiB |",
        kib_per(watches_rss.saturating_sub(rest_rss), opened as usize)
    );
    println!(
        "| GET p50 / p99 alone ({} requests) | {} / {} ms |",
        alone_outcomes.ok,
        ms(alone.percentile(0.5)),
        ms(alone.percentile(0.99))
    );
    println!(
        "| GET p50 / p99 with the watches ({} requests) | {} / {} ms |",
        loaded_outcomes.ok,
        ms(loaded.percentile(0.5)),
        ms(loaded.percentile(0.99))
    );
    println!(
        "| **GET p99 ratio (watches / alone)** | **{:.2}** |",
        loaded.percentile(0.99).as_secs_f64() / alone.percentile(0.99).as_secs_f64().max(1e-9)
    );
    watches.close();
    drop(clients);
    drop(proxy);

    // Queued requests, in a fresh proxy (memory freed by the watches would be reused and hide
    // the cost): the client connections first, then the upstream stalls, the level's few seats
    // stay taken and the rest waits.
    let sub = dir.path().join("queued");
    std::fs::create_dir_all(&sub).expect("dir");
    let mut flags = setup(&sub, users);
    flags.push("--max-requests-inflight=20".into());
    flags.push("--max-mutating-requests-inflight=10".into());
    let (proxy, url, admin) = start_proxy_to(&sub, &pki, &upstream_url, &flags).await;
    let queue_clients = clients_for_queue(&pki);
    for client in &queue_clients {
        let _ = get(client, &format!("{url}{POD_PATH}"), "tok-u-0").await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, before_queue_rss) = proxy.memory_kib();
    upstream.stall(true);
    let queued: Vec<_> = (0..queued_n)
        .map(|i| {
            let client = Arc::clone(&queue_clients[i % queue_clients.len()]);
            let (url, token) = (format!("{url}{POD_PATH}"), format!("tok-u-{}", i % users));
            tokio::spawn(async move { get(&client, &url, &token).await })
        })
        .collect();
    let mut in_queue = 0.0;
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let text = scrape(&admin).await;
        in_queue = metric_sum(&text, "apiserver_flowcontrol_current_inqueue_requests{");
        let executing = metric_sum(&text, "apiserver_flowcontrol_current_executing_requests{");
        if in_queue + executing >= queued_n as f64 {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, queued_rss) = proxy.memory_kib();
    if knob("SCALE_PROFILE_QUEUED", 0) != 0 {
        // The proxy dies with its requests waiting: a heap profiler wrapping it
        // (`PROXY_WRAPPER`) then reports what they hold as never freed (BENCHMARKS.md).
        let config_dir = format!("--config-dir={}", sub.join("flowcontrol").display());
        let _ = std::process::Command::new("pkill")
            .args(["-KILL", "-f", "--", &config_dir])
            .status();
        println!(
            "| RSS per queued request (the proxy killed here for the profile) | {} KiB |",
            kib_per(queued_rss.saturating_sub(before_queue_rss), queued_n)
        );
        // Time for the profiler to write its file.
        tokio::time::sleep(Duration::from_secs(5)).await;
        std::process::exit(0);
    }
    upstream.stall(false);
    let mut outcomes = Outcomes::default();
    for request in queued {
        outcomes.count(request.await.expect("request task"));
    }
    println!("| requests queued (by `current_inqueue_requests`) | {in_queue} of {queued_n} sent |");
    println!(
        "| **RSS per queued request** (over HTTP/2, beyond its {} client connections) | **{} KiB** |",
        queue_clients.len(),
        kib_per(queued_rss.saturating_sub(before_queue_rss), queued_n)
    );
    println!(
        "| queued requests answered 2xx / other / errors | {} / {} / {} |",
        outcomes.ok,
        outcomes.rejected + outcomes.other,
        outcomes.errors
    );
    let (peak, _) = proxy.memory_kib();
    println!("| peak RSS (VmHWM) | {:.1} MiB |", peak as f64 / 1024.0);
}

/// Client connections for the queued phase: as many as it takes at 100 streams each.
fn clients_for_queue(pki: &Pki) -> Vec<Arc<HttpsClient>> {
    let n = knob("SCALE_QUEUED", 5_000) as usize;
    clients(pki, n.div_ceil(90).max(1))
}

/// utime + stime of `pid` in seconds (Linux clock ticks at 100 Hz).
async fn relay() {
    let n = knob("RELAY_WATCHES", 1_000) as usize;
    let every = Duration::from_millis(knob("RELAY_EVENT_MS", 50));
    let run_for = secs("RELAY_SECS", 10);
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::generate(dir.path());
    // A plain upstream for both: nginx speaks HTTP/1.1 to it, so does the proxy; and a TLS h2
    // one for the proxy alone.
    let plain = Upstream::start_with(UpstreamOptions {
        service: Duration::from_millis(1),
        capacity: 100_000,
        event_interval: every,
        tls: None,
    })
    .await;
    let tls = tls_upstream(&pki, 250, every).await;
    let flags = setup(dir.path(), 100);
    println!(
        "## Watch-event relay: {n} watches, an event every {} ms each, {} s",
        every.as_millis(),
        run_for.as_secs()
    );
    println!();
    println!("| target | events/s received | CPU per event (µs) | CPU (% of a core) |");
    println!("|---|---|---|---|");
    let mut targets: Vec<(String, Process, String)> = Vec::new();
    let (proxy, url, _) = start_proxy(dir.path(), &pki, plain.addr, &flags).await;
    targets.push(("kube-apf-proxy (h1 upstream)".into(), proxy, url));
    let sub = dir.path().join("h2");
    std::fs::create_dir_all(&sub).expect("dir");
    let flags_h2 = setup(&sub, 100);
    let (proxy, url, _) =
        start_proxy_to(&sub, &pki, &format!("https://{}", tls.addr), &flags_h2).await;
    targets.push(("kube-apf-proxy (h2 upstream)".into(), proxy, url));
    match start_nginx(dir.path(), &pki, plain.addr).await {
        Some((process, url)) => targets.push(("nginx (proxy_buffering off)".into(), process, url)),
        None => println!("| nginx | not installed | | |"),
    }
    for (name, process, url) in targets {
        let clients = clients(&pki, n.div_ceil(80));
        let watches = Watches::open(&clients, &url, n, 100).await;
        watches.settle(n, Duration::from_secs(60)).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (events_before, cpu_before, started) = (
            watches.total_events(),
            cpu_seconds(process.0.id()),
            Instant::now(),
        );
        tokio::time::sleep(run_for).await;
        let events = watches.total_events() - events_before;
        let cpu = cpu_seconds(process.0.id()) - cpu_before;
        let elapsed = started.elapsed().as_secs_f64();
        println!(
            "| {name} | {:.0} | {:.1} | {:.0} |",
            events as f64 / elapsed,
            cpu * 1e6 / events.max(1) as f64,
            cpu / elapsed * 100.0
        );
        watches.close();
        drop(process);
    }
}

async fn soak() {
    let wave = knob("SOAK_WAVE_WATCHES", 5_000) as usize;
    let waves = knob("SOAK_WAVES", 4) as usize;
    let goaway_every = secs("SOAK_GOAWAY_SECS", 3);
    let hold = secs("SOAK_HOLD_SECS", 5);
    let users = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::generate(dir.path());
    let upstream = tls_upstream(&pki, 250, Duration::from_secs(1)).await;
    let flags = setup(dir.path(), users);
    let (proxy, url, admin) = start_proxy_to(
        dir.path(),
        &pki,
        &format!("https://{}", upstream.addr),
        &flags,
    )
    .await;
    let getter = Arc::new(https_client(&pki.client));
    let _ = get_latency(&getter, &url, Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, rest_rss) = proxy.memory_kib();

    // GOAWAY every few seconds, for as long as the waves last.
    let goaways = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let pulse = {
        let (upstream, goaways, stop) = (
            Arc::clone(&upstream),
            Arc::clone(&goaways),
            Arc::clone(&stop),
        );
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(goaway_every) => {}
                    _ = stop.notified() => return,
                }
                upstream.goaway();
                goaways.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // GETs all along.
    let background = tokio::spawn({
        let (getter, url) = (Arc::clone(&getter), url.clone());
        let until = Instant::now() + (hold + Duration::from_secs(3)) * waves as u32;
        async move { get_latency(&getter, &url, until - Instant::now()).await }
    });

    let clients = clients(&pki, wave.div_ceil(80));
    let (mut opened, mut failed, mut cut) = (0, 0, 0);
    for n in 0..waves {
        let watches = Watches::open(&clients, &url, wave, users).await;
        watches.settle(wave, Duration::from_secs(60)).await;
        if n == waves / 2 {
            // The upstream goes down for 2 s and comes back.
            upstream.restart(Duration::from_secs(2));
        }
        tokio::time::sleep(hold).await;
        opened += watches.opened.load(Ordering::Relaxed);
        failed += watches.failed.load(Ordering::Relaxed);
        cut += watches.cut.load(Ordering::Relaxed);
        watches.close();
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    stop.notify_waiters();
    let _ = pulse.await;
    let (mut latencies, gets) = background.await.expect("background");
    drop(clients);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let text = scrape(&admin).await;
    let (peak, end_rss) = proxy.memory_kib();
    println!(
        "## Scale soak: {waves} waves of {wave} watches, GOAWAY every {} s, one upstream restart",
        goaway_every.as_secs()
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| watches opened / refused or failed / cut by the restart or GOAWAY | {opened} / {failed} / {cut} |");
    println!(
        "| GETs: 2xx / 429 / other status / transport errors (**lost**) | {} / {} / {} / **{}** |",
        gets.ok, gets.rejected, gets.other, gets.errors
    );
    println!(
        "| GET p50 / p99 through it all | {} / {} ms |",
        ms(latencies.percentile(0.5)),
        ms(latencies.percentile(0.99))
    );
    println!(
        "| GOAWAYs sent / read by the proxy / requests retried | {} / {} / {} |",
        goaways.load(Ordering::Relaxed),
        metric_sum(&text, "apf_proxy_upstream_goaways_total"),
        metric_sum(&text, "apf_proxy_upstream_retries_total")
    );
    println!(
        "| at the end: streams in use / seats executing / queued | {} / {} / {} |",
        metric_sum(&text, "apf_proxy_upstream_streams_in_use{"),
        metric_sum(&text, "apiserver_flowcontrol_current_executing_seats{"),
        metric_sum(&text, "apiserver_flowcontrol_current_inqueue_requests{")
    );
    println!(
        "| at the end: client connections open / upstream connections (h2, http/1.1) | {} / {}, {} |",
        metric_sum(&text, "apf_proxy_open_connections"),
        metric_sum(&text, "apf_proxy_upstream_connections{protocol=\"h2\"}"),
        metric_sum(&text, "apf_proxy_upstream_connections{protocol=\"http/1.1\"}")
    );
    let cpu_before = cpu_seconds(proxy.0.id());
    let mut rss_trail = Vec::new();
    for _ in 0..knob("SOAK_IDLE_SECS", 30) / 5 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", proxy.0.id())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        let rollup = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", proxy.0.id()))
            .unwrap_or_default();
        let huge = rollup
            .lines()
            .find_map(|l| l.strip_prefix("AnonHugePages:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0;
        rss_trail.push(format!(
            "{:.1} (anon {:.1} of which huge pages {huge:.1}, file {:.1})",
            field("VmRSS:"),
            field("RssAnon:"),
            field("RssFile:")
        ));
    }
    let idle_cpu = cpu_seconds(proxy.0.id()) - cpu_before;
    let (_, later_rss) = proxy.memory_kib();
    println!(
        "| idle afterwards: CPU seconds / RSS every 5 s (MiB) | {idle_cpu:.2} / {} |",
        rss_trail.join(", ")
    );
    println!(
        "| RSS at rest → at the end → after the idle time (peak) | {:.1} → {:.1} → {:.1} MiB ({:.1} MiB) |",
        rest_rss as f64 / 1024.0,
        end_rss as f64 / 1024.0,
        later_rss as f64 / 1024.0,
        peak as f64 / 1024.0
    );
}
