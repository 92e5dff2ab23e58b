//! `classify --explain` run as the built binary, text and JSON.

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("utf-8"),
    )
}

const NODE: [&str; 9] = [
    "classify",
    "--method",
    "GET",
    "--url",
    "/api/v1/namespaces/ns/pods",
    "--user",
    "system:node:n1",
    "--group",
    "system:nodes",
];

#[test]
fn text_lists_each_schema_tried_and_the_verdict() {
    let mut args = NODE.to_vec();
    args.push("--explain");
    let (code, out) = run(&args);
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "FlowSchema exempt (matchingPrecedence 1, priority level exempt): no match"
    );
    assert_eq!(
        lines[1],
        "  rules[0]: no subject names the caller; resourceRules[0] matches"
    );
    assert!(out.contains(
        "FlowSchema system-node-high (matchingPrecedence 400, priority level node-high): no match\n  \
         rules[0]: subjects[0] names the caller; resourceRules[0]: resources does not match, \
         resourceRules[1]: resources does not match\n"
    ), "{out}");
    assert!(
        out.contains(
            "FlowSchema system-nodes (matchingPrecedence 500, priority level system): MATCH"
        ),
        "{out}"
    );
    let verdict = lines.last().expect("a verdict");
    assert!(verdict.starts_with("=> FlowSchema system-nodes, priority level system, flow distinguisher \"system:node:n1\", hand ["), "{verdict}");
}

#[test]
fn json_has_the_trials_and_the_verdict() {
    let mut args = NODE.to_vec();
    args.extend(["--explain", "--output", "json"]);
    let (code, out) = run(&args);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["flowSchema"], "system-nodes");
    assert_eq!(v["priorityLevel"], "system");
    assert_eq!(v["seats"], 1);
    let tried = v["flowSchemas"].as_array().expect("trials");
    assert_eq!(
        tried.last().map(|t| &t["name"]),
        Some(&serde_json::json!("system-nodes"))
    );
    let high = tried
        .iter()
        .find(|t| t["name"] == "system-node-high")
        .expect("tried");
    assert_eq!(high["rules"][0]["subject"], 0);
    assert_eq!(high["rules"][0]["requestRules"][0]["failed"], "resource");
    assert_eq!(v["notTried"].as_u64(), Some(11 - tried.len() as u64));
}

/// `--as`, `--as-group` and `--as-uid` as kubectl sends them: classified as the identity the
/// apiserver runs the request as; the text names it and the impersonator, the JSON has both.
#[test]
fn an_impersonated_request_is_explained_as_the_user_it_runs_as() {
    let admin_as_noxu = [
        "classify",
        "--method",
        "GET",
        "--url",
        "/version",
        "--user",
        "kubernetes-admin",
        "--group",
        "system:masters",
        "--as",
        "noxu",
        "--as-group",
        "dev",
        "--as-uid",
        "noxu-uid",
        "--explain",
    ];
    let (code, out) = run(&admin_as_noxu);
    assert_eq!(code, Some(0), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "As \"noxu\" (uid \"noxu-uid\") (groups [\"dev\", \"system:authenticated\"]), impersonated by \
         \"kubernetes-admin\" (groups [\"system:masters\", \"system:authenticated\"])"
    );
    // noxu is not in system:masters: not exempt, unlike the admin itself.
    assert!(
        out.contains("FlowSchema exempt (matchingPrecedence 1, priority level exempt): no match"),
        "{out}"
    );
    let verdict = lines.last().expect("a verdict");
    assert!(
        verdict.starts_with("=> FlowSchema global-default, priority level global-default,"),
        "{verdict}"
    );
    assert!(verdict.contains("flow distinguisher \"noxu\""), "{verdict}");

    let mut args = admin_as_noxu.to_vec();
    args.extend(["--output", "json"]);
    let (code, out) = run(&args);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        v["user"],
        serde_json::json!({"username": "noxu", "uid": "noxu-uid", "groups": ["dev", "system:authenticated"]})
    );
    assert_eq!(
        v["impersonator"],
        serde_json::json!({"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]})
    );
    assert_eq!(v["flowSchema"], "global-default");

    // Without --as: the caller itself, and no impersonator.
    let (code, out) = run(&admin_as_noxu[..9]
        .iter()
        .copied()
        .chain(["--explain", "--output", "json"])
        .collect::<Vec<_>>());
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["user"]["username"], "kubernetes-admin");
    assert!(v.get("impersonator").is_none(), "{v}");
    assert_eq!(v["flowSchema"], "exempt");

    // A group or UID to impersonate without a user is refused, as the apiserver refuses it.
    let (code, _) = run(&[
        "classify",
        "--method",
        "GET",
        "--url",
        "/version",
        "--as-group",
        "dev",
    ]);
    assert_eq!(code, Some(2));
}

#[test]
fn explain_refuses_a_requests_file() {
    let (code, _) = run(&["classify", "--requests", "-", "--explain"]);
    assert_eq!(code, Some(2), "clap refuses the combination");
}

#[test]
fn a_dangling_schema_is_listed_as_skipped_with_the_reason() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/dangling");
    let dir = dir.to_str().expect("utf-8");
    // (group, the verdict's schema, whether the skipped schema's rules accept the request)
    let cases = [
        ("dev", "catch-all", true),
        ("ops", "points-at-implied-exempt", false),
    ];
    for (group, chosen, would_match) in cases {
        let args = [
            "classify",
            "--config-dir",
            dir,
            "--method",
            "GET",
            "--url",
            "/version",
            "--user",
            "u",
            "--group",
            group,
            "--explain",
        ];
        let (code, out) = run(&args);
        assert_eq!(code, Some(0), "{out}");
        let skipped = "FlowSchema points-nowhere (matchingPrecedence 1000, priority level \
                       missing-level): skipped: This FlowSchema references the \
                       PriorityLevelConfiguration object named \"missing-level\" but there is \
                       no such object; it is skipped for matching";
        assert!(out.contains(skipped), "{out}");
        assert_eq!(
            out.contains("; its rules accept this request"),
            would_match,
            "{group}: {out}"
        );
        assert!(
            out.lines()
                .last()
                .is_some_and(|l| l.starts_with(&format!("=> FlowSchema {chosen},"))),
            "{out}"
        );
        let mut json_args = args.to_vec();
        json_args.extend(["--output", "json"]);
        let (_, json) = run(&json_args);
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(v["skipped"][0]["name"], "points-nowhere");
        assert_eq!(v["skipped"][0]["priorityLevel"], "missing-level");
        assert_eq!(v["skipped"][0]["wouldMatch"], would_match);
    }
}
