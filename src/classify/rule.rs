//! The per-FlowSchema predicate.
//!
//! Mirrors `k8s.io/apiserver/pkg/util/flowcontrol/rule.go`. Unlike the reference, no predicate
//! allocates: `resource/subresource` and the non-resource URL prefix are compared in place.

use crate::auth::Identity;
use crate::config::{
    FlowSchema, NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject,
};
use crate::request_info::RequestInfo;

/// The wildcard of every list and of subject names (`flowcontrol.NameAll`, `VerbAll`, ...).
pub const WILDCARD: &str = "*";

/// The user name prefix of service accounts.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Whether `fs` matches the request: some entry of `spec.rules` matches it.
///
/// Mirrors `rule.go: matchesFlowSchema`. A FlowSchema without rules never matches.
pub fn matches(fs: &FlowSchema, identity: &Identity, info: &RequestInfo) -> bool {
    fs.rules
        .iter()
        .any(|rule| subjects_match(&rule.subjects, identity) && request_matches(rule, info))
}

/// Whether some subject names the caller. Mirrors `rule.go: matchesASubject`.
pub fn subjects_match(subjects: &[Subject], identity: &Identity) -> bool {
    subjects.iter().any(|s| subject_matches(s, identity))
}

/// Whether one subject names the caller. Mirrors `rule.go: matchesSubject`.
///
/// A `ServiceAccount` subject looks at the user name only, never at the groups.
pub fn subject_matches(subject: &Subject, identity: &Identity) -> bool {
    match subject {
        Subject::User { name } => name == WILDCARD || *name == identity.user,
        Subject::Group { name } => name == WILDCARD || identity.groups.iter().any(|g| g == name),
        Subject::ServiceAccount { namespace, name } => {
            service_account_matches(namespace, name, &identity.user)
        }
    }
}

/// Whether `user` is the service account `namespace`/`name`, or any service account of
/// `namespace` when `name` is `*`. Mirrors `serviceaccount.MatchesUsername` and
/// `rule.go: serviceAccountMatchesNamespace`: the namespace must be followed by `:`, so
/// namespace `ns1` does not cover `system:serviceaccount:ns10:x`.
pub fn service_account_matches(namespace: &str, name: &str, user: &str) -> bool {
    let Some(rest) = user
        .strip_prefix(SERVICE_ACCOUNT_PREFIX)
        .and_then(|r| r.strip_prefix(namespace))
        .and_then(|r| r.strip_prefix(':'))
    else {
        return false;
    };
    name == WILDCARD || rest == name
}

/// Whether the request side of a rule matches (subjects aside): a resource request needs a
/// matching `resourceRules[]` entry, a non-resource request a matching `nonResourceRules[]` entry.
///
/// Mirrors the second half of `rule.go: matchesPolicyRule`.
pub fn request_matches(rule: &PolicyRulesWithSubjects, info: &RequestInfo) -> bool {
    if info.is_resource_request {
        rule.resource_rules
            .iter()
            .any(|r| resource_rule_matches(r, info))
    } else {
        rule.non_resource_rules
            .iter()
            .any(|r| non_resource_rule_matches(r, info))
    }
}

/// The attribute of a request that a policy rule did not accept: what `classify --explain` and
/// `lint` report. The matchers below are written in terms of it, so the explanation and the
/// decision are one computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Mismatch {
    /// `verbs` does not hold the request's verb.
    Verb,
    /// `resources` does not hold `resource[/subresource]`.
    Resource,
    /// `apiGroups` does not hold the request's API group.
    ApiGroup,
    /// The request has no namespace (cluster-scoped or across namespaces) and `clusterScope` is
    /// false.
    ClusterScope,
    /// `namespaces` does not hold the request's namespace.
    Namespace,
    /// No `nonResourceURLs` entry covers the path.
    NonResourceUrl,
}

impl Mismatch {
    /// The rule field that failed, as written in the API (`verbs`, `nonResourceURLs`, ...).
    pub fn field(self) -> &'static str {
        match self {
            Mismatch::Verb => "verbs",
            Mismatch::Resource => "resources",
            Mismatch::ApiGroup => "apiGroups",
            Mismatch::ClusterScope => "clusterScope",
            Mismatch::Namespace => "namespaces",
            Mismatch::NonResourceUrl => "nonResourceURLs",
        }
    }
}

/// Mirrors `rule.go: matchesResourcePolicyRule`: verb, `resource[/subresource]`, API group, then
/// scope — a request without a namespace (cluster-scoped, or a list across namespaces) needs
/// `clusterScope`, and namespace `*` does not cover it.
pub fn resource_rule_matches(rule: &ResourcePolicyRule, info: &RequestInfo) -> bool {
    resource_rule_mismatch(rule, info).is_none()
}

/// The first check of [`resource_rule_matches`] that fails, in the reference's order; `None` when
/// the rule matches.
pub fn resource_rule_mismatch(rule: &ResourcePolicyRule, info: &RequestInfo) -> Option<Mismatch> {
    if !contains_string(&rule.verbs, &info.verb) {
        Some(Mismatch::Verb)
    } else if !resource_matches(&rule.resources, &info.resource, &info.subresource) {
        Some(Mismatch::Resource)
    } else if !contains_string(&rule.api_groups, &info.api_group) {
        Some(Mismatch::ApiGroup)
    } else if info.namespace.is_empty() {
        (!rule.cluster_scope).then_some(Mismatch::ClusterScope)
    } else {
        (!contains_string(&rule.namespaces, &info.namespace)).then_some(Mismatch::Namespace)
    }
}

/// Mirrors `rule.go: matchesNonResourcePolicyRule`.
pub fn non_resource_rule_matches(rule: &NonResourcePolicyRule, info: &RequestInfo) -> bool {
    non_resource_rule_mismatch(rule, info).is_none()
}

/// The first check of [`non_resource_rule_matches`] that fails; `None` when the rule matches.
pub fn non_resource_rule_mismatch(
    rule: &NonResourcePolicyRule,
    info: &RequestInfo,
) -> Option<Mismatch> {
    if !contains_string(&rule.verbs, &info.verb) {
        Some(Mismatch::Verb)
    } else if !rule
        .non_resource_urls
        .iter()
        .any(|u| non_resource_url_matches(u, &info.path))
    {
        Some(Mismatch::NonResourceUrl)
    } else {
        None
    }
}

/// One `nonResourceURLs` entry against a request path. Mirrors
/// `rule.go: matchPolicyRuleNonResourceURL`: `*` or the exact path matches; otherwise the entry
/// minus one trailing `*`, with a `/` appended when it does not end in one, must prefix the path.
/// So `/healthz` covers `/healthz/etcd` but not `/healthzx`, `/apis/*` covers `/apis/x` but not
/// `/apis`, and `/` covers every path.
///
/// Unlike `containsString`, a `*` entry is a wildcard wherever it stands in the list.
pub fn non_resource_url_matches(entry: &str, path: &str) -> bool {
    if entry == WILDCARD || entry == path {
        return true;
    }
    let prefix = entry.strip_suffix('*').unwrap_or(entry);
    match path.strip_prefix(prefix) {
        None => false,
        Some(_) if prefix.ends_with('/') => true,
        Some(rest) => rest.starts_with('/'),
    }
}

/// Whether `resource`, or `resource/subresource` when there is a subresource, is in the list.
/// Mirrors `rule.go: matchPolicyRuleResource` + `rsJoin` without building the joined string:
/// `pods` does not cover `pods/status`.
pub fn resource_matches(list: &[String], resource: &str, subresource: &str) -> bool {
    if is_wildcard(list) {
        return true;
    }
    if subresource.is_empty() {
        return list.iter().any(|r| r == resource);
    }
    list.iter().any(|r| {
        r.len() == resource.len() + 1 + subresource.len()
            && r.strip_prefix(resource)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|rest| rest == subresource)
    })
}

/// Mirrors `rule.go: containsString`: true when the list is exactly `["*"]` or holds `x`.
/// A `*` inside a longer list is not a wildcard (validation forbids such lists).
pub fn contains_string(list: &[String], x: &str) -> bool {
    is_wildcard(list) || list.iter().any(|y| y == x)
}

/// Whether a list is exactly `["*"]`.
fn is_wildcard(list: &[String]) -> bool {
    matches!(list, [only] if only == WILDCARD)
}

#[cfg(test)]
mod tests;
