//! Each identity forwarding mode against a TLS fake apiserver that verifies client
//! certificates: which credentials and identity headers reach the upstream, and TokenReview.

mod support;

use bytes::Bytes;
use http::{Request, StatusCode, Version};
use kube_apf_proxy::auth::TokenReviewTransport;
use kube_apf_proxy::proxy::{Forwarder, ForwarderConfigError, IdentityForwarding};
use kube_apf_proxy::upstream::{UpstreamClient, UpstreamConfig};
use support::fake_apiserver::FakeApiserver;
use support::tls_world::{TlsWorld, GOOD_TOKEN, PROXY_TOKEN};
use support::{body, forwarder_config, get, h2c_client, http1_client, REQUEST_TIMEOUT};

#[tokio::test]
async fn passthrough_sends_the_callers_token_and_no_proxy_certificate() {
    let world = TlsWorld::start(false).await;
    let proxy = world.proxy(IdentityForwarding::Passthrough).await;
    let response = http1_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods")))
        .await
        .expect("list");
    assert_eq!(response.status(), StatusCode::OK);
    let seen = world.fake.last_request();
    assert_eq!(seen.header_values("authorization"), ["Bearer caller-token"]);
    assert!(
        seen.peer_certificates.is_none(),
        "passthrough must not present the proxy's cert"
    );
    assert!(seen.header_values("impersonate-user").is_empty());
}

#[tokio::test]
async fn impersonate_mode_sends_impersonation_headers_with_proxy_credentials() {
    let world = TlsWorld::start(false).await;
    let proxy = world.proxy(IdentityForwarding::Impersonate).await;
    let response = http1_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods")))
        .await
        .expect("list");
    assert_eq!(response.status(), StatusCode::OK);
    let seen = world.fake.last_request();
    assert_eq!(
        seen.header_values("authorization"),
        [format!("Bearer {PROXY_TOKEN}")]
    );
    assert!(seen.peer_certificates.is_some());
    assert_eq!(seen.header_values("impersonate-user"), ["alice"]);
    assert_eq!(seen.header_values("impersonate-uid"), ["alice-uid"]);
    assert_eq!(seen.header_values("impersonate-group"), ["dev"]);
    assert_eq!(
        seen.header_values("impersonate-extra-example.org%2fteam"),
        ["blue"]
    );
}

#[tokio::test]
async fn a_callers_own_impersonation_headers_give_way_to_the_identity_the_pipeline_hands_over() {
    // The pipeline authorizes `kubectl --as` and hands the forwarder the effective identity
    // (here `alice`); the caller's own headers travel in passthrough mode only
    // (tests/proxy_e2e/impersonation.rs covers the whole path).
    let world = TlsWorld::start(false).await;
    for mode in [
        IdentityForwarding::Passthrough,
        IdentityForwarding::Impersonate,
        IdentityForwarding::Requestheader,
    ] {
        let proxy = world.proxy(mode).await;
        let request = Request::get(proxy.url("/api/v1/namespaces/ns/pods"))
            .header("impersonate-user", "system:admin")
            .header("impersonate-group", "system:masters")
            .body(body(Bytes::new()))
            .expect("request");
        let response = http1_client().request(request).await.expect("list");
        assert_eq!(response.status(), StatusCode::OK, "{mode:?}");
        let seen = world.fake.last_request();
        let (user, group) = match mode {
            IdentityForwarding::Passthrough => (vec!["system:admin"], vec!["system:masters"]),
            IdentityForwarding::Impersonate => (vec!["alice"], vec!["dev"]),
            IdentityForwarding::Requestheader => (vec![], vec![]),
        };
        assert_eq!(seen.header_values("impersonate-user"), user, "{mode:?}");
        assert_eq!(seen.header_values("impersonate-group"), group, "{mode:?}");
        if mode == IdentityForwarding::Requestheader {
            assert_eq!(seen.header_values("x-remote-user"), ["alice"]);
        }
    }
}

#[tokio::test]
async fn requestheader_mode_sends_x_remote_headers_with_the_front_proxy_certificate() {
    let world = TlsWorld::start(false).await;
    let proxy = world.proxy(IdentityForwarding::Requestheader).await;
    let response = http1_client()
        .request(get(&proxy.url("/api/v1/namespaces/ns/pods")))
        .await
        .expect("list");
    assert_eq!(response.status(), StatusCode::OK);
    let seen = world.fake.last_request();
    assert!(seen.header_values("authorization").is_empty());
    assert_eq!(seen.peer_certificates.as_ref().map(Vec::len), Some(1));
    assert_eq!(seen.header_values("x-remote-user"), ["alice"]);
    assert_eq!(seen.header_values("x-remote-uid"), ["alice-uid"]);
    assert_eq!(seen.header_values("x-remote-group"), ["dev"]);
    assert_eq!(
        seen.header_values("x-remote-extra-example.org%2fteam"),
        ["blue"]
    );
}

#[tokio::test]
async fn modes_refuse_to_start_without_the_credentials_they_need() {
    let fake = FakeApiserver::start_plain().await;
    let client = UpstreamClient::new(
        UpstreamConfig {
            upstream: Some(fake.url.clone()),
            ..UpstreamConfig::default()
        }
        .resolve()
        .expect("resolve"),
    )
    .expect("client");
    let cases = [
        (
            IdentityForwarding::Impersonate,
            ForwarderConfigError::ImpersonateNeedsCredentials,
        ),
        (
            IdentityForwarding::Requestheader,
            ForwarderConfigError::RequestheaderNeedsClientCertificate,
        ),
    ];
    for (mode, want) in cases {
        let got = Forwarder::new(client.clone(), forwarder_config(mode, REQUEST_TIMEOUT));
        assert_eq!(got.err(), Some(want));
    }
}

#[tokio::test]
async fn an_ordinary_request_keeps_its_callers_protocol_when_the_upstream_offers_http2() {
    let world = TlsWorld::start(true).await;
    let proxy = world.proxy(IdentityForwarding::Passthrough).await;
    let pod = proxy.url("/api/v1/namespaces/ns/pods/web");
    for client in [http1_client(), h2c_client(), http1_client(), h2c_client()] {
        let response = client.request(get(&pod)).await.expect("get");
        assert_eq!(response.status(), StatusCode::OK);
    }
    let seen: Vec<_> = world.fake.requests().iter().map(|r| r.version).collect();
    assert_eq!(
        seen,
        [
            Version::HTTP_11,
            Version::HTTP_2,
            Version::HTTP_11,
            Version::HTTP_2
        ]
    );
}

#[tokio::test]
async fn watches_are_multiplexed_over_an_http2_connection_of_their_own() {
    let world = TlsWorld::start(true).await;
    let proxy = world.proxy(IdentityForwarding::Passthrough).await;
    let pod = proxy.url("/api/v1/namespaces/ns/pods/web");
    let response = http1_client().request(get(&pod)).await.expect("get");
    assert_eq!(response.status(), StatusCode::OK);
    let url = proxy.url("/api/v1/namespaces/ns/pods?watch=true");
    let mut watches = Vec::new();
    for _ in 0..2 {
        let response = tokio::spawn(http1_client().request(get(&url)));
        let events = world.fake.next_watch().await;
        let response = response.await.expect("join").expect("watch");
        assert_eq!(response.status(), StatusCode::OK);
        watches.push((events, response));
    }
    let response = http1_client().request(get(&pod)).await.expect("get");
    assert_eq!(response.status(), StatusCode::OK);
    // An HTTP/1.1 caller's GETs keep HTTP/1.1; its watches are multiplexed all the same.
    let seen: Vec<_> = world.fake.requests().iter().map(|r| r.version).collect();
    assert_eq!(
        seen,
        [
            Version::HTTP_11,
            Version::HTTP_2,
            Version::HTTP_2,
            Version::HTTP_11
        ]
    );
    assert_eq!(
        world.fake.connections(),
        2,
        "one HTTP/1.1 connection for the GETs, one HTTP/2 connection for both watches"
    );
}

#[tokio::test]
async fn token_review_goes_upstream_with_the_proxys_credentials() {
    let world = TlsWorld::start(true).await;
    let review = serde_json::json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview", "spec": {"token": GOOD_TOKEN}});
    let (status, answer) = world
        .client()
        .review(Bytes::from(review.to_string()))
        .await
        .expect("review");
    assert_eq!(status, StatusCode::CREATED);
    let answer: serde_json::Value = serde_json::from_slice(&answer).expect("json");
    assert_eq!(answer["status"]["user"]["username"], "bob");
    let seen = world.fake.last_request();
    assert_eq!(seen.path, "/apis/authentication.k8s.io/v1/tokenreviews");
    assert_eq!(
        seen.header_values("authorization"),
        [format!("Bearer {PROXY_TOKEN}")]
    );
    assert!(seen.peer_certificates.is_some());
}
