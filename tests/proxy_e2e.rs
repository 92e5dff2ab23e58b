//! The whole proxy ([`kube_apf_proxy::app::App`]) end to end: TLS clients in front, the fake
//! apiserver behind, every phase of the pipeline in between. Each test starts its own app and
//! fake on loopback ports picked by the kernel; every wait is bounded (see `support::app::STEP`).

mod support;

#[path = "proxy_e2e/admin.rs"]
mod admin;
#[path = "proxy_e2e/authn.rs"]
mod authn;
#[path = "proxy_e2e/curl.rs"]
mod curl;
#[path = "proxy_e2e/failures.rs"]
mod failures;
#[path = "proxy_e2e/faults.rs"]
mod faults;
#[path = "proxy_e2e/flow_control.rs"]
mod flow_control;
#[path = "proxy_e2e/kubectl.rs"]
mod kubectl;
#[path = "proxy_e2e/requests.rs"]
mod requests;
#[path = "proxy_e2e/seats.rs"]
mod seats;

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

pub use support::app::assert_status;
