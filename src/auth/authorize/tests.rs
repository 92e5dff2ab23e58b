use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{BoxFuture, FutureExt};
use http::StatusCode;

use super::*;

type Script =
    dyn Fn(&serde_json::Value) -> Result<(StatusCode, String), TransportError> + Send + Sync;

/// Answers each review with `script(body)` after `delay`, recording the bodies.
struct Scripted {
    script: Box<Script>,
    delay: Duration,
    calls: AtomicUsize,
    bodies: Mutex<Vec<serde_json::Value>>,
}

impl Scripted {
    fn new(
        delay: Duration,
        script: impl Fn(&serde_json::Value) -> Result<(StatusCode, String), TransportError>
            + Send
            + Sync
            + 'static,
    ) -> Arc<Self> {
        Arc::new(Scripted {
            script: Box::new(script),
            delay,
            calls: AtomicUsize::new(0),
            bodies: Mutex::new(Vec::new()),
        })
    }

    /// Allows user `prometheus` and group `system:monitoring` on `/metrics`, denies the rest.
    fn monitoring() -> Arc<Self> {
        Self::new(Duration::ZERO, |body| {
            let spec = &body["spec"];
            let allowed = (spec["user"] == "prometheus"
                || spec["groups"]
                    .as_array()
                    .is_some_and(|g| g.iter().any(|g| g == "system:monitoring")))
                && spec["nonResourceAttributes"]["path"] == "/metrics";
            Ok((StatusCode::CREATED, answer(allowed, "RBAC")))
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl AccessReviewTransport for Scripted {
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let value: serde_json::Value = serde_json::from_slice(&body).expect("JSON review");
        let reply = (self.script)(&value).map(|(s, b)| (s, Bytes::from(b)));
        self.bodies.lock().push(value);
        let delay = self.delay;
        async move {
            tokio::time::sleep(delay).await;
            reply
        }
        .boxed()
    }
}

fn answer(allowed: bool, reason: &str) -> String {
    serde_json::json!({
        "kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
        "spec": {}, "status": {"allowed": allowed, "reason": reason},
    })
    .to_string()
}

fn authorizer(transport: &Arc<Scripted>) -> Authorizer {
    let transport: Arc<dyn AccessReviewTransport> = transport.clone();
    Authorizer::new(transport, AuthorizerConfig::default()).expect("authorizer")
}

fn user(name: &str, groups: &[&str]) -> Identity {
    Identity::authenticated(name, "", groups.iter().map(|g| g.to_string()).collect())
}

#[tokio::test(start_paused = true)]
async fn sends_a_non_resource_review_with_the_whole_identity() {
    let transport = Scripted::monitoring();
    let mut alice = user("alice", &["dev"]);
    alice.uid = "u-1".into();
    alice.extra.insert("scopes".into(), vec!["a".into()]);
    authorizer(&transport)
        .authorize(
            &alice,
            "get",
            "/debug/api_priority_and_fairness/dump_requests",
        )
        .await
        .expect("answer");
    let body = transport.bodies.lock()[0].clone();
    assert_eq!(body["kind"], "SubjectAccessReview");
    assert_eq!(body["apiVersion"], "authorization.k8s.io/v1");
    let spec = &body["spec"];
    assert_eq!(spec["user"], "alice");
    assert_eq!(spec["uid"], "u-1");
    assert_eq!(
        spec["groups"],
        serde_json::json!(["dev", "system:authenticated"])
    );
    assert_eq!(spec["extra"], serde_json::json!({"scopes": ["a"]}));
    assert_eq!(
        spec["nonResourceAttributes"],
        serde_json::json!({"path": "/debug/api_priority_and_fairness/dump_requests", "verb": "get"})
    );
    assert!(spec.get("resourceAttributes").is_none());
}

#[tokio::test(start_paused = true)]
async fn allowed_and_denied_follow_the_review() {
    let transport = Scripted::monitoring();
    let authz = authorizer(&transport);
    let cases = [
        (user("prometheus", &[]), "/metrics", true),
        (user("bob", &["system:monitoring"]), "/metrics", true),
        (user("bob", &["dev"]), "/metrics", false),
        (user("prometheus", &[]), "/debug/x", false),
    ];
    for (identity, path, allowed) in cases {
        let answer = authz
            .authorize(&identity, "get", path)
            .await
            .expect("answer");
        assert_eq!(
            answer.decision == Decision::Allowed,
            allowed,
            "{} {path}",
            identity.user
        );
    }
}

#[tokio::test(start_paused = true)]
async fn answers_are_cached_for_their_own_ttl() {
    let transport = Scripted::monitoring();
    let authz = authorizer(&transport);
    let (prom, bob) = (user("prometheus", &[]), user("bob", &[]));
    assert!(
        !authz
            .authorize(&prom, "get", "/metrics")
            .await
            .expect("ok")
            .cached
    );
    assert!(
        !authz
            .authorize(&bob, "get", "/metrics")
            .await
            .expect("ok")
            .cached
    );
    assert_eq!(transport.calls(), 2);

    // Within the denied TTL (30 s) both come from the cache.
    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(
        authz
            .authorize(&prom, "get", "/metrics")
            .await
            .expect("ok")
            .cached
    );
    assert!(
        authz
            .authorize(&bob, "get", "/metrics")
            .await
            .expect("ok")
            .cached
    );
    assert_eq!(transport.calls(), 2);

    // The denial expires after 30 s, the permission only after 5 min.
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(
        authz
            .authorize(&prom, "get", "/metrics")
            .await
            .expect("ok")
            .cached
    );
    let again = authz.authorize(&bob, "get", "/metrics").await.expect("ok");
    assert!(!again.cached);
    assert_eq!(transport.calls(), 3);
    tokio::time::advance(Duration::from_secs(5 * 60)).await;
    assert!(
        !authz
            .authorize(&prom, "get", "/metrics")
            .await
            .expect("ok")
            .cached
    );
    assert_eq!(transport.calls(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_different_path_or_identity_is_a_different_review() {
    let transport = Scripted::monitoring();
    let authz = authorizer(&transport);
    let prom = user("prometheus", &[]);
    authz.authorize(&prom, "get", "/metrics").await.expect("ok");
    authz.authorize(&prom, "get", "/debug/x").await.expect("ok");
    authz
        .authorize(&user("prometheus", &["g"]), "get", "/metrics")
        .await
        .expect("ok");
    assert_eq!(transport.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn errors_deny_and_are_never_cached() {
    let cases: Vec<(&str, Arc<Scripted>)> = vec![
        (
            "status 500",
            Scripted::new(Duration::ZERO, |_| {
                Ok((StatusCode::INTERNAL_SERVER_ERROR, "{}".into()))
            }),
        ),
        (
            "not a review",
            Scripted::new(Duration::ZERO, |_| Ok((StatusCode::OK, "<html>".into()))),
        ),
        (
            "connection",
            Scripted::new(Duration::ZERO, |_| {
                Err(TransportError::Connection("refused".into()))
            }),
        ),
        (
            "hangs",
            Scripted::new(Duration::from_secs(3600), |_| {
                Ok((StatusCode::CREATED, answer(true, "")))
            }),
        ),
    ];
    for (name, transport) in cases {
        let authz = authorizer(&transport);
        let prom = user("prometheus", &[]);
        assert!(
            authz.authorize(&prom, "get", "/metrics").await.is_err(),
            "{name}"
        );
        assert!(
            authz.authorize(&prom, "get", "/metrics").await.is_err(),
            "{name}"
        );
        assert_eq!(transport.calls(), 2, "{name}: errors are not cached");
    }
}

#[tokio::test(start_paused = true)]
async fn a_hanging_review_times_out() {
    let transport = Scripted::new(Duration::from_secs(3600), |_| {
        Ok((StatusCode::CREATED, answer(true, "")))
    });
    let error = authorizer(&transport)
        .authorize(&user("prometheus", &[]), "get", "/metrics")
        .await
        .expect_err("times out");
    assert_eq!(error, AuthorizeError::Timeout(Duration::from_secs(10)));
}

#[tokio::test(start_paused = true)]
async fn concurrent_identical_requests_share_one_review() {
    let transport = Scripted::new(Duration::from_secs(1), |_| {
        Ok((StatusCode::CREATED, answer(true, "")))
    });
    let authz = Arc::new(authorizer(&transport));
    let prom = user("prometheus", &[]);
    let waits: Vec<_> = (0..20)
        .map(|_| {
            let (authz, prom) = (Arc::clone(&authz), prom.clone());
            tokio::spawn(async move { authz.authorize(&prom, "get", "/metrics").await })
        })
        .collect();
    for wait in waits {
        let answer = wait.await.expect("task").expect("answer");
        assert_eq!(answer.decision, Decision::Allowed);
    }
    assert_eq!(transport.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn distinct_reviews_in_flight_are_bounded() {
    let transport = Scripted::new(Duration::from_secs(1), |_| {
        Ok((StatusCode::CREATED, answer(true, "")))
    });
    let cfg = AuthorizerConfig {
        max_in_flight: 2,
        ..AuthorizerConfig::default()
    };
    let dyn_transport: Arc<dyn AccessReviewTransport> = transport.clone();
    let authz = Arc::new(Authorizer::new(dyn_transport, cfg).expect("authorizer"));
    let mut waits = Vec::new();
    for name in ["a", "b", "c"] {
        let authz = Arc::clone(&authz);
        waits.push(tokio::spawn(async move {
            authz.authorize(&user(name, &[]), "get", "/metrics").await
        }));
        tokio::task::yield_now().await;
    }
    let mut results = Vec::new();
    for wait in waits {
        results.push(wait.await.expect("task"));
    }
    assert!(results[0].is_ok() && results[1].is_ok());
    assert_eq!(results[2], Err(AuthorizeError::TooManyInFlight));
}

#[test]
fn denied_reason_comes_from_reason_or_evaluation_error() {
    let body = serde_json::json!({"status": {"allowed": false, "evaluationError": "no RBAC"}});
    assert_eq!(
        decode(StatusCode::OK, body.to_string().as_bytes()),
        Ok(Decision::Denied {
            reason: "no RBAC".into()
        })
    );
    let no_status = serde_json::json!({"kind": "SubjectAccessReview"});
    assert_eq!(
        decode(StatusCode::CREATED, no_status.to_string().as_bytes()),
        Ok(Decision::Denied {
            reason: String::new()
        })
    );
}

#[test]
fn verbs_are_lowercased_methods() {
    assert_eq!(non_resource_verb(&http::Method::GET), "get");
    assert_eq!(non_resource_verb(&http::Method::POST), "post");
}
