//! Virtual time, dispatch and completion.
//!
//! Mirrors `queueset.go`: `syncTimeLocked`, `advanceEpoch`, `getVirtualTimeRatioLocked`,
//! `dispatchAsMuchAsPossibleLocked`, `findDispatchQueueToBoundLocked`, `canAccommodateSeatsLocked`,
//! `finishRequestLocked`, `boundNextDispatchLocked`, `removeQueueIfEmptyLocked`.

use std::sync::Arc;

use tokio::time::Instant;

use super::store::Phase;
use super::{
    Event, EventKind, Note, QueueSet, QueueSetError, QueuingConfig, Removal, RequestId,
    ESTIMATED_SERVICE_DURATION,
};
use crate::fairqueue::seat_seconds::SeatSeconds;

/// `rDecrement`: how far R is wound back at an epoch advance.
const R_DECREMENT: u64 = u64::MAX / 2;
/// `highR`: the reading of R that triggers an epoch advance.
const HIGH_R: u64 = R_DECREMENT + R_DECREMENT / 2;

impl<W> QueueSet<W> {
    /// Mirrors `syncTimeLocked`: advances R as if the state since the last call held until
    /// `now`, then times out the waiters whose deadline has come.
    pub(super) fn sync_time(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last_real_time);
        self.last_real_time = self.last_real_time.max(now);
        let incr = SeatSeconds::seats_times_duration(self.virtual_time_ratio(), elapsed);
        let prev = self.current_r;
        self.current_r = prev + incr;
        if self.current_r < prev {
            tracing::error!(prev = %prev, incr = %incr, "queueset::currentR overflow");
        } else if self.current_r.units() >= HIGH_R {
            self.advance_epoch();
        }
        self.expire(now);
    }

    /// `min(seatsRequested, CL) / activeQueues`.
    fn virtual_time_ratio(&self) -> f64 {
        if self.active_queues == 0 {
            return 0.0;
        }
        let requested = (self.queued_seats_in_use + self.seats_waiting) as f64;
        requested.min(f64::from(self.concurrency_limit)) / f64::from(self.active_queues)
    }

    /// Mirrors `advanceEpoch`: subtracts `rDecrement` from R and every reading taken from it.
    fn advance_epoch(&mut self) {
        let dec = SeatSeconds::from_units(R_DECREMENT);
        self.current_r -= dec;
        let mut success = true;
        for qi in 0..self.queues.len() {
            let q = &mut self.queues[qi];
            if !q.is_active() {
                // Stale; the next arrival overwrites it with R anyway.
                q.next_dispatch_r = SeatSeconds::ZERO;
                continue;
            }
            match q.next_dispatch_r.checked_sub(dec) {
                Some(v) => q.next_dispatch_r = v,
                None => {
                    q.next_dispatch_r -= dec;
                    success = false;
                }
            }
            let indices: Vec<u32> = self.store.fifo(&self.queues[qi]).collect();
            for index in indices {
                if let Phase::Waiting { arrival_r, .. } = &mut self.store.at_mut(index).phase {
                    match arrival_r.checked_sub(dec) {
                        Some(v) => *arrival_r = v,
                        None => {
                            *arrival_r -= dec;
                            success = false;
                        }
                    }
                }
            }
        }
        self.rebuild_finish_index();
        self.counters.epoch_advances[usize::from(!success)] += 1;
        self.note(|| Note::EpochAdvanced { success });
        tracing::info!(success, new_r = %self.current_r, "Advancing epoch");
    }

    /// Times out every waiting request whose deadline is at or before `now`.
    fn expire(&mut self, now: Instant) {
        while let Some(&(deadline, index)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.remove_waiting(index, Removal::TimedOut);
        }
    }

    /// Mirrors `dispatchAsMuchAsPossibleLocked`.
    pub(super) fn dispatch_as_much_as_possible(&mut self, now: Instant) {
        while self.waiting != 0
            && self.seats_in_use < u64::from(self.concurrency_limit)
            && self.dispatch_one(now)
        {}
    }

    /// Mirrors `dispatchLocked` + `findDispatchQueueToBoundLocked`: the queue whose head has the
    /// smallest virtual finish time, scanning from after the last dispatched queue; if that head
    /// does not fit, nothing is dispatched (no skipping).
    fn dispatch_one(&mut self, now: Instant) -> bool {
        let Some(qi) = self.min_finish_queue() else {
            return false;
        };
        let head = self.queues[qi].head;
        if !self.can_accommodate(self.store.at(head).max_seats()) {
            self.counters.no_accommodation += 1;
            let flow_schema = Arc::clone(&self.store.at(head).flow.flow_schema);
            self.note(|| Note::NoAccommodation { flow_schema });
            return false;
        }
        self.last_dispatch = Some((self.current_r, self.queues[qi].next_dispatch_r));
        let id = self.store.id_at(head);
        self.store.unlink(&mut self.queues[qi], head);
        let cl = self.concurrency_limit;
        let entry = self.store.at_mut(head);
        if let Phase::Waiting {
            deadline: Some(d), ..
        } = entry.phase
        {
            self.deadlines.remove(&(d, head));
        }
        // Final seats beyond the limit are cut to the limit, keeping the work the same.
        if entry.estimate.final_seats > cl {
            entry.estimate.final_seats = cl;
            entry.estimate.additional_latency = entry.final_work.duration_per_seat(f64::from(cl));
        }
        entry.phase = Phase::Executing { start: now };
        let waiting_seats = u64::from(entry.waiting_seats);
        let seats = u64::from(entry.max_seats());
        let total_work = entry.total_work;
        let waiter = entry.waiter.take();
        self.robin_index = qi as isize;
        self.waiting -= 1;
        self.seats_waiting -= waiting_seats;
        self.executing += 1;
        self.seats_in_use += seats;
        self.queued_seats_in_use += seats;
        self.counters.dispatched += 1;
        let q = &mut self.queues[qi];
        q.executing += 1;
        q.seats_in_use += seats;
        q.next_dispatch_r += total_work;
        self.bound_next_dispatch(qi);
        self.events.push(Event {
            id,
            kind: EventKind::Dispatched,
            waiter,
        });
        self.logged_dispatch(id);
        true
    }

    /// The first queue, in round-robin order from `robinIndex + 1`, whose head has the minimal
    /// `nextDispatchR + totalWork` (what the apiserver's scan with strict `<` finds): among the
    /// queues sharing the minimum, the first at or after the start, else the first overall.
    fn min_finish_queue(&self) -> Option<usize> {
        let &(min, first) = self.by_finish.first()?;
        let n = self.queues.len() as isize;
        let start = (self.robin_index + 1).rem_euclid(n) as u32;
        let chosen = match self.by_finish.range((min, start)..).next() {
            Some(&(f, qi)) if f == min => qi,
            _ => first,
        };
        #[cfg(test)]
        assert_eq!(
            Some(chosen as usize),
            self.min_finish_queue_by_scan(),
            "index agrees with the scan"
        );
        Some(chosen as usize)
    }

    /// The apiserver's O(queues) scan, kept as the oracle of the index in tests.
    #[cfg(test)]
    fn min_finish_queue_by_scan(&self) -> Option<usize> {
        let n = self.queues.len();
        let start = (self.robin_index + 1).rem_euclid(n as isize) as usize;
        let mut best: Option<(SeatSeconds, usize)> = None;
        for i in 0..n {
            let qi = (start + i) % n;
            let q = &self.queues[qi];
            if q.len == 0 {
                continue;
            }
            let finish = q.next_dispatch_r + self.store.at(q.head).total_work;
            if best.is_none_or(|(b, _)| finish < b) {
                best = Some((finish, qi));
            }
        }
        best.map(|(_, qi)| qi)
    }

    /// Mirrors `canAccommodateSeatsLocked`: a request wider than the limit runs alone.
    pub(super) fn can_accommodate(&self, seats: u32) -> bool {
        let cl = self.concurrency_limit;
        match self.config {
            QueuingConfig::Exempt => true,
            _ if seats > cl => self.executing == 0,
            _ => self.seats_in_use + u64::from(seats) <= u64::from(cl),
        }
    }

    /// Mirrors `boundNextDispatchLocked` (anti-windup): a queue's next dispatch may not precede
    /// the arrival of its oldest waiting request.
    pub(super) fn bound_next_dispatch(&mut self, qi: usize) {
        let Some(q) = self.queues.get(qi) else {
            return;
        };
        if q.head != store_nil() {
            if let Phase::Waiting { arrival_r, .. } = self.store.at(q.head).phase {
                if self.queues[qi].next_dispatch_r < arrival_r {
                    self.queues[qi].next_dispatch_r = arrival_r;
                }
            }
        }
        // Every change to a queue's head or nextDispatchR ends here.
        self.refresh_finish_key(qi);
    }

    /// The execution part of `finishRequestLocked`: charges the queue the real duration and
    /// returns how long the final seats linger, releasing the seats now if they do not.
    pub(super) fn finish_execution(
        &mut self,
        id: RequestId,
        now: Instant,
    ) -> Result<Option<std::time::Duration>, QueueSetError> {
        let entry = self
            .store
            .get_mut(id)
            .ok_or(QueueSetError::UnknownRequest)?;
        let Phase::Executing { start } = entry.phase else {
            return Err(QueueSetError::WrongPhase("executing"));
        };
        entry.phase = Phase::Lingering { start };
        let linger = entry.estimate.additional_latency;
        let initial_seats = f64::from(entry.estimate.initial_seats);
        let queue = entry.queue;
        self.executing -= 1;
        if let Some(qi) = queue.map(|q| q as usize) {
            let actual = now.saturating_duration_since(start);
            let g = ESTIMATED_SERVICE_DURATION.as_nanos() as i64;
            let delta = g - i64::try_from(actual.as_nanos()).unwrap_or(i64::MAX);
            let q = &mut self.queues[qi];
            q.executing -= 1;
            // When the service time was S, the queue's start R is decremented by (G − S)×width.
            q.next_dispatch_r -= SeatSeconds::seats_times_nanos(initial_seats, delta);
            if !q.is_active() {
                self.active_queues -= 1;
            }
            self.bound_next_dispatch(qi);
        }
        if linger.is_zero() {
            self.release_seats(id);
            return Ok(None);
        }
        Ok(Some(linger))
    }

    /// `releaseSeatsLocked`: the request is gone.
    pub(super) fn release_seats(&mut self, id: RequestId) {
        let Some((seats, queue)) = self.store.discard(id, |e| (e.max_seats(), e.queue)) else {
            return;
        };
        let seats = u64::from(seats);
        self.seats_in_use -= seats;
        if let Some(qi) = queue.map(|q| q as usize) {
            self.queues[qi].seats_in_use -= seats;
            self.queued_seats_in_use -= seats;
            self.remove_queue_if_surplus(qi);
        }
    }

    /// Mirrors `removeQueueIfEmptyLocked`: with more queues than desired, an empty queue goes
    /// (here only once no lingering seats refer to it either).
    pub(super) fn remove_queue_if_surplus(&mut self, qi: usize) {
        let desired = match self.config {
            QueuingConfig::Queue(s) => s.queues as usize,
            _ => 0,
        };
        let q = &self.queues[qi];
        if self.queues.len() <= desired || q.is_active() || q.seats_in_use > 0 {
            return;
        }
        self.queues.remove(qi);
        let removed = qi as u32;
        for e in self.store.iter_mut() {
            if let Some(q) = e.queue.as_mut() {
                if *q > removed {
                    *q -= 1;
                }
            }
        }
        // Keeps (robinIndex + 1) % n the queue after the one last dispatched from.
        if self.robin_index >= qi as isize {
            self.robin_index -= 1;
        }
        self.rebuild_finish_index();
    }
}

fn store_nil() -> u32 {
    super::store::NIL
}
