//! A per-[`Config`](crate::config::Config) index that finds the first matching FlowSchema without
//! testing every one.
//!
//! The apiserver tests every FlowSchema in order. Here each rule (`spec.rules[]` entry) gets a
//! global number in matching order, and its subjects file it under the user name, group or
//! service-account namespace they name. Classifying a request then looks up only the lists that
//! the caller's user name and groups select; the request side is checked on those candidates,
//! and the lowest-numbered rule that matches wins — exactly the first match of a linear scan.
//! A per-rule [`Prefilter`] skips most candidates whose request side cannot match without
//! touching the rule itself.

mod prefilter;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

pub(crate) use self::prefilter::WordBuildHasher;
use self::prefilter::{Prefilter, RequestBits};
use super::rule::{request_matches, SERVICE_ACCOUNT_PREFIX, WILDCARD};
use crate::auth::Identity;
use crate::config::{Config, FlowSchemaRef, PriorityLevelRef, Subject};
use crate::request_info::RequestInfo;

/// Rule numbers in matching order, ascending and without duplicates.
type RuleList = Vec<u32>;

/// Subject name → rules.
type SubjectMap = HashMap<Box<str>, RuleList, WordBuildHasher>;

/// One rule, by number: where it is and its prefilter, stored inline so that skipping a
/// candidate reads one contiguous entry.
#[derive(Debug, Clone, Copy)]
struct IndexedRule {
    flow_schema: u32,
    rule: u32,
    prefilter: Prefilter,
}

/// Where a FlowSchema leads: the schema and its priority level.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) flow_schema: FlowSchemaRef,
    pub(crate) priority_level: PriorityLevelRef,
    /// The FlowSchema's name, shared by every request it classifies.
    pub(crate) flow_schema_name: Arc<str>,
}

/// The subject index of a resolved configuration. Immutable; built once per configuration.
#[derive(Clone)]
pub struct MatchIndex {
    /// Per FlowSchema (matching order): its schema and level.
    targets: Vec<Target>,
    /// Per rule number: the FlowSchema index, the rule's index within its `spec.rules`, and
    /// its prefilter.
    rules: Vec<IndexedRule>,
    /// Rules with a `User *` or `Group *` subject: candidates for every caller.
    everyone: RuleList,
    /// Rules by exact user name (`User` subjects and fully named `ServiceAccount` subjects).
    users: SubjectMap,
    /// Rules by group name.
    groups: SubjectMap,
    /// Rules with a `ServiceAccount` subject named `*`, by namespace.
    service_account_namespaces: SubjectMap,
    /// The index in `targets` of the `catch-all` FlowSchema.
    catch_all: usize,
}

impl MatchIndex {
    /// Indexes a resolved configuration's FlowSchemas, in its matching order. Built once per
    /// configuration (the flow-control snapshot keeps it beside the configuration).
    pub fn of(config: &Config) -> MatchIndex {
        let flow_schemas = config.flow_schemas();
        let mut index = MatchIndex {
            targets: Vec::with_capacity(flow_schemas.len()),
            rules: Vec::new(),
            everyone: Vec::new(),
            users: SubjectMap::default(),
            groups: SubjectMap::default(),
            service_account_namespaces: SubjectMap::default(),
            catch_all: 0,
        };
        for (fs_index, fs) in flow_schemas.iter().enumerate() {
            let priority_level = config
                .priority_level(&fs.priority_level)
                .expect("invariant: resolve sets dangling FlowSchemas aside")
                .clone();
            if fs.name == crate::config::CATCH_ALL {
                index.catch_all = fs_index;
            }
            index.targets.push(Target {
                flow_schema: fs.clone(),
                priority_level,
                flow_schema_name: Arc::from(fs.name.as_str()),
            });
            for (rule_index, rule) in fs.rules.iter().enumerate() {
                let number = index.rules.len() as u32;
                index.rules.push(IndexedRule {
                    flow_schema: fs_index as u32,
                    rule: rule_index as u32,
                    prefilter: Prefilter::new(rule),
                });
                for subject in &rule.subjects {
                    index.file(subject, number);
                }
            }
        }
        index
    }

    /// Files rule `number` under the key its subject selects. Numbers arrive in ascending order,
    /// so each list stays sorted; a rule naming one key twice is filed once.
    fn file(&mut self, subject: &Subject, number: u32) {
        let list = match subject {
            Subject::User { name } | Subject::Group { name } if name == WILDCARD => {
                &mut self.everyone
            }
            Subject::User { name } => self.users.entry(name.as_str().into()).or_default(),
            Subject::Group { name } => self.groups.entry(name.as_str().into()).or_default(),
            Subject::ServiceAccount { namespace, name } if name == WILDCARD => self
                .service_account_namespaces
                .entry(namespace.as_str().into())
                .or_default(),
            Subject::ServiceAccount { namespace, name } => {
                let user = format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}");
                self.users.entry(user.into_boxed_str()).or_default()
            }
        };
        if list.last() != Some(&number) {
            list.push(number);
        }
    }

    /// The first FlowSchema in matching order that matches, or the `catch-all` FlowSchema when
    /// none does (a caller in neither `system:authenticated` nor `system:unauthenticated`).
    pub(crate) fn find(&self, identity: &Identity, info: &RequestInfo) -> &Target {
        let bits = RequestBits::new(info);
        let request = (info, &bits);
        let mut best = u32::MAX;
        self.scan(&self.everyone, request, &mut best);
        if let Some(list) = self.users.get(identity.user.as_str()) {
            self.scan(list, request, &mut best);
        }
        for group in &identity.groups {
            if let Some(list) = self.groups.get(group.as_str()) {
                self.scan(list, request, &mut best);
            }
        }
        if !self.service_account_namespaces.is_empty() {
            if let Some(rest) = identity.user.strip_prefix(SERVICE_ACCOUNT_PREFIX) {
                // A namespace is whatever precedes some `:`; try each, as the subject
                // `namespace` is compared by prefix and may itself hold a `:`.
                for (at, _) in rest.match_indices(':') {
                    if let Some(list) = self.service_account_namespaces.get(&rest[..at]) {
                        self.scan(list, request, &mut best);
                    }
                }
            }
        }
        let fs_index = match self.rules.get(best as usize) {
            Some(rule) => rule.flow_schema as usize,
            None => self.catch_all,
        };
        &self.targets[fs_index]
    }

    /// Lowers `best` to the first rule of `list` below it whose request side matches. Every rule
    /// in `list` already has a subject naming the caller.
    fn scan(&self, list: &[u32], (info, bits): (&RequestInfo, &RequestBits), best: &mut u32) {
        for &number in list {
            if number >= *best {
                return;
            }
            let indexed = &self.rules[number as usize];
            if !indexed.prefilter.admits(bits) {
                continue;
            }
            let fs = &self.targets[indexed.flow_schema as usize].flow_schema;
            if request_matches(&fs.rules[indexed.rule as usize], info) {
                *best = number;
                return;
            }
        }
    }
}

// The index repeats the configuration; a dump of it would only be noise in `Config`'s Debug.
impl fmt::Debug for MatchIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MatchIndex")
            .field("flow_schemas", &self.targets.len())
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}
