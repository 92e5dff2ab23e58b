//! TokenReview over the upstream client, for the `auth` module's webhook token authenticator.
//!
//! The trait is defined here verbatim from the agreed interface because `auth` has not landed on
//! `main` yet; once it has, the lead keeps one definition (in `auth`) and this file keeps only
//! the impl.

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};

use super::client::UpstreamAuth;
use super::{full_body, UpstreamClient, UpstreamError};

/// The path TokenReviews are POSTed to.
pub const TOKEN_REVIEW_PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// How long a TokenReview may take (client-go's webhook default request timeout).
const TOKEN_REVIEW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Largest TokenReview response read (a review holds a user, groups and extras).
const MAX_TOKEN_REVIEW_RESPONSE: usize = 1024 * 1024;

/// Why a TokenReview could not be exchanged with the upstream.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The upstream could not be reached or did not answer.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The answer was larger than the proxy reads or broke off.
    #[error("reading the TokenReview response: {0}")]
    Body(String),
    /// The request could not be built (an invalid upstream URL prefix).
    #[error("building the TokenReview request: {0}")]
    Request(#[from] http::Error),
}

/// Sends TokenReviews (as the agreed interface of the `auth` module).
pub trait TokenReviewTransport: Send + Sync + 'static {
    /// POSTs a TokenReview (authentication.k8s.io/v1, JSON) to the upstream and returns status + body.
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>>;
}

/// POSTs with the proxy's own credentials (client certificate and token), never a caller's;
/// gives up after 30 s with [`UpstreamError::Timeout`].
impl TokenReviewTransport for UpstreamClient {
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>> {
        let client = self.clone();
        let exchange = async move {
            let request = Request::builder()
                .method(Method::POST)
                .uri(client.uri_for(TOKEN_REVIEW_PATH)?)
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .header(ACCEPT, HeaderValue::from_static("application/json"))
                .body(full_body(body))?;
            let response = client.send(request, UpstreamAuth::Proxy, false).await?;
            let status = response.status();
            let bytes = Limited::new(response.into_body(), MAX_TOKEN_REVIEW_RESPONSE)
                .collect()
                .await
                .map_err(|e| TransportError::Body(e.to_string()))?
                .to_bytes();
            Ok((status, bytes))
        };
        Box::pin(async move {
            tokio::time::timeout(TOKEN_REVIEW_TIMEOUT, exchange)
                .await
                .map_err(|_| UpstreamError::Timeout {
                    after: TOKEN_REVIEW_TIMEOUT,
                })?
        })
    }
}
