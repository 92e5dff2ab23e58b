//! The fair-queuing core of one priority level: sans-I/O, time passed in.
//!
//! Mirrors `fairqueuing/queueset/{queueset.go,types.go,fifo_list.go,doc.go}`: shuffle sharding to a
//! queue, the virtual clock R(t) measured in seat-seconds, dispatch by minimum virtual finish time
//! with a round-robin start and no skipping past the head of the line, completion correcting the
//! queue's `nextDispatchR` by the real duration, final seats held for `AdditionalLatency`.
//!
//! Where we differ (each is noted at the place it happens):
//! - a waiting request carries its own deadline; every call first times out the overdue ones, so
//!   the async layer does not need one lock round-trip per timer;
//! - after a waiting request leaves (time-out, cancellation) we dispatch at once: the apiserver
//!   waits for the next event, which can leave a request stuck behind a cancelled wide one
//!   ([`QueueSet::dispatch_when_a_request_leaves`] turns this off; docs/apf-differences.md
//!   measures it);
//! - a queue is deleted only once its lingering final seats are released too;
//! - `totSeatsWaiting` is decremented by the seats that were added (the apiserver subtracts the
//!   clamped MaxSeats, which drifts when FinalSeats exceeds the limit).
//!
//! `scripts/queueset-differential.sh` checks, on random scenarios, that with that one difference
//! turned off we make the apiserver's decisions: the same dispatch instants and order, rejections
//! and reasons (`simulate::queueset_scenario`).
//!
//! Cost: arrival, cancellation and completion are O(1) in the slab plus O(log n) for the deadline
//! index of waiting requests; choosing the queue to dispatch from is O(log queues) through an
//! index ordered by virtual finish time (the apiserver scans every queue, O(queues)); tests check
//! the index against that scan on every dispatch.

mod dispatch;
mod dump;
mod store;
mod types;

use std::collections::BTreeSet;

use tokio::time::Instant;

pub use self::dump::{QueueDump, QueueSetDump, RequestDump};
pub use self::store::QueueSum;
use self::store::{Entry, Phase, Queue, Store};
pub use self::types::*;
use super::seat_seconds::SeatSeconds;
use crate::shuffle_sharding::Dealer;

/// The fair queues of one priority level.
///
/// `W` is the waiter the async layer parks with a waiting request (handed back in [`Event`]s).
pub struct QueueSet<W = ()> {
    config: QueuingConfig,
    /// Kept when the level switches to `Reject` or `Exempt`, like the apiserver.
    hand_size: u32,
    queue_length_limit: u32,
    dealer: Option<Dealer>,
    concurrency_limit: u32,
    queues: Vec<Queue>,
    /// `(nextDispatchR + head.totalWork, queue)` of every queue with waiting requests: the
    /// dispatch order, so choosing a queue is O(log queues) instead of a scan.
    by_finish: BTreeSet<(SeatSeconds, u32)>,
    store: Store<W>,
    deadlines: BTreeSet<(Instant, u32)>,
    events: Vec<Event<W>>,
    /// What the apiserver would report to its metrics as it happens; see [`Note`]. Kept only
    /// after [`QueueSet::keep_notes`], by a caller that drains them.
    notes: Vec<Note>,
    keep_notes: bool,
    /// Every dispatch in order, kept only after [`QueueSet::log_dispatches`].
    dispatch_log: Option<Vec<RequestId>>,
    /// Whether a waiting request's leaving (time-out, cancellation) is followed by a dispatch;
    /// see [`QueueSet::dispatch_when_a_request_leaves`].
    dispatch_on_leave: bool,
    /// R and the queue's `nextDispatchR` at the last dispatch from a queue.
    last_dispatch: Option<(SeatSeconds, SeatSeconds)>,
    current_r: SeatSeconds,
    last_real_time: Instant,
    robin_index: isize,
    enqueues: u64,
    waiting: u32,
    executing: u32,
    seats_in_use: u64,
    seats_waiting: u64,
    /// Σ over queues of their seats in use (excludes requests that never queued).
    queued_seats_in_use: u64,
    active_queues: u32,
    counters: Counters,
    /// Tests only: every arrival takes the queued path, the oracle of
    /// [`dispatch_at_once`](Self::dispatch_at_once).
    #[cfg(test)]
    always_enqueue: bool,
}

impl<W> QueueSet<W> {
    /// A queue set with `config` and concurrency limit `concurrency_limit`, its clock starting at
    /// `now`.
    pub fn new(
        config: QueuingConfig,
        concurrency_limit: u32,
        now: Instant,
    ) -> Result<Self, QueueSetError> {
        let mut qs = QueueSet {
            config: QueuingConfig::Reject,
            hand_size: 0,
            queue_length_limit: 0,
            dealer: None,
            concurrency_limit,
            queues: Vec::new(),
            by_finish: BTreeSet::new(),
            store: Store::new(),
            deadlines: BTreeSet::new(),
            events: Vec::new(),
            notes: Vec::new(),
            keep_notes: false,
            dispatch_log: None,
            dispatch_on_leave: true,
            last_dispatch: None,
            current_r: SeatSeconds::ZERO,
            last_real_time: now,
            robin_index: 0,
            enqueues: 0,
            waiting: 0,
            executing: 0,
            seats_in_use: 0,
            seats_waiting: 0,
            queued_seats_in_use: 0,
            active_queues: 0,
            counters: Counters::default(),
            #[cfg(test)]
            always_enqueue: false,
        };
        qs.reconfigure(config, now)?;
        Ok(qs)
    }

    /// Applies a new queuing configuration in place, keeping every queued and executing request.
    ///
    /// Mirrors `setConfiguration`: more queues are created at once; surplus queues go when they
    /// are empty (here: at once if already empty, else when they drain). Switching to `Reject`
    /// or `Exempt` keeps the old hand size and queue length limit.
    pub fn reconfigure(
        &mut self,
        config: QueuingConfig,
        now: Instant,
    ) -> Result<(), QueueSetError> {
        let dealer = match config {
            QueuingConfig::Queue(s) => {
                Some(Dealer::new(i64::from(s.queues), i64::from(s.hand_size))?)
            }
            _ => None,
        };
        self.sync_time(now);
        if let QueuingConfig::Queue(s) = config {
            while self.queues.len() < s.queues as usize {
                self.queues.push(Queue::new());
            }
            self.hand_size = s.hand_size;
            self.queue_length_limit = s.queue_length_limit;
            self.rebuild_finish_index();
        }
        self.config = config;
        self.dealer = dealer;
        for qi in (0..self.queues.len()).rev() {
            self.remove_queue_if_surplus(qi);
        }
        self.dispatch_as_much_as_possible(now);
        Ok(())
    }

    /// Sets the concurrency limit (currentCL) and dispatches what now fits.
    pub fn set_concurrency_limit(&mut self, concurrency_limit: u32, now: Instant) {
        self.sync_time(now);
        self.concurrency_limit = concurrency_limit;
        self.dispatch_as_much_as_possible(now);
    }

    /// Mirrors `StartRequest`: executes, queues or rejects an arriving request.
    pub fn start_request(&mut self, now: Instant, arrival: Arrival) -> Started {
        self.sync_time(now);
        let seats = arrival.estimate.max_seats();
        match self.config {
            QueuingConfig::Exempt => Started::Executing(self.dispatch_sans_queue(now, arrival)),
            QueuingConfig::Reject if !self.can_accommodate(seats) => {
                self.counters.rejected += 1;
                Started::Rejected(RejectReason::ConcurrencyLimit)
            }
            QueuingConfig::Reject => Started::Executing(self.dispatch_sans_queue(now, arrival)),
            QueuingConfig::Queue(_) => self.shuffle_shard_and_enqueue(now, arrival),
        }
    }

    /// Parks the async layer's waiter with a waiting request. Returns it back if the request is
    /// not waiting.
    pub fn set_waiter(&mut self, id: RequestId, waiter: W) -> Result<(), W> {
        match self.store.get_mut(id) {
            Some(e) if matches!(e.phase, Phase::Waiting { .. }) => {
                e.waiter = Some(waiter);
                Ok(())
            }
            _ => Err(waiter),
        }
    }

    /// Takes a waiting request out of its queue (time-out or caller gone). Returns `false` if it
    /// was not waiting (already dispatched, timed out or unknown).
    pub fn cancel(&mut self, id: RequestId, now: Instant, why: Removal) -> bool {
        self.sync_time(now);
        let waiting = matches!(
            self.store.get(id).map(|e| e.phase),
            Some(Phase::Waiting { .. })
        );
        if waiting {
            self.remove_waiting(id.index, why);
            if self.dispatch_on_leave {
                self.dispatch_as_much_as_possible(now);
            }
        }
        waiting
    }

    /// Mirrors `finishRequestLocked` + dispatch: an executing request is done.
    pub fn finish(&mut self, id: RequestId, now: Instant) -> Result<Finished, QueueSetError> {
        self.sync_time(now);
        let linger = self.finish_execution(id, now)?;
        self.dispatch_as_much_as_possible(now);
        Ok(Finished { linger })
    }

    /// Releases the final seats of a request that [`finish`](Self::finish) left lingering.
    pub fn release_final_seats(
        &mut self,
        id: RequestId,
        now: Instant,
    ) -> Result<(), QueueSetError> {
        self.sync_time(now);
        match self.store.get(id).map(|e| e.phase) {
            None => return Err(QueueSetError::UnknownRequest),
            Some(Phase::Lingering { .. }) => self.release_seats(id),
            Some(_) => return Err(QueueSetError::WrongPhase("lingering")),
        }
        self.dispatch_as_much_as_possible(now);
        Ok(())
    }

    /// Advances the clock to `now`, timing out waiters whose deadline has come.
    pub fn tick(&mut self, now: Instant) {
        self.sync_time(now);
        if self.dispatch_on_leave {
            self.dispatch_as_much_as_possible(now);
        }
    }

    /// Whether a waiting request that leaves its queue (time-out, cancellation) is followed by
    /// a dispatch (the default), or, as in the apiserver, the requests it held up wait for the
    /// next arrival or completion. The differential harness against the apiserver's queue set
    /// (`scripts/queueset-differential.sh`) turns it off; docs/apf-differences.md measures it.
    #[doc(hidden)]
    pub fn dispatch_when_a_request_leaves(&mut self, on: bool) {
        self.dispatch_on_leave = on;
    }

    /// Starts logging every dispatch, in order, for [`drain_dispatches`](Self::drain_dispatches)
    /// (the differential harness compares the dispatch order).
    #[doc(hidden)]
    pub fn log_dispatches(&mut self) {
        self.dispatch_log.get_or_insert_with(Vec::new);
    }

    /// The requests dispatched since the last call, in order (empty unless
    /// [`log_dispatches`](Self::log_dispatches) was called).
    #[doc(hidden)]
    pub fn drain_dispatches(&mut self) -> Vec<RequestId> {
        self.dispatch_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn logged_dispatch(&mut self, id: RequestId) {
        if let Some(log) = &mut self.dispatch_log {
            log.push(id);
        }
    }

    /// What happened to waiting requests since the last drain.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, Event<W>> {
        self.events.drain(..)
    }

    /// R and S of the last dispatch from a queue with the S bounds over the queues waiting now
    /// (see [`DispatchR`]); `None` until the first dispatch from a queue. O(waiting queues).
    pub fn dispatch_readings(&self) -> Option<DispatchR> {
        let (r, s) = self.last_dispatch?;
        let s = s.to_f64();
        let mut d = DispatchR {
            r: r.to_f64(),
            s,
            s_min: f64::INFINITY,
            s_max: f64::NEG_INFINITY,
            discounted_s_min: f64::INFINITY,
            discounted_s_max: f64::NEG_INFINITY,
        };
        for &(_, q) in &self.by_finish {
            let q = &self.queues[q as usize];
            let s = q.next_dispatch_r.to_f64();
            // The apiserver subtracts in unsigned seat-seconds, which wraps to a huge value when
            // the work in progress is larger; here the difference is signed.
            let in_progress = SeatSeconds::seats_times_duration(
                q.seats_in_use as f64,
                ESTIMATED_SERVICE_DURATION,
            );
            let discounted = s - in_progress.to_f64();
            d.s_min = d.s_min.min(s);
            d.s_max = d.s_max.max(s);
            d.discounted_s_min = d.discounted_s_min.min(discounted);
            d.discounted_s_max = d.discounted_s_max.max(discounted);
        }
        if self.by_finish.is_empty() {
            (d.s_min, d.s_max, d.discounted_s_min, d.discounted_s_max) = (s, s, s, s);
        }
        Some(d)
    }

    /// Starts keeping [`Note`]s for [`drain_notes`](Self::drain_notes); a caller that turns this
    /// on must drain them after each change.
    pub fn keep_notes(&mut self) {
        self.keep_notes = true;
    }

    /// Takes the notes for metrics since the last call, oldest first.
    pub fn drain_notes(&mut self) -> std::vec::Drain<'_, Note> {
        self.notes.drain(..)
    }

    fn note(&mut self, note: impl FnOnce() -> Note) {
        if self.keep_notes {
            self.notes.push(note());
        }
    }

    /// The earliest deadline of a waiting request.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Where a request is; `None` once it is gone.
    pub fn state(&self, id: RequestId) -> Option<RequestState> {
        self.store.get(id).map(|e| match e.phase {
            Phase::Waiting { .. } => RequestState::Waiting,
            Phase::Executing { .. } => RequestState::Executing,
            Phase::Lingering { .. } => RequestState::Lingering,
        })
    }

    /// The seats a request holds or will hold (MaxSeats, final seats clamped at dispatch).
    pub fn seats_of(&self, id: RequestId) -> Option<u32> {
        self.store.get(id).map(|e| e.max_seats())
    }

    /// The request's queue index, if it went through a queue.
    pub fn queue_of(&self, id: RequestId) -> Option<usize> {
        self.store.get(id).and_then(|e| e.queue).map(|q| q as usize)
    }

    /// The current configuration.
    pub fn config(&self) -> QueuingConfig {
        self.config
    }

    /// The concurrency limit (currentCL).
    pub fn concurrency_limit(&self) -> u32 {
        self.concurrency_limit
    }

    /// Seats held by executing and lingering requests.
    pub fn seats_in_use(&self) -> u64 {
        self.seats_in_use
    }

    /// Σ MaxSeats of the waiting requests.
    pub fn seats_waiting(&self) -> u64 {
        self.seats_waiting
    }

    /// `totSeatsInUse + totSeatsWaiting`: what the borrowing integrator observes.
    pub fn seat_demand(&self) -> u64 {
        self.seats_in_use + self.seats_waiting
    }

    /// Requests waiting in queues.
    pub fn waiting(&self) -> u32 {
        self.waiting
    }

    /// Requests executing (lingering ones excluded, like `totRequestsExecuting`).
    pub fn executing(&self) -> u32 {
        self.executing
    }

    /// Nothing waiting and nothing executing (`isIdleLocked`).
    pub fn is_idle(&self) -> bool {
        self.waiting == 0 && self.executing == 0
    }

    /// Nothing waiting, executing or lingering: safe to drop.
    pub fn is_drained(&self) -> bool {
        self.is_idle() && self.seats_in_use == 0
    }

    /// The totals.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The number of queues (may exceed the configured count while surplus queues drain).
    pub fn num_queues(&self) -> usize {
        self.queues.len()
    }

    /// The waiting requests of queue `index` (`request_queue_length_after_enqueue` and dumps).
    pub fn queue_len(&self, index: usize) -> usize {
        self.queues.get(index).map_or(0, |q| q.len as usize)
    }

    /// The virtual clock R.
    pub fn current_r(&self) -> SeatSeconds {
        self.current_r
    }

    /// `handSize` and `queueLengthLimit` in force (kept across a switch to `Reject`).
    pub fn hand_size_and_queue_length_limit(&self) -> (u32, u32) {
        (self.hand_size, self.queue_length_limit)
    }

    // === private: arrival ===

    fn new_entry(&self, now: Instant, arrival: Arrival, phase: Phase) -> Entry<W> {
        let est = arrival.estimate;
        let initial_work = SeatSeconds::seats_times_duration(
            f64::from(est.initial_seats),
            ESTIMATED_SERVICE_DURATION,
        );
        let final_work =
            SeatSeconds::seats_times_duration(f64::from(est.final_seats), est.additional_latency);
        Entry {
            estimate: est,
            waiting_seats: est.max_seats(),
            total_work: initial_work + final_work,
            final_work,
            queue: None,
            phase,
            arrival: now,
            flow: arrival.flow,
            waiter: None,
        }
    }

    /// Mirrors `dispatchSansQueueLocked`.
    fn dispatch_sans_queue(&mut self, now: Instant, arrival: Arrival) -> RequestId {
        let entry = self.new_entry(now, arrival, Phase::Executing { start: now });
        let seats = u64::from(entry.max_seats());
        let id = self.store.insert(entry);
        self.executing += 1;
        self.seats_in_use += seats;
        self.counters.dispatched += 1;
        self.logged_dispatch(id);
        id
    }

    /// Mirrors `shuffleShardAndRejectOrEnqueueLocked` and `StartRequest` step 2.
    fn shuffle_shard_and_enqueue(&mut self, now: Instant, arrival: Arrival) -> Started {
        #[cfg(test)]
        let fast = !self.always_enqueue;
        #[cfg(not(test))]
        let fast = true;
        let qi = if fast && self.waiting == 0 {
            self.shuffle_shard_idle(arrival.hash)
        } else {
            self.shuffle_shard(arrival.hash)
        };
        if self.seats_in_use >= u64::from(self.concurrency_limit)
            && self.queues[qi].len >= self.queue_length_limit
        {
            self.counters.rejected += 1;
            return Started::Rejected(RejectReason::QueueFull);
        }
        if fast
            && self.waiting == 0
            && self.seats_in_use < u64::from(self.concurrency_limit)
            && self.can_accommodate(arrival.estimate.max_seats())
        {
            return Started::Executing(self.dispatch_at_once(now, qi, arrival));
        }
        let deadline = arrival.deadline;
        let phase = Phase::Waiting {
            prev: store::NIL,
            next: store::NIL,
            arrival_r: self.current_r,
            deadline,
        };
        let mut entry = self.new_entry(now, arrival, phase);
        entry.queue = Some(qi as u32);
        let seats = u64::from(entry.waiting_seats);
        let id = self.store.insert(entry);
        let q = &mut self.queues[qi];
        let was_active = q.is_active();
        if !was_active {
            // The queue's start R is set to the virtual time.
            q.next_dispatch_r = self.current_r;
            self.active_queues += 1;
        }
        self.store.push_back(q, id.index);
        self.waiting += 1;
        self.seats_waiting += seats;
        self.bound_next_dispatch(qi);
        self.dispatch_as_much_as_possible(now);
        match self.store.get(id).map(|e| e.phase) {
            Some(Phase::Waiting { .. }) => {
                // Indexed only once it really waits: most arrivals are dispatched at once.
                if let Some(d) = deadline {
                    self.deadlines.insert((d, id.index));
                }
                Started::Queued(id)
            }
            _ => {
                // The caller learns this from the return value, not from an event.
                if let Some(pos) = self.events.iter().rposition(|e| e.id == id) {
                    self.events.remove(pos);
                }
                Started::Executing(id)
            }
        }
    }

    /// The arrival, at queue `qi`, of a request that nothing waits before and that fits: what
    /// enqueuing it and dispatching it (`dispatchAsMuchAsPossibleLocked`, which picks it, the
    /// only head) leaves, without linking it into its queue, the dispatch index and the events
    /// only to take it out again. The queue is empty: nothing waits anywhere.
    fn dispatch_at_once(&mut self, now: Instant, qi: usize, arrival: Arrival) -> RequestId {
        let mut entry = self.new_entry(now, arrival, Phase::Executing { start: now });
        entry.queue = Some(qi as u32);
        let cl = self.concurrency_limit;
        // Final seats beyond the limit are cut to the limit, keeping the work the same.
        if entry.estimate.final_seats > cl {
            entry.estimate.final_seats = cl;
            entry.estimate.additional_latency = entry.final_work.duration_per_seat(f64::from(cl));
        }
        let seats = u64::from(entry.max_seats());
        let q = &mut self.queues[qi];
        debug_assert_eq!(q.len, 0, "nothing waits");
        if !q.is_active() {
            // The queue's start R is set to the virtual time.
            q.next_dispatch_r = self.current_r;
            self.active_queues += 1;
        }
        // `boundNextDispatchLocked` with the request at the head: it arrived at R.
        if q.next_dispatch_r < self.current_r {
            q.next_dispatch_r = self.current_r;
        }
        self.last_dispatch = Some((self.current_r, q.next_dispatch_r));
        q.executing += 1;
        q.seats_in_use += seats;
        q.next_dispatch_r += entry.total_work;
        self.robin_index = qi as isize;
        self.executing += 1;
        self.seats_in_use += seats;
        self.queued_seats_in_use += seats;
        self.counters.dispatched += 1;
        let id = self.store.insert(entry);
        self.logged_dispatch(id);
        id
    }

    /// Mirrors `shuffleShardLocked`: among the hand, the queue with the least waiting work,
    /// examined from `enqueues % handSize` on (first examined wins ties).
    fn shuffle_shard(&mut self, hash: u64) -> usize {
        let dealer = self
            .dealer
            .expect("invariant: a Queue configuration has a dealer");
        let hand = dealer.deal(hash);
        let cards = hand.as_slice();
        let offset = (self.enqueues % cards.len() as u64) as usize;
        self.enqueues += 1;
        let mut best = cards[offset];
        let mut best_work = SeatSeconds::MAX;
        // From the offset round to it: no division per card.
        for &qi in cards[offset..].iter().chain(&cards[..offset]) {
            let work = self.queues[qi].sum.total_work;
            if work < best_work {
                best_work = work;
                best = qi;
            }
        }
        best
    }

    /// [`shuffle_shard`](Self::shuffle_shard) when nothing waits: every queue's waiting work is
    /// zero, so the first card examined wins, and only that card is dealt.
    fn shuffle_shard_idle(&mut self, hash: u64) -> usize {
        let dealer = self
            .dealer
            .expect("invariant: a Queue configuration has a dealer");
        let offset = (self.enqueues % dealer.hand_size() as u64) as usize;
        self.enqueues += 1;
        dealer.card(hash, offset)
    }

    /// Unlinks a waiting request and forgets it, delivering a time-out event if its wait limit
    /// passed.
    fn remove_waiting(&mut self, index: u32, why: Removal) {
        let id = self.store.id_at(index);
        let qi = self
            .store
            .at(index)
            .queue
            .expect("invariant: waiting requests are in a queue") as usize;
        self.store.unlink(&mut self.queues[qi], index);
        let mut entry = self
            .store
            .remove(id)
            .expect("invariant: the entry was just read");
        if let Phase::Waiting {
            deadline: Some(d), ..
        } = entry.phase
        {
            self.deadlines.remove(&(d, index));
        }
        self.waiting -= 1;
        self.seats_waiting -= u64::from(entry.waiting_seats);
        let q = &self.queues[qi];
        if !q.is_active() {
            self.active_queues -= 1;
        }
        match why {
            Removal::TimedOut => {
                self.counters.timed_out += 1;
                self.events.push(Event {
                    id,
                    kind: EventKind::TimedOut,
                    waiter: entry.waiter.take(),
                });
            }
            Removal::Cancelled => self.counters.cancelled += 1,
        }
        self.bound_next_dispatch(qi);
        self.remove_queue_if_surplus(qi);
    }

    /// Recomputes the whole dispatch index (after queues are added, removed or renumbered, or
    /// every reading of R moved).
    fn rebuild_finish_index(&mut self) {
        self.by_finish.clear();
        for qi in 0..self.queues.len() {
            self.queues[qi].finish_key = None;
            self.refresh_finish_key(qi);
        }
    }

    /// Brings queue `qi`'s entry in the dispatch index up to date.
    fn refresh_finish_key(&mut self, qi: usize) {
        let q = &self.queues[qi];
        let key = (q.len > 0).then(|| q.next_dispatch_r + self.store.at(q.head).total_work);
        if key == q.finish_key {
            return;
        }
        if let Some(old) = q.finish_key {
            self.by_finish.remove(&(old, qi as u32));
        }
        if let Some(new) = key {
            self.by_finish.insert((new, qi as u32));
        }
        self.queues[qi].finish_key = key;
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
impl<W> QueueSet<W> {
    /// Moves R, for epoch tests.
    pub(crate) fn set_current_r_for_test(&mut self, r: SeatSeconds) {
        self.current_r = r;
    }

    /// Every arrival takes the queued path (the oracle of the direct dispatch).
    pub(crate) fn always_enqueue_for_test(&mut self) {
        self.always_enqueue = true;
    }
}
