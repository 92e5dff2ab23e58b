//! `check` and `config dump` run as the built binary on fixture directories.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .args(args)
        .output()
        .expect("the binary runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn check(name: &str) -> (Run, String) {
    let dir = fixture(name);
    let dir = dir.to_str().expect("utf-8 path").to_string();
    (run(&["check", "--config-dir", &dir]), dir)
}

#[test]
fn every_api_version_loads_and_other_files_are_ignored() {
    let (r, dir) = check("all-versions");
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        format!("OK: {dir}: 6 priority levels, 5 FlowSchemas in use\n")
    );
    assert_eq!(r.stderr, "");
}

#[test]
fn dump_shows_per_version_defaults_in_v1_form() {
    let dir = fixture("all-versions");
    let r = run(&["config", "dump", "--config-dir", dir.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let doc = |name: &str| -> String {
        r.stdout
            .split("---\n")
            .find(|d| d.contains(&format!("  name: {name}\n")))
            .unwrap_or_else(|| panic!("{name} in dump"))
            .to_string()
    };
    let beta1 = doc("beta1-level");
    for want in [
        "nominalConcurrencyShares: 30",
        "lendablePercent: 0",
        "queues: 64",
        "handSize: 8",
        "queueLengthLimit: 50",
    ] {
        assert!(beta1.contains(want), "{want} in {beta1}");
    }
    assert!(doc("beta2-level").contains("nominalConcurrencyShares: 12"));
    assert!(doc("beta2-level").contains("borrowingLimitPercent: 200"));
    assert!(doc("beta3-jail").contains("nominalConcurrencyShares: 0"));
    assert!(!doc("beta3-jail").contains("preserve-zero"));
    assert!(doc("v1-level").contains("uid: '1234'"));
    assert!(doc("beta1-schema").contains("matchingPrecedence: 1000"));
    // Order: priority levels by name, then FlowSchemas in matching order.
    let names: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  name: "))
        .collect();
    assert_eq!(
        names,
        [
            "beta1-level",
            "beta2-level",
            "beta3-jail",
            "catch-all",
            "exempt",
            "v1-level",
            "exempt",
            "v1-schema",
            "beta2-schema",
            "beta1-schema",
            "catch-all",
        ]
    );
}

#[test]
fn lists_load_and_unknown_items_are_warned_about() {
    let (r, dir) = check("lists");
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("4 priority levels, 3 FlowSchemas"));
    assert_eq!(
        r.stderr,
        format!(
            "warning: {dir}/levels.yaml: document 2 items[1]: ignoring v1/ConfigMap: only \
             FlowSchema and PriorityLevelConfiguration of flowcontrol.apiserver.k8s.io v1, \
             v1beta3, v1beta2, v1beta1 and v1alpha1 are read\n"
        )
    );
}

#[test]
fn multi_document_files_with_empty_documents_load() {
    let (r, _) = check("multi-doc");
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("3 priority levels, 3 FlowSchemas"));
}

#[test]
fn broken_yaml_names_file_and_line() {
    let (r, dir) = check("broken-yaml");
    assert_eq!(r.code, Some(1));
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stdout);
    assert!(
        lines[0].starts_with(&format!("{dir}/b-broken.yaml: invalid YAML: ")),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("at line 7 column"), "{}", lines[0]);
    assert!(r.stderr.ends_with("1 problem(s)\n"), "{}", r.stderr);
}

#[test]
fn invalid_objects_name_object_and_field_path() {
    let (r, dir) = check("invalid-objects");
    assert_eq!(r.code, Some(1));
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 20, "{}", r.stdout);
    let levels = format!("{dir}/levels.yaml: PriorityLevelConfiguration/");
    let schemas = format!("{dir}/schemas.yaml: FlowSchema/bad-schema: ");
    for want in [
        format!("{levels}Bad_Level: spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer"),
        format!("{levels}Bad_Level: spec.limited.limitResponse.queuing.handSize: Invalid value: 8: should not be greater than queues (7)"),
        format!("{levels}Bad_Level: spec.limited.lendablePercent: Invalid value: 150: must be between 0 and 100, inclusive"),
        format!("{levels}catch-all: spec.limited.assuredConcurrencyShares: Invalid value: -5: must be a non-negative integer"),
        format!("{levels}catch-all: spec: Invalid value: spec of 'catch-all' must equal the fixed value"),
        format!("{schemas}spec.unknownField: Unknown field"),
        format!("{schemas}spec.matchingPrecedence: Invalid value: 20000: must not be greater than 10000"),
        format!("{schemas}spec.priorityLevelConfiguration.name: Required value: must reference a priority level"),
        format!("{schemas}spec.rules[0].subjects[0].kind: Unsupported value: \"Foo\": supported values: \"Group\", \"ServiceAccount\", \"User\""),
        format!("{schemas}spec.rules[0].subjects[1].serviceAccount.namespace: Required value: must specify namespace for service account"),
        format!("{schemas}spec.rules[0].resourceRules[0].resources: Required value: resource rules must supply at least one resource"),
        format!("{schemas}spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"healthz\": must start with slash"),
        format!("{schemas}spec.rules[1].subjects: Required value: subjects must contain at least one value"),
    ] {
        assert!(lines.contains(&want.as_str()), "missing line {want}\n{}", r.stdout);
    }
}

#[test]
fn dangling_flow_schemas_are_warned_about_skipped_and_dumped() {
    let (r, dir) = check("dangling");
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    // The schema naming the mandatory `exempt` is in use: the apiserver always has that level.
    // The warning is beside the OK, on the same screen (standard output).
    let file = format!("{dir}/all.yaml");
    assert_eq!(
        r.stdout,
        format!(
            "OK: {dir}: 2 priority levels, 3 FlowSchemas in use, 1 more FlowSchema skipped \
             (dangling)\n\
             warning: {file}: FlowSchema/points-nowhere: This FlowSchema references the \
             PriorityLevelConfiguration object named \"missing-level\" but there is no such \
             object; it is skipped for matching\n"
        )
    );
    assert_eq!(r.stderr, "");
    let dump = run(&["config", "dump", "--config-dir", &dir]);
    assert!(dump.stdout.contains(
        "---\n# Dangling: priority level \"missing-level\" does not exist, so this FlowSchema \
         is skipped for matching.\n"
    ));
    assert!(dump.stdout.contains("  name: points-nowhere\n"));
    assert!(dump.stdout.contains("  name: points-at-implied-exempt\n"));
    // The dump loads back into the same configuration, the dangling schema still dangling.
    let again = tempfile::tempdir().expect("tempdir");
    std::fs::write(again.path().join("dump.yaml"), &dump.stdout).expect("write");
    let again = again.path().to_str().expect("utf-8").to_string();
    let r2 = run(&["check", "--config-dir", &again]);
    assert!(
        r2.stdout.lines().next().is_some_and(
            |l| l.ends_with("3 FlowSchemas in use, 1 more FlowSchema skipped (dangling)")
        )
    );
}

#[test]
fn a_misspelt_level_name_is_warned_beside_the_ok_with_the_name_meant() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("team.yaml"),
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n\
         metadata: {name: team-low}\nspec: {type: Limited, limited: {nominalConcurrencyShares: \
         10, limitResponse: {type: Reject}}}\n---\n\
         apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata: {name: team}\n\
         spec:\n  priorityLevelConfiguration: {name: team-lwo}\n  rules:\n\
         \x20 - subjects: [{kind: User, user: {name: alice}}]\n\
         \x20   nonResourceRules: [{verbs: ['*'], nonResourceURLs: ['*']}]\n",
    )
    .expect("write");
    let dir = dir.path().to_str().expect("utf-8").to_string();
    let r = run(&["check", "--config-dir", &dir]);
    assert_eq!(
        r.code,
        Some(0),
        "dangling is not invalid: {}{}",
        r.stdout,
        r.stderr
    );
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].starts_with("OK: "), "{}", r.stdout);
    assert!(
        lines[1].starts_with(&format!("warning: {dir}/team.yaml: FlowSchema/team: "))
            && lines[1].ends_with("(did you mean \"team-low\"?)"),
        "{}",
        r.stdout
    );
}

#[test]
fn duplicate_names_across_files_name_both_files() {
    let (r, dir) = check("duplicates");
    assert_eq!(r.code, Some(1));
    assert_eq!(
        r.stdout,
        format!(
            "{dir}/b.yaml: PriorityLevelConfiguration/twice: metadata.name: Duplicate value: \
             \"twice\": also defined in {dir}/a.yaml (PriorityLevelConfiguration/twice)\n"
        )
    );
}

#[test]
fn unknown_kinds_are_warned_about_and_v1alpha1_is_read() {
    let (r, dir) = check("unknown-kinds");
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        format!("OK: {dir}: 3 priority levels, 3 FlowSchemas in use\n")
    );
    let warnings: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    assert!(warnings[0].starts_with(&format!(
        "warning: {dir}/things.yaml: document 1: ignoring v1/ConfigMap"
    )));
    let lint = run(&["lint", "--config-dir", &dir]);
    assert_eq!(lint.code, Some(3), "{}{}", lint.stdout, lint.stderr);
    assert!(lint.stdout.contains(&format!(
        "{dir}/things.yaml: FlowSchema/too-old: apiVersion: [api-version-removed] \
         flowcontrol.apiserver.k8s.io/v1alpha1 is not served since Kubernetes 1.21"
    )));
}

#[test]
fn a_flow_control_object_of_a_version_never_read_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text =
        "apiVersion: flowcontrol.apiserver.k8s.io/v2\nkind: FlowSchema\nmetadata: {name: future}\n";
    std::fs::write(dir.path().join("future.yaml"), text).expect("write");
    let dir = dir.path().to_str().expect("utf-8").to_string();
    let r = run(&["check", "--config-dir", &dir]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        format!(
            "{dir}/future.yaml: document 1: apiVersion: Unsupported value: \
             \"flowcontrol.apiserver.k8s.io/v2\": FlowSchema is read in \
             flowcontrol.apiserver.k8s.io v1, v1beta3, v1beta2, v1beta1 and v1alpha1\n"
        )
    );
}

#[test]
fn a_namespace_is_cleared_and_flow_schemas_naming_mandatory_levels_are_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: scrape, namespace: monitoring}
spec:
  priorityLevelConfiguration: {name: exempt}
  matchingPrecedence: 2
  rules:
  - subjects: [{kind: Group, group: {name: ops}}]
    nonResourceRules: [{verbs: ['*'], nonResourceURLs: ['*']}]
";
    std::fs::write(dir.path().join("fs.yaml"), text).expect("write");
    let dir = dir.path().to_str().expect("utf-8").to_string();
    let r = run(&["check", "--config-dir", &dir]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        format!("OK: {dir}: 2 priority levels, 3 FlowSchemas in use\n")
    );
    assert_eq!(r.stderr, "");
}

#[test]
fn missing_directory_is_an_io_error() {
    let r = run(&[
        "check",
        "--config-dir",
        "/nonexistent/kube-apf-proxy-config",
    ]);
    assert_eq!(r.code, Some(2));
    assert_eq!(
        r.stderr,
        "error: --config-dir /nonexistent/kube-apf-proxy-config: cannot read the directory: \
         No such file or directory (os error 2)\n",
        "the flag named, the cause once"
    );
}

#[test]
fn embedded_dump_round_trips_through_check() {
    let dump = run(&["config", "dump"]);
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    assert_eq!(dump.stderr, "");
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::write(tmp.path().join("dump.yaml"), &dump.stdout).expect("write dump");
    let dir = tmp.path().to_str().expect("utf-8 path");
    let r = run(&["check", "--config-dir", dir]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        format!("OK: {dir}: 8 priority levels, 11 FlowSchemas in use\n")
    );
    let again = run(&["config", "dump", "--config-dir", dir]);
    assert_eq!(again.stdout, dump.stdout);
}

#[test]
fn example_directory_is_the_embedded_configuration() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let r = run(&["config", "dump", "--config-dir", dir.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, run(&["config", "dump"]).stdout);
}

#[test]
fn problems_are_listed_file_by_file() {
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        tmp.path().join("a.yaml"),
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata: {name: a}\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("b.yaml"), "kind: [\n").unwrap();
    let dir = tmp.path().to_str().unwrap();
    let r = run(&["check", "--config-dir", dir]);
    assert_eq!(r.code, Some(1));
    let files: Vec<&str> = r
        .stdout
        .lines()
        .map(|l| l.split(": ").next().unwrap())
        .collect();
    let a = format!("{dir}/a.yaml");
    let b = format!("{dir}/b.yaml");
    assert_eq!(files, [a.as_str(), &b]);
}

#[test]
fn an_unknown_field_close_to_a_known_one_gets_a_did_you_mean() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("schema.yaml"),
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata:\n  name: typo\n\
         spec:\n  matchingPrecendence: 500\n  priorityLevelConfiguration:\n    name: global-default\n",
    )
    .expect("write");
    let dir = dir.path().to_str().expect("utf-8 path");
    let r = run(&["check", "--config-dir", dir]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(
        r.stdout,
        format!(
            "{dir}/schema.yaml: FlowSchema/typo: spec.matchingPrecendence: Unknown field: \
             did you mean \"matchingPrecedence\"?\n"
        )
    );
}
