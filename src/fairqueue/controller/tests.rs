use std::time::Duration;

use super::*;
use crate::config::{LimitResponse, LimitedPriorityLevel, PriorityLevelSpec, Queuing};
use crate::fairqueue::level_queues::AdmitRequest;
use crate::fairqueue::queueset::{FlowMeta, RejectReason};
use crate::fairqueue::WorkEstimate;

fn limited(name: &str, shares: u32, lendable: u32, response: LimitResponse) -> PriorityLevel {
    PriorityLevel {
        name: name.into(),
        uid: format!("uid-{name}"),
        spec: PriorityLevelSpec::Limited(LimitedPriorityLevel {
            nominal_concurrency_shares: shares,
            lendable_percent: lendable,
            borrowing_limit_percent: None,
            limit_response: response,
        }),
    }
}

fn queue(queues: u32, hand_size: u32, queue_length_limit: u32) -> LimitResponse {
    LimitResponse::Queue(Queuing {
        queues,
        hand_size,
        queue_length_limit,
    })
}

fn config(levels: Vec<PriorityLevel>) -> Config {
    Config::resolve(Vec::new(), levels)
}

fn req(hash: u64) -> AdmitRequest {
    AdmitRequest {
        estimate: WorkEstimate::ONE,
        hash,
        flow: FlowMeta {
            flow_schema: Arc::from("fs"),
            flow_distinguisher: "".into(),
            details: None,
            mutating: false,
        },
        wait_limit: Duration::from_secs(15),
    }
}

fn small_and_big(small: LimitResponse) -> Config {
    config(vec![
        limited("small", 5, 0, small),
        limited("big", 40, 0, queue(64, 6, 50)),
    ])
}

/// A level `small` whose limit is 1 or 2 seats (server CL 10; shares 5 of 50).
fn small_setup(response: LimitResponse) -> (FlowControl, LevelHandle) {
    let (fc, problems) =
        FlowControl::new(&small_and_big(response), 10, Instant::now()).expect("positive");
    assert!(problems.is_empty(), "{problems:?}");
    let handle = fc.snapshot().level("small").expect("configured").clone();
    (fc, handle)
}

async fn fill(fc: &FlowControl, level: &LevelHandle) -> Vec<Seat> {
    let mut held = Vec::new();
    for i in 0..level.queues().stats().concurrency_limit {
        held.push(fc.admit(level, req(u64::from(i))).await.expect("free seat"));
    }
    held
}

#[test]
fn zero_server_concurrency_is_refused() {
    let err = FlowControl::new(&config(vec![]), 0, Instant::now()).expect_err("zero");
    assert_eq!(err, FlowControlError::ZeroServerConcurrency);
}

#[test]
fn every_level_gets_limits_and_a_queue_set_with_its_current_limit() {
    let cfg = config(vec![
        limited("workload-low", 100, 90, queue(128, 6, 50)),
        limited("system", 30, 33, queue(64, 6, 50)),
    ]);
    let (fc, problems) = FlowControl::new(&cfg, 600, Instant::now()).expect("positive");
    assert!(problems.is_empty());
    let levels = fc.levels();
    let names: Vec<&str> = levels
        .iter()
        .map(|l| l.priority_level.name.as_str())
        .collect();
    assert_eq!(names, vec!["catch-all", "exempt", "system", "workload-low"]);
    for l in &levels {
        assert_eq!(l.queues.stats().concurrency_limit, l.current_cl);
        if !l.priority_level.is_exempt() {
            assert!(l.limits.min_cl <= l.current_cl && l.current_cl <= l.limits.max_cl);
        }
    }
    let snap = fc.snapshot();
    let wl = snap.level("workload-low").expect("configured");
    assert_eq!(wl.priority_level().uid, "uid-workload-low");
    assert_eq!(wl.max_seats(), levels[3].limits.max_seats);
    assert!(snap.level("exempt").expect("mandatory").is_exempt());
    assert!(snap.config().priority_level("system").is_some());
}

#[test]
fn a_new_server_limit_moves_every_nominal_limit_as_a_reload_does() {
    let cfg = config(vec![limited("workload-low", 95, 0, queue(16, 4, 50))]);
    let now = Instant::now();
    let (fc, _) = FlowControl::new(&cfg, 30, now).expect("positive");
    let nominal = |fc: &FlowControl, name: &str| {
        fc.levels()
            .into_iter()
            .find(|l| l.priority_level.name == name)
            .map(|l| (l.limits.nominal_cl, l.queues.stats().concurrency_limit))
    };
    assert_eq!(nominal(&fc, "workload-low"), Some((29, 29)));
    fc.set_server_concurrency_limit(10, now).expect("positive");
    assert_eq!(fc.server_concurrency_limit(), 10);
    // ceil(10 × 95 / 100) and ceil(10 × 5 / 100): the queue sets follow at once.
    assert_eq!(nominal(&fc, "workload-low"), Some((10, 10)));
    assert_eq!(nominal(&fc, "catch-all").map(|n| n.0), Some(1));
    assert_eq!(
        fc.set_server_concurrency_limit(0, now),
        Err(FlowControlError::ZeroServerConcurrency)
    );
    assert_eq!(fc.server_concurrency_limit(), 10, "unchanged");
    // One seat per level with shares: the floor a replica needs.
    assert_eq!(fc.nominal_seats_for(1), 2);
}

#[test]
fn unusable_queuing_parameters_are_reported_and_the_level_left_out() {
    let cfg = config(vec![limited("bad", 5, 0, queue(4, 8, 50))]);
    let (fc, problems) = FlowControl::new(&cfg, 600, Instant::now()).expect("positive");
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].to_string().contains("\"bad\""),
        "{}",
        problems[0]
    );
    assert!(fc.snapshot().level("bad").is_none());
}

#[tokio::test(start_paused = true)]
async fn rejection_carries_the_level_and_retry_after() {
    let (fc, small) = small_setup(LimitResponse::Reject);
    let _held = fill(&fc, &small).await;
    let err = fc.admit(&small, req(99)).await.expect_err("no room");
    assert_eq!(err.reason, RejectReason::ConcurrencyLimit);
    assert_eq!(&*err.priority_level, "small");
    assert_eq!(err.retry_after, 1);
}

#[tokio::test(start_paused = true)]
async fn reconfiguration_keeps_queued_and_executing_requests() {
    let (fc, small) = small_setup(queue(8, 2, 50));
    let held = fill(&fc, &small).await;
    let h2 = small.clone();
    let waiter = tokio::spawn(async move { h2.queues().admit(req(99)).await });
    tokio::task::yield_now().await;
    assert_eq!(small.queues().stats().waiting, 1);

    let changed = small_and_big(queue(2, 1, 10));
    assert!(fc.apply_config(&changed, Instant::now()).is_empty());
    let after = fc.snapshot().level("small").expect("kept").clone();
    assert!(
        Arc::ptr_eq(after.queues(), small.queues()),
        "same queue set"
    );
    let s = small.queues().stats();
    assert_eq!(s.waiting, 1);
    assert_eq!(s.executing as usize, held.len());
    drop(held);
    let seat = waiter
        .await
        .expect("task")
        .expect("dispatched after the change");
    drop(seat);
    assert_eq!(small.queues().stats().waiting, 0);
}

#[tokio::test(start_paused = true)]
async fn removed_level_quiesces_then_goes() {
    let (fc, small) = small_setup(queue(8, 2, 50));
    let held = fill(&fc, &small).await;
    let h2 = small.clone();
    let waiter = tokio::spawn(async move { h2.queues().admit(req(99)).await });
    tokio::task::yield_now().await;

    let without = config(vec![limited("big", 40, 0, queue(64, 6, 50))]);
    assert!(fc.apply_config(&without, Instant::now()).is_empty());
    assert!(fc.snapshot().level("small").is_none(), "takes nothing new");
    let info = fc.levels();
    let q = info
        .iter()
        .find(|l| l.priority_level.name == "small")
        .expect("still there, draining");
    assert!(q.quiescing);
    assert!(q.current_cl >= 1, "quiescing levels keep a share");

    fc.adjust_borrowing(Instant::now());
    assert!(fc.levels().iter().any(|l| l.priority_level.name == "small"));
    drop(held);
    drop(waiter.await.expect("task").expect("still served"));
    fc.adjust_borrowing(Instant::now());
    assert!(fc.levels().iter().all(|l| l.priority_level.name != "small"));
}

#[tokio::test(start_paused = true)]
async fn a_quiescing_level_that_comes_back_is_revived_in_place() {
    let (fc, small) = small_setup(queue(8, 2, 50));
    let held = fill(&fc, &small).await;
    let without = config(vec![limited("big", 40, 0, queue(64, 6, 50))]);
    fc.apply_config(&without, Instant::now());
    fc.apply_config(&small_and_big(queue(8, 2, 50)), Instant::now());
    let back = fc.snapshot().level("small").expect("revived").clone();
    assert!(Arc::ptr_eq(back.queues(), small.queues()));
    assert!(!fc.levels().iter().any(|l| l.quiescing));
    assert_eq!(back.queues().stats().executing as usize, held.len());
}

#[tokio::test(start_paused = true)]
async fn borrowing_adjustment_feeds_observed_demand_into_the_limits() {
    let cfg = config(vec![
        limited("lender", 50, 100, queue(8, 2, 50)),
        limited("borrower", 50, 0, queue(8, 2, 50)),
    ]);
    let (fc, _) = FlowControl::new(&cfg, 100, Instant::now()).expect("positive");
    let borrower = fc.snapshot().level("borrower").expect("configured").clone();
    // Keep the borrower's demand far above its limit for a whole period.
    let mut tasks = Vec::new();
    for i in 0..300u64 {
        let b = borrower.clone();
        tasks.push(tokio::spawn(async move {
            let seat = b.queues().admit(req(i)).await;
            std::future::pending::<()>().await;
            drop(seat);
        }));
    }
    tokio::task::yield_now().await;
    tokio::time::advance(Duration::from_secs(10)).await;
    let before = borrower.queues().stats().concurrency_limit;
    let outcome = fc.adjust_borrowing(Instant::now());
    let after = borrower.queues().stats().concurrency_limit;
    assert!(after > before, "borrowed: {before} → {after} ({outcome:?})");
    for t in tasks {
        t.abort();
    }
}

#[tokio::test(start_paused = true)]
async fn level_of_finds_the_level_by_its_object_or_else_by_name() {
    let (fc, _) =
        FlowControl::new(&small_and_big(queue(8, 2, 4)), 10, Instant::now()).expect("positive");
    let snapshot = fc.snapshot();
    for name in ["small", "big"] {
        let own = Arc::clone(snapshot.config().priority_level(name).expect("configured"));
        let by_name = snapshot.level(name).expect("published");
        let found = snapshot.level_of(&own).expect("found by its object");
        assert!(Arc::ptr_eq(found.queues(), by_name.queues()), "{name}");
        // An equal object of another configuration: found by name.
        let copy = Arc::new(PriorityLevel::clone(&own));
        let found = snapshot.level_of(&copy).expect("found by name");
        assert!(Arc::ptr_eq(found.queues(), by_name.queues()), "{name}");
    }
    let unknown = Arc::new(limited("unknown", 1, 0, LimitResponse::Reject));
    assert!(snapshot.level_of(&unknown).is_none());
}
