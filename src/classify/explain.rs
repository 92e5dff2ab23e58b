//! Why a request is classified as it is: every FlowSchema in the order the apiserver tries them,
//! rule by rule, with the field that failed. Built on the same predicates [`super::classify`]
//! decides with ([`subject_matches`], [`resource_rule_mismatch`], [`non_resource_rule_mismatch`]),
//! so the explanation cannot disagree with the decision.

use serde::Serialize;

use super::rule::{non_resource_rule_mismatch, resource_rule_mismatch, subject_matches, Mismatch};
use crate::auth::Identity;
use crate::config::{Config, FlowSchema, PolicyRulesWithSubjects};
use crate::request_info::RequestInfo;

/// One `resourceRules[i]` or `nonResourceRules[i]` entry against the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTrial {
    /// `resourceRules[0]` or `nonResourceRules[0]`.
    pub field: String,
    /// The field that did not accept the request; `None` when the entry matched.
    pub failed: Option<Mismatch>,
}

/// One entry of `spec.rules` against the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleTrial {
    /// The first subject that names the caller (`subjects[i]`); `None`: none does.
    pub subject: Option<usize>,
    /// The entries of the request's kind (resource or non-resource) and why each failed.
    pub request_rules: Vec<PolicyTrial>,
    /// Whether the rule matched (a subject and an entry).
    pub matched: bool,
}

/// One FlowSchema against the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaTrial {
    /// `metadata.name`.
    pub name: String,
    /// `spec.matchingPrecedence`.
    pub matching_precedence: i32,
    /// `spec.priorityLevelConfiguration.name`.
    pub priority_level: String,
    /// Each rule.
    pub rules: Vec<RuleTrial>,
    /// Whether the schema matched (the first that does is chosen).
    pub matched: bool,
}

/// A FlowSchema the apiserver keeps but never tries: its priority level does not exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedSchema {
    /// `metadata.name`.
    pub name: String,
    /// `spec.matchingPrecedence`.
    pub matching_precedence: i32,
    /// `spec.priorityLevelConfiguration.name`: the level that does not exist.
    pub priority_level: String,
    /// Why it is skipped, in the words of the apiserver's `Dangling` condition.
    pub reason: String,
    /// Whether its rules accept this request (it would have been a candidate).
    pub would_match: bool,
}

/// The schemas tried, in order, up to and including the one that matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The schemas tried.
    pub flow_schemas: Vec<SchemaTrial>,
    /// How many schemas after the match were not tried.
    pub not_tried: usize,
    /// The dangling schemas, skipped for matching, in the order they were read.
    pub skipped: Vec<SkippedSchema>,
}

/// Tries `rule` on the request. Mirrors `rule.go: matchesPolicyRule` (subjects, then the
/// request's kind of entries), reporting instead of stopping.
pub fn try_rule(
    rule: &PolicyRulesWithSubjects,
    identity: &Identity,
    info: &RequestInfo,
) -> RuleTrial {
    let subject = rule
        .subjects
        .iter()
        .position(|s| subject_matches(s, identity));
    let request_rules: Vec<PolicyTrial> = if info.is_resource_request {
        rule.resource_rules
            .iter()
            .enumerate()
            .map(|(i, r)| PolicyTrial {
                field: format!("resourceRules[{i}]"),
                failed: resource_rule_mismatch(r, info),
            })
            .collect()
    } else {
        rule.non_resource_rules
            .iter()
            .enumerate()
            .map(|(i, r)| PolicyTrial {
                field: format!("nonResourceRules[{i}]"),
                failed: non_resource_rule_mismatch(r, info),
            })
            .collect()
    };
    let matched = subject.is_some() && request_rules.iter().any(|t| t.failed.is_none());
    RuleTrial {
        subject,
        request_rules,
        matched,
    }
}

/// Tries one FlowSchema.
pub fn try_schema(fs: &FlowSchema, identity: &Identity, info: &RequestInfo) -> SchemaTrial {
    let rules: Vec<RuleTrial> = fs
        .rules
        .iter()
        .map(|r| try_rule(r, identity, info))
        .collect();
    SchemaTrial {
        name: fs.name.clone(),
        matching_precedence: fs.matching_precedence,
        priority_level: fs.priority_level.clone(),
        matched: rules.iter().any(|r| r.matched),
        rules,
    }
}

/// Explains the classification of a request: the schemas of `config.flow_schemas()` in order,
/// up to the first that matches (the one [`super::classify`] chooses).
pub fn explain(config: &Config, identity: &Identity, info: &RequestInfo) -> Explanation {
    let schemas = config.flow_schemas();
    let mut flow_schemas = Vec::new();
    for fs in schemas {
        let trial = try_schema(fs, identity, info);
        let matched = trial.matched;
        flow_schemas.push(trial);
        if matched {
            break;
        }
    }
    let skipped = config
        .dangling()
        .iter()
        .map(|(fs, level)| SkippedSchema {
            name: fs.name.clone(),
            matching_precedence: fs.matching_precedence,
            priority_level: level.clone(),
            reason: crate::config::load::dangling_message(level),
            would_match: try_schema(fs, identity, info).matched,
        })
        .collect();
    Explanation {
        not_tried: schemas.len() - flow_schemas.len(),
        flow_schemas,
        skipped,
    }
}

impl RuleTrial {
    /// One line of text: which subject named the caller and what each entry failed on.
    pub fn describe(&self, kind_word: &str) -> String {
        let subject = match self.subject {
            Some(i) => format!("subjects[{i}] names the caller"),
            None => "no subject names the caller".to_string(),
        };
        if self.request_rules.is_empty() {
            return format!("{subject}; no {kind_word} entries");
        }
        let entries: Vec<String> = self
            .request_rules
            .iter()
            .map(|t| match t.failed {
                None => format!("{} matches", t.field),
                Some(m) => format!("{}: {} does not match", t.field, m.field()),
            })
            .collect();
        format!("{subject}; {}", entries.join(", "))
    }
}

impl Explanation {
    /// The text form: one paragraph per schema tried.
    pub fn to_text(&self, info: &RequestInfo) -> String {
        use std::fmt::Write;
        let kind_word = if info.is_resource_request {
            "resourceRules"
        } else {
            "nonResourceRules"
        };
        let mut out = String::new();
        for fs in &self.flow_schemas {
            let verdict = if fs.matched { "MATCH" } else { "no match" };
            let _ = writeln!(
                out,
                "FlowSchema {} (matchingPrecedence {}, priority level {}): {verdict}",
                fs.name, fs.matching_precedence, fs.priority_level
            );
            if fs.rules.is_empty() {
                let _ = writeln!(out, "  no rules");
            }
            for (i, rule) in fs.rules.iter().enumerate() {
                let _ = writeln!(out, "  rules[{i}]: {}", rule.describe(kind_word));
            }
        }
        if self.not_tried > 0 {
            let _ = writeln!(out, "({} later FlowSchemas not tried)", self.not_tried);
        }
        for fs in &self.skipped {
            let would = if fs.would_match {
                "; its rules accept this request"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "FlowSchema {} (matchingPrecedence {}, priority level {}): skipped: {}{would}",
                fs.name, fs.matching_precedence, fs.priority_level, fs.reason
            );
        }
        out
    }
}

#[cfg(test)]
mod tests;
