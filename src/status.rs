//! The Kubernetes `Status` body of every response the proxy writes itself (`metav1.Status`): a
//! leaf, so that the server's fail-safe answers and the pipeline's errors carry the same shape.
//! The mapping from an error to its code and reason is `proxy::error_response`'s.

use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};
use serde::Serialize;

use crate::body::{full_body, ProxyBody};

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

/// The JSON bytes of a `Status`.
pub fn status_body(status: &Status) -> bytes::Bytes {
    // Serialising plain strings and numbers cannot fail; fall back to a fixed body regardless.
    serde_json::to_vec(status)
        .map(bytes::Bytes::from)
        .unwrap_or_else(|_| bytes::Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":500}"#))
}

/// A `Failure` status with this code, reason and message, and nothing else.
pub fn failure(code: StatusCode, reason: &'static str, message: String) -> Response<ProxyBody> {
    let status = Status {
        kind: "Status",
        api_version: "v1",
        metadata: serde_json::Map::new(),
        status: "Failure",
        message,
        reason,
        details: None,
        code: code.as_u16(),
    };
    let mut response = Response::new(full_body(status_body(&status)));
    *response.status_mut() = code;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
