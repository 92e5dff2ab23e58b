//! A kubeconfig whose user is an exec credential plugin (a real process: a shell script the test
//! writes): its token reaches the upstream, the plugin runs once while the token is valid and
//! again after the upstream answers 401.

use std::path::Path;

use crate::support::app::{AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;

/// A plugin printing `tok-N` (N = its run count) valid for an hour; counts runs in `dir/runs`.
fn plugin(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("get-token");
    let script = format!(
        r#"#!/bin/sh
echo run >> '{dir}/runs'
n=$(wc -l < '{dir}/runs' | tr -d ' ')
expires=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"tok-%s","expirationTimestamp":"%s"}}}}\n' "$n" "$expires"
"#,
        dir = dir.display()
    );
    std::fs::write(&path, script).expect("write plugin");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

async fn start(upstream: &FakeApiserver, dir: &Path) -> TestApp {
    let kubeconfig = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{server}'}}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {plugin}\n      interactiveMode: IfAvailable\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
        server = upstream.url,
        plugin = plugin(dir).display(),
    );
    std::fs::write(&kubeconfig, text).expect("write kubeconfig");
    AppBuilder::new(&upstream.url)
        .token_file()
        .flag(format!("--kubeconfig={}", kubeconfig.display()))
        .flag("--identity-forwarding=impersonate")
        .start()
        .await
}

#[tokio::test]
async fn the_plugins_token_reaches_the_upstream_and_a_401_fetches_a_new_one() {
    let upstream = FakeApiserver::start_plain().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = start(&upstream, dir.path()).await;
    let client = app.client();
    let token = Some(crate::support::app::STATIC_TOKEN);

    client.get("/api/v1/namespaces/ns/pods/a", token).await;
    client.get("/api/v1/namespaces/ns/pods/b", token).await;
    let sent = upstream.last_request_to("/api/v1/namespaces/ns/pods/b");
    assert_eq!(sent.header_values("authorization"), ["Bearer tok-1"]);
    let after_two = runs(dir.path());
    assert_eq!(after_two, 1, "one run while the credential is valid");

    // The upstream refuses the credential: the next request gets a fresh one.
    let refused = client.get("/unauthorized", token).await;
    assert_eq!(refused.status(), http::StatusCode::UNAUTHORIZED);
    client.get("/api/v1/namespaces/ns/pods/c", token).await;
    let sent = upstream.last_request_to("/api/v1/namespaces/ns/pods/c");
    assert_eq!(sent.header_values("authorization"), ["Bearer tok-2"]);
    assert_eq!(runs(dir.path()), 2);
    let metrics = app.app.metrics().encode();
    assert_eq!(
        crate::support::app::metric_sum(
            &metrics,
            r#"apf_proxy_exec_plugin_runs_total{result="success"}"#
        ),
        2.0
    );
}

#[tokio::test]
async fn a_plugins_client_certificate_is_presented_to_the_upstream() {
    use crate::support::fake_apiserver::{FakeOptions, FakeTls};
    use crate::support::pki::TestCa;
    use std::os::unix::fs::PermissionsExt;

    let ca = TestCa::new("cluster-ca");
    let client_ca = TestCa::new("client-ca");
    let client_cert = client_ca.client_cert("exec-user", Some("ops"));
    let upstream = FakeApiserver::start(FakeOptions {
        tls: Some(FakeTls {
            serving: ca.server_cert(),
            client_ca: Some(client_ca),
            h2: false,
        }),
        ..FakeOptions::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let output = serde_json::json!({"apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential", "status": {"clientCertificateData": client_cert.cert_pem,
        "clientKeyData": client_cert.key_pem}});
    std::fs::write(dir.path().join("credential.json"), output.to_string()).expect("write");
    let plugin = dir.path().join("get-cert");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\ncat '{}/credential.json'\n",
            dir.path().display()
        ),
    )
    .expect("write plugin");
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let ca_file = ca.write(dir.path(), "ca.crt");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{}', certificate-authority: {}}}\nusers:\n- name: u\n  user:\n    exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: {}}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
            upstream.url,
            ca_file.display(),
            plugin.display()
        ),
    )
    .expect("write kubeconfig");
    let app = AppBuilder::new(&upstream.url)
        .token_file()
        .flag(format!("--kubeconfig={}", kubeconfig.display()))
        .flag("--identity-forwarding=impersonate")
        .start()
        .await;
    let response = app
        .client()
        .get(
            "/api/v1/namespaces/ns/pods/a",
            Some(crate::support::app::STATIC_TOKEN),
        )
        .await;
    assert_eq!(response.status(), http::StatusCode::OK);
    let sent = upstream.last_request_to("/api/v1/namespaces/ns/pods/a");
    let chain = sent
        .peer_certificates
        .clone()
        .expect("a client certificate");
    assert_eq!(chain[0].as_ref(), client_cert.cert.as_ref());
    assert!(
        sent.header_values("authorization").is_empty(),
        "no token: only a certificate"
    );
}
