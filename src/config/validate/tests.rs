//! One case per row of the validation table (reference section d), with the exact rendering.

use super::*;
use crate::config::defaults::default_flow_schema;
use crate::config::names::{LABEL_MSG, SUBDOMAIN_MSG};
use crate::config::raw::*;

fn fs_base() -> RawFlowSchema {
    let yaml = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: test}
spec:
  priorityLevelConfiguration: {name: workload-low}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - kind: User
      user: {name: alice}
    resourceRules:
    - verbs: [get]
      apiGroups: [""]
      resources: [pods]
      namespaces: [default]
    nonResourceRules:
    - verbs: [get]
      nonResourceURLs: [/healthz]
"#;
    let value: crate::yaml::Value = crate::yaml::from_str(yaml).unwrap();
    match decode_object(&value, "FlowSchema", ApiVersion::V1) {
        Some((RawObject::FlowSchema(fs), errs)) if errs.is_empty() => fs,
        other => panic!("bad base: {other:?}"),
    }
}

fn fs_errors(edit: impl FnOnce(&mut RawFlowSchema)) -> Vec<String> {
    let mut fs = fs_base();
    edit(&mut fs);
    default_flow_schema(&mut fs);
    validate_flow_schema(&fs)
        .iter()
        .map(ToString::to_string)
        .collect()
}

pub(super) fn s(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn rule0(fs: &mut RawFlowSchema) -> &mut RawPolicyRulesWithSubjects {
    &mut fs.spec.rules[0]
}

type FsCase = (
    &'static str,
    Box<dyn FnOnce(&mut RawFlowSchema)>,
    Vec<String>,
);

#[test]
fn flow_schema_validation_matches_the_apiserver() {
    let verbs_supported = "supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"";
    let rr = "spec.rules[0].resourceRules[0]";
    let nr = "spec.rules[0].nonResourceRules[0]";
    let sj = "spec.rules[0].subjects[0]";
    let cases: Vec<FsCase> = vec![
        ("base is valid", Box::new(|_| {}), vec![]),
        (
            "negative precedence",
            Box::new(|fs| fs.spec.matching_precedence = -1),
            s(&["spec.matchingPrecedence: Invalid value: -1: must be a positive value"]),
        ),
        ("zero precedence defaults to 1000", Box::new(|fs| fs.spec.matching_precedence = 0), vec![]),
        (
            "precedence above 10000",
            Box::new(|fs| fs.spec.matching_precedence = 10001),
            s(&["spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"]),
        ),
        (
            "precedence 1 on another schema",
            Box::new(|fs| fs.spec.matching_precedence = 1),
            s(&["spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"]),
        ),
        (
            "unknown distinguisher",
            Box::new(|fs| fs.spec.distinguisher_method = Some("ByFoo".into())),
            s(&["spec.distinguisherMethod.type: Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:\"ByFoo\"}: supported values: \"ByNamespace\", \"ByUser\""]),
        ),
        (
            "missing priority level",
            Box::new(|fs| fs.spec.priority_level_name.clear()),
            s(&["spec.priorityLevelConfiguration.name: Required value: must reference a priority level"]),
        ),
        (
            "priority level not a subdomain",
            Box::new(|fs| fs.spec.priority_level_name = "Bad_Name".into()),
            vec![format!("spec.priorityLevelConfiguration.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}")],
        ),
        (
            "no subjects",
            Box::new(|fs| rule0(fs).subjects.clear()),
            s(&["spec.rules[0].subjects: Required value: subjects must contain at least one value"]),
        ),
        (
            "no rules of either kind",
            Box::new(|fs| {
                rule0(fs).resource_rules.clear();
                rule0(fs).non_resource_rules.clear();
            }),
            s(&["spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty"]),
        ),
        (
            "unknown subject kind",
            Box::new(|fs| rule0(fs).subjects[0].kind = "Foo".into()),
            vec![format!("{sj}.kind: Unsupported value: \"Foo\": supported values: \"Group\", \"ServiceAccount\", \"User\"")],
        ),
        (
            "user kind without user",
            Box::new(|fs| rule0(fs).subjects[0].user = None),
            vec![format!("{sj}.user: Required value: user is required when subject kind is 'User'")],
        ),
        (
            "group kind without group, with user",
            Box::new(|fs| rule0(fs).subjects[0].kind = "Group".into()),
            vec![
                format!("{sj}.group: Required value: group is required when subject kind is 'Group'"),
                format!("{sj}.user: Forbidden: user is forbidden when subject kind is not 'User'"),
            ],
        ),
        (
            "service account kind with user and group",
            Box::new(|fs| {
                let sub = &mut rule0(fs).subjects[0];
                sub.kind = "ServiceAccount".into();
                sub.group = Some("g".into());
            }),
            vec![
                format!("{sj}.serviceAccount: Required value: serviceAccount is required when subject kind is 'ServiceAccount'"),
                format!("{sj}.user: Forbidden: user is forbidden when subject kind is not 'User'"),
                format!("{sj}.group: Forbidden: group is forbidden when subject kind is not 'Group'"),
            ],
        ),
        (
            "user with service account member",
            Box::new(|fs| rule0(fs).subjects[0].service_account = Some(RawServiceAccount::default())),
            vec![format!("{sj}.serviceAccount: Forbidden: serviceAccount is forbidden when subject kind is not 'ServiceAccount'")],
        ),
        (
            "empty user name",
            Box::new(|fs| rule0(fs).subjects[0].user = Some(String::new())),
            vec![format!("{sj}.user.name: Required value")],
        ),
        (
            "empty service account name and namespace",
            Box::new(|fs| {
                let sub = &mut rule0(fs).subjects[0];
                sub.kind = "ServiceAccount".into();
                sub.user = None;
                sub.service_account = Some(RawServiceAccount::default());
            }),
            vec![
                format!("{sj}.serviceAccount.name: Required value"),
                format!("{sj}.serviceAccount.namespace: Required value: must specify namespace for service account"),
            ],
        ),
        (
            "bad service account name and namespace",
            Box::new(|fs| {
                let sub = &mut rule0(fs).subjects[0];
                sub.kind = "ServiceAccount".into();
                sub.user = None;
                sub.service_account = Some(RawServiceAccount {
                    namespace: "kube.system".into(),
                    name: "Bad".into(),
                });
            }),
            vec![
                format!("{sj}.serviceAccount.name: Invalid value: \"Bad\": {SUBDOMAIN_MSG}"),
                format!("{sj}.serviceAccount.namespace: Invalid value: \"kube.system\": must not contain dots"),
            ],
        ),
        (
            "service account name * is allowed",
            Box::new(|fs| {
                let sub = &mut rule0(fs).subjects[0];
                sub.kind = "ServiceAccount".into();
                sub.user = None;
                sub.service_account = Some(RawServiceAccount {
                    namespace: "kube-system".into(),
                    name: "*".into(),
                });
            }),
            vec![],
        ),
        (
            "empty verbs",
            Box::new(|fs| {
                rule0(fs).resource_rules[0].verbs.clear();
                rule0(fs).non_resource_rules[0].verbs.clear();
            }),
            vec![
                format!("{rr}.verbs: Required value: verbs must contain at least one value"),
                format!("{nr}.verbs: Required value: verbs must contain at least one value"),
            ],
        ),
        (
            "wildcard verb with others",
            Box::new(|fs| rule0(fs).resource_rules[0].verbs = s(&["*", "get"])),
            vec![format!("{rr}.verbs: Invalid value: []string{{\"*\", \"get\"}}: if '*' is present, must not specify other verbs")],
        ),
        (
            "unsupported verbs, also for non-resource rules",
            Box::new(|fs| {
                rule0(fs).resource_rules[0].verbs = s(&["get", "post"]);
                rule0(fs).non_resource_rules[0].verbs = s(&["head"]);
            }),
            vec![
                format!("{rr}.verbs: Unsupported value: []string{{\"get\", \"post\"}}: {verbs_supported}"),
                format!("{nr}.verbs: Unsupported value: []string{{\"head\"}}: {verbs_supported}"),
            ],
        ),
        (
            "empty api groups, resources and namespaces",
            Box::new(|fs| {
                let r = &mut rule0(fs).resource_rules[0];
                r.api_groups.clear();
                r.resources.clear();
                r.namespaces.clear();
            }),
            vec![
                format!("{rr}.apiGroups: Required value: resource rules must supply at least one api group"),
                format!("{rr}.resources: Required value: resource rules must supply at least one resource"),
                format!("{rr}.namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace"),
            ],
        ),
        (
            "no namespaces but cluster scope",
            Box::new(|fs| {
                let r = &mut rule0(fs).resource_rules[0];
                r.namespaces.clear();
                r.cluster_scope = true;
            }),
            vec![],
        ),
        (
            "wildcards mixed in groups, resources, namespaces",
            Box::new(|fs| {
                let r = &mut rule0(fs).resource_rules[0];
                r.api_groups = s(&["*", "apps"]);
                r.resources = s(&["pods", "*"]);
                r.namespaces = s(&["*", "default"]);
            }),
            vec![
                format!("{rr}.apiGroups: Invalid value: []string{{\"*\", \"apps\"}}: if '*' is present, must not specify other api groups"),
                format!("{rr}.resources: Invalid value: []string{{\"pods\", \"*\"}}: if '*' is present, must not specify other resources"),
                format!("{rr}.namespaces: Invalid value: []string{{\"*\", \"default\"}}: if '*' is present, must not specify other namespaces"),
            ],
        ),
        (
            "namespace not a label",
            Box::new(|fs| rule0(fs).resource_rules[0].namespaces = s(&["ok", "Not_OK"])),
            vec![format!("{rr}.namespaces[1]: Invalid value: \"Not_OK\": each member of this list must be '*' or a DNS-1123 label; {LABEL_MSG}")],
        ),
        (
            "empty non-resource URLs",
            Box::new(|fs| rule0(fs).non_resource_rules[0].non_resource_urls.clear()),
            vec![format!("{nr}.nonResourceURLs: Required value: nonResourceURLs must contain at least one value")],
        ),
        (
            "wildcard URL with others",
            Box::new(|fs| rule0(fs).non_resource_rules[0].non_resource_urls = s(&["*", "/x"])),
            vec![format!("{nr}.nonResourceURLs: Invalid value: []string{{\"*\", \"/x\"}}: if '*' is present, must not specify other non-resource URLs")],
        ),
        (
            "bad URLs",
            Box::new(|fs| {
                rule0(fs).non_resource_rules[0].non_resource_urls =
                    s(&["", "/", "x", "/a b", "/a//b", "/a*", "/*/*", "/apis/*"])
            }),
            vec![
                format!("{nr}.nonResourceURLs[0]: Invalid value: \"\": must not be empty"),
                format!("{nr}.nonResourceURLs[2]: Invalid value: \"x\": must start with slash"),
                format!("{nr}.nonResourceURLs[3]: Invalid value: \"/a b\": must not contain white-space"),
                format!("{nr}.nonResourceURLs[4]: Invalid value: \"/a//b\": must not contain double slash"),
                format!("{nr}.nonResourceURLs[5]: Invalid value: \"/a*\": wildcard can only do suffix matching"),
                format!("{nr}.nonResourceURLs[6]: Invalid value: \"/*/*\": wildcard can only do suffix matching"),
            ],
        ),
        (
            "mandatory exempt schema changed",
            Box::new(|fs| fs.meta.name = "exempt".into()),
            s(&["spec: Invalid value: spec of 'exempt' must equal the fixed value"]),
        ),
        (
            "mandatory catch-all schema changed",
            Box::new(|fs| fs.meta.name = "catch-all".into()),
            s(&["spec: Invalid value: spec of 'catch-all' must equal the fixed value"]),
        ),
        (
            "duplicate and empty condition types",
            Box::new(|fs| fs.status.condition_types = s(&["Dangling", "Dangling", ""])),
            s(&[
                "status.conditions[1].type: Duplicate value: \"Dangling\"",
                "status.conditions[2].type: Required value: must not be empty",
            ]),
        ),
        (
            "missing name and a namespace",
            Box::new(|fs| {
                fs.meta.name.clear();
                fs.meta.namespace = "default".into();
            }),
            s(&[
                "metadata.name: Required value: name or generateName is required",
                "metadata.namespace: Forbidden: not allowed on this type",
            ]),
        ),
        (
            "name not a subdomain",
            Box::new(|fs| fs.meta.name = "Test".into()),
            vec![format!("metadata.name: Invalid value: \"Test\": {SUBDOMAIN_MSG}")],
        ),
    ];
    for (name, edit, want) in cases {
        assert_eq!(fs_errors(edit), want, "case: {name}");
    }
}

#[test]
fn mandatory_flow_schemas_with_fixed_spec_are_valid() {
    for mandatory in [
        crate::config::mandatory::exempt_flow_schema(),
        crate::config::mandatory::catch_all_flow_schema(),
    ] {
        let raw = RawFlowSchema::from(&mandatory);
        assert_eq!(validate_flow_schema(&raw), vec![], "{}", mandatory.name);
    }
}

#[test]
fn label_and_annotation_keys_are_validated() {
    let got = fs_errors(|fs| {
        fs.meta.labels.insert("ok".into(), "-bad".into());
        fs.meta
            .annotations
            .insert("Example.COM/Key".into(), String::new());
        fs.meta.annotations.insert("/x".into(), String::new());
    });
    assert_eq!(
        got,
        [
            "metadata.labels: Invalid value: \"-bad\": a valid label must be an empty string or \
             consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for \
             validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            "metadata.annotations: Invalid value: \"/x\": prefix part must be non-empty",
        ]
    );
}

mod priority_level;
