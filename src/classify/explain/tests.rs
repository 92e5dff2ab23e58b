//! The explanation agrees with the decision, and names the field that failed.

use super::*;
use crate::classify::MatchIndex;
use crate::classify::{classify, Mismatch};
use crate::config::{ResourcePolicyRule, Subject};

fn info(method: &str, target: &str) -> RequestInfo {
    crate::request_info::parse(method, target).expect("parses")
}

fn user(name: &str, groups: &[&str]) -> Identity {
    Identity::authenticated(name, "", groups.iter().map(|g| g.to_string()).collect())
}

#[test]
fn the_explanation_ends_at_the_schema_classify_chooses() {
    let config = crate::config::bootstrap();
    let callers = [
        Identity::anonymous(),
        user("alice", &[]),
        user("system:kube-controller-manager", &[]),
        user("system:node:n1", &["system:nodes"]),
        user(
            "system:serviceaccount:kube-system:x",
            &["system:serviceaccounts"],
        ),
        user("root", &["system:masters"]),
    ];
    let requests = [
        ("GET", "/api/v1/namespaces/ns/pods"),
        ("GET", "/api/v1/nodes"),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x",
        ),
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("POST", "/apis/apps/v1/namespaces/ns/deployments"),
    ];
    for id in &callers {
        for (method, target) in requests {
            let info = info(method, target);
            let explained = explain(&config, id, &info);
            let chosen = classify(&MatchIndex::of(&config), id, &info);
            let last = explained.flow_schemas.last().expect("tried one");
            assert!(last.matched);
            assert_eq!(
                last.name, chosen.flow_schema.name,
                "{} {method} {target}",
                id.user
            );
            assert!(explained.flow_schemas[..explained.flow_schemas.len() - 1]
                .iter()
                .all(|t| !t.matched));
            assert_eq!(
                explained.flow_schemas.len() + explained.not_tried,
                config.flow_schemas().len()
            );
        }
    }
}

#[test]
fn each_failing_field_is_named() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let rule = ResourcePolicyRule {
        verbs: s(&["get"]),
        api_groups: s(&["apps"]),
        resources: s(&["deployments"]),
        cluster_scope: false,
        namespaces: s(&["prod"]),
    };
    let cases = [
        ("GET", "/apis/apps/v1/namespaces/prod/deployments/x", None),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/prod/deployments/x",
            Some(Mismatch::Verb),
        ),
        (
            "GET",
            "/apis/apps/v1/namespaces/prod/statefulsets/x",
            Some(Mismatch::Resource),
        ),
        (
            "GET",
            "/apis/extensions/v1beta1/namespaces/prod/deployments/x",
            Some(Mismatch::ApiGroup),
        ),
        ("GET", "/apis/apps/v1/deployments", Some(Mismatch::Verb)),
        (
            "GET",
            "/apis/apps/v1/namespaces/dev/deployments/x",
            Some(Mismatch::Namespace),
        ),
    ];
    for (method, target, want) in cases {
        let got = crate::classify::resource_rule_mismatch(&rule, &info(method, target));
        // A list across namespaces is verb `list`: the verb fails before the scope.
        assert_eq!(got, want, "{method} {target}");
    }
    let mut cluster = rule.clone();
    cluster.verbs = s(&["list"]);
    let got = crate::classify::resource_rule_mismatch(
        &cluster,
        &info("GET", "/apis/apps/v1/deployments"),
    );
    assert_eq!(got, Some(Mismatch::ClusterScope));
}

#[test]
fn the_text_names_subjects_and_entries() {
    let fs = FlowSchema {
        name: "ops".to_string(),
        uid: String::new(),
        matching_precedence: 500,
        priority_level: "workload-high".to_string(),
        distinguisher_method: None,
        rules: vec![crate::config::PolicyRulesWithSubjects {
            subjects: vec![
                Subject::User {
                    name: "bob".to_string(),
                },
                Subject::Group {
                    name: "ops".to_string(),
                },
            ],
            resource_rules: vec![],
            non_resource_rules: vec![crate::config::NonResourcePolicyRule {
                verbs: vec!["get".to_string()],
                non_resource_urls: vec!["/metrics".to_string()],
            }],
        }],
    };
    let trial = try_schema(&fs, &user("alice", &["ops"]), &info("GET", "/healthz"));
    assert!(!trial.matched);
    assert_eq!(
        trial.rules[0].describe("nonResourceRules"),
        "subjects[1] names the caller; nonResourceRules[0]: nonResourceURLs does not match"
    );
    let trial = try_schema(&fs, &user("alice", &["ops"]), &info("GET", "/metrics"));
    assert!(trial.matched);
}
