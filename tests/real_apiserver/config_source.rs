//! Suite item 3: `--config-source cluster` enforcing the apiserver's own flow-control objects
//! (with the status, managedFields and mandatory objects the apiserver maintains), then following
//! a `kubectl apply` and a delete.

use std::time::Duration;

use crate::support::app::TestApp;
use crate::support::kube_apiserver::{KubeApiserver, BOB_TOKEN};
use crate::{proxy_identity, Front};

const BOB_CONFIG: &str = r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: rt-bob-level}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 5
    limitResponse:
      type: Queue
      queuing: {queues: 8, handSize: 2, queueLengthLimit: 20}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: rt-bob}
spec:
  priorityLevelConfiguration: {name: rt-bob-level}
  matchingPrecedence: 600
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: User, user: {name: bob}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"]}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
"#;

fn names(app: &TestApp) -> Vec<String> {
    let snapshot = app.app.proxy().flow_control().snapshot();
    let mut names: Vec<String> = snapshot
        .config()
        .flow_schemas()
        .iter()
        .map(|fs| fs.name.to_string())
        .collect();
    names.sort();
    names
}

async fn cluster_names(api: &KubeApiserver) -> Vec<String> {
    let out = api
        .admin_ok(
            &[
                "get",
                "flowschemas",
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
            None,
        )
        .await;
    let mut names: Vec<String> = out.split_whitespace().map(ToString::to_string).collect();
    names.sort();
    names
}

async fn uid(api: &KubeApiserver, kind: &str, name: &str) -> String {
    api.admin_ok(&["get", kind, name, "-o", "jsonpath={.metadata.uid}"], None)
        .await
}

/// The FlowSchema UID headers of bob's GET through the proxy: (proxy's, every value).
async fn bob_flow_schema(front: &Front) -> Vec<String> {
    let response = front
        .app
        .client()
        .get("/api/v1/namespaces/default/configmaps", Some(BOB_TOKEN))
        .await;
    response
        .headers()
        .get_all("x-kubernetes-pf-flowschema-uid")
        .iter()
        .map(|v| v.to_str().expect("ascii").to_string())
        .collect()
}

/// Polls (at most 30 s) until `check` holds.
async fn until<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("timed out: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_config_source_follows_the_apiservers_objects() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let _serial = crate::FLOWCONTROL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = proxy_identity(api, dir.path()).await;
    let front = Front::start(
        api,
        &[
            "--config-source=cluster".to_string(),
            format!("--upstream-token-file={}", token_file.display()),
        ],
    )
    .await;
    until("the first list is applied", || async {
        front
            .app
            .app
            .ready()
            .config_source
            .as_ref()
            .is_some_and(|flag| flag.is_ready())
    })
    .await;

    // The apiserver's own objects, mandatory and suggested, as it maintains them.
    let expected = cluster_names(api).await;
    assert!(expected.contains(&"exempt".to_string()), "{expected:?}");
    assert!(expected.contains(&"catch-all".to_string()), "{expected:?}");
    until("the proxy holds the apiserver's FlowSchemas", || async {
        names(&front.app) == cluster_names(api).await
    })
    .await;
    let global_default = uid(api, "flowschema", "global-default").await;
    let seen = bob_flow_schema(&front).await;
    assert_eq!(
        seen.first(),
        Some(&global_default),
        "bob's GET is classified by the cluster's global-default FlowSchema, with its UID"
    );

    // kubectl apply: followed.
    api.admin_ok(&["apply", "-f", "-"], Some(BOB_CONFIG)).await;
    let rt_bob = uid(api, "flowschema", "rt-bob").await;
    until("the applied FlowSchema is enforced", || async {
        bob_flow_schema(&front).await.first() == Some(&rt_bob)
    })
    .await;
    let level = front
        .app
        .app
        .proxy()
        .flow_control()
        .levels()
        .into_iter()
        .find(|l| l.priority_level.name == "rt-bob-level")
        .expect("the applied priority level exists in the proxy");
    assert_eq!(
        level.priority_level.uid.to_string(),
        uid(api, "prioritylevelconfiguration", "rt-bob-level").await
    );

    // kubectl delete: followed back to global-default.
    api.admin_ok(
        &[
            "delete",
            "flowschema/rt-bob",
            "prioritylevelconfiguration/rt-bob-level",
        ],
        None,
    )
    .await;
    until("the deleted FlowSchema is gone", || async {
        bob_flow_schema(&front).await.first() == Some(&global_default)
    })
    .await;
    until(
        "the proxy holds the apiserver's FlowSchemas again",
        || async { names(&front.app) == cluster_names(api).await },
    )
    .await;
}
