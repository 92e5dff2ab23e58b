//! [`ProxyError`] and the one function that turns it into a response with a Kubernetes `Status`
//! body.
//!
//! Mirrors `k8s.io/apimachinery/pkg/api/errors/errors.go` (`NewUnauthorized`, `NewForbidden`,
//! `NewTooManyRequests`, `NewBadRequest`, `NewTimeoutError`, `NewServiceUnavailable`,
//! `NewInternalError`, `NewRequestEntityTooLargeError`) for codes, reasons and messages.

use std::time::Duration;

use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use serde::Serialize;

use super::{full_body, BoxError, ProxyBody};

/// Why forwarding to the upstream failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection to the upstream could be made (refused, unreachable, DNS, TLS handshake):
    /// nothing was sent, so a retry is safe. 503, as the aggregator's and peer proxy's responders
    /// answer when their backend cannot be reached.
    #[error("the upstream apiserver is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The request was sent (at least in part) but no valid response came back: the connection
    /// was closed or reset, or the upstream spoke garbage. 502, as a reverse proxy answers.
    #[error("bad response from the upstream apiserver: {0}")]
    BadGateway(#[source] BoxError),
    /// A new upstream connection was needed and `--upstream-max-connections` are open (for a
    /// long-running request: all but the `reserved` ones kept for ordinary requests). Nothing was
    /// sent. 503 with `Retry-After: 1`, which client-go honours by retrying.
    #[error("the proxy's upstream connection limit is reached ({max} connections{}); retry later", reserved_note(*.reserved))]
    ConnectionLimit {
        /// `--upstream-max-connections`.
        max: usize,
        /// Connections kept for ordinary requests that this (long-running) request could not take.
        reserved: usize,
    },
    /// The upstream did not answer within the request's timeout. 504, as the apiserver's own
    /// timeout filter answers.
    #[error("request did not complete within the allotted timeout ({after:?})")]
    Timeout {
        /// The timeout that elapsed.
        after: Duration,
    },
}

fn reserved_note(reserved: usize) -> String {
    match reserved {
        0 => String::new(),
        n => format!(", of which {n} are kept for requests that are not long-running"),
    }
}

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
    /// (401; see [`super::identity`] for the rule and why 401).
    #[error("Unauthorized: {0}")]
    IdentityRefused(#[from] super::identity::IdentityRefused),
    /// The request is refused for policy reasons (403), e.g. a caller's own `Impersonate-*`
    /// headers in `impersonate` mode.
    #[error("forbidden: {message}")]
    Forbidden {
        /// Shown to the caller.
        message: String,
    },
    /// Flow control rejected the request (429 with `Retry-After`).
    #[error("Too many requests, please try again later.")]
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

/// A Kubernetes `metav1.Status` (`kind: Status`, `apiVersion: v1`), as every error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// Always `Status`.
    pub kind: &'static str,
    /// Always `v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    /// Always empty (`{}`).
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Always `Failure` here.
    pub status: &'static str,
    /// A human-readable description.
    pub message: String,
    /// The machine-readable reason (`TooManyRequests`, `Timeout`, ...); omitted when unknown.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub reason: &'static str,
    /// Extra details; omitted when empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    pub code: u16,
}

/// `metav1.StatusDetails`, reduced to what the proxy fills in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusDetails {
    /// Seconds the client should wait before retrying.
    #[serde(rename = "retryAfterSeconds", skip_serializing_if = "is_zero")]
    pub retry_after_seconds: u32,
    /// Underlying causes (the apiserver's `NewInternalError` puts the error here).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
}

/// `metav1.StatusCause`, reduced to its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusCause {
    /// What went wrong.
    pub message: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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
            ProxyError::Forbidden { .. } => (StatusCode::FORBIDDEN, "Forbidden", None),
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

/// The JSON bytes of a `Status`.
pub fn status_body(status: &Status) -> bytes::Bytes {
    // Serialising plain strings and numbers cannot fail; fall back to a fixed body regardless.
    serde_json::to_vec(status)
        .map(bytes::Bytes::from)
        .unwrap_or_else(|_| bytes::Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":500}"#))
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
