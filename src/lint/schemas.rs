//! FlowSchema checks: shadowing, precedence ties, broad subjects on privileged levels, unused
//! levels and dangling references.

use std::collections::BTreeSet;

use crate::config::{model, Config, FlowSchema, PolicyRulesWithSubjects, Subject};
use crate::fairqueue::limits::compute_limits;

use super::coverage::{
    non_resource_rule_covered, resource_rule_covered, rules_intersect, subject_covered, url_covered,
};
use super::{Code, Files, Finding, LintOptions};

const KIND: &str = "FlowSchema";

/// Every FlowSchema finding, in matching order, then unused levels and dangling schemas.
pub(super) fn lint_flow_schemas(
    config: &Config,
    options: &LintOptions,
    files: &Files<'_>,
) -> Vec<Finding> {
    let schemas = config.flow_schemas();
    let mut findings = Vec::new();
    for (i, fs) in schemas.iter().enumerate() {
        findings.extend(shadowed(fs, &schemas[..i], files));
        findings.extend(ties(fs, &schemas[..i], files));
        findings.extend(broad_subjects(fs, config, options, files));
    }
    findings.extend(unused_levels(config, files));
    for (fs, level) in config.dangling() {
        let field = "spec.priorityLevelConfiguration.name";
        let mut f = files.finding(Code::FlowSchemaDangling, KIND, &fs.name, field);
        f.message = if crate::config::maintain::is_suggested_level(level) {
            format!(
                "priority level {level:?} does not exist, so this FlowSchema is skipped for \
                 matching; it is one of Kubernetes' suggested levels, which a cluster has but a \
                 configuration directory does not imply: copy it from the proxy's config/ \
                 directory (or `config dump` without --config-dir)"
            )
        } else {
            format!(
                "priority level {level:?} does not exist, so this FlowSchema is skipped for \
                 matching; create the level or fix the name"
            )
        };
        findings.push(f);
    }
    findings
}

/// The earlier FlowSchema one rule's requests (subject by subject) all go to, if any.
fn covering_schema<'a>(
    subject: &Subject,
    rule: &PolicyRulesWithSubjects,
    earlier: &'a [crate::config::FlowSchemaRef],
) -> Option<&'a str> {
    earlier.iter().find_map(|e| {
        e.rules
            .iter()
            .any(|by| {
                subject_covered(subject, &by.subjects)
                    && rule.resource_rules.iter().all(|r| {
                        by.resource_rules
                            .iter()
                            .any(|b| resource_rule_covered(r, b))
                    })
                    && rule.non_resource_rules.iter().all(|r| {
                        by.non_resource_rules
                            .iter()
                            .any(|b| non_resource_rule_covered(r, b))
                    })
            })
            .then_some(e.name.as_str())
    })
}

/// A FlowSchema that can never match. Decided per (subject, rule): each must be taken in whole
/// by one rule of one earlier schema (several earlier schemas may share the work). A request
/// covered only by the union of several earlier rules is not detected (no false reports).
/// `catch-all` is the designated fallback and is never reported.
fn shadowed(
    fs: &FlowSchema,
    earlier: &[crate::config::FlowSchemaRef],
    files: &Files<'_>,
) -> Option<Finding> {
    if fs.name == model::CATCH_ALL {
        return None;
    }
    let mut by = BTreeSet::new();
    for rule in &fs.rules {
        for subject in &rule.subjects {
            by.insert(covering_schema(subject, rule, earlier)?);
        }
    }
    let mut f = files.finding(Code::FlowSchemaShadowed, KIND, &fs.name, "spec.rules");
    f.message = if fs.rules.is_empty() {
        "has no rules, so it matches no request".to_string()
    } else {
        let names: Vec<&str> = by.into_iter().collect();
        format!(
            "never matches: every request it accepts is taken first by {} (lower \
             matchingPrecedence, or equal and a smaller name); lower its matchingPrecedence",
            names.join(", ")
        )
    };
    Some(f)
}

/// Equal `matchingPrecedence` with an earlier schema whose rules overlap: the name decides.
fn ties(
    fs: &FlowSchema,
    earlier: &[crate::config::FlowSchemaRef],
    files: &Files<'_>,
) -> Option<Finding> {
    let other = earlier.iter().find(|e| {
        e.matching_precedence == fs.matching_precedence
            && e.rules
                .iter()
                .any(|a| fs.rules.iter().any(|b| rules_intersect(a, b)))
    })?;
    let mut f = files.finding(
        Code::PrecedenceTie,
        KIND,
        &fs.name,
        "spec.matchingPrecedence",
    );
    f.message = format!(
        "shares matchingPrecedence {} with {:?} and some requests match both; only the name \
         order gives them to {:?}: make the precedences differ",
        fs.matching_precedence, other.name, other.name
    );
    Some(f)
}

fn is_broad(subject: &Subject) -> bool {
    match subject {
        Subject::Group { name } => {
            ["*", "system:authenticated", "system:unauthenticated"].contains(&name.as_str())
        }
        Subject::User { name } => name == "*",
        Subject::ServiceAccount { .. } => false,
    }
}

/// The health endpoints that the apiserver's own `probes` FlowSchema exempts for everyone.
const PROBE_PATHS: [&str; 3] = ["/healthz", "/readyz", "/livez"];

/// Whether a rule only accepts `get` of the health endpoints and their subpaths.
fn probes_only(rule: &PolicyRulesWithSubjects) -> bool {
    let probes: Vec<String> = PROBE_PATHS.iter().map(|p| p.to_string()).collect();
    rule.resource_rules.is_empty()
        && rule.non_resource_rules.iter().all(|r| {
            r.verbs == ["get"] && r.non_resource_urls.iter().all(|u| url_covered(u, &probes))
        })
}

/// Broad subjects sent to an exempt level, or to a level with a larger nominal concurrency than
/// `global-default`. Rules that only reach the health endpoints are left alone (the bootstrap
/// `probes` schema exempts them for everyone, by design).
fn broad_subjects(
    fs: &FlowSchema,
    config: &Config,
    options: &LintOptions,
    files: &Files<'_>,
) -> Vec<Finding> {
    let Some(level) = config.priority_level(&fs.priority_level) else {
        return Vec::new();
    };
    let why = if level.is_exempt() {
        format!("unlimited to exempt level {:?}", level.name)
    } else {
        let levels: Vec<_> = config.priority_levels().map(|pl| &**pl).collect();
        let limits = compute_limits(options.server_concurrency_limit(), &levels);
        let nominal = |name: &str| {
            levels
                .iter()
                .zip(&limits)
                .find(|(pl, _)| pl.name == name)
                .map(|(_, l)| l.nominal_cl)
        };
        match (nominal(&level.name), nominal("global-default")) {
            (Some(this), Some(global)) if this > global && level.name != "global-default" => {
                format!(
                    "to level {:?} ({this} seats, more than global-default's {global})",
                    level.name
                )
            }
            _ => return Vec::new(),
        }
    };
    let mut findings = Vec::new();
    for (i, rule) in fs.rules.iter().enumerate() {
        if probes_only(rule) {
            continue;
        }
        for (j, subject) in rule
            .subjects
            .iter()
            .enumerate()
            .filter(|(_, s)| is_broad(s))
        {
            let field = format!("spec.rules[{i}].subjects[{j}]");
            let mut f = files.finding(Code::BroadSubjectPrivilegedLevel, KIND, &fs.name, &field);
            f.message = format!("{} goes {why}; name its callers", subject_text(subject));
            findings.push(f);
        }
    }
    findings
}

fn subject_text(subject: &Subject) -> String {
    match subject {
        Subject::User { name } => format!("user {name:?}"),
        Subject::Group { name } => format!("group {name:?}"),
        Subject::ServiceAccount { namespace, name } => format!("serviceaccount {namespace}/{name}"),
    }
}

/// Levels that no matching FlowSchema references.
fn unused_levels(config: &Config, files: &Files<'_>) -> Vec<Finding> {
    let used: BTreeSet<&str> = config
        .flow_schemas()
        .iter()
        .map(|fs| fs.priority_level.as_str())
        .collect();
    config
        .priority_levels()
        .filter(|pl| !used.contains(pl.name.as_str()))
        .map(|pl| {
            let kind = "PriorityLevelConfiguration";
            let mut f = files.finding(Code::PriorityLevelUnused, kind, &pl.name, "metadata.name");
            f.message = "no FlowSchema sends requests here, yet its shares take seats from every \
                         other level; delete it or reference it"
                .to_string();
            f
        })
        .collect()
}
