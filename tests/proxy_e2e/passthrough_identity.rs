//! Passthrough: the caller is classified as the identity the upstream will authenticate — the
//! bearer token that travels — for every combination of credentials, over HTTP/1.1 and HTTP/2
//! (docs/authentication.md, "Passthrough: classified as the credential that travels").

use bytes::Bytes;
use http::{StatusCode, Version};

use crate::support::app::{assert_status, request, AppBuilder, TestApp, STATIC_TOKEN};
use crate::support::pki::Issued;
use crate::support::tls_world::{TlsWorld, GOOD_TOKEN};
use crate::{pf_headers, websocket_exec};

const POD: &str = "/api/v1/namespaces/ns/pods/web";

/// One FlowSchema per user, so that the FlowSchema UID the proxy answers with names who it
/// classified the request as; `system:masters` stays exempt (the mandatory FlowSchema).
const PER_USER: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: users, uid: users-pl-uid}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 10
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: exempt, uid: exempt-pl-uid}
spec:
  type: Exempt
  exempt: {nominalConcurrencyShares: 0, lendablePercent: 0}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: exempt, uid: exempt-fs-uid}
spec:
  priorityLevelConfiguration: {name: exempt}
  matchingPrecedence: 1
  rules:
  - subjects: [{kind: Group, group: {name: system:masters}}]
    resourceRules:
    - {verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}
    nonResourceRules:
    - {verbs: ['*'], nonResourceURLs: ['*']}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: carol, uid: carol-fs-uid}
spec:
  priorityLevelConfiguration: {name: users}
  matchingPrecedence: 100
  rules:
  - subjects: [{kind: User, user: {name: carol}}]
    resourceRules:
    - {verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: bob, uid: bob-fs-uid}
spec:
  priorityLevelConfiguration: {name: users}
  matchingPrecedence: 100
  rules:
  - subjects: [{kind: User, user: {name: bob}}]
    resourceRules:
    - {verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: anonymous, uid: anonymous-fs-uid}
spec:
  priorityLevelConfiguration: {name: users}
  matchingPrecedence: 100
  rules:
  - subjects: [{kind: User, user: {name: system:anonymous}}]
    resourceRules:
    - {verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: alice, uid: alice-fs-uid}
spec:
  priorityLevelConfiguration: {name: users}
  matchingPrecedence: 100
  rules:
  - subjects: [{kind: User, user: {name: alice}}]
    resourceRules:
    - {verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}
"#;

/// Every authenticator on, passthrough, forwarding to a TLS fake.
async fn passthrough_app(world: &TlsWorld, token_webhook: bool) -> TestApp {
    let mut builder = AppBuilder::for_world(world)
        .client_ca()
        .token_file()
        .requestheader()
        .config(PER_USER)
        .flag("--identity-forwarding=passthrough");
    if token_webhook {
        builder = builder.flag("--authentication-token-webhook");
    }
    builder.start().await
}

/// What a request should give: classified as the FlowSchema with this UID and forwarded with
/// this `Authorization`, or refused with 401 and a message holding this text.
enum Want {
    Classified {
        flow_schema: &'static str,
        authorization: String,
    },
    Refused(&'static str),
}

struct Case<'a> {
    name: &'static str,
    cert: Option<&'a Issued>,
    token: Option<&'static str>,
    headers: &'static [(&'static str, &'static str)],
    want: Want,
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn check(world: &TlsWorld, app: &TestApp, case: &Case<'_>) {
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let name = format!("{} over {version:?}", case.name);
        let forwarded = || {
            world
                .fake
                .requests()
                .iter()
                .filter(|r| r.path == POD)
                .count()
        };
        let before = forwarded();
        let mut get = request("GET", POD, case.token, Bytes::new());
        for (header, value) in case.headers {
            get.headers_mut()
                .append(*header, value.parse().expect("header value"));
        }
        let response = app.client_with(case.cert, version).send(get).await;
        match &case.want {
            Want::Classified {
                flow_schema,
                authorization,
            } => {
                assert_eq!(response.status(), StatusCode::OK, "{name}");
                assert_eq!(
                    pf_headers(&response).0.as_deref(),
                    Some(*flow_schema),
                    "{name}: classified as"
                );
                let seen = world.fake.last_request_to(POD);
                assert_eq!(
                    seen.header_values("authorization"),
                    [authorization.as_str()],
                    "{name}: the credential that travels"
                );
                assert!(seen.peer_certificates.is_none(), "{name}");
                assert!(seen.header_values("x-remote-user").is_empty(), "{name}");
                for (header, value) in case.headers {
                    if header.starts_with("impersonate-") {
                        assert_eq!(seen.header_values(header), [*value], "{name}");
                    }
                }
            }
            Want::Refused(why) => {
                let status = assert_status(response, 401, "Unauthorized").await;
                let message = status["message"].as_str().unwrap_or_default();
                assert!(message.contains(why), "{name}: {message}");
                assert_eq!(forwarded(), before, "{name}: nothing reaches the upstream");
            }
        }
    }
}

#[tokio::test]
async fn passthrough_classifies_every_combination_as_the_credential_that_travels() {
    let world = TlsWorld::start(false).await;
    let app = passthrough_app(&world, true).await;
    let admin = app.user_cert("admin", Some("system:masters"));
    let front = app.front_proxy_cert();
    let carol = || Want::Classified {
        flow_schema: "carol-fs-uid",
        authorization: bearer(STATIC_TOKEN),
    };
    let cases = [
        Case {
            name: "static token only",
            cert: None,
            token: Some(STATIC_TOKEN),
            headers: &[],
            want: carol(),
        },
        Case {
            name: "TokenReview token only",
            cert: None,
            token: Some(GOOD_TOKEN),
            headers: &[],
            want: Want::Classified {
                flow_schema: "bob-fs-uid",
                authorization: bearer(GOOD_TOKEN),
            },
        },
        Case {
            name: "system:masters certificate only",
            cert: Some(&admin),
            token: None,
            headers: &[],
            want: Want::Refused("a client certificate authenticates to this proxy only"),
        },
        Case {
            name: "system:masters certificate and carol's token",
            cert: Some(&admin),
            token: Some(STATIC_TOKEN),
            headers: &[],
            want: carol(),
        },
        Case {
            name: "system:masters certificate and bob's TokenReview token",
            cert: Some(&admin),
            token: Some(GOOD_TOKEN),
            headers: &[],
            want: Want::Classified {
                flow_schema: "bob-fs-uid",
                authorization: bearer(GOOD_TOKEN),
            },
        },
        Case {
            name: "system:masters certificate and a bad token",
            cert: Some(&admin),
            token: Some("not-a-token"),
            headers: &[],
            want: Want::Refused("Unauthorized"),
        },
        Case {
            name: "front-proxy headers only",
            cert: Some(&front),
            token: None,
            headers: &[
                ("x-remote-user", "system:admin"),
                ("x-remote-group", "system:masters"),
            ],
            want: Want::Refused("front-proxy identity headers authenticate to this proxy only"),
        },
        Case {
            name: "front-proxy headers and carol's token",
            cert: Some(&front),
            token: Some(STATIC_TOKEN),
            headers: &[
                ("x-remote-user", "system:admin"),
                ("x-remote-group", "system:masters"),
            ],
            want: carol(),
        },
        // Carol may impersonate (the fake's RBAC): classified as whom she impersonates, after the
        // proxy's SubjectAccessReviews for her, and forwarded untouched for the upstream to check
        // again.
        Case {
            name: "carol's token impersonating system:admin in system:masters",
            cert: None,
            token: Some(STATIC_TOKEN),
            headers: &[
                ("impersonate-user", "system:admin"),
                ("impersonate-group", "system:masters"),
            ],
            want: Want::Classified {
                flow_schema: "exempt-fs-uid",
                authorization: bearer(STATIC_TOKEN),
            },
        },
        Case {
            name: "system:masters certificate and carol's token impersonating alice",
            cert: Some(&admin),
            token: Some(STATIC_TOKEN),
            headers: &[("impersonate-user", "alice")],
            want: Want::Classified {
                flow_schema: "alice-fs-uid",
                authorization: bearer(STATIC_TOKEN),
            },
        },
        Case {
            name: "system:masters certificate impersonating system:admin",
            cert: Some(&admin),
            token: None,
            headers: &[("impersonate-user", "system:admin")],
            want: Want::Refused("a client certificate authenticates to this proxy only"),
        },
    ];
    for case in &cases {
        check(&world, &app, case).await;
    }
    // Nothing: anonymous, as the upstream sees it (no Authorization).
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let response = app.client_with(None, version).get(POD, None).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(pf_headers(&response).0.as_deref(), Some("anonymous-fs-uid"));
        assert!(world
            .fake
            .last_request_to(POD)
            .header_values("authorization")
            .is_empty());
    }
}

/// Without a token authenticator the proxy does not look at tokens: a caller with a
/// certificate and a token is classified as one with only the token (anonymous), never as its
/// certificate — and never exempt.
#[tokio::test]
async fn without_token_authenticators_a_certificate_with_a_token_is_classified_as_the_token_alone()
{
    let world = TlsWorld::start(false).await;
    let app = AppBuilder::for_world(&world)
        .client_ca()
        .config(PER_USER)
        .flag("--identity-forwarding=passthrough")
        .start()
        .await;
    let admin = app.user_cert("admin", Some("system:masters"));
    let cases = [
        Case {
            name: "token only",
            cert: None,
            token: Some("alice-token"),
            headers: &[],
            want: Want::Classified {
                flow_schema: "anonymous-fs-uid",
                authorization: bearer("alice-token"),
            },
        },
        Case {
            name: "system:masters certificate and a token",
            cert: Some(&admin),
            token: Some("alice-token"),
            headers: &[],
            want: Want::Classified {
                flow_schema: "anonymous-fs-uid",
                authorization: bearer("alice-token"),
            },
        },
        Case {
            name: "system:masters certificate only",
            cert: Some(&admin),
            token: None,
            headers: &[],
            want: Want::Refused("a client certificate authenticates to this proxy only"),
        },
    ];
    for case in &cases {
        check(&world, &app, case).await;
    }
}

/// A WebSocket exec whose token travels in the subprotocol: classified as that token, though
/// the caller also presents a `system:masters` certificate.
#[tokio::test]
async fn a_websocket_token_travels_and_classifies_a_certificate_caller() {
    let world = TlsWorld::start(false).await;
    let app = passthrough_app(&world, false).await;
    let admin = app.user_cert("admin", Some("system:masters"));
    let response = app
        .client_with(Some(&admin), Version::HTTP_11)
        .send(websocket_exec(STATIC_TOKEN))
        .await;
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    let seen = world
        .fake
        .last_request_to("/api/v1/namespaces/ns/pods/web/exec");
    let protocols = seen.header_values("sec-websocket-protocol").join(",");
    assert!(
        protocols.contains("base64url.bearer.authorization.k8s.io."),
        "{protocols}"
    );
    let counted = |method: &str| {
        crate::support::app::metric_sum(
            &app.app.metrics().encode(),
            &format!("apf_proxy_authentications_total{{method=\"{method}\",result=\"success\"}} "),
        )
    };
    assert_eq!(counted("token_file"), 1.0);
    assert_eq!(counted("client_certificate"), 0.0);
}
