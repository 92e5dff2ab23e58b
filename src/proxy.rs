//! Forwarding to the upstream kube-apiserver, and the one place where errors become responses.
//!
//! - [`Proxy`]: the request pipeline (authenticate, request attributes, classify, wait in flow
//!   control, forward, finish), one access-log event and the metrics per request.
//! - [`Forwarder`]: one caller request → one upstream request, with identity headers
//!   ([`IdentityForwarding`]), header hygiene, streaming bodies, timeouts and upgrades, sent
//!   through [`crate::upstream`]'s client (which also owns the upstream's configuration,
//!   kubeconfigs and credential plugins).
//! - [`ProxyError`] and [`error_response`]: every response the proxy writes itself is a Kubernetes
//!   `Status` JSON body.
//! - [`TokenReviewTransport`](crate::auth::TokenReviewTransport) over the upstream client, for the
//!   `auth` module's TokenReview.

mod error;
mod forward;
mod headers;
mod identity;
mod pipeline;
pub mod rejections;
mod token_review;
mod upgrade;

pub use crate::body::{empty_body, full_body, BoxError, ProxyBody};
pub use error::{error_response, status_body, ProxyError, Status, StatusCause, StatusDetails};
pub use forward::{ForwardRequest, Forwarder, ForwarderConfig, ForwarderConfigError};
pub use headers::{prepare_request_headers, ForgeableHeaders};
pub use identity::{
    escape_extra_key, ForwardableIdentity, IdentityForwarding, IdentityRefused, RefusalReason,
};
pub use pipeline::{Proxy, WatchStream, FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER};
pub use token_review::TOKEN_REVIEW_PATH;
