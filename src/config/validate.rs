//! Validation of defaulted raw objects, exactly as kube-apiserver validates them.
//!
//! Mirrors kubernetes `pkg/apis/flowcontrol/validation/validation.go` (post-1.29 form, zero
//! `nominalConcurrencyShares` allowed) and the name/namespace part of `ValidateObjectMeta`.
//! Every problem is collected, in the apiserver's order.
//!
//! Where we differ: the "spec must equal the fixed value" errors of mandatory objects omit the
//! value (the apiserver prints the Go struct with `%#v`, pointer addresses included); of the
//! `ObjectMeta` checks, only name, namespace, label and annotation keys/values are made (the
//! 256 KiB annotation size limit, owner references, finalizers and managed fields are not).
//! Label and annotation maps are checked in key order (Go's map order is random).

mod flow_schema;
mod priority_level;

pub(in crate::config) use flow_schema::validate_flow_schema;
pub(in crate::config) use priority_level::validate_priority_level;

use super::field::{BadValue, FieldError, FieldPath};
use super::names::{dns1123_subdomain, label_value, qualified_name};
use super::raw::{RawMeta, RawStatus};

/// `ValidateObjectMeta` for a cluster-scoped object whose name must be a DNS-1123 subdomain.
fn validate_meta(meta: &RawMeta) -> Vec<FieldError> {
    let path = FieldPath::new("metadata");
    let mut errs = Vec::new();
    if meta.name.is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "name or generateName is required",
        ));
    } else {
        for msg in dns1123_subdomain(&meta.name) {
            errs.push(FieldError::invalid(
                &path.child("name"),
                BadValue::Str(meta.name.clone()),
                &msg,
            ));
        }
    }
    if !meta.namespace.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    let labels = path.child("labels");
    for (k, v) in &meta.labels {
        for msg in qualified_name(k) {
            errs.push(FieldError::invalid(&labels, BadValue::Str(k.clone()), &msg));
        }
        for msg in label_value(v) {
            errs.push(FieldError::invalid(&labels, BadValue::Str(v.clone()), &msg));
        }
    }
    let annotations = path.child("annotations");
    for k in meta.annotations.keys() {
        // Annotation keys are qualified names in any case.
        for msg in qualified_name(&k.to_lowercase()) {
            let value = BadValue::Str(k.clone());
            errs.push(FieldError::invalid(&annotations, value, &msg));
        }
    }
    errs
}

/// `Validate{FlowSchema,PriorityLevelConfiguration}Status`.
fn validate_status(status: &RawStatus) -> Vec<FieldError> {
    let path = FieldPath::new("status").child("conditions");
    let mut errs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in status.condition_types.iter().enumerate() {
        let type_path = path.index(i).child("type");
        if !seen.insert(t.as_str()) {
            errs.push(FieldError::duplicate(&type_path, BadValue::Str(t.clone())));
        }
        if t.is_empty() {
            errs.push(FieldError::required(&type_path, "must not be empty"));
        }
    }
    errs
}

#[cfg(test)]
mod tests;
