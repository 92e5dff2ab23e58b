//! Object counts (and average sizes) per resource, for the list work estimator.
//!
//! Mirrors `request/object_count_tracker.go`: an entry not refreshed for 3 minutes is stale, an
//! entry not refreshed for an hour is pruned (then "not found"). The apiserver feeds it from its own
//! storage; the proxy learns the same numbers from the upstream, either by scraping its metrics
//! ([`ObjectCountTracker::apply_metrics`], the preferred source: cluster-wide counts for every
//! resource, refreshed each minute) or from the list responses it forwards
//! ([`ObjectCountTracker::observe_list`]).

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::metrics_text::{parse_storage_metrics, with_resource_key, StorageMetric};
use crate::request_info::RequestInfo;

/// Past this age an entry is stale (`staleTolerationThreshold`: the apiserver polls each minute
/// and tolerates 2–3 failures).
pub const STALE_TOLERATION: Duration = Duration::from_secs(3 * 60);

/// Entries older than this are removed by [`ObjectCountTracker::prune`] (`pruneInterval`), which
/// the owner should call this often.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// At most this many resources are tracked; further new keys are ignored until a prune.
pub const MAX_TRACKED_RESOURCES: usize = 10_000;

/// `storage.Stats`: what is known of a resource's stored objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectStats {
    /// Number of objects stored (cluster-wide).
    pub object_count: u64,
    /// Estimated average serialized size; 0 when unknown.
    pub average_object_size_bytes: u64,
}

/// Why no current stats are available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ObjectCountError {
    /// The resource is not tracked (unknown, aggregated, or pruned).
    #[error("object count not found for the given resource")]
    NotFound,
    /// The entry has not been refreshed for over [`STALE_TOLERATION`].
    #[error("object count has gone stale for the given resource")]
    Stale,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    stats: ObjectStats,
    last_updated: Instant,
}

/// Object stats per resource key (`resource` or `resource.group`). Cloning shares the data.
#[derive(Debug, Clone, Default)]
pub struct ObjectCountTracker {
    entries: Arc<RwLock<HashMap<String, Entry>>>,
}

/// The stats under `key` in `entries`: not found, stale at `now`, or current (`Get`).
fn stats_of(
    entries: &HashMap<String, Entry>,
    key: &str,
    now: Instant,
) -> Result<ObjectStats, ObjectCountError> {
    let entry = entries.get(key).ok_or(ObjectCountError::NotFound)?;
    if now.saturating_duration_since(entry.last_updated) > STALE_TOLERATION {
        return Err(ObjectCountError::Stale);
    }
    Ok(entry.stats)
}

/// Whether a successful response to this request lists every object of its resource, so that its
/// item count (plus `metadata.remainingItemCount`) is the resource's object count: a cluster-wide
/// `list` of a resource (no subresource, no name), without label or field selector and not a
/// continuation.
pub fn list_counts_all_objects(info: &RequestInfo) -> bool {
    if !info.is_resource_request
        || info.verb != "list"
        || !info.namespace.is_empty()
        || !info.name.is_empty()
        || !info.subresource.is_empty()
    {
        return false;
    }
    info.options.list().is_ok_and(|o| {
        o.label_selector.is_empty() && o.field_selector.is_empty() && o.continue_token.is_empty()
    })
}

impl ObjectCountTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the stats of a resource as of `now` (`Set`).
    pub fn set(&self, key: &str, stats: ObjectStats, now: Instant) {
        let mut entries = self.write();
        if let Some(entry) = entries.get_mut(key) {
            *entry = Entry {
                stats,
                last_updated: now,
            };
        } else if entries.len() < MAX_TRACKED_RESOURCES {
            let entry = Entry {
                stats,
                last_updated: now,
            };
            entries.insert(key.to_string(), entry);
        } else {
            tracing::debug!(
                resource = key,
                "Object count tracker full; resource not tracked"
            );
        }
    }

    /// The stats of a resource (`Get`): not found, stale (over [`STALE_TOLERATION`] old at `now`),
    /// or current.
    pub fn get(&self, key: &str, now: Instant) -> Result<ObjectStats, ObjectCountError> {
        stats_of(&self.read(), key, now)
    }

    /// [`get`](Self::get) by group and resource: the key
    /// ([`resource_key`](super::metrics_text::resource_key)) is put together on the stack when it
    /// fits, not allocated for each request.
    pub fn get_resource(
        &self,
        group: &str,
        resource: &str,
        now: Instant,
    ) -> Result<ObjectStats, ObjectCountError> {
        let entries = self.read();
        if entries.is_empty() {
            // Nothing known (always, in `simulate` without object counts): no key to build.
            return Err(ObjectCountError::NotFound);
        }
        with_resource_key(group, resource, |key| stats_of(&entries, key, now))
    }

    /// Records the count learnt from a forwarded list response: `items` objects in the response
    /// plus `remaining_item_count` (`metadata.remainingItemCount`). Call it only for 2xx responses
    /// to requests that [`list_counts_all_objects`] accepts, and only when the response either has
    /// no `metadata.continue` (pass `None`: the list is complete) or carries
    /// `metadata.remainingItemCount`. The known average size is kept.
    pub fn observe_list(
        &self,
        key: &str,
        items: u64,
        remaining_item_count: Option<u64>,
        now: Instant,
    ) {
        let average = self
            .read()
            .get(key)
            .map_or(0, |e| e.stats.average_object_size_bytes);
        let stats = ObjectStats {
            object_count: items.saturating_add(remaining_item_count.unwrap_or(0)),
            average_object_size_bytes: average,
        };
        self.set(key, stats, now);
    }

    /// Records an average object size learnt from a forwarded list response of `items` objects
    /// and `body_bytes` bytes (any list of the resource will do). It does not refresh the entry's
    /// age and is ignored for untracked resources or empty lists. The serialized size of a
    /// response (JSON or protobuf) only approximates the size in storage.
    pub fn observe_list_bytes(&self, key: &str, items: u64, body_bytes: u64) {
        if items == 0 {
            return;
        }
        if let Some(entry) = self.write().get_mut(key) {
            entry.stats.average_object_size_bytes = body_bytes / items;
        }
    }

    /// Applies a scrape of the upstream's `/metrics` (Prometheus text format) taken at `now`;
    /// returns how many resources got a count. A count of −1 (the upstream failed to poll its
    /// storage) is skipped, so the entry ages towards stale as in the apiserver. A size estimate
    /// of −1 makes the average size unknown; without any size family the known average is kept.
    pub fn apply_metrics(&self, text: &str, now: Instant) -> usize {
        let samples = parse_storage_metrics(text);
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for s in samples
            .iter()
            .filter(|s| s.metric == StorageMetric::ObjectCount)
        {
            if s.value >= 0.0 {
                counts.insert(&s.key, s.value as u64);
            }
        }
        let mut sizes: HashMap<&str, f64> = HashMap::new();
        for s in samples
            .iter()
            .filter(|s| s.metric == StorageMetric::SizeEstimateBytes)
        {
            sizes.insert(&s.key, s.value);
        }
        for (key, count) in &counts {
            let previous = self
                .read()
                .get(*key)
                .map(|e| e.stats.average_object_size_bytes);
            let average = match sizes.get(key) {
                Some(&total) if total >= 0.0 && *count > 0 => (total as u64) / count,
                Some(_) => 0,
                None => previous.unwrap_or(0),
            };
            let stats = ObjectStats {
                object_count: *count,
                average_object_size_bytes: average,
            };
            self.set(key, stats, now);
        }
        counts.len()
    }

    /// Removes the entries not refreshed within [`PRUNE_INTERVAL`] before `now` (`prune`).
    pub fn prune(&self, now: Instant) {
        self.write()
            .retain(|_, e| now.saturating_duration_since(e.last_updated) < PRUNE_INTERVAL);
    }

    /// The number of tracked resources.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no resource is tracked.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    // Every critical section is a single insert/update, so a poisoned lock holds consistent data.
    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, Entry>> {
        self.entries.read()
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<String, Entry>> {
        self.entries.write()
    }
}
