use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use super::*;
use crate::auth::fake_transport::{authenticated, status, unauthenticated, FakeTransport, Reply};

fn reviewer(transport: Arc<FakeTransport>, audiences: &[&str]) -> TokenReviewer {
    let cfg = TokenReviewConfig::new(transport);
    let audiences = audiences.iter().map(|a| a.to_string()).collect();
    TokenReviewer::new(&cfg, audiences, Arc::new(AuthStats::default()))
}

fn token(t: &str) -> Secret {
    Secret::new(t)
}

#[tokio::test]
async fn sends_a_v1_token_review_with_token_and_audiences() {
    let transport = FakeTransport::users();
    reviewer(transport.clone(), &[])
        .review(&token("good1"))
        .await
        .expect("ok");
    reviewer(transport.clone(), &["api", "vault"])
        .review(&token("good2"))
        .await
        .expect("ok");
    assert_eq!(
        transport.bodies(),
        vec![
            json!({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                   "metadata": {}, "spec": {"token": "good1"}}),
            json!({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                   "metadata": {},
                   "spec": {"token": "good2", "audiences": ["api", "vault"]}}),
        ]
    );
}

#[tokio::test]
async fn interprets_the_review_status() {
    let cases: Vec<(Reply, Result<Option<&str>, TokenReviewError>)> = vec![
        (Ok(authenticated("alice", &["dev"])), Ok(Some("alice"))),
        (Ok(unauthenticated("")), Ok(None)),
        (
            Ok(unauthenticated("token expired")),
            Err(TokenReviewError::Rejected("token expired".to_string())),
        ),
        (Ok((StatusCode::OK, "{}".to_string())), Ok(None)),
        (
            Ok(status(StatusCode::FORBIDDEN, "tokenreviews is forbidden")),
            Err(TokenReviewError::Status {
                code: 403,
                message: "tokenreviews is forbidden".to_string(),
            }),
        ),
        (
            Ok((StatusCode::UNAUTHORIZED, "<html>".to_string())),
            Err(TokenReviewError::Status {
                code: 401,
                message: "no further information".to_string(),
            }),
        ),
        (
            Err(TransportError::Other("tls handshake failed".to_string())),
            Err(TokenReviewError::Transport(TransportError::Other(
                "tls handshake failed".to_string(),
            ))),
        ),
    ];
    for (reply, want) in cases {
        let transport = FakeTransport::new(move |_, _| reply.clone());
        let got = reviewer(transport.clone(), &[]).review(&token("t")).await;
        let got = got.map(|id| id.map(|i| i.user));
        assert_eq!(got, want.map(|u| u.map(str::to_string)));
        assert_eq!(transport.calls(), 1, "no retry");
    }
}

#[tokio::test]
async fn authenticated_review_keeps_uid_groups_and_extra() {
    let id = reviewer(FakeTransport::users(), &[])
        .review(&token("good"))
        .await
        .expect("ok")
        .expect("authenticated");
    assert_eq!(id.user, "user-good");
    assert_eq!(id.uid, "uid-user-good");
    assert_eq!(id.groups, vec!["reviewed"]);
    assert_eq!(
        id.extra.get("scopes"),
        Some(&vec!["a".to_string(), "b".to_string()])
    );
}

#[tokio::test]
async fn undecodable_success_is_an_error() {
    let transport = FakeTransport::new(|_, _| Ok((StatusCode::OK, "not json".to_string())));
    let err = reviewer(transport, &[])
        .review(&token("t"))
        .await
        .expect_err("garbage");
    assert!(matches!(err, TokenReviewError::Decode(_)), "{err}");
}

#[tokio::test(start_paused = true)]
async fn transient_failures_are_retried_with_backoff() {
    let transport = FakeTransport::new(|_, call| match call {
        0 => Err(TransportError::Connection("reset".to_string())),
        1 => Ok(status(StatusCode::TOO_MANY_REQUESTS, "slow down")),
        2 => Ok(status(StatusCode::INTERNAL_SERVER_ERROR, "oops")),
        3 => Ok(status(StatusCode::GATEWAY_TIMEOUT, "timeout")),
        _ => Ok(authenticated("alice", &[])),
    });
    let start = tokio::time::Instant::now();
    let id = reviewer(transport.clone(), &[])
        .review(&token("t"))
        .await
        .expect("retried");
    assert_eq!(id.map(|i| i.user).as_deref(), Some("alice"));
    assert_eq!(transport.calls(), 5);
    // 500 + 750 + 1125 + 1687.5 ms, each plus up to 20% jitter.
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(4062), "{waited:?}");
    assert!(waited <= Duration::from_millis(4875), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn retries_stop_after_the_last_step_with_the_last_error() {
    let transport =
        FakeTransport::new(|_, _| Ok(status(StatusCode::INTERNAL_SERVER_ERROR, "down")));
    let err = reviewer(transport.clone(), &[])
        .review(&token("t"))
        .await
        .expect_err("fails");
    assert_eq!(
        err,
        TokenReviewError::Status {
            code: 500,
            message: "down".to_string()
        }
    );
    assert_eq!(transport.calls(), 5);
}

#[tokio::test(start_paused = true)]
async fn slow_upstream_times_out() {
    let transport =
        FakeTransport::slow(Duration::from_secs(11), |_, _| Ok(authenticated("a", &[])));
    let err = reviewer(transport, &[])
        .review(&token("t"))
        .await
        .expect_err("too slow");
    assert_eq!(err, TokenReviewError::Timeout(Duration::from_secs(10)));
}

#[tokio::test]
async fn audiences_must_intersect_when_configured() {
    let with_auds = |auds: &'static [&'static str]| {
        FakeTransport::new(move |_, _| {
            let (code, body) = authenticated("alice", &[]);
            let mut v: serde_json::Value = serde_json::from_str(&body).expect("json");
            v["status"]["audiences"] = json!(auds);
            Ok((code, v.to_string()))
        })
    };
    let cases: [(&[&str], &'static [&'static str], bool); 5] = [
        (&[], &["other"], true),
        (&["api"], &[], true),
        (&["api"], &["api"], true),
        (&["api", "x"], &["x", "y"], true),
        (&["api"], &["other"], false),
    ];
    for (ours, theirs, ok) in cases {
        let got = reviewer(with_auds(theirs), ours)
            .review(&token("t"))
            .await
            .expect("no error");
        assert_eq!(got.is_some(), ok, "{ours:?} vs {theirs:?}");
    }
}

#[test]
fn request_body_debug_of_the_token_is_redacted() {
    let t = token("very-secret");
    assert!(!format!("{t:?}").contains("very-secret"));
    let body = request_body(&t, &[]);
    assert!(std::str::from_utf8(&body)
        .expect("utf8")
        .contains("very-secret"));
}
