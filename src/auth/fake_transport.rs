//! A scripted [`TokenReviewTransport`] that records what it was sent.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{BoxFuture, FutureExt};
use http::StatusCode;

use super::transport::{TokenReviewTransport, TransportError};

/// The transport's answer to one call.
pub(crate) type Reply = Result<(StatusCode, String), TransportError>;

type Script = dyn Fn(&str, usize) -> Reply + Send + Sync;

/// Answers each review with `script(token, call_index)` after `delay`.
pub(crate) struct FakeTransport {
    script: Box<Script>,
    delay: Duration,
    calls: AtomicUsize,
    bodies: Mutex<Vec<serde_json::Value>>,
}

impl FakeTransport {
    pub(crate) fn new(script: impl Fn(&str, usize) -> Reply + Send + Sync + 'static) -> Arc<Self> {
        Self::slow(Duration::ZERO, script)
    }

    pub(crate) fn slow(
        delay: Duration,
        script: impl Fn(&str, usize) -> Reply + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(FakeTransport {
            script: Box::new(script),
            delay,
            calls: AtomicUsize::new(0),
            bodies: Mutex::new(Vec::new()),
        })
    }

    /// Authenticates tokens named `good*` as `user-<token>`, reports others unauthenticated.
    pub(crate) fn users() -> Arc<Self> {
        Self::new(|token, _| {
            Ok(if token.starts_with("good") {
                authenticated(&format!("user-{token}"), &["reviewed"])
            } else {
                unauthenticated("")
            })
        })
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub(crate) fn bodies(&self) -> Vec<serde_json::Value> {
        self.bodies.lock().clone()
    }
}

impl TokenReviewTransport for FakeTransport {
    fn review(
        &self,
        body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let json: serde_json::Value = serde_json::from_slice(&body).expect("request is JSON");
        let token = json["spec"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.bodies.lock().push(json);
        let reply = (self.script)(&token, call);
        let delay = self.delay;
        async move {
            tokio::time::sleep(delay).await;
            reply.map(|(code, body)| (code, Bytes::from(body)))
        }
        .boxed()
    }
}

/// A 201 TokenReview that authenticates `user` in `groups`.
pub(crate) fn authenticated(user: &str, groups: &[&str]) -> (StatusCode, String) {
    let body = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "status": {
            "authenticated": true,
            "user": {"username": user, "uid": format!("uid-{user}"), "groups": groups,
                     "extra": {"scopes": ["a", "b"]}},
        },
    });
    (StatusCode::CREATED, body.to_string())
}

/// A 201 TokenReview that does not authenticate, with `status.error` = `error`.
pub(crate) fn unauthenticated(error: &str) -> (StatusCode, String) {
    let body = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "status": {"authenticated": false, "error": error},
    });
    (StatusCode::CREATED, body.to_string())
}

/// A Kubernetes `Status` error response.
pub(crate) fn status(code: StatusCode, message: &str) -> (StatusCode, String) {
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "message": message, "code": code.as_u16()});
    (code, body.to_string())
}
