//! Reviews of requests shaped as the apiserver sends them, against the bootstrap configuration.

use serde_json::{json, Value};

use super::*;
use crate::config::load::SourceFile;
use crate::config::parse::Format;
use crate::lint::LintOptions;

const LABEL: (&str, &str) = ("kube-apf-proxy.io/flowcontrol-config", "true");

pub(super) fn reviewer() -> Reviewer {
    let base = vec![SourceFile {
        name: "bootstrap.yaml".to_string(),
        bytes: crate::config::BOOTSTRAP_YAML.as_bytes().to_vec(),
        format: Format::Yaml,
    }];
    let label = (LABEL.0.to_string(), LABEL.1.to_string());
    Reviewer::new(base, LintOptions::default(), label).expect("bootstrap loads")
}

/// An AdmissionReview as kube-apiserver sends it for `object` (and `old` on UPDATE).
pub(super) fn review_body(
    operation: &str,
    object: &Value,
    old: Option<&Value>,
    dry_run: bool,
) -> Vec<u8> {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let resource = match kind {
        "FlowSchema" => "flowschemas",
        "PriorityLevelConfiguration" => "prioritylevelconfigurations",
        _ => "configmaps",
    };
    let name = object["metadata"]["name"].clone();
    let namespace = object["metadata"]["namespace"].clone();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": if operation == "CREATE" { "CreateOptions" } else { "UpdateOptions" }},
        }
    })
    .to_string()
    .into_bytes()
}

fn answer(body: &[u8]) -> AdmissionResponse {
    reviewer().review(&parse_review(body).expect("a valid review"))
}

fn flow_schema(version: &str, name: &str, precedence: i32, level: &str, subject: Value) -> Value {
    json!({
        "apiVersion": format!("flowcontrol.apiserver.k8s.io/{version}"),
        "kind": "FlowSchema",
        "metadata": {"name": name, "uid": "6b4f0b42-0000-4000-8000-000000000001", "resourceVersion": "1"},
        "spec": {
            "matchingPrecedence": precedence,
            "priorityLevelConfiguration": {"name": level},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [subject],
                "resourceRules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["*"]}]
            }]
        }
    })
}

fn alice() -> Value {
    json!({"kind": "User", "user": {"name": "alice"}})
}

#[test]
fn a_harmless_flow_schema_is_allowed_without_warnings_and_the_uid_is_echoed() {
    let fs = flow_schema("v1", "alice", 700, "workload-low", alice());
    let response = answer(&review_body("CREATE", &fs, None, false));
    assert_eq!(response.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert!(response.allowed);
    assert_eq!(response.warnings, Vec::<String>::new());
    assert!(response.audit_annotations.is_empty());
}

#[test]
fn an_invalid_object_is_denied_with_a_422_and_a_cause_per_field() {
    let plc = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "bad"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": -1,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 7, "handSize": 8, "queueLengthLimit": 50}}}}
    });
    let response = answer(&review_body("CREATE", &plc, None, false));
    assert!(!response.allowed);
    let status = response.status.expect("a status");
    assert_eq!(status.code, Some(422));
    assert_eq!(status.reason.as_deref(), Some("Invalid"));
    assert_eq!(status.status.as_deref(), Some("Failure"));
    let message = status.message.expect("message");
    assert!(
        message.starts_with(
            "PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io \"bad\" is invalid: ["
        ),
        "{message}"
    );
    let details = status.details.expect("details");
    assert_eq!(details.kind.as_deref(), Some("PriorityLevelConfiguration"));
    assert_eq!(
        details.group.as_deref(),
        Some("flowcontrol.apiserver.k8s.io")
    );
    let fields: Vec<_> = details
        .causes
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.field.unwrap_or_default(), c.reason.unwrap_or_default()))
        .collect();
    assert!(
        fields.contains(&(
            "spec.limited.nominalConcurrencyShares".to_string(),
            "FieldValueInvalid".to_string()
        )),
        "{fields:?}"
    );
    assert!(
        fields.contains(&(
            "spec.limited.limitResponse.queuing.handSize".to_string(),
            "FieldValueInvalid".to_string()
        )),
        "{fields:?}"
    );
}

#[test]
fn findings_warn_within_256_characters_and_name_their_codes_in_audit_annotations() {
    let everyone = json!({"kind": "Group", "group": {"name": "system:authenticated"}});
    let fs = flow_schema("v1", "everyone", 600, "exempt", everyone);
    let response = answer(&review_body("CREATE", &fs, None, false));
    assert!(response.allowed);
    assert!(!response.warnings.is_empty());
    for w in &response.warnings {
        assert!(w.chars().count() <= MAX_WARNING_CHARS, "{w}");
    }
    assert_eq!(
        response.audit_annotations["lint-codes"],
        "broad-subject-privileged-level"
    );
}

#[test]
fn a_new_schema_that_shadows_an_existing_one_is_reported_on_the_victim() {
    // Everything of system:authenticated at precedence 100 takes all that service-accounts sees.
    let everyone = json!({"kind": "Group", "group": {"name": "system:authenticated"}});
    let mut fs = flow_schema("v1", "grab-all", 100, "global-default", everyone);
    fs["spec"]["rules"][0]["resourceRules"] = json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]);
    fs["spec"]["rules"][0]["nonResourceRules"] =
        json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]);
    let response = answer(&review_body("CREATE", &fs, None, false));
    assert!(response.allowed);
    let text = &response.audit_annotations["lint-findings"];
    assert!(
        text.contains("FlowSchema/service-accounts: spec.rules: [flowschema-shadowed]"),
        "{text}"
    );
    assert!(
        !text.contains("FlowSchema/global-default: spec.rules"),
        "global-default is bootstrap's own; already shadowed? {text}"
    );
}

#[test]
fn an_update_replaces_the_old_object_and_dry_run_answers_the_same() {
    // global-default exists in the reference configuration: the update is no duplicate.
    let everyone = json!({"kind": "Group", "group": {"name": "system:authenticated"}});
    let old = flow_schema(
        "v1",
        "global-default",
        9900,
        "global-default",
        everyone.clone(),
    );
    let new = flow_schema("v1", "global-default", 9800, "global-default", everyone);
    for dry_run in [false, true] {
        let response = answer(&review_body("UPDATE", &new, Some(&old), dry_run));
        assert!(response.allowed, "{response:?}");
        assert!(response.status.is_none());
    }
}

#[test]
fn every_api_version_is_read_and_removed_ones_warn() {
    for version in ["v1beta1", "v1beta2", "v1beta3", "v1"] {
        let fs = flow_schema(version, "alice", 700, "workload-low", alice());
        let response = answer(&review_body("CREATE", &fs, None, false));
        assert!(response.allowed, "{version}");
        let warned = response
            .warnings
            .iter()
            .any(|w| w.contains("[api-version-removed]"));
        assert_eq!(
            warned,
            version != "v1",
            "{version}: {:?}",
            response.warnings
        );
    }
}

pub(super) fn configmap(labelled: bool, yaml: &str) -> Value {
    let labels = if labelled {
        json!({LABEL.0: LABEL.1})
    } else {
        json!({})
    };
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-apf-proxy-flowcontrol", "namespace": "kube-system", "labels": labels},
        "data": {"flowcontrol.yaml": yaml, "README": "not configuration"}
    })
}

#[test]
fn a_configmap_the_proxy_would_refuse_is_refused() {
    let bad = "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\nmetadata: {name: x}\nspec: {type: Limited}\n";
    let response = answer(&review_body(
        "UPDATE",
        &configmap(true, bad),
        Some(&configmap(true, "")),
        false,
    ));
    assert!(!response.allowed);
    let status = response.status.expect("status");
    assert_eq!(status.code, Some(422));
    let causes = status.details.and_then(|d| d.causes).unwrap_or_default();
    assert_eq!(causes[0].field.as_deref(), Some("data[flowcontrol.yaml]"));
    assert!(
        causes[0]
            .message
            .as_deref()
            .unwrap_or_default()
            .starts_with("PriorityLevelConfiguration/x: spec.limited: Required value"),
        "{causes:?}"
    );
    // Without the label it is none of the webhook's business.
    let response = answer(&review_body("UPDATE", &configmap(false, bad), None, false));
    assert!(response.allowed && response.warnings.is_empty());
    // The bootstrap configuration in a labelled ConfigMap is clean.
    let response = answer(&review_body(
        "CREATE",
        &configmap(true, crate::config::BOOTSTRAP_YAML),
        None,
        false,
    ));
    assert!(
        response.allowed && response.warnings.is_empty(),
        "{response:?}"
    );
}

#[test]
fn deletes_and_status_updates_are_allowed_unread() {
    let fs = flow_schema(
        "v1",
        "alice",
        1,
        "nowhere",
        json!({"kind": "Group", "group": {"name": "*"}}),
    );
    let response = answer(&review_body("DELETE", &fs, Some(&fs), false));
    assert!(response.allowed && response.warnings.is_empty());
}

#[test]
fn bodies_that_are_not_a_v1_review_are_errors() {
    let ok = String::from_utf8(review_body(
        "CREATE",
        &flow_schema("v1", "a", 700, "workload-low", alice()),
        None,
        false,
    ))
    .expect("utf-8");
    let cases: Vec<(String, &str)> = vec![
        ("not json".to_string(), "not_json"),
        (
            ok.replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1"),
            "unsupported_version",
        ),
        (ok.replace("\"AdmissionReview\"", "\"Pod\""), "wrong_kind"),
        (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_string(),
            "missing_request",
        ),
        (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}"#
                .to_string(),
            "missing_uid",
        ),
        (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}"#
                .to_string(),
            "not_json",
        ),
    ];
    for (body, reason) in cases {
        let err = parse_review(body.as_bytes()).expect_err(reason);
        assert_eq!(err.reason(), reason, "{body}");
    }
}

#[test]
fn a_response_is_the_v1_shape_the_apiserver_reads() {
    let fs = flow_schema("v1", "alice", 700, "workload-low", alice());
    let response = ReviewResponse::from(answer(&review_body("CREATE", &fs, None, false)));
    let v = serde_json::to_value(&response).expect("json");
    assert_eq!(
        v,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true}})
    );
}

#[test]
fn long_warnings_are_cut_at_a_word_within_the_apiservers_256_characters() {
    let word = "abcdefghi ";
    let long_word = "x".repeat(300);
    // (text, the result)
    let cases = [
        ("short".to_string(), "short".to_string()),
        (
            word.repeat(25).trim_end().to_string(),
            word.repeat(25).trim_end().to_string(),
        ),
        // 260 characters of ten-character words: 25 whole words fit before the marker.
        (
            word.repeat(26),
            format!("{}...", word.repeat(25).trim_end()),
        ),
        (long_word.clone(), format!("{}...", &long_word[..253])),
        (
            format!("é{}", word.repeat(30)),
            format!("é{}...", word.repeat(25).trim_end()),
        ),
    ];
    for (text, want) in cases {
        let got = super::review::shorten(&text);
        assert_eq!(got, want, "{text}");
        assert!(got.chars().count() <= MAX_WARNING_CHARS);
    }
}

#[test]
fn a_new_level_is_not_unused_before_its_flow_schemas_are_applied() {
    let plc = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "team-a"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 10,
            "limitResponse": {"type": "Reject"}}}
    });
    // (operation, warned unused)
    let cases = [("CREATE", false), ("UPDATE", true)];
    for (operation, unused) in cases {
        let old = (operation == "UPDATE").then_some(&plc);
        let response = answer(&review_body(operation, &plc, old, false));
        assert!(response.allowed, "{operation}");
        let warned = response
            .warnings
            .iter()
            .any(|w| w.contains("[priority-level-unused]"));
        assert_eq!(warned, unused, "{operation}: {:?}", response.warnings);
    }
}

#[test]
fn an_edit_the_apiservers_ensurer_would_undo_is_warned_about() {
    let level = |annotation: &str| {
        json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "global-default", "annotations": {"apf.kubernetes.io/autoupdate-spec": annotation}},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 100, "lendablePercent": 50,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}
        })
    };
    // (annotation, warned)
    for (annotation, warned) in [("true", true), ("false", false)] {
        let object = level(annotation);
        let response = answer(&review_body("UPDATE", &object, Some(&object), false));
        assert!(response.allowed, "{annotation}");
        let note = response
            .warnings
            .iter()
            .any(|w| w.starts_with("spec: a suggested object"));
        assert_eq!(note, warned, "{annotation}: {:?}", response.warnings);
        for w in &response.warnings {
            assert!(w.chars().count() <= MAX_WARNING_CHARS, "{w}");
        }
    }
}

#[test]
fn a_review_with_too_many_json_values_is_refused_before_parsing() {
    let values = "0,".repeat(MAX_REVIEW_VALUES);
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","object":{{"x":[{values}0]}}}}}}"#
    );
    assert_eq!(
        parse_review(body.as_bytes()).err(),
        Some(ReviewError::TooManyValues)
    );
    // Commas, brackets and escaped quotes inside strings are not values.
    let inside = format!(r#"{{"data":"\"{}"}}"#, ",[{".repeat(MAX_REVIEW_VALUES));
    assert_eq!(json_values(inside.as_bytes()), 1);
}
