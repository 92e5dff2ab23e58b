//! The validating admission webhook: `admission.k8s.io/v1` `AdmissionReview` in, one out.
//!
//! It reviews CREATE and UPDATE of `flowschemas` and `prioritylevelconfigurations` (every API
//! version the proxy reads) and of ConfigMaps that carry the proxy's configuration (selected by a
//! label). Errors (what `check` reports) deny with a `Status` 422 `Invalid` whose
//! `details.causes` carry each field path; lint findings ([`crate::lint`]) allow with `warnings`
//! and `auditAnnotations`. A single object is judged against the webhook's own configuration
//! directory (its view of the rest of the cluster's flow control); a ConfigMap is judged whole,
//! as the proxy would load it after the change.
//!
//! [`parse_review`] and [`Reviewer::review`] are pure; [`serve`] puts them behind HTTPS.

mod endpoint;
pub mod metrics;
pub use metrics::AdmissionMetrics;
mod review;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::{Deserialize, Serialize};

pub use endpoint::{
    handle, review_bytes, serve, Webhook, WebhookConfig, WebhookError, WebhookState,
    MAX_BODY_BYTES, MAX_CONCURRENT_REVIEWS, REVIEW_DEADLINE,
};
pub use review::{Reviewer, MAX_CONFIGMAP_BYTES, MAX_WARNING_CHARS};

/// `apiVersion` of the only AdmissionReview version served.
pub const API_VERSION: &str = "admission.k8s.io/v1";

/// `AdmissionReview` as the apiserver sends it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<AdmissionRequest>,
}

/// `GroupVersionKind`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionKind {
    /// `group`.
    #[serde(default)]
    pub group: String,
    /// `version`.
    #[serde(default)]
    pub version: String,
    /// `kind`.
    #[serde(default)]
    pub kind: String,
}

/// `GroupVersionResource`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionResource {
    /// `group`.
    #[serde(default)]
    pub group: String,
    /// `version`.
    #[serde(default)]
    pub version: String,
    /// `resource`.
    #[serde(default)]
    pub resource: String,
}

/// `AdmissionRequest`: the fields the review reads (others are accepted and ignored).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// `uid`, echoed in the response.
    pub uid: String,
    /// `kind` of the object as sent (after conversion for `matchPolicy: Equivalent`).
    #[serde(default)]
    pub kind: GroupVersionKind,
    /// `resource`.
    #[serde(default)]
    pub resource: GroupVersionResource,
    /// `subResource`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub sub_resource: String,
    /// `name`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub name: String,
    /// `namespace`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub namespace: String,
    /// `operation`: `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub operation: String,
    /// `object`: the new object (CREATE, UPDATE).
    #[serde(default)]
    pub object: Option<serde_json::Value>,
    /// `oldObject`: the object before an UPDATE (or the deleted one).
    #[serde(default)]
    pub old_object: Option<serde_json::Value>,
    /// `dryRun`: nothing is persisted. The review has no side effects, so it answers the same.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// `AdmissionResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's `uid`.
    pub uid: String,
    /// Whether the request may go on.
    pub allowed: bool,
    /// Why it may not (422 `Invalid` with `details.causes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Warnings shown to the client (each under [`MAX_WARNING_CHARS`] characters).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Audit annotations (the apiserver prefixes each key with the webhook's name).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
}

/// The `AdmissionReview` answered.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewResponse {
    /// Always [`API_VERSION`].
    pub api_version: &'static str,
    /// Always `AdmissionReview`.
    pub kind: &'static str,
    /// The answer.
    pub response: AdmissionResponse,
}

impl From<AdmissionResponse> for ReviewResponse {
    fn from(response: AdmissionResponse) -> Self {
        ReviewResponse {
            api_version: API_VERSION,
            kind: "AdmissionReview",
            response,
        }
    }
}

/// Why a body is not an AdmissionReview the webhook can answer (HTTP 400, with a `Status`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON, or its fields have the wrong types.
    #[error("the body is not an AdmissionReview in JSON: {0}")]
    NotJson(String),
    /// `apiVersion` is not `admission.k8s.io/v1`.
    #[error("AdmissionReview apiVersion {0:?} is not served; register the webhook with admissionReviewVersions: [\"v1\"]")]
    UnsupportedVersion(String),
    /// `kind` is not `AdmissionReview`.
    #[error("expected kind AdmissionReview, got {0:?}")]
    WrongKind(String),
    /// There is no `request`.
    #[error("the AdmissionReview has no request")]
    MissingRequest,
    /// `request.uid` is empty.
    #[error("request.uid is required")]
    MissingUid,
    /// More JSON values than [`MAX_REVIEW_VALUES`] (counted before parsing).
    #[error("the AdmissionReview holds more than {MAX_REVIEW_VALUES} JSON values (objects, arrays and their members); refused before parsing")]
    TooManyValues,
}

/// The most JSON values an AdmissionReview may hold, counted (`{`, `[` and `,` outside strings)
/// before the body is parsed: each costs 100 bytes and more once parsed, and an 8 MiB body of
/// `[0,0,...]` took 300 MB. A FlowSchema with its `managedFields` holds about a hundred; a
/// ConfigMap's data are strings, one value each.
pub const MAX_REVIEW_VALUES: usize = 32 * 1024;

/// `{`, `[` and `,` of `body` outside JSON strings.
fn json_values(body: &[u8]) -> usize {
    let mut count = 0;
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                (false, _) => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' | b',' => count += 1,
            _ => {}
        }
    }
    count
}

impl ReviewError {
    /// The `reason` label of `apf_proxy_admission_review_errors_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            ReviewError::NotJson(_) => "not_json",
            ReviewError::UnsupportedVersion(_) => "unsupported_version",
            ReviewError::WrongKind(_) => "wrong_kind",
            ReviewError::MissingRequest => "missing_request",
            ReviewError::MissingUid => "missing_uid",
            ReviewError::TooManyValues => "too_many_values",
        }
    }
}

/// A string that may also be written `null` (Go clients write an empty string either way).
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// Reads an `admission.k8s.io/v1` `AdmissionReview` request.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    if json_values(body) > MAX_REVIEW_VALUES {
        return Err(ReviewError::TooManyValues);
    }
    let review: IncomingReview =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    if review.kind != "AdmissionReview" {
        return Err(ReviewError::WrongKind(review.kind));
    }
    if review.api_version != API_VERSION {
        return Err(ReviewError::UnsupportedVersion(review.api_version));
    }
    let request = review.request.ok_or(ReviewError::MissingRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::MissingUid);
    }
    Ok(request)
}

#[cfg(test)]
mod tests;
