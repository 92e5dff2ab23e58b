use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::proxy::IdentityForwarding;

fn parse(args: &[&str]) -> ServeOptions {
    ServeOptions::try_parse_from(args).expect("flags parse")
}

#[test]
fn maps_the_upstream_and_forwarding_flags() {
    let o = parse(&[
        "--upstream=https://10.0.0.1:6443",
        "--upstream-token-file=/t",
        "--identity-forwarding=impersonate",
        "--request-timeout=30s",
        "--requestheader-username-headers=X-User",
        "--requestheader-extra-headers-prefix=X-Extra-",
    ]);
    let config = o.config();
    assert_eq!(
        config.upstream.upstream.as_deref(),
        Some("https://10.0.0.1:6443/")
    );
    assert_eq!(config.upstream.token_file, Some("/t".into()));
    let forwarding = config.forwarder;
    assert_eq!(forwarding.mode, IdentityForwarding::Impersonate);
    assert_eq!(forwarding.request_timeout, Duration::from_secs(30));
    let mut headers = http::HeaderMap::new();
    headers.insert("x-user", http::HeaderValue::from_static("root"));
    headers.insert("x-extra-scope", http::HeaderValue::from_static("all"));
    let anonymous = crate::proxy::ForwardableIdentity::check(
        crate::auth::Identity::anonymous(),
        IdentityForwarding::Passthrough,
    )
    .expect("passthrough forwards any identity");
    crate::proxy::prepare_request_headers(
        &mut headers,
        &anonymous,
        &forwarding.forgeable,
        None,
        false,
    )
    .expect("prepared");
    assert!(headers.is_empty(), "{headers:?}");
}

#[test]
fn maps_the_listener_flags() {
    let o = parse(&[
        "--bind-address=127.0.0.1",
        "--secure-port=9443",
        "--tls-cert-file=/pki/tls.crt",
        "--tls-private-key-file=/pki/tls.key",
        "--client-ca-file=/pki/ca.crt",
        "--requestheader-client-ca-file=/pki/front-proxy-ca.crt",
        "--http2-max-streams-per-connection=250",
        "--max-connections=0",
        "--admin-address=0.0.0.0:9090",
        "--admin-tls-cert-file=/pki/admin.crt",
        "--admin-tls-private-key-file=/pki/admin.key",
        "--shutdown-delay-duration=5s",
        "--shutdown-grace-period=500ms",
    ]);
    let server = o.server_config();
    assert_eq!(server.secure_address.to_string(), "127.0.0.1:9443");
    assert_eq!(server.tls.cert_file, Some(PathBuf::from("/pki/tls.crt")));
    assert_eq!(server.tls.key_file, Some(PathBuf::from("/pki/tls.key")));
    let cas: Vec<_> = server.client_ca_files.named().collect();
    assert_eq!(
        cas,
        [
            ("--client-ca-file", std::path::Path::new("/pki/ca.crt")),
            (
                "--requestheader-client-ca-file",
                std::path::Path::new("/pki/front-proxy-ca.crt")
            ),
        ]
    );
    assert_eq!(server.limits.http2_max_concurrent_streams, 250);
    assert_eq!(server.limits.max_connections, 1, "at least one connection");
    assert_eq!(server.limits.grace_period, Duration::from_millis(500));
    assert!(server.admin_secure, "off loopback");
    assert_eq!(
        server.cert_files(),
        [
            "/pki/tls.crt",
            "/pki/tls.key",
            "/pki/admin.crt",
            "/pki/admin.key"
        ]
        .map(PathBuf::from)
    );
    assert_eq!(server.shutdown_delay, Duration::from_secs(5));
    let defaults = parse(&[]).server_config();
    assert_eq!(defaults.limits.http2_max_concurrent_streams, 100);
    assert_eq!(
        defaults.limits.max_connections,
        crate::server::DEFAULT_MAX_CONNECTIONS
    );
    assert!(!defaults.admin_secure);
    assert_eq!(defaults.admin_cert_files, None);
}

#[test]
fn maps_the_authentication_flags() {
    let o = parse(&[
        "--client-ca-file=/pki/ca.crt",
        "--token-auth-file=/pki/tokens.csv",
        "--authentication-token-webhook",
        "--authentication-token-webhook-cache-ttl=30s",
        "--requestheader-client-ca-file=/pki/front-proxy-ca.crt",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--anonymous-auth=false",
    ]);
    let config = o.config();
    let auth = &config.auth;
    assert_eq!(auth.client_ca_file, Some(PathBuf::from("/pki/ca.crt")));
    assert_eq!(auth.token_auth_file, Some(PathBuf::from("/pki/tokens.csv")));
    assert!(!auth.anonymous);
    let request_header = auth.request_header.as_ref().expect("requestheader");
    assert_eq!(request_header.allowed_names, ["front-proxy-client"]);
    assert_eq!(request_header.username_headers, ["X-Remote-User"]);
    assert_eq!(config.token_review_cache_ttl, Some(Duration::from_secs(30)));
    let defaults = parse(&[]).config();
    assert!(defaults.auth.anonymous);
    assert!(defaults.auth.request_header.is_none());
    assert_eq!(defaults.token_review_cache_ttl, None);
    assert_eq!(
        defaults.admin_authorizer.allowed_ttl,
        Duration::from_secs(300)
    );
    assert_eq!(
        defaults.admin_authorizer.denied_ttl,
        Duration::from_secs(30)
    );
}

#[test]
fn maps_the_flow_control_flags() {
    let o = parse(&[
        "--max-requests-inflight=10",
        "--max-mutating-requests-inflight=5",
        "--request-timeout=1m30s",
        "--max-request-bytes=1024",
        "--flow-control=dry-run",
        "--config-dir=/etc/apf",
        "--shadow-config-dir=/etc/candidate",
    ]);
    assert_eq!(
        o.flow_control_config(),
        FlowControlConfig {
            server_concurrency_limit: 15,
            request_timeout: Duration::from_secs(90),
            max_request_bytes: 1024,
            dry_run: true,
            config_dir: Some("/etc/apf".into()),
            from_cluster: false,
            shadow_config_dir: Some("/etc/candidate".into()),
        }
    );
    let cluster = parse(&["--config-source=cluster"]).flow_control_config();
    assert!(cluster.from_cluster && !cluster.dry_run);
    assert_eq!(cluster.config_dir, None);
    let upstream = parse(&["--upstream-max-connections=100"]).upstream_limits();
    assert_eq!(upstream, UpstreamLimits::new(100, 600));
}

#[test]
fn maps_the_webhook_flags() {
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        webhook: WebhookOptions,
    }
    let cli = Cli::try_parse_from([
        "webhook",
        "--secure-port=0",
        "--max-requests-inflight=10",
        "--configmap-label=a=b",
    ])
    .expect("flags parse");
    let config = cli.webhook.config();
    assert_eq!(config.secure_port, 0);
    assert_eq!(config.configmap_label, ("a".into(), "b".into()));
    assert_eq!(config.lint.max_requests_inflight, 10);
    assert_eq!(config.lint.max_mutating_requests_inflight, 200);
    assert_eq!(
        config.lint.request_duration,
        LintOptions::default().request_duration
    );
}
