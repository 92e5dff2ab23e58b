//! SubjectAccessReview authorization of the admin listener's callers.
//!
//! Mirrors the apiserver's delegating authorizer (`pkg/authorization/authorizerfactory/
//! delegating.go` over `plugin/pkg/authorizer/webhook/webhook.go`), which is how kube-apiserver's
//! own components (and kube-rbac-proxy) guard `/metrics` and `/debug`: a non-resource
//! `SubjectAccessReview` (`authorization.k8s.io/v1`: user, groups, uid, extra; path and verb)
//! POSTed to the upstream with the proxy's own credentials.
//!
//! - `status.allowed` allows; anything else (denied, no opinion, an `evaluationError`) denies,
//!   as a union with no further authorizer does.
//! - Allowed answers are cached for `allowed_ttl`, denied ones for `denied_ttl` (the apiserver's
//!   `--authorization-webhook-cache-authorized-ttl` / `-unauthorized-ttl`); errors are never
//!   cached and deny (fail closed: the caller gets 403, never access).
//! - Concurrent reviews of the same attributes are coalesced into one, detached from the requests
//!   that wait for it; at most `max_in_flight` distinct reviews run at once (more deny with
//!   [`AuthorizeError::TooManyInFlight`]); each is bounded by `timeout`.
//! - The cache key is a keyed hash (HMAC-SHA256) of the whole review; the cache is bounded
//!   (the TokenReview cache's expiring cache), where the apiserver's is not.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{BoxFuture, FutureExt, Shared};
use http::StatusCode;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use tokio::time::Instant;

use super::cached::InFlightEntry;
use super::keyhash::{CacheKey, KeyHasher};
use super::token_cache::ExpiringCache;
use super::{Identity, TransportError};

/// The path SubjectAccessReviews are POSTed to.
pub const SUBJECT_ACCESS_REVIEW_PATH: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// Sends SubjectAccessReviews to the upstream. Implemented by the proxy over its upstream client.
pub trait AccessReviewTransport: Send + Sync + 'static {
    /// POSTs a SubjectAccessReview (JSON) to [`SUBJECT_ACCESS_REVIEW_PATH`] with the proxy's own
    /// credentials and returns status and body (bounded by the implementation).
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>>;
}

/// The authorizer's settings.
#[derive(Debug, Clone)]
pub struct AuthorizerConfig {
    /// How long an allowed answer is cached (`--authorization-webhook-cache-authorized-ttl`).
    pub allowed_ttl: Duration,
    /// How long a denied answer is cached (`--authorization-webhook-cache-unauthorized-ttl`).
    pub denied_ttl: Duration,
    /// How long one review may take (the delegating authorizer's 10 s).
    pub timeout: Duration,
    /// Distinct reviews running at once.
    pub max_in_flight: usize,
    /// Answers cached at most.
    pub cache_capacity: usize,
}

impl Default for AuthorizerConfig {
    fn default() -> Self {
        AuthorizerConfig {
            allowed_ttl: Duration::from_secs(5 * 60),
            denied_ttl: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
            max_in_flight: 64,
            cache_capacity: 4096,
        }
    }
}

/// A review's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `status.allowed` was true.
    Allowed,
    /// Anything else; the reason is the review's `reason` or `evaluationError`, if any.
    Denied {
        /// Why, as the upstream said it (may be empty).
        reason: String,
    },
}

/// An answer and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The verdict.
    pub decision: Decision,
    /// Whether it came from the cache (no review was sent for this request).
    pub cached: bool,
}

/// Why no verdict could be had; the caller must deny.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorizeError {
    /// No response from the upstream.
    #[error("SubjectAccessReview: {0}")]
    Transport(#[from] TransportError),
    /// A non-2xx answer.
    #[error("SubjectAccessReview: the server responded with status {0}")]
    Status(u16),
    /// A 2xx answer that is not a SubjectAccessReview.
    #[error("SubjectAccessReview: decoding the response: {0}")]
    Decode(String),
    /// No answer within the timeout.
    #[error("SubjectAccessReview: no answer within {0:?}")]
    Timeout(Duration),
    /// Too many distinct reviews in flight.
    #[error("SubjectAccessReview: too many reviews in flight")]
    TooManyInFlight,
    /// The review task ended without an answer (a bug).
    #[error("SubjectAccessReview: the review ended unexpectedly")]
    Crashed,
}

type Outcome = Result<Decision, AuthorizeError>;
type Lookup = Shared<BoxFuture<'static, Outcome>>;

/// Cached, coalescing SubjectAccessReview authorizer. Cheap to share behind an `Arc`.
pub struct Authorizer {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Arc<dyn AccessReviewTransport>,
    hasher: KeyHasher,
    cfg: AuthorizerConfig,
    cache: Mutex<ExpiringCache<Decision>>,
    in_flight: Mutex<HashMap<CacheKey, Lookup>>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("cfg", &self.inner.cfg)
            .finish_non_exhaustive()
    }
}

// === impl Authorizer ===

impl Authorizer {
    /// An authorizer that reviews through `transport`.
    pub fn new(
        transport: Arc<dyn AccessReviewTransport>,
        cfg: AuthorizerConfig,
    ) -> Result<Self, String> {
        Ok(Authorizer {
            inner: Arc::new(Inner {
                transport,
                hasher: KeyHasher::random()?,
                cache: Mutex::new(ExpiringCache::new(cfg.cache_capacity)),
                in_flight: Mutex::new(HashMap::new()),
                cfg,
            }),
        })
    }

    /// May `identity` use `verb` on the non-resource `path`? From the cache when an unexpired
    /// answer is there, else by one review shared with concurrent identical requests.
    pub async fn authorize(
        &self,
        identity: &Identity,
        verb: &str,
        path: &str,
    ) -> Result<Authorization, AuthorizeError> {
        let attributes = Attributes::NonResource {
            verb: verb.to_owned(),
            path: path.to_owned(),
        };
        self.authorize_attributes(identity, attributes).await
    }

    /// May `identity` do what `attributes` describe (a resource or non-resource request)? Cached
    /// and coalesced as [`authorize`](Self::authorize).
    pub async fn authorize_attributes(
        &self,
        identity: &Identity,
        attributes: Attributes,
    ) -> Result<Authorization, AuthorizeError> {
        let body = review_body(identity, attributes);
        let key = self.inner.hasher.key_bytes(&body);
        if let Some(decision) = self.inner.cache.lock().get(&key, Instant::now()) {
            return Ok(Authorization {
                decision,
                cached: true,
            });
        }
        let decision = self.join_or_start(key, body)?.await?;
        Ok(Authorization {
            decision,
            cached: false,
        })
    }

    fn join_or_start(&self, key: CacheKey, body: Bytes) -> Result<Lookup, AuthorizeError> {
        let mut in_flight = self.inner.in_flight.lock();
        if let Some(lookup) = in_flight.get(&key) {
            return Ok(lookup.clone());
        }
        if in_flight.len() >= self.inner.cfg.max_in_flight.max(1) {
            return Err(AuthorizeError::TooManyInFlight);
        }
        let task = tokio::spawn(Inner::fetch(Arc::clone(&self.inner), key, body));
        let lookup = async move { task.await.unwrap_or(Err(AuthorizeError::Crashed)) }
            .boxed()
            .shared();
        in_flight.insert(key, lookup.clone());
        Ok(lookup)
    }
}

impl Inner {
    async fn fetch(self: Arc<Self>, key: CacheKey, body: Bytes) -> Outcome {
        // Removed only after the answer is cached, so a new request finds one or the other.
        let _entry = InFlightEntry {
            in_flight: &self.in_flight,
            key,
        };
        let timeout = self.cfg.timeout;
        let outcome = match tokio::time::timeout(timeout, self.transport.review(body)).await {
            Err(_) => Err(AuthorizeError::Timeout(timeout)),
            Ok(Err(error)) => Err(error.into()),
            Ok(Ok((status, bytes))) => decode(status, &bytes),
        };
        if let Ok(decision) = &outcome {
            let ttl = match decision {
                Decision::Allowed => self.cfg.allowed_ttl,
                Decision::Denied { .. } => self.cfg.denied_ttl,
            };
            if !ttl.is_zero() {
                self.cache
                    .lock()
                    .insert(key, decision.clone(), ttl, Instant::now());
            }
        }
        outcome
    }
}

/// What a review asks about: the webhook authorizer's `nonResourceAttributes` or
/// `resourceAttributes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    /// A non-resource path and verb (the admin listener's endpoints).
    NonResource {
        /// The lowercased method ([`non_resource_verb`]).
        verb: String,
        /// The path.
        path: String,
    },
    /// A resource request (impersonation: verb `impersonate` on `users`, `groups`, ...).
    Resource(ResourceRequest),
}

/// The resource attributes of a review; empty fields are left out of the body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRequest {
    /// The verb, e.g. `impersonate`.
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource, e.g. `users`.
    pub resource: String,
    /// The subresource, e.g. an extra key under `userextras`.
    pub subresource: String,
    /// The namespace (a service account's).
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

/// The review of `identity` doing what `attributes` say, as the webhook authorizer encodes it.
fn review_body(identity: &Identity, attributes: Attributes) -> Bytes {
    let some = |s: String| (!s.is_empty()).then_some(s);
    let (non_resource_attributes, resource_attributes) = match attributes {
        Attributes::NonResource { verb, path } => (
            Some(NonResourceAttributes {
                path: Some(path),
                verb: Some(verb),
            }),
            None,
        ),
        Attributes::Resource(r) => (
            None,
            Some(ResourceAttributes {
                verb: some(r.verb),
                group: Some(r.group),
                version: some(r.version),
                resource: some(r.resource),
                subresource: some(r.subresource),
                namespace: some(r.namespace),
                name: some(r.name),
                ..ResourceAttributes::default()
            }),
        ),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(identity.user.clone()),
            uid: (!identity.uid.is_empty()).then(|| identity.uid.clone()),
            groups: Some(identity.groups.clone()),
            extra: (!identity.extra.is_empty()).then(|| identity.extra.clone()),
            non_resource_attributes,
            resource_attributes,
        },
        ..SubjectAccessReview::default()
    };
    // Serializing a struct of strings cannot fail; an empty body would be refused upstream.
    Bytes::from(serde_json::to_vec(&review).unwrap_or_default())
}

fn decode(status: StatusCode, body: &[u8]) -> Outcome {
    if !status.is_success() {
        return Err(AuthorizeError::Status(status.as_u16()));
    }
    let review: SubjectAccessReview =
        serde_json::from_slice(body).map_err(|e| AuthorizeError::Decode(e.to_string()))?;
    let status = review.status.unwrap_or_default();
    if status.allowed {
        return Ok(Decision::Allowed);
    }
    let reason = match (status.reason, status.evaluation_error) {
        (Some(reason), _) if !reason.is_empty() => reason,
        (_, Some(error)) => error,
        _ => String::new(),
    };
    Ok(Decision::Denied { reason })
}

/// The authorization verb of a request on a non-resource path: the lowercased method, as the
/// apiserver's `RequestInfoFactory` derives it (so `GET /metrics` is `get`).
pub fn non_resource_verb(method: &http::Method) -> String {
    method.as_str().to_ascii_lowercase()
}

#[cfg(test)]
mod tests;
