//! What a running proxy is built from: each room's plain config side by side, and the flow
//! control's own. The command line fills it from the `serve` flags (`cli::configs`); tests and
//! embedders may fill it by hand.

use std::path::PathBuf;
use std::time::Duration;

use crate::auth::authorize::AuthorizerConfig;
use crate::auth::AuthConfig;
use crate::proxy::ForwarderConfig;
use crate::server::ServerConfig;
use crate::upstream::{UpstreamConfig, UpstreamLimits};

/// Every setting of [`App::start`](super::App::start), by room.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The listeners: secure port, TLS, admin listener, shutdown delay.
    pub server: ServerConfig,
    /// The authenticators. Its `token_review` is left `None`: TokenReviews go to the upstream,
    /// whose client is made at start, so [`ServeConfig::token_review_cache_ttl`] asks for them.
    pub auth: AuthConfig,
    /// `Some(ttl)`: authenticate bearer tokens by TokenReview against the upstream, caching
    /// answers (authenticated and not) this long.
    pub token_review_cache_ttl: Option<Duration>,
    /// The secure admin listener's SubjectAccessReview cache.
    pub admin_authorizer: AuthorizerConfig,
    /// Where the upstream is and the proxy's credentials for it.
    pub upstream: UpstreamConfig,
    /// The upstream client's connection bound and its reserve for ordinary requests.
    pub upstream_limits: UpstreamLimits,
    /// How requests are forwarded (identity forwarding, timeout, forgeable headers).
    pub forwarder: ForwarderConfig,
    /// Flow control: its limits, mode and configuration sources.
    pub flow_control: FlowControlConfig,
    /// `Some`: the server concurrency limit is a budget shared with other replicas through
    /// Leases (`--coordination-namespace`).
    pub coordination: Option<crate::coordination::CoordinationConfig>,
}

/// How flow control is assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowControlConfig {
    /// The server's total concurrency limit, shared among the priority levels.
    pub server_concurrency_limit: u32,
    /// How long a request may run (and wait in its queue, a quarter of it at most).
    pub request_timeout: Duration,
    /// The largest declared body of a mutating request (0: no check).
    pub max_request_bytes: u64,
    /// Classify, count and evaluate as a shadow, but never queue or reject.
    pub dry_run: bool,
    /// The configuration directory, reloaded as it changes; the embedded default without it
    /// (and without `from_cluster`).
    pub config_dir: Option<PathBuf>,
    /// The configuration comes from the upstream's own FlowSchemas and
    /// PriorityLevelConfigurations, listed and watched; `/readyz` waits for the first list.
    pub from_cluster: bool,
    /// A candidate configuration directory evaluated on live traffic as a shadow, never enforced.
    pub shadow_config_dir: Option<PathBuf>,
}
