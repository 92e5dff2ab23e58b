//! Forwarding to the upstream kube-apiserver, and the one place where errors become responses.
//!
//! - [`UpstreamConfig`] → [`ResolvedUpstream`]: where the upstream is and how the proxy proves
//!   itself to it (flags, a kubeconfig, or the in-cluster service account).
//! - [`UpstreamClient`]: pooled connections over rustls, HTTP/2 when the upstream offers it.
//! - [`Forwarder`]: one caller request → one upstream request, with identity headers
//!   ([`IdentityForwarding`]), header hygiene, streaming bodies, timeouts and upgrades.
//! - [`ProxyError`] and [`error_response`]: every response the proxy writes itself is a Kubernetes
//!   `Status` JSON body.
//! - [`TokenReviewTransport`](crate::auth::TokenReviewTransport) over the upstream client, for the `auth` module's TokenReview.

mod error;
pub mod exec_credential;
mod forward;
mod headers;
mod identity;
mod kubeconfig;
mod options;
mod pipeline;
pub mod rejections;
mod timeout;
mod token_review;
mod upgrade;
pub(crate) mod upstream_config;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};

pub use crate::upstream::{UpstreamAuth, UpstreamBody, UpstreamClient};
pub use error::{
    error_response, status_body, ProxyError, Status, StatusCause, StatusDetails, UpstreamError,
};
pub use forward::{ForwardRequest, Forwarder, ForwarderConfig, ForwarderConfigError};
pub use headers::{
    escape_extra_key, prepare_request_headers, ForgeableHeaders, IdentityForwarding,
};
pub use identity::{ForwardableIdentity, IdentityRefused, RefusalReason};
pub use kubeconfig::{Kubeconfig, KubeconfigContext, KubeconfigError, PemSource};
pub use pipeline::{Proxy, WatchStream, FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER};
pub use timeout::{effective_timeout, parse_go_duration, GoDurationError};
pub use token_review::TOKEN_REVIEW_PATH;
pub use upstream_config::{
    ClientIdentity, Credential, InClusterEnv, ResolvedUpstream, UpstreamConfig,
    UpstreamConfigError, IN_CLUSTER_SERVICE_ACCOUNT_DIR,
};

/// A boxed error, as bodies and services carry them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response the proxy writes or forwards (the server uses the same type).
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// A body of one in-memory chunk.
pub fn full_body(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub fn empty_body() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}
