//! Each authentication method and each identity-forwarding mode through the whole app, with the
//! fake asserting which identity and credentials reached it.

use bytes::Bytes;
use http::{StatusCode, Version};
use sha2::Digest;

use crate::support::app::{metric_sum, request, AppBuilder, TestApp, STATIC_TOKEN};
use crate::support::fake_apiserver::{FakeApiserver, Recorded};
use crate::support::pki::{Issued, TestCa};
use crate::support::tls_world::{TlsWorld, GOOD_TOKEN, PROXY_TOKEN};
use crate::{assert_status, pf_headers, websocket_exec};

const POD: &str = "/api/v1/namespaces/ns/pods/web";

/// Every authenticator on, forwarding to a TLS fake that checks client certificates.
async fn app_for(world: &TlsWorld, mode: &str) -> TestApp {
    AppBuilder::for_world(world)
        .client_ca()
        .token_file()
        .requestheader()
        .flag("--authentication-token-webhook")
        .flag(format!("--identity-forwarding={mode}"))
        .start()
        .await
}

/// The request with `headers` as `client` sends it; the fake's record of it.
async fn get_as(
    world: &TlsWorld,
    app: &TestApp,
    cert: Option<&Issued>,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> Recorded {
    classified_get_as(world, app, cert, token, headers).await.1
}

/// [`get_as`], with the FlowSchema UID the proxy answered with.
async fn classified_get_as(
    world: &TlsWorld,
    app: &TestApp,
    cert: Option<&Issued>,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> (Option<String>, Recorded) {
    let mut get = request("GET", POD, token, Bytes::new());
    for (name, value) in headers {
        get.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            value.parse().expect("header value"),
        );
    }
    let response = app.client_with(cert, Version::HTTP_11).send(get).await;
    assert_eq!(response.status(), StatusCode::OK);
    (pf_headers(&response).0, world.fake.last_request_to(POD))
}

fn impersonated(seen: &Recorded) -> (Vec<String>, Vec<String>, Vec<String>) {
    (
        seen.header_values("impersonate-user"),
        seen.header_values("impersonate-uid"),
        seen.header_values("impersonate-group"),
    )
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(ToString::to_string).collect()
}

#[tokio::test]
async fn client_certificate_identity_is_impersonated_with_the_proxy_credentials() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let cert = app.user_cert("dave", Some("qa"));
    let seen = get_as(&world, &app, Some(&cert), None, &[]).await;
    assert_eq!(
        impersonated(&seen),
        (strings(&["dave"]), vec![], strings(&["qa"]))
    );
    assert_eq!(
        seen.header_values("authorization"),
        [format!("Bearer {PROXY_TOKEN}")]
    );
    // The x509 authenticator's credential id travels as an extra, as the apiserver records it.
    let credential =
        seen.header_values("impersonate-extra-authentication.kubernetes.io%2fcredential-id");
    assert!(
        matches!(credential.as_slice(), [id] if id.starts_with("X509SHA256=")),
        "{credential:?}"
    );
    assert!(
        seen.peer_certificates.is_some(),
        "the proxy's own certificate"
    );
}

#[tokio::test]
async fn client_certificate_identity_is_asserted_with_request_headers() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "requestheader").await;
    let cert = app.user_cert("dave", Some("qa"));
    let seen = get_as(&world, &app, Some(&cert), None, &[]).await;
    assert_eq!(seen.header_values("x-remote-user"), ["dave"]);
    assert_eq!(seen.header_values("x-remote-group"), ["qa"]);
    assert!(seen.header_values("impersonate-user").is_empty());
    assert!(
        seen.peer_certificates.is_some(),
        "the front-proxy certificate"
    );
}

/// Every `X-Remote-*` header the fake received, sorted.
fn remote_headers(seen: &Recorded) -> Vec<(String, String)> {
    let mut remote: Vec<(String, String)> = seen
        .headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-remote-"))
        .map(|(name, value)| (name.to_string(), value.to_str().expect("ascii").to_string()))
        .collect();
    remote.sort();
    remote
}

/// `headers` as owned pairs, sorted.
fn pairs(headers: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    pairs.sort();
    pairs
}

#[tokio::test]
async fn uid_and_extra_reach_the_upstream_in_requestheader_mode_and_forged_ones_do_not() {
    // The X-Remote-* the upstream receives are exactly the authenticated user's: UID and extra
    // from a TokenReview, from a front proxy's own X-Remote-* (re-asserted under the proxy's
    // certificate), and the x509 credential ID; whatever X-Remote-* a caller sends is dropped.
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "requestheader").await;
    let forged = [
        ("x-remote-user", "system:admin"),
        ("x-remote-uid", "forged-uid"),
        ("x-remote-group", "system:masters"),
        ("x-remote-extra-example.org%2fscopes", "forged"),
        ("x-remote-extra-forged", "yes"),
    ];
    let asserted = [
        ("x-remote-user", "erin"),
        ("x-remote-uid", "erin-uid"),
        ("x-remote-group", "g1"),
        ("x-remote-extra-example.org%2fteam", "blue"),
        ("x-remote-extra-scopes", "view"),
        ("x-remote-extra-scopes", "edit"),
    ];
    let front = app.front_proxy_cert();
    let dave = app.user_cert("dave", None);
    let fingerprint: String = sha2::Sha256::digest(dave.cert.as_ref())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let credential_id = format!("X509SHA256={fingerprint}");
    let bob = [
        ("x-remote-user", "bob"),
        ("x-remote-uid", "bob-uid"),
        ("x-remote-group", "team"),
        ("x-remote-extra-example.org%2fscopes", "read"),
        ("x-remote-extra-example.org%2fscopes", "list"),
    ];
    let dave_by_certificate = [
        ("x-remote-user", "dave"),
        (
            "x-remote-extra-authentication.kubernetes.io%2fcredential-id",
            &credential_id,
        ),
    ];
    let cases = [
        (
            "TokenReview user",
            None,
            Some(GOOD_TOKEN),
            &forged[..],
            &bob[..],
        ),
        ("front proxy", Some(&front), None, &asserted, &asserted),
        (
            "client certificate",
            Some(&dave),
            None,
            &forged,
            &dave_by_certificate,
        ),
    ];
    for (who, cert, token, sent, want) in cases {
        let seen = get_as(&world, &app, cert, token, sent).await;
        assert_eq!(remote_headers(&seen), pairs(want), "{who}");
    }
}

#[tokio::test]
async fn static_token_users_are_impersonated() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let seen = get_as(&world, &app, None, Some(STATIC_TOKEN), &[]).await;
    assert_eq!(
        impersonated(&seen),
        (
            strings(&["carol"]),
            strings(&["carol-uid"]),
            strings(&["ops", "dev"])
        )
    );
    assert_eq!(
        seen.header_values("authorization"),
        [format!("Bearer {PROXY_TOKEN}")],
        "the caller's token stays with the proxy"
    );
}

#[tokio::test]
async fn token_review_users_are_impersonated() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let seen = get_as(&world, &app, None, Some(GOOD_TOKEN), &[]).await;
    assert_eq!(
        impersonated(&seen),
        (strings(&["bob"]), strings(&["bob-uid"]), strings(&["team"]))
    );
    let reviews = world
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/apis/authentication.k8s.io/v1/tokenreviews")
        .count();
    assert_eq!(reviews, 1, "one TokenReview against the upstream");
}

#[tokio::test]
async fn front_proxy_identity_headers_are_trusted_from_the_requestheader_ca() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let front = app.front_proxy_cert();
    let headers = [
        ("x-remote-user", "erin"),
        ("x-remote-group", "g1"),
        ("x-remote-group", "g2"),
        ("x-remote-extra-scopes", "view"),
    ];
    let seen = get_as(&world, &app, Some(&front), None, &headers).await;
    assert_eq!(
        impersonated(&seen),
        (strings(&["erin"]), vec![], strings(&["g1", "g2"]))
    );
    assert_eq!(seen.header_values("impersonate-extra-scopes"), ["view"]);
    assert!(
        seen.header_values("x-remote-user").is_empty(),
        "the caller's X-Remote-* never goes upstream"
    );
}

#[tokio::test]
async fn anonymous_callers_are_forwarded_as_system_anonymous() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let seen = get_as(&world, &app, None, None, &[]).await;
    assert_eq!(
        impersonated(&seen),
        (strings(&["system:anonymous"]), vec![], vec![])
    );
}

#[tokio::test]
async fn passthrough_forwards_the_callers_token_and_nothing_else() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "passthrough").await;
    let seen = get_as(&world, &app, None, Some(STATIC_TOKEN), &[]).await;
    assert_eq!(
        seen.header_values("authorization"),
        [format!("Bearer {STATIC_TOKEN}")]
    );
    assert!(seen.peer_certificates.is_none());
    assert!(seen.header_values("impersonate-user").is_empty());
    assert!(seen.header_values("x-remote-user").is_empty());
}

#[tokio::test]
async fn a_bad_token_gets_401_and_never_reaches_the_upstream() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let response = app.client().get(POD, Some("not-a-token")).await;
    assert_status(response, 401, "Unauthorized").await;
    assert!(
        world.fake.requests().iter().all(|r| r.path != POD),
        "nothing but the TokenReview reaches the upstream"
    );
}

#[tokio::test]
async fn without_anonymous_auth_a_caller_without_credentials_gets_401() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .token_file()
        .flag("--anonymous-auth=false")
        .start()
        .await;
    let response = app.client().get(POD, None).await;
    assert_status(response, 401, "Unauthorized").await;
    assert!(fake.requests().iter().all(|r| r.path != POD));
}

#[tokio::test]
async fn forged_remote_headers_from_a_client_certificate_user_are_ignored_and_stripped() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "requestheader").await;
    let cert = app.user_cert("dave", None);
    let forged = [
        ("x-remote-user", "system:admin"),
        ("x-remote-group", "system:masters"),
    ];
    let seen = get_as(&world, &app, Some(&cert), None, &forged).await;
    assert_eq!(seen.header_values("x-remote-user"), ["dave"]);
    assert!(seen.header_values("x-remote-group").is_empty());
}

#[tokio::test]
async fn forged_remote_headers_from_an_anonymous_caller_are_stripped_in_passthrough() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "passthrough").await;
    let seen = get_as(
        &world,
        &app,
        None,
        None,
        &[("x-remote-user", "system:admin")],
    )
    .await;
    assert!(seen.header_values("x-remote-user").is_empty());
}

#[tokio::test]
async fn anonymous_callers_keep_system_unauthenticated_in_requestheader_mode() {
    // The upstream's AuthenticatedGroupAdder adds nothing for system:anonymous, so without the
    // group the caller would lose what RBAC grants system:unauthenticated (discovery, /healthz).
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "requestheader").await;
    let seen = get_as(&world, &app, None, None, &[]).await;
    assert_eq!(seen.header_values("x-remote-user"), ["system:anonymous"]);
    assert_eq!(
        seen.header_values("x-remote-group"),
        ["system:unauthenticated"]
    );
}

/// `apf_proxy_authentications_total{method,result}` of `app`.
fn authentications(app: &TestApp, method: &str, result: &str) -> f64 {
    let text = app.app.metrics().encode();
    let series =
        format!("apf_proxy_authentications_total{{method=\"{method}\",result=\"{result}\"}} ");
    metric_sum(&text, &series)
}

#[tokio::test]
async fn a_client_certificate_from_an_unknown_ca_is_left_to_the_authenticators() {
    // As the apiserver (tls.RequestClientCert): the handshake takes the certificate, the
    // requestheader and x509 authenticators each reject its chain, and the union goes on to the
    // tokens. Without a token that authenticates, 401: never anonymous, though anonymous
    // requests are enabled.
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let stranger = TestCa::new("stranger-ca").client_cert("mallory", None);
    let known = app.user_cert("dave", Some("qa"));
    let cases: [(&str, &Issued, Option<&str>, Option<&str>); 5] = [
        ("unknown CA alone", &stranger, None, None),
        (
            "unknown CA, bad token",
            &stranger,
            Some("not-a-token"),
            None,
        ),
        (
            "unknown CA, static token",
            &stranger,
            Some(STATIC_TOKEN),
            Some("carol"),
        ),
        (
            "unknown CA, TokenReview token",
            &stranger,
            Some(GOOD_TOKEN),
            Some("bob"),
        ),
        ("client CA", &known, None, Some("dave")),
    ];
    for (name, cert, token, user) in cases {
        let forwarded = || {
            world
                .fake
                .requests()
                .iter()
                .filter(|r| r.path == POD)
                .count()
        };
        let before = forwarded();
        for version in [Version::HTTP_11, Version::HTTP_2] {
            let response = app.client_with(Some(cert), version).get(POD, token).await;
            let Some(user) = user else {
                assert_status(response, 401, "Unauthorized").await;
                assert_eq!(
                    forwarded(),
                    before,
                    "{name} {version:?}: nothing reaches the upstream"
                );
                continue;
            };
            assert_eq!(response.status(), StatusCode::OK, "{name} {version:?}");
            let seen = world.fake.last_request_to(POD);
            assert_eq!(
                seen.header_values("impersonate-user"),
                [user],
                "{name} {version:?}"
            );
        }
    }
    // Both authenticators that saw the certificate said why, on each of the four 401s.
    for method in ["requestheader", "client_certificate"] {
        assert_eq!(authentications(&app, method, "error"), 4.0, "{method}");
    }
    assert_eq!(authentications(&app, "anonymous", "success"), 0.0);
    let seen = get_as(&world, &app, None, None, &[]).await;
    assert_eq!(
        seen.header_values("impersonate-user"),
        ["system:anonymous"],
        "anonymous requests are enabled"
    );
}

#[tokio::test]
async fn a_websocket_token_authenticates_and_stays_with_the_proxy_in_impersonate_mode() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let response = app.client().send(websocket_exec(STATIC_TOKEN)).await;
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    let seen = world
        .fake
        .last_request_to("/api/v1/namespaces/ns/pods/web/exec");
    assert_eq!(seen.header_values("impersonate-user"), ["carol"]);
    assert_eq!(
        seen.header_values("sec-websocket-protocol"),
        ["v5.channel.k8s.io"],
        "the caller's token must not reach the upstream"
    );
}

#[tokio::test]
async fn a_websocket_token_is_forwarded_in_passthrough_mode() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "passthrough").await;
    let response = app.client().send(websocket_exec(STATIC_TOKEN)).await;
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    let seen = world
        .fake
        .last_request_to("/api/v1/namespaces/ns/pods/web/exec");
    let protocols = seen.header_values("sec-websocket-protocol").join(",");
    assert!(
        protocols.contains("base64url.bearer.authorization.k8s.io."),
        "{protocols}"
    );
}

#[tokio::test]
async fn a_front_proxy_certificate_without_identity_headers_or_with_a_foreign_name_gets_401() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    // Without X-Remote-User the requestheader authenticator has no opinion, and the certificate
    // is not from the client CA.
    let front = app.front_proxy_cert();
    let response = app
        .client_with(Some(&front), Version::HTTP_11)
        .get(POD, None)
        .await;
    assert_status(response, 401, "Unauthorized").await;
    // A requestheader-CA certificate with a CN outside --requestheader-allowed-names.
    let other = app.front_proxy_ca.client_cert("someone-else", None);
    let mut get = request("GET", POD, None, Bytes::new());
    get.headers_mut()
        .insert("x-remote-user", "system:admin".parse().expect("value"));
    let response = app
        .client_with(Some(&other), Version::HTTP_11)
        .send(get)
        .await;
    assert_status(response, 401, "Unauthorized").await;
    assert!(world.fake.requests().iter().all(|r| r.path != POD));
}

fn client_ca_reloads(app: &TestApp, result: &str) -> usize {
    let text = app.app.metrics().encode();
    let want =
        format!("apf_proxy_certificate_reloads_total{{kind=\"client_ca\",result=\"{result}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&want))
        .map_or(0, |v| v.parse().expect("a count"))
}

fn certificate_expiry(app: &TestApp, kind: &str) -> Option<f64> {
    let text = app.app.metrics().encode();
    let want = format!("apf_proxy_certificate_expiration_timestamp_seconds{{kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&want))
        .map(|v| v.parse().expect("a timestamp"))
}

fn not_after(cert: &rustls_pki_types::CertificateDer<'_>) -> f64 {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).expect("x509");
    parsed.validity().not_after.timestamp() as f64
}

#[tokio::test]
async fn the_earliest_certificate_expiry_is_published_and_follows_a_rotation() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let serving = certificate_expiry(&app, "serving").expect("the serving certificate's expiry");
    assert!(serving > now, "{serving}");
    assert_eq!(
        certificate_expiry(&app, "client_ca"),
        Some(not_after(&app.client_ca.cert())),
        "the client CA's notAfter"
    );

    // A bundle of two CAs: the earlier expiry is the one that matters.
    let expiring = TestCa::valid_until("expiring-client-ca", Some((2031, 6, 1)));
    let bundle = format!("{}{}", app.client_ca.cert_pem(), expiring.cert_pem());
    std::fs::write(app.path("client-ca.crt"), bundle).expect("write the bundle");
    app.app.reloader().reload_client_cas();
    assert_eq!(client_ca_reloads(&app, "success"), 1);
    assert_eq!(
        certificate_expiry(&app, "client_ca"),
        Some(1_938_038_400.0),
        "2031-06-01T00:00:00Z"
    );
    // A broken bundle keeps the last good one, and so its expiry.
    std::fs::write(app.path("client-ca.crt"), "not a certificate").expect("corrupt");
    app.app.reloader().reload_client_cas();
    assert_eq!(certificate_expiry(&app, "client_ca"), Some(1_938_038_400.0));
}

#[tokio::test]
async fn a_rotated_client_ca_is_trusted_at_once_and_a_broken_one_keeps_the_last_good() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let old = app.user_cert("dave", None);
    let seen = get_as(&world, &app, Some(&old), None, &[]).await;
    assert_eq!(seen.header_values("impersonate-user"), ["dave"]);

    let rotated = TestCa::new("rotated-client-ca");
    rotated.write(app.dir.path(), "client-ca.crt");
    app.app.reloader().reload_client_cas();
    let new = rotated.client_cert("erin", None);
    let seen = get_as(&world, &app, Some(&new), None, &[]).await;
    assert_eq!(seen.header_values("impersonate-user"), ["erin"]);
    let stale = app.client_with(Some(&old), Version::HTTP_11);
    assert_eq!(
        stale.try_get(POD).await,
        Ok(StatusCode::UNAUTHORIZED),
        "the replaced CA is no longer trusted"
    );
    assert_eq!(client_ca_reloads(&app, "success"), 1);

    std::fs::write(app.path("client-ca.crt"), "not a certificate").expect("corrupt");
    app.app.reloader().reload_client_cas();
    assert_eq!(client_ca_reloads(&app, "failure"), 1);
    let seen = get_as(&world, &app, Some(&new), None, &[]).await;
    assert_eq!(
        seen.header_values("impersonate-user"),
        ["erin"],
        "last good CA"
    );
}

#[tokio::test]
async fn a_rotated_requestheader_ca_vouches_for_front_proxies_at_once() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let rotated = TestCa::new("rotated-front-proxy-ca");
    let front_proxy = rotated.client_cert(crate::support::app::FRONT_PROXY_CN, None);
    let client = app.client_with(Some(&front_proxy), Version::HTTP_11);
    assert_eq!(
        client.try_get(POD).await,
        Ok(StatusCode::UNAUTHORIZED),
        "not trusted before the rotation"
    );
    rotated.write(app.dir.path(), "front-proxy-ca.crt");
    app.app.reloader().reload_client_cas();
    let seen = get_as(
        &world,
        &app,
        Some(&front_proxy),
        None,
        &[("x-remote-user", "frank")],
    )
    .await;
    assert_eq!(seen.header_values("impersonate-user"), ["frank"]);
}
