use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent;

use super::*;

/// A FlowSchema as the apiserver serves it: managedFields, resourceVersion, status.
fn flow_schema(name: &str, level: &str, rv: &str) -> FlowSchema {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": rv,
            "generation": 1, "creationTimestamp": "2026-11-24T10:00:00Z",
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "time": "2026-11-24T10:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:matchingPrecedence": {}}}}]},
        "spec": {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                    "namespaces": ["*"]}]}]},
        "status": {"conditions": [{"type": "Dangling", "status": "False",
            "lastTransitionTime": "2026-11-24T10:00:00Z", "reason": "Found", "message": "ok"}]}
    }))
    .expect("a FlowSchema")
}

fn level(name: &str, shares: i32) -> PriorityLevelConfiguration {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name, "resourceVersion": "3"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": shares,
            "limitResponse": {"type": "Reject"}}},
        "status": {}
    }))
    .expect("a PriorityLevelConfiguration")
}

#[test]
fn objects_with_what_the_api_adds_load_as_files_would() {
    let mut objects = ClusterObjects::default();
    objects.replace(vec![level("team", 10)]);
    objects.replace(vec![flow_schema("alice", "team", "5")]);
    let loaded = objects.load().expect("loads");
    let schema = loaded
        .config
        .flow_schemas()
        .iter()
        .find(|fs| fs.name == "alice")
        .expect("alice's FlowSchema");
    assert_eq!(schema.priority_level, "team");
    assert_eq!(schema.uid, "uid-alice", "the API's UID is kept");
    assert!(loaded.config.priority_level("team").is_some());
    // The mandatory objects are implied, as for a directory.
    assert!(loaded.config.priority_level("exempt").is_some());
    assert!(loaded.config.priority_level("catch-all").is_some());
}

#[test]
fn an_invalid_object_is_named_with_its_field_path() {
    let mut objects = ClusterObjects::default();
    objects.replace(vec![level("team", -1)]);
    let Err(ConfigError::Invalid { problems, .. }) = objects.load() else {
        panic!("a negative share is invalid");
    };
    let text = problems[0].to_string();
    assert!(
        text.starts_with("<cluster>/prioritylevelconfigurations: PriorityLevelConfiguration/team: spec.limited.nominalConcurrencyShares"),
        "{text}"
    );
}

#[test]
fn watch_events_add_change_delete_and_move_the_resource_version() {
    let mut objects = ClusterObjects::default();
    let mut rv = "1".to_string();
    let added = objects.apply(WatchEvent::Added(flow_schema("a", "x", "2")), &mut rv);
    assert_eq!((added, rv.as_str()), (Applied::Changed, "2"));
    objects.apply(WatchEvent::Modified(flow_schema("a", "y", "3")), &mut rv);
    let spec = objects.flow_schemas["a"].spec.as_ref().expect("spec");
    let spec_level = &spec.priority_level_configuration.name;
    assert_eq!((spec_level.as_str(), rv.as_str()), ("y", "3"));
    objects.apply(WatchEvent::Deleted(flow_schema("a", "y", "4")), &mut rv);
    assert!(objects.flow_schemas.is_empty());
    assert_eq!(rv, "4");
    let bookmark: WatchEvent<FlowSchema> = WatchEvent::Bookmark {
        annotations: Default::default(),
        resource_version: "9".into(),
    };
    assert_eq!(objects.apply(bookmark, &mut rv), Applied::Bookmark);
    assert_eq!(rv, "9");
}

#[test]
fn a_410_error_event_means_list_again() {
    let gone: WatchEvent<FlowSchema> = serde_json::from_str(
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#,
    )
    .expect("event");
    let mut rv = "1".to_string();
    assert_eq!(
        ClusterObjects::default().apply(gone, &mut rv),
        Applied::Expired
    );
    let other: WatchEvent<FlowSchema> = serde_json::from_str(
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"boom","code":500}}"#,
    )
    .expect("event");
    assert_eq!(
        ClusterObjects::default().apply(other, &mut rv),
        Applied::Error("boom".into())
    );
}

#[test]
fn paths_are_the_v1_collections() {
    assert_eq!(
        collection_path::<FlowSchema>(),
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas"
    );
    assert_eq!(
        collection_path::<PriorityLevelConfiguration>(),
        "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations"
    );
}
