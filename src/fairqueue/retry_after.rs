//! The `Retry-After` value of 429 responses, adapted per priority level to how many requests it
//! has been dropping.
//!
//! Mirrors `dropped_requests_tracker.go`: the clock is whole Unix seconds, passed in. The value starts
//! at 1, doubles (at most to 32, at most once per `retryAfter` seconds) when the last `retryAfter`
//! seconds saw at least `3 × retryAfter` drops, and shrinks by 1 when they saw fewer than
//! `retryAfter`. It only changes when the first drop of a new second is recorded.

use std::collections::HashMap;

/// The largest `Retry-After` ever suggested (`maxRetryAfter`).
pub const MAX_RETRY_AFTER: i64 = 32;

/// The drops of one second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UnixStat {
    unix_time: i64,
    requests: i64,
}

/// The drop history of one priority level.
///
/// Mirrors `dropped_requests_tracker.go: droppedRequestsStats`. Like the reference, the "current
/// second" starts at Unix time 0 with no drops and the last increase at time 0.
#[derive(Debug, Clone)]
struct DroppedRequestsStats {
    // Complete seconds before `current_unix`, spanning at most `min(2 × retry_after, 32)` seconds.
    history: Vec<UnixStat>,
    current_unix: i64,
    current_count: i64,
    retry_after: i64,
    retry_after_update_unix: i64,
}

impl DroppedRequestsStats {
    fn new() -> Self {
        DroppedRequestsStats {
            history: Vec::new(),
            current_unix: 0,
            current_count: 0,
            retry_after: 1,
            retry_after_update_unix: 0,
        }
    }

    fn record(&mut self, unix_time: i64) {
        if self.current_unix == unix_time {
            self.current_count += 1;
            return;
        }
        self.update_history(self.current_unix, self.current_count);
        self.current_unix = unix_time;
        self.current_count = 1;
        // Only the first drop of a second reconsiders the value, from the seconds before it.
        self.update_retry_after(unix_time);
    }

    /// Appends a finished second and drops entries too old to ever matter again (measured from that
    /// finished second, as the reference does).
    fn update_history(&mut self, unix_time: i64, count: i64) {
        self.history.push(UnixStat {
            unix_time,
            requests: count,
        });
        let max_history = (2 * self.retry_after).min(MAX_RETRY_AFTER);
        let stale = self
            .history
            .iter()
            .take_while(|s| unix_time - s.unix_time > max_history)
            .count();
        self.history.drain(..stale);
    }

    /// Reconsiders the value from the drops within `[unix_time − retry_after, unix_time)`.
    fn update_retry_after(&mut self, unix_time: i64) {
        let retry_after = self.retry_after;
        let dropped: i64 = self
            .history
            .iter()
            .rev()
            .take_while(|s| unix_time - s.unix_time <= retry_after)
            .filter(|s| s.unix_time < unix_time)
            .map(|s| s.requests)
            .sum();
        if unix_time - self.retry_after_update_unix >= retry_after && dropped >= 3 * retry_after {
            // Multiplicative increase, as TCP does.
            self.retry_after = (2 * retry_after).min(MAX_RETRY_AFTER);
            self.retry_after_update_unix = unix_time;
        } else if dropped < retry_after && retry_after > 1 {
            self.retry_after = retry_after - 1;
        }
    }
}

/// Per priority level, the `Retry-After` to send with rejections.
///
/// Mirrors `dropped_requests_tracker.go: droppedRequestsTracker`. Not synchronised: the caller
/// holds it behind its own lock.
#[derive(Debug, Clone, Default)]
pub struct DroppedRequestsTracker {
    levels: HashMap<String, DroppedRequestsStats>,
}

impl DroppedRequestsTracker {
    /// An empty tracker: every level answers 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that a request of `priority_level` was rejected at `now_unix_secs` (whole seconds
    /// since the Unix epoch). Call it before [`retry_after`](Self::retry_after) for the same
    /// rejection: the reported value is the one after recording it.
    pub fn record_dropped(&mut self, priority_level: &str, now_unix_secs: i64) {
        if let Some(stats) = self.levels.get_mut(priority_level) {
            stats.record(now_unix_secs);
            return;
        }
        let mut stats = DroppedRequestsStats::new();
        stats.record(now_unix_secs);
        self.levels.insert(priority_level.to_string(), stats);
    }

    /// The `Retry-After` seconds for `priority_level`, 1 to 32; 1 for a level that never dropped a
    /// request.
    pub fn retry_after(&self, priority_level: &str) -> u64 {
        self.levels
            .get(priority_level)
            .map_or(1, |s| s.retry_after.unsigned_abs())
    }

    /// Forgets the levels for which `keep` is false (e.g. levels removed from the configuration),
    /// so the map stays bounded by the configuration. The reference never forgets; a level that
    /// comes back starts over at 1.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.levels.retain(|name, _| keep(name));
    }
}

#[cfg(test)]
mod tests;
