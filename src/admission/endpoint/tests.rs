//! The webhook's bounds: deep or large ConfigMaps refused before parsing, a bounded number of
//! reviews judged at once off the async workers, and a deadline for each.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};

use super::*;
use crate::admission::tests::{configmap, review_body, reviewer};
use crate::admission::MAX_CONFIGMAP_BYTES;

fn state(concurrency: usize, deadline: Duration) -> Arc<WebhookState> {
    WebhookState::with_limits(reviewer(), AdmissionMetrics::new(), concurrency, deadline)
}

async fn post(state: &Arc<WebhookState>, body: Vec<u8>) -> (StatusCode, serde_json::Value) {
    let request = Request::post("/validate")
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    let response = handle(Arc::clone(state), request).await;
    let code = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let json = serde_json::from_slice(&bytes).expect("json");
    (code, json)
}

fn configmap_review(yaml: &str) -> Vec<u8> {
    review_body("UPDATE", &configmap(true, yaml), None, false)
}

/// The probe: 500,000 nested `[` in a ConfigMap (3.2 s and 164 MB before) are refused
/// by the pre-scan, before the YAML parser makes a single event.
#[tokio::test]
async fn a_deeply_nested_configmap_is_denied_before_parsing() {
    let state = state(2, REVIEW_DEADLINE);
    let (code, json) = post(&state, configmap_review(&"[".repeat(500_000))).await;
    assert_eq!(code, StatusCode::OK);
    let response = &json["response"];
    assert_eq!(response["allowed"], false, "{json}");
    let message = response["status"]["message"].as_str().expect("message");
    assert!(
        message.contains("nesting deeper than 128 levels"),
        "{message}"
    );
}

#[tokio::test]
async fn a_configmap_over_a_mebibyte_is_denied_unparsed() {
    let state = state(2, REVIEW_DEADLINE);
    let big = format!("# {}\n", "x".repeat(MAX_CONFIGMAP_BYTES));
    let (code, json) = post(&state, configmap_review(&big)).await;
    assert_eq!(code, StatusCode::OK);
    let message = json["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(
        message.contains("more than the 1048576 a ConfigMap may hold"),
        "{message}"
    );
}

/// With every turn taken, a review waits until its deadline and gets 429 with `Retry-After`;
/// `/healthz` needs no turn.
#[tokio::test(start_paused = true)]
async fn a_review_beyond_the_concurrency_bound_waits_then_gets_429() {
    let state = state(1, Duration::from_secs(10));
    let held = Arc::clone(&state.turns)
        .acquire_owned()
        .await
        .expect("turn");
    let started = tokio::time::Instant::now();
    let request = Request::post("/validate")
        .body(Full::new(Bytes::from(configmap_review("a: b\n"))))
        .expect("request");
    let response = handle(Arc::clone(&state), request).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(started.elapsed(), Duration::from_secs(10));
    let healthz = Request::get("/healthz")
        .body(Full::new(Bytes::new()))
        .expect("request");
    assert_eq!(
        handle(Arc::clone(&state), healthz).await.status(),
        StatusCode::OK
    );
    drop(held);
    let (code, _) = post(&state, configmap_review("a: b\n")).await;
    assert_eq!(code, StatusCode::OK);
}

/// A review still judging at its deadline is answered 504; its turn is held until its thread
/// is done, then given back. Real time, a short deadline: tokio's paused clock does not advance
/// while a blocking task runs.
#[tokio::test]
async fn a_review_past_its_deadline_gets_504_and_its_turn_comes_back() {
    let deadline = Duration::from_millis(100);
    let state = state(1, deadline);
    // A judging thread slower than the deadline: it waits for the reviewer, which another
    // thread holds until told to let go.
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (locked, is_locked) = std::sync::mpsc::channel::<()>();
    let holder = {
        let state = Arc::clone(&state);
        std::thread::spawn(move || {
            let _guard = state.reviewer.write();
            let _ = locked.send(());
            let _ = released.recv();
        })
    };
    is_locked.recv().expect("the reviewer is held");
    let started = tokio::time::Instant::now();
    let (code, json) = post(&state, configmap_review("a: b\n")).await;
    assert_eq!(code, StatusCode::GATEWAY_TIMEOUT, "{json}");
    assert_eq!(json["reason"], "Timeout");
    assert!(started.elapsed() >= deadline);
    assert_eq!(
        state.turns.available_permits(),
        0,
        "the judging thread still holds its turn"
    );
    release.send(()).expect("release");
    holder.join().expect("holder thread");
    let turn = tokio::time::timeout(Duration::from_secs(5), state.turns.acquire());
    let _turn = turn
        .await
        .expect("the turn comes back when the judging thread ends")
        .expect("semaphore open");
}
