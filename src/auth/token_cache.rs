//! A bounded cache of token review answers with per-entry expiry. Sans-I/O: time is passed in.
//!
//! The apiserver's cache (`cache_striped.go` over `utilcache.Expiring`) is unbounded; ours holds
//! at most `capacity` entries. When full, expired entries go first, then the entry closest to
//! expiry (with fixed TTLs, the oldest answer of its kind).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::keyhash::CacheKey;

struct Entry<V> {
    value: V,
    expires: Instant,
    seq: u64,
}

/// Cached values keyed by [`CacheKey`], each valid until its own deadline.
pub(crate) struct ExpiringCache<V> {
    entries: HashMap<CacheKey, Entry<V>>,
    // (deadline, insertion sequence) → key: the eviction order.
    by_expiry: BTreeMap<(Instant, u64), CacheKey>,
    capacity: usize,
    seq: u64,
}

impl<V: Clone> ExpiringCache<V> {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        ExpiringCache {
            entries: HashMap::new(),
            by_expiry: BTreeMap::new(),
            capacity: capacity.max(1),
            seq: 0,
        }
    }

    /// The value for `key` if it has not expired at `now`; an expired entry is dropped.
    pub(crate) fn get(&mut self, key: &CacheKey, now: Instant) -> Option<V> {
        let entry = self.entries.get(key)?;
        if now < entry.expires {
            return Some(entry.value.clone());
        }
        self.remove(key);
        None
    }

    /// Stores `value` for `ttl` from `now`, replacing any earlier value for `key`. A `ttl` so
    /// long that the deadline is not representable stores nothing.
    pub(crate) fn insert(&mut self, key: CacheKey, value: V, ttl: Duration, now: Instant) {
        self.remove(&key);
        let Some(expires) = now.checked_add(ttl) else {
            return;
        };
        self.purge_expired(now);
        while self.entries.len() >= self.capacity {
            let Some((_, oldest)) = self.by_expiry.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        self.seq += 1;
        self.by_expiry.insert((expires, self.seq), key);
        self.entries.insert(
            key,
            Entry {
                value,
                expires,
                seq: self.seq,
            },
        );
    }

    /// Number of entries, expired ones not yet dropped included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn remove(&mut self, key: &CacheKey) {
        if let Some(entry) = self.entries.remove(key) {
            self.by_expiry.remove(&(entry.expires, entry.seq));
        }
    }

    fn purge_expired(&mut self, now: Instant) {
        while let Some(entry) = self.by_expiry.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.entries.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::keyhash::KeyHasher;
    use super::*;
    use proptest::prelude::*;

    fn key(n: u32) -> CacheKey {
        KeyHasher::with_key([7; 32]).key(&n.to_string(), &[])
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn entries_expire_at_their_own_deadline() {
        let now = Instant::now();
        let mut cache = ExpiringCache::new(10);
        cache.insert(key(1), "short", 2 * S, now);
        cache.insert(key(2), "long", 5 * S, now);
        assert_eq!(cache.get(&key(1), now + S), Some("short"));
        assert_eq!(cache.get(&key(1), now + 2 * S), None);
        assert_eq!(cache.get(&key(2), now + 2 * S), Some("long"));
        assert_eq!(cache.get(&key(2), now + 5 * S), None);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn full_cache_evicts_expired_then_soonest_to_expire() {
        let now = Instant::now();
        let mut cache = ExpiringCache::new(2);
        cache.insert(key(1), 1, 10 * S, now);
        cache.insert(key(2), 2, 3 * S, now);
        cache.insert(key(3), 3, 10 * S, now);
        assert_eq!(
            cache.get(&key(2), now),
            None,
            "closest to expiry goes first"
        );
        assert_eq!(cache.get(&key(1), now), Some(1));
        assert_eq!(cache.get(&key(3), now), Some(3));
    }

    #[test]
    fn reinserting_a_key_replaces_its_value_and_deadline() {
        let now = Instant::now();
        let mut cache = ExpiringCache::new(2);
        cache.insert(key(1), 1, S, now);
        cache.insert(key(1), 2, 10 * S, now);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&key(1), now + 5 * S), Some(2));
    }

    #[test]
    fn an_unrepresentable_deadline_stores_nothing() {
        let mut cache = ExpiringCache::new(2);
        cache.insert(key(1), 1, Duration::MAX, Instant::now());
        assert_eq!(cache.len(), 0);
    }

    proptest! {
        #[test]
        fn never_holds_more_than_capacity(
            capacity in 1usize..8,
            ops in prop::collection::vec((0u32..20, 1u64..10, 0u64..3), 1..200),
        ) {
            let start = Instant::now();
            let mut cache = ExpiringCache::new(capacity);
            let mut elapsed = 0;
            for (k, ttl, advance) in ops {
                elapsed += advance;
                let now = start + Duration::from_secs(elapsed);
                cache.insert(key(k), k, Duration::from_secs(ttl), now);
                prop_assert!(cache.len() <= capacity);
                prop_assert_eq!(cache.entries.len(), cache.by_expiry.len());
                prop_assert_eq!(cache.get(&key(k), now), Some(k));
            }
        }
    }
}
