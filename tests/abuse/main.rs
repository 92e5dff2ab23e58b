//! Abuse through the whole app ([`kube_apf_proxy::app::App`]): callers that forge identity
//! headers or bend paths to land in a more privileged FlowSchema. Each test asserts a bound or an
//! outcome (status, the FlowSchema chosen, what reached the upstream), never a timing. Server-level
//! abuse (oversized/too many headers, header slowloris, rapid reset, connection cap) is pinned in
//! `tests/server/limits.rs`; forged headers per authenticator in `tests/proxy_e2e/authn.rs`.

#[path = "../support/mod.rs"]
mod support;

mod bodies;
mod connections;
mod frames;
mod http2;
mod identity;
mod paths;

use http::Response;
use kube_apf_proxy::proxy::FLOW_SCHEMA_UID_HEADER;

/// `exempt` for `system:masters`; `leader-election` (a privileged level) for leases in
/// `kube-system` and the exact `/healthz`; `tenants` (a tiny level) for everyone else.
pub const LEVELS: &str = r#"
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
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: leader-election, uid: leader-election-pl-uid}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 10
    lendablePercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: leader-election, uid: leader-election-fs-uid}
spec:
  priorityLevelConfiguration: {name: leader-election}
  matchingPrecedence: 100
  rules:
  - subjects: [{kind: Group, group: {name: system:authenticated}}]
    resourceRules:
    - {verbs: ['*'], apiGroups: [coordination.k8s.io], resources: [leases], namespaces: [kube-system]}
    nonResourceRules:
    - {verbs: ['*'], nonResourceURLs: [/healthz]}
---
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
      queuing: {queues: 1, handSize: 1, queueLengthLimit: 10}
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
"#;

/// The FlowSchema UID the proxy put on `response` (`X-Kubernetes-PF-FlowSchema-UID`).
pub fn flow_schema<B>(response: &Response<B>) -> String {
    response
        .headers()
        .get(&FLOW_SCHEMA_UID_HEADER)
        .map(|v| v.to_str().expect("ascii").to_string())
        .unwrap_or_default()
}

pub use support::app::assert_status;
