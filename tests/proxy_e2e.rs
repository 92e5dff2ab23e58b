//! The whole proxy ([`kube_apf_proxy::app::App`]) end to end: TLS clients in front, the fake
//! apiserver behind, every phase of the pipeline in between. Each test starts its own app and
//! fake on loopback ports picked by the kernel; every wait is bounded (see `support::app::STEP`).

mod support;

#[path = "proxy_e2e/admin.rs"]
mod admin;
#[path = "proxy_e2e/admin_secure.rs"]
mod admin_secure;
#[path = "proxy_e2e/authn.rs"]
mod authn;
#[path = "proxy_e2e/config_source.rs"]
mod config_source;
#[path = "proxy_e2e/curl.rs"]
mod curl;
#[path = "proxy_e2e/exec_plugin.rs"]
mod exec_plugin;
#[path = "proxy_e2e/failures.rs"]
mod failures;
#[path = "proxy_e2e/faults.rs"]
mod faults;
#[path = "proxy_e2e/flow_control.rs"]
mod flow_control;
#[path = "proxy_e2e/identity_refusal.rs"]
mod identity_refusal;
#[path = "proxy_e2e/impersonation.rs"]
mod impersonation;
#[path = "proxy_e2e/kubectl.rs"]
mod kubectl;
#[path = "proxy_e2e/passthrough_identity.rs"]
mod passthrough_identity;
#[path = "proxy_e2e/requests.rs"]
mod requests;
#[path = "proxy_e2e/seats.rs"]
mod seats;
#[path = "proxy_e2e/shadow.rs"]
mod shadow;
#[path = "proxy_e2e/upstream_streams.rs"]
mod upstream_streams;

use bytes::Bytes;
use http::Response;
use hyper::body::Incoming;
use kube_apf_proxy::proxy::{FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER};
use support::app::within;

/// A configuration with one tiny Limited level for every caller but `system:masters`: with
/// `--max-requests-inflight=1 --max-mutating-requests-inflight=0` it has one seat, one queue and
/// room for one waiting request. User `rita`'s non-resource requests go to `strict`, one seat
/// and no queue (Reject). The exempt objects are spelled out to give them UIDs.
pub const TINY_LEVEL: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: tiny, uid: tiny-pl-uid}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    limitResponse:
      type: Queue
      queuing: {queues: 1, handSize: 1, queueLengthLimit: 1}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: tenants, uid: tenants-fs-uid}
spec:
  priorityLevelConfiguration: {name: tiny}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - {kind: Group, group: {name: system:authenticated}}
    - {kind: Group, group: {name: system:unauthenticated}}
    resourceRules:
    - {verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}
    nonResourceRules:
    - {verbs: ['*'], nonResourceURLs: ['*']}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: strict, uid: strict-pl-uid}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: rita, uid: rita-fs-uid}
spec:
  priorityLevelConfiguration: {name: strict}
  matchingPrecedence: 100
  rules:
  - subjects: [{kind: User, user: {name: rita}}]
    nonResourceRules:
    - {verbs: ['*'], nonResourceURLs: ['*']}
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
"#;

/// The flags that give [`TINY_LEVEL`] exactly one seat.
pub const ONE_SEAT: [&str; 2] = [
    "--max-requests-inflight=1",
    "--max-mutating-requests-inflight=0",
];

/// The values of the two APF response headers (`None` when absent).
pub fn pf_headers<B>(response: &Response<B>) -> (Option<String>, Option<String>) {
    let value = |name: &http::HeaderName| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().expect("ascii").to_string())
    };
    (
        value(&FLOW_SCHEMA_UID_HEADER),
        value(&PRIORITY_LEVEL_UID_HEADER),
    )
}

/// Expected values of the two APF response headers.
pub fn uids(flow_schema: &str, priority_level: &str) -> (Option<String>, Option<String>) {
    (
        Some(flow_schema.to_string()),
        Some(priority_level.to_string()),
    )
}

/// The response body, within `STEP`.
pub async fn body_bytes(response: Response<Incoming>) -> Bytes {
    within("response body", support::read_body(response))
        .await
        .expect("body")
}

/// The response body as JSON, within `STEP`.
pub async fn body_json(response: Response<Incoming>) -> serde_json::Value {
    let bytes = body_bytes(response).await;
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("json body ({e}): {}", String::from_utf8_lossy(&bytes)))
}

/// An exec of pod `ns/web` asking to switch to `protocol` (`Connection: Upgrade`); kubectl sends
/// SPDY as a POST and WebSocket as a GET.
pub fn exec_upgrade(method: &str, protocol: &str) -> http::Request<support::TestBody> {
    let mut exec = support::app::request(
        method,
        "/api/v1/namespaces/ns/pods/web/exec?command=sh&stdin=true&stdout=true",
        None,
        Bytes::new(),
    );
    let headers = exec.headers_mut();
    headers.insert("connection", "Upgrade".parse().expect("value"));
    headers.insert("upgrade", protocol.parse().expect("value"));
    exec
}

/// A WebSocket exec (kubectl ≥ 1.30) carrying its token as a subprotocol.
pub fn websocket_exec(token: &str) -> http::Request<support::TestBody> {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token);
    let mut exec = exec_upgrade("GET", "websocket");
    let headers = exec.headers_mut();
    headers.insert("sec-websocket-version", "13".parse().expect("value"));
    headers.insert(
        "sec-websocket-key",
        "dGhlIHNhbXBsZSBub25jZQ==".parse().expect("value"),
    );
    headers.insert(
        "sec-websocket-protocol",
        format!("base64url.bearer.authorization.k8s.io.{encoded}, v5.channel.k8s.io")
            .parse()
            .expect("value"),
    );
    exec
}

/// Checks that an exec switched to `protocol` outside flow control, then writes a few chunks (up
/// to 256 KiB) into the upgraded connection to the fake's echo and reads each back, closes the
/// caller's side and waits for the upstream's close to come back: bytes and ends of stream are
/// relayed both ways.
pub async fn assert_exec_echoes_both_ways(response: &mut Response<Incoming>, protocol: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    assert_eq!(response.status(), http::StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(response.headers()["upgrade"], protocol);
    assert_eq!(
        pf_headers(response),
        (None, None),
        "exec bypasses flow control"
    );
    let upgraded = within("upgrade", hyper::upgrade::on(response))
        .await
        .expect("upgraded");
    let mut io = hyper_util::rt::TokioIo::new(upgraded);
    let large: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
    for chunk in [&b"hello"[..], b"world", &large] {
        within("write", io.write_all(chunk)).await.expect("write");
        let mut echoed = vec![0; chunk.len()];
        within("echo", io.read_exact(&mut echoed))
            .await
            .expect("read");
        assert!(echoed == chunk, "{} bytes echoed intact", chunk.len());
    }
    within("shutdown", io.shutdown()).await.expect("shutdown");
    let mut rest = Vec::new();
    within("the upstream's close", io.read_to_end(&mut rest))
        .await
        .expect("read to the end");
    assert!(rest.is_empty(), "nothing after the echoes");
}

pub use support::app::assert_status;
