//! The effective configuration as multi-document `flowcontrol.apiserver.k8s.io/v1` YAML.

use super::raw::{RawFlowSchema, RawPriorityLevelConfiguration};
use super::Config;

/// The configuration as YAML documents: priority levels by name, then FlowSchemas in matching
/// order, defaults applied and mandatory objects included. Dangling FlowSchemas are left out and
/// named in a comment at the top, so that the output loads back into the same configuration.
pub fn to_yaml(config: &Config) -> String {
    let mut out = String::from(
        "# Effective API Priority and Fairness configuration (defaults applied, mandatory \
         objects included).\n",
    );
    for (fs, level) in config.dangling() {
        out.push_str(&format!(
            "# Omitted FlowSchema {}: its priority level {level:?} does not exist.\n",
            fs.name
        ));
    }
    let levels = config
        .priority_levels()
        .map(|pl| RawPriorityLevelConfiguration::from(pl.as_ref()).to_v1_value());
    let schemas = config
        .flow_schemas()
        .iter()
        .map(|fs| RawFlowSchema::from(fs.as_ref()).to_v1_value());
    for value in levels.chain(schemas) {
        out.push_str("---\n");
        // Serializing a tree of maps, lists, strings and integers cannot fail.
        match serde_yaml::to_string(&value) {
            Ok(text) => out.push_str(&text),
            Err(e) => out.push_str(&format!("# cannot serialize: {e}\n")),
        }
    }
    out
}
