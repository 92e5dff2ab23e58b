//! The effective configuration as multi-document `flowcontrol.apiserver.k8s.io/v1` YAML.

use super::raw::{RawFlowSchema, RawPriorityLevelConfiguration};
use super::Config;

/// The configuration as YAML documents: priority levels by name, then FlowSchemas in matching
/// order, defaults applied and mandatory objects included, then the dangling FlowSchemas (each
/// after a comment naming its missing level). Every object read is kept, as the apiserver stores a
/// dangling FlowSchema and only marks it `Dangling`; so the output loads back into the same
/// configuration, dangling schemas still dangling, and is a faithful migration of older versions.
pub fn to_yaml(config: &Config) -> String {
    let mut out = String::from(
        "# Effective API Priority and Fairness configuration (defaults applied, mandatory \
         objects included).\n",
    );
    let levels = config.priority_levels().map(|pl| {
        (
            None,
            RawPriorityLevelConfiguration::from(pl.as_ref()).to_v1_value(),
        )
    });
    let schemas = config
        .flow_schemas()
        .iter()
        .map(|fs| (None, RawFlowSchema::from(fs.as_ref()).to_v1_value()));
    let dangling = config.dangling().iter().map(|(fs, level)| {
        let note = format!(
            "# Dangling: priority level {} does not exist, so this FlowSchema is skipped for \
             matching.\n",
            super::field::go_quote(level)
        );
        (Some(note), RawFlowSchema::from(fs.as_ref()).to_v1_value())
    });
    for (note, value) in levels.chain(schemas).chain(dangling) {
        out.push_str("---\n");
        if let Some(note) = note {
            out.push_str(&note);
        }
        // Serializing a tree of maps, lists, strings and integers cannot fail.
        match crate::yaml::to_string(&value) {
            Ok(text) => out.push_str(&text),
            Err(e) => out.push_str(&format!("# cannot serialize: {e}\n")),
        }
    }
    out
}
