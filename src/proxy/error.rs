//! [`ProxyError`] and the one function that turns it into a response with a Kubernetes `Status`
//! body.
//!
//! Mirrors `k8s.io/apimachinery/pkg/api/errors/errors.go` (`NewUnauthorized`, `NewForbidden`,
//! `NewTooManyRequests`, `NewBadRequest`, `NewTimeoutError`, `NewServiceUnavailable`,
//! `NewInternalError`, `NewRequestEntityTooLargeError`) for codes, reasons and messages.

use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};

use crate::auth::impersonation::ImpersonationError;
use crate::body::{full_body, ProxyBody};
pub use crate::status::{status_body, Status, StatusCause, StatusDetails};
use crate::upstream::UpstreamError;

/// Every way a request can end without an upstream response. [`error_response`] maps each
/// variant to the status code the apiserver would use.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// Authentication failed (401).
    #[error("Unauthorized: {message}")]
    Unauthorized {
        /// Shown to the caller; never a credential.
        message: String,
    },
    /// The caller authenticated, but its identity cannot travel to the upstream unchanged
    /// (401; `proxy::identity` states the rule and why 401).
    #[error("Unauthorized: {0}")]
    IdentityRefused(#[from] super::identity::IdentityRefused),
    /// The request is refused for policy reasons (403), e.g. a caller's own `Impersonate-*`
    /// headers in `impersonate` mode.
    #[error("forbidden: {message}")]
    Forbidden {
        /// Shown to the caller.
        message: String,
    },
    /// A caller's own `Impersonate-*` headers: malformed (400) or not authorized (403), with the
    /// apiserver's message.
    #[error(transparent)]
    Impersonation(#[from] crate::auth::impersonation::ImpersonationError),
    /// Flow control rejected the request (429 with `Retry-After`). The message is the sentence
    /// kubectl prints for kube-apiserver's own APF rejection (a plain-text body, which client-go
    /// words with the generic message of a 429), so that both read the same.
    #[error("the server has received too many requests and has asked us to try again later")]
    TooManyRequests {
        /// The priority level's current Retry-After, in whole seconds (at least 1).
        retry_after_seconds: u32,
    },
    /// The request is malformed (400), e.g. an invalid `?timeout=`.
    #[error("{message}")]
    BadRequest {
        /// Shown to the caller.
        message: String,
    },
    /// The request body is too large (413).
    #[error("Request entity too large: {message}")]
    PayloadTooLarge {
        /// Shown to the caller.
        message: String,
    },
    /// The request's header section is too large (431).
    #[error("Request header fields too large: {message}")]
    HeadersTooLarge {
        /// Shown to the caller.
        message: String,
    },
    /// The proxy cannot serve now (503), e.g. while shutting down or before the configuration
    /// is loaded.
    #[error("{message}")]
    ServiceUnavailable {
        /// Shown to the caller.
        message: String,
    },
    /// Forwarding failed (502, 503 or 504).
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// A bug in the proxy (500).
    #[error("Internal error occurred: {message}")]
    Internal {
        /// Shown to the caller.
        message: String,
    },
}

// === impl ProxyError ===

impl ProxyError {
    /// The status code [`error_response`] answers with.
    pub fn status_code(&self) -> StatusCode {
        self.to_status().0
    }

    /// Code, reason and details of this error; exhaustive so that a new variant must be mapped.
    fn to_status(&self) -> (StatusCode, &'static str, Option<StatusDetails>) {
        match self {
            ProxyError::Unauthorized { .. } | ProxyError::IdentityRefused(_) => {
                (StatusCode::UNAUTHORIZED, "Unauthorized", None)
            }
            ProxyError::Forbidden { .. }
            | ProxyError::Impersonation(ImpersonationError::Forbidden(_)) => {
                (StatusCode::FORBIDDEN, "Forbidden", None)
            }
            ProxyError::Impersonation(ImpersonationError::BadRequest(_)) => {
                (StatusCode::BAD_REQUEST, "BadRequest", None)
            }
            ProxyError::TooManyRequests {
                retry_after_seconds,
            } => (
                StatusCode::TOO_MANY_REQUESTS,
                "TooManyRequests",
                Some(retry_details((*retry_after_seconds).max(1))),
            ),
            ProxyError::BadRequest { .. } => (StatusCode::BAD_REQUEST, "BadRequest", None),
            ProxyError::PayloadTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge", None)
            }
            // Kubernetes has no reason for 431; Go's net/http writes it without one.
            ProxyError::HeadersTooLarge { .. } => {
                (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "", None)
            }
            ProxyError::ServiceUnavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", None)
            }
            ProxyError::Upstream(UpstreamError::Unavailable(_)) => {
                (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", None)
            }
            ProxyError::Upstream(UpstreamError::ConnectionLimit { .. }) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                Some(retry_details(1)),
            ),
            // Kubernetes has no reason for 502 (`NewGenericServerResponse` leaves it unknown).
            ProxyError::Upstream(UpstreamError::BadGateway(_)) => {
                (StatusCode::BAD_GATEWAY, "", None)
            }
            ProxyError::Upstream(UpstreamError::Timeout { .. }) => (
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                // `NewTimeoutError(msg, 0)` sets empty details, which serialise as `{}`.
                Some(retry_details(0)),
            ),
            ProxyError::Internal { message } => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                Some(StatusDetails {
                    retry_after_seconds: 0,
                    causes: vec![StatusCause {
                        message: message.clone(),
                    }],
                }),
            ),
        }
    }

    /// The message of the Status body, worded as the apiserver words it.
    fn message(&self) -> String {
        match self {
            ProxyError::Upstream(UpstreamError::Timeout { .. }) => {
                "Timeout: request did not complete within the allotted timeout".to_string()
            }
            ProxyError::Unauthorized { .. }
            | ProxyError::IdentityRefused(_)
            | ProxyError::Forbidden { .. }
            | ProxyError::Impersonation(_)
            | ProxyError::TooManyRequests { .. }
            | ProxyError::BadRequest { .. }
            | ProxyError::PayloadTooLarge { .. }
            | ProxyError::HeadersTooLarge { .. }
            | ProxyError::ServiceUnavailable { .. }
            | ProxyError::Upstream(
                UpstreamError::Unavailable(_)
                | UpstreamError::BadGateway(_)
                | UpstreamError::ConnectionLimit { .. },
            )
            | ProxyError::Internal { .. } => self.to_string(),
        }
    }

    /// The `Status` this error is answered with.
    pub fn to_status_body(&self) -> Status {
        let (code, reason, details) = self.to_status();
        Status {
            kind: "Status",
            api_version: "v1",
            metadata: serde_json::Map::new(),
            status: "Failure",
            message: self.message(),
            reason,
            details,
            code: code.as_u16(),
        }
    }
}

fn retry_details(retry_after_seconds: u32) -> StatusDetails {
    StatusDetails {
        retry_after_seconds,
        causes: Vec::new(),
    }
}

// === impl ProxyError ===

impl From<crate::fairqueue::timeout::InvalidTimeout> for ProxyError {
    /// The apiserver's 400 for an unparseable `?timeout=`.
    fn from(error: crate::fairqueue::timeout::InvalidTimeout) -> Self {
        ProxyError::BadRequest {
            message: error.to_string(),
        }
    }
}

/// The ONE place where an error becomes a response: the status code the apiserver would use,
/// a `Status` JSON body, `Retry-After` on 429 (and on 504 never, as the apiserver's timeout
/// filter sends none).
pub fn error_response(error: &ProxyError) -> Response<ProxyBody> {
    let status = error.to_status_body();
    let code = error.status_code();
    let mut response = Response::new(full_body(status_body(&status)));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    match error {
        ProxyError::TooManyRequests {
            retry_after_seconds,
        } => {
            headers.insert(
                RETRY_AFTER,
                HeaderValue::from((*retry_after_seconds).max(1)),
            );
        }
        ProxyError::Upstream(UpstreamError::ConnectionLimit { .. }) => {
            headers.insert(RETRY_AFTER, HeaderValue::from(1u32));
        }
        _ => {}
    }
    response
}

#[cfg(test)]
mod tests;
