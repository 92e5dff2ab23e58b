//! The authenticator as a whole: order, fall-through, anonymous, group adding, config.

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rustls_pki_types::CertificateDer;

use super::fake_transport::{status, FakeTransport};
use super::test_pki::{ClientSpec, TestCa};
use super::*;

mod config;

pub(super) struct Pki {
    pub(super) dir: tempfile::TempDir,
    pub(super) client_ca: TestCa,
    pub(super) proxy_ca: TestCa,
    pub(super) stranger_ca: TestCa,
}

impl Pki {
    pub(super) fn new() -> Self {
        Pki {
            dir: tempfile::tempdir().expect("tempdir"),
            client_ca: TestCa::new("client-ca"),
            proxy_ca: TestCa::new("front-proxy-ca"),
            stranger_ca: TestCa::new("stranger-ca"),
        }
    }

    pub(super) fn token_file(&self, text: &str) -> std::path::PathBuf {
        let path = self.dir.path().join("tokens.csv");
        std::fs::write(&path, text).expect("write tokens");
        path
    }

    /// Every method configured: requestheader (allowed CN `front-proxy`), client CA, token file
    /// (`filetoken` → `file-user`), TokenReview (`good*` tokens), anonymous as given.
    pub(super) fn config(&self, transport: Arc<FakeTransport>, anonymous: bool) -> AuthConfig {
        let mut rh = RequestHeaderConfig::new(self.proxy_ca.write(self.dir.path(), "proxy-ca.pem"));
        rh.allowed_names = vec!["front-proxy".to_string()];
        AuthConfig {
            client_ca_file: Some(self.client_ca.write(self.dir.path(), "client-ca.pem")),
            token_auth_file: Some(self.token_file("filetoken,file-user,42,\"g1,g2\"\n")),
            token_review: Some(TokenReviewConfig::new(transport)),
            request_header: Some(rh),
            anonymous,
            api_audiences: Vec::new(),
        }
    }

    pub(super) fn authenticator(&self, anonymous: bool) -> (Authenticator, Arc<FakeTransport>) {
        let transport = FakeTransport::users();
        let auth = Authenticator::new(self.config(transport.clone(), anonymous)).expect("config");
        (auth, transport)
    }
}

/// A named request (headers, peer certificates) and what it should give.
type Case<'a, W> = (
    &'static str,
    HeaderMap,
    Option<&'a [CertificateDer<'static>]>,
    W,
);

fn cert(ca: &TestCa, cn: &str, orgs: &'static [&'static str]) -> Vec<CertificateDer<'static>> {
    ca.client(ClientSpec {
        cn: Some(cn),
        orgs,
        ..ClientSpec::default()
    })
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).expect("value"),
        );
    }
    map
}

fn bearer(token: &str) -> HeaderMap {
    headers(&[("authorization", &format!("Bearer {token}"))])
}

fn user_and_method(result: &Result<Authenticated, AuthError>) -> Option<(&str, AuthMethod)> {
    result
        .as_ref()
        .ok()
        .map(|a| (a.identity.user.as_str(), a.method))
}

#[tokio::test]
async fn each_method_authenticates_in_the_apiserver_order() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(true);
    let proxy = cert(&pki.proxy_ca, "front-proxy", &[]);
    let client = cert(&pki.client_ca, "alice", &["dev"]);
    let cases: Vec<Case<'_, (&str, AuthMethod)>> = vec![
        (
            "requestheader beats the bearer token",
            {
                let mut h = bearer("good1");
                h.insert("x-remote-user", HeaderValue::from_static("proxied"));
                h
            },
            Some(&proxy),
            ("proxied", AuthMethod::RequestHeader),
        ),
        (
            "client certificate beats the bearer token",
            bearer("good1"),
            Some(&client),
            ("alice", AuthMethod::ClientCertificate),
        ),
        (
            "proxy cert without user headers falls through to the token",
            bearer("good1"),
            Some(&proxy),
            ("user-good1", AuthMethod::TokenReview),
        ),
        (
            "token file before TokenReview",
            bearer("filetoken"),
            None,
            ("file-user", AuthMethod::TokenFile),
        ),
        (
            "TokenReview",
            bearer("good2"),
            None,
            ("user-good2", AuthMethod::TokenReview),
        ),
        (
            "nothing presented",
            HeaderMap::new(),
            None,
            ("system:anonymous", AuthMethod::Anonymous),
        ),
    ];
    for (name, h, certs, want) in cases {
        let got = auth.authenticate(&h, certs).await;
        assert_eq!(user_and_method(&got), Some(want), "{name}: {got:?}");
    }
}

#[tokio::test]
async fn client_ca_certificate_with_forged_remote_user_is_not_trusted() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(false);
    let h = headers(&[
        ("x-remote-user", "admin"),
        ("x-remote-group", "system:masters"),
    ]);
    let got = auth
        .authenticate(&h, Some(&cert(&pki.client_ca, "alice", &["dev"])))
        .await
        .expect("client certificate accepted");
    assert_eq!(got.method, AuthMethod::ClientCertificate);
    assert_eq!(got.identity.user, "alice");
    assert_eq!(got.identity.groups, vec!["dev", AUTHENTICATED_GROUP]);
}

#[tokio::test]
async fn proxy_cn_outside_allowed_names_cannot_assert_identity() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(true);
    let h = headers(&[("x-remote-user", "admin")]);
    let err = auth
        .authenticate(&h, Some(&cert(&pki.proxy_ca, "intruder", &[])))
        .await
        .expect_err("not allowed and not a client CA cert");
    let kinds: Vec<CredentialKind> = err.errors().iter().map(CredentialError::kind).collect();
    assert_eq!(
        kinds,
        vec![
            CredentialKind::RequestHeader,
            CredentialKind::ClientCertificate
        ]
    );
    assert!(
        err.to_string()
            .contains("cn=intruder is not in the allowed list"),
        "{err}"
    );
}

#[tokio::test]
async fn requestheader_identity_gets_groups_extra_and_authenticated_group() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(false);
    let h = headers(&[
        ("x-remote-user", "bob"),
        ("x-remote-group", "g1"),
        ("x-remote-extra-scopes", "s"),
    ]);
    let got = auth
        .authenticate(&h, Some(&cert(&pki.proxy_ca, "front-proxy", &[])))
        .await
        .expect("trusted");
    assert_eq!(got.identity.groups, vec!["g1", AUTHENTICATED_GROUP]);
    assert_eq!(
        got.identity.extra.get("scopes"),
        Some(&vec!["s".to_string()])
    );
}

#[tokio::test]
async fn authenticated_group_is_added_as_the_group_adder_does() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(false);
    let proxy = cert(&pki.proxy_ca, "front-proxy", &[]);
    let cases: [(&str, &[&str], &[&str]); 4] = [
        ("bob", &[], &[AUTHENTICATED_GROUP]),
        (
            "bob",
            &[AUTHENTICATED_GROUP, "x"],
            &[AUTHENTICATED_GROUP, "x"],
        ),
        ("bob", &[UNAUTHENTICATED_GROUP], &[UNAUTHENTICATED_GROUP]),
        (ANONYMOUS_USER, &["x"], &["x"]),
    ];
    for (user, groups, want) in cases {
        let mut h = headers(&[("x-remote-user", user)]);
        for g in groups {
            h.append("x-remote-group", HeaderValue::from_str(g).expect("value"));
        }
        let got = auth.authenticate(&h, Some(&proxy)).await.expect("trusted");
        assert_eq!(got.identity.groups, *want, "{user} {groups:?}");
    }
}

#[tokio::test]
async fn invalid_credentials_are_errors_never_anonymous() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(true);
    let stranger = cert(&pki.stranger_ca, "mallory", &[]);
    let cases: Vec<Case<'_, Vec<CredentialKind>>> = vec![
        (
            "unknown token",
            bearer("bad"),
            None,
            vec![CredentialKind::BearerToken],
        ),
        (
            "certificate from an unknown CA",
            HeaderMap::new(),
            Some(&stranger),
            vec![
                CredentialKind::RequestHeader,
                CredentialKind::ClientCertificate,
            ],
        ),
        (
            "both",
            bearer("bad"),
            Some(&stranger),
            vec![
                CredentialKind::RequestHeader,
                CredentialKind::ClientCertificate,
                CredentialKind::BearerToken,
            ],
        ),
        (
            "non-UTF-8 token",
            {
                let mut h = HeaderMap::new();
                h.insert(
                    http::header::AUTHORIZATION,
                    HeaderValue::from_bytes(b"Bearer \xff").expect("obs-text"),
                );
                h
            },
            None,
            vec![CredentialKind::BearerToken],
        ),
    ];
    for (name, h, certs, kinds) in cases {
        let err = auth.authenticate(&h, certs).await.expect_err(name);
        assert_eq!(err.status_code(), StatusCode::UNAUTHORIZED);
        let got: Vec<CredentialKind> = err.errors().iter().map(CredentialError::kind).collect();
        assert_eq!(got, kinds, "{name}: {err}");
    }
}

#[tokio::test]
async fn a_valid_credential_wins_over_an_invalid_one() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(false);
    let got = auth
        .authenticate(
            &bearer("good"),
            Some(&cert(&pki.stranger_ca, "mallory", &[])),
        )
        .await;
    assert_eq!(
        user_and_method(&got),
        Some(("user-good", AuthMethod::TokenReview))
    );
}

#[tokio::test]
async fn without_anonymous_no_credentials_is_unauthorized() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(false);
    let cases = [
        HeaderMap::new(),
        headers(&[("authorization", "Basic YTpi")]),
        headers(&[("authorization", "Bearer  spaced")]),
        headers(&[("x-remote-user", "admin")]),
    ];
    for h in cases {
        let err = auth.authenticate(&h, None).await.expect_err("401");
        assert_eq!(err, AuthError::NoCredentials, "{h:?}");
        assert_eq!(err.status_code(), StatusCode::UNAUTHORIZED);
    }
    assert_eq!(auth.stats().attempts(AttemptResult::Failure), 4);
}

#[tokio::test]
async fn token_review_failure_is_unauthorized_and_names_the_cause() {
    let pki = Pki::new();
    let transport = FakeTransport::new(|_, _| Ok(status(StatusCode::FORBIDDEN, "no tokenreviews")));
    let auth = Authenticator::new(pki.config(transport, true)).expect("config");
    let err = auth
        .authenticate(&bearer("whatever"), None)
        .await
        .expect_err("fails closed");
    assert_eq!(err.status_code(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        err.to_string(),
        "TokenReview: the server responded with status 403: no tokenreviews"
    );
}

#[tokio::test]
async fn errors_and_debug_output_never_contain_the_token() {
    let pki = Pki::new();
    let transport = FakeTransport::new(|_, _| Ok(status(StatusCode::UNAUTHORIZED, "nope")));
    let auth = Authenticator::new(pki.config(transport, false)).expect("config");
    let token = "sha256~VerySecretTokenValue";
    let err = auth
        .authenticate(&bearer(token), None)
        .await
        .expect_err("rejected");
    assert!(!err.to_string().contains(token));
    assert!(!format!("{err:?}").contains(token));
}

#[tokio::test]
async fn bearer_tokens_are_ignored_without_a_token_authenticator() {
    let pki = Pki::new();
    let cfg = AuthConfig {
        client_ca_file: Some(pki.client_ca.write(pki.dir.path(), "ca.pem")),
        ..AuthConfig::default()
    };
    let auth = Authenticator::new(cfg).expect("config");
    let got = auth.authenticate(&bearer("anything"), None).await;
    assert_eq!(
        user_and_method(&got),
        Some((ANONYMOUS_USER, AuthMethod::Anonymous))
    );
}

#[tokio::test]
async fn stats_count_methods_and_results() {
    let pki = Pki::new();
    let (auth, transport) = pki.authenticator(true);
    for h in [
        bearer("good"),
        bearer("good"),
        bearer("filetoken"),
        bearer("bad"),
        HeaderMap::new(),
    ] {
        let _ = auth.authenticate(&h, None).await;
    }
    let stats = auth.stats();
    assert_eq!(stats.succeeded(AuthMethod::TokenReview), 2);
    assert_eq!(stats.succeeded(AuthMethod::TokenFile), 1);
    assert_eq!(stats.succeeded(AuthMethod::Anonymous), 1);
    assert_eq!(stats.rejected(CredentialKind::BearerToken), 1);
    assert_eq!(stats.attempts(AttemptResult::Success), 4);
    assert_eq!(stats.attempts(AttemptResult::Error), 1);
    assert_eq!(
        stats
            .token_cache
            .hits
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(transport.calls(), 2);
}

#[tokio::test]
async fn websocket_subprotocol_tokens_are_authenticated_after_authorization() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(false);
    let ws = |token: &str| {
        let encoded: String = match token {
            "good-ws" => "Z29vZC13cw".to_string(),
            _ => "YmFk".to_string(),
        };
        let protocols =
            format!("v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.{encoded}");
        headers(&[
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-protocol", &protocols),
        ])
    };
    let got = auth.authenticate(&ws("good-ws"), None).await;
    assert_eq!(
        user_and_method(&got),
        Some(("user-good-ws", AuthMethod::TokenReview))
    );
    let err = auth
        .authenticate(&ws("bad"), None)
        .await
        .expect_err("bad token");
    assert_eq!(err.errors(), &[CredentialError::InvalidBearerToken]);
}

/// Passthrough: the identity is the one of the credential that reaches the upstream (the bearer
/// token); a certificate or front-proxy headers alone are refused, never classified.
#[tokio::test]
async fn forwarded_authentication_is_by_the_credential_that_travels() {
    let pki = Pki::new();
    let (auth, _) = pki.authenticator(true);
    let admin = cert(&pki.client_ca, "admin", &["system:masters"]);
    let proxy = cert(&pki.proxy_ca, "front-proxy", &[]);
    let stranger = cert(&pki.stranger_ca, "mallory", &["system:masters"]);
    let remote = |token: Option<&str>| {
        let mut h = token.map_or_else(HeaderMap::new, bearer);
        h.insert("x-remote-user", HeaderValue::from_static("proxied"));
        h
    };
    type Want = Result<(&'static str, AuthMethod), Option<AuthMethod>>;
    let cases: Vec<Case<'_, Want>> = vec![
        (
            "token only",
            bearer("good1"),
            None,
            Ok(("user-good1", AuthMethod::TokenReview)),
        ),
        (
            "certificate only",
            HeaderMap::new(),
            Some(&admin),
            Err(Some(AuthMethod::ClientCertificate)),
        ),
        (
            "certificate and token: the token travels",
            bearer("good1"),
            Some(&admin),
            Ok(("user-good1", AuthMethod::TokenReview)),
        ),
        (
            "certificate and static token",
            bearer("filetoken"),
            Some(&admin),
            Ok(("file-user", AuthMethod::TokenFile)),
        ),
        (
            "certificate and a bad token",
            bearer("bad"),
            Some(&admin),
            Err(None),
        ),
        (
            "certificate and another scheme: nothing travels the upstream reads",
            headers(&[("authorization", "Basic YWRtaW46cHc=")]),
            Some(&admin),
            Err(Some(AuthMethod::ClientCertificate)),
        ),
        (
            "front-proxy headers only",
            remote(None),
            Some(&proxy),
            Err(Some(AuthMethod::RequestHeader)),
        ),
        (
            "front-proxy headers and token",
            remote(Some("good2")),
            Some(&proxy),
            Ok(("user-good2", AuthMethod::TokenReview)),
        ),
        (
            "unknown CA and token",
            bearer("good1"),
            Some(&stranger),
            Ok(("user-good1", AuthMethod::TokenReview)),
        ),
        (
            "unknown CA alone",
            HeaderMap::new(),
            Some(&stranger),
            Err(None),
        ),
        (
            "nothing",
            HeaderMap::new(),
            None,
            Ok((ANONYMOUS_USER, AuthMethod::Anonymous)),
        ),
    ];
    for (name, h, certs, want) in cases {
        let got = auth.authenticate_forwarded(&h, certs).await;
        match want {
            Ok(want) => assert_eq!(user_and_method(&got), Some(want), "{name}: {got:?}"),
            Err(method) => {
                let err = got.expect_err(name);
                let not_forwarded = match err {
                    AuthError::NotForwarded(m) => Some(m),
                    AuthError::NoCredentials | AuthError::Rejected(_) => None,
                };
                assert_eq!(not_forwarded, method, "{name}: {err:?}");
                if method.is_some() {
                    assert!(err.status_message().contains("system:anonymous"), "{name}");
                } else {
                    assert_eq!(err.status_message(), "Unauthorized", "{name}");
                }
            }
        }
    }
}

/// Without a token authenticator, a token is not looked at: a caller with a certificate and a
/// token is classified as one that sends the token only (anonymous), never as the certificate.
#[tokio::test]
async fn forwarded_authentication_without_token_authenticators_never_uses_the_certificate() {
    let pki = Pki::new();
    let admin = cert(&pki.client_ca, "admin", &["system:masters"]);
    for anonymous in [true, false] {
        let cfg = AuthConfig {
            client_ca_file: Some(pki.client_ca.write(pki.dir.path(), "ca.pem")),
            anonymous,
            ..AuthConfig::default()
        };
        let auth = Authenticator::new(cfg).expect("config");
        let got = auth
            .authenticate_forwarded(&bearer("alice-token"), Some(&admin))
            .await;
        if anonymous {
            assert_eq!(
                user_and_method(&got),
                Some((ANONYMOUS_USER, AuthMethod::Anonymous))
            );
        } else {
            assert!(
                matches!(
                    got,
                    Err(AuthError::NotForwarded(AuthMethod::ClientCertificate))
                ),
                "{got:?}"
            );
        }
        // Every other mode: the certificate, as the apiserver's union.
        let got = auth
            .authenticate(&bearer("alice-token"), Some(&admin))
            .await;
        assert_eq!(
            user_and_method(&got),
            Some(("admin", AuthMethod::ClientCertificate))
        );
        assert_eq!(
            auth.stats().attempts(AttemptResult::Failure),
            u64::from(!anonymous)
        );
    }
}
