//! TokenReview against the upstream. Mirrors
//! `plugin/pkg/authenticator/token/webhook/webhook.go` with the delegating authenticator's
//! settings (`authentication.k8s.io/v1`, 10s timeout, retry with backoff). The wire types are
//! k8s-openapi's `TokenReview` and `Status`; the request's `metadata` is `{}` where Go writes
//! `{"creationTimestamp": null}` (the apiserver reads both alike).
//!
//! Outcomes, as the apiserver's: a transport error or non-2xx status is an error (the request
//! gets 401, and the error is never cached); `status.authenticated: false` is "not
//! authenticated", and with a non-empty `status.error` it is an error carrying that text.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use super::config::{RetryBackoff, TokenReviewConfig};
use super::error::TokenReviewError;
use super::secret::Secret;
use super::stats::AuthStats;
use super::transport::{TokenReviewTransport, TransportError};
use super::Identity;

/// The JSON body of a TokenReview for `token` (k8s-openapi's `authentication/v1` type).
pub(crate) fn request_body(token: &Secret, audiences: &[String]) -> Bytes {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.expose().to_owned()),
            audiences: (!audiences.is_empty()).then(|| audiences.to_vec()),
        },
        ..TokenReview::default()
    };
    Bytes::from(
        serde_json::to_vec(&review).expect("invariant: a struct of strings always serializes"),
    )
}

/// Reviews tokens through a [`TokenReviewTransport`], with timeout and retries.
pub(crate) struct TokenReviewer {
    transport: Arc<dyn TokenReviewTransport>,
    audiences: Vec<String>,
    timeout: Duration,
    backoff: RetryBackoff,
    stats: Arc<AuthStats>,
}

impl TokenReviewer {
    pub(crate) fn new(
        cfg: &TokenReviewConfig,
        audiences: Vec<String>,
        stats: Arc<AuthStats>,
    ) -> Self {
        TokenReviewer {
            transport: cfg.transport.clone(),
            audiences,
            timeout: cfg.request_timeout,
            backoff: cfg.retry_backoff,
            stats,
        }
    }

    /// `Ok(Some(identity))` when authenticated, `Ok(None)` when not, errors as documented on
    /// the module.
    pub(crate) async fn review(
        &self,
        token: &Secret,
    ) -> Result<Option<Identity>, TokenReviewError> {
        let body = request_body(token, &self.audiences);
        let response = tokio::time::timeout(self.timeout, self.post_with_retries(body))
            .await
            .map_err(|_| TokenReviewError::Timeout(self.timeout))??;
        self.interpret(response)
    }

    // Mirrors `webhook.WithExponentialBackoff` with `DefaultShouldRetry`.
    async fn post_with_retries(&self, body: Bytes) -> Result<Bytes, TokenReviewError> {
        let mut wait = self.backoff.initial;
        let mut attempt = 1;
        loop {
            let result = self.post(body.clone()).await;
            let retry = match &result {
                Ok(_) => false,
                Err(e) => should_retry(e),
            };
            if !retry || attempt >= self.backoff.steps {
                return result;
            }
            tokio::time::sleep(crate::backoff::jittered(wait, self.backoff.jitter)).await;
            wait = wait.mul_f64(self.backoff.factor);
            attempt += 1;
            self.stats
                .token_review
                .retries
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    async fn post(&self, body: Bytes) -> Result<Bytes, TokenReviewError> {
        use std::sync::atomic::Ordering::Relaxed;
        let counters = &self.stats.token_review;
        let (code, body) = self.transport.review(body).await.inspect_err(|_| {
            counters.failed.fetch_add(1, Relaxed);
        })?;
        if code.is_success() {
            counters.ok.fetch_add(1, Relaxed);
            return Ok(body);
        }
        counters.failed.fetch_add(1, Relaxed);
        let message = serde_json::from_slice::<Status>(&body)
            .ok()
            .and_then(|s| s.message)
            .filter(|m| !m.is_empty())
            .map(|m| m.chars().take(512).collect())
            .unwrap_or_else(|| "no further information".to_string());
        Err(TokenReviewError::Status {
            code: code.as_u16(),
            message,
        })
    }

    fn interpret(&self, body: Bytes) -> Result<Option<Identity>, TokenReviewError> {
        let review: TokenReview =
            serde_json::from_slice(&body).map_err(|e| TokenReviewError::Decode(e.to_string()))?;
        let status = review.status.unwrap_or_default();
        let answered = status.audiences.unwrap_or_default();
        // With API audiences, the answer's audiences (or, when it names none, ours) must meet
        // ours; otherwise the token is simply not authenticated.
        if !self.audiences.is_empty()
            && !answered.is_empty()
            && !answered.iter().any(|a| self.audiences.contains(a))
        {
            return Ok(None);
        }
        if status.authenticated != Some(true) {
            return match status.error.filter(|e| !e.is_empty()) {
                None => Ok(None),
                Some(error) => Err(TokenReviewError::Rejected(error)),
            };
        }
        let user = status.user.unwrap_or_default();
        Ok(Some(Identity {
            user: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }
}

// Transient failures: connection errors, 500, 504 and 429, as `DefaultShouldRetry`.
fn should_retry(err: &TokenReviewError) -> bool {
    match err {
        TokenReviewError::Transport(TransportError::Connection(_)) => true,
        TokenReviewError::Status { code, .. } => matches!(code, 429 | 500 | 504),
        TokenReviewError::Transport(TransportError::Other(_))
        | TokenReviewError::Decode(_)
        | TokenReviewError::Rejected(_)
        | TokenReviewError::Timeout(_)
        | TokenReviewError::TooManyInFlight
        | TokenReviewError::Crashed => false,
    }
}

#[cfg(test)]
mod tests;
