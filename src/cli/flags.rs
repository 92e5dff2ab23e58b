//! The flags of the commands that serve (`kube-apf-proxy serve`, `kube-apf-proxy webhook`), with
//! kube-apiserver's names and defaults where one exists, and the limits `lint` and `simulate`
//! share with them. `cli` is the only room that knows clap: the rooms below are built from plain
//! configs, which `cli/configs.rs` fills from these flags.
//!
//! Mirrors `pkg/server/options/{secure_serving,authentication,server_run_options}.go`. List flags
//! take comma-separated values and may repeat, like pflag's `StringSlice`; boolean flags take
//! `--flag` or `--flag=false`, like Go's `flag` package; durations are written as Go writes them.
//!
//! Where a flag's values are a lower room's enum ([`IdentityForwarding`], [`LogFormat`]), the
//! enum is defined once, in that room, and its [`ValueEnum`] is implemented here with the help
//! text of each value.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{ArgAction, Args, Parser, ValueEnum};

use crate::duration::parse_duration;
use crate::proxy::IdentityForwarding;
use crate::server::tls::{TlsCipherSuite, TlsMinVersion};
use crate::server::LogFormat;

/// Every flag of `kube-apf-proxy serve` (also accepted with no subcommand).
#[derive(Debug, Clone, Args)]
pub struct ServeOptions {
    // === Listening ===
    /// The IP address on which to listen for --secure-port (all interfaces by default, as
    /// kube-apiserver; use 127.0.0.1 to serve only this machine).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED), help_heading = "Listening")]
    pub bind_address: IpAddr,

    /// The port on which to serve HTTPS (0 picks a free port; kube-apiserver would not serve).
    #[arg(long, default_value_t = 8443, help_heading = "Listening")]
    pub secure_port: u16,

    /// PEM file with the serving certificate (then its chain). Without it and
    /// --tls-private-key-file, a self-signed certificate is generated at start.
    #[arg(long, requires = "tls_private_key_file", help_heading = "Listening")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM file with the serving certificate's private key (PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(long, requires = "tls_cert_file", help_heading = "Listening")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Minimum TLS version: VersionTLS12 or VersionTLS13.
    #[arg(long, default_value = "VersionTLS12", value_parser = TlsMinVersion::parse,
          help_heading = "Listening")]
    pub tls_min_version: TlsMinVersion,

    /// Comma-separated TLS 1.2 cipher suites (IANA names as kube-apiserver takes them); TLS 1.3
    /// suites are always enabled, as in Go. Empty: all supported suites.
    #[arg(long, value_delimiter = ',', value_parser = TlsCipherSuite::parse,
          help_heading = "Listening")]
    pub tls_cipher_suites: Vec<TlsCipherSuite>,

    /// The maximum number of concurrent HTTP/2 streams a client may open per connection
    /// (0: 100, as kube-apiserver).
    #[arg(long, default_value_t = 0, help_heading = "Listening")]
    pub http2_max_streams_per_connection: u32,

    /// Client connections open at once at most; further clients wait in the kernel's accept
    /// backlog. The default fits a large cluster (5,000 nodes with a kubelet and a few agents
    /// each); kube-apiserver itself has no such cap.
    #[arg(long, default_value_t = crate::server::DEFAULT_MAX_CONNECTIONS, help_heading = "Listening")]
    pub max_connections: usize,

    // === Authentication ===
    /// PEM bundle of CAs whose client certificates authenticate as their CommonName/Organizations.
    #[arg(long, help_heading = "Authentication")]
    pub client_ca_file: Option<PathBuf>,

    /// Static bearer tokens, in kube-apiserver's CSV format (token,user,uid,"group1,group2").
    #[arg(long, help_heading = "Authentication")]
    pub token_auth_file: Option<PathBuf>,

    /// Authenticate bearer tokens with a TokenReview against the upstream.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true", help_heading = "Authentication")]
    pub authentication_token_webhook: bool,

    /// How long to cache TokenReview answers.
    #[arg(long, default_value = "2m", value_parser = parse_duration, help_heading = "Authentication")]
    pub authentication_token_webhook_cache_ttl: Duration,

    /// PEM bundle of CAs for front-proxy client certificates, before trusting the
    /// --requestheader-username-headers.
    #[arg(long, help_heading = "Authentication")]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// Client certificate common names allowed to send identity headers (empty: any certificate
    /// signed by --requestheader-client-ca-file).
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    pub requestheader_allowed_names: Vec<String>,

    /// Request headers to inspect for the user name (X-Remote-User is common).
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    pub requestheader_username_headers: Vec<String>,

    /// Request headers to inspect for the UID (X-Remote-Uid is suggested).
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    pub requestheader_uid_headers: Vec<String>,

    /// Request headers to inspect for groups (X-Remote-Group is suggested).
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    pub requestheader_group_headers: Vec<String>,

    /// Request header prefixes to inspect for extra attributes (X-Remote-Extra- is suggested).
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    pub requestheader_extra_headers_prefix: Vec<String>,

    /// Treat requests that no other method authenticates as system:anonymous.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true", help_heading = "Authentication")]
    pub anonymous_auth: bool,

    // === Upstream ===
    /// The kube-apiserver to forward to: an https:// or http:// URL.
    #[arg(long, value_parser = parse_upstream_url, help_heading = "Upstream")]
    pub upstream: Option<http::Uri>,

    /// PEM bundle of CAs that verify the upstream's serving certificate.
    #[arg(long, help_heading = "Upstream")]
    pub upstream_ca_file: Option<PathBuf>,

    /// PEM client certificate presented to the upstream.
    #[arg(long, requires = "upstream_client_key_file", help_heading = "Upstream")]
    pub upstream_client_cert_file: Option<PathBuf>,

    /// PEM private key of --upstream-client-cert-file.
    #[arg(
        long,
        requires = "upstream_client_cert_file",
        help_heading = "Upstream"
    )]
    pub upstream_client_key_file: Option<PathBuf>,

    /// File with a bearer token the proxy presents to the upstream.
    #[arg(long, help_heading = "Upstream")]
    pub upstream_token_file: Option<PathBuf>,

    /// A kubeconfig file for the upstream (server, CA and credentials of its current context).
    #[arg(long, help_heading = "Upstream")]
    pub kubeconfig: Option<PathBuf>,

    /// How the caller's identity reaches the upstream.
    #[arg(long, value_enum, default_value_t = IdentityForwarding::Passthrough,
          help_heading = "Upstream")]
    pub identity_forwarding: IdentityForwarding,

    /// Upstream connections open at once at most (both protocols and TLS identities). Over
    /// HTTP/2 each carries up to the upstream's stream limit (kube-apiserver: 100 unless its
    /// --http2-max-streams-per-connection); over HTTP/1.1 each request in flight, watches
    /// included, holds one. Watches may not take the last --max-requests-inflight +
    /// --max-mutating-requests-inflight (at most half). At the bound a request that needs a new
    /// connection gets 503 with Retry-After.
    #[arg(long, default_value_t = crate::upstream::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "Upstream")]
    pub upstream_max_connections: u32,

    // === Flow control ===
    /// The configuration directory (FlowSchemas, PriorityLevelConfigurations); the embedded
    /// default configuration without it.
    #[arg(long, help_heading = "Flow control")]
    pub config_dir: Option<PathBuf>,

    /// Where the flow-control configuration comes from: `dir` (--config-dir, or the embedded
    /// default without it) or `cluster` (the upstream's flowcontrol.apiserver.k8s.io/v1
    /// FlowSchemas and PriorityLevelConfigurations, listed and watched with the proxy's
    /// credentials; /readyz waits for the first list).
    #[arg(long, value_enum, default_value_t = ConfigSource::Dir, conflicts_with = "config_dir", help_heading = "Flow control")]
    pub config_source: ConfigSource,

    /// `--max-requests-inflight`, `--max-mutating-requests-inflight`, `--request-timeout`.
    #[command(flatten)]
    pub limits: ServerLimits,

    /// The largest body, in bytes, of a create, update, patch or delete; a larger declared
    /// Content-Length gets 413 before it takes a seat. 0 disables the check.
    #[arg(long, default_value_t = 3 * 1024 * 1024, help_heading = "Flow control")]
    pub max_request_bytes: u64,

    /// `enforce` queues and rejects; `dry-run` classifies and counts every request but queues
    /// and rejects none, evaluating the configuration in force as a shadow (the
    /// `apf_proxy_shadow_*{shadow="dry-run"}` metrics say what it would have done).
    #[arg(long, value_enum, default_value_t = FlowControlMode::Enforce, help_heading = "Flow control")]
    pub flow_control: FlowControlMode,

    /// A candidate configuration directory evaluated on live traffic and never enforced: every
    /// request is also classified and queued against it, with the verdicts in the
    /// `apf_proxy_shadow_*{shadow="candidate"}` metrics and its own debug dumps. Reloaded like
    /// --config-dir; its errors never affect enforcement.
    #[arg(long, help_heading = "Flow control")]
    pub shadow_config_dir: Option<PathBuf>,

    // === Replicas ===
    /// Share the budget (--max-requests-inflight + --max-mutating-requests-inflight) with the
    /// other replicas through coordination.k8s.io/v1 Leases in this namespace: the budget is the
    /// total for all of them (docs/scale-out.md). Without it, each replica enforces the whole
    /// budget on its own.
    #[arg(long, help_heading = "Replicas")]
    pub coordination_namespace: Option<String>,

    /// The kubeconfig of the cluster that holds the Leases; the upstream connection (its
    /// kubeconfig, or the in-cluster service account) without it.
    #[arg(long, requires = "coordination_namespace", help_heading = "Replicas")]
    pub coordination_kubeconfig: Option<PathBuf>,

    /// This replica's name among the replicas (its Lease is kube-apf-proxy-ID); $POD_NAME,
    /// then the hostname, without it.
    #[arg(long, requires = "coordination_namespace", help_heading = "Replicas")]
    pub replica_id: Option<String>,

    /// A replica not seen to change its Lease for this long is gone and its share is taken
    /// back; each replica renews its Lease every third of it. Default 15s.
    #[arg(long, value_parser = parse_duration, requires = "coordination_namespace",
          help_heading = "Replicas")]
    pub coordination_lease_duration: Option<Duration>,

    // === Operations ===
    /// Address for /metrics, /healthz, /livez, /readyz and /debug endpoints (plain HTTP on
    /// loopback unless --admin-secure; HTTPS with authentication and authorization elsewhere).
    #[arg(long, default_value = "127.0.0.1:8081", help_heading = "Operations")]
    pub admin_address: SocketAddr,

    /// Serve the admin listener over HTTPS, authenticate its callers with the proxy's
    /// authenticators and authorize them by SubjectAccessReview against the upstream (as the
    /// apiserver guards its own /metrics and /debug). Default: on when --admin-address is not a
    /// loopback address. /healthz, /livez and /readyz need no credentials either way.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL", help_heading = "Operations")]
    pub admin_secure: Option<bool>,

    /// The admin listener's certificate in secure mode (PEM); the serving certificate without it.
    #[arg(
        long,
        requires = "admin_tls_private_key_file",
        help_heading = "Operations"
    )]
    pub admin_tls_cert_file: Option<PathBuf>,

    /// The key of --admin-tls-cert-file (PEM).
    #[arg(long, requires = "admin_tls_cert_file", help_heading = "Operations")]
    pub admin_tls_private_key_file: Option<PathBuf>,

    /// How long to cache an allowed SubjectAccessReview answer (the admin listener's callers, and
    /// callers' own impersonation).
    #[arg(long, default_value = "5m", value_parser = parse_duration, help_heading = "Operations")]
    pub authorization_webhook_cache_authorized_ttl: Duration,

    /// How long to cache a denied SubjectAccessReview answer (the admin listener's callers, and
    /// callers' own impersonation).
    #[arg(long, default_value = "30s", value_parser = parse_duration, help_heading = "Operations")]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, help_heading = "Operations")]
    pub log_format: LogFormat,

    /// Log verbosity: 0 info, 1 debug, 2 and more trace (`-v=1`, `-v 2`); RUST_LOG overrides it.
    #[arg(
        short = 'v',
        long = "v",
        default_value_t = 0,
        value_name = "LEVEL",
        help_heading = "Operations"
    )]
    pub verbosity: u8,

    /// After SIGTERM, keep serving this long with /readyz failing, so load balancers drain us.
    #[arg(long, default_value = "0s", value_parser = parse_duration, help_heading = "Operations")]
    pub shutdown_delay_duration: Duration,

    /// After the delay, how long in-flight requests may take to finish before connections are
    /// closed (kube-apiserver uses its --request-timeout, 60s).
    #[arg(long, default_value = "60s", value_parser = parse_duration, help_heading = "Operations")]
    pub shutdown_grace_period: Duration,
}

/// `--identity-forwarding`: the values of the proxy's [`IdentityForwarding`], with their help.
impl ValueEnum for IdentityForwarding {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            IdentityForwarding::Passthrough,
            IdentityForwarding::Impersonate,
            IdentityForwarding::Requestheader,
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            IdentityForwarding::Passthrough => PossibleValue::new("passthrough").help(
                "Forward the caller's own bearer token; the upstream authenticates it again. The \
                 default: it needs no privileged proxy credential and can never widen anyone's \
                 access (a caller the upstream does not accept fails with 401), at the cost of \
                 client-certificate callers",
            ),
            IdentityForwarding::Impersonate => PossibleValue::new("impersonate").help(
                "Authenticate as the proxy and add `Impersonate-*` headers (the proxy needs the \
                 `impersonate` verb on users, groups, uids and userextras)",
            ),
            IdentityForwarding::Requestheader => PossibleValue::new("requestheader").help(
                "Authenticate with a front-proxy client certificate and send `X-Remote-*` headers \
                 (the upstream's --requestheader-* flags must trust it)",
            ),
        })
    }
}

/// Where the flow-control configuration comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfigSource {
    /// Files: `--config-dir`, or the embedded default.
    Dir,
    /// The upstream's own `flowcontrol.apiserver.k8s.io/v1` objects, listed and watched.
    Cluster,
}

/// Whether flow control is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlowControlMode {
    /// Queue and reject.
    Enforce,
    /// Classify, count and evaluate, but never queue or reject.
    DryRun,
}

/// `--log-format`: the values of the server's [`LogFormat`], with their help.
impl ValueEnum for LogFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[LogFormat::Text, LogFormat::Json]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            LogFormat::Text => PossibleValue::new("text").help("Human-readable lines"),
            LogFormat::Json => PossibleValue::new("json").help("One JSON object per line"),
        })
    }
}

impl ServeOptions {
    /// Parses serve flags alone (without the program name), for tests and embedders.
    pub fn try_parse_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let argv = std::iter::once("serve".into()).chain(args.into_iter().map(Into::into));
        Ok(OptionsOnly::try_parse_from(argv)?.options)
    }
}

impl Default for ServeOptions {
    /// Every flag at its default.
    fn default() -> Self {
        Self::try_parse_from(Vec::<String>::new())
            .expect("invariant: every serve flag has a valid default")
    }
}

/// A parser for `ServeOptions` on their own.
#[derive(Debug, Parser)]
struct OptionsOnly {
    #[command(flatten)]
    options: ServeOptions,
}

/// Why an --upstream value is refused.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamUrlError {
    /// Not a URI at all.
    #[error("invalid URL: {0}")]
    Invalid(#[from] http::uri::InvalidUri),
    /// A scheme other than http or https, or none.
    #[error("the URL must start with https:// or http://")]
    Scheme,
    /// No host.
    #[error("the URL has no host")]
    NoHost,
}

/// Parses --upstream: an absolute `https://` or `http://` URL with a host.
pub fn parse_upstream_url(value: &str) -> Result<http::Uri, UpstreamUrlError> {
    let uri: http::Uri = value.parse()?;
    match uri.scheme_str() {
        Some("https") | Some("http") => {}
        _ => return Err(UpstreamUrlError::Scheme),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(UpstreamUrlError::NoHost);
    }
    Ok(uri)
}

/// The limits flow control is computed at: `serve`'s flags, which `lint`, `simulate` and the
/// webhook take too (one definition, flattened into each), so that their verdicts are made at the
/// server's own limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct ServerLimits {
    /// Summed with --max-mutating-requests-inflight into the server's total concurrency limit.
    #[arg(long, default_value_t = 400, help_heading = "Flow control")]
    pub max_requests_inflight: u32,

    /// Summed with --max-requests-inflight into the server's total concurrency limit.
    #[arg(long, default_value_t = 200, help_heading = "Flow control")]
    pub max_mutating_requests_inflight: u32,

    /// How long a request may run (and wait in its queue, a quarter of it at most) before it is
    /// timed out.
    #[arg(long, default_value = "60s", value_parser = parse_duration, help_heading = "Flow control")]
    pub request_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            request_timeout: Duration::from_secs(60),
        }
    }
}

impl ServerLimits {
    /// The server's total concurrency limit: the sum of the two inflight flags, as in the apiserver.
    pub fn server_concurrency_limit(&self) -> u32 {
        self.max_requests_inflight
            .saturating_add(self.max_mutating_requests_inflight)
    }
}

/// `kube-apf-proxy webhook` flags.
#[derive(Debug, Clone, Args)]
pub struct WebhookOptions {
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// The HTTPS port.
    #[arg(long, default_value_t = 8444)]
    pub secure_port: u16,
    /// The serving certificate (PEM chain); reloaded when it changes. Without it and the key, a
    /// self-signed certificate is generated (for trying it out: the apiserver will not trust it).
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// The reference configuration single objects are judged against (the rest of the cluster's
    /// flow control); the embedded default configuration without it. Reloaded when it changes.
    #[arg(long)]
    pub config_dir: Option<PathBuf>,
    /// `KEY=VALUE`: the label of the ConfigMaps that hold the proxy's configuration; such a
    /// ConfigMap is validated whole, as the proxy would load it.
    #[arg(long, default_value = "kube-apf-proxy.io/flowcontrol-config=true", value_parser = parse_label)]
    pub configmap_label: (String, String),
    /// The proxy's limits, for the level findings.
    #[command(flatten)]
    pub limits: ServerLimits,
    /// `text` or `json` logs.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log verbosity: 0 info, 1 debug, 2 and more trace; RUST_LOG overrides it.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,
}

fn parse_label(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {value:?}")),
    }
}

#[cfg(test)]
mod tests;
