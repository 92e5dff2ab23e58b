//! Parsing, defaulting per version, loading and the embedded bootstrap configuration.

use super::load::{load_sources, SourceFile};
use super::parse::Format;
use super::*;

fn load(format: Format, text: &str) -> Result<Loaded, ConfigError> {
    load_sources(&[SourceFile {
        name: "t.yaml".to_string(),
        bytes: text.as_bytes().to_vec(),
        format,
    }])
}

fn load_yaml(text: &str) -> Loaded {
    match load(Format::Yaml, text) {
        Ok(loaded) => loaded,
        Err(ConfigError::Invalid { problems, .. }) => {
            panic!("unexpected problems: {problems:#?}")
        }
        Err(e) => panic!("{e}"),
    }
}

fn problems(text: &str) -> Vec<String> {
    match load(Format::Yaml, text) {
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

fn plc(api_version: &str, annotations: &str, limited: &str) -> String {
    format!(
        "apiVersion: flowcontrol.apiserver.k8s.io/{api_version}\nkind: PriorityLevelConfiguration\n\
         metadata:\n  name: pl\n{annotations}spec:\n  type: Limited\n  limited:\n{limited}"
    )
}

const REJECT: &str = "    limitResponse: {type: Reject}\n";
const PRESERVE: &str =
    "  annotations: {flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares: \"\"}\n";

#[test]
fn shares_are_defaulted_per_version() {
    let cases = [
        ("v1", "", "", 30),
        ("v1", "", "    nominalConcurrencyShares: 0\n", 0),
        ("v1", "", "    nominalConcurrencyShares: 7\n", 7),
        ("v1beta3", "", "", 30),
        ("v1beta3", "", "    nominalConcurrencyShares: 0\n", 30),
        ("v1beta3", PRESERVE, "    nominalConcurrencyShares: 0\n", 0),
        ("v1beta3", PRESERVE, "", 0),
        ("v1beta3", PRESERVE, "    nominalConcurrencyShares: 4\n", 4),
        ("v1beta2", "", "    assuredConcurrencyShares: 0\n", 30),
        ("v1beta2", "", "    assuredConcurrencyShares: 9\n", 9),
        ("v1beta1", "", "", 30),
    ];
    for (version, annotations, shares, want) in cases {
        let text = plc(version, annotations, &format!("{shares}{REJECT}"));
        let loaded = load_yaml(&text);
        let pl = loaded.config.priority_level("pl").expect("pl");
        assert_eq!(
            pl.nominal_concurrency_shares(),
            want,
            "{version} {annotations} {shares}"
        );
        assert_eq!(pl.lendable_percent(), 0);
        assert_eq!(pl.borrowing_limit_percent(), None);
    }
}

#[test]
fn preserve_zero_annotation_is_forbidden_outside_v1beta3() {
    for version in ["v1", "v1beta2", "v1beta1"] {
        let text = plc(version, PRESERVE, REJECT);
        assert_eq!(
            problems(&text),
            vec!["t.yaml: PriorityLevelConfiguration/pl: metadata.annotations: Forbidden: \
                  annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden"],
            "{version}"
        );
    }
}

#[test]
fn queuing_defaults_fill_only_existing_sections() {
    let text = plc(
        "v1",
        "",
        "    limitResponse:\n      type: Queue\n      queuing: {}\n",
    );
    let loaded = load_yaml(&text);
    let q = loaded
        .config
        .priority_level("pl")
        .and_then(|pl| pl.queuing());
    assert_eq!(
        q,
        Some(Queuing {
            queues: 64,
            hand_size: 8,
            queue_length_limit: 50
        })
    );
    // No `queuing` section: it is not created, so validation requires it.
    let text = plc("v1", "", "    limitResponse: {type: Queue}\n");
    assert_eq!(
        problems(&text),
        vec![
            "t.yaml: PriorityLevelConfiguration/pl: spec.limited.limitResponse.queuing: \
              Required value: must not be empty if limited.limitResponse.type is Limited"
        ]
    );
}

const FS_V1BETA1: &str = "apiVersion: flowcontrol.apiserver.k8s.io/v1beta1
kind: FlowSchema
metadata: {name: fs}
spec:
  priorityLevelConfiguration: {name: pl}
  rules:
  - subjects: [{kind: Group, group: {name: dev}}]
    nonResourceRules: [{verbs: ['*'], nonResourceURLs: ['*']}]
";

const PL_V1: &str = "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: pl}
spec: {type: Limited, limited: {limitResponse: {type: Reject}}}
";

#[test]
fn flow_schema_precedence_defaults_to_1000() {
    let loaded = load_yaml(&format!("{FS_V1BETA1}---\n{PL_V1}"));
    let fs = &loaded.config.flow_schemas()[1];
    assert_eq!((fs.name.as_str(), fs.matching_precedence), ("fs", 1000));
}

#[test]
fn multi_document_yaml_with_empty_documents_loads() {
    let text = format!("---\n---\n{FS_V1BETA1}---\n# only a comment\n---\n{PL_V1}");
    let loaded = load_yaml(&text);
    assert_eq!(loaded.config.flow_schemas().len(), 3);
    assert!(loaded.warnings.is_empty());
}

#[test]
fn lists_of_every_kind_load_and_other_kinds_are_warned_about() {
    let text = "apiVersion: flowcontrol.apiserver.k8s.io/v1beta2
kind: FlowSchemaList
items:
- metadata: {name: a}
  spec:
    priorityLevelConfiguration: {name: p}
    rules: [{subjects: [{kind: User, user: {name: u}}], nonResourceRules: [{verbs: [get], nonResourceURLs: [/x]}]}]
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfigurationList
items:
- metadata: {name: p}
  spec: {type: Limited, limited: {limitResponse: {type: Reject}}}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cm}
- apiVersion: flowcontrol.apiserver.k8s.io/v1beta3
  kind: PriorityLevelConfiguration
  metadata: {name: q}
  spec: {type: Limited, limited: {limitResponse: {type: Reject}}}
";
    let loaded = load_yaml(text);
    let levels: Vec<&str> = loaded
        .config
        .priority_levels()
        .map(|pl| pl.name.as_str())
        .collect();
    assert_eq!(levels, ["catch-all", "exempt", "p", "q"]);
    assert!(loaded.config.flow_schemas().iter().any(|fs| fs.name == "a"));
    let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "t.yaml: document 3 items[0]: ignoring v1/ConfigMap: only FlowSchema and \
          PriorityLevelConfiguration of flowcontrol.apiserver.k8s.io v1, v1beta3, v1beta2, \
          v1beta1 and v1alpha1 are read"
        ]
    );
}

#[test]
fn json_streams_load() {
    let text = r#"{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration",
 "metadata":{"name":"j"},"spec":{"type":"Limited","limited":{"limitResponse":{"type":"Reject"}}}}
{"apiVersion":"v1","kind":"List","items":[]}"#;
    let loaded = load(Format::Json, text).expect("valid");
    assert!(loaded.config.priority_level("j").is_some());
}

#[test]
fn unknown_fields_and_wrong_types_are_errors_with_paths() {
    let text = "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: pl, colour: red}
spec:
  type: Limited
  limited:
    assuredConcurrencyShares: 5
    lendablePercent: lots
    limitResponse: {type: Reject}
";
    assert_eq!(
        problems(text),
        [
            "t.yaml: PriorityLevelConfiguration/pl: metadata.colour: Unknown field",
            "t.yaml: PriorityLevelConfiguration/pl: spec.limited.assuredConcurrencyShares: \
             Unknown field: this apiVersion names the field nominalConcurrencyShares",
            "t.yaml: PriorityLevelConfiguration/pl: spec.limited.lendablePercent: Invalid type: \
             expected an int32, got string \"lots\"",
        ]
    );
}

#[test]
fn yaml_syntax_errors_name_the_line() {
    let got = problems("apiVersion: v1\nkind: [unclosed\n");
    assert_eq!(got.len(), 1);
    assert!(got[0].starts_with("t.yaml: invalid YAML: "), "{got:?}");
    assert!(got[0].contains("line 2"), "{got:?}");
}

#[test]
fn documents_that_are_not_objects_are_errors() {
    assert_eq!(
        problems("- a\n---\nkind: FlowSchema\n"),
        [
            "t.yaml: document 1: expected a Kubernetes object (a mapping with apiVersion and kind)",
            "t.yaml: document 2: Object 'apiVersion' is missing",
        ]
    );
}

#[test]
fn unnamed_objects_and_duplicates_are_reported() {
    let text = format!(
        "{FS_V1BETA1}---\n{FS_V1BETA1}---\n{}",
        FS_V1BETA1.replace("name: fs", "uid: x")
    );
    assert_eq!(
        problems(&text),
        [
            "t.yaml: FlowSchema/<unnamed: document 3>: metadata.name: Required value: name or \
             generateName is required",
            "t.yaml: FlowSchema/fs: metadata.name: Duplicate value: \"fs\": also defined in \
             t.yaml (FlowSchema/fs)",
        ]
    );
}

#[test]
fn dangling_flow_schemas_are_warned_about_and_skipped() {
    let loaded = load_yaml(&FS_V1BETA1.replace("name: pl", "name: nowhere"));
    assert_eq!(loaded.config.dangling().len(), 1);
    assert_eq!(
        loaded.warnings[0].to_string(),
        "t.yaml: FlowSchema/fs: This FlowSchema references the PriorityLevelConfiguration object \
         named \"nowhere\" but there is no such object; it is skipped for matching"
    );
    assert!(!loaded
        .config
        .flow_schemas()
        .iter()
        .any(|fs| fs.name == "fs"));
}

#[test]
fn bootstrap_loads_without_problems_or_warnings() {
    let loaded = load_bootstrap().expect("bootstrap is valid");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let config = bootstrap();
    let order: Vec<&str> = config
        .flow_schemas()
        .iter()
        .map(|fs| fs.name.as_str())
        .collect();
    assert_eq!(
        order,
        [
            "exempt",
            "probes",
            "system-leader-election",
            "system-node-high",
            "system-nodes",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-system-service-accounts",
            "service-accounts",
            "global-default",
            "catch-all",
        ]
    );
    assert_eq!(config.priority_levels().count(), 8);
    assert_eq!(
        **config.catch_all(),
        mandatory::catch_all_flow_schema().with_uid()
    );
    assert_eq!(
        config.flow_schemas()[0].as_ref(),
        &mandatory::exempt_flow_schema().with_uid()
    );
    assert_eq!(
        config.priority_level("exempt").map(|p| p.as_ref()),
        Some(&mandatory::exempt_priority_level().with_uid())
    );
    assert_eq!(
        config.priority_level("catch-all").map(|p| p.as_ref()),
        Some(&mandatory::catch_all_priority_level().with_uid())
    );
}

#[test]
fn implied_mandatory_flow_schemas_sort_as_the_objects_the_apiserver_re_creates() {
    // A running apiserver always has the mandatory objects (its ensurer re-creates them), so
    // they sort by precedence and name like any other: `catch-all` before a `catjh-all` of the
    // same precedence 10000. Found by the config_roundtrip
    // fuzz target: appended, the implied catch-all came after `catjh-all`, and the dump, which
    // names it, loaded back in the other order.
    let text = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: catjh-all}
spec:
  priorityLevelConfiguration: {name: catch-all}
  matchingPrecedence: 10000
  rules:
  - subjects: [{kind: Group, group: {name: system:authenticated}}]
    nonResourceRules: [{verbs: ['*'], nonResourceURLs: ['*']}]
"#;
    let config = load_yaml(text).config;
    let names: Vec<&str> = config
        .flow_schemas()
        .iter()
        .map(|fs| fs.name.as_str())
        .collect();
    assert_eq!(names, ["exempt", "catch-all", "catjh-all"]);
    let dumped = to_yaml(&config);
    assert_eq!(to_yaml(&load_yaml(&dumped).config), dumped);
}

#[test]
fn dump_round_trips_through_the_loader() {
    let config = bootstrap();
    let text = to_yaml(&config);
    let again = load_yaml(&text).config;
    assert_eq!(to_yaml(&again), text);
    let names = |c: &Config| -> Vec<FlowSchema> {
        c.flow_schemas().iter().map(|f| (**f).clone()).collect()
    };
    assert_eq!(names(&again), names(&config));
}

#[test]
fn yaml_merge_keys_are_applied() {
    let text = format!(
        "{PL_V1}---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\n\
         metadata: {{name: merged}}\nspec:\n  <<: {{priorityLevelConfiguration: {{name: pl}}}}\n  \
         rules: [{{subjects: [{{kind: Group, group: {{name: g}}}}], nonResourceRules: [{{verbs: [get], nonResourceURLs: [/x]}}]}}]\n"
    );
    let loaded = load_yaml(&text);
    assert!(loaded
        .config
        .flow_schemas()
        .iter()
        .any(|fs| fs.name == "merged"));
}

#[test]
fn a_config_name_that_is_not_a_file_is_an_error_and_other_subdirectories_are_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("plain-subdir")).expect("subdir");
    super::load_dir(dir.path()).expect("an ordinary subdirectory is ignored");
    std::fs::create_dir(dir.path().join("flowcontrol.yaml")).expect("dir named like a file");
    let error = super::load_dir(dir.path()).expect_err("a directory named flowcontrol.yaml");
    assert!(error.is_io());
    assert!(error.to_string().contains("flowcontrol.yaml"), "{error}");
    assert!(error.to_string().contains("not a regular file"), "{error}");
}

mod props;

#[test]
fn objects_without_a_uid_get_a_stable_derived_one_and_explicit_uids_stay() {
    let uid = model::derived_uid("FlowSchema", "fs");
    // An RFC 9562 version-8 UUID: 8-4-4-4-12 lowercase hex, version 8, variant 10.
    let groups: Vec<usize> = uid.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12], "{uid}");
    assert!(
        uid.chars()
            .all(|c| c == '-' || matches!(c, '0'..='9' | 'a'..='f')),
        "{uid}"
    );
    assert_eq!(&uid[14..15], "8", "{uid}");
    assert!(matches!(&uid[19..20], "8" | "9" | "a" | "b"), "{uid}");
    // Stable, and different per kind and per name.
    assert_eq!(uid, model::derived_uid("FlowSchema", "fs"));
    assert_ne!(uid, model::derived_uid("PriorityLevelConfiguration", "fs"));
    assert_ne!(uid, model::derived_uid("FlowSchema", "fs2"));

    let text = format!(
        "{}---\n{FS_V1BETA1}",
        plc(
            "v1",
            "",
            &format!("    nominalConcurrencyShares: 5\n{REJECT}")
        )
        .replace(
            "metadata:\n",
            "metadata:\n  uid: 1e9a5d2c-0000-4000-8000-00000000000a\n"
        )
    );
    let config = load_yaml(&text).config;
    let pl = config.priority_level("pl").expect("pl");
    assert_eq!(pl.uid, "1e9a5d2c-0000-4000-8000-00000000000a");
    let fs = config
        .flow_schemas()
        .iter()
        .find(|f| f.name == "fs")
        .expect("fs");
    assert_eq!(fs.uid, uid);
    // The implied mandatory objects get one too.
    assert_eq!(
        config.priority_level("exempt").expect("exempt").uid,
        model::derived_uid("PriorityLevelConfiguration", "exempt")
    );
    assert_eq!(
        config.catch_all().uid,
        model::derived_uid("FlowSchema", "catch-all")
    );
}

#[test]
fn a_flow_schema_naming_a_mandatory_level_is_never_dangling() {
    // (the level named, whether the schema is dangling)
    let cases = [
        ("exempt", false),
        ("catch-all", false),
        ("pl", false),
        // Suggested levels are not implied by a directory: see docs/configuration.md.
        ("workload-low", true),
        ("nowhere", true),
    ];
    for (level, dangling) in cases {
        let text = format!(
            "{}---\n{PL_V1}",
            FS_V1BETA1.replace("{name: pl}", &format!("{{name: {level}}}"))
        );
        let loaded = load_yaml(&text);
        let names: Vec<&str> = loaded
            .config
            .dangling()
            .iter()
            .map(|(fs, _)| fs.name.as_str())
            .collect();
        assert_eq!(names.contains(&"fs"), dangling, "{level}");
        let in_use = loaded
            .config
            .flow_schemas()
            .iter()
            .any(|fs| fs.name == "fs");
        assert_eq!(in_use, !dangling, "{level}");
        assert_eq!(loaded.warnings.len(), usize::from(dangling), "{level}");
    }
}

#[test]
fn a_namespace_on_these_cluster_scoped_objects_is_cleared_as_the_apiserver_does() {
    let fs = FS_V1BETA1.replace("{name: fs}", "{name: fs, namespace: default}");
    let pl = PL_V1.replace("{name: pl}", "{name: pl, namespace: d8-system}");
    let cases = [
        format!("{fs}---\n{PL_V1}"),
        format!("{FS_V1BETA1}---\n{pl}"),
        format!("{fs}---\n{pl}"),
    ];
    for text in cases {
        let loaded = load_yaml(&text);
        assert!(loaded.warnings.is_empty(), "{text}: {:?}", loaded.warnings);
        assert!(loaded.config.flow_schemas().iter().any(|f| f.name == "fs"));
        assert!(loaded.config.priority_level("pl").is_some());
    }
}

#[test]
fn v1alpha1_objects_are_read_with_v1beta1_fields_and_defaults() {
    let text = "apiVersion: flowcontrol.apiserver.k8s.io/v1alpha1
kind: PriorityLevelConfiguration
metadata: {name: old}
spec:
  type: Limited
  limited:
    limitResponse: {type: Queue, queuing: {queues: 16}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1alpha1
kind: FlowSchema
metadata: {name: old}
spec:
  priorityLevelConfiguration: {name: old}
  rules:
  - subjects: [{kind: Group, group: {name: dev}}]
    nonResourceRules: [{verbs: ['*'], nonResourceURLs: ['*']}]
";
    let loaded = load_yaml(text);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let versions: Vec<raw::ApiVersion> = loaded.sources.iter().map(|s| s.version).collect();
    assert_eq!(versions, [raw::ApiVersion::V1alpha1; 2]);
    let pl = loaded.config.priority_level("old").expect("read");
    let PriorityLevelSpec::Limited(limited) = &pl.spec else {
        panic!("limited")
    };
    assert_eq!(limited.nominal_concurrency_shares, 30);
    let fs = loaded
        .config
        .flow_schemas()
        .iter()
        .find(|f| f.name == "old");
    assert_eq!(fs.map(|f| f.matching_precedence), Some(1000));
    // The shares field is v1beta1's.
    let renamed = text.replace(
        "limitResponse:",
        "nominalConcurrencyShares: 3\n    limitResponse:",
    );
    assert!(problems(&renamed)
        .iter()
        .any(|p| p.contains("nominalConcurrencyShares")));
}

#[test]
fn dump_keeps_dangling_flow_schemas_and_loads_back_the_same() {
    let text = format!(
        "{}---\n{FS_V1BETA1}---\n{PL_V1}",
        FS_V1BETA1
            .replace("{name: pl}", "{name: nowhere}")
            .replace("name: fs}", "name: lost}")
    );
    let loaded = load_yaml(&text);
    assert_eq!(loaded.config.dangling().len(), 1);
    let dump = to_yaml(&loaded.config);
    assert!(dump.contains(
        "---\n# Dangling: priority level \"nowhere\" does not exist, so this FlowSchema is \
         skipped for matching.\n"
    ));
    assert!(dump.contains("  name: lost\n"), "{dump}");
    let again = load_yaml(&dump);
    assert_eq!(again.config.dangling().len(), 1);
    assert_eq!(to_yaml(&again.config), dump);
}

#[test]
fn the_summary_counts_read_one_way() {
    let in_use = load_yaml(&format!("{FS_V1BETA1}---\n{PL_V1}"));
    assert_eq!(
        summary(&in_use.config),
        "3 priority levels, 3 FlowSchemas in use"
    );
    let lost = load_yaml(&FS_V1BETA1.replace("{name: pl}", "{name: nowhere}"));
    assert_eq!(
        summary(&lost.config),
        "2 priority levels, 2 FlowSchemas in use, 1 more FlowSchema skipped (dangling)"
    );
}
