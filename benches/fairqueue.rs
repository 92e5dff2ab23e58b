//! Queue-set cost per request: admit + release through the public API.
//!
//! - `uncontended/{queues}`: a free seat; start_request executes at once, then finish.
//! - `waiting/{queues}/{n}`: every seat busy and `n` requests waiting; each iteration enqueues one
//!   request and finishes the oldest executing one, which dispatches the next (steady state).
//! - `async_uncontended/64`: the same as `uncontended` through `LevelQueues::admit` and `Seat`
//!   drop on a current-thread tokio runtime.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kube_apf_proxy::fairqueue::level_queues::{AdmitRequest, LevelQueues};
use kube_apf_proxy::fairqueue::queueset::{
    Arrival, EventKind, FlowMeta, QueueSet, QueueShape, QueuingConfig, Started,
};
use kube_apf_proxy::fairqueue::WorkEstimate;
use tokio::time::Instant;

fn mixed(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn shape(queues: u32) -> QueuingConfig {
    QueuingConfig::Queue(QueueShape {
        queues,
        // 8 cards of a 512-card deck would need 72 hash bits; 6 fit in 60.
        hand_size: if queues > 128 { 6 } else { queues.min(8) },
        queue_length_limit: 1_000_000,
    })
}

struct Driver {
    qs: QueueSet,
    now: Instant,
    hashes: Vec<u64>,
    next: usize,
    flow: FlowMeta,
    executing: VecDeque<kube_apf_proxy::fairqueue::queueset::RequestId>,
}

impl Driver {
    fn new(queues: u32, cl: u32) -> Driver {
        let now = Instant::now();
        Driver {
            qs: QueueSet::new(shape(queues), cl, now).expect("valid"),
            now,
            hashes: (0..4096).map(mixed).collect(),
            next: 0,
            flow: FlowMeta {
                flow_schema: Arc::from("service-accounts"),
                flow_distinguisher: "".into(),
                details: None,
                mutating: false,
            },
            executing: VecDeque::new(),
        }
    }

    fn arrive(&mut self) -> Started {
        self.now += Duration::from_micros(1);
        self.next = (self.next + 1) % self.hashes.len();
        let arrival = Arrival {
            estimate: WorkEstimate::ONE,
            hash: self.hashes[self.next],
            deadline: Some(self.now + Duration::from_secs(3600)),
            flow: self.flow.clone(),
        };
        let started = self.qs.start_request(self.now, arrival);
        if let Started::Executing(id) = started {
            self.executing.push_back(id);
        }
        self.collect();
        started
    }

    fn finish_oldest(&mut self) {
        let id = self.executing.pop_front().expect("something executes");
        self.qs.finish(id, self.now).expect("executing");
        self.collect();
    }

    fn collect(&mut self) {
        for e in self.qs.drain_events() {
            if e.kind == EventKind::Dispatched {
                self.executing.push_back(e.id);
            }
        }
    }
}

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended");
    for queues in [1u32, 64, 512] {
        g.bench_with_input(BenchmarkId::from_parameter(queues), &queues, |b, &q| {
            let mut d = Driver::new(q, 1_000);
            b.iter(|| {
                black_box(d.arrive());
                d.finish_oldest();
            });
        });
    }
    g.finish();
}

fn waiting(c: &mut Criterion) {
    let mut g = c.benchmark_group("waiting");
    for queues in [1u32, 64, 512] {
        for n in [1_000usize, 10_000] {
            let id = BenchmarkId::new(queues.to_string(), n);
            g.bench_with_input(id, &(queues, n), |b, &(q, n)| {
                let mut d = Driver::new(q, 100);
                while d.qs.waiting() < n as u32 {
                    d.arrive();
                }
                b.iter(|| {
                    black_box(d.arrive());
                    d.finish_oldest();
                });
            });
        }
    }
    g.finish();
}

fn async_uncontended(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let level = rt.block_on(async {
        LevelQueues::new(Arc::from("workload-low"), shape(64), 1_000, Instant::now())
            .expect("valid")
    });
    let flow = FlowMeta {
        flow_schema: Arc::from("service-accounts"),
        flow_distinguisher: "".into(),
        details: None,
        mutating: false,
    };
    let mut i = 0u64;
    c.bench_function("async_uncontended/64", |b| {
        b.iter(|| {
            i += 1;
            let req = AdmitRequest {
                estimate: WorkEstimate::ONE,
                hash: mixed(i),
                flow: flow.clone(),
                wait_limit: Duration::from_secs(15),
            };
            let seat = rt.block_on(level.admit(req)).expect("free seat");
            drop(black_box(seat));
        });
    });
}

criterion_group!(benches, uncontended, waiting, async_uncontended);
criterion_main!(benches);
