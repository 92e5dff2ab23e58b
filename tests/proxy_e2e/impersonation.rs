//! A caller's own `Impersonate-*` headers (`kubectl --as`, `--as-group`) in every forwarding
//! mode: authorized by SubjectAccessReviews for the caller (the fake lets user `carol` impersonate
//! and no one else), classified as the impersonated user, and forwarded as the mode forwards
//! (docs/authentication.md, "A caller's own Impersonate-* headers").

use bytes::Bytes;
use http::{StatusCode, Version};
use kube_apf_proxy::config::model::derived_uid;

use crate::support::app::{request, AppBuilder, TestApp, STATIC_TOKEN};
use crate::support::fake_apiserver::Recorded;
use crate::support::tls_world::{TlsWorld, PROXY_TOKEN};
use crate::{assert_status, pf_headers};

const POD: &str = "/api/v1/namespaces/ns/pods/web";

/// `kubectl --as system:admin --as-group system:masters --as-group dev --as-uid admin-uid`, plus
/// an extra.
const AS_ADMIN: [(&str, &str); 5] = [
    ("impersonate-user", "system:admin"),
    ("impersonate-uid", "admin-uid"),
    ("impersonate-group", "system:masters"),
    ("impersonate-group", "dev"),
    ("impersonate-extra-example.org%2fscopes", "all"),
];

async fn app_for(world: &TlsWorld, mode: &str) -> TestApp {
    AppBuilder::for_world(world)
        .client_ca()
        .token_file()
        .flag(format!("--identity-forwarding={mode}"))
        .start()
        .await
}

fn get_with(
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> http::Request<crate::support::TestBody> {
    let mut get = request("GET", POD, token, Bytes::new());
    for (name, value) in headers {
        get.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            value.parse().expect("header value"),
        );
    }
    get
}

/// Carol's request with `headers`, over HTTP/1.1 and HTTP/2: the FlowSchema UID the proxy
/// answered with, and the fake's record of it.
async fn as_carol(
    world: &TlsWorld,
    app: &TestApp,
    headers: &[(&str, &str)],
) -> Vec<(Option<String>, Recorded)> {
    let mut out = Vec::new();
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let response = app
            .client_with(None, version)
            .send(get_with(Some(STATIC_TOKEN), headers))
            .await;
        assert_eq!(response.status(), StatusCode::OK, "{version:?}");
        out.push((pf_headers(&response).0, world.fake.last_request_to(POD)));
    }
    out
}

/// The impersonation reviews the fake answered: (resource, subresource, namespace, name).
fn impersonation_reviews(world: &TlsWorld) -> Vec<(String, String, String, String, String)> {
    let field = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    world
        .fake
        .access_reviews()
        .iter()
        .filter(|spec| spec["resourceAttributes"]["verb"] == "impersonate")
        .map(|spec| {
            let attrs = &spec["resourceAttributes"];
            (
                field(spec, "user"),
                field(attrs, "resource"),
                field(attrs, "subresource"),
                field(attrs, "namespace"),
                field(attrs, "name"),
            )
        })
        .collect()
}

fn review(
    user: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> (String, String, String, String, String) {
    (
        user.into(),
        resource.into(),
        subresource.into(),
        namespace.into(),
        name.into(),
    )
}

#[tokio::test]
async fn impersonate_mode_sends_the_effective_identity_with_the_proxys_credentials() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    for (schema, seen) in as_carol(&world, &app, &AS_ADMIN).await {
        assert_eq!(
            seen.header_values("authorization"),
            [format!("Bearer {PROXY_TOKEN}")]
        );
        assert_eq!(seen.header_values("impersonate-user"), ["system:admin"]);
        assert_eq!(seen.header_values("impersonate-uid"), ["admin-uid"]);
        assert_eq!(
            seen.header_values("impersonate-group"),
            ["system:masters", "dev"]
        );
        assert_eq!(
            seen.header_values("impersonate-extra-example.org%2fscopes"),
            ["all"]
        );
        // Classified as system:admin in system:masters (the bootstrap `exempt`), not as carol.
        assert_eq!(schema, Some(derived_uid("FlowSchema", "exempt")));
    }
    // One review per attribute, for carol, in the apiserver's order; the second request's
    // answers come from the cache.
    assert_eq!(
        impersonation_reviews(&world),
        [
            review("carol", "users", "", "", "system:admin"),
            review("carol", "uids", "", "", "admin-uid"),
            review("carol", "groups", "", "", "system:masters"),
            review("carol", "groups", "", "", "dev"),
            review("carol", "userextras", "example.org/scopes", "", "all"),
        ]
    );
}

#[tokio::test]
async fn requestheader_mode_sends_the_effective_identity_in_x_remote_headers() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "requestheader").await;
    let as_sa = [("impersonate-user", "system:serviceaccount:team-a:builder")];
    for (schema, seen) in as_carol(&world, &app, &as_sa).await {
        assert!(seen.header_values("authorization").is_empty());
        assert!(seen.header_values("impersonate-user").is_empty());
        assert_eq!(
            seen.header_values("x-remote-user"),
            ["system:serviceaccount:team-a:builder"]
        );
        // A service account's groups, as the apiserver gives an impersonated one.
        assert_eq!(
            seen.header_values("x-remote-group"),
            ["system:serviceaccounts", "system:serviceaccounts:team-a"]
        );
        assert_eq!(
            schema,
            Some(derived_uid("FlowSchema", "service-accounts")),
            "classified as the service account"
        );
    }
    assert_eq!(
        impersonation_reviews(&world),
        [review("carol", "serviceaccounts", "", "team-a", "builder")]
    );
}

#[tokio::test]
async fn passthrough_forwards_the_headers_untouched_and_classifies_the_impersonated_user() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "passthrough").await;
    for (schema, seen) in as_carol(&world, &app, &AS_ADMIN).await {
        assert_eq!(
            seen.header_values("authorization"),
            [format!("Bearer {STATIC_TOKEN}")]
        );
        for (name, _) in AS_ADMIN {
            let sent: Vec<_> = AS_ADMIN
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(seen.header_values(name), sent, "{name}");
        }
        assert_eq!(schema, Some(derived_uid("FlowSchema", "exempt")));
    }
    assert_eq!(impersonation_reviews(&world).len(), 5);
}

#[tokio::test]
async fn a_caller_without_the_right_gets_the_apiservers_403_in_every_mode() {
    for mode in ["impersonate", "requestheader", "passthrough"] {
        let world = TlsWorld::start(false).await;
        let app = app_for(&world, mode).await;
        let dave = app.user_cert("dave", Some("qa"));
        let response = app
            .client_with(Some(&dave), Version::HTTP_11)
            .send(get_with(None, &[("impersonate-user", "alice")]))
            .await;
        if mode == "passthrough" {
            // A certificate alone does not travel: refused before impersonation is judged.
            assert_status(response, 401, "Unauthorized").await;
            continue;
        }
        let status = assert_status(response, 403, "Forbidden").await;
        assert_eq!(
            status["message"],
            "users \"alice\" is forbidden: User \"dave\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
            "{mode}"
        );
        assert!(
            world.fake.requests().iter().all(|r| r.path != POD),
            "{mode}: nothing reaches the upstream"
        );
    }
}

#[tokio::test]
async fn a_group_without_a_user_is_a_bad_request() {
    let world = TlsWorld::start(false).await;
    let app = app_for(&world, "impersonate").await;
    let response = app
        .client()
        .send(get_with(
            Some(STATIC_TOKEN),
            &[("impersonate-group", "system:masters")],
        ))
        .await;
    assert_status(response, 400, "BadRequest").await;
    assert!(world.fake.requests().iter().all(|r| r.path != POD));
}

#[tokio::test]
async fn passthrough_without_token_authentication_classifies_as_before() {
    // The proxy does not authenticate tokens here: the caller is system:anonymous to it while
    // its token travels. It cannot name the subject the upstream will judge, so it judges
    // nothing and classifies as the caller; the upstream authorizes the headers.
    let world = TlsWorld::start(false).await;
    let app = AppBuilder::for_world(&world)
        .flag("--identity-forwarding=passthrough")
        .start()
        .await;
    let response = app
        .client()
        .send(get_with(
            Some("any-token"),
            &[("impersonate-user", "alice")],
        ))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        pf_headers(&response).0,
        Some(derived_uid("FlowSchema", "global-default"))
    );
    let seen = world.fake.last_request_to(POD);
    assert_eq!(seen.header_values("impersonate-user"), ["alice"]);
    assert!(impersonation_reviews(&world).is_empty());
}

/// The proxy's access log (`kube_apf_proxy::access` events as JSON objects), caught by a
/// subscriber for this thread only: the test's current-thread runtime runs the proxy's tasks on
/// it, and other tests' threads keep theirs.
#[derive(Clone, Default)]
struct AccessLog(std::sync::Arc<parking_lot::Mutex<Vec<u8>>>);

impl std::io::Write for AccessLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for AccessLog {
    type Writer = AccessLog;

    fn make_writer(&'a self) -> AccessLog {
        self.clone()
    }
}

impl AccessLog {
    fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync {
        tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(self.clone())
            .finish()
    }

    fn requests(&self) -> Vec<serde_json::Value> {
        let bytes = self.0.lock().clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|event| event["target"] == "kube_apf_proxy::access")
            .collect()
    }
}

/// The access log records an impersonated request as the apiserver's audit does: `user` is the
/// identity it runs as (with its groups), `impersonator` the authenticated caller, and
/// `audit_id` the upstream's `Audit-Id`, which finds its audit event.
#[tokio::test]
async fn the_access_log_names_the_effective_user_the_impersonator_and_the_audit_id() {
    let log = AccessLog::default();
    let _guard = tracing::subscriber::set_default(log.subscriber());
    for mode in ["impersonate", "passthrough"] {
        let world = TlsWorld::start(false).await;
        let app = app_for(&world, mode).await;
        let response = app
            .client()
            .send(get_with(Some(STATIC_TOKEN), &AS_ADMIN))
            .await;
        assert_eq!(response.status(), StatusCode::OK, "{mode}");
        let audit_id = response
            .headers()
            .get("audit-id")
            .and_then(|v| v.to_str().ok())
            .expect("the upstream's Audit-Id reaches the client")
            .to_string();
        assert!(audit_id.starts_with("fake-audit-"), "{audit_id}");
        // Not impersonating: the caller itself, and no impersonator.
        let response = app
            .client()
            .send(request("GET", POD, Some(STATIC_TOKEN), Bytes::new()))
            .await;
        assert_eq!(response.status(), StatusCode::OK, "{mode}");
        drop(app);

        let requests = log.requests();
        let to_pod: Vec<_> = requests.iter().filter(|r| r["uri"] == POD).collect();
        let [impersonated, own] = to_pod.as_slice() else {
            panic!("{mode}: two requests to {POD} logged, got {requests:?}");
        };
        assert_eq!(
            impersonated["user"], "system:admin",
            "{mode}: {impersonated}"
        );
        assert_eq!(
            impersonated["impersonator"], "carol",
            "{mode}: {impersonated}"
        );
        assert_eq!(
            impersonated["groups"], r#"["system:masters","dev","system:authenticated"]"#,
            "{mode}: {impersonated}"
        );
        assert_eq!(impersonated["audit_id"], audit_id.as_str(), "{mode}");
        assert_eq!(impersonated["flow_schema"], "exempt", "{mode}");
        assert_eq!(own["user"], "carol", "{mode}: {own}");
        assert_eq!(own["impersonator"], "", "{mode}: {own}");
        assert!(
            own["audit_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("fake-audit-") && id != audit_id),
            "{mode}: {own}"
        );
        log.0.lock().clear();
    }
}

#[tokio::test]
async fn a_rejected_impersonated_request_names_its_impersonator_and_explain_takes_as() {
    let world = TlsWorld::start(false).await;
    let app = AppBuilder::for_world(&world)
        .config(crate::TINY_LEVEL)
        .flag(crate::ONE_SEAT[0])
        .flag(crate::ONE_SEAT[1])
        .client_ca()
        .token_file()
        .flag("--identity-forwarding=impersonate")
        .start()
        .await;
    let hang = crate::flow_control::occupy(&app, &world.fake).await;
    let queued = crate::flow_control::queue_one(&app).await;
    // Carol, allowed to impersonate, runs as alice: classified, queued and turned away as alice.
    let refused = app
        .client_with(None, Version::HTTP_11)
        .send(get_with(
            Some(STATIC_TOKEN),
            &[("impersonate-user", "alice")],
        ))
        .await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);

    let admin = app.app.running().admin_addr();
    let path = "/debug/api_priority_and_fairness/rejected?priorityLevel=tiny";
    let (status, body) = crate::admin::admin_get(admin, path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(listed[0]["user"], "alice", "{body}");
    assert_eq!(listed[0]["impersonator"], "carol", "{body}");

    // The same request described to the explain dump, as kubectl --as sends it.
    let path = format!(
        "/debug/api_priority_and_fairness/explain?url={POD}&user=carol&group=ops&as=alice&asGroup=dev"
    );
    let (status, body) = crate::admin::admin_get(admin, &path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let explained: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(explained["user"]["username"], "alice", "{body}");
    assert_eq!(explained["impersonator"]["username"], "carol", "{body}");
    let path = format!("/debug/api_priority_and_fairness/explain?url={POD}&asGroup=dev");
    assert_eq!(
        crate::admin::admin_get(admin, &path).await.0,
        StatusCode::BAD_REQUEST
    );

    world.fake.release_hanging();
    assert_eq!(hang.await.expect("hang").0, StatusCode::OK);
    assert_eq!(queued.await.expect("queued"), StatusCode::OK);
}
