use std::future::Future;
use std::task::{Context, Poll};

use futures_util::task::noop_waker_ref;

use super::*;
use crate::fairqueue::queueset::QueueShape;
use crate::fairqueue::timeout::wait_limit;

fn queued(queues: u32, hand: u32, qll: u32) -> QueuingConfig {
    QueuingConfig::Queue(QueueShape {
        queues,
        hand_size: hand,
        queue_length_limit: qll,
    })
}

fn level(config: QueuingConfig, cl: u32) -> Arc<LevelQueues> {
    LevelQueues::new(Arc::from("workload-low"), config, cl, Instant::now()).expect("valid")
}

fn req(seats: u32, hash: u64) -> AdmitRequest {
    AdmitRequest {
        estimate: WorkEstimate {
            initial_seats: seats,
            ..WorkEstimate::ONE
        },
        hash,
        flow: FlowMeta {
            flow_schema: Arc::from("service-accounts"),
            flow_distinguisher: "alice".into(),
            details: None,
            mutating: false,
        },
        wait_limit: Duration::from_secs(15),
    }
}

/// Polls a future once, as a runtime would before the caller goes away.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    std::pin::Pin::new(f).poll(&mut Context::from_waker(noop_waker_ref()))
}

#[test]
fn wait_limit_is_a_quarter_of_the_timeout_capped_at_a_minute() {
    let cases = [(60, 15_000), (10, 2_500), (600, 60_000), (0, 0)];
    for (timeout_s, want_ms) in cases {
        assert_eq!(
            wait_limit(Duration::from_secs(timeout_s)),
            Duration::from_millis(want_ms)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn exempt_level_admits_at_once_and_counts_seats() {
    let l = level(QueuingConfig::Exempt, 0);
    let a = l.admit(req(3, 1)).await.expect("exempt");
    let b = l.admit(req(3, 2)).await.expect("exempt");
    assert_eq!(l.stats().seats_in_use, 6);
    drop((a, b));
    assert_eq!(l.stats().seats_in_use, 0);
    assert_eq!(l.stats().counters.dispatched, 2);
}

#[tokio::test(start_paused = true)]
async fn queued_request_runs_when_a_seat_is_dropped_at_body_end() {
    let l = level(queued(8, 2, 50), 1);
    let first = l.admit(req(1, 1)).await.expect("free seat");
    let l2 = Arc::clone(&l);
    let waiter = tokio::spawn(async move { l2.admit(req(1, 2)).await });
    tokio::task::yield_now().await;
    assert_eq!(l.stats().waiting, 1);
    tokio::time::advance(Duration::from_millis(200)).await;
    // The "response body" owns the seat; its end drops it.
    struct Body {
        _seat: Seat,
    }
    let body = Body { _seat: first };
    drop(body);
    let second = waiter.await.expect("task").expect("dispatched");
    assert_eq!(second.waited(), Duration::from_millis(200));
    assert_eq!(&**second.priority_level(), "workload-low");
    assert_eq!(l.stats().seats_in_use, 1);
}

#[tokio::test(start_paused = true)]
async fn waiting_past_the_limit_is_rejected_with_time_out() {
    let l = level(queued(8, 2, 50), 1);
    let _held = l.admit(req(1, 1)).await.expect("free seat");
    let started = Instant::now();
    let err = l.admit(req(1, 2)).await.expect_err("times out");
    assert_eq!(err.reason, RejectReason::TimeOut);
    assert_eq!(err.waited, Duration::from_secs(15));
    assert_eq!(started.elapsed(), Duration::from_secs(15));
    assert_eq!(&*err.priority_level, "workload-low");
    assert_eq!(
        err.to_string(),
        "too many requests: time-out at priority level workload-low"
    );
    let s = l.stats();
    assert_eq!((s.waiting, s.counters.timed_out), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn full_queue_and_reject_level_refuse_at_once() {
    let l = level(queued(1, 1, 1), 1);
    let _held = l.admit(req(1, 1)).await.expect("free seat");
    let mut waiting = Box::pin(l.admit(req(1, 1)));
    assert!(poll_once(&mut waiting).is_pending());
    let err = l.admit(req(1, 1)).await.expect_err("queue full");
    assert_eq!(
        (err.reason, err.waited),
        (RejectReason::QueueFull, Duration::ZERO)
    );

    let r = level(QueuingConfig::Reject, 1);
    let _held = r.admit(req(1, 1)).await.expect("free seat");
    let err = r.admit(req(1, 1)).await.expect_err("no room");
    assert_eq!(err.reason, RejectReason::ConcurrencyLimit);
}

#[tokio::test(start_paused = true)]
async fn cancelled_waiter_leaves_its_queue_at_once() {
    let l = level(queued(8, 2, 50), 1);
    let held = l.admit(req(1, 1)).await.expect("free seat");
    let mut fut = Box::pin(l.admit(req(1, 2)));
    assert!(poll_once(&mut fut).is_pending());
    assert_eq!(l.stats().waiting, 1);
    drop(fut);
    let s = l.stats();
    assert_eq!(
        (s.waiting, s.seats_waiting, s.counters.cancelled),
        (0, 0, 1)
    );
    drop(held);
    assert_eq!(l.stats().counters.dispatched, 1, "nobody left to dispatch");
}

#[tokio::test(start_paused = true)]
async fn admission_starts_at_the_first_poll_and_a_waiter_keeps_no_copy_of_its_request() {
    let l = level(queued(8, 2, 50), 1);
    let held = l.admit(req(1, 1)).await.expect("free seat");
    // Made, never polled: the queue set has not seen it, and dropping it changes nothing.
    let unpolled = l.admit(req(1, 2));
    assert_eq!(l.stats().waiting, 0);
    drop(unpolled);
    assert_eq!(l.stats().counters.cancelled, 0);
    // A waiting admission holds its guard and its timer, not the request it was given (the
    // `async fn` it replaced held three copies of it: 464 bytes).
    let mut waiting = Box::pin(l.admit(req(1, 3)));
    assert!(poll_once(&mut waiting).is_pending());
    assert_eq!(l.stats().waiting, 1);
    let (size, request) = (size_of_val(&*waiting), size_of::<AdmitRequest>());
    assert!(size < 2 * request, "{size} bytes, the request {request}");
    drop(held);
    let seat = waiting.await.expect("dispatched when the seat is freed");
    assert_eq!(l.stats().executing, 1);
    drop(seat);
}

#[tokio::test(start_paused = true)]
async fn waiter_dispatched_as_its_caller_leaves_gives_the_seat_back() {
    let l = level(queued(8, 2, 50), 1);
    let held = l.admit(req(1, 1)).await.expect("free seat");
    let mut fut = Box::pin(l.admit(req(1, 2)));
    assert!(poll_once(&mut fut).is_pending());
    drop(held);
    assert_eq!(l.stats().executing, 1, "dispatched, not yet observed");
    drop(fut);
    let s = l.stats();
    assert_eq!(
        (s.executing, s.seats_in_use, s.counters.dispatched),
        (0, 0, 2)
    );
}

#[tokio::test(start_paused = true)]
async fn seat_is_released_on_error_paths_and_task_cancellation() {
    let l = level(queued(8, 2, 50), 2);
    async fn handler(seat: Seat) -> Result<(), &'static str> {
        let _seat = seat;
        Err("upstream failed")
    }
    let seat = l.admit(req(1, 1)).await.expect("free seat");
    assert!(handler(seat).await.is_err());
    assert_eq!(l.stats().seats_in_use, 0);

    let seat = l.admit(req(1, 1)).await.expect("free seat");
    let task = tokio::spawn(async move {
        let _seat = seat;
        std::future::pending::<()>().await;
    });
    tokio::task::yield_now().await;
    assert_eq!(l.stats().seats_in_use, 1);
    task.abort();
    assert!(task.await.expect_err("aborted").is_cancelled());
    assert_eq!(l.stats().seats_in_use, 0);
}

#[tokio::test(start_paused = true)]
async fn watch_releases_its_seats_early_exactly_once() {
    let l = level(queued(8, 2, 50), 1);
    let mut watch = l.admit(req(1, 1)).await.expect("free seat");
    let l2 = Arc::clone(&l);
    let next = tokio::spawn(async move { l2.admit(req(1, 2)).await });
    tokio::task::yield_now().await;
    watch.finish_early();
    assert!(!watch.is_held());
    let next = next
        .await
        .expect("task")
        .expect("dispatched by the early release");
    watch.finish_early();
    drop(watch);
    let s = l.stats();
    assert_eq!(
        (s.executing, s.seats_in_use),
        (1, 1),
        "the stream goes on seatless"
    );
    drop(next);
    assert_eq!(l.stats().seats_in_use, 0);
}

#[tokio::test(start_paused = true)]
async fn final_seats_are_held_for_the_additional_latency_without_delaying_the_caller() {
    let l = level(queued(8, 2, 50), 4);
    let mut r = req(1, 1);
    r.estimate = WorkEstimate {
        initial_seats: 1,
        final_seats: 4,
        additional_latency: Duration::from_millis(50),
    };
    let seat = l.admit(r).await.expect("free seat");
    let started = Instant::now();
    drop(seat);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!((l.stats().executing, l.stats().seats_in_use), (0, 4));
    let l2 = Arc::clone(&l);
    let next = tokio::spawn(async move { l2.admit(req(1, 2)).await });
    tokio::time::sleep(Duration::from_millis(49)).await;
    assert_eq!(l.stats().waiting, 1);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let next = next.await.expect("task").expect("dispatched");
    assert_eq!(next.waited(), Duration::from_millis(50));
    assert_eq!(l.stats().seats_in_use, 1);
}

#[test]
fn flow_hash_is_the_apiservers_sha256_prefix() {
    assert_eq!(
        crate::classify::flow_hash("service-accounts", "alice"),
        14505522530951734521
    );
    assert_eq!(
        crate::classify::flow_hash("catch-all", ""),
        7733929212674924205
    );
}

#[derive(Default)]
struct Recorder(parking_lot::Mutex<Vec<String>>);

impl LevelObserver for Recorder {
    fn enqueued(&self, pl: &str, fs: &str, seats: u32, queue_length: usize) {
        self.push(format!("enqueued {pl} {fs} {seats} len={queue_length}"));
    }
    fn dequeued(&self, _: &str, _: &str, seats: u32, dispatched: bool) {
        self.push(format!("dequeued {seats} dispatched={dispatched}"));
    }
    fn cancelled(&self, _: &str, _: &str, waited: Duration) {
        self.push(format!("cancelled after {waited:?}"));
    }
    fn seats_changed(&self, _: &str, _: &str, delta: i64) {
        self.push(format!("seats {delta:+}"));
    }
    fn waiting_changed(&self, mutating: bool, delta: i64) {
        self.push(format!("waiting mutating={mutating} {delta:+}"));
    }
}

impl Recorder {
    fn push(&self, s: String) {
        self.0.lock().push(s);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock())
    }
}

#[tokio::test(start_paused = true)]
async fn observer_sees_queueing_and_seats_per_flow_schema() {
    let rec = Arc::new(Recorder::default());
    let l = LevelQueues::with_observer(
        Arc::from("workload-low"),
        queued(8, 2, 50),
        2,
        Instant::now(),
        Some(rec.clone()),
    )
    .expect("valid");
    let mut wide = req(2, 1);
    wide.estimate.final_seats = 2;
    wide.estimate.additional_latency = Duration::from_millis(10);
    let first = l.admit(wide).await.expect("free seats");
    assert_eq!(rec.take(), vec!["seats +2"]);

    let mut mutating = req(1, 2);
    mutating.flow.mutating = true;
    let mut waiting = Box::pin(l.admit(mutating));
    assert!(poll_once(&mut waiting).is_pending());
    tokio::time::advance(Duration::from_millis(5)).await;
    drop(waiting);
    assert_eq!(
        rec.take(),
        vec![
            "enqueued workload-low service-accounts 1 len=1",
            "waiting mutating=true +1",
            "dequeued 1 dispatched=false",
            "waiting mutating=true -1",
            "cancelled after 5ms",
        ]
    );

    let l2 = Arc::clone(&l);
    let next = tokio::spawn(async move { l2.admit(req(1, 3)).await });
    tokio::task::yield_now().await;
    drop(first);
    assert_eq!(
        rec.take(),
        vec![
            "enqueued workload-low service-accounts 1 len=1",
            "waiting mutating=false +1"
        ]
    );
    let second = next
        .await
        .expect("task")
        .expect("dispatched after the lingering");
    assert_eq!(
        rec.take(),
        vec![
            "seats -2",
            "dequeued 1 dispatched=true",
            "waiting mutating=false -1",
            "seats +1"
        ]
    );
    drop(second);
    assert_eq!(rec.take(), vec!["seats -1"]);
}
