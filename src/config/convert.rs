//! Conversion of defaulted, validated raw objects into the model.
//!
//! Only called on objects without validation errors, so every union is well formed and every
//! count and percentage non-negative: the model holds them unsigned. An object that is not (a bug)
//! converts to `None` rather than panicking.

use super::model::*;
use super::raw::*;

/// A valid raw FlowSchema as the model's FlowSchema.
pub(in crate::config) fn flow_schema(fs: &RawFlowSchema) -> Option<FlowSchema> {
    let distinguisher_method = match fs.spec.distinguisher_method.as_deref() {
        None => None,
        Some("ByUser") => Some(DistinguisherMethod::ByUser),
        Some("ByNamespace") => Some(DistinguisherMethod::ByNamespace),
        Some(_) => return None,
    };
    let rules = fs.spec.rules.iter().map(rule).collect::<Option<Vec<_>>>()?;
    Some(FlowSchema {
        name: fs.meta.name.clone(),
        uid: fs.meta.uid.clone(),
        matching_precedence: fs.spec.matching_precedence,
        priority_level: fs.spec.priority_level_name.clone(),
        distinguisher_method,
        rules,
    })
}

fn rule(r: &RawPolicyRulesWithSubjects) -> Option<PolicyRulesWithSubjects> {
    Some(PolicyRulesWithSubjects {
        subjects: r.subjects.iter().map(subject).collect::<Option<_>>()?,
        resource_rules: r
            .resource_rules
            .iter()
            .map(|r| ResourcePolicyRule {
                verbs: r.verbs.clone(),
                api_groups: r.api_groups.clone(),
                resources: r.resources.clone(),
                cluster_scope: r.cluster_scope,
                namespaces: r.namespaces.clone(),
            })
            .collect(),
        non_resource_rules: r
            .non_resource_rules
            .iter()
            .map(|r| NonResourcePolicyRule {
                verbs: r.verbs.clone(),
                non_resource_urls: r.non_resource_urls.clone(),
            })
            .collect(),
    })
}

fn subject(s: &RawSubject) -> Option<Subject> {
    match s.kind.as_str() {
        "User" => Some(Subject::User {
            name: s.user.clone()?,
        }),
        "Group" => Some(Subject::Group {
            name: s.group.clone()?,
        }),
        "ServiceAccount" => {
            let sa = s.service_account.as_ref()?;
            Some(Subject::ServiceAccount {
                namespace: sa.namespace.clone(),
                name: sa.name.clone(),
            })
        }
        _ => None,
    }
}

/// A valid raw PriorityLevelConfiguration as the model's PriorityLevel.
pub(in crate::config) fn priority_level(
    pl: &RawPriorityLevelConfiguration,
) -> Option<PriorityLevel> {
    let spec = match pl.spec.type_.as_str() {
        "Exempt" => {
            let e = pl.spec.exempt.clone().unwrap_or_default();
            PriorityLevelSpec::Exempt {
                nominal_concurrency_shares: unsigned(e.nominal_concurrency_shares.unwrap_or(0))?,
                lendable_percent: unsigned(e.lendable_percent.unwrap_or(0))?,
            }
        }
        "Limited" => {
            let l = pl.spec.limited.as_ref()?;
            let limit_response = match (l.limit_response.type_.as_str(), l.limit_response.queuing) {
                ("Reject", None) => LimitResponse::Reject,
                ("Queue", Some(q)) => LimitResponse::Queue(Queuing {
                    queues: unsigned(q.queues)?,
                    hand_size: unsigned(q.hand_size)?,
                    queue_length_limit: unsigned(q.queue_length_limit)?,
                }),
                _ => return None,
            };
            PriorityLevelSpec::Limited(LimitedPriorityLevel {
                nominal_concurrency_shares: unsigned(l.shares?)?,
                lendable_percent: unsigned(l.lendable_percent.unwrap_or(0))?,
                borrowing_limit_percent: match l.borrowing_limit_percent {
                    Some(b) => Some(unsigned(b)?),
                    None => None,
                },
                limit_response,
            })
        }
        _ => return None,
    };
    Some(PriorityLevel {
        name: pl.meta.name.clone(),
        uid: pl.meta.uid.clone(),
        spec,
    })
}

/// A validated non-negative int32 field; `None` for a negative one (a bug: validation refuses it).
fn unsigned(v: i32) -> Option<u32> {
    u32::try_from(v).ok()
}
