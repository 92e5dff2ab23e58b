//! kubectl (when installed) through the forwarding front to the fake apiserver: a real client's
//! requests, watch streaming, and `--as` impersonation in passthrough mode.

mod support;

use std::process::Output;

use std::path::PathBuf;

use bytes::Bytes;
use support::fake_apiserver::FakeApiserver;
use support::pki::TestCa;
use support::{alice, plain_forwarder, TestProxy, REQUEST_TIMEOUT};

/// A TLS front (kubectl sends bearer tokens over TLS only) and the CA file that verifies it.
struct Front {
    fake: FakeApiserver,
    proxy: TestProxy,
    ca_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Front {
    /// Runs kubectl against the front with a token and no kubeconfig.
    async fn kubectl(&self, args: &[&str]) -> Output {
        kubectl(self.proxy.url(""), self.ca_file.clone(), args).await
    }
}

async fn kubectl(server: String, ca_file: PathBuf, args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new("kubectl")
            .env("KUBECONFIG", "/dev/null")
            .arg(format!("--server={server}"))
            .arg(format!("--certificate-authority={}", ca_file.display()))
            .arg("--token=kubectl-token")
            .arg("--request-timeout=20s")
            .args(&args)
            .output()
            .expect("kubectl runs")
    })
    .await
    .expect("join")
}

async fn setup() -> Option<Front> {
    if !support::tools::installed("kubectl", &["version", "--client"]) {
        eprintln!("kubectl is not installed; skipping");
        return None;
    }
    let ca = TestCa::new("front-ca");
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = ca.write(dir.path(), "ca.crt");
    let fake = FakeApiserver::start_plain().await;
    let forwarder = plain_forwarder(&fake.url, REQUEST_TIMEOUT);
    let proxy = TestProxy::start_tls(forwarder, alice(), &ca.server_cert()).await;
    Some(Front {
        fake,
        proxy,
        ca_file,
        _dir: dir,
    })
}

#[tokio::test]
async fn kubectl_get_raw_passes_through_with_its_token_and_impersonation() {
    let Some(front) = setup().await else {
        return;
    };
    let out = front
        .kubectl(&[
            "--as=bob",
            "--as-group=ops",
            "get",
            "--raw",
            "/api/v1/namespaces/ns/pods/web",
        ])
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pod: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(pod["metadata"]["name"], "web");
    let seen = front.fake.last_request();
    assert_eq!(
        seen.header_values("authorization"),
        ["Bearer kubectl-token"]
    );
    assert_eq!(seen.header_values("impersonate-user"), ["bob"]);
    assert_eq!(seen.header_values("impersonate-group"), ["ops"]);
    assert_eq!(seen.header_values("x-forwarded-for"), ["127.0.0.1"]);
}

#[tokio::test]
async fn kubectl_receives_a_watch_stream_until_the_upstream_ends_it() {
    let Some(front) = setup().await else {
        return;
    };
    let run = tokio::spawn(kubectl(
        front.proxy.url(""),
        front.ca_file.clone(),
        &["get", "--raw", "/api/v1/namespaces/ns/pods?watch=true"],
    ));
    let events = front.fake.next_watch().await;
    for n in 0..3 {
        let event = format!("{{\"type\":\"ADDED\",\"object\":{{\"n\":{n}}}}}\n");
        events.send(Bytes::from(event)).await.expect("send");
    }
    drop(events);
    let out = run.await.expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("event json"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["object"]["n"], 2);
}
