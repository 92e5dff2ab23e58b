//! The names every `apiserver_flowcontrol_*` family shares: namespace, subsystem, the two
//! common label names, and the stability level that prefixes a help text.

pub(super) const NAMESPACE: &str = "apiserver";
pub(super) const SUBSYSTEM: &str = "flowcontrol";
pub(super) const PL: &str = "priority_level";
pub(super) const FS: &str = "flow_schema";

/// Component-base's stability levels, as they prefix the help text.
#[derive(Clone, Copy)]
pub(super) enum Stability {
    Alpha,
    Beta,
}

/// `[ALPHA] help` / `[BETA] help`, as component-base's `annotateStabilityLevel` writes it.
pub(super) fn annotate(stability: Stability, help: &str) -> String {
    match stability {
        Stability::Alpha => format!("[ALPHA] {help}"),
        Stability::Beta => format!("[BETA] {help}"),
    }
}
