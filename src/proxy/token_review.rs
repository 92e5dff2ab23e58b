//! TokenReview and SubjectAccessReview over the upstream client, for the `auth` module's webhook
//! token authenticator and the admin listener's authorizer.

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::auth::authorize::{AccessReviewTransport, SUBJECT_ACCESS_REVIEW_PATH};
use crate::auth::{TokenReviewTransport, TransportError};
use crate::body::{full_body, BoxError};
use crate::upstream::{Route, UpstreamAuth};
use crate::upstream::{UpstreamClient, UpstreamError};

/// The path TokenReviews are POSTed to.
pub const TOKEN_REVIEW_PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// Largest review response read (a review holds a user, groups and extras).
const MAX_REVIEW_RESPONSE: usize = 1024 * 1024;

impl From<UpstreamError> for TransportError {
    fn from(error: UpstreamError) -> Self {
        match error {
            UpstreamError::Unavailable(_)
            | UpstreamError::BadGateway(_)
            | UpstreamError::ConnectionLimit { .. } => {
                TransportError::Connection(error.to_string())
            }
            UpstreamError::Timeout { .. } => TransportError::Other(error.to_string()),
        }
    }
}

/// POSTs with the proxy's own credentials (client certificate and token), never a caller's.
/// The caller (the `auth` webhook authenticator) bounds the time and retries.
impl TokenReviewTransport for UpstreamClient {
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>> {
        Box::pin(post_review(self.clone(), TOKEN_REVIEW_PATH, body))
    }
}

/// SubjectAccessReviews for the admin listener, like TokenReviews: the proxy's own credentials.
impl AccessReviewTransport for UpstreamClient {
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>> {
        Box::pin(post_review(self.clone(), SUBJECT_ACCESS_REVIEW_PATH, body))
    }
}

/// POSTs one review object (JSON) to `path` and reads the bounded answer.
async fn post_review(
    client: UpstreamClient,
    path: &str,
    body: Bytes,
) -> Result<(StatusCode, Bytes), TransportError> {
    let other = |e: http::Error| TransportError::Other(e.to_string());
    let uri = client.uri_for(path).map_err(other)?;
    let request = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header(ACCEPT, HeaderValue::from_static("application/json"))
        .body(full_body(body))
        .map_err(other)?;
    let response = client
        .send(request, UpstreamAuth::Proxy, Route::Short)
        .await?;
    let status = response.status();
    let bytes = Limited::new(response.into_body(), MAX_REVIEW_RESPONSE)
        .collect()
        .await
        .map_err(body_error)?
        .to_bytes();
    Ok((status, bytes))
}

/// A body cut short is a lost connection (retried); one over the limit is not.
fn body_error(error: BoxError) -> TransportError {
    if error.is::<LengthLimitError>() {
        TransportError::Other(format!(
            "the review response is larger than {MAX_REVIEW_RESPONSE} bytes"
        ))
    } else {
        TransportError::Connection(format!("reading the review response: {error}"))
    }
}
