use parking_lot::Mutex;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::{BoxFuture, FutureExt};
use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;
use crate::auth::authorize::{AccessReviewTransport, AuthorizerConfig};
use crate::auth::TransportError;

/// Allows `admin` everything; allows `bob` to impersonate users and nothing else. Records the
/// reviews' specs.
#[derive(Default)]
struct Rbac {
    specs: Mutex<Vec<serde_json::Value>>,
}

impl AccessReviewTransport for Rbac {
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>> {
        let review: serde_json::Value = serde_json::from_slice(&body).expect("json");
        let spec = review["spec"].clone();
        let attrs = &spec["resourceAttributes"];
        let allowed =
            spec["user"] == "admin" || (spec["user"] == "bob" && attrs["resource"] == "users");
        self.specs.lock().push(spec);
        let answer = serde_json::json!({"status": {"allowed": allowed}}).to_string();
        async move { Ok((StatusCode::CREATED, Bytes::from(answer))) }.boxed()
    }
}

fn setup() -> (Arc<Rbac>, Authorizer) {
    let rbac = Arc::new(Rbac::default());
    let transport: Arc<dyn AccessReviewTransport> = rbac.clone();
    let authorizer = Authorizer::new(transport, AuthorizerConfig::default()).expect("authorizer");
    (rbac, authorizer)
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            http::header::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            HeaderValue::from_str(value).expect("value"),
        );
    }
    map
}

fn caller(name: &str) -> Identity {
    Identity::authenticated(name, "", vec![])
}

#[test]
fn headers_are_read_as_the_apiserver_reads_them() {
    assert_eq!(requested(&HeaderMap::new()), Ok(None));
    assert_eq!(
        requested(&headers(&[("impersonate-user", "")])),
        Ok(None),
        "an empty user is no impersonation"
    );
    let got = requested(&headers(&[
        ("impersonate-user", "alice"),
        ("impersonate-user", "ignored"),
        ("impersonate-group", "dev"),
        ("impersonate-group", "ops"),
        ("impersonate-uid", "u-1"),
        ("impersonate-extra-example.org%2fteam", "blue"),
        ("impersonate-extra-example.org%2fteam", "green"),
        ("impersonate-extra-bad%zzkey", "x"),
    ]))
    .expect("valid")
    .expect("impersonation");
    assert_eq!(got.user, "alice");
    assert_eq!(got.uid, "u-1");
    assert_eq!(got.groups, ["dev", "ops"]);
    assert_eq!(
        got.extra,
        BTreeMap::from([
            (
                "example.org/team".to_string(),
                vec!["blue".to_string(), "green".to_string()]
            ),
            ("bad%zzkey".to_string(), vec!["x".to_string()]),
        ])
    );
    for lone in [
        "impersonate-group",
        "impersonate-uid",
        "impersonate-extra-k",
    ] {
        assert!(
            matches!(
                requested(&headers(&[(lone, "x")])),
                Err(ImpersonationError::BadRequest(_))
            ),
            "{lone} without a user"
        );
    }
}

#[test]
fn service_account_names_are_split_as_the_apiserver_splits_them() {
    assert_eq!(
        split_service_account("system:serviceaccount:ns:default"),
        Some(("ns", "default"))
    );
    for not in [
        "system:serviceaccount:ns",
        "system:serviceaccount:ns:a:b",
        "system:serviceaccount:NS:a",
        "system:serviceaccount::a",
        "alice",
    ] {
        assert_eq!(split_service_account(not), None, "{not}");
    }
}

#[test]
fn the_effective_identity_follows_the_apiservers_rules() {
    let user = |name: &str, groups: &[&str]| Requested {
        user: name.into(),
        groups: groups.iter().map(ToString::to_string).collect(),
        ..Requested::default()
    };
    let groups = |r: Requested| effective_identity(&r).groups;
    assert_eq!(groups(user("alice", &[])), ["system:authenticated"]);
    assert_eq!(
        groups(user("alice", &["dev"])),
        ["dev", "system:authenticated"]
    );
    assert_eq!(
        groups(user("alice", &["system:unauthenticated"])),
        ["system:unauthenticated"]
    );
    assert_eq!(
        groups(user("system:anonymous", &[])),
        ["system:unauthenticated"]
    );
    assert_eq!(
        groups(user("system:serviceaccount:ns:sa", &[])),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ns",
            "system:authenticated"
        ]
    );
    assert_eq!(
        groups(user("system:serviceaccount:ns:sa", &["g"])),
        ["g", "system:authenticated"],
        "requested groups replace the service account's"
    );
}

#[tokio::test(start_paused = true)]
async fn one_review_per_attribute_with_the_caller_as_subject() {
    let (rbac, authorizer) = setup();
    let asked = requested(&headers(&[
        ("impersonate-user", "system:serviceaccount:ns:sa"),
        ("impersonate-group", "dev"),
        ("impersonate-uid", "u-1"),
        ("impersonate-extra-scopes", "a"),
    ]))
    .expect("valid")
    .expect("impersonation");
    let got = impersonate(&authorizer, &caller("admin"), &asked)
        .await
        .expect("allowed");
    assert_eq!(got.user, "system:serviceaccount:ns:sa");
    assert_eq!(got.groups, ["dev", "system:authenticated"]);
    let specs = rbac.specs.lock().clone();
    let attrs: Vec<_> = specs
        .iter()
        .map(|s| s["resourceAttributes"].clone())
        .collect();
    assert_eq!(
        attrs,
        [
            serde_json::json!({"verb": "impersonate", "group": "", "version": "v1",
                "resource": "serviceaccounts", "namespace": "ns", "name": "sa"}),
            serde_json::json!({"verb": "impersonate", "group": "authentication.k8s.io",
                "version": "v1", "resource": "uids", "name": "u-1"}),
            serde_json::json!({"verb": "impersonate", "group": "", "version": "v1",
                "resource": "groups", "name": "dev"}),
            serde_json::json!({"verb": "impersonate", "group": "authentication.k8s.io",
                "version": "v1", "resource": "userextras", "subresource": "scopes", "name": "a"}),
        ]
    );
    assert!(specs.iter().all(|s| s["user"] == "admin"));
    // Again: every answer comes from the cache.
    impersonate(&authorizer, &caller("admin"), &asked)
        .await
        .expect("allowed");
    assert_eq!(rbac.specs.lock().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_denial_is_the_apiservers_forbidden_message() {
    let (_, authorizer) = setup();
    let alice = requested(&headers(&[("impersonate-user", "alice")]))
        .expect("valid")
        .expect("impersonation");
    let err = impersonate(&authorizer, &caller("eve"), &alice)
        .await
        .expect_err("denied");
    assert_eq!(
        err,
        ImpersonationError::Forbidden(
            "users \"alice\" is forbidden: User \"eve\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope".into()
        )
    );
    // bob may impersonate users, not groups.
    let with_group = requested(&headers(&[
        ("impersonate-user", "alice"),
        ("impersonate-group", "system:masters"),
    ]))
    .expect("valid")
    .expect("impersonation");
    let err = impersonate(&authorizer, &caller("bob"), &with_group)
        .await
        .expect_err("denied");
    assert_eq!(
        err.to_string(),
        "groups \"system:masters\" is forbidden: User \"bob\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
    );
    let sa = ResourceRequest {
        verb: "impersonate".into(),
        resource: "userextras".into(),
        subresource: "scopes".into(),
        group: "authentication.k8s.io".into(),
        namespace: "ns".into(),
        name: "a".into(),
        ..ResourceRequest::default()
    };
    assert_eq!(
        forbidden_message("bob", &sa, "no"),
        "userextras.authentication.k8s.io \"a\" is forbidden: User \"bob\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" in the namespace \"ns\": no"
    );
}
