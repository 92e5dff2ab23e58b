//! Reaching the upstream from a kubeconfig (inline CA and token, insecure-skip-tls-verify, and a
//! certificate that does not verify) and from a pod's service account (in-cluster).

mod support;

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use kube_apf_proxy::auth::{Identity, TokenReviewTransport, TransportError};
use kube_apf_proxy::body::empty_body;
use kube_apf_proxy::proxy::{ForgeableHeaders, Forwarder, ForwarderConfig, IdentityForwarding};
use kube_apf_proxy::upstream::{InClusterEnv, Route, UpstreamAuth, UpstreamClient, UpstreamConfig};
use support::fake_apiserver::{FakeApiserver, FakeOptions, FakeTls};
use support::pki::TestCa;
use support::{body, http1_client, read_json, TestProxy};

fn kubeconfig(server: &str, cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster}users:\n- name: u\n  user:\n{user}contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n"
    )
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

async fn tls_fake(ca: &TestCa) -> FakeApiserver {
    FakeApiserver::start(FakeOptions {
        tls: Some(FakeTls {
            serving: ca.server_cert(),
            client_ca: None,
            h2: true,
        }),
        ..Default::default()
    })
    .await
}

/// The upstream client a proxy configured by `kubeconfig_text` uses.
fn client_for(kubeconfig_text: &str) -> UpstreamClient {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig_text).expect("write");
    let resolved = UpstreamConfig {
        kubeconfig: Some(path),
        ..UpstreamConfig::default()
    }
    .resolve()
    .expect("resolve");
    UpstreamClient::new(resolved).expect("client")
}

/// Forwards one GET in impersonate mode through a proxy configured by `kubeconfig`.
async fn get_through(kubeconfig_text: &str) -> (http::StatusCode, serde_json::Value) {
    get_with(client_for(kubeconfig_text)).await
}

/// Forwards one GET for `carol` in impersonate mode through a proxy whose upstream client is
/// `client`.
async fn get_with(client: UpstreamClient) -> (http::StatusCode, serde_json::Value) {
    let config = ForwarderConfig {
        mode: IdentityForwarding::Impersonate,
        request_timeout: Duration::from_secs(60),
        forgeable: ForgeableHeaders::default(),
    };
    let forwarder = Forwarder::new(client, config).expect("forwarder");
    let identity = Identity::authenticated("carol", "", vec![]);
    let proxy = TestProxy::start(forwarder, identity).await;
    let request = Request::get(proxy.url("/api/v1/namespaces/ns/pods/web"))
        .body(body(Bytes::new()))
        .expect("request");
    let response = http1_client().request(request).await.expect("response");
    let status = response.status();
    (status, read_json(response).await)
}

/// The GET of [`get_with`] was answered by `fake`, which saw the proxy's `token` and `carol`.
fn assert_reached_as_carol(
    fake: &FakeApiserver,
    status: StatusCode,
    pod: &serde_json::Value,
    token: &str,
) {
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pod["metadata"]["name"], "web");
    let seen = fake.last_request();
    assert_eq!(
        seen.header_values("authorization"),
        [format!("Bearer {token}")]
    );
    assert_eq!(seen.header_values("impersonate-user"), ["carol"]);
}

/// GETs a pod with the proxy's credentials, sent by `route`.
async fn get_pod(client: &UpstreamClient, route: Route) {
    let uri = client
        .uri_for("/api/v1/namespaces/ns/pods/web")
        .expect("uri");
    let request = Request::get(uri).body(empty_body()).expect("request");
    let response = client
        .send(request, UpstreamAuth::Proxy, route)
        .await
        .expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    response.into_body().collect().await.expect("body");
}

#[tokio::test]
async fn short_and_long_running_requests_multiplex_on_http2_connections_of_their_own() {
    let ca = TestCa::new("kube-ca");
    let fake = tls_fake(&ca).await;
    let client = client_for(&kubeconfig(
        &fake.url,
        &format!("    certificate-authority-data: {}\n", b64(&ca.cert_pem())),
        "    token: t\n",
    ));

    // A burst of first requests makes one connection, not one each; later ones reuse it.
    futures_util::future::join_all((0..20).map(|_| get_pod(&client, Route::Short))).await;
    for _ in 0..5 {
        get_pod(&client, Route::Short).await;
    }
    let requests = fake.requests();
    assert_eq!(requests.len(), 25);
    assert!(requests.iter().all(|r| r.version == http::Version::HTTP_2));
    assert_eq!(fake.connections(), 1);

    // Long-running requests share an HTTP/2 connection of their own.
    get_pod(&client, Route::LongRunning).await;
    get_pod(&client, Route::LongRunning).await;
    assert_eq!(fake.last_request().version, http::Version::HTTP_2);
    assert_eq!(fake.connections(), 2);

    // Upgrades (exec, attach, port-forward) get HTTP/1.1 connections, reused while not upgraded.
    get_pod(&client, Route::Upgrade).await;
    get_pod(&client, Route::Upgrade).await;
    assert_eq!(fake.last_request().version, http::Version::HTTP_11);
    assert_eq!(fake.connections(), 3);
}

#[tokio::test]
async fn kubeconfig_with_inline_ca_and_token_reaches_the_upstream() {
    let ca = TestCa::new("kube-ca");
    let fake = tls_fake(&ca).await;
    let text = kubeconfig(
        &fake.url,
        &format!("    certificate-authority-data: {}\n", b64(&ca.cert_pem())),
        "    token: kubeconfig-token\n",
    );
    let (status, pod) = get_through(&text).await;
    assert_reached_as_carol(&fake, status, &pod, "kubeconfig-token");
}

/// In a pod: `KUBERNETES_SERVICE_HOST`/`_PORT` name the server, the service account's `ca.crt`
/// verifies it and its `token` is the proxy's credential, as client-go's `InClusterConfig` does.
#[tokio::test]
async fn in_cluster_the_service_account_reaches_the_upstream() {
    let ca = TestCa::new("kube-ca");
    let fake = tls_fake(&ca).await;
    let account = tempfile::tempdir().expect("tempdir");
    std::fs::write(account.path().join("ca.crt"), ca.cert_pem()).expect("ca.crt");
    std::fs::write(account.path().join("token"), "service-account-token\n").expect("token");
    let authority = fake.url.strip_prefix("https://").expect("an https URL");
    let (host, port) = authority.rsplit_once(':').expect("host:port");
    let env = InClusterEnv {
        host: Some(host.to_owned()),
        port: Some(port.to_owned()),
        service_account_dir: account.path().to_owned(),
    };
    let resolved = UpstreamConfig::default()
        .resolve_with(&env)
        .expect("in-cluster configuration");
    let (status, pod) = get_with(UpstreamClient::new(resolved).expect("client")).await;
    assert_reached_as_carol(&fake, status, &pod, "service-account-token");

    // A service account whose CA is not the server's: the upstream is refused, never reached.
    let other = TestCa::new("another-ca");
    std::fs::write(account.path().join("ca.crt"), other.cert_pem()).expect("ca.crt");
    let resolved = UpstreamConfig::default()
        .resolve_with(&env)
        .expect("in-cluster configuration");
    let before = fake.requests().len();
    let (status, _) = get_with(UpstreamClient::new(resolved).expect("client")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(fake.requests().len(), before);
}

#[tokio::test]
async fn insecure_skip_tls_verify_accepts_an_unknown_server_certificate() {
    let fake = tls_fake(&TestCa::new("unknown-ca")).await;
    let text = kubeconfig(
        &fake.url,
        "    insecure-skip-tls-verify: true\n",
        "    token: t\n",
    );
    let (status, _) = get_through(&text).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_is_refused_with_a_503_status() {
    let fake = tls_fake(&TestCa::new("real-ca")).await;
    let other = TestCa::new("other-ca");
    let text = kubeconfig(
        &fake.url,
        &format!(
            "    certificate-authority-data: {}\n",
            b64(&other.cert_pem())
        ),
        "    token: t\n",
    );
    let (status, body) = get_through(&text).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["reason"], "ServiceUnavailable");
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn a_token_review_that_cannot_connect_is_a_retryable_connection_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let resolved = UpstreamConfig {
        upstream: Some(format!("http://{addr}")),
        ..UpstreamConfig::default()
    }
    .resolve()
    .expect("resolve");
    let client = UpstreamClient::new(resolved).expect("client");
    let got = client.review(Bytes::from_static(b"{}")).await;
    assert!(matches!(got, Err(TransportError::Connection(_))), "{got:?}");
}
