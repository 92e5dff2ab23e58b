//! Test support: request and identity builders, and Kubernetes' bootstrap configuration built by
//! hand from `shared/spec/bootstrap-config.yaml` (section j), so the golden tests do not depend
//! on the YAML loader.

use crate::auth::Identity;
use crate::config::{
    Config, DistinguisherMethod, FlowSchema, LimitResponse, LimitedPriorityLevel,
    NonResourcePolicyRule, PolicyRulesWithSubjects, PriorityLevel, PriorityLevelSpec, Queuing,
    ResourcePolicyRule, Subject,
};
use crate::request_info::RequestInfo;

/// A resource request.
pub(crate) fn resource(
    verb: &str,
    api_group: &str,
    namespace: &str,
    resource: &str,
    subresource: &str,
) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: verb.into(),
        api_group: api_group.into(),
        namespace: namespace.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        ..RequestInfo::default()
    }
}

/// A non-resource request.
pub(crate) fn non_resource(verb: &str, path: &str) -> RequestInfo {
    RequestInfo {
        verb: verb.into(),
        path: path.into(),
        ..RequestInfo::default()
    }
}

/// An authenticated user (`system:authenticated` added).
pub(crate) fn user(name: &str, groups: &[&str]) -> Identity {
    Identity::authenticated(name, "", strings(groups))
}

/// A caller with exactly these groups (nothing added).
pub(crate) fn raw_user(name: &str, groups: &[&str]) -> Identity {
    Identity {
        user: name.into(),
        groups: strings(groups),
        ..Identity::default()
    }
}

pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

pub(crate) fn group(name: &str) -> Subject {
    Subject::Group { name: name.into() }
}

pub(crate) fn user_subject(name: &str) -> Subject {
    Subject::User { name: name.into() }
}

pub(crate) fn service_account(namespace: &str, name: &str) -> Subject {
    Subject::ServiceAccount {
        namespace: namespace.into(),
        name: name.into(),
    }
}

pub(crate) fn resource_rule(
    verbs: &[&str],
    api_groups: &[&str],
    resources: &[&str],
    namespaces: &[&str],
    cluster_scope: bool,
) -> ResourcePolicyRule {
    ResourcePolicyRule {
        verbs: strings(verbs),
        api_groups: strings(api_groups),
        resources: strings(resources),
        cluster_scope,
        namespaces: strings(namespaces),
    }
}

pub(crate) fn non_resource_rule(verbs: &[&str], urls: &[&str]) -> NonResourcePolicyRule {
    NonResourcePolicyRule {
        verbs: strings(verbs),
        non_resource_urls: strings(urls),
    }
}

/// A rule covering every resource and non-resource request of its subjects.
pub(crate) fn everything(subjects: Vec<Subject>) -> PolicyRulesWithSubjects {
    PolicyRulesWithSubjects {
        subjects,
        resource_rules: vec![resource_rule(&["*"], &["*"], &["*"], &["*"], true)],
        non_resource_rules: vec![non_resource_rule(&["*"], &["*"])],
    }
}

pub(crate) fn flow_schema(
    name: &str,
    precedence: i32,
    level: &str,
    method: Option<DistinguisherMethod>,
    rules: Vec<PolicyRulesWithSubjects>,
) -> FlowSchema {
    FlowSchema {
        name: name.into(),
        uid: String::new(),
        matching_precedence: precedence,
        priority_level: level.into(),
        distinguisher_method: method,
        rules,
    }
}

/// A `Limited` level; `queuing` `None` means `Reject`.
pub(crate) fn limited(
    name: &str,
    shares: u32,
    lendable: u32,
    queuing: Option<(u32, u32)>,
) -> PriorityLevel {
    let limit_response = match queuing {
        None => LimitResponse::Reject,
        Some((queues, hand_size)) => LimitResponse::Queue(Queuing {
            queues,
            hand_size,
            queue_length_limit: 50,
        }),
    };
    PriorityLevel {
        name: name.into(),
        uid: String::new(),
        spec: PriorityLevelSpec::Limited(LimitedPriorityLevel {
            nominal_concurrency_shares: shares,
            lendable_percent: lendable,
            borrowing_limit_percent: None,
            limit_response,
        }),
    }
}

/// Kubernetes' bootstrap configuration (mandatory + suggested objects).
pub(crate) fn bootstrap_config() -> Config {
    use crate::config::mandatory;
    use DistinguisherMethod::{ByNamespace, ByUser};
    let levels = vec![
        mandatory::exempt_priority_level(),
        mandatory::catch_all_priority_level(),
        limited("system", 30, 33, Some((64, 6))),
        limited("node-high", 40, 25, Some((64, 6))),
        limited("leader-election", 10, 0, Some((16, 4))),
        limited("workload-high", 40, 50, Some((128, 6))),
        limited("workload-low", 100, 90, Some((128, 6))),
        limited("global-default", 20, 50, Some((128, 6))),
    ];
    let all_users = || {
        vec![
            group("system:unauthenticated"),
            group("system:authenticated"),
        ]
    };
    let flow_schemas = vec![
        mandatory::exempt_flow_schema(),
        mandatory::catch_all_flow_schema(),
        flow_schema(
            "probes",
            2,
            "exempt",
            None,
            vec![PolicyRulesWithSubjects {
                subjects: all_users(),
                resource_rules: vec![],
                non_resource_rules: vec![non_resource_rule(
                    &["get"],
                    &["/healthz", "/readyz", "/livez"],
                )],
            }],
        ),
        flow_schema(
            "system-leader-election",
            100,
            "leader-election",
            Some(ByUser),
            vec![PolicyRulesWithSubjects {
                subjects: vec![
                    user_subject("system:kube-controller-manager"),
                    user_subject("system:kube-scheduler"),
                    service_account("kube-system", "*"),
                ],
                resource_rules: vec![resource_rule(
                    &["get", "create", "update"],
                    &["coordination.k8s.io"],
                    &["leases"],
                    &["*"],
                    false,
                )],
                non_resource_rules: vec![],
            }],
        ),
        flow_schema(
            "system-node-high",
            400,
            "node-high",
            Some(ByUser),
            vec![PolicyRulesWithSubjects {
                subjects: vec![group("system:nodes")],
                resource_rules: vec![
                    resource_rule(&["*"], &[""], &["nodes", "nodes/status"], &["*"], true),
                    resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], &["*"], false),
                ],
                non_resource_rules: vec![],
            }],
        ),
        flow_schema(
            "system-nodes",
            500,
            "system",
            Some(ByUser),
            vec![everything(vec![group("system:nodes")])],
        ),
        flow_schema(
            "kube-controller-manager",
            800,
            "workload-high",
            Some(ByNamespace),
            vec![everything(vec![user_subject(
                "system:kube-controller-manager",
            )])],
        ),
        flow_schema(
            "kube-scheduler",
            800,
            "workload-high",
            Some(ByNamespace),
            vec![everything(vec![user_subject("system:kube-scheduler")])],
        ),
        flow_schema(
            "kube-system-service-accounts",
            900,
            "workload-high",
            Some(ByNamespace),
            vec![everything(vec![service_account("kube-system", "*")])],
        ),
        flow_schema(
            "service-accounts",
            9000,
            "workload-low",
            Some(ByUser),
            vec![everything(vec![group("system:serviceaccounts")])],
        ),
        flow_schema(
            "global-default",
            9900,
            "global-default",
            Some(ByUser),
            vec![everything(all_users())],
        ),
    ];
    Config::resolve(flow_schemas, levels)
}
