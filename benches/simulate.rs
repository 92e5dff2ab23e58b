//! `simulate` end to end: audit events read (JSON parse, timestamps, reorder window), request
//! attributes derived, classified against Kubernetes' bootstrap configuration, seats estimated
//! and admitted through the queue sets on the paused clock, outcomes recorded.
//!
//! `audit-end-to-end` runs as the command does with a second CPU: lines read on a thread of their
//! own (`TraceReader::read_ahead`) and decoded there or by the thread that takes the events and
//! derives their requests' attributes ahead of the replay (`simulate`'s feeding thread), while
//! the replay's thread runs the queues; `audit-read-ahead` is that reading alone;
//! `audit-end-to-end-one-thread` does everything on one thread, as the command does on one CPU
//! (`simulate_on_this_thread`).
//!
//! The workload is a synthetic audit log of a busy cluster at Metadata level: kubelets getting
//! pods and nodes, controllers listing and watching, service accounts updating, an operator's
//! patches — 2,000 requests per second of trace time, some queued. Numbers: BENCHMARKS.md.

use std::hint::black_box;
use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kube_apf_proxy::simulate::trace::{TraceOptions, TraceReader};
use kube_apf_proxy::simulate::{simulate, simulate_on_this_thread, SimOptions};

const EVENTS: usize = 100_000;

/// As in the binary (`src/main.rs`): the command runs with mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A realistic audit line (Metadata level, with the annotations and user agent the apiserver
/// writes).
fn line(i: usize) -> String {
    let (user, groups, verb, uri) = match i % 10 {
        0..=3 => (
            format!("system:node:node-{}", i % 500),
            r#"["system:nodes","system:authenticated"]"#,
            "get",
            format!("/api/v1/namespaces/ns-{}/pods/pod-{}", i % 50, i % 997),
        ),
        4 | 5 => (
            "system:serviceaccount:kube-system:replicaset-controller".to_string(),
            r#"["system:serviceaccounts","system:serviceaccounts:kube-system","system:authenticated"]"#,
            "list",
            "/apis/apps/v1/replicasets?limit=500&resourceVersion=0".to_string(),
        ),
        6 | 7 => (
            format!("system:serviceaccount:team-{}:app", i % 40),
            r#"["system:serviceaccounts","system:serviceaccounts:team","system:authenticated"]"#,
            "update",
            format!(
                "/api/v1/namespaces/team-{}/configmaps/cm-{}",
                i % 40,
                i % 13
            ),
        ),
        8 => (
            format!("user-{}@example.com", i % 20),
            r#"["dev","system:authenticated"]"#,
            "patch",
            format!("/apis/apps/v1/namespaces/team-{}/deployments/api", i % 40),
        ),
        _ => (
            "system:kube-scheduler".to_string(),
            r#"["system:authenticated"]"#,
            "get",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler".to_string(),
        ),
    };
    // 2,000 requests per second; each takes 5–200 ms.
    let received = i as u64 * 500;
    let took = 5_000 + (i as u64 * 7919) % 195_000;
    let stamp = |micros: u64| {
        let (s, us) = (micros / 1_000_000, micros % 1_000_000);
        format!("2026-11-24T10:{:02}:{:02}.{us:06}Z", s / 60, s % 60)
    };
    format!(
        r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"{i:08x}-6a1e-4b6e-9d5c-2f3c8e1d0a7b","stage":"ResponseComplete","requestURI":"{uri}","verb":"{verb}","user":{{"username":"{user}","uid":"{i}","groups":{groups}}},"sourceIPs":["10.0.{}.{}"],"userAgent":"kube-controller-manager/v1.33.0 (linux/amd64) kubernetes/abcdef0/system:serviceaccount:kube-system:replicaset-controller","objectRef":{{"resource":"pods","namespace":"default","apiVersion":"v1"}},"responseStatus":{{"metadata":{{}},"code":200}},"requestReceivedTimestamp":"{}","stageTimestamp":"{}","annotations":{{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"system:controller:replicaset-controller\""}}}}"#,
        i % 250,
        i % 200,
        stamp(received),
        stamp(received + took),
    )
}

fn bench(c: &mut Criterion) {
    let log: Arc<[u8]> = (0..EVENTS)
        .flat_map(|i| (line(i) + "\n").into_bytes())
        .collect();
    let config = kube_apf_proxy::config::bootstrap();
    let options = SimOptions::default();
    let trace_options = TraceOptions {
        reorder_window: Duration::from_secs(65),
        strict: false,
        keep_recorded_waits: false,
    };
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function("audit-read", |b| {
        b.iter(|| {
            let reader = TraceReader::new(Cursor::new(&log[..]), trace_options.clone());
            black_box(reader.filter(Result::is_ok).count())
        })
    });
    // Reading alone as the command reads with a second CPU: lines read on a thread of their
    // own, decoded there and, while the caller waits, by the caller.
    group.bench_function("audit-read-ahead", |b| {
        b.iter(|| {
            let reader =
                TraceReader::read_ahead(Cursor::new(Arc::clone(&log)), trace_options.clone())
                    .expect("the reading thread starts");
            black_box(reader.filter(Result::is_ok).count())
        })
    });
    group.bench_function("audit-end-to-end", |b| {
        b.iter(|| {
            let reader =
                TraceReader::read_ahead(Cursor::new(Arc::clone(&log)), trace_options.clone())
                    .expect("the reading thread starts");
            let events = reader.filter_map(Result::ok);
            let reports = simulate(events, &[&config], &options).expect("simulate");
            assert_eq!(reports[0].requests, EVENTS as u64);
            black_box(reports)
        })
    });
    group.bench_function("audit-end-to-end-one-thread", |b| {
        b.iter(|| {
            let reader = TraceReader::new(Cursor::new(&log[..]), trace_options.clone());
            let events = reader.filter_map(Result::ok);
            let reports = simulate_on_this_thread(events, &[&config], &options).expect("simulate");
            assert_eq!(reports[0].requests, EVENTS as u64);
            black_box(reports)
        })
    });
    // The default window holds 65 s of arrivals, all of this 50-s trace: its memory is fresh on
    // every iteration. A long recording reuses it; a 10-s window shows that steady state.
    let short_window = TraceOptions {
        reorder_window: Duration::from_secs(10),
        strict: false,
        keep_recorded_waits: false,
    };
    group.bench_function("audit-end-to-end-10s-window", |b| {
        b.iter(|| {
            let reader =
                TraceReader::read_ahead(Cursor::new(Arc::clone(&log)), short_window.clone())
                    .expect("the reading thread starts");
            let events = reader.filter_map(Result::ok);
            let reports = simulate(events, &[&config], &options).expect("simulate");
            assert_eq!(reports[0].requests, EVENTS as u64);
            black_box(reports)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
