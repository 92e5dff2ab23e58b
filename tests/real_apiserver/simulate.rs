//! Suite item 7: `simulate` on the audit log the real apiserver wrote (policy level Metadata for
//! every request): every request is read, no line is skipped.

use std::collections::BTreeSet;
use std::process::Command;

use crate::support::kube_apiserver::KubeApiserver;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_reads_every_request_of_the_apiservers_audit_log() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    // Some traffic of every kind: reads, writes, a watch, discovery, errors.
    for args in [
        &["get", "namespaces"][..],
        &["create", "namespace", "rt-simulate"],
        &[
            "-n",
            "rt-simulate",
            "create",
            "configmap",
            "one",
            "--from-literal=a=b",
        ],
        &[
            "-n",
            "rt-simulate",
            "get",
            "configmaps",
            "--watch-only",
            "--request-timeout=1s",
        ],
        &["api-resources"],
        &["-n", "rt-simulate", "get", "configmap", "missing"],
        &["delete", "namespace", "rt-simulate", "--wait=false"],
    ] {
        let _ = api.admin_kubectl(args, None).await;
    }

    // The log so far, up to its last complete line (the apiserver may be writing the next).
    let log = api.audit_log();
    let complete = &log[..log.rfind('\n').map_or(0, |n| n + 1)];
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("audit.log");
    std::fs::write(&trace, complete).expect("write trace");

    // Answered requests: a ResponseComplete or Panic event, or ResponseStarted (a watch still
    // running). A request with only its RequestReceived event was still waiting or executing when
    // the log was read (another test's held create); its answer is not in this trace.
    let mut completed = BTreeSet::new();
    let mut started = BTreeSet::new();
    let mut received = BTreeSet::new();
    for (n, line) in complete.lines().enumerate() {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("audit.log line {}: {e}", n + 1));
        let id = event["auditID"].as_str().expect("auditID").to_string();
        match event["stage"].as_str() {
            Some("ResponseComplete" | "Panic") => completed.insert(id),
            Some("ResponseStarted") => started.insert(id),
            Some("RequestReceived") => received.insert(id),
            other => panic!("audit.log line {}: stage {other:?}", n + 1),
        };
    }
    assert!(
        completed.len() > 20,
        "a busy log: {} requests",
        completed.len()
    );

    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
            .args(["simulate", "--output", "json", "--trace"])
            .arg(&trace)
            .output()
            .expect("simulate runs")
    })
    .await
    .expect("join");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "simulate: {stderr}");
    assert!(stderr.trim().is_empty(), "no line reported: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
    assert_eq!(report["skipped"], 0, "no line skipped");
    let replayed = report["requests"].as_u64().expect("requests");
    let answered: BTreeSet<&String> = completed.union(&started).collect();
    let in_flight = received.iter().filter(|id| !answered.contains(id)).count();
    assert_eq!(
        replayed,
        answered.len() as u64,
        "every answered request of audit.log is replayed ({} complete, {} watches still open, \
         {in_flight} still in flight when the log was read)",
        completed.len(),
        started.difference(&completed).count()
    );
}
