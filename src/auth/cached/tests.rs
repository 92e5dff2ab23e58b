use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::auth::config::TokenReviewConfig;
use crate::auth::fake_transport::{authenticated, status, unauthenticated, FakeTransport};
use http::StatusCode;

const SECOND: Duration = Duration::from_secs(1);

fn cached(
    transport: Arc<FakeTransport>,
    tune: impl FnOnce(&mut TokenReviewConfig),
) -> CachedTokenReview {
    let mut cfg = TokenReviewConfig::new(transport);
    tune(&mut cfg);
    CachedTokenReview::new(
        &cfg,
        Vec::new(),
        KeyHasher::random().expect("random key"),
        Arc::new(AuthStats::default()),
    )
}

fn ttls(success: u64, failure: u64) -> impl FnOnce(&mut TokenReviewConfig) {
    move |cfg| {
        cfg.success_cache_ttl = Duration::from_secs(success);
        cfg.failure_cache_ttl = Duration::from_secs(failure);
    }
}

async fn user(auth: &CachedTokenReview, token: &str) -> Outcome {
    auth.authenticate(&Secret::new(token)).await
}

#[tokio::test(start_paused = true)]
async fn successes_are_cached_for_the_success_ttl() {
    let transport = FakeTransport::users();
    let auth = cached(transport.clone(), ttls(120, 10));
    for _ in 0..3 {
        assert!(user(&auth, "good").await.expect("ok").is_some());
    }
    assert_eq!(transport.calls(), 1);
    tokio::time::advance(119 * SECOND).await;
    user(&auth, "good").await.expect("ok");
    assert_eq!(transport.calls(), 1, "still cached just before the TTL");
    tokio::time::advance(SECOND).await;
    user(&auth, "good").await.expect("ok");
    assert_eq!(transport.calls(), 2, "reviewed again at the TTL");
    let stats = &auth.inner.stats.token_cache;
    assert_eq!(
        (stats.hits.load(Relaxed), stats.misses.load(Relaxed)),
        (3, 2)
    );
    assert_eq!(stats.fetch_ok.load(Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn failures_are_cached_for_the_failure_ttl() {
    let transport = FakeTransport::users();
    let auth = cached(transport.clone(), ttls(120, 10));
    assert_eq!(user(&auth, "bad").await, Ok(None));
    tokio::time::advance(9 * SECOND).await;
    assert_eq!(user(&auth, "bad").await, Ok(None));
    assert_eq!(transport.calls(), 1);
    tokio::time::advance(SECOND).await;
    assert_eq!(user(&auth, "bad").await, Ok(None));
    assert_eq!(transport.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn errors_are_never_cached() {
    let cases = [
        status(StatusCode::FORBIDDEN, "forbidden"),
        unauthenticated("token has expired"),
    ];
    for reply in cases {
        let transport = FakeTransport::new(move |_, _| Ok(reply.clone()));
        let auth = cached(transport.clone(), ttls(120, 120));
        assert!(user(&auth, "t").await.is_err());
        assert!(user(&auth, "t").await.is_err());
        assert_eq!(transport.calls(), 2);
        assert_eq!(auth.cached_len(), 0);
        assert_eq!(auth.inner.stats.token_cache.fetch_error.load(Relaxed), 2);
    }
}

#[tokio::test(start_paused = true)]
async fn zero_ttl_disables_that_half_of_the_cache() {
    let transport = FakeTransport::users();
    let auth = cached(transport.clone(), ttls(0, 60));
    user(&auth, "good").await.expect("ok");
    user(&auth, "good").await.expect("ok");
    assert_eq!(transport.calls(), 2, "successes not cached");
    user(&auth, "bad").await.expect("ok");
    user(&auth, "bad").await.expect("ok");
    assert_eq!(transport.calls(), 3, "failures cached");
}

#[tokio::test(start_paused = true)]
async fn concurrent_lookups_of_one_token_share_a_review() {
    let transport = FakeTransport::slow(2 * SECOND, |_, _| Ok(authenticated("alice", &[])));
    let auth = Arc::new(cached(transport.clone(), ttls(120, 120)));
    let waiters: Vec<_> = (0..10)
        .map(|_| {
            let auth = auth.clone();
            tokio::spawn(async move { user(&auth, "same").await })
        })
        .collect();
    for waiter in waiters {
        let id = waiter
            .await
            .expect("task")
            .expect("ok")
            .expect("authenticated");
        assert_eq!(id.user, "alice");
    }
    assert_eq!(transport.calls(), 1);
    let stats = &auth.inner.stats.token_cache;
    assert_eq!(stats.coalesced.load(Relaxed), 9);
    assert_eq!(stats.blocked.load(Relaxed), 0);
    assert_eq!(stats.in_flight.load(Relaxed), 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_goes_away_does_not_cancel_the_review() {
    let transport = FakeTransport::slow(2 * SECOND, |_, _| Ok(authenticated("alice", &[])));
    let auth = cached(transport.clone(), ttls(120, 120));
    let gave_up = tokio::time::timeout(SECOND, user(&auth, "t")).await;
    assert!(gave_up.is_err());
    tokio::time::sleep(2 * SECOND).await;
    assert!(user(&auth, "t").await.expect("ok").is_some());
    assert_eq!(
        transport.calls(),
        1,
        "the detached review finished and was cached"
    );
}

#[tokio::test(start_paused = true)]
async fn the_cache_is_bounded() {
    let transport = FakeTransport::users();
    let auth = cached(transport.clone(), |cfg| cfg.cache_capacity = 2);
    for token in ["good1", "good2", "good3"] {
        user(&auth, token).await.expect("ok");
    }
    assert_eq!(auth.cached_len(), 2);
    user(&auth, "good1").await.expect("ok");
    assert_eq!(transport.calls(), 4, "the oldest answer was evicted");
}

#[tokio::test(start_paused = true)]
async fn too_many_distinct_reviews_in_flight_are_rejected() {
    let transport = FakeTransport::slow(5 * SECOND, |_, _| Ok(authenticated("a", &[])));
    let auth = Arc::new(cached(transport.clone(), |cfg| cfg.max_in_flight = 1));
    let first = {
        let auth = auth.clone();
        tokio::spawn(async move { user(&auth, "one").await })
    };
    tokio::task::yield_now().await;
    assert_eq!(
        user(&auth, "two").await,
        Err(TokenReviewError::TooManyInFlight)
    );
    assert!(first.await.expect("task").expect("ok").is_some());
    assert!(user(&auth, "two").await.expect("ok").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_review_that_panics_fails_once_and_frees_its_key() {
    let transport = FakeTransport::new(|_, call| {
        assert!(call > 0, "first review panics");
        Ok(authenticated("alice", &[]))
    });
    let auth = cached(transport.clone(), ttls(120, 120));
    assert_eq!(user(&auth, "t").await, Err(TokenReviewError::Crashed));
    assert!(user(&auth, "t").await.expect("ok").is_some());
    assert_eq!(transport.calls(), 2);
}
