//! Introspection for the debug endpoints and metrics.
//!
//! Mirrors `QueueSet.Dump` (`debug.QueueSetDump`, `QueueDump`, `RequestDump`).

use tokio::time::Instant;

use super::store::{Entry, Phase, QueueSum};
use super::{Counters, FlowMeta, QueueSet};
use crate::fairqueue::seat_seconds::SeatSeconds;
use crate::fairqueue::WorkEstimate;

/// The state of a whole queue set at one moment.
#[derive(Debug, Clone)]
pub struct QueueSetDump {
    /// Every queue, by index.
    pub queues: Vec<QueueDump>,
    /// Executing or lingering requests that never went through a queue.
    pub queueless_executing: Vec<RequestDump>,
    /// Requests waiting.
    pub waiting: u32,
    /// Requests executing.
    pub executing: u32,
    /// Seats in use (executing and lingering).
    pub seats_in_use: u64,
    /// Σ MaxSeats of waiting requests.
    pub seats_waiting: u64,
    /// The concurrency limit in force.
    pub concurrency_limit: u32,
    /// The virtual clock R.
    pub current_r: SeatSeconds,
    /// Totals.
    pub counters: Counters,
}

/// One queue.
#[derive(Debug, Clone)]
pub struct QueueDump {
    /// `nextDispatchR`.
    pub next_dispatch_r: SeatSeconds,
    /// Waiting requests, oldest first.
    pub waiting: Vec<RequestDump>,
    /// Executing and lingering requests from this queue.
    pub executing: Vec<RequestDump>,
    /// Requests executing (lingering ones excluded).
    pub executing_requests: u32,
    /// Seats held by this queue's requests.
    pub seats_in_use: u64,
    /// Sums over the waiting requests.
    pub sum: QueueSum,
}

/// One request.
#[derive(Debug, Clone)]
pub struct RequestDump {
    /// Its flow.
    pub flow: FlowMeta,
    /// When it arrived.
    pub arrival: Instant,
    /// When it started executing, if it has.
    pub start: Option<Instant>,
    /// Its work estimate (final seats clamped at dispatch, if they were).
    pub estimate: WorkEstimate,
    /// Its queue index.
    pub queue: Option<usize>,
}

impl<W> QueueSet<W> {
    /// A snapshot of every queue and request. O(requests): for debug endpoints only.
    pub fn dump(&self) -> QueueSetDump {
        let mut queues: Vec<QueueDump> = self
            .queues
            .iter()
            .map(|q| QueueDump {
                next_dispatch_r: q.next_dispatch_r,
                waiting: self
                    .store
                    .fifo(q)
                    .map(|i| request_dump(self.store.at(i)))
                    .collect(),
                executing: Vec::new(),
                executing_requests: q.executing,
                seats_in_use: q.seats_in_use,
                sum: q.sum,
            })
            .collect();
        let mut queueless_executing = Vec::new();
        for (_, e) in self.store.iter() {
            if matches!(e.phase, Phase::Waiting { .. }) {
                continue;
            }
            match e.queue {
                Some(qi) => queues[qi as usize].executing.push(request_dump(e)),
                None => queueless_executing.push(request_dump(e)),
            }
        }
        QueueSetDump {
            queues,
            queueless_executing,
            waiting: self.waiting,
            executing: self.executing,
            seats_in_use: self.seats_in_use,
            seats_waiting: self.seats_waiting,
            concurrency_limit: self.concurrency_limit,
            current_r: self.current_r,
            counters: self.counters,
        }
    }
}

fn request_dump<W>(e: &Entry<W>) -> RequestDump {
    let start = match e.phase {
        Phase::Waiting { .. } => None,
        Phase::Executing { start } | Phase::Lingering { start } => Some(start),
    };
    RequestDump {
        flow: e.flow.clone(),
        arrival: e.arrival,
        start,
        estimate: e.estimate,
        queue: e.queue.map(|q| q as usize),
    }
}
