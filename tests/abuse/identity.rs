//! Forged `X-Remote-*` / `Impersonate-*` from callers the proxy does not trust as a front proxy
//! or to impersonate: in every identity-forwarding mode the upstream never sees them and nothing
//! is classified as the forged identity (a forged `system:masters` never reaches `exempt`).

use bytes::Bytes;
use http::Version;

use crate::support::app::{request, AppBuilder, TestApp, STATIC_TOKEN};
use crate::support::pki::Issued;
use crate::support::tls_world::TlsWorld;
use crate::{flow_schema, LEVELS};

const POD: &str = "/api/v1/namespaces/ns/pods/web";

const FORGED: [(&str, &str); 6] = [
    ("x-remote-user", "system:admin"),
    ("x-remote-group", "system:masters"),
    ("x-remote-extra-scopes", "all"),
    ("impersonate-user", "system:admin"),
    ("impersonate-group", "system:masters"),
    ("impersonate-extra-scopes", "all"),
];

async fn app_for(world: &TlsWorld, mode: &str) -> TestApp {
    // The static token is erin's: unlike carol, the fake's RBAC lets her impersonate no one.
    AppBuilder::for_world(world)
        .client_ca()
        .token_file_with(&format!("{STATIC_TOKEN},erin,erin-uid,\"ops,dev\"\n"))
        .requestheader()
        .config(LEVELS)
        .flag(format!("--identity-forwarding={mode}"))
        .start()
        .await
}

/// Sends GET POD with every forged header; returns (status, FlowSchema UID).
async fn forge(app: &TestApp, cert: Option<&Issued>, token: Option<&str>) -> (u16, String) {
    let mut get = request("GET", POD, token, Bytes::new());
    for (name, value) in FORGED {
        get.headers_mut()
            .append(name, value.parse().expect("header value"));
    }
    let response = app.client_with(cert, Version::HTTP_11).send(get).await;
    (response.status().as_u16(), flow_schema(&response))
}

/// The forged headers that reached the upstream in any request to POD.
fn forged_upstream(world: &TlsWorld) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    for recorded in world.fake.requests().iter().filter(|r| r.path == POD) {
        for (name, forged) in FORGED {
            for value in recorded.header_values(name) {
                if value == forged {
                    seen.push((name.to_string(), value));
                }
            }
        }
    }
    seen
}

#[tokio::test]
async fn forged_identity_headers_never_reach_exempt_or_the_upstream_in_any_mode() {
    // Callers: a client certificate from the client CA, a static token, and nobody (anonymous).
    // X-Remote-* is stripped in every mode. A caller's own Impersonate-* is authorized by
    // SubjectAccessReview for the authenticated caller in every mode (auth::impersonation), and
    // none of these may impersonate: 403 before flow control, never exempt. In passthrough the
    // certificate caller is refused (401) first: its certificate cannot reach the upstream.
    for mode in ["impersonate", "requestheader", "passthrough"] {
        let world = TlsWorld::start(false).await;
        let app = app_for(&world, mode).await;
        let cert = app.user_cert("dave", Some("dev"));
        let callers: [(&str, Option<&Issued>, Option<&str>); 3] = [
            ("client certificate", Some(&cert), None),
            ("static token", None, Some(STATIC_TOKEN)),
            ("anonymous", None, None),
        ];
        for (who, cert, token) in callers {
            let (status, schema) = forge(&app, cert, token).await;
            assert_ne!(schema, "exempt-fs-uid", "{mode}/{who}: status {status}");
            // In passthrough a certificate cannot travel: refused with 401 before a seat.
            let refused = if mode == "passthrough" && cert.is_some() {
                401
            } else {
                403
            };
            assert_eq!(status, refused, "{mode}/{who}");
        }
        // The metrics agree: nothing was dispatched in the exempt schema.
        let metrics = app.app.metrics().encode();
        let dispatched_in = |schema: &str| {
            metrics.lines().any(|l| {
                l.starts_with("apiserver_flowcontrol_dispatched_requests_total")
                    && l.contains(&format!("flow_schema=\"{schema}\""))
            })
        };
        // The 403 comes before flow control (as the apiserver's impersonation filter): no seat
        // was taken.
        assert!(!dispatched_in("tenants"), "{mode}");
        assert!(
            !metrics.lines().any(|l| l
                .starts_with("apiserver_flowcontrol_dispatched_requests_total")
                && l.contains("flow_schema=\"exempt\"")),
            "{mode}: {metrics}"
        );
        assert_eq!(forged_upstream(&world), vec![], "{mode}");
    }
}

#[tokio::test]
async fn a_client_ca_certificate_forging_front_proxy_headers_is_classified_as_itself() {
    // The certificate is valid for the client CA but not issued by the requestheader CA: its
    // X-Remote-* headers are not front-proxy assertions (the apiserver's requestheader
    // authenticator requires its own CA and allowed names), so the caller is its CN.
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let cert = app.user_cert("front-proxy", None);
    let mut get = request("GET", POD, None, Bytes::new());
    get.headers_mut()
        .append("x-remote-user", "system:admin".parse().expect("value"));
    get.headers_mut()
        .append("x-remote-group", "system:masters".parse().expect("value"));
    let response = app
        .client_with(Some(&cert), Version::HTTP_11)
        .send(get)
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(flow_schema(&response), "tenants-fs-uid");
    let seen = world.fake.last_request_to(POD);
    assert_eq!(seen.header_values("impersonate-user"), ["front-proxy"]);
    assert!(seen
        .header_values("impersonate-group")
        .iter()
        .all(|g| g != "system:masters"));
    assert!(seen.header_values("x-remote-user").is_empty());
    assert!(seen.header_values("x-remote-group").is_empty());
}
