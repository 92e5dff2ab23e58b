//! `lint` run as the built binary: exit codes, the text format and the JSON report.

use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn the_default_configuration_and_its_file_are_clean() {
    let (code, out, err) = run(&["lint"]);
    assert_eq!((code, out.as_str()), (Some(0), ""), "{err}");
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config/bootstrap.yaml");
    std::fs::copy(spec, dir.path().join("bootstrap.yaml")).expect("copy");
    let dir = dir.path().display().to_string();
    let (code, out, err) = run(&["lint", "--config-dir", &dir]);
    assert_eq!((code, out.as_str()), (Some(0), ""), "{err}");
}

#[test]
fn findings_only_exit_3_one_line_each() {
    let dir = fixture("all-versions");
    let (code, out, _) = run(&["lint", "--config-dir", &dir]);
    assert_eq!(code, Some(3), "{out}");
    let want = format!(
        "{dir}/01-v1beta1.yaml: FlowSchema/beta1-schema: apiVersion: [api-version-removed] \
         flowcontrol.apiserver.k8s.io/v1beta1 is not served since Kubernetes 1.26; write it as \
         flowcontrol.apiserver.k8s.io/v1"
    );
    assert!(out.lines().any(|l| l == want), "{out}");
    assert!(out.lines().all(|l| l.contains(": [")), "{out}");
}

#[test]
fn errors_exit_1_with_checks_lines_first() {
    let dir = fixture("invalid-objects");
    let (code, out, _) = run(&["lint", "--config-dir", &dir]);
    assert_eq!(code, Some(1));
    let (check_code, check_out, _) = run(&["check", "--config-dir", &dir]);
    assert_eq!(check_code, Some(1));
    assert_eq!(
        out, check_out,
        "lint reports check's errors in check's format"
    );
}

#[test]
fn json_output_carries_codes_and_field_paths() {
    let dir = fixture("dangling");
    let (code, out, err) = run(&["lint", "--config-dir", &dir, "--output", "json"]);
    assert_eq!(code, Some(3), "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(report["errors"], serde_json::json!([]));
    let findings = report["findings"].as_array().expect("findings");
    let dangling = findings
        .iter()
        .find(|f| f["code"] == "flowschema-dangling")
        .expect("a dangling finding");
    assert_eq!(dangling["kind"], "FlowSchema");
    assert_eq!(dangling["severity"], "warning");
    assert_eq!(
        dangling["fieldPath"],
        "spec.priorityLevelConfiguration.name"
    );
    assert!(dangling["file"]
        .as_str()
        .is_some_and(|f| f.ends_with("all.yaml")));
    assert!(
        !err.contains("is no such object"),
        "reported once, as a finding: {err}"
    );
}

#[test]
fn level_checks_follow_the_server_limits() {
    let small = [
        "lint",
        "--max-requests-inflight",
        "100",
        "--max-mutating-requests-inflight",
        "50",
    ];
    let (code, out, _) = run(&small);
    assert_eq!(code, Some(3));
    assert!(out.contains("[queues-cannot-drain]"), "{out}");
}
