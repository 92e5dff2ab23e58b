//! The secure admin listener (`--admin-secure`): HTTPS, the proxy's authenticators, and a
//! SubjectAccessReview against the fake apiserver for every path but the health endpoints.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use http::StatusCode;

use crate::support::app::{assert_status, metric_sum, within, AppBuilder, TestApp};
use crate::support::fake_apiserver::{FakeApiserver, FakeOptions, ReviewedUser};
use crate::support::read_body;

/// TokenReview tokens of the fake: `prom-token` is `prometheus` (allowed by its
/// SubjectAccessReviews), `bob-token` is `bob` (denied).
async fn fake() -> FakeApiserver {
    let user = |name: &str| ReviewedUser {
        username: name.into(),
        uid: format!("{name}-uid"),
        groups: vec![],
        extra: BTreeMap::new(),
    };
    FakeApiserver::start(FakeOptions {
        tokens: HashMap::from([
            ("prom-token".to_string(), user("prometheus")),
            ("bob-token".to_string(), user("bob")),
        ]),
        ..FakeOptions::default()
    })
    .await
}

async fn secure_app(upstream: &FakeApiserver) -> TestApp {
    AppBuilder::new(&upstream.url)
        .client_ca()
        .flag("--authentication-token-webhook")
        .flag("--admin-secure")
        .start()
        .await
}

async fn body_text(response: http::Response<hyper::body::Incoming>) -> String {
    let bytes = within("body", read_body(response)).await.expect("body");
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test]
async fn metrics_need_credentials_and_a_subject_access_review() {
    let upstream = fake().await;
    let app = secure_app(&upstream).await;
    let admin = app.admin_client(None);

    let anonymous = admin.get("/metrics", None).await;
    assert_status(anonymous, 401, "Unauthorized").await;

    let bob = admin.get("/metrics", Some("bob-token")).await;
    let status = assert_status(bob, 403, "Forbidden").await;
    assert_eq!(
        status["message"],
        r#"forbidden: User "bob" cannot get path "/metrics""#
    );

    let prometheus = admin.get("/metrics", Some("prom-token")).await;
    assert_eq!(prometheus.status(), StatusCode::OK);
    assert!(body_text(prometheus)
        .await
        .contains("apiserver_flowcontrol_nominal_limit_seats"));
    let reviews = upstream.access_reviews();
    assert_eq!(reviews.len(), 2, "one review for bob, one for prometheus");
    // The review carries the request's path and verb and the user the TokenReview gave.
    assert_eq!(reviews[0]["user"], "bob");
    assert_eq!(reviews[0]["uid"], "bob-uid");
    assert_eq!(
        reviews[0]["nonResourceAttributes"],
        serde_json::json!({"path": "/metrics", "verb": "get"})
    );

    // A second scrape is answered from the cache, without a review.
    let again = admin.get("/metrics", Some("prom-token")).await;
    let text = body_text(again).await;
    assert_eq!(upstream.access_reviews().len(), 2);
    // The gate counts before the endpoint renders: this scrape already shows itself.
    assert_eq!(
        metric_sum(
            &text,
            r#"apf_proxy_admin_authorizations_total{cached="true",decision="allowed"}"#
        ),
        1.0
    );
    assert_eq!(
        metric_sum(
            &text,
            r#"apf_proxy_admin_authentications_total{result="failure"}"#
        ),
        1.0
    );
}

#[tokio::test]
async fn debug_dumps_are_authorized_like_metrics() {
    let upstream = fake().await;
    let app = secure_app(&upstream).await;
    let admin = app.admin_client(None);
    let path = "/debug/api_priority_and_fairness/dump_requests";
    assert_status(admin.get(path, None).await, 401, "Unauthorized").await;
    assert_status(admin.get(path, Some("bob-token")).await, 403, "Forbidden").await;
    let allowed = admin.get(path, Some("prom-token")).await;
    assert_eq!(allowed.status(), StatusCode::OK);
}

#[tokio::test]
async fn client_certificates_authenticate_admin_callers() {
    let upstream = fake().await;
    let app = secure_app(&upstream).await;
    let monitoring = app.user_cert("scraper", Some("system:monitoring"));
    let admin = app.admin_client(Some(&monitoring));
    assert_eq!(admin.get("/metrics", None).await.status(), StatusCode::OK);
    let other = app.user_cert("eve", Some("dev"));
    let admin = app.admin_client(Some(&other));
    assert_status(admin.get("/metrics", None).await, 403, "Forbidden").await;
}

#[tokio::test]
async fn a_failing_review_denies_and_probes_still_answer() {
    let upstream = fake().await;
    let app = secure_app(&upstream).await;
    let admin = app.admin_client(None);
    upstream.fail_access_reviews(true);
    assert_status(
        admin.get("/metrics", Some("prom-token")).await,
        403,
        "Forbidden",
    )
    .await;
    // Errors are not cached: once the upstream answers again, so does the admin listener.
    upstream.fail_access_reviews(false);
    assert_eq!(
        admin.get("/metrics", Some("prom-token")).await.status(),
        StatusCode::OK
    );
    upstream.fail_access_reviews(true);
    for probe in ["/healthz", "/livez", "/readyz?verbose", "/healthz/ping"] {
        let response = admin.get(probe, None).await;
        assert_ne!(response.status(), StatusCode::UNAUTHORIZED, "{probe}");
        assert_ne!(response.status(), StatusCode::FORBIDDEN, "{probe}");
    }
    assert_eq!(admin.get("/healthz", None).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_admin_listener_serves_its_own_certificate_and_reloads_it() {
    use crate::support::pki::TestCa;
    let upstream = fake().await;
    let ca = TestCa::new("admin-ca");
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = ca.server_cert().write(dir.path(), "admin");
    let app = AppBuilder::new(&upstream.url)
        .flag("--authentication-token-webhook")
        .flag("--admin-secure")
        .flag(format!("--admin-tls-cert-file={}", cert.display()))
        .flag(format!("--admin-tls-private-key-file={}", key.display()))
        .start()
        .await;
    let first = admin_leaf(&app, &ca).await;
    // Rotate: a new certificate in the same files, then the reloader's pass.
    ca.server_cert().write(dir.path(), "admin");
    app.app.reloader().reload_tls();
    let second = admin_leaf(&app, &ca).await;
    assert_ne!(first, second, "new handshakes get the new certificate");
    // The secure port keeps its own (self-signed) certificate.
    assert_eq!(
        app.client().get("/version", None).await.status(),
        StatusCode::OK
    );
}

/// The leaf certificate the admin listener presents, verified against `ca`.
async fn admin_leaf(app: &TestApp, ca: &crate::support::pki::TestCa) -> Vec<u8> {
    use std::sync::Arc;
    use tokio_rustls::rustls::pki_types::ServerName;
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    roots.add(ca.cert()).expect("root");
    let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    within("admin handshake", async {
        let tcp = tokio::net::TcpStream::connect(app.app.running().admin_addr())
            .await
            .expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let tls = connector.connect(name, tcp).await.expect("handshake");
        let certs = tls.get_ref().1.peer_certificates().expect("certs");
        Bytes::copy_from_slice(certs[0].as_ref()).to_vec()
    })
    .await
}
