//! From the model back to raw objects, and from raw objects to `flowcontrol.apiserver.k8s.io/v1`
//! YAML values (for `config dump` and for comparing against the mandatory objects).

use crate::yaml::{Mapping, Value};

use super::*;
use crate::config::model::*;

// === impl From<model> for raw ===

impl From<&FlowSchema> for RawFlowSchema {
    fn from(fs: &FlowSchema) -> Self {
        RawFlowSchema {
            version: ApiVersion::V1,
            meta: meta(&fs.name, &fs.uid),
            spec: RawFlowSchemaSpec {
                priority_level_name: fs.priority_level.clone(),
                matching_precedence: fs.matching_precedence,
                distinguisher_method: fs.distinguisher_method.map(|d| {
                    match d {
                        DistinguisherMethod::ByUser => "ByUser",
                        DistinguisherMethod::ByNamespace => "ByNamespace",
                    }
                    .to_string()
                }),
                rules: fs.rules.iter().map(raw_rule).collect(),
            },
            status: RawStatus::default(),
        }
    }
}

fn meta(name: &str, uid: &str) -> RawMeta {
    RawMeta {
        name: name.to_string(),
        uid: uid.to_string(),
        ..RawMeta::default()
    }
}

fn raw_rule(rule: &PolicyRulesWithSubjects) -> RawPolicyRulesWithSubjects {
    RawPolicyRulesWithSubjects {
        subjects: rule.subjects.iter().map(raw_subject).collect(),
        resource_rules: rule
            .resource_rules
            .iter()
            .map(|r| RawResourcePolicyRule {
                verbs: r.verbs.clone(),
                api_groups: r.api_groups.clone(),
                resources: r.resources.clone(),
                cluster_scope: r.cluster_scope,
                namespaces: r.namespaces.clone(),
            })
            .collect(),
        non_resource_rules: rule
            .non_resource_rules
            .iter()
            .map(|r| RawNonResourcePolicyRule {
                verbs: r.verbs.clone(),
                non_resource_urls: r.non_resource_urls.clone(),
            })
            .collect(),
    }
}

fn raw_subject(subject: &Subject) -> RawSubject {
    match subject {
        Subject::User { name } => RawSubject {
            kind: "User".to_string(),
            user: Some(name.clone()),
            ..RawSubject::default()
        },
        Subject::Group { name } => RawSubject {
            kind: "Group".to_string(),
            group: Some(name.clone()),
            ..RawSubject::default()
        },
        Subject::ServiceAccount { namespace, name } => RawSubject {
            kind: "ServiceAccount".to_string(),
            service_account: Some(RawServiceAccount {
                namespace: namespace.clone(),
                name: name.clone(),
            }),
            ..RawSubject::default()
        },
    }
}

/// A model count back in its API field's type (`int32`). The model's counts were read from those
/// fields, so they fit; a larger one (built by hand) is written as the largest `int32`.
fn int32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

impl From<&PriorityLevel> for RawPriorityLevelConfiguration {
    fn from(pl: &PriorityLevel) -> Self {
        let spec = match &pl.spec {
            PriorityLevelSpec::Exempt {
                nominal_concurrency_shares,
                lendable_percent,
            } => RawPriorityLevelSpec {
                type_: "Exempt".to_string(),
                limited: None,
                exempt: Some(RawExempt {
                    nominal_concurrency_shares: Some(int32(*nominal_concurrency_shares)),
                    lendable_percent: Some(int32(*lendable_percent)),
                }),
            },
            PriorityLevelSpec::Limited(l) => RawPriorityLevelSpec {
                type_: "Limited".to_string(),
                limited: Some(RawLimited {
                    shares: Some(int32(l.nominal_concurrency_shares)),
                    lendable_percent: Some(int32(l.lendable_percent)),
                    borrowing_limit_percent: l.borrowing_limit_percent.map(int32),
                    limit_response: match l.limit_response {
                        LimitResponse::Reject => RawLimitResponse {
                            type_: "Reject".to_string(),
                            queuing: None,
                        },
                        LimitResponse::Queue(q) => RawLimitResponse {
                            type_: "Queue".to_string(),
                            queuing: Some(RawQueuing {
                                queues: int32(q.queues),
                                hand_size: int32(q.hand_size),
                                queue_length_limit: int32(q.queue_length_limit),
                            }),
                        },
                    },
                }),
                exempt: None,
            },
        };
        RawPriorityLevelConfiguration {
            version: ApiVersion::V1,
            meta: meta(&pl.name, &pl.uid),
            spec,
            status: RawStatus::default(),
        }
    }
}

// === v1 YAML ===

/// A small builder that keeps keys in insertion order.
struct Obj(Mapping);

impl Obj {
    fn new() -> Obj {
        Obj(Mapping::new())
    }

    fn set(mut self, key: &str, value: impl Into<Value>) -> Obj {
        self.0.insert(Value::from(key), value.into());
        self
    }

    fn set_some<T: Into<Value>>(self, key: &str, value: Option<T>) -> Obj {
        match value {
            Some(v) => self.set(key, v),
            None => self,
        }
    }

    fn done(self) -> Value {
        Value::Mapping(self.0)
    }
}

fn strings(list: &[String]) -> Value {
    Value::Sequence(list.iter().map(|s| Value::from(s.as_str())).collect())
}

fn name_obj(name: &str) -> Value {
    Obj::new().set("name", name).done()
}

fn meta_value(meta: &RawMeta) -> Value {
    let uid = (!meta.uid.is_empty()).then(|| meta.uid.clone());
    Obj::new()
        .set("name", meta.name.as_str())
        .set_some("uid", uid)
        .done()
}

impl RawFlowSchema {
    /// This FlowSchema as a `flowcontrol.apiserver.k8s.io/v1` object (status left out).
    pub fn to_v1_value(&self) -> Value {
        let s = &self.spec;
        let dm = s
            .distinguisher_method
            .as_deref()
            .map(|t| Obj::new().set("type", t).done());
        let spec = Obj::new()
            .set(
                "priorityLevelConfiguration",
                name_obj(&s.priority_level_name),
            )
            .set("matchingPrecedence", s.matching_precedence)
            .set_some("distinguisherMethod", dm)
            .set(
                "rules",
                Value::Sequence(s.rules.iter().map(rule_value).collect()),
            );
        Obj::new()
            .set("apiVersion", ApiVersion::V1.to_string())
            .set("kind", "FlowSchema")
            .set("metadata", meta_value(&self.meta))
            .set("spec", spec.done())
            .done()
    }
}

fn rule_value(rule: &RawPolicyRulesWithSubjects) -> Value {
    let subjects = rule.subjects.iter().map(subject_value).collect();
    let resource: Vec<Value> = rule
        .resource_rules
        .iter()
        .map(|r| {
            Obj::new()
                .set("verbs", strings(&r.verbs))
                .set("apiGroups", strings(&r.api_groups))
                .set("resources", strings(&r.resources))
                .set_some("clusterScope", r.cluster_scope.then_some(true))
                .set("namespaces", strings(&r.namespaces))
                .done()
        })
        .collect();
    let non_resource: Vec<Value> = rule
        .non_resource_rules
        .iter()
        .map(|r| {
            Obj::new()
                .set("verbs", strings(&r.verbs))
                .set("nonResourceURLs", strings(&r.non_resource_urls))
                .done()
        })
        .collect();
    Obj::new()
        .set("subjects", Value::Sequence(subjects))
        .set_some(
            "resourceRules",
            (!resource.is_empty()).then_some(Value::Sequence(resource)),
        )
        .set_some(
            "nonResourceRules",
            (!non_resource.is_empty()).then_some(Value::Sequence(non_resource)),
        )
        .done()
}

fn subject_value(s: &RawSubject) -> Value {
    let sa = s.service_account.as_ref().map(|sa| {
        Obj::new()
            .set("namespace", sa.namespace.as_str())
            .set("name", sa.name.as_str())
            .done()
    });
    Obj::new()
        .set("kind", s.kind.as_str())
        .set_some("user", s.user.as_deref().map(name_obj))
        .set_some("group", s.group.as_deref().map(name_obj))
        .set_some("serviceAccount", sa)
        .done()
}

impl RawPriorityLevelConfiguration {
    /// This priority level as a `flowcontrol.apiserver.k8s.io/v1` object (status left out).
    pub fn to_v1_value(&self) -> Value {
        let s = &self.spec;
        let limited = s.limited.as_ref().map(|l| {
            let q = l.limit_response.queuing.map(|q| {
                Obj::new()
                    .set("queues", q.queues)
                    .set("handSize", q.hand_size)
                    .set("queueLengthLimit", q.queue_length_limit)
                    .done()
            });
            let lr = Obj::new()
                .set("type", l.limit_response.type_.as_str())
                .set_some("queuing", q);
            Obj::new()
                .set_some("nominalConcurrencyShares", l.shares)
                .set_some("lendablePercent", l.lendable_percent)
                .set_some("borrowingLimitPercent", l.borrowing_limit_percent)
                .set("limitResponse", lr.done())
                .done()
        });
        let exempt = s.exempt.as_ref().map(|e| {
            Obj::new()
                .set_some("nominalConcurrencyShares", e.nominal_concurrency_shares)
                .set_some("lendablePercent", e.lendable_percent)
                .done()
        });
        let spec = Obj::new()
            .set("type", s.type_.as_str())
            .set_some("limited", limited)
            .set_some("exempt", exempt);
        Obj::new()
            .set("apiVersion", ApiVersion::V1.to_string())
            .set("kind", "PriorityLevelConfiguration")
            .set("metadata", meta_value(&self.meta))
            .set("spec", spec.done())
            .done()
    }
}
