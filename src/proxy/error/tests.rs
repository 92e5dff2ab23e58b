use http_body_util::BodyExt;
use serde_json::{json, Value};

use super::*;
use std::time::Duration;

use crate::body::BoxError;

async fn parts(error: ProxyError) -> (StatusCode, http::HeaderMap, Value) {
    let response = error_response(&error);
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes();
    let json = serde_json::from_slice(&bytes).expect("json");
    (parts.status, parts.headers, json)
}

fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut v = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "code": code,
    });
    if !reason.is_empty() {
        v["reason"] = json!(reason);
    }
    if let Some(d) = details {
        v["details"] = d;
    }
    v
}

#[tokio::test]
async fn every_error_becomes_the_apiservers_status() {
    let io = || -> BoxError { "connection refused".into() };
    let cases = vec![
        (
            ProxyError::Unauthorized {
                message: "bad token".into(),
            },
            status(401, "Unauthorized", "Unauthorized: bad token", None),
        ),
        (
            ProxyError::Forbidden {
                message: "no".into(),
            },
            status(403, "Forbidden", "forbidden: no", None),
        ),
        (
            ProxyError::TooManyRequests {
                retry_after_seconds: 4,
            },
            status(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
                Some(json!({"retryAfterSeconds": 4})),
            ),
        ),
        (
            ProxyError::BadRequest {
                message: "bad".into(),
            },
            status(400, "BadRequest", "bad", None),
        ),
        (
            ProxyError::PayloadTooLarge {
                message: "3MB".into(),
            },
            status(
                413,
                "RequestEntityTooLarge",
                "Request entity too large: 3MB",
                None,
            ),
        ),
        (
            ProxyError::HeadersTooLarge {
                message: "64KiB".into(),
            },
            status(431, "", "Request header fields too large: 64KiB", None),
        ),
        (
            ProxyError::ServiceUnavailable {
                message: "shutting down".into(),
            },
            status(503, "ServiceUnavailable", "shutting down", None),
        ),
        (
            ProxyError::Upstream(UpstreamError::Unavailable(io())),
            status(
                503,
                "ServiceUnavailable",
                "the upstream apiserver is unavailable: connection refused",
                None,
            ),
        ),
        (
            ProxyError::Upstream(UpstreamError::BadGateway(io())),
            status(
                502,
                "",
                "bad response from the upstream apiserver: connection refused",
                None,
            ),
        ),
        (
            ProxyError::Upstream(UpstreamError::Timeout {
                after: Duration::from_secs(1),
            }),
            status(
                504,
                "Timeout",
                "Timeout: request did not complete within the allotted timeout",
                Some(json!({})),
            ),
        ),
        (
            ProxyError::Internal {
                message: "oops".into(),
            },
            status(
                500,
                "InternalError",
                "Internal error occurred: oops",
                Some(json!({"causes": [{"message": "oops"}]})),
            ),
        ),
    ];
    for (error, want) in cases {
        let (code, headers, body) = parts(error).await;
        assert_eq!(body, want);
        assert_eq!(
            u64::from(code.as_u16()),
            want["code"].as_u64().expect("code")
        );
        assert_eq!(headers[CONTENT_TYPE], "application/json");
        assert_eq!(
            headers.contains_key(RETRY_AFTER),
            code == StatusCode::TOO_MANY_REQUESTS
        );
    }
}

#[tokio::test]
async fn retry_after_is_at_least_one_second() {
    let (_, headers, body) = parts(ProxyError::TooManyRequests {
        retry_after_seconds: 0,
    })
    .await;
    assert_eq!(headers[RETRY_AFTER], "1");
    assert_eq!(body["details"]["retryAfterSeconds"], 1);
    let (_, headers, _) = parts(ProxyError::TooManyRequests {
        retry_after_seconds: 32,
    })
    .await;
    assert_eq!(headers[RETRY_AFTER], "32");
}
