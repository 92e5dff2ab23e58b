//! Building the authenticator: CA roots for the server, configuration errors.

use super::super::*;
use super::Pki;
use crate::auth::fake_transport::FakeTransport;
use http::HeaderName;

#[test]
fn client_ca_roots_are_the_union_of_both_bundles() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(true);
    assert_eq!(
        auth.client_ca_roots(),
        vec![pki.client_ca.der(), pki.proxy_ca.der()]
    );

    let same = pki.client_ca.write(pki.dir.path(), "same.pem");
    let cfg = AuthConfig {
        client_ca_file: Some(same.clone()),
        request_header: Some(RequestHeaderConfig::new(same)),
        ..AuthConfig::default()
    };
    let auth = Authenticator::new(cfg).expect("config");
    assert_eq!(
        auth.client_ca_roots(),
        vec![pki.client_ca.der()],
        "deduplicated"
    );
}

#[test]
fn bad_configurations_are_rejected() {
    let pki = Pki::new();
    let missing = pki.dir.path().join("missing.pem");
    let empty = pki.dir.path().join("empty.pem");
    std::fs::write(&empty, "").expect("write");
    let cases: Vec<(AuthConfig, &str)> = vec![
        (
            AuthConfig {
                anonymous: false,
                ..AuthConfig::default()
            },
            "no authentication method configured",
        ),
        (
            AuthConfig {
                client_ca_file: Some(missing.clone()),
                ..AuthConfig::default()
            },
            "reading --client-ca-file",
        ),
        (
            AuthConfig {
                request_header: Some(RequestHeaderConfig::new(empty)),
                ..AuthConfig::default()
            },
            "holds no certificate",
        ),
        (
            AuthConfig {
                token_auth_file: Some(pki.token_file("only,two\n")),
                ..AuthConfig::default()
            },
            "must have at least 3 columns",
        ),
        (
            AuthConfig {
                token_review: Some(TokenReviewConfig {
                    request_timeout: std::time::Duration::ZERO,
                    ..TokenReviewConfig::new(FakeTransport::users())
                }),
                ..AuthConfig::default()
            },
            "request timeout must be positive",
        ),
        (
            AuthConfig {
                token_review: Some(TokenReviewConfig {
                    retry_backoff: RetryBackoff {
                        factor: -1.0,
                        ..RetryBackoff::default()
                    },
                    ..TokenReviewConfig::new(FakeTransport::users())
                }),
                ..AuthConfig::default()
            },
            "retry backoff factor must be between 1 and 10",
        ),
    ];
    for (cfg, want) in cases {
        let err = Authenticator::new(cfg)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(want), "{err:?} should contain {want:?}");
    }
}

#[test]
fn anonymous_alone_is_a_valid_configuration() {
    let auth = Authenticator::new(AuthConfig::default()).expect("anonymous only");
    assert!(auth.client_ca_roots().is_empty());
    assert!(auth.is_identity_header(&HeaderName::from_static("x-remote-user")));
    assert!(!auth.is_identity_header(&HeaderName::from_static("authorization")));
}

#[test]
fn authenticator_is_shareable_and_its_future_is_send() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: &T) {}
    let auth = Authenticator::new(AuthConfig::default()).expect("anonymous only");
    assert_send_sync(&auth);
    let headers = http::HeaderMap::new();
    let future = auth.authenticate(&headers, None);
    assert_send(&future);
}
