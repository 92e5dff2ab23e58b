//! The serve flags (owned by `server::ServeOptions`) mapped onto the proxy's plain settings.

use crate::server::{self, ServeOptions};

use super::{ForgeableHeaders, ForwarderConfig, IdentityForwarding};
use crate::upstream::UpstreamConfig;

impl From<server::IdentityForwarding> for IdentityForwarding {
    fn from(mode: server::IdentityForwarding) -> Self {
        match mode {
            server::IdentityForwarding::Passthrough => IdentityForwarding::Passthrough,
            server::IdentityForwarding::Impersonate => IdentityForwarding::Impersonate,
            server::IdentityForwarding::Requestheader => IdentityForwarding::Requestheader,
        }
    }
}

impl UpstreamConfig {
    /// `--upstream`, `--upstream-ca-file`, `--upstream-client-cert-file`,
    /// `--upstream-client-key-file`, `--upstream-token-file`, `--kubeconfig`.
    pub fn from_serve_options(options: &ServeOptions) -> Self {
        UpstreamConfig {
            upstream: options.upstream.as_ref().map(ToString::to_string),
            ca_file: options.upstream_ca_file.clone(),
            client_cert_file: options.upstream_client_cert_file.clone(),
            client_key_file: options.upstream_client_key_file.clone(),
            token_file: options.upstream_token_file.clone(),
            kubeconfig: options.kubeconfig.clone(),
        }
    }
}

impl ForwarderConfig {
    /// `--identity-forwarding`, `--request-timeout`, and the `--requestheader-*` names, which
    /// are stripped from every caller request.
    pub fn from_serve_options(options: &ServeOptions) -> Self {
        let names: Vec<String> = options
            .requestheader_username_headers
            .iter()
            .chain(&options.requestheader_uid_headers)
            .chain(&options.requestheader_group_headers)
            .cloned()
            .collect();
        ForwarderConfig {
            mode: options.identity_forwarding.into(),
            request_timeout: options.limits.request_timeout,
            forgeable: ForgeableHeaders::new(&names, &options.requestheader_extra_headers_prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeOptions,
    }

    #[test]
    fn maps_serve_flags() {
        let cli = Cli::try_parse_from([
            "kube-apf-proxy",
            "--upstream=https://10.0.0.1:6443",
            "--upstream-token-file=/t",
            "--identity-forwarding=impersonate",
            "--request-timeout=30s",
            "--requestheader-username-headers=X-User",
            "--requestheader-extra-headers-prefix=X-Extra-",
        ])
        .expect("flags parse");
        let upstream = UpstreamConfig::from_serve_options(&cli.serve);
        assert_eq!(upstream.upstream.as_deref(), Some("https://10.0.0.1:6443/"));
        assert_eq!(upstream.token_file, Some("/t".into()));
        let forwarding = ForwarderConfig::from_serve_options(&cli.serve);
        assert_eq!(forwarding.mode, IdentityForwarding::Impersonate);
        assert_eq!(
            forwarding.request_timeout,
            std::time::Duration::from_secs(30)
        );
        let mut headers = http::HeaderMap::new();
        headers.insert("x-user", http::HeaderValue::from_static("root"));
        headers.insert("x-extra-scope", http::HeaderValue::from_static("all"));
        let anonymous = crate::proxy::ForwardableIdentity::check(
            crate::auth::Identity::anonymous(),
            IdentityForwarding::Passthrough,
        )
        .expect("passthrough forwards any identity");
        super::super::headers::prepare_request_headers(
            &mut headers,
            &anonymous,
            &forwarding.forgeable,
            None,
            false,
        )
        .expect("prepared");
        assert!(headers.is_empty(), "{headers:?}");
    }
}
