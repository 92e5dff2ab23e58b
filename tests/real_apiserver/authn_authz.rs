//! Suite item 2: `--authentication-token-webhook` against the real TokenReview API, and
//! `--admin-secure` against the real SubjectAccessReview API with `deploy/prometheus-rbac.yaml`
//! applied: allowed, denied, cached.

use http::StatusCode;

use crate::support::app::{assert_status, metric_sum, within};
use crate::support::kube_apiserver::{KubeApiserver, ALICE_TOKEN, BOB_TOKEN};
use crate::support::read_body;
use crate::{proxy_identity, Cred, Front};

async fn text(response: http::Response<hyper::body::Incoming>) -> String {
    let bytes = within("body", read_body(response)).await.expect("body");
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_webhook_and_admin_subject_access_reviews_use_the_real_apiserver() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = proxy_identity(api, dir.path()).await;
    let prometheus_rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/prometheus-rbac.yaml"
    ))
    .expect("deploy/prometheus-rbac.yaml");
    api.admin_ok(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata: {name: monitoring}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: prometheus, namespace: monitoring}\n"),
    )
    .await;
    api.admin_ok(&["apply", "-f", "-"], Some(&prometheus_rbac))
        .await;
    let prometheus = api.service_account_token("monitoring", "prometheus").await;

    let front = Front::start(
        api,
        &[
            "--authentication-token-webhook".to_string(),
            "--admin-secure".to_string(),
            format!("--upstream-token-file={}", token_file.display()),
        ],
    )
    .await;

    // TokenReview: the proxy knows alice from the apiserver's own token file, through the API.
    let whoami = front
        .ok(
            &Cred::Token(ALICE_TOKEN),
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
            None,
        )
        .await;
    assert_eq!(whoami, "alice");
    let bad = front
        .app
        .client()
        .get("/api/v1/namespaces", Some("not-a-token"))
        .await;
    assert_status(bad, 401, "Unauthorized").await;

    // SubjectAccessReview: prometheus may get /metrics (deploy/prometheus-rbac.yaml), bob may not.
    let admin = front.app.admin_client(None);
    assert_status(admin.get("/metrics", None).await, 401, "Unauthorized").await;
    let denied = admin.get("/metrics", Some(BOB_TOKEN)).await;
    let status = assert_status(denied, 403, "Forbidden").await;
    assert_eq!(
        status["message"],
        r#"forbidden: User "bob" cannot get path "/metrics""#
    );
    let allowed = admin.get("/metrics", Some(&prometheus)).await;
    assert_eq!(allowed.status(), StatusCode::OK);
    assert!(text(allowed)
        .await
        .contains("apiserver_flowcontrol_nominal_limit_seats"));
    // The dumps are for kube-apf-proxy-debug-reader only: prometheus is denied there.
    let dump = admin
        .get(
            "/debug/api_priority_and_fairness/dump_requests",
            Some(&prometheus),
        )
        .await;
    assert_status(dump, 403, "Forbidden").await;

    // Cached: the second scrape needs no review.
    let again = admin.get("/metrics", Some(&prometheus)).await;
    assert_eq!(again.status(), StatusCode::OK);
    let metrics = text(again).await;
    assert_eq!(
        metric_sum(
            &metrics,
            r#"apf_proxy_admin_authorizations_total{cached="true",decision="allowed"}"#
        ),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric_sum(
            &metrics,
            r#"apf_proxy_admin_authorizations_total{cached="false",decision="allowed"}"#
        ),
        1.0
    );

    // The reviews really reached the apiserver, made by the proxy's own ServiceAccount.
    let audit = api.audit_log();
    let by_proxy = |resource: &str| {
        audit
            .lines()
            .filter(|l| l.contains("\"stage\":\"ResponseComplete\""))
            .filter(|l| l.contains(&format!("\"resource\":\"{resource}\"")))
            .filter(|l| l.contains("system:serviceaccount:kube-system:kube-apf-proxy"))
            .count()
    };
    assert!(by_proxy("tokenreviews") >= 1, "TokenReviews in audit.log");
    assert!(
        by_proxy("subjectaccessreviews") >= 2,
        "SubjectAccessReviews in audit.log"
    );
}
