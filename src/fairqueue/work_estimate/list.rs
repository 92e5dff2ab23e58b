//! The list (and watch) work estimator.
//!
//! Mirrors `list_work_estimator.go` and the list-delegation decision of
//! `storage/cacher/delegator: ShouldDelegateListMeta` with `CacheWithoutSnapshots`.

use tokio::time::Instant;

use super::object_count::{ObjectCountError, ObjectStats};
use super::{cap, ListCostEstimate, WorkEstimator, WorkEstimatorConfig};
use crate::fairqueue::WorkEstimate;
use crate::request_info::{ListOptions, RequestInfo};

/// One seat per this many bytes loaded (`bytesPerSeat`).
const BYTES_PER_SEAT: u64 = 100_000;
/// A list served from the watch cache streams; its memory is capped at this
/// (`cacheWithStreamingMaxMemoryUsage`).
const CACHE_WITH_STREAMING_MAX_MEMORY_USAGE: u64 = 1_000_000;
/// The size assumed for objects of unknown size (`maxObjectSize`, etcd's request limit).
const MAX_OBJECT_SIZE: u64 = 1_500_000;
/// The count assumed when the count is stale (`infiniteObjectCount`).
const INFINITE_OBJECT_COUNT: u64 = 1_000_000_000;

impl WorkEstimator {
    pub(super) fn estimate_list(
        &self,
        info: &RequestInfo,
        max_seats: Option<u32>,
        now: Instant,
    ) -> WorkEstimate {
        let config = &self.config;
        let max_seats = cap(max_seats, config.maximum_list_seats_limit);
        // A list naming one object (metadata.name field selector) runs as a get in storage.
        let matches_single = !info.name.is_empty();
        let Ok(opts) = info.options.list() else {
            // Destined to fail validation; charge the most, as the reference does.
            return self.seats(max_seats);
        };
        if info.verb == "watch" {
            let send_initial_events = opts.send_initial_events == Some(true);
            let legacy_watch = opts.resource_version.is_empty() || opts.resource_version == "0";
            if !send_initial_events && !legacy_watch {
                return self.seats(config.minimum_seats);
            }
        }
        let from_cache = info.verb == "watch" || !list_from_storage(opts, config);
        let stats = match self
            .objects
            .get_resource(&info.api_group, &info.resource, now)
        {
            Ok(stats) => stats,
            // Stale counts signal a degraded upstream: assume the worst.
            Err(ObjectCountError::Stale) => ObjectStats {
                object_count: INFINITE_OBJECT_COUNT,
                average_object_size_bytes: MAX_OBJECT_SIZE,
            },
            // Unknown, or an aggregated API served elsewhere: the least (kubernetes#109106).
            Err(ObjectCountError::NotFound) => return self.seats(config.minimum_seats),
        };
        let seats = match config.list_cost {
            ListCostEstimate::SizeBased => seats_by_size(stats, opts, from_cache, matches_single),
            ListCostEstimate::CountBased => {
                seats_by_count(stats, opts, from_cache, matches_single, config)
            }
        };
        let seats = u32::try_from(seats).unwrap_or(u32::MAX);
        self.seats(seats.max(config.minimum_seats).min(max_seats))
    }
}

/// Whether the list must be served by storage rather than the watch cache
/// (`ShouldDelegateListMeta` with a cache without snapshots).
fn list_from_storage(opts: &ListOptions, config: &WorkEstimatorConfig) -> bool {
    let rv: &str = &opts.resource_version;
    match &*opts.resource_version_match {
        "Exact" => true,
        "NotOlderThan" => false,
        "" if !opts.continue_token.is_empty() => true,
        // Legacy exact match.
        "" if opts.limit > 0 && !rv.is_empty() && rv != "0" => true,
        // A consistent read: from the cache when it can serve one.
        "" if rv.is_empty() => !config.consistent_list_from_cache,
        "" => false,
        _ => true,
    }
}

/// `limit` when it is positive and below `count`, else `count`.
fn limited(count: u64, limit: i64) -> u64 {
    match u64::try_from(limit) {
        Ok(l) if l > 0 && l < count => l,
        _ => count,
    }
}

fn has_selector(opts: &ListOptions) -> bool {
    !opts.field_selector.is_empty() || !opts.label_selector.is_empty()
}

/// `seatsBasedOnObjectCount`: objects processed / `objects_per_seat`, rounded up.
fn seats_by_count(
    stats: ObjectStats,
    opts: &ListOptions,
    from_cache: bool,
    matches_single: bool,
    config: &WorkEstimatorConfig,
) -> u64 {
    let stored = stats.object_count;
    let limit = limited(stored, opts.limit);
    let objects = if matches_single {
        1
    } else if from_cache {
        stored
    } else if has_selector(opts) {
        stored.saturating_add(limit)
    } else {
        limit.saturating_mul(2)
    };
    (objects as f64 / config.objects_per_seat).ceil() as u64
}

/// `seatsBasedOnObjectSize`: bytes held in memory at once / 100 000, rounded up.
fn seats_by_size(
    stats: ObjectStats,
    opts: &ListOptions,
    from_cache: bool,
    matches_single: bool,
) -> u64 {
    let average = if stats.average_object_size_bytes == 0 && stats.object_count != 0 {
        MAX_OBJECT_SIZE
    } else {
        stats.average_object_size_bytes
    };
    let limited = limited(stats.object_count, opts.limit);
    let objects = if matches_single {
        1
    } else if from_cache {
        limited
    } else if has_selector(opts) {
        limited.max(stats.object_count / 2)
    } else {
        limited
    };
    let mut bytes = objects.saturating_mul(average);
    if from_cache {
        bytes = bytes.min(CACHE_WITH_STREAMING_MAX_MEMORY_USAGE);
    }
    (bytes as f64 / BYTES_PER_SEAT as f64).ceil() as u64
}
