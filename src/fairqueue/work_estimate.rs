//! Work estimation: how many seats a request occupies, and for how long after it finishes.
//!
//! Mirrors `request/width.go`, `config.go`, `list_work_estimator.go`,
//! `mutating_work_estimator.go`, `object_count_tracker.go` and `watch_tracker.go`.
//!
//! Feature gates: we follow the apiserver's defaults since 1.34 — `SizeBasedListCostEstimate` on
//! (list cost from the bytes loaded, list cap 100 seats) and `WatchList` on (watches are charged
//! like lists) — and let [`WorkEstimatorConfig`] switch either off (count-based lists with a cap of
//! 10, as before 1.34, for older upstreams). The estimator only knows what the proxy feeds its
//! [`ObjectCountTracker`]: counts and sizes scraped from the upstream's storage metrics (1.34+
//! publishes both) and/or counts and sizes seen in forwarded list responses. A resource with a
//! count but no known size is charged like the apiserver charges one: 1.5 MB per object.

mod list;
mod metrics_text;
mod mutating;
mod object_count;
mod watch_tracker;

use std::time::Duration;

use tokio::time::Instant;

pub use metrics_text::{parse_storage_metrics, resource_key, StorageMetric, StorageSample};
pub use object_count::{
    list_counts_all_objects, ObjectCountError, ObjectCountTracker, ObjectStats,
    MAX_TRACKED_RESOURCES, PRUNE_INTERVAL, STALE_TOLERATION,
};
pub use watch_tracker::{WatchGuard, WatchTracker};

use super::WorkEstimate;
use crate::request_info::RequestInfo;

/// How list (and watch) requests are charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListCostEstimate {
    /// `SizeBasedListCostEstimate` on (default since 1.34): one seat per 100 000 bytes loaded.
    SizeBased,
    /// The gate off: one seat per 100 objects processed.
    CountBased,
}

/// The estimator's parameters (`WorkEstimatorConfig` plus the feature gates it depends on).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkEstimatorConfig {
    /// Size- or count-based list cost.
    pub list_cost: ListCostEstimate,
    /// `WatchList` gate: watches are estimated like lists (else 1 seat).
    pub watch_list: bool,
    /// Whether the upstream's watch cache serves consistent reads (`resourceVersion=""`); true
    /// for current apiservers with an etcd that supports progress notifications
    /// (`ConsistentReadSupported`). When false such lists count as reading from storage.
    pub consistent_list_from_cache: bool,
    /// `MinimumSeats` (1).
    pub minimum_seats: u32,
    /// `MaximumListSeatsLimit`: 100 size-based, 10 count-based.
    pub maximum_list_seats_limit: u32,
    /// `MaximumMutatingSeatsLimit` (10).
    pub maximum_mutating_seats_limit: u32,
    /// `ObjectsPerSeat` (100).
    pub objects_per_seat: f64,
    /// `WatchesPerSeat` (10).
    pub watches_per_seat: f64,
    /// `EventAdditionalDuration` (5 ms).
    pub event_additional_duration: Duration,
    /// `MutatingWorkEstimatorConfig.Enabled` (true).
    pub mutating_enabled: bool,
}

impl Default for WorkEstimatorConfig {
    fn default() -> Self {
        Self::with_list_cost(ListCostEstimate::SizeBased)
    }
}

impl WorkEstimatorConfig {
    /// The reference defaults for the given list cost mode (`DefaultWorkEstimatorConfig`).
    pub fn with_list_cost(list_cost: ListCostEstimate) -> Self {
        WorkEstimatorConfig {
            list_cost,
            watch_list: true,
            consistent_list_from_cache: true,
            minimum_seats: 1,
            maximum_list_seats_limit: match list_cost {
                ListCostEstimate::SizeBased => 100,
                ListCostEstimate::CountBased => 10,
            },
            maximum_mutating_seats_limit: 10,
            objects_per_seat: 100.0,
            watches_per_seat: 10.0,
            event_additional_duration: Duration::from_millis(5),
            mutating_enabled: true,
        }
    }
}

/// Estimates the work of requests from their attributes, the objects stored upstream and the
/// watches being forwarded. Cheap to clone (the trackers are shared).
#[derive(Debug, Clone, Default)]
pub struct WorkEstimator {
    config: WorkEstimatorConfig,
    objects: ObjectCountTracker,
    watches: WatchTracker,
}

impl WorkEstimator {
    /// An estimator with empty trackers.
    pub fn new(config: WorkEstimatorConfig) -> Self {
        WorkEstimator {
            config,
            objects: ObjectCountTracker::new(),
            watches: WatchTracker::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WorkEstimatorConfig {
        &self.config
    }

    /// The object stats the list estimator reads; feed it from the upstream.
    pub fn objects(&self) -> &ObjectCountTracker {
        &self.objects
    }

    /// The watches the mutating estimator counts; register every forwarded watch here.
    pub fn watches(&self) -> &WatchTracker {
        &self.watches
    }

    /// The work estimate of a request with attributes `info` (its list options among them), at a
    /// level whose `max_seats` is given by `LevelLimits::max_seats` (`None` for exempt
    /// and `Reject` levels), at `now` (for the staleness of object counts).
    ///
    /// Mirrors `width.go: workEstimator.estimate`: `list` → list estimator; `watch` → list
    /// estimator if `watch_list` else 1 seat; `create`/`update`/`patch`/`delete` → mutating
    /// estimator; anything else → `minimum_seats`.
    pub fn estimate(
        &self,
        info: &RequestInfo,
        max_seats: Option<u32>,
        now: Instant,
    ) -> WorkEstimate {
        match info.verb.as_str() {
            "list" => self.estimate_list(info, max_seats, now),
            "watch" if self.config.watch_list => self.estimate_list(info, max_seats, now),
            "create" | "update" | "patch" | "delete" => self.estimate_mutating(info, max_seats),
            _ => self.seats(self.config.minimum_seats),
        }
    }

    fn seats(&self, initial_seats: u32) -> WorkEstimate {
        WorkEstimate {
            initial_seats,
            final_seats: 0,
            additional_latency: Duration::ZERO,
        }
    }
}

/// The per-level cap: the level's `max_seats` if set, non-zero and within `limit`, else `limit`.
fn cap(max_seats: Option<u32>, limit: u32) -> u32 {
    match max_seats {
        Some(m) if m != 0 && m <= limit => m,
        _ => limit,
    }
}

#[cfg(test)]
mod tests;
