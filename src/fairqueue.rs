//! Fair queuing: what happens to a classified request before it may go upstream.
//!
//! Mirrors `k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing` and the limit computations of
//! `apf_controller.go`. The queue set and the allocations are sans-I/O (time is passed in); the
//! async [`level_queues`] wrap them for tokio (a request waits there for its seats). [`flow_request`] is the one path from a request's
//! attributes to an admission, [`timeout`] the one computation of its deadlines; the pipeline,
//! `simulate` and the [`shadow`] configurations all go through them.

pub mod borrowing;
pub mod controller;
pub mod flow_request;
pub mod level_queues;
pub mod limits;
pub mod queueset;
pub mod retry_after;
pub mod seat_seconds;
pub mod shadow;
pub mod timeout;
pub mod work_estimate;

use std::time::Duration;

/// How much of a priority level's concurrency a request will occupy.
///
/// Mirrors `request/width.go: WorkEstimate`: `initial_seats` are held while the request executes;
/// `final_seats` are held for `additional_latency` after it finishes (a mutating request waking
/// watchers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkEstimate {
    /// Seats while executing (≥ 1).
    pub initial_seats: u32,
    /// Seats after execution, for `additional_latency`.
    pub final_seats: u32,
    /// How long the final seats are held.
    pub additional_latency: Duration,
}

impl WorkEstimate {
    /// One seat, nothing afterwards: the estimate of most requests.
    pub const ONE: WorkEstimate = WorkEstimate {
        initial_seats: 1,
        final_seats: 0,
        additional_latency: Duration::ZERO,
    };

    /// `max(initial_seats, final_seats)`: the seats the request occupies at its widest.
    pub fn max_seats(&self) -> u32 {
        self.initial_seats.max(self.final_seats)
    }
}
