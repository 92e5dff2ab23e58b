//! Counts the watches the proxy is forwarding, so that mutating requests can be charged for the
//! watch events they cause.
//!
//! Mirrors `watch_tracker.go`. Shared by clones; registering returns an RAII [`WatchGuard`] that
//! forgets the watch when dropped (the stream ended, the client went away, the upstream failed).

use compact_str::CompactString;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use crate::request_info::{field_requires_exact_match, RequestInfo};

/// Watches of these resources with an exact field-selector match on the named field are served
/// from a watch-cache index, so events of other objects never reach them (`getBuiltinIndexes`).
const BUILTIN_INDEXES: &[(&str, &str)] = &[("pods", "spec.nodeName")];

/// Watches that are alike for event fan-out: same group, resource, namespace and name
/// (`watchIdentifier`); selectors are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct WatchIdentifier {
    api_group: CompactString,
    resource: CompactString,
    namespace: CompactString,
    name: CompactString,
}

/// The number of registered watches per identifier. Cloning shares the counts.
#[derive(Debug, Clone, Default)]
pub struct WatchTracker {
    counts: Arc<Mutex<HashMap<WatchIdentifier, usize>>>,
}

/// Keeps one watch registered in a [`WatchTracker`]; dropping it forgets the watch.
#[derive(Debug)]
#[must_use = "the watch is forgotten as soon as the guard is dropped"]
pub struct WatchGuard {
    tracker: WatchTracker,
    identifier: WatchIdentifier,
    counted: bool,
}

impl WatchTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a watch being forwarded. Returns `None` when `info.verb` is not `watch`.
    ///
    /// A pods watch whose field selector requires `spec.nodeName` to equal a non-empty value is
    /// kept but not counted (the reference approximates "indexed watchers that match the event's
    /// node" by those with an empty value). A query that does not parse counts as unindexed.
    pub fn register(&self, info: &RequestInfo) -> Option<WatchGuard> {
        if info.verb != "watch" {
            return None;
        }
        let counted = match BUILTIN_INDEXES.iter().find(|(r, _)| *r == info.resource) {
            None => true,
            Some((_, field)) => !matches!(index_value(info, field), Some(v) if !v.is_empty()),
        };
        let identifier = WatchIdentifier {
            api_group: info.api_group.clone(),
            resource: info.resource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
        };
        if counted {
            *self.counts.lock().entry(identifier.clone()).or_insert(0) += 1;
        }
        Some(WatchGuard {
            tracker: self.clone(),
            identifier,
            counted,
        })
    }

    /// How many registered watches may receive an event from a request with these attributes:
    /// those on the whole resource, plus (if it has a namespace) those on its namespace, plus (if
    /// it names an object) those on that object. Read-only verbs (`get`, `list`, `watch`,
    /// `proxy`) cause no events: 0.
    ///
    /// Mirrors `GetInterestedWatchCount`; like the reference, a `create` has no name yet, so
    /// watches on one object are not counted for it.
    pub fn interested_watch_count(&self, info: &RequestInfo) -> usize {
        if matches!(info.verb.as_str(), "get" | "list" | "watch" | "proxy") {
            return 0;
        }
        let counts = self.counts.lock();
        if counts.is_empty() {
            // No watch registered (always, in `simulate`): no identifier to put together.
            return 0;
        }
        let mut id = WatchIdentifier {
            api_group: info.api_group.clone(),
            resource: info.resource.clone(),
            ..WatchIdentifier::default()
        };
        let mut total = counts.get(&id).copied().unwrap_or(0);
        if !info.namespace.is_empty() {
            id.namespace = info.namespace.clone();
            total += counts.get(&id).copied().unwrap_or(0);
        }
        if !info.name.is_empty() {
            id.name = info.name.clone();
            total += counts.get(&id).copied().unwrap_or(0);
        }
        total
    }

    /// The number of distinct watch identifiers tracked (for tests and debugging).
    pub fn tracked_identifiers(&self) -> usize {
        self.counts.lock().len()
    }

    // Poisoning cannot leave the map inconsistent (every critical section is one update), so a
    // poisoned lock is used as is.
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let mut counts = self.tracker.counts.lock();
        if let Some(n) = counts.get_mut(&self.identifier) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.identifier);
            }
        }
    }
}

/// The exact-match value of `field` in the watch's field selector; `None` when unset or the query
/// does not convert (`getIndexValue`'s `<unset>`).
fn index_value(info: &RequestInfo, field: &str) -> Option<String> {
    let opts = info.options.list().ok()?;
    field_requires_exact_match(&opts.field_selector, field)
}
