//! Mirrors `validation.go`: `ValidateFlowSchema` and the functions it calls.

use super::{validate_meta, validate_status};
use crate::config::field::{BadValue, FieldError, FieldPath};
use crate::config::mandatory;
use crate::config::model::{CATCH_ALL, EXEMPT};
use crate::config::names::{dns1123_label, dns1123_subdomain};
use crate::config::raw::*;

/// `FlowSchemaMaxMatchingPrecedence`.
const MAX_MATCHING_PRECEDENCE: i32 = 10000;
const SUPPORTED_DISTINGUISHERS: &[&str] = &["ByNamespace", "ByUser"];
const SUPPORTED_SUBJECT_KINDS: &[&str] = &["Group", "ServiceAccount", "User"];
/// `supportedVerbs`, sorted as `sets.List` returns them.
const SUPPORTED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const NS_ERR_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

/// Every problem with a defaulted FlowSchema.
pub(in crate::config) fn validate_flow_schema(fs: &RawFlowSchema) -> Vec<FieldError> {
    let mut errs = validate_meta(&fs.meta);
    let spec_path = FieldPath::new("spec");
    errs.extend(validate_spec(&fs.meta.name, &fs.spec, &spec_path));
    let mandatory = match fs.meta.name.as_str() {
        EXEMPT => Some(mandatory::exempt_flow_schema()),
        CATCH_ALL => Some(mandatory::catch_all_flow_schema()),
        _ => None,
    };
    if let Some(mandatory) = mandatory {
        if RawFlowSchema::from(&mandatory).spec != fs.spec {
            let msg = format!("spec of '{}' must equal the fixed value", fs.meta.name);
            errs.push(FieldError::invalid(&spec_path, BadValue::Omitted, &msg));
        }
    }
    errs.extend(validate_status(&fs.status));
    errs
}

fn validate_spec(name: &str, spec: &RawFlowSchemaSpec, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let prec_path = path.child("matchingPrecedence");
    let prec = BadValue::Int(spec.matching_precedence.into());
    if spec.matching_precedence <= 0 {
        errs.push(FieldError::invalid(
            &prec_path,
            prec.clone(),
            "must be a positive value",
        ));
    }
    if spec.matching_precedence > MAX_MATCHING_PRECEDENCE {
        let msg = format!("must not be greater than {MAX_MATCHING_PRECEDENCE}");
        errs.push(FieldError::invalid(&prec_path, prec.clone(), &msg));
    }
    if spec.matching_precedence == 1 && name != EXEMPT {
        errs.push(FieldError::invalid(
            &prec_path,
            prec,
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(t) = &spec.distinguisher_method {
        if !SUPPORTED_DISTINGUISHERS.contains(&t.as_str()) {
            // The apiserver passes the whole `*FlowDistinguisherMethod`, which prints as a struct.
            let value = format!(
                "flowcontrol.FlowDistinguisherMethod{{Type:{}}}",
                crate::config::field::go_quote(t)
            );
            errs.push(FieldError::not_supported(
                &path.child("distinguisherMethod").child("type"),
                BadValue::Go(value),
                SUPPORTED_DISTINGUISHERS,
            ));
        }
    }
    let pl_path = path.child("priorityLevelConfiguration").child("name");
    if spec.priority_level_name.is_empty() {
        errs.push(FieldError::required(
            &pl_path,
            "must reference a priority level",
        ));
    } else {
        for msg in dns1123_subdomain(&spec.priority_level_name) {
            let value = BadValue::Str(spec.priority_level_name.clone());
            errs.push(FieldError::invalid(&pl_path, value, &msg));
        }
    }
    for (i, rule) in spec.rules.iter().enumerate() {
        errs.extend(validate_rule(rule, &path.child("rules").index(i)));
    }
    errs
}

fn validate_rule(rule: &RawPolicyRulesWithSubjects, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if rule.subjects.is_empty() {
        errs.push(FieldError::required(
            &path.child("subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, subject) in rule.subjects.iter().enumerate() {
        errs.extend(validate_subject(subject, &path.child("subjects").index(i)));
    }
    if rule.resource_rules.is_empty() && rule.non_resource_rules.is_empty() {
        errs.push(FieldError::required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in rule.resource_rules.iter().enumerate() {
        errs.extend(validate_resource_rule(
            r,
            &path.child("resourceRules").index(i),
        ));
    }
    for (i, r) in rule.non_resource_rules.iter().enumerate() {
        errs.extend(validate_non_resource_rule(
            r,
            &path.child("nonResourceRules").index(i),
        ));
    }
    errs
}

/// Union members of a subject: (JSON name, present).
fn forbidden_member(path: &FieldPath, member: &str, kind: &str) -> FieldError {
    FieldError::forbidden(
        &path.child(member),
        &format!("{member} is forbidden when subject kind is not '{kind}'"),
    )
}

fn required_member(path: &FieldPath, member: &str, kind: &str) -> FieldError {
    FieldError::required(
        path,
        &format!("{member} is required when subject kind is '{kind}'"),
    )
}

fn validate_subject(s: &RawSubject, path: &FieldPath) -> Vec<FieldError> {
    // (member, kind, present), in the order Go reports the members that must not be set.
    let members = [
        (
            "serviceAccount",
            "ServiceAccount",
            s.service_account.is_some(),
        ),
        ("user", "User", s.user.is_some()),
        ("group", "Group", s.group.is_some()),
    ];
    let Some(own) = members.iter().position(|(_, kind, _)| *kind == s.kind) else {
        return vec![FieldError::not_supported(
            &path.child("kind"),
            BadValue::Str(s.kind.clone()),
            SUPPORTED_SUBJECT_KINDS,
        )];
    };
    let (member, kind, _) = members[own];
    let mut errs = match own {
        0 => validate_service_account(s.service_account.as_ref(), &path.child(member)),
        1 => validate_named(s.user.as_deref(), &path.child(member), member, kind),
        _ => validate_named(s.group.as_deref(), &path.child(member), member, kind),
    };
    for (i, (member, kind, present)) in members.into_iter().enumerate() {
        if i != own && present {
            errs.push(forbidden_member(path, member, kind));
        }
    }
    errs
}

/// `ValidateUserSubject` / `ValidateGroupSubject`.
fn validate_named(
    name: Option<&str>,
    path: &FieldPath,
    member: &str,
    kind: &str,
) -> Vec<FieldError> {
    match name {
        None => vec![required_member(path, member, kind)],
        Some("") => vec![FieldError::required(&path.child("name"), "")],
        Some(_) => Vec::new(),
    }
}

fn validate_service_account(sa: Option<&RawServiceAccount>, path: &FieldPath) -> Vec<FieldError> {
    let Some(sa) = sa else {
        return vec![required_member(path, "serviceAccount", "ServiceAccount")];
    };
    let mut errs = Vec::new();
    if sa.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else if sa.name != "*" {
        for msg in dns1123_subdomain(&sa.name) {
            let value = BadValue::Str(sa.name.clone());
            errs.push(FieldError::invalid(&path.child("name"), value, &msg));
        }
    }
    if sa.namespace.is_empty() {
        errs.push(FieldError::required(
            &path.child("namespace"),
            "must specify namespace for service account",
        ));
    } else {
        for msg in dns1123_label(&sa.namespace) {
            let value = BadValue::Str(sa.namespace.clone());
            errs.push(FieldError::invalid(&path.child("namespace"), value, &msg));
        }
    }
    errs
}

fn has_wildcard(list: &[String]) -> bool {
    list.iter().any(|s| s == "*")
}

fn validate_verbs(verbs: &[String], path: &FieldPath) -> Option<FieldError> {
    let path = path.child("verbs");
    if verbs.is_empty() {
        Some(FieldError::required(
            &path,
            "verbs must contain at least one value",
        ))
    } else if has_wildcard(verbs) {
        (verbs.len() > 1).then(|| {
            FieldError::invalid(
                &path,
                BadValue::Strings(verbs.to_vec()),
                "if '*' is present, must not specify other verbs",
            )
        })
    } else if !verbs.iter().all(|v| SUPPORTED_VERBS.contains(&v.as_str())) {
        Some(FieldError::not_supported(
            &path,
            BadValue::Strings(verbs.to_vec()),
            SUPPORTED_VERBS,
        ))
    } else {
        None
    }
}

/// Required when empty; Invalid when `*` is mixed with other members.
fn validate_list(
    list: &[String],
    path: &FieldPath,
    required_msg: &str,
    what: &str,
) -> Option<FieldError> {
    if list.is_empty() {
        Some(FieldError::required(path, required_msg))
    } else if list.len() > 1 && has_wildcard(list) {
        let msg = format!("if '*' is present, must not specify other {what}");
        Some(FieldError::invalid(
            path,
            BadValue::Strings(list.to_vec()),
            &msg,
        ))
    } else {
        None
    }
}

fn validate_resource_rule(rule: &RawResourcePolicyRule, path: &FieldPath) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = validate_verbs(&rule.verbs, path).into_iter().collect();
    errs.extend(validate_list(
        &rule.api_groups,
        &path.child("apiGroups"),
        "resource rules must supply at least one api group",
        "api groups",
    ));
    errs.extend(validate_list(
        &rule.resources,
        &path.child("resources"),
        "resource rules must supply at least one resource",
        "resources",
    ));
    let ns_path = path.child("namespaces");
    if rule.namespaces.is_empty() && !rule.cluster_scope {
        errs.push(FieldError::required(
            &ns_path,
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if has_wildcard(&rule.namespaces) {
        if rule.namespaces.len() > 1 {
            errs.push(FieldError::invalid(
                &ns_path,
                BadValue::Strings(rule.namespaces.clone()),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, ns) in rule.namespaces.iter().enumerate() {
            for msg in dns1123_label(ns) {
                errs.push(FieldError::invalid(
                    &ns_path.index(i),
                    BadValue::Str(ns.clone()),
                    &format!("{NS_ERR_INTRO}{msg}"),
                ));
            }
        }
    }
    errs
}

fn validate_non_resource_rule(
    rule: &RawNonResourcePolicyRule,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = validate_verbs(&rule.verbs, path).into_iter().collect();
    let urls = &rule.non_resource_urls;
    let urls_path = path.child("nonResourceURLs");
    if urls.is_empty() {
        errs.push(FieldError::required(
            &urls_path,
            "nonResourceURLs must contain at least one value",
        ));
    } else if has_wildcard(urls) {
        if urls.len() > 1 {
            errs.push(FieldError::invalid(
                &urls_path,
                BadValue::Strings(urls.clone()),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, url) in urls.iter().enumerate() {
            if let Some(msg) = non_resource_url_problem(url) {
                let value = BadValue::Str(url.clone());
                errs.push(FieldError::invalid(&urls_path.index(i), value, msg));
            }
        }
    }
    errs
}

/// `ValidateNonResourceURLPath`: the first problem with one URL.
fn non_resource_url_problem(url: &str) -> Option<&'static str> {
    if url.is_empty() {
        return Some("must not be empty");
    }
    if url == "/" {
        return None;
    }
    if !url.starts_with('/') {
        return Some("must start with slash");
    }
    if url.contains(' ') {
        return Some("must not contain white-space");
    }
    if url.contains("//") {
        return Some("must not contain double slash");
    }
    let wildcards = url.matches('*').count();
    if wildcards > 1 || (wildcards == 1 && !url.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}
