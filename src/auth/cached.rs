//! The TokenReview authenticator behind a cache, with concurrent lookups of one token
//! coalesced. Mirrors `pkg/authentication/token/cache/cached_token_authenticator.go` as the
//! apiserver builds it (`cache.New(webhook, false, ttl, ttl)`):
//!
//! - the key is an HMAC-SHA256 of the token and audiences ([`super::keyhash`]), never the token;
//! - authenticated answers live `success_cache_ttl`, unauthenticated ones `failure_cache_ttl`,
//!   errors (including `status.error`) are never cached; a zero TTL disables that half;
//! - one review per key runs at a time, detached from the requests that wait for it (a spawned
//!   task bounded by the review timeout), so a client that goes away does not cancel it for the
//!   others. Differs: at most `max_in_flight` distinct reviews run at once, and the cache is
//!   bounded ([`super::token_cache`]).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use tokio::time::Instant;

use super::config::TokenReviewConfig;
use super::error::TokenReviewError;
use super::keyhash::{CacheKey, KeyHasher};
use super::secret::Secret;
use super::stats::{AuthStats, GaugeGuard};
use super::token_cache::ExpiringCache;
use super::webhook::TokenReviewer;
use super::Identity;

/// A review's answer: `Some` authenticated, `None` not.
pub(crate) type Outcome = Result<Option<Identity>, TokenReviewError>;

type Lookup = Shared<BoxFuture<'static, Outcome>>;

/// Cached, coalescing TokenReview authenticator.
pub(crate) struct CachedTokenReview {
    inner: Arc<Inner>,
}

struct Inner {
    reviewer: TokenReviewer,
    hasher: KeyHasher,
    audiences: Vec<String>,
    success_ttl: Duration,
    failure_ttl: Duration,
    max_in_flight: usize,
    cache: Mutex<ExpiringCache<Option<Identity>>>,
    in_flight: Mutex<HashMap<CacheKey, Lookup>>,
    stats: Arc<AuthStats>,
}

impl CachedTokenReview {
    pub(crate) fn new(
        cfg: &TokenReviewConfig,
        audiences: Vec<String>,
        hasher: KeyHasher,
        stats: Arc<AuthStats>,
    ) -> Self {
        CachedTokenReview {
            inner: Arc::new(Inner {
                reviewer: TokenReviewer::new(cfg, audiences.clone(), stats.clone()),
                hasher,
                audiences,
                success_ttl: cfg.success_cache_ttl,
                failure_ttl: cfg.failure_cache_ttl,
                max_in_flight: cfg.max_in_flight.max(1),
                cache: Mutex::new(ExpiringCache::new(cfg.cache_capacity)),
                in_flight: Mutex::new(HashMap::new()),
                stats,
            }),
        }
    }

    /// Authenticates `token`, from the cache when an unexpired answer is there.
    pub(crate) async fn authenticate(&self, token: &Secret) -> Outcome {
        let inner = &self.inner;
        let key = inner.hasher.key(token.expose(), &inner.audiences);
        if let Some(answer) = inner.cached(&key) {
            inner.stats.token_cache.hits.fetch_add(1, Relaxed);
            return Ok(answer);
        }
        inner.stats.token_cache.misses.fetch_add(1, Relaxed);
        let _blocked = GaugeGuard::new(&inner.stats.token_cache.blocked);
        let lookup = self.join_or_start(key, token)?;
        lookup.await
    }

    fn join_or_start(&self, key: CacheKey, token: &Secret) -> Result<Lookup, TokenReviewError> {
        let mut in_flight = self.inner.in_flight.lock();
        if let Some(lookup) = in_flight.get(&key) {
            self.inner.stats.token_cache.coalesced.fetch_add(1, Relaxed);
            return Ok(lookup.clone());
        }
        if in_flight.len() >= self.inner.max_in_flight {
            return Err(TokenReviewError::TooManyInFlight);
        }
        let task = tokio::spawn(Inner::fetch(self.inner.clone(), key, token.clone()));
        let lookup = async move { task.await.unwrap_or(Err(TokenReviewError::Crashed)) }
            .boxed()
            .shared();
        in_flight.insert(key, lookup.clone());
        Ok(lookup)
    }

    /// Answers currently cached (expired ones not yet dropped included).
    #[cfg(test)]
    pub(crate) fn cached_len(&self) -> usize {
        self.inner.cache.lock().len()
    }
}

impl Inner {
    fn cached(&self, key: &CacheKey) -> Option<Option<Identity>> {
        self.cache.lock().get(key, Instant::now())
    }

    async fn fetch(self: Arc<Self>, key: CacheKey, token: Secret) -> Outcome {
        // Dropped only after the answer is cached, so a new request finds one or the other; and
        // dropped even if the review panics, so the key is not stuck with a failed lookup.
        let _in_flight = InFlightEntry {
            in_flight: &self.in_flight,
            key,
        };
        self.fetch_and_store(&key, &token).await
    }

    async fn fetch_and_store(&self, key: &CacheKey, token: &Secret) -> Outcome {
        let _in_flight = GaugeGuard::new(&self.stats.token_cache.in_flight);
        // We may have raced with a review that just finished.
        if let Some(answer) = self.cached(key) {
            return Ok(answer);
        }
        let outcome = self.reviewer.review(token).await;
        let ttl = match &outcome {
            Ok(Some(_)) => self.success_ttl,
            Ok(None) => self.failure_ttl,
            Err(_) => Duration::ZERO,
        };
        if let Ok(answer) = &outcome {
            if !ttl.is_zero() {
                self.cache
                    .lock()
                    .insert(*key, answer.clone(), ttl, Instant::now());
            }
        }
        let counter = match outcome {
            Ok(_) => &self.stats.token_cache.fetch_ok,
            Err(_) => &self.stats.token_cache.fetch_error,
        };
        counter.fetch_add(1, Relaxed);
        outcome
    }
}

/// Removes a key's in-flight lookup when its review task ends, however it ends.
pub(super) struct InFlightEntry<'a, L> {
    pub(super) in_flight: &'a Mutex<HashMap<CacheKey, L>>,
    pub(super) key: CacheKey,
}

impl<L> Drop for InFlightEntry<'_, L> {
    fn drop(&mut self) {
        self.in_flight.lock().remove(&self.key);
    }
}

#[cfg(test)]
mod tests;
