//! A shadow fed the requests that the configuration in force admits reaches the same verdicts,
//! on the paused clock.

use std::sync::Arc;
use std::time::Duration;

use prometheus::Registry;

use super::*;
use crate::auth::Identity;
use crate::config::load::{load_sources, SourceFile};
use crate::config::parse::Format;
use crate::request_info;

fn config() -> Config {
    let yaml =
        "---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n\
         metadata: {name: work}\nspec:\n  type: Limited\n  limited:\n    \
         nominalConcurrencyShares: 100\n    limitResponse:\n      type: Queue\n      \
         queuing: {queues: 1, handSize: 1, queueLengthLimit: 5}\n\
         ---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\n\
         metadata: {name: alice}\nspec:\n  priorityLevelConfiguration: {name: work}\n  \
         matchingPrecedence: 500\n  rules:\n  - subjects: [{kind: User, user: {name: alice}}]\n    \
         resourceRules: [{verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*']}]\n";
    let file = SourceFile {
        name: "t.yaml".to_string(),
        bytes: yaml.as_bytes().to_vec(),
        format: Format::Yaml,
    };
    load_sources(&[file]).expect("loads").config
}

fn counter(registry: &Registry, name: &str, reason: Option<&str>) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().iter())
        .filter(|m| {
            reason.is_none_or(|r| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == "reason" && l.value() == r)
            })
        })
        .map(|m| m.get_counter().get_value() as u64)
        .sum()
}

#[tokio::test(start_paused = true)]
async fn a_shadow_of_the_configuration_in_force_reaches_its_verdicts() {
    let config = config();
    let registry = Registry::new();
    let estimator = WorkEstimator::default();
    let metrics = ShadowMetrics::register(&registry).expect("register");
    let shadow =
        Arc::new(Shadow::new(DRY_RUN, &config, 6, estimator.clone(), metrics).expect("shadow"));
    let (enforced, _) = FlowControl::new(&config, 6, Instant::now()).expect("flow control");
    let enforced = Arc::new(enforced);
    let identity = Identity::authenticated("alice", "", Vec::new());
    let info = Arc::new(request_info::parse("GET", "/api/v1/namespaces/ns/pods/p").expect("info"));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let request = Described::new(&identity, &info, Duration::from_secs(60)).expect("valid");
        let mut tickets = observe_all(std::slice::from_ref(&shadow), &request);
        let snapshot = enforced.snapshot();
        let prepared = FrontDoor::new(&snapshot, &estimator)
            .enter(&request, Instant::now(), &mut ())
            .expect("prepared");
        let (level, admit) = (prepared.level.clone(), prepared.admit);
        let enforced = Arc::clone(&enforced);
        tasks.push(tokio::spawn(async move {
            let seat = enforced.admit(&level, admit).await;
            let Ok(seat) = seat else {
                return false;
            };
            tickets.start();
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(seat);
            drop(tickets);
            true
        }));
    }
    let mut dispatched = 0;
    for task in tasks {
        dispatched += u64::from(task.await.expect("task"));
    }
    // Let the shadow's holds run out.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(dispatched, 11);
    let name = "apf_proxy_shadow_dispatched_requests_total";
    assert_eq!(counter(&registry, name, None), 11);
    let name = "apf_proxy_shadow_rejected_requests_total";
    assert_eq!(counter(&registry, name, Some("queue-full")), 9);
    let work = shadow
        .flow_control()
        .levels()
        .into_iter()
        .find(|l| l.priority_level.name == "work")
        .expect("work");
    assert_eq!(
        work.queues.stats().seats_in_use,
        0,
        "every shadow seat is given back"
    );
}

#[tokio::test(start_paused = true)]
async fn a_candidate_that_does_not_load_stays_idle() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("x.yaml"), "kind: [").expect("write");
    let registry = Registry::new();
    let metrics = ShadowMetrics::register(&registry).expect("register");
    let shadow = Arc::new(
        Shadow::candidate(dir.path(), &config(), 6, WorkEstimator::default(), metrics)
            .expect("shadow"),
    );
    assert!(!shadow.is_active());
    let identity = Identity::authenticated("alice", "", Vec::new());
    let info = Arc::new(request_info::parse("GET", "/api/v1/namespaces/ns/pods/p").expect("info"));
    let request = Described::new(&identity, &info, Duration::from_secs(60)).expect("valid");
    assert!(shadow.observe(&request).is_none());
    std::fs::remove_file(dir.path().join("x.yaml")).expect("remove");
    assert!(shadow.reload());
    assert!(shadow.is_active());
    let name = "apf_proxy_shadow_config_reloads_total";
    assert_eq!(counter(&registry, name, None), 2);
}
