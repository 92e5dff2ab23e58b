//! `--config-source cluster`: the proxy lists and watches the fake apiserver's FlowSchemas and
//! PriorityLevelConfigurations and classifies by them.

use http::Version;

use crate::pf_headers;
use crate::support::app::{eventually, metric_sum, AppBuilder, TestApp, STATIC_TOKEN};
use crate::support::fake_apiserver::FakeApiserver;

const POD: &str = "/api/v1/namespaces/ns/pods/web";

fn level(name: &str, shares: i64) -> serde_json::Value {
    serde_json::json!({"kind": "PriorityLevelConfiguration", "metadata": {"name": name},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": shares,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 4,
                "queueLengthLimit": 50}}}},
        "status": {}})
}

/// Sends user `carol` to `level`, with the managedFields and status the API adds.
fn carol_to(level: &str) -> serde_json::Value {
    serde_json::json!({"kind": "FlowSchema",
        "metadata": {"name": "carol", "generation": 1,
            "managedFields": [{"manager": "kubectl", "operation": "Update",
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}}}]},
        "spec": {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 100,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "carol"}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                    "namespaces": ["*"]}]}]},
        "status": {"conditions": [{"type": "Dangling", "status": "False"}]}})
}

async fn start(upstream: &FakeApiserver) -> TestApp {
    AppBuilder::new(&upstream.url)
        .token_file()
        .flag("--config-source=cluster")
        .start()
        .await
}

/// The (FlowSchema, priority level) UIDs carol's GET is answered with.
async fn carol_uids(app: &TestApp) -> (Option<String>, Option<String>) {
    let client = app.client_with(None, Version::HTTP_11);
    pf_headers(&client.get(POD, Some(STATIC_TOKEN)).await)
}

fn carol_is<'a>(level: &'static str, app: &'a TestApp) -> impl Fn() -> bool + 'a {
    move || {
        let snapshot = app.app.proxy().flow_control().snapshot();
        snapshot
            .config()
            .flow_schemas()
            .iter()
            .any(|fs| fs.name == "carol" && fs.priority_level == level)
    }
}

fn config_source_ready(app: &TestApp) -> bool {
    app.app
        .ready()
        .config_source
        .as_ref()
        .is_some_and(|flag| flag.is_ready())
}

#[tokio::test]
async fn the_cluster_configuration_is_applied_and_every_change_follows() {
    let upstream = FakeApiserver::start_plain().await;
    let store = upstream.flowcontrol();
    store.put(level("team", 10));
    store.put(level("other", 5));
    store.put(carol_to("team"));
    let app = start(&upstream).await;
    eventually("the first list applied", || config_source_ready(&app)).await;
    assert_eq!(
        carol_uids(&app).await,
        (Some("uid-carol".into()), Some("uid-team".into())),
        "classified by the cluster's objects, with their UIDs"
    );

    // Changed: carol moves to global-default with the next event.
    store.put(carol_to("other"));
    eventually("a modified FlowSchema applied", carol_is("other", &app)).await;
    assert_eq!(carol_uids(&app).await.0, Some("uid-carol".into()));

    // Deleted: carol's requests fall to the mandatory catch-all (the cluster holds only what
    // it holds: no suggested bootstrap objects are implied).
    store.delete("flowschemas", "carol");
    eventually("a deleted FlowSchema removed", || {
        !app.app
            .proxy()
            .flow_control()
            .snapshot()
            .config()
            .flow_schemas()
            .iter()
            .any(|fs| fs.name == "carol")
    })
    .await;
    let (_, level) = carol_uids(&app).await;
    assert_ne!(level, Some("uid-team".into()));
}

#[tokio::test]
async fn an_expired_resource_version_lists_again_and_a_dropped_watch_reconnects() {
    let upstream = FakeApiserver::start_plain().await;
    let store = upstream.flowcontrol();
    store.put(level("team", 10));
    store.put(level("other", 5));
    let app = start(&upstream).await;
    eventually("the first list applied", || config_source_ready(&app)).await;
    eventually("both watches open", || store.open_watches() == 2).await;
    let (lists, _) = store.requests();
    assert_eq!(lists, 2, "one list per kind");

    // 410: both kinds list again and see what changed meanwhile.
    store.expire();
    store.put(carol_to("team"));
    eventually("relisted after 410", || store.requests().0 >= 4).await;
    eventually(
        "the object made during the relist is in force",
        carol_is("team", &app),
    )
    .await;
    assert!(
        config_source_ready(&app),
        "stays ready through watch restarts"
    );

    // The upstream ends the watches: they are opened again, after a backoff, and changes flow.
    eventually("both watches open", || store.open_watches() == 2).await;
    store.end_watches();
    eventually("watches reopened", || store.open_watches() == 2).await;
    store.put(carol_to("other"));
    eventually("a change after the reconnect", carol_is("other", &app)).await;

    let metrics = app.app.metrics().encode();
    assert!(metric_sum(&metrics, "apf_proxy_config_watch_restarts_total") >= 2.0);
    assert_eq!(
        metric_sum(&metrics, r#"apf_proxy_config_objects{kind="FlowSchema"}"#),
        1.0
    );
    assert!(metric_sum(&metrics, "apf_proxy_config_last_sync_timestamp_seconds") > 0.0);
}

#[tokio::test]
async fn an_upstream_failing_at_start_keeps_the_proxy_not_ready_until_it_lists() {
    let upstream = FakeApiserver::start_plain().await;
    let store = upstream.flowcontrol();
    store.fail_lists(true);
    let app = start(&upstream).await;
    eventually("a list tried", || {
        upstream
            .requests()
            .iter()
            .any(|r| r.path.starts_with("/apis/flowcontrol.apiserver.k8s.io/v1/"))
    })
    .await;
    assert!(!config_source_ready(&app));
    assert!(!app.app.ready().is_ready());
    let (status, text) =
        crate::admin::admin_get(app.app.running().admin_addr(), "/readyz?verbose").await;
    assert_eq!(status, http::StatusCode::INTERNAL_SERVER_ERROR);
    assert!(text.contains("[-]config-source failed"), "{text}");

    store.fail_lists(false);
    eventually("ready once the lists succeed", || config_source_ready(&app)).await;
}

#[tokio::test]
async fn an_invalid_object_is_refused_whole_and_the_last_good_configuration_stays() {
    let upstream = FakeApiserver::start_plain().await;
    let store = upstream.flowcontrol();
    store.put(level("team", 10));
    store.put(level("other", 5));
    store.put(carol_to("team"));
    let app = start(&upstream).await;
    eventually("the first list applied", || config_source_ready(&app)).await;

    store.put(level("team", -5));
    eventually("the refusal counted", || {
        metric_sum(
            &app.app.metrics().encode(),
            r#"apf_proxy_config_reloads_total{result="failure"}"#,
        ) >= 1.0
    })
    .await;
    assert!(
        carol_is("team", &app)(),
        "the last good configuration stays"
    );
    assert_eq!(carol_uids(&app).await.1, Some("uid-team".into()));

    // Fixed: applied again.
    store.put(level("team", 20));
    store.put(carol_to("other"));
    eventually("the fixed configuration applied", carol_is("other", &app)).await;
}

#[tokio::test]
async fn kubectl_apply_of_a_flow_schema_changes_the_next_classification() {
    use crate::support::tools;
    if !tools::installed("kubectl", &["version", "--client"]) {
        eprintln!("kubectl is not installed; skipping");
        return;
    }
    let upstream = FakeApiserver::start_plain().await;
    upstream.flowcontrol().put(level("team", 10));
    let app = start(&upstream).await;
    eventually("the first list applied", || config_source_ready(&app)).await;
    assert_ne!(carol_uids(&app).await.1, Some("uid-team".into()));

    // kubectl talks to the (fake) apiserver, as an operator would; the proxy watches it.
    let manifest = app.path("carol.yaml");
    let yaml = serde_yaml::to_string(&carol_to("team")).expect("YAML");
    std::fs::write(
        &manifest,
        format!("apiVersion: flowcontrol.apiserver.k8s.io/v1\n{yaml}"),
    )
    .expect("write manifest");
    let mut command = std::process::Command::new("kubectl");
    command
        .env("HOME", app.dir.path())
        .env_remove("KUBECONFIG")
        .arg(format!("--server={}", upstream.url))
        .args(["--request-timeout=10s", "apply", "--validate=false", "-f"])
        .arg(&manifest);
    let output = tools::run_ok(command, "kubectl apply").await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("flowschema.flowcontrol.apiserver.k8s.io/carol created"),
        "{stdout}"
    );

    eventually("the applied FlowSchema in force", carol_is("team", &app)).await;
    assert_eq!(
        carol_uids(&app).await,
        (Some("uid-carol".into()), Some("uid-team".into()))
    );
}

#[tokio::test]
async fn queued_and_executing_requests_survive_a_change_from_the_cluster() {
    let upstream = FakeApiserver::start_plain().await;
    let store = upstream.flowcontrol();
    store.put(level("team", 1));
    let mut carol = carol_to("team");
    carol["spec"]["rules"][0]["nonResourceRules"] =
        serde_json::json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]);
    store.put(carol.clone());
    // Two seats in all: team's nominal share is one seat.
    let app = AppBuilder::new(&upstream.url)
        .token_file()
        .flag("--config-source=cluster")
        .flag("--max-requests-inflight=1")
        .flag("--max-mutating-requests-inflight=1")
        .start()
        .await;
    eventually("the first list applied", || config_source_ready(&app)).await;
    let client = app.client_with(None, Version::HTTP_11);
    let spawn = || {
        let client = client.clone();
        tokio::spawn(async move { client.get("/hang", Some(STATIC_TOKEN)).await.status() })
    };
    let executing = spawn();
    eventually("one executing", || app.level("team").executing == 1).await;
    let queued = spawn();
    eventually("one queued", || app.level("team").waiting == 1).await;

    store.put(level("other", 5));
    eventually("the change applied", || {
        app.app
            .proxy()
            .flow_control()
            .snapshot()
            .level("other")
            .is_some()
    })
    .await;
    let stats = app.level("team");
    assert_eq!(
        (stats.executing, stats.waiting),
        (1, 1),
        "the executing and the queued request stay"
    );
    // Release the requests (the queued one reaches the upstream once the first is done).
    crate::support::app::within("both requests answered", async {
        while !(executing.is_finished() && queued.is_finished()) {
            upstream.release_hanging();
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(executing.await.expect("task"), http::StatusCode::OK);
    assert_eq!(queued.await.expect("task"), http::StatusCode::OK);
}
