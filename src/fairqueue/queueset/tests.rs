use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::fairqueue::WorkEstimate;

mod fairness;
mod prop;
mod twin;

pub(super) fn est(initial: u32, final_seats: u32, latency_ms: u64) -> WorkEstimate {
    WorkEstimate {
        initial_seats: initial,
        final_seats,
        additional_latency: Duration::from_millis(latency_ms),
    }
}

pub(super) fn arrival(estimate: WorkEstimate, hash: u64) -> Arrival {
    Arrival {
        estimate,
        hash,
        deadline: None,
        flow: FlowMeta {
            flow_schema: Arc::from("fs"),
            flow_distinguisher: format!("flow-{hash}").into(),
            details: None,
            mutating: false,
        },
    }
}

pub(super) fn queued(queues: u32, hand_size: u32, queue_length_limit: u32) -> QueuingConfig {
    QueuingConfig::Queue(QueueShape {
        queues,
        hand_size,
        queue_length_limit,
    })
}

fn id_of(s: Started) -> RequestId {
    match s {
        Started::Executing(id) | Started::Queued(id) => id,
        Started::Rejected(r) => panic!("rejected: {r:?}"),
    }
}

fn dispatched(qs: &mut QueueSet) -> Vec<RequestId> {
    qs.drain_events()
        .filter(|e| e.kind == EventKind::Dispatched)
        .map(|e| e.id)
        .collect()
}

#[test]
fn exempt_level_always_executes_and_counts_its_seats() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(QueuingConfig::Exempt, 0, t0).expect("valid");
    for i in 0..5 {
        assert!(matches!(
            qs.start_request(t0, arrival(est(3, 0, 0), i)),
            Started::Executing(_)
        ));
    }
    assert_eq!(
        (qs.seats_in_use(), qs.executing(), qs.seat_demand()),
        (15, 5, 15)
    );
    assert_eq!(qs.counters().dispatched, 5);
}

#[test]
fn reject_level_rejects_with_concurrency_limit_when_seats_run_out() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(QueuingConfig::Reject, 3, t0).expect("valid");
    let a = id_of(qs.start_request(t0, arrival(est(2, 0, 0), 1)));
    assert_eq!(
        qs.start_request(t0, arrival(est(2, 0, 0), 2)),
        Started::Rejected(RejectReason::ConcurrencyLimit)
    );
    assert!(matches!(
        qs.start_request(t0, arrival(est(1, 0, 0), 3)),
        Started::Executing(_)
    ));
    qs.finish(a, t0).expect("executing");
    assert_eq!(qs.counters().rejected, 1);
    assert_eq!(RejectReason::ConcurrencyLimit.as_str(), "concurrency-limit");
}

#[test]
fn request_wider_than_the_limit_runs_alone() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 10), 2, t0).expect("valid");
    let small = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 1)));
    let wide = qs.start_request(t0, arrival(est(5, 0, 0), 2));
    assert!(
        matches!(wide, Started::Queued(_)),
        "waits for the small one"
    );
    let later = qs.start_request(t0, arrival(est(1, 0, 0), 3));
    assert!(
        matches!(later, Started::Queued(_)),
        "no skipping the wide head"
    );
    qs.finish(small, t0).expect("executing");
    assert_eq!(dispatched(&mut qs), vec![id_of(wide)]);
    assert_eq!(qs.seats_in_use(), 5, "alone, above the limit");
    qs.finish(id_of(wide), t0).expect("executing");
    assert_eq!(dispatched(&mut qs), vec![id_of(later)]);
}

#[test]
fn queue_full_only_when_seats_in_use_reach_the_limit() {
    let t0 = Instant::now();
    // One queue, room for one waiting request.
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 1), 4, t0).expect("valid");
    id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0)));
    // 1 seat in use + 4 do not fit: the wide request waits.
    assert!(matches!(
        qs.start_request(t0, arrival(est(4, 0, 0), 0)),
        Started::Queued(_)
    ));
    // The queue is full but seats in use (1) < limit (4): still accepted.
    assert!(matches!(
        qs.start_request(t0, arrival(est(1, 0, 0), 0)),
        Started::Queued(_)
    ));
    // Fill the seats: now a full queue rejects.
    let mut qs2: QueueSet = QueueSet::new(queued(1, 1, 1), 1, t0).expect("valid");
    id_of(qs2.start_request(t0, arrival(est(1, 0, 0), 0)));
    assert!(matches!(
        qs2.start_request(t0, arrival(est(1, 0, 0), 0)),
        Started::Queued(_)
    ));
    assert_eq!(
        qs2.start_request(t0, arrival(est(1, 0, 0), 0)),
        Started::Rejected(RejectReason::QueueFull)
    );
    assert_eq!(qs2.counters().rejected, 1);
}

#[test]
fn arrivals_to_empty_queues_rotate_through_the_hand() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(64, 4, 50), 1000, t0).expect("valid");
    let hand = Dealer::new(64, 4).expect("valid").deal(12345);
    for k in 0..8 {
        let id = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 12345)));
        assert_eq!(qs.queue_of(id), Some(hand.as_slice()[k % 4]), "arrival {k}");
    }
}

#[test]
fn picks_the_queue_with_the_least_waiting_work_in_the_hand() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(8, 3, 50), 0, t0).expect("valid");
    let hand: Vec<usize> = Dealer::new(8, 3)
        .expect("valid")
        .deal(7)
        .as_slice()
        .to_vec();
    // Three arrivals fill the three queues of the hand with 1, 2 and 3 seats of work.
    for seats in 1..=3 {
        id_of(qs.start_request(t0, arrival(est(seats, 0, 0), 7)));
    }
    let lens: Vec<usize> = hand.iter().map(|&q| qs.queue_len(q)).collect();
    assert_eq!(lens, vec![1, 1, 1]);
    // The next one goes to the queue holding the least work (1 seat): hand[0].
    let id = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 7)));
    assert_eq!(qs.queue_of(id), Some(hand[0]));
}

#[test]
fn dispatch_alternates_between_flows_by_virtual_finish_time() {
    let t0 = Instant::now();
    // Two queues, hand 1: hash h lands in queue h % 2.
    let mut qs: QueueSet = QueueSet::new(queued(2, 1, 50), 1, t0).expect("valid");
    let first = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0)));
    let a: Vec<_> = (0..3)
        .map(|_| id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0))))
        .collect();
    let b: Vec<_> = (0..3)
        .map(|_| id_of(qs.start_request(t0, arrival(est(1, 0, 0), 1))))
        .collect();
    let mut order = Vec::new();
    let mut running = first;
    let mut t = t0;
    for _ in 0..6 {
        t += ESTIMATED_SERVICE_DURATION;
        qs.finish(running, t).expect("executing");
        let next = dispatched(&mut qs);
        assert_eq!(next.len(), 1);
        running = next[0];
        order.push(running);
    }
    assert_eq!(order, vec![b[0], a[0], b[1], a[1], b[2], a[2]]);
}

#[test]
fn head_of_line_blocks_narrower_requests_elsewhere() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(2, 1, 50), 2, t0).expect("valid");
    id_of(qs.start_request(t0, arrival(est(1, 0, 0), 1)));
    let wide = qs.start_request(t0, arrival(est(2, 0, 0), 0));
    // Fits (1 seat) but has a later virtual finish (1 s of final work).
    let narrow = qs.start_request(t0, arrival(est(1, 1, 1000), 1));
    assert!(matches!(wide, Started::Queued(_)));
    assert!(matches!(narrow, Started::Queued(_)));
    assert_eq!(qs.counters().no_accommodation, 2);
}

#[test]
fn dispatch_readings_and_notes_of_heads_that_do_not_fit() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(2, 1, 50), 2, t0).expect("valid");
    qs.keep_notes();
    assert_eq!(qs.dispatch_readings(), None);
    // A queuing level dispatches every request from a queue, the first one too (as the
    // apiserver's queue set does).
    let running = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 1)));
    let first = qs.dispatch_readings().expect("dispatched from a queue");
    // Nothing waits: the bounds are that dispatch's S.
    assert_eq!((first.s_min, first.s_max), (first.s, first.s));
    assert_eq!(qs.drain_notes().count(), 0);
    // Two seats wide with one free: queued, and the head does not fit.
    let wide = id_of(qs.start_request(t0, arrival(est(2, 0, 0), 0)));
    let notes: Vec<Note> = qs.drain_notes().collect();
    assert_eq!(
        notes,
        [Note::NoAccommodation {
            flow_schema: Arc::from("fs")
        }]
    );
    // One queue waits now; the other executes one seat for about 3 ms of estimated work.
    let waiting = qs.dispatch_readings().expect("readings");
    assert_eq!(waiting.s_min, waiting.s_max);
    assert_eq!(
        waiting.discounted_s_min, waiting.s_min,
        "nothing of that queue executes"
    );

    let t1 = t0 + Duration::from_millis(5);
    qs.finish(running, t1).expect("executing");
    assert_eq!(dispatched(&mut qs), [wide]);
    let d = qs.dispatch_readings().expect("readings");
    assert_eq!(d.r, qs.current_r().to_f64());
    assert!(d.r > 0.0, "R moved while the first request ran: {d:?}");
    assert_eq!(d.s, waiting.s_min, "dispatched at the S it waited with");
    assert!(
        d.s <= d.r,
        "dispatched at or after its virtual start: {d:?}"
    );

    // Without keep_notes no note is kept; the counter still counts.
    let mut quiet: QueueSet = QueueSet::new(queued(2, 1, 50), 2, t0).expect("valid");
    id_of(quiet.start_request(t0, arrival(est(1, 0, 0), 1)));
    id_of(quiet.start_request(t0, arrival(est(2, 0, 0), 0)));
    assert_eq!(quiet.drain_notes().count(), 0);
    assert_eq!(quiet.counters().no_accommodation, 1);
}

#[test]
fn completion_charges_the_queue_its_real_duration() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 50), 1, t0).expect("valid");
    let id = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0)));
    assert_eq!(
        qs.dump().queues[0].next_dispatch_r.to_string(),
        "0.00300000ss"
    );
    qs.finish(id, t0 + Duration::from_secs(1))
        .expect("executing");
    // 3 ms estimated − (3 ms − 1 s) = 1 s.
    assert_eq!(
        qs.dump().queues[0].next_dispatch_r.to_string(),
        "1.00000000ss"
    );
    assert_eq!(qs.current_r().to_string(), "1.00000000ss");
}

#[test]
fn final_seats_linger_after_finish_and_then_dispatch() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 50), 3, t0).expect("valid");
    let a = id_of(qs.start_request(t0, arrival(est(1, 3, 50), 0)));
    let b = qs.start_request(t0, arrival(est(1, 0, 0), 0));
    assert!(matches!(b, Started::Queued(_)));
    let fin = qs.finish(a, t0).expect("executing");
    assert_eq!(fin.linger, Some(Duration::from_millis(50)));
    assert_eq!(qs.state(a), Some(RequestState::Lingering));
    assert_eq!((qs.seats_in_use(), qs.executing()), (3, 0));
    assert!(dispatched(&mut qs).is_empty());
    qs.release_final_seats(a, t0 + Duration::from_millis(50))
        .expect("lingering");
    assert_eq!(dispatched(&mut qs), vec![id_of(b)]);
    assert_eq!(qs.state(a), None);
}

#[test]
fn final_seats_are_clamped_to_the_limit_keeping_the_work() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 50), 2, t0).expect("valid");
    let id = id_of(qs.start_request(t0, arrival(est(1, 10, 5), 0)));
    let d = qs.dump();
    let e = d.queues[0].executing[0].estimate;
    assert_eq!(e.final_seats, 2);
    assert_eq!(e.additional_latency, Duration::from_millis(25));
    assert_eq!(qs.seats_in_use(), 2);
    qs.finish(id, t0).expect("executing");
    qs.release_final_seats(id, t0).expect("lingering");
    assert_eq!((qs.seats_in_use(), qs.seats_waiting()), (0, 0));
}

#[test]
fn raising_the_limit_dispatches_waiting_requests() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(4, 2, 50), 0, t0).expect("valid");
    let ids: Vec<_> = (0..3)
        .map(|h| id_of(qs.start_request(t0, arrival(est(1, 0, 0), h))))
        .collect();
    assert_eq!(qs.waiting(), 3);
    assert_eq!(qs.seat_demand(), 3);
    qs.set_concurrency_limit(2, t0);
    assert_eq!(dispatched(&mut qs).len(), 2);
    assert_eq!(qs.waiting(), 1);
    for id in ids {
        let _ = qs.finish(id, t0);
    }
    assert_eq!(qs.waiting(), 0);
}

#[test]
fn shrinking_the_queue_count_keeps_queued_requests_until_they_drain() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(8, 1, 50), 0, t0).expect("valid");
    // hand 1 of deck 8: hash 7 lands in queue 7.
    let w = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 7)));
    assert_eq!(qs.queue_of(w), Some(7));
    qs.reconfigure(queued(2, 1, 50), t0).expect("valid");
    // Like the apiserver, any empty queue goes while there are too many; the one holding a
    // request stays, renumbered.
    assert_eq!(qs.num_queues(), 2);
    assert_eq!(qs.queue_of(w), Some(1));
    qs.set_concurrency_limit(1, t0);
    assert_eq!(dispatched(&mut qs), vec![w]);
    qs.finish(w, t0).expect("executing");
    assert_eq!(qs.num_queues(), 2);
    assert_eq!(qs.state(w), None);
}

#[test]
fn switching_to_reject_and_back_keeps_requests_and_queuing_parameters() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(4, 2, 7), 1, t0).expect("valid");
    let run = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 1)));
    let wait = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 1)));
    qs.reconfigure(QueuingConfig::Reject, t0).expect("valid");
    assert_eq!(qs.hand_size_and_queue_length_limit(), (2, 7));
    assert_eq!(
        qs.start_request(t0, arrival(est(1, 0, 0), 1)),
        Started::Rejected(RejectReason::ConcurrencyLimit)
    );
    qs.finish(run, t0).expect("executing");
    assert_eq!(dispatched(&mut qs), vec![wait], "the queue still drains");
    qs.finish(wait, t0).expect("executing");
    assert_eq!(qs.num_queues(), 0);
    qs.reconfigure(queued(16, 4, 9), t0).expect("valid");
    assert_eq!(qs.num_queues(), 16);
    assert!(qs.reconfigure(queued(4, 5, 9), t0).is_err());
}

#[test]
fn waiting_request_times_out_at_its_deadline() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 50), 0, t0).expect("valid");
    let mut a = arrival(est(1, 0, 0), 0);
    a.deadline = Some(t0 + Duration::from_secs(15));
    let id = id_of(qs.start_request(t0, a));
    assert_eq!(qs.next_deadline(), Some(t0 + Duration::from_secs(15)));
    qs.tick(t0 + Duration::from_millis(14_999));
    assert_eq!(qs.state(id), Some(RequestState::Waiting));
    qs.tick(t0 + Duration::from_secs(15));
    let ev: Vec<_> = qs.drain_events().map(|e| (e.id, e.kind)).collect();
    assert_eq!(ev, vec![(id, EventKind::TimedOut)]);
    assert_eq!(qs.state(id), None);
    assert_eq!(qs.counters().timed_out, 1);
    assert_eq!(qs.counters().as_reference(), (1, 0, 1));
    assert_eq!(qs.next_deadline(), None);
}

#[test]
fn cancelled_request_leaves_its_queue_at_once() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 50), 0, t0).expect("valid");
    let a = id_of(qs.start_request(t0, arrival(est(2, 0, 0), 0)));
    let b = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0)));
    assert!(qs.cancel(a, t0, Removal::Cancelled));
    assert!(!qs.cancel(a, t0, Removal::Cancelled), "only once");
    assert_eq!((qs.waiting(), qs.seats_waiting()), (1, 1));
    assert_eq!(qs.dump().queues[0].waiting.len(), 1);
    assert_eq!(qs.counters().cancelled, 1);
    assert_eq!(qs.state(b), Some(RequestState::Waiting));
}

#[test]
fn finishing_twice_or_with_a_stale_id_is_an_error() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 50), 1, t0).expect("valid");
    let a = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0)));
    qs.finish(a, t0).expect("executing");
    assert_eq!(qs.finish(a, t0), Err(QueueSetError::UnknownRequest));
    // The slot is reused with a new generation: the old id stays dead.
    let b = id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0)));
    assert_ne!(a, b);
    assert_eq!(qs.finish(a, t0), Err(QueueSetError::UnknownRequest));
    assert_eq!(
        qs.release_final_seats(b, t0),
        Err(QueueSetError::WrongPhase("lingering"))
    );
}

#[test]
fn virtual_time_advances_at_the_shared_rate() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(2, 1, 50), 4, t0).expect("valid");
    id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0)));
    id_of(qs.start_request(t0, arrival(est(1, 0, 0), 1)));
    // Two active queues, 2 seats requested: R advances at min(2, 4) / 2 = 1 per second.
    qs.tick(t0 + Duration::from_secs(2));
    assert_eq!(qs.current_r().to_string(), "2.00000000ss");
}

#[test]
fn epoch_advance_winds_back_r_and_every_reading() {
    let t0 = Instant::now();
    let mut qs: QueueSet = QueueSet::new(queued(1, 1, 50), 0, t0).expect("valid");
    let high_r = u64::MAX / 2 + u64::MAX / 4;
    qs.set_current_r_for_test(SeatSeconds::from_units(high_r - 1));
    id_of(qs.start_request(t0, arrival(est(1, 0, 0), 0)));
    assert_eq!(qs.counters().epoch_advances, [0, 0]);
    qs.set_current_r_for_test(SeatSeconds::from_units(high_r + 7));
    qs.tick(t0);
    let d = qs.dump();
    assert_eq!(d.current_r.units(), high_r + 7 - u64::MAX / 2);
    assert_eq!(
        d.queues[0].next_dispatch_r.units(),
        high_r - 1 - u64::MAX / 2
    );
    assert_eq!(qs.counters().epoch_advances, [1, 0]);
}
