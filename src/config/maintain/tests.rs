//! The ensurer's rules over objects of a directory.

use super::*;
use crate::config::load::{load_sources, SourceFile};
use crate::config::parse::Format;
use crate::config::{ConfigError, Loaded};

fn load(text: &str) -> Loaded {
    let file = SourceFile {
        name: "t.yaml".to_string(),
        bytes: text.as_bytes().to_vec(),
        format: Format::Yaml,
    };
    match load_sources(&[file]) {
        Ok(loaded) => loaded,
        Err(ConfigError::Invalid { problems, .. }) => panic!("{problems:#?}"),
        Err(e) => panic!("{e}"),
    }
}

/// `global-default` (a suggested level) with 7 shares instead of 20, and `meta` lines.
fn global_default(meta: &str) -> String {
    format!(
        "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: global-default
{meta}spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 7
    lendablePercent: 50
    limitResponse:
      type: Queue
      queuing: {{queues: 128, handSize: 6, queueLengthLimit: 50}}
"
    )
}

fn shares(loaded: &Loaded, level: &str) -> u32 {
    match &loaded.config.priority_level(level).expect("level").spec {
        crate::config::PriorityLevelSpec::Limited(l) => l.nominal_concurrency_shares,
        crate::config::PriorityLevelSpec::Exempt { .. } => panic!("exempt"),
    }
}

#[test]
fn suggested_objects_keep_their_spec_unless_the_ensurer_would_overwrite_it() {
    let annotated = |v: &str| format!("  annotations: {{{AUTO_UPDATE_ANNOTATION}: '{v}'}}\n");
    // (metadata lines, the shares used, warned)
    let cases = [
        (String::new(), 7, false),
        (annotated("true"), 20, true),
        (annotated("True"), 20, true),
        (annotated("1"), 20, true),
        (annotated("false"), 7, false),
        (annotated("yes"), 7, false),
        ("  generation: 1\n".to_string(), 20, true),
        ("  generation: 2\n".to_string(), 7, false),
        (format!("  generation: 1\n{}", annotated("false")), 7, false),
    ];
    for (meta, want, warned) in cases {
        let loaded = load(&global_default(&meta));
        assert_eq!(shares(&loaded, "global-default"), want, "{meta}");
        let warning = loaded
            .warnings
            .iter()
            .any(|w| w.message.starts_with("spec: a suggested object"));
        assert_eq!(warning, warned, "{meta}: {:?}", loaded.warnings);
    }
}

#[test]
fn a_suggested_flow_schema_marked_for_auto_update_gets_the_built_in_spec() {
    let text = |annotation: &str| {
        format!(
            "apiVersion: flowcontrol.apiserver.k8s.io/v1beta3
kind: FlowSchema
metadata:
  name: service-accounts
  annotations: {{{AUTO_UPDATE_ANNOTATION}: '{annotation}'}}
spec:
  matchingPrecedence: 9000
  priorityLevelConfiguration: {{name: catch-all}}
  rules:
  - subjects: [{{kind: Group, group: {{name: system:serviceaccounts}}}}]
    nonResourceRules: [{{verbs: ['*'], nonResourceURLs: ['*']}}]
"
        )
    };
    // (annotation, the level used)
    for (annotation, level) in [("true", "workload-low"), ("false", "catch-all")] {
        let loaded = load(&text(annotation));
        let fs = loaded
            .config
            .flow_schemas()
            .iter()
            .chain(loaded.config.dangling().iter().map(|(fs, _)| fs))
            .find(|fs| fs.name == "service-accounts")
            .expect("read");
        assert_eq!(fs.priority_level, level, "{annotation}");
    }
}

#[test]
fn the_embedded_bootstrap_is_its_own_fixed_point() {
    let loaded = crate::config::load_bootstrap().expect("valid");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(suggested().0.len(), 9);
    assert_eq!(suggested().1.len(), 6);
}

#[test]
fn a_clusters_objects_are_taken_as_stored() {
    let text = global_default(&format!(
        "  annotations: {{{AUTO_UPDATE_ANNOTATION}: 'true'}}\n"
    ));
    let file = SourceFile {
        name: "<cluster>/prioritylevelconfigurations".to_string(),
        bytes: text.into_bytes(),
        format: Format::Yaml,
    };
    let loaded = crate::config::load::load_sources_as_stored(&[file]).expect("valid");
    assert_eq!(shares(&loaded, "global-default"), 7);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}
