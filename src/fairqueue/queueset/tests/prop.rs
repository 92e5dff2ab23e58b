//! Property tests: random arrivals, widths, durations, cancellations and limit changes against
//! the sans-I/O queue set, checked against a small model after every step.

use std::collections::{HashMap, VecDeque};

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
    Cancel(usize),
    SetLimit(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u32..=6, 0u32..=4, 0u64..=20, 0u64..16, 1u64..=300).prop_map(
            |(seats, final_seats, linger_ms, hash, wait_ms)| Op::Arrive {
                seats,
                final_seats,
                linger_ms,
                hash,
                wait_ms,
            }
        ),
        4 => any::<usize>().prop_map(Op::Finish),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => (0u32..=8).prop_map(Op::SetLimit),
    ]
}

struct Waiting {
    queue: usize,
    deadline: Instant,
}

#[derive(Default)]
struct Model {
    arrived: u64,
    waiting: HashMap<RequestId, Waiting>,
    fifo: HashMap<usize, VecDeque<RequestId>>,
    seats: HashMap<RequestId, u32>,
    executing: Vec<RequestId>,
    lingering: Vec<(Instant, RequestId)>,
    finished: u64,
}

struct Harness {
    qs: QueueSet,
    m: Model,
    now: Instant,
}

impl Harness {
    /// Moves time to `t`, stopping at every deadline and every end of lingering on the way.
    fn advance_to(&mut self, t: Instant) -> Result<(), TestCaseError> {
        loop {
            let linger = self.m.lingering.iter().map(|(d, _)| *d).min();
            let next = match (self.qs.next_deadline(), linger) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(x) => x,
                    None => break,
                },
            };
            if next > t {
                break;
            }
            self.now = self.now.max(next);
            if let Some(pos) = self.m.lingering.iter().position(|(d, _)| *d == next) {
                let (_, id) = self.m.lingering.swap_remove(pos);
                self.step(|qs, now| {
                    qs.release_final_seats(id, now).expect("lingering");
                })?;
            } else {
                self.step(|qs, now| qs.tick(now))?;
            }
            self.check_counts()?;
        }
        self.now = self.now.max(t);
        Ok(())
    }

    /// Runs one call and checks what it did against the model.
    fn step(&mut self, f: impl FnOnce(&mut QueueSet, Instant)) -> Result<(), TestCaseError> {
        f(&mut self.qs, self.now);
        let events: Vec<_> = self.qs.drain_events().map(|e| (e.id, e.kind)).collect();
        let mut dispatched = Vec::new();
        for (id, kind) in events {
            let w = self
                .m
                .waiting
                .remove(&id)
                .expect("event for a waiting request");
            let fifo = self.m.fifo.get_mut(&w.queue).expect("queue");
            match kind {
                EventKind::Dispatched => {
                    prop_assert_eq!(fifo.pop_front(), Some(id), "FIFO within a queue");
                    prop_assert!(self.now < w.deadline, "dispatched after its deadline");
                    self.m.executing.push(id);
                    dispatched.push(id);
                }
                EventKind::TimedOut => {
                    prop_assert_eq!(self.now, w.deadline, "timed out exactly at its deadline");
                    fifo.retain(|x| *x != id);
                }
            }
        }
        self.check_limit(&dispatched)
    }

    fn check_limit(&self, dispatched: &[RequestId]) -> Result<(), TestCaseError> {
        let cl = u64::from(self.qs.concurrency_limit());
        if self.qs.seats_in_use() > cl && !dispatched.is_empty() {
            prop_assert_eq!(
                dispatched.len(),
                1,
                "only a lone wide request exceeds the limit"
            );
            prop_assert!(u64::from(self.m.seats[&dispatched[0]]) > cl);
            prop_assert_eq!(self.qs.executing(), 1, "it runs alone");
        }
        Ok(())
    }

    fn check_counts(&self) -> Result<(), TestCaseError> {
        prop_assert_eq!(self.qs.waiting() as usize, self.m.waiting.len());
        prop_assert_eq!(self.qs.executing() as usize, self.m.executing.len());
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Arrive {
                seats,
                final_seats,
                linger_ms,
                hash,
                wait_ms,
            } => {
                let mut a = arrival(est(seats, final_seats, linger_ms), hash);
                let deadline = self.now + Duration::from_millis(wait_ms);
                a.deadline = Some(deadline);
                self.m.arrived += 1;
                let mut started = None;
                let now = self.now;
                self.step(|qs, _| started = Some(qs.start_request(now, a)))?;
                match started.expect("called") {
                    Started::Executing(id) => {
                        self.m.seats.insert(id, seats.max(final_seats));
                        self.m.executing.push(id);
                        self.check_limit(&[id])?;
                    }
                    Started::Queued(id) => {
                        let queue = self.qs.queue_of(id).expect("queued");
                        self.m.seats.insert(id, seats.max(final_seats));
                        self.m.waiting.insert(id, Waiting { queue, deadline });
                        self.m.fifo.entry(queue).or_default().push_back(id);
                    }
                    Started::Rejected(_) => {}
                }
            }
            Op::Finish(k) if !self.m.executing.is_empty() => {
                let id = self.m.executing.swap_remove(k % self.m.executing.len());
                let mut fin = None;
                self.step(|qs, now| fin = Some(qs.finish(id, now)))?;
                let fin = fin.expect("called").expect("executing request finishes");
                self.m.finished += 1;
                prop_assert!(self.qs.finish(id, self.now).is_err(), "released once only");
                if let Some(d) = fin.linger {
                    self.m.lingering.push((self.now + d, id));
                }
            }
            Op::Cancel(k) if !self.m.waiting.is_empty() => {
                let mut ids: Vec<_> = self.m.waiting.keys().copied().collect();
                ids.sort_by_key(|id| (id.index, id.generation));
                let id = ids[k % ids.len()];
                let w = self.m.waiting.remove(&id).expect("present");
                if let Some(f) = self.m.fifo.get_mut(&w.queue) {
                    f.retain(|x| *x != id);
                }
                let mut removed = false;
                self.step(|qs, now| removed = qs.cancel(id, now, Removal::Cancelled))?;
                prop_assert!(removed);
                prop_assert_eq!(self.qs.state(id), None, "left its queue at once");
            }
            Op::SetLimit(cl) => self.step(|qs, now| qs.set_concurrency_limit(cl, now))?,
            Op::Finish(_) | Op::Cancel(_) => {}
        }
        self.check_counts()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn queue_set_keeps_its_invariants(
        queues in 1u32..=8,
        hand in 1u32..=4,
        qll in 1u32..=6,
        cl in 1u32..=8,
        ops in proptest::collection::vec((0u64..40, op()), 1..200),
    ) {
        let hand = hand.min(queues);
        let t0 = Instant::now();
        let qs = QueueSet::new(queued(queues, hand, qll), cl, t0).expect("valid");
        let mut h = Harness { qs, m: Model::default(), now: t0 };
        for (dt, op) in ops {
            let t = h.now + Duration::from_millis(dt);
            h.advance_to(t)?;
            h.apply(op)?;
        }
        // Drain: finish everything, let lingering seats and deadlines pass.
        h.step(|qs, now| qs.set_concurrency_limit(8, now))?;
        while let Some(id) = h.m.executing.first().copied() {
            h.apply(Op::Finish(0))?;
            prop_assert_eq!(h.qs.state(id).is_some(), h.m.lingering.iter().any(|(_, x)| *x == id));
        }
        let far = h.now + Duration::from_secs(3600);
        h.advance_to(far)?;
        while !h.m.executing.is_empty() {
            h.apply(Op::Finish(0))?;
            h.advance_to(h.now + Duration::from_secs(1))?;
        }
        let c = h.qs.counters();
        prop_assert!(h.qs.is_drained());
        prop_assert_eq!(h.qs.seats_in_use() + h.qs.seats_waiting(), 0);
        prop_assert_eq!(c.dispatched + c.rejected + c.timed_out + c.cancelled, h.m.arrived);
        prop_assert_eq!(c.dispatched, h.m.finished);
    }
}
