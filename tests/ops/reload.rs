//! Hot reload of the flow-control configuration and of the serving certificate.

use kube_apf_proxy::app::ReloadError;
use tokio::time::Instant;

use super::*;

const EXTRA_LEVEL: &str = r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: extra
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    limitResponse:
      type: Reject
"#;

/// handSize larger than queues: invalid.
const INVALID_LEVEL: &str = r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: broken
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    limitResponse:
      type: Queue
      queuing:
        queues: 2
        handSize: 8
        queueLengthLimit: 10
"#;

fn reloads(text: &str, result: &str) -> Option<f64> {
    sample(
        text,
        "apf_proxy_config_reloads_total",
        &[("result", result)],
    )
}

fn has_level(world: &World, name: &str) -> bool {
    let snapshot = world.app().proxy().flow_control().snapshot();
    snapshot.level(name).is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_change_is_applied_while_queued_requests_survive_it() {
    let world = Arc::new(World::start(10, &[]).await);
    let first = world.spawn_get("/hang");
    world.until_tight(0, 1).await;
    let second = world.spawn_get("/hang");
    world.until_tight(1, 1).await;

    write(&world.config_dir().join("extra.yaml"), EXTRA_LEVEL);
    write(&world.config_dir().join("tight.yaml"), &tight_config(5));
    let reloader = world.app().reloader();
    reloader.reload_config(Instant::now()).expect("valid");

    assert!(has_level(&world, "extra"));
    assert_eq!(
        world.tight(),
        (1, 1),
        "the queued and the executing request stay"
    );
    let (_, text) = world.admin("/metrics").await;
    // The file poll may have seen the change too.
    assert!(
        reloads(&text, "success").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    let extra = [("priority_level", "extra")];
    let nominal = "apiserver_flowcontrol_nominal_limit_seats";
    assert!(sample(&text, nominal, &extra).is_some(), "limits published");

    world.release_hanging(2).await;
    assert_eq!(first.await.expect("first").0, StatusCode::OK);
    assert_eq!(second.await.expect("second").0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_change_is_rejected_whole_and_the_last_good_one_stays() {
    let world = World::start(10, &[]).await;
    // The broken file first: the directory's poller may look between the two writes, and then it
    // must see a change that fails too, never the extra level alone.
    write(&world.config_dir().join("broken.yaml"), INVALID_LEVEL);
    write(&world.config_dir().join("extra.yaml"), EXTRA_LEVEL);
    let error = world
        .app()
        .reloader()
        .reload_config(Instant::now())
        .expect_err("invalid");
    assert!(matches!(error, ReloadError::Invalid { problems, .. } if problems >= 1));
    assert!(has_level(&world, "tight"));
    assert!(
        !has_level(&world, "extra"),
        "nothing of the rejected change applies"
    );
    let (_, text) = world.admin("/metrics").await;
    assert!(
        reloads(&text, "failure").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert_eq!(reloads(&text, "success"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_configuration_directory_is_noticed_without_a_signal() {
    let world = World::start(10, &[]).await;
    write(&world.config_dir().join("extra.yaml"), EXTRA_LEVEL);
    // The poll runs every 2 s.
    until(|| has_level(&world, "extra")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_serving_certificate_is_served_to_new_connections() {
    let world = World::start(10, &[]).await;
    let (response, before) = world.request("/api/v1/namespaces/ns/pods").await;
    assert_eq!(response.status(), StatusCode::OK);
    let rotated = world.ca.server_cert();
    rotated.write(world.dir.path(), "serving");
    world.app().reloader().reload_tls();
    let (response, after) = world.request("/api/v1/namespaces/ns/pods").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_ne!(before, after);
    assert_eq!(after, rotated.cert);
}
