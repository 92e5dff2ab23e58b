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
mod kubeconfig;
mod options;
mod pipeline;
pub mod rejections;
mod timeout;
mod token_review;
mod upgrade;
pub(crate) mod upstream_config;

pub use crate::body::{empty_body, full_body, BoxError, ProxyBody};
pub use crate::upstream::{UpstreamAuth, UpstreamBody, UpstreamClient};
pub use error::{
    error_response, status_body, ProxyError, Status, StatusCause, StatusDetails, UpstreamError,
};
pub use forward::{ForwardRequest, Forwarder, ForwarderConfig, ForwarderConfigError};
pub use headers::{
    escape_extra_key, prepare_request_headers, ForgeableHeaders, IdentityForwarding,
};
pub use kubeconfig::{Kubeconfig, KubeconfigContext, KubeconfigError, PemSource};
pub use pipeline::{Proxy, WatchStream, FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER};
pub use timeout::{effective_timeout, parse_go_duration, GoDurationError};
pub use token_review::TOKEN_REVIEW_PATH;
pub use upstream_config::{
    ClientIdentity, Credential, InClusterEnv, ResolvedUpstream, UpstreamConfig,
    UpstreamConfigError, IN_CLUSTER_SERVICE_ACCOUNT_DIR,
};
