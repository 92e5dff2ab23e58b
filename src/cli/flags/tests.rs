use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::{IdentityForwarding, LogFormat, ServeOptions};
use crate::server::tls::TlsMinVersion;

fn parse(args: &[&str]) -> ServeOptions {
    ServeOptions::try_parse_from(args).expect("flags parse")
}

fn parse_err(args: &[&str]) -> String {
    ServeOptions::try_parse_from(args)
        .expect_err("flags are refused")
        .to_string()
}

#[test]
fn defaults_are_kube_apiserver_defaults() {
    let o = ServeOptions::default();
    assert_eq!(o.bind_address, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    assert_eq!(o.secure_port, 8443);
    assert_eq!(o.tls_cert_file, None);
    assert_eq!(o.tls_private_key_file, None);
    assert_eq!(o.tls_min_version, TlsMinVersion::Tls12);
    assert!(o.tls_cipher_suites.is_empty());
    assert_eq!(o.http2_max_streams_per_connection, 0);
    assert_eq!(o.http2_max_streams(), 100);
    assert_eq!(o.client_ca_file, None);
    assert_eq!(o.token_auth_file, None);
    assert!(!o.authentication_token_webhook);
    assert_eq!(
        o.authentication_token_webhook_cache_ttl,
        Duration::from_secs(120)
    );
    assert_eq!(o.requestheader_client_ca_file, None);
    assert!(o.requestheader_allowed_names.is_empty());
    assert!(o.requestheader_username_headers.is_empty());
    assert!(o.requestheader_uid_headers.is_empty());
    assert!(o.requestheader_group_headers.is_empty());
    assert!(o.requestheader_extra_headers_prefix.is_empty());
    assert!(o.anonymous_auth);
    assert_eq!(o.upstream, None);
    assert_eq!(o.kubeconfig, None);
    assert_eq!(o.identity_forwarding, IdentityForwarding::Passthrough);
    assert_eq!(o.config_dir, None);
    assert_eq!(o.limits.max_requests_inflight, 400);
    assert_eq!(o.limits.max_mutating_requests_inflight, 200);
    assert_eq!(o.server_concurrency_limit(), 600);
    assert_eq!(o.limits.request_timeout, Duration::from_secs(60));
    assert_eq!(o.admin_address, SocketAddr::from(([127, 0, 0, 1], 8081)));
    assert_eq!(o.log_format, LogFormat::Text);
    assert_eq!(o.verbosity, 0);
    assert_eq!(o.shutdown_delay_duration, Duration::ZERO);
    assert_eq!(o.shutdown_grace_period, Duration::from_secs(60));
}

#[test]
fn every_flag_is_accepted() {
    let o = parse(&[
        "--bind-address=127.0.0.1",
        "--secure-port=9443",
        "--tls-cert-file=/pki/tls.crt",
        "--tls-private-key-file=/pki/tls.key",
        "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        "--http2-max-streams-per-connection=250",
        "--client-ca-file=/pki/ca.crt",
        "--token-auth-file=/pki/tokens.csv",
        "--authentication-token-webhook",
        "--authentication-token-webhook-cache-ttl=30s",
        "--requestheader-client-ca-file=/pki/front-proxy-ca.crt",
        "--requestheader-allowed-names=front-proxy-client,aggregator",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-uid-headers=X-Remote-Uid",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--anonymous-auth=false",
        "--upstream=https://127.0.0.1:6443",
        "--upstream-ca-file=/pki/ca.crt",
        "--upstream-client-cert-file=/pki/proxy.crt",
        "--upstream-client-key-file=/pki/proxy.key",
        "--upstream-token-file=/pki/token",
        "--kubeconfig=/etc/kubeconfig",
        "--identity-forwarding=requestheader",
        "--config-dir=/etc/apf",
        "--max-requests-inflight=10",
        "--max-mutating-requests-inflight=5",
        "--request-timeout=1m30s",
        "--admin-address=0.0.0.0:9090",
        "--log-format=json",
        "-v=2",
        "--shutdown-delay-duration=5s",
        "--shutdown-grace-period=500ms",
    ]);
    assert_eq!(o.secure_address(), SocketAddr::from(([127, 0, 0, 1], 9443)));
    assert_eq!(o.tls_cert_file, Some(PathBuf::from("/pki/tls.crt")));
    assert_eq!(o.tls_private_key_file, Some(PathBuf::from("/pki/tls.key")));
    assert_eq!(o.tls_min_version, TlsMinVersion::Tls13);
    let suites: Vec<_> = o.tls_cipher_suites.iter().map(|s| s.name()).collect();
    assert_eq!(
        suites,
        [
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_AES_128_GCM_SHA256"
        ]
    );
    assert_eq!(o.http2_max_streams(), 250);
    assert_eq!(o.client_ca_file, Some(PathBuf::from("/pki/ca.crt")));
    assert_eq!(o.token_auth_file, Some(PathBuf::from("/pki/tokens.csv")));
    assert!(o.authentication_token_webhook);
    assert_eq!(
        o.authentication_token_webhook_cache_ttl,
        Duration::from_secs(30)
    );
    assert_eq!(
        o.requestheader_client_ca_file,
        Some(PathBuf::from("/pki/front-proxy-ca.crt"))
    );
    assert_eq!(
        o.requestheader_allowed_names,
        ["front-proxy-client", "aggregator"]
    );
    assert_eq!(o.requestheader_username_headers, ["X-Remote-User"]);
    assert_eq!(o.requestheader_uid_headers, ["X-Remote-Uid"]);
    assert_eq!(o.requestheader_group_headers, ["X-Remote-Group"]);
    assert_eq!(o.requestheader_extra_headers_prefix, ["X-Remote-Extra-"]);
    assert!(!o.anonymous_auth);
    assert_eq!(
        o.upstream.as_ref().map(ToString::to_string).as_deref(),
        Some("https://127.0.0.1:6443/")
    );
    assert_eq!(o.upstream_ca_file, Some(PathBuf::from("/pki/ca.crt")));
    assert_eq!(
        o.upstream_client_cert_file,
        Some(PathBuf::from("/pki/proxy.crt"))
    );
    assert_eq!(
        o.upstream_client_key_file,
        Some(PathBuf::from("/pki/proxy.key"))
    );
    assert_eq!(o.upstream_token_file, Some(PathBuf::from("/pki/token")));
    assert_eq!(o.kubeconfig, Some(PathBuf::from("/etc/kubeconfig")));
    assert_eq!(o.identity_forwarding, IdentityForwarding::Requestheader);
    assert_eq!(o.config_dir, Some(PathBuf::from("/etc/apf")));
    assert_eq!(o.server_concurrency_limit(), 15);
    assert_eq!(o.limits.request_timeout, Duration::from_secs(90));
    assert_eq!(o.admin_address, SocketAddr::from(([0, 0, 0, 0], 9090)));
    assert_eq!(o.log_format, LogFormat::Json);
    assert_eq!(o.verbosity, 2);
    assert_eq!(o.shutdown_delay_duration, Duration::from_secs(5));
    assert_eq!(o.shutdown_grace_period, Duration::from_millis(500));
}

#[test]
fn list_flags_split_on_commas_and_repeat() {
    let o = parse(&[
        "--requestheader-group-headers=X-Remote-Group,X-Group",
        "--requestheader-group-headers",
        "X-Other-Group",
    ]);
    assert_eq!(
        o.requestheader_group_headers,
        ["X-Remote-Group", "X-Group", "X-Other-Group"]
    );
}

#[test]
fn boolean_flags_take_go_forms() {
    let cases: &[(&[&str], bool)] = &[
        (&[], true),
        (&["--anonymous-auth"], true),
        (&["--anonymous-auth=true"], true),
        (&["--anonymous-auth=false"], false),
    ];
    for (args, expected) in cases {
        assert_eq!(parse(args).anonymous_auth, *expected, "{args:?}");
    }
}

#[test]
fn verbosity_takes_klog_forms() {
    for args in [&["-v=3"][..], &["-v", "3"], &["--v=3"], &["-v3"]] {
        assert_eq!(parse(args).verbosity, 3, "{args:?}");
    }
}

#[test]
fn bad_values_are_refused_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (&["--request-timeout=60"], "missing unit"),
        (&["--request-timeout=-1s"], "must not be negative"),
        (&["--shutdown-grace-period=soon"], "invalid duration"),
        (&["--tls-min-version=VersionTLS11"], "TLS 1.2 and 1.3 only"),
        (&["--tls-min-version=tls12"], "unknown TLS version"),
        (
            &["--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA"],
            "not supported",
        ),
        (&["--tls-cipher-suites=TLS_FOO"], "unknown cipher suite"),
        (&["--upstream=ftp://example"], "https:// or http://"),
        (&["--upstream=/just/a/path"], "https:// or http://"),
        (&["--tls-cert-file=/a.crt"], "--tls-private-key-file"),
        (
            &["--upstream-client-key-file=/a.key"],
            "--upstream-client-cert-file",
        ),
        (&["--identity-forwarding=root"], "passthrough"),
        (&["--log-format=xml"], "text"),
        (&["--secure-port=70000"], "70000"),
    ];
    for (args, needle) in cases {
        let err = parse_err(args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn the_admin_listener_is_secure_by_default_off_loopback() {
    let cases: &[(&[&str], bool)] = &[
        (&[], false),
        (&["--admin-address=[::1]:8081"], false),
        (&["--admin-address=0.0.0.0:8081"], true),
        (&["--admin-address=10.0.0.1:8081"], true),
        (
            &["--admin-address=0.0.0.0:8081", "--admin-secure=false"],
            false,
        ),
        (&["--admin-secure"], true),
        (&["--admin-secure=true"], true),
    ];
    for (args, secure) in cases {
        assert_eq!(parse(args).admin_secure(), *secure, "{args:?}");
    }
    let o = parse(&[]);
    assert_eq!(
        o.authorization_webhook_cache_authorized_ttl,
        Duration::from_secs(300)
    );
    assert_eq!(
        o.authorization_webhook_cache_unauthorized_ttl,
        Duration::from_secs(30)
    );
    assert!(parse_err(&["--admin-tls-cert-file=c"]).contains("admin-tls-private-key-file"));
}

#[test]
fn the_configuration_comes_from_a_directory_unless_cluster_is_asked_for() {
    use super::ConfigSource;
    assert_eq!(parse(&[]).config_source, ConfigSource::Dir);
    assert_eq!(
        parse(&["--config-source=cluster"]).config_source,
        ConfigSource::Cluster
    );
    let error = parse_err(&["--config-source=cluster", "--config-dir=d"]);
    assert!(error.contains("cannot be used with"), "{error}");
}
