//! The mutating work estimator: a write wakes the watches on its object, and the work of sending
//! those events is charged as final seats held after the request finishes.
//!
//! Mirrors `mutating_work_estimator.go` and the fixed-point arithmetic of `seat_seconds.go`.

use std::time::Duration;

use super::{cap, WorkEstimator};
use crate::fairqueue::WorkEstimate;
use crate::request_info::RequestInfo;

/// `SeatSeconds` are counted in units of 1e-8 seat-seconds (`ssScale`).
const SS_SCALE: f64 = 1e8;

impl WorkEstimator {
    pub(super) fn estimate_mutating(
        &self,
        info: &RequestInfo,
        max_seats: Option<u32>,
    ) -> WorkEstimate {
        let config = &self.config;
        let max_seats = cap(max_seats, config.maximum_mutating_seats_limit);
        if !config.mutating_enabled
            || (info.resource == "serviceaccounts" && info.subresource == "token")
        {
            // Creating a token stores nothing, so it wakes no watcher.
            return self.seats(config.minimum_seats);
        }
        let watchers = self.watches.interested_watch_count(info) as f64;
        if watchers < config.watches_per_seat.trunc() {
            // Few watchers: no final seats (the reference returns 1 seat here, not the minimum).
            return WorkEstimate::ONE;
        }
        let final_seats = (watchers / config.watches_per_seat).ceil();
        let final_work = seats_times_duration(final_seats, config.event_additional_duration);
        // Reshape the same work into at most `max_seats` seats for longer.
        let final_seats = final_seats.min(f64::from(max_seats));
        WorkEstimate {
            initial_seats: 1,
            final_seats: final_seats as u32,
            additional_latency: duration_per_seat(final_work, final_seats),
        }
    }
}

/// `SeatsTimesDuration`: the work in 1e-8 seat-seconds, rounded.
fn seats_times_duration(seats: f64, duration: Duration) -> u64 {
    (seats * duration.as_nanos() as f64 / (1e9 / SS_SCALE)).round() as u64
}

/// `SeatSeconds.DurationPerSeat`, truncated to whole nanoseconds like Go's conversion.
fn duration_per_seat(work: u64, seats: f64) -> Duration {
    Duration::from_nanos((work as f64 / seats * (1e9 / SS_SCALE)) as u64)
}
