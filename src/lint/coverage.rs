//! Set relations between FlowSchema rules — "every request this accepts, that accepts too" and
//! "some request both accept" — decided by running the classifier's own matchers
//! ([`crate::classify`]) on probe identities and requests built from the rules.
//!
//! A probe stands for a whole set: [`ANY`] is a name no object can have, so only a wildcard
//! accepts it; a user named by a subject is given the fewest groups any caller of that name has
//! (`system:authenticated`, or `system:unauthenticated` for `system:anonymous`, as the
//! authenticators add them), and every subject is monotone in the groups. A `nonResourceURLs`
//! entry accepts its own path and a subtree; the subtree is probed by its root joined with [`ANY`].

use crate::auth::{Identity, ANONYMOUS_USER};
use crate::classify::{
    contains_string, non_resource_url_matches, resource_matches, subjects_match,
    SERVICE_ACCOUNT_PREFIX, WILDCARD,
};
use crate::config::{NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject};

/// A value no name, group, verb or path can take (NUL is in none of them).
const ANY: &str = "\u{0}";

const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";

fn identity(user: &str, groups: &[&str]) -> Identity {
    Identity {
        user: user.to_string(),
        uid: String::new(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        extra: Default::default(),
    }
}

fn service_account(namespace: &str, name: &str) -> String {
    let name = if name == WILDCARD { ANY } else { name };
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// The callers a subject names, as the fewest identities whose acceptance implies all of them.
fn subject_probes(subject: &Subject) -> Vec<Identity> {
    let everyone = || {
        vec![
            identity(ANY, &[AUTHENTICATED]),
            identity(ANONYMOUS_USER, &[UNAUTHENTICATED]),
        ]
    };
    match subject {
        Subject::User { name } | Subject::Group { name } if name == WILDCARD => everyone(),
        Subject::User { name } if name == ANONYMOUS_USER => {
            vec![identity(name, &[UNAUTHENTICATED])]
        }
        Subject::User { name } => vec![identity(name, &[AUTHENTICATED])],
        Subject::Group { name } if name == UNAUTHENTICATED => {
            vec![identity(ANONYMOUS_USER, &[UNAUTHENTICATED])]
        }
        Subject::Group { name } => vec![identity(ANY, &[name, AUTHENTICATED])],
        Subject::ServiceAccount { namespace, name } => {
            vec![identity(
                &service_account(namespace, name),
                &[AUTHENTICATED],
            )]
        }
    }
}

/// Whether every caller `subject` names is named by some subject of `subjects`.
pub(super) fn subject_covered(subject: &Subject, subjects: &[Subject]) -> bool {
    subject_probes(subject)
        .iter()
        .all(|id| subjects_match(subjects, id))
}

/// Whether some caller is named by both subject lists.
pub(super) fn subjects_intersect(a: &[Subject], b: &[Subject]) -> bool {
    let mut names = vec![ANY.to_string(), ANONYMOUS_USER.to_string()];
    let mut groups = vec![AUTHENTICATED];
    for s in a.iter().chain(b) {
        match s {
            Subject::User { name } if name != WILDCARD => names.push(name.clone()),
            Subject::Group { name } if name != WILDCARD && name != UNAUTHENTICATED => {
                groups.push(name)
            }
            Subject::ServiceAccount { namespace, name } => {
                names.push(service_account(namespace, name))
            }
            _ => {}
        }
    }
    names.iter().any(|user| {
        let id = if user == ANONYMOUS_USER {
            identity(user, &[UNAUTHENTICATED])
        } else {
            identity(user, &groups)
        };
        subjects_match(a, &id) && subjects_match(b, &id)
    })
}

fn is_wildcard(list: &[String]) -> bool {
    matches!(list, [only] if only == WILDCARD)
}

/// The probe values of a `containsString` list: `ANY` for `["*"]`, else its members.
fn list_probes(list: &[String]) -> Vec<&str> {
    if is_wildcard(list) {
        vec![ANY]
    } else {
        list.iter().map(String::as_str).collect()
    }
}

fn list_covered(list: &[String], by: &[String]) -> bool {
    list_probes(list).iter().all(|x| contains_string(by, x))
}

fn lists_intersect(a: &[String], b: &[String]) -> bool {
    let mut probes = list_probes(a);
    probes.extend(list_probes(b));
    probes
        .iter()
        .any(|x| contains_string(a, x) && contains_string(b, x))
}

/// `resources` entries as `(resource, subresource)` probes.
fn resource_probes(list: &[String]) -> Vec<(&str, &str)> {
    if is_wildcard(list) {
        return vec![(ANY, ""), (ANY, ANY)];
    }
    list.iter()
        .map(|r| r.split_once('/').unwrap_or((r.as_str(), "")))
        .collect()
}

/// Whether every request `rule` accepts, `by` accepts.
pub(super) fn resource_rule_covered(rule: &ResourcePolicyRule, by: &ResourcePolicyRule) -> bool {
    list_covered(&rule.verbs, &by.verbs)
        && list_covered(&rule.api_groups, &by.api_groups)
        && resource_probes(&rule.resources)
            .iter()
            .all(|(r, s)| resource_matches(&by.resources, r, s))
        && (!rule.cluster_scope || by.cluster_scope)
        && list_covered(&rule.namespaces, &by.namespaces)
}

/// Whether some request is accepted by both rules.
pub(super) fn resource_rules_intersect(a: &ResourcePolicyRule, b: &ResourcePolicyRule) -> bool {
    let mut resources = resource_probes(&a.resources);
    resources.extend(resource_probes(&b.resources));
    lists_intersect(&a.verbs, &b.verbs)
        && lists_intersect(&a.api_groups, &b.api_groups)
        && resources.iter().any(|(r, s)| {
            resource_matches(&a.resources, r, s) && resource_matches(&b.resources, r, s)
        })
        && ((a.cluster_scope && b.cluster_scope) || lists_intersect(&a.namespaces, &b.namespaces))
}

/// The paths an entry accepts, as probes: the entry itself and its subtree.
fn url_probes(entry: &str) -> Vec<String> {
    if entry == WILDCARD {
        return vec![ANY.to_string()];
    }
    let mut root = entry.strip_suffix('*').unwrap_or(entry).to_string();
    if !root.ends_with('/') {
        root.push('/');
    }
    root.push_str(ANY);
    vec![entry.to_string(), root]
}

/// Whether every path `entry` accepts is accepted by one entry of `by`.
pub(super) fn url_covered(entry: &str, by: &[String]) -> bool {
    by.iter().any(|b| {
        url_probes(entry)
            .iter()
            .all(|p| non_resource_url_matches(b, p))
    })
}

/// Whether every request `rule` accepts, `by` accepts.
pub(super) fn non_resource_rule_covered(
    rule: &NonResourcePolicyRule,
    by: &NonResourcePolicyRule,
) -> bool {
    list_covered(&rule.verbs, &by.verbs)
        && rule
            .non_resource_urls
            .iter()
            .all(|u| url_covered(u, &by.non_resource_urls))
}

/// Whether some request is accepted by both rules.
pub(super) fn non_resource_rules_intersect(
    a: &NonResourcePolicyRule,
    b: &NonResourcePolicyRule,
) -> bool {
    let paths: Vec<String> = a
        .non_resource_urls
        .iter()
        .chain(&b.non_resource_urls)
        .flat_map(|u| url_probes(u))
        .collect();
    lists_intersect(&a.verbs, &b.verbs)
        && paths.iter().any(|p| {
            a.non_resource_urls
                .iter()
                .any(|u| non_resource_url_matches(u, p))
                && b.non_resource_urls
                    .iter()
                    .any(|u| non_resource_url_matches(u, p))
        })
}

/// Whether some request (caller and attributes) is accepted by both rules.
pub(super) fn rules_intersect(a: &PolicyRulesWithSubjects, b: &PolicyRulesWithSubjects) -> bool {
    subjects_intersect(&a.subjects, &b.subjects)
        && (a.resource_rules.iter().any(|x| {
            b.resource_rules
                .iter()
                .any(|y| resource_rules_intersect(x, y))
        }) || a.non_resource_rules.iter().any(|x| {
            b.non_resource_rules
                .iter()
                .any(|y| non_resource_rules_intersect(x, y))
        }))
}
