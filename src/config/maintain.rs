//! What kube-apiserver's bootstrap ensurer would do to the objects of a directory.
//!
//! Mirrors `pkg/registry/flowcontrol/ensurer/strategy.go` (kubernetes/kubernetes). The apiserver
//! keeps two sets of objects of its own, checked every minute:
//! - **mandatory** (`exempt`, `catch-all`): re-created when missing, and their spec is always
//!   put back to the built-in one. Validation already refuses any other spec for them (as the
//!   apiserver's does), and [`super::Config::resolve`] implies them when missing: nothing is
//!   left for this module.
//! - **suggested** (the other bootstrap objects): re-created when missing; an existing one has its
//!   spec put back when `apf.kubernetes.io/autoupdate-spec` parses as true (Go's
//!   `strconv.ParseBool`), or, without a boolean there, when `metadata.generation` is 1 (never
//!   edited since creation). Here the same object in a directory gets the embedded bootstrap
//!   spec under the same conditions, with a warning.
//!
//! Where we differ: a directory does not imply the suggested objects when it lacks them (only
//! the mandatory ones): the directory is the whole configuration the proxy runs, and an operator
//! who leaves a suggested object out means it. docs/configuration.md says so. The ensurer's removal of
//! objects it no longer suggests is not mirrored (the embedded bootstrap is the current one).

use std::sync::OnceLock;

use super::model::{FlowSchema, PriorityLevel, CATCH_ALL, EXEMPT};
use super::parse::{parse_file, Format};
use super::raw::{RawMeta, RawObject};
use super::{convert, defaults, BOOTSTRAP_YAML};

/// The annotation that tells the ensurer whether it may overwrite a suggested object's spec.
pub(in crate::config) const AUTO_UPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";

/// The suggested objects of the embedded bootstrap configuration, as the model has them.
///
/// Parsed and defaulted without the rest of the loading pipeline (which calls this module).
fn suggested() -> &'static (Vec<FlowSchema>, Vec<PriorityLevel>) {
    static SUGGESTED: OnceLock<(Vec<FlowSchema>, Vec<PriorityLevel>)> = OnceLock::new();
    SUGGESTED.get_or_init(|| {
        let parsed = parse_file("<embedded>/bootstrap.yaml", BOOTSTRAP_YAML, Format::Yaml);
        let (mut schemas, mut levels) = (Vec::new(), Vec::new());
        for mut obj in parsed.objects {
            match &mut obj.object {
                RawObject::FlowSchema(fs) => {
                    defaults::default_flow_schema(fs);
                    schemas.extend(convert::flow_schema(fs));
                }
                RawObject::PriorityLevel(pl) => {
                    defaults::default_priority_level(pl);
                    levels.extend(convert::priority_level(pl));
                }
            }
        }
        schemas.retain(|fs| fs.name != EXEMPT && fs.name != CATCH_ALL);
        levels.retain(|pl| pl.name != EXEMPT && pl.name != CATCH_ALL);
        (schemas, levels)
    })
}

/// Whether `name` is one of the suggested priority levels (`system`, `workload-high`, ...).
pub fn is_suggested_level(name: &str) -> bool {
    suggested().1.iter().any(|pl| pl.name == name)
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `shouldUpdateSpec`: whether the ensurer may overwrite a suggested object's spec.
pub(in crate::config) fn auto_update_spec(meta: &RawMeta) -> bool {
    match meta
        .annotations
        .get(AUTO_UPDATE_ANNOTATION)
        .map(String::as_str)
        .and_then(parse_bool)
    {
        Some(auto) => auto,
        None => meta.generation == 1,
    }
}

/// The FlowSchema the apiserver would end up with, and why it differs from `fs` when it does.
pub(in crate::config) fn flow_schema(
    fs: FlowSchema,
    meta: &RawMeta,
) -> (FlowSchema, Option<String>) {
    let Some(built_in) = suggested().0.iter().find(|s| s.name == fs.name) else {
        return (fs, None);
    };
    let built_in = FlowSchema {
        uid: fs.uid.clone(),
        ..built_in.clone()
    };
    if !auto_update_spec(meta) || built_in == fs {
        return (fs, None);
    }
    (built_in, Some(suggested_reason()))
}

/// The priority level the apiserver would end up with, and why it differs from `pl` when it does.
pub(in crate::config) fn priority_level(
    pl: PriorityLevel,
    meta: &RawMeta,
) -> (PriorityLevel, Option<String>) {
    let Some(built_in) = suggested().1.iter().find(|s| s.name == pl.name) else {
        return (pl, None);
    };
    if !auto_update_spec(meta) || built_in.spec == pl.spec {
        return (pl, None);
    }
    let built_in = PriorityLevel {
        uid: pl.uid.clone(),
        ..built_in.clone()
    };
    (built_in, Some(suggested_reason()))
}

fn suggested_reason() -> String {
    format!(
        "a suggested object with {AUTO_UPDATE_ANNOTATION} true (or no such annotation and \
         metadata.generation 1): kube-apiserver puts its spec back to the built-in one within a \
         minute, so the built-in spec is used; set the annotation to \"false\" to keep this spec"
    )
}

#[cfg(test)]
mod tests;
