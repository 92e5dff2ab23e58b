//! The direct dispatch of an arrival that nothing waits before against the queued path it
//! shortens: two queue sets, one of them always enqueuing, take the same random calls and must
//! answer the same and end every step in the same state.

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Arrive {
        seats: u32,
        final_seats: u32,
        linger_ms: u64,
        hash: u64,
        wait_ms: u64,
    },
    Finish(usize),
    ReleaseFinal(usize),
    Cancel(usize),
    SetLimit(u32),
    Queues(u32),
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u32..=6, 0u32..=9, 0u64..=20, any::<u64>(), 1u64..=300).prop_map(
            |(seats, final_seats, linger_ms, hash, wait_ms)| Op::Arrive {
                seats,
                final_seats,
                linger_ms,
                hash,
                wait_ms,
            }
        ),
        4 => any::<usize>().prop_map(Op::Finish),
        2 => any::<usize>().prop_map(Op::ReleaseFinal),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => (0u32..=8).prop_map(Op::SetLimit),
        1 => (1u32..=8).prop_map(Op::Queues),
        1 => Just(Op::Tick),
    ]
}

/// Everything a queue set holds, in a comparable form.
fn state(qs: &QueueSet) -> String {
    format!(
        "{:?}",
        (
            (
                &qs.queues,
                &qs.by_finish,
                &qs.deadlines,
                qs.last_dispatch,
                qs.current_r,
                qs.last_real_time,
                qs.robin_index,
                qs.enqueues,
            ),
            (
                qs.waiting,
                qs.executing,
                qs.seats_in_use,
                qs.seats_waiting,
                qs.queued_seats_in_use,
                qs.active_queues,
                qs.counters,
                &qs.notes,
            ),
            qs.dump(),
            qs.store
                .iter()
                .map(|(id, e)| (id, e.phase))
                .collect::<Vec<_>>(),
            qs.dispatch_readings(),
        )
    )
}

fn events(qs: &mut QueueSet) -> Vec<(RequestId, EventKind)> {
    qs.drain_events().map(|e| (e.id, e.kind)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn direct_dispatch_leaves_what_enqueuing_and_dispatching_leaves(
        queues in 1u32..=8,
        hand in 1u32..=4,
        qll in 0u32..=4,
        cl in 0u32..=8,
        ops in proptest::collection::vec((0u64..40, op()), 1..200),
    ) {
        let hand = hand.min(queues);
        let t0 = Instant::now();
        let mut fast = QueueSet::new(queued(queues, hand, qll), cl, t0).expect("valid");
        let mut slow = QueueSet::new(queued(queues, hand, qll), cl, t0).expect("valid");
        fast.keep_notes();
        slow.keep_notes();
        slow.always_enqueue_for_test();
        let mut now = t0;
        let mut executing: Vec<RequestId> = Vec::new();
        let mut lingering: Vec<RequestId> = Vec::new();
        for (dt, op) in ops {
            now += Duration::from_millis(dt);
            match op {
                Op::Arrive { seats, final_seats, linger_ms, hash, wait_ms } => {
                    let mut a = arrival(est(seats, final_seats, linger_ms), hash);
                    a.deadline = Some(now + Duration::from_millis(wait_ms));
                    let started = fast.start_request(now, a.clone());
                    prop_assert_eq!(started, slow.start_request(now, a));
                    if let Started::Executing(id) = started {
                        executing.push(id);
                    }
                }
                Op::Finish(k) if !executing.is_empty() => {
                    let id = executing.swap_remove(k % executing.len());
                    let fin = fast.finish(id, now);
                    prop_assert_eq!(&fin, &slow.finish(id, now));
                    if matches!(fin, Ok(Finished { linger: Some(_) })) {
                        lingering.push(id);
                    }
                }
                Op::ReleaseFinal(k) if !lingering.is_empty() => {
                    let id = lingering.swap_remove(k % lingering.len());
                    prop_assert_eq!(
                        fast.release_final_seats(id, now),
                        slow.release_final_seats(id, now)
                    );
                }
                Op::Cancel(k) => {
                    let waiting: Vec<RequestId> = fast
                        .store
                        .iter()
                        .filter(|(_, e)| matches!(e.phase, Phase::Waiting { .. }))
                        .map(|(id, _)| id)
                        .collect();
                    if !waiting.is_empty() {
                        let id = waiting[k % waiting.len()];
                        prop_assert_eq!(
                            fast.cancel(id, now, Removal::Cancelled),
                            slow.cancel(id, now, Removal::Cancelled)
                        );
                    }
                }
                Op::SetLimit(cl) => {
                    fast.set_concurrency_limit(cl, now);
                    slow.set_concurrency_limit(cl, now);
                }
                Op::Queues(n) => {
                    let config = queued(n, hand.min(n), qll);
                    prop_assert_eq!(fast.reconfigure(config, now), slow.reconfigure(config, now));
                }
                Op::Tick | Op::Finish(_) | Op::ReleaseFinal(_) => {
                    fast.tick(now);
                    slow.tick(now);
                }
            }
            let dispatched = events(&mut fast);
            prop_assert_eq!(&dispatched, &events(&mut slow));
            executing.extend(
                dispatched
                    .iter()
                    .filter(|(_, kind)| *kind == EventKind::Dispatched)
                    .map(|(id, _)| *id),
            );
            prop_assert_eq!(
                fast.drain_notes().collect::<Vec<_>>(),
                slow.drain_notes().collect::<Vec<_>>()
            );
            prop_assert_eq!(state(&fast), state(&slow));
        }
    }
}
