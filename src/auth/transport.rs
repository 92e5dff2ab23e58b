//! How a TokenReview reaches the upstream: the transport the proxy implements over its upstream
//! client (and the tests script), and how a call can fail before any HTTP response.

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::StatusCode;

/// Sends TokenReviews to the upstream. Implemented by the proxy over its upstream client.
pub trait TokenReviewTransport: Send + Sync + 'static {
    /// POSTs a TokenReview (authentication.k8s.io/v1, JSON) to the upstream and returns status +
    /// body. The request body holds a bearer token: never log it. Bound the response body
    /// (a TokenReview answer is small; 1 MiB is ample) and map connection failures to
    /// [`TransportError::Connection`] so they are retried.
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>>;
}

/// A TokenReview call that got no HTTP response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The connection failed, was reset or was lost: retried, like the apiserver's
    /// `IsConnectionReset` / `IsHTTP2ConnectionLost`.
    #[error("connection to the upstream failed: {0}")]
    Connection(String),
    /// Any other failure: not retried.
    #[error("{0}")]
    Other(String),
}
