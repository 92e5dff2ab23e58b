//! Flow-control configuration: FlowSchemas and PriorityLevelConfigurations.
//!
//! Loading runs in separate steps — read files → parse documents (every API version) → default →
//! validate (every problem, with its field path) → resolve — and ends in an immutable [`Config`].

pub mod model;
// PENDING: stubs of `bootstrap` and `load_dir` until the `config` branch is merged.
mod pending;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use model::*;
pub use pending::{bootstrap, load_dir, PendingConfigError};

/// A resolved configuration: what classification and the queues run on.
///
/// Immutable; a reload builds a new one and swaps it in whole.
#[derive(Debug, Clone)]
pub struct Config {
    /// FlowSchemas in matching order: dangling ones removed, sorted by precedence then name,
    /// mandatory `exempt` first and `catch-all` last when the files do not define them.
    flow_schemas: Vec<FlowSchemaRef>,
    /// Every priority level by name, mandatory ones implied.
    priority_levels: BTreeMap<String, PriorityLevelRef>,
    /// FlowSchemas skipped because their priority level does not exist, with the level's name.
    dangling: Vec<(FlowSchemaRef, String)>,
    /// The classification index over `flow_schemas`, built once here.
    match_index: Arc<crate::classify::MatchIndex>,
}

impl Config {
    /// Resolves validated objects as the apiserver's config digest does
    /// (mirrors `apf_controller.go: lockAndDigestConfigObjects`): dangling FlowSchemas are set
    /// aside (the check is made before mandatory levels are implied), the rest are sorted by
    /// `matchingPrecedence` then name, and the mandatory objects are implied where missing.
    ///
    /// Names must be unique within each kind (validation guarantees it); a later duplicate wins.
    pub fn resolve(flow_schemas: Vec<FlowSchema>, priority_levels: Vec<PriorityLevel>) -> Config {
        let mut levels: BTreeMap<String, PriorityLevelRef> = priority_levels
            .into_iter()
            .map(|pl| (pl.name.clone(), Arc::new(pl)))
            .collect();
        let (mut matching, dangling): (Vec<_>, Vec<_>) = flow_schemas
            .into_iter()
            .map(Arc::new)
            .partition(|fs| levels.contains_key(&fs.priority_level));
        let dangling = dangling
            .into_iter()
            .map(|fs| {
                let level = fs.priority_level.clone();
                (fs, level)
            })
            .collect();
        matching.sort_by(|a, b| {
            (a.matching_precedence, a.name.as_str()).cmp(&(b.matching_precedence, b.name.as_str()))
        });
        if !matching.iter().any(|fs| fs.name == model::EXEMPT) {
            matching.insert(0, Arc::new(mandatory::exempt_flow_schema()));
        }
        if !matching.iter().any(|fs| fs.name == model::CATCH_ALL) {
            matching.push(Arc::new(mandatory::catch_all_flow_schema()));
        }
        for pl in [
            mandatory::exempt_priority_level(),
            mandatory::catch_all_priority_level(),
        ] {
            levels
                .entry(pl.name.clone())
                .or_insert_with(|| Arc::new(pl));
        }
        let match_index = Arc::new(crate::classify::MatchIndex::new(&matching, &levels));
        Config {
            flow_schemas: matching,
            priority_levels: levels,
            dangling,
            match_index,
        }
    }

    /// FlowSchemas in matching order (first match wins).
    pub fn flow_schemas(&self) -> &[FlowSchemaRef] {
        &self.flow_schemas
    }

    /// The priority level of that name.
    pub fn priority_level(&self, name: &str) -> Option<&PriorityLevelRef> {
        self.priority_levels.get(name)
    }

    /// Every priority level, by name.
    pub fn priority_levels(&self) -> impl Iterator<Item = &PriorityLevelRef> {
        self.priority_levels.values()
    }

    /// The `catch-all` FlowSchema (always present after resolution).
    pub fn catch_all(&self) -> &FlowSchemaRef {
        self.flow_schemas
            .iter()
            .rev()
            .find(|fs| fs.name == model::CATCH_ALL)
            .expect("invariant: resolve always adds the catch-all FlowSchema")
    }

    /// FlowSchemas that reference a missing priority level, with that level's name.
    pub fn dangling(&self) -> &[(FlowSchemaRef, String)] {
        &self.dangling
    }

    /// The index [`crate::classify::classify`] finds the matching FlowSchema with.
    pub fn match_index(&self) -> &crate::classify::MatchIndex {
        &self.match_index
    }
}

/// The mandatory objects (`pkg/apis/flowcontrol/bootstrap/default.go`), implied when missing.
pub mod mandatory {
    use super::model::*;

    fn all_rules(subjects: Vec<Subject>) -> Vec<PolicyRulesWithSubjects> {
        let star = || vec!["*".to_string()];
        vec![PolicyRulesWithSubjects {
            subjects,
            resource_rules: vec![ResourcePolicyRule {
                verbs: star(),
                api_groups: star(),
                resources: star(),
                cluster_scope: true,
                namespaces: star(),
            }],
            non_resource_rules: vec![NonResourcePolicyRule {
                verbs: star(),
                non_resource_urls: star(),
            }],
        }]
    }

    fn group(name: &str) -> Subject {
        Subject::Group {
            name: name.to_string(),
        }
    }

    /// FlowSchema `exempt`: precedence 1, group `system:masters`, everything, to level `exempt`.
    pub fn exempt_flow_schema() -> FlowSchema {
        FlowSchema {
            name: EXEMPT.to_string(),
            uid: String::new(),
            matching_precedence: 1,
            priority_level: EXEMPT.to_string(),
            distinguisher_method: None,
            rules: all_rules(vec![group("system:masters")]),
        }
    }

    /// FlowSchema `catch-all`: precedence 10000, ByUser, every request, to level `catch-all`.
    pub fn catch_all_flow_schema() -> FlowSchema {
        FlowSchema {
            name: CATCH_ALL.to_string(),
            uid: String::new(),
            matching_precedence: 10000,
            priority_level: CATCH_ALL.to_string(),
            distinguisher_method: Some(DistinguisherMethod::ByUser),
            rules: all_rules(vec![
                group("system:unauthenticated"),
                group("system:authenticated"),
            ]),
        }
    }

    /// Priority level `exempt`: type Exempt, shares 0, lendable 0.
    pub fn exempt_priority_level() -> PriorityLevel {
        PriorityLevel {
            name: EXEMPT.to_string(),
            uid: String::new(),
            spec: PriorityLevelSpec::Exempt {
                nominal_concurrency_shares: 0,
                lendable_percent: 0,
            },
        }
    }

    /// Priority level `catch-all`: Limited, shares 5, lendable 0, Reject.
    pub fn catch_all_priority_level() -> PriorityLevel {
        PriorityLevel {
            name: CATCH_ALL.to_string(),
            uid: String::new(),
            spec: PriorityLevelSpec::Limited(LimitedPriorityLevel {
                nominal_concurrency_shares: 5,
                lendable_percent: 0,
                borrowing_limit_percent: None,
                limit_response: LimitResponse::Reject,
            }),
        }
    }
}
