//! kubectl (when installed) through the whole app to the fake: a kubeconfig with a client
//! certificate and one with a token, `kubectl get pods` (discovery, then a list) and
//! `kubectl get --raw`. Skipped, with a message, when kubectl is missing.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::app::{AppBuilder, TestApp, STATIC_TOKEN};
use crate::support::fake_apiserver::FakeApiserver;
use crate::support::tools;

/// A kubeconfig for the app with `user` as its user entry (YAML fields).
fn kubeconfig(app: &TestApp, name: &str, user: &str) -> PathBuf {
    let ca = app.serving_ca_file();
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: {name}\n  user:\n{user}contexts:\n- name: ctx\n  context: {{cluster: proxy, user: {name}, namespace: ns}}\ncurrent-context: ctx\n",
        server = app.url(),
        ca = ca.display(),
    );
    let path = app.path(&format!("{name}.kubeconfig"));
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    let mut command = std::process::Command::new("kubectl");
    command
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().expect("dir"))
        .arg("--request-timeout=10s")
        .args(args);
    tools::run_ok(command, &format!("kubectl {args:?}")).await
}

async fn setup() -> Option<(FakeApiserver, TestApp)> {
    if !tools::installed("kubectl", &["version", "--client"]) {
        eprintln!("kubectl is not installed; skipping");
        return None;
    }
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .client_ca()
        .token_file()
        .upstream_token("proxy-token")
        .flag("--identity-forwarding=impersonate")
        .start()
        .await;
    Some((fake, app))
}

#[tokio::test]
async fn kubectl_with_a_client_certificate_lists_and_gets_pods() {
    let Some((fake, app)) = setup().await else {
        return;
    };
    let cert = app.user_cert("frank", Some("devs"));
    let (cert_file, key_file) = cert.write(app.dir.path(), "frank");
    let user = format!(
        "    client-certificate: {}\n    client-key: {}\n",
        cert_file.display(),
        key_file.display()
    );
    let config = kubeconfig(&app, "frank", &user);

    let out = kubectl(&config, &["get", "pods", "-o", "name"]).await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "pod/a\npod/b\n");
    let list = fake.last_request_to("/api/v1/namespaces/ns/pods");
    assert_eq!(list.header_values("impersonate-user"), ["frank"]);
    assert_eq!(list.header_values("impersonate-group"), ["devs"]);

    let out = kubectl(&config, &["get", "--raw", "/api/v1/namespaces/ns/pods/web"]).await;
    let pod: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(pod["metadata"]["name"], "web");
}

#[tokio::test]
async fn kubectl_with_a_token_gets_pods() {
    let Some((fake, app)) = setup().await else {
        return;
    };
    let config = kubeconfig(&app, "carol", &format!("    token: {STATIC_TOKEN}\n"));
    let out = kubectl(&config, &["get", "--raw", "/api/v1/namespaces/ns/pods"]).await;
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(list["kind"], "PodList");
    let seen = fake.last_request_to("/api/v1/namespaces/ns/pods");
    assert_eq!(seen.header_values("impersonate-user"), ["carol"]);

    let out = kubectl(&config, &["get", "pods"]).await;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains('a') && table.contains('b'), "{table}");
}

#[tokio::test]
async fn kubectl_receives_a_watch_through_the_app() {
    let Some((fake, app)) = setup().await else {
        return;
    };
    let config = kubeconfig(&app, "carol", &format!("    token: {STATIC_TOKEN}\n"));
    let run = tokio::spawn(async move {
        kubectl(
            &config,
            &["get", "--raw", "/api/v1/namespaces/ns/pods?watch=true"],
        )
        .await
    });
    let events = crate::support::app::within("kubectl's watch", fake.next_watch()).await;
    for n in 0..3 {
        let event = format!("{{\"type\":\"ADDED\",\"object\":{{\"n\":{n}}}}}\n");
        events.send(bytes::Bytes::from(event)).await.expect("send");
    }
    drop(events);
    let out = run.await.expect("join");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("event json"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["object"]["n"], 2);
    app.wait_level("global-default", "the watch's seat is back", |s| {
        s.seats_in_use == 0 && s.executing == 0
    })
    .await;
}
