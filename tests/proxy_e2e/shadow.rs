//! Shadow configurations and dry-run on live traffic: a shadow equal to the configuration in
//! force reaches the enforced verdicts, dry-run queues and rejects nothing while its shadow
//! counts what it would have done, and a bad shadow directory never affects enforcement.

use bytes::Bytes;
use http::StatusCode;

use crate::admin::admin_get;
use crate::flow_control::{occupy, queue_one, TINY};
use crate::support::app::{eventually, metric_sum, request, AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::{ONE_SEAT, TINY_LEVEL};

fn metrics(app: &TestApp) -> String {
    app.app.metrics().encode()
}

fn shadow_rejected(app: &TestApp, shadow: &str) -> f64 {
    let prefix = format!(
        "apf_proxy_shadow_rejected_requests_total{{flow_schema=\"tenants\",priority_level=\"tiny\",reason=\"queue-full\",shadow=\"{shadow}\"}}"
    );
    metric_sum(&metrics(app), &prefix)
}

fn shadow_dispatched(app: &TestApp, shadow: &str) -> f64 {
    let prefix = format!(
        "apf_proxy_shadow_dispatched_requests_total{{flow_schema=\"tenants\",priority_level=\"tiny\",shadow=\"{shadow}\"}}"
    );
    metric_sum(&metrics(app), &prefix)
}

async fn app_with(fake: &FakeApiserver, flags: &[&str]) -> TestApp {
    let mut builder = AppBuilder::new(&fake.url)
        .config(TINY_LEVEL)
        .flag(ONE_SEAT[0])
        .flag(ONE_SEAT[1])
        .client_ca();
    for flag in flags {
        builder = builder.flag(*flag);
    }
    builder.start().await
}

#[tokio::test]
async fn a_shadow_equal_to_the_configuration_in_force_reaches_the_same_verdicts() {
    let fake = FakeApiserver::start_plain().await;
    let shadow_dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(shadow_dir.path().join("flowcontrol.yaml"), TINY_LEVEL).expect("write");
    let flag = format!("--shadow-config-dir={}", shadow_dir.path().display());
    let app = app_with(&fake, &[&flag]).await;
    // One request holds the one seat, one waits in the one-long queue, the third is refused.
    let hang = occupy(&app, &fake).await;
    let queued = queue_one(&app).await;
    let refused = app
        .client()
        .send(request(
            "GET",
            "/api/v1/namespaces/ns/pods/x",
            None,
            Bytes::new(),
        ))
        .await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    eventually("the shadow refuses the third too", || {
        shadow_rejected(&app, "candidate") == 1.0
    })
    .await;
    assert_eq!(shadow_dispatched(&app, "candidate"), 1.0);
    // The seat comes back: the queued request runs, in force and in the shadow.
    fake.release_hanging();
    assert_eq!(hang.await.expect("hang").0, StatusCode::OK);
    assert_eq!(queued.await.expect("queued"), StatusCode::OK);
    eventually("the shadow dispatches the queued one", || {
        shadow_dispatched(&app, "candidate") == 2.0
    })
    .await;
    let text = metrics(&app);
    let enforced = metric_sum(
        &text,
        "apiserver_flowcontrol_rejected_requests_total{flow_schema=\"tenants\",priority_level=\"tiny\",reason=\"queue-full\"}",
    );
    assert_eq!(enforced, shadow_rejected(&app, "candidate"));
    let admin = app.app.running().admin_addr();
    let path = "/debug/api_priority_and_fairness/shadow/candidate/dump_priority_levels";
    let (status, levels) = admin_get(admin, path).await;
    assert_eq!(status, StatusCode::OK);
    assert!(levels.contains(TINY), "{levels}");
    let path = "/debug/api_priority_and_fairness/shadow/nonesuch/dump_priority_levels";
    assert_eq!(admin_get(admin, path).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn dry_run_queues_and_rejects_nothing_while_its_shadow_counts_what_it_would_have_done() {
    let fake = FakeApiserver::start_plain().await;
    let app = app_with(&fake, &["--flow-control=dry-run"]).await;
    let client = app.client();
    let hang = tokio::spawn(async move {
        let mut conn = client.connect().await;
        conn.send_unbounded(request("GET", "/hang", None, Bytes::new()))
            .await
            .status()
    });
    eventually("the /hang request reaches the fake", || {
        fake.requests().iter().any(|r| r.path == "/hang")
    })
    .await;
    // In force, the one seat would be taken and the queue one long: three more GETs would see
    // one queued and two refused. In dry-run all three are answered at once.
    for _ in 0..3 {
        let response = app
            .client()
            .send(request(
                "GET",
                "/api/v1/namespaces/ns/pods/x",
                None,
                Bytes::new(),
            ))
            .await;
        assert_eq!(response.status(), StatusCode::OK);
    }
    let level = app.level(TINY);
    assert_eq!((level.waiting, level.executing), (0, 0));
    eventually("the dry-run shadow refuses two", || {
        shadow_rejected(&app, "dry-run") == 2.0
    })
    .await;
    assert_eq!(
        metric_sum(
            &metrics(&app),
            "apiserver_flowcontrol_rejected_requests_total"
        ),
        0.0
    );
    fake.release_hanging();
    assert_eq!(hang.await.expect("hang"), StatusCode::OK);
}

#[tokio::test]
async fn a_bad_shadow_directory_never_affects_enforcement_and_a_good_one_is_picked_up() {
    let fake = FakeApiserver::start_plain().await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("flowcontrol.yaml"), "kind: [not yaml").expect("write");
    let flag = format!("--shadow-config-dir={}", dir.path().display());
    let app = app_with(&fake, &[&flag]).await;
    let response = app
        .client()
        .send(request(
            "GET",
            "/api/v1/namespaces/ns/pods/x",
            None,
            Bytes::new(),
        ))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let failed = "apf_proxy_shadow_config_reloads_total{shadow=\"candidate\",success=\"false\"}";
    assert_eq!(metric_sum(&metrics(&app), failed), 1.0);
    // Idle until it loads: nothing was evaluated.
    assert_eq!(shadow_dispatched(&app, "candidate"), 0.0);
    std::fs::write(dir.path().join("flowcontrol.yaml"), TINY_LEVEL).expect("write");
    app.app.reloader().reload_shadows();
    let loaded = "apf_proxy_shadow_config_reloads_total{shadow=\"candidate\",success=\"true\"}";
    assert_eq!(metric_sum(&metrics(&app), loaded), 1.0);
    let response = app
        .client()
        .send(request(
            "GET",
            "/api/v1/namespaces/ns/pods/x",
            None,
            Bytes::new(),
        ))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    eventually("the shadow evaluates the next request", || {
        shadow_dispatched(&app, "candidate") == 1.0
    })
    .await;
}
