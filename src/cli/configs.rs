//! The one mapping from flags to the rooms' plain configs: `serve`'s flags onto the
//! [`ServeConfig`] the proxy is assembled from (the server's, authentication's, the upstream's,
//! the forwarder's and flow control's), `webhook`'s onto the [`WebhookConfig`].
//!
//! Adding a flag for a room is its field in [`super::flags`], its field in the room's config, and
//! one line here.

use std::net::SocketAddr;

use crate::admission::WebhookConfig;
use crate::app::{FlowControlConfig, ServeConfig};
use crate::auth::authorize::AuthorizerConfig;
use crate::auth::{AuthConfig, RequestHeaderConfig};
use crate::coordination::CoordinationConfig;
use crate::lint::LintOptions;
use crate::proxy::{ForgeableHeaders, ForwarderConfig};
use crate::server::{ClientCaFiles, ConnectionLimits, ServerConfig, TlsSettings};
use crate::upstream::{UpstreamConfig, UpstreamLimits};

use super::flags::{ConfigSource, FlowControlMode, ServeOptions, ServerLimits, WebhookOptions};

/// kube-apiserver's default `MaxConcurrentStreams` when the flag is 0 (`secure_serving.go`).
const DEFAULT_HTTP2_MAX_STREAMS: u32 = 100;

impl ServeOptions {
    /// Every room's config, as the flags give it.
    pub fn config(&self) -> ServeConfig {
        ServeConfig {
            server: self.server_config(),
            auth: self.auth_config(),
            token_review_cache_ttl: self
                .authentication_token_webhook
                .then_some(self.authentication_token_webhook_cache_ttl),
            admin_authorizer: AuthorizerConfig {
                allowed_ttl: self.authorization_webhook_cache_authorized_ttl,
                denied_ttl: self.authorization_webhook_cache_unauthorized_ttl,
                ..AuthorizerConfig::default()
            },
            upstream: self.upstream_config(),
            upstream_limits: self.upstream_limits(),
            forwarder: self.forwarder_config(),
            flow_control: self.flow_control_config(),
            coordination: self.coordination_config(),
        }
    }

    /// Replicas sharing the budget: `--coordination-namespace` (on when given),
    /// `--coordination-kubeconfig`, `--replica-id`, `--coordination-lease-duration`.
    pub fn coordination_config(&self) -> Option<CoordinationConfig> {
        let namespace = self.coordination_namespace.clone()?;
        Some(CoordinationConfig::new(
            namespace,
            self.coordination_kubeconfig.clone(),
            self.replica_id.clone(),
            self.coordination_lease_duration,
        ))
    }

    /// The listeners: `--bind-address`, `--secure-port`, `--tls-*`, `--client-ca-file` and
    /// `--requestheader-client-ca-file` (the CAs the handshake names),
    /// `--http2-max-streams-per-connection`, `--max-connections`, `--admin-*`,
    /// `--shutdown-delay-duration`, `--shutdown-grace-period`.
    pub fn server_config(&self) -> ServerConfig {
        ServerConfig {
            secure_address: self.secure_address(),
            tls: TlsSettings {
                cert_file: self.tls_cert_file.clone(),
                key_file: self.tls_private_key_file.clone(),
                min_version: self.tls_min_version,
                cipher_suites: self.tls_cipher_suites.clone(),
                client_ca_roots: Vec::new(),
            },
            client_ca_files: ClientCaFiles {
                client_ca_file: self.client_ca_file.clone(),
                requestheader_client_ca_file: self.requestheader_client_ca_file.clone(),
            },
            limits: ConnectionLimits {
                http2_max_concurrent_streams: self.http2_max_streams(),
                max_connections: self.max_connections.max(1),
                grace_period: self.shutdown_grace_period,
                ..ConnectionLimits::default()
            },
            admin_address: self.admin_address,
            admin_secure: self.admin_secure(),
            admin_cert_files: self
                .admin_tls_cert_file
                .clone()
                .zip(self.admin_tls_private_key_file.clone()),
            shutdown_delay: self.shutdown_delay_duration,
        }
    }

    /// The authenticators: `--client-ca-file`, `--token-auth-file`, `--requestheader-*`,
    /// `--anonymous-auth` (TokenReviews, `--authentication-token-webhook`, are asked for
    /// beside it: see [`ServeConfig::token_review_cache_ttl`]).
    pub fn auth_config(&self) -> AuthConfig {
        let request_header =
            self.requestheader_client_ca_file
                .as_ref()
                .map(|ca| RequestHeaderConfig {
                    client_ca_file: ca.clone(),
                    allowed_names: self.requestheader_allowed_names.clone(),
                    username_headers: self.requestheader_username_headers.clone(),
                    uid_headers: self.requestheader_uid_headers.clone(),
                    group_headers: self.requestheader_group_headers.clone(),
                    extra_headers_prefixes: self.requestheader_extra_headers_prefix.clone(),
                });
        AuthConfig {
            client_ca_file: self.client_ca_file.clone(),
            token_auth_file: self.token_auth_file.clone(),
            token_review: None,
            request_header,
            anonymous: self.anonymous_auth,
            api_audiences: Vec::new(),
        }
    }

    /// `--upstream`, `--upstream-ca-file`, `--upstream-client-cert-file`,
    /// `--upstream-client-key-file`, `--upstream-token-file`, `--kubeconfig`.
    pub fn upstream_config(&self) -> UpstreamConfig {
        UpstreamConfig {
            upstream: self.upstream.as_ref().map(ToString::to_string),
            ca_file: self.upstream_ca_file.clone(),
            client_cert_file: self.upstream_client_cert_file.clone(),
            client_key_file: self.upstream_client_key_file.clone(),
            token_file: self.upstream_token_file.clone(),
            kubeconfig: self.kubeconfig.clone(),
        }
    }

    /// `--identity-forwarding`, `--request-timeout`, and the `--requestheader-*` names, which
    /// are stripped from every caller request.
    pub fn forwarder_config(&self) -> ForwarderConfig {
        let names: Vec<String> = self
            .requestheader_username_headers
            .iter()
            .chain(&self.requestheader_uid_headers)
            .chain(&self.requestheader_group_headers)
            .cloned()
            .collect();
        ForwarderConfig {
            mode: self.identity_forwarding,
            request_timeout: self.limits.request_timeout,
            forgeable: ForgeableHeaders::new(&names, &self.requestheader_extra_headers_prefix),
        }
    }

    /// `--max-requests-inflight`, `--max-mutating-requests-inflight`, `--request-timeout`,
    /// `--max-request-bytes`, `--flow-control`, `--config-dir`, `--config-source`,
    /// `--shadow-config-dir`.
    pub fn flow_control_config(&self) -> FlowControlConfig {
        FlowControlConfig {
            server_concurrency_limit: self.server_concurrency_limit(),
            request_timeout: self.limits.request_timeout,
            max_request_bytes: self.max_request_bytes,
            dry_run: self.flow_control == FlowControlMode::DryRun,
            config_dir: self.config_dir.clone(),
            from_cluster: self.config_source == ConfigSource::Cluster,
            shadow_config_dir: self.shadow_config_dir.clone(),
        }
    }

    /// The address the secure listener binds.
    pub fn secure_address(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.secure_port)
    }

    /// Whether the admin listener is secure: `--admin-secure` when given, else whenever
    /// `--admin-address` is not a loopback address.
    pub fn admin_secure(&self) -> bool {
        self.admin_secure
            .unwrap_or(!self.admin_address.ip().is_loopback())
    }

    /// The server's total concurrency limit: the sum of the two inflight flags, as in the apiserver.
    pub fn server_concurrency_limit(&self) -> u32 {
        self.limits.server_concurrency_limit()
    }

    /// The upstream client's connection bound and its reserve for ordinary requests.
    pub fn upstream_limits(&self) -> UpstreamLimits {
        UpstreamLimits::new(
            self.upstream_max_connections as usize,
            self.server_concurrency_limit() as usize,
        )
    }

    /// The HTTP/2 stream limit advertised to clients (the flag, or 100 when it is 0).
    pub fn http2_max_streams(&self) -> u32 {
        match self.http2_max_streams_per_connection {
            0 => DEFAULT_HTTP2_MAX_STREAMS,
            n => n,
        }
    }
}

impl ServerLimits {
    /// The checks' parameters at these limits (`lint`, the webhook's level findings).
    pub fn lint_options(&self) -> LintOptions {
        LintOptions {
            max_requests_inflight: self.max_requests_inflight,
            max_mutating_requests_inflight: self.max_mutating_requests_inflight,
            request_timeout: self.request_timeout,
            ..LintOptions::default()
        }
    }
}

impl WebhookOptions {
    /// The webhook's config, as its flags give it (`--log-format` and `-v` are the command's).
    pub fn config(&self) -> WebhookConfig {
        WebhookConfig {
            bind_address: self.bind_address,
            secure_port: self.secure_port,
            tls_cert_file: self.tls_cert_file.clone(),
            tls_private_key_file: self.tls_private_key_file.clone(),
            config_dir: self.config_dir.clone(),
            configmap_label: self.configmap_label.clone(),
            lint: self.limits.lint_options(),
        }
    }
}

#[cfg(test)]
mod tests;
