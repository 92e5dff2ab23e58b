//! Counters the metrics module reads: authentications by method and result, token cache and
//! TokenReview activity. Plain atomics owned by one [`super::Authenticator`], no globals.
//!
//! They mirror the apiserver's `authentication_attempts{result}`,
//! `authentication_token_cache_request_total{status}`, `..._fetch_total{status}` and
//! `..._active_fetch_count{status}`.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::error::CredentialKind;

/// The result label of an authentication attempt, as `authentication_attempts{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptResult {
    /// A user was authenticated (anonymous included).
    Success,
    /// No credential was recognised and anonymous requests are disabled.
    Failure,
    /// A presented credential was rejected.
    Error,
}

/// Authentication counters of one authenticator.
#[derive(Debug, Default)]
pub struct AuthStats {
    succeeded: [AtomicU64; 5],
    rejected: [AtomicU64; 3],
    unauthenticated: AtomicU64,
    errors: AtomicU64,
    /// The TokenReview cache.
    pub token_cache: TokenCacheStats,
    /// TokenReview calls to the upstream.
    pub token_review: TokenReviewStats,
}

impl AuthStats {
    /// Requests authenticated by `method`.
    pub fn succeeded(&self, method: AuthMethod) -> u64 {
        self.succeeded[method_index(method)].load(Ordering::Relaxed)
    }

    /// Rejections of a presented credential of `kind` (a request with several rejected
    /// credentials counts once per kind).
    pub fn rejected(&self, kind: CredentialKind) -> u64 {
        self.rejected[kind_index(kind)].load(Ordering::Relaxed)
    }

    /// Attempts by result, as `authentication_attempts{result}`.
    pub fn attempts(&self, result: AttemptResult) -> u64 {
        match result {
            AttemptResult::Success => AuthMethod::ALL.iter().map(|m| self.succeeded(*m)).sum(),
            AttemptResult::Failure => self.unauthenticated.load(Ordering::Relaxed),
            AttemptResult::Error => self.errors.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn record_success(&self, method: AuthMethod) {
        self.succeeded[method_index(method)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_rejection(&self, kinds: impl Iterator<Item = CredentialKind>) {
        let mut seen = [false; 3];
        for kind in kinds {
            seen[kind_index(kind)] = true;
        }
        for (i, hit) in seen.iter().enumerate() {
            if *hit {
                self.rejected[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_unauthenticated(&self) {
        self.unauthenticated.fetch_add(1, Ordering::Relaxed);
    }
}

/// TokenReview cache counters.
#[derive(Debug, Default)]
pub struct TokenCacheStats {
    /// Lookups answered from the cache (`status="hit"`).
    pub hits: AtomicU64,
    /// Lookups that were not (`status="miss"`).
    pub misses: AtomicU64,
    /// Misses that joined a review already in flight for the same token.
    pub coalesced: AtomicU64,
    /// Reviews that completed without error (`fetch_total{status="ok"}`).
    pub fetch_ok: AtomicU64,
    /// Reviews that ended in an error (`fetch_total{status="error"}`).
    pub fetch_error: AtomicU64,
    /// Reviews running now (`active_fetch_count{status="in_flight"}`).
    pub in_flight: AtomicI64,
    /// Requests waiting for a review now (`active_fetch_count{status="blocked"}`).
    pub blocked: AtomicI64,
}

/// Counters of TokenReview HTTP calls.
#[derive(Debug, Default)]
pub struct TokenReviewStats {
    /// Calls that returned a 2xx status.
    pub ok: AtomicU64,
    /// Calls that returned another status or failed in transport.
    pub failed: AtomicU64,
    /// Calls that were retries of a transient failure.
    pub retries: AtomicU64,
}

fn method_index(method: AuthMethod) -> usize {
    match method {
        AuthMethod::RequestHeader => 0,
        AuthMethod::ClientCertificate => 1,
        AuthMethod::TokenFile => 2,
        AuthMethod::TokenReview => 3,
        AuthMethod::Anonymous => 4,
    }
}

fn kind_index(kind: CredentialKind) -> usize {
    match kind {
        CredentialKind::RequestHeader => 0,
        CredentialKind::ClientCertificate => 1,
        CredentialKind::BearerToken => 2,
    }
}

/// Increments a gauge until dropped.
pub(crate) struct GaugeGuard<'a>(&'a AtomicI64);

impl<'a> GaugeGuard<'a> {
    pub(crate) fn new(gauge: &'a AtomicI64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How a request was authenticated (a bounded metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    /// Front-proxy request headers, vouched for by the requestheader client certificate.
    RequestHeader,
    /// A client certificate from `--client-ca-file`.
    ClientCertificate,
    /// A bearer token from `--token-auth-file`.
    TokenFile,
    /// A bearer token accepted by a TokenReview.
    TokenReview,
    /// No credential; anonymous requests are enabled.
    Anonymous,
}

impl AuthMethod {
    /// Every method, in authenticator order.
    pub const ALL: [AuthMethod; 5] = [
        AuthMethod::RequestHeader,
        AuthMethod::ClientCertificate,
        AuthMethod::TokenFile,
        AuthMethod::TokenReview,
        AuthMethod::Anonymous,
    ];

    /// The label value, e.g. `token_review`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::RequestHeader => "requestheader",
            AuthMethod::ClientCertificate => "client_certificate",
            AuthMethod::TokenFile => "token_file",
            AuthMethod::TokenReview => "token_review",
            AuthMethod::Anonymous => "anonymous",
        }
    }
}
