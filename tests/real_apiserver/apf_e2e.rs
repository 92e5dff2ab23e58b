//! Kubernetes' own "API priority and fairness" e2e specs (k8s.io/kubernetes
//! `test/e2e/apimachinery/flowcontrol.go`, at the harness's release) through the proxy in front of
//! the shared apiserver: `scripts/apf-e2e.sh run`, in `impersonate` mode with the admin's client
//! certificate and in `passthrough` mode with the admin's token, `--config-source cluster`. The
//! classification spec impersonates users and checks the FlowSchema and priority-level UIDs the
//! proxy answers with; the two conformance specs drive the flow-control API through it.
//!
//! The suite is built by `scripts/setup.sh` (`scripts/apf-e2e.sh build`, cached in
//! `target/apf-e2e/`); where it is not built yet the script builds it first (several minutes).

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::kube_apiserver::KubeApiserver;
use crate::{proxy_identity, FLOWCONTROL};

/// The script bounds each mode (ginkgo's timeout of 600 s, a kill a minute later) and the proxy's
/// start; this bounds the whole, a first build of the suite included.
const WHOLE_RUN: Duration = Duration::from_secs(40 * 60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_apf_e2e_specs_pass_through_the_proxy_in_impersonate_and_passthrough_modes() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    // The specs create a priority level (which changes every level's share of the seats) and
    // FlowSchemas.
    let _flowcontrol = FLOWCONTROL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // deploy/rbac.yaml applied once per apiserver, before the script applies it again (two first
    // applies race to create the objects).
    proxy_identity(api, dir.path()).await;
    let mut command = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/apf-e2e.sh"));
    command
        .args(["run", "impersonate", "passthrough"])
        .env("APF_E2E_APISERVER_DIR", &api.dir)
        .env("APF_E2E_DIR", dir.path())
        .env("KUBE_APF_PROXY_BIN", env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .env_remove("KUBECONFIG")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let run = tokio::task::spawn_blocking(move || command.output());
    let out = tokio::time::timeout(WHOLE_RUN, run)
        .await
        .expect("scripts/apf-e2e.sh finishes within its bound")
        .expect("join")
        .expect("scripts/apf-e2e.sh runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // The failing mode's ginkgo summary and the proxy's last lines, then keep the files.
        let kept = dir.keep();
        let mut tails = String::new();
        for mode in ["impersonate", "passthrough"] {
            for file in ["e2e.log", "proxy.log"] {
                let text = std::fs::read_to_string(kept.join(mode).join(file)).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                tails.push_str(&format!(
                    "\n--- {mode}/{file} (last 40 lines) ---\n{tail}\n"
                ));
            }
        }
        panic!(
            "scripts/apf-e2e.sh failed ({}); files in {}:\n{stderr}{tails}",
            out.status,
            kept.display()
        );
    }
    for mode in ["impersonate", "passthrough"] {
        assert!(
            stderr.contains(&format!("apf-e2e.sh: {mode}: passed in ")),
            "{mode} ran and passed:\n{stderr}"
        );
    }
}
