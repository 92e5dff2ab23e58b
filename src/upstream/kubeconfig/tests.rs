use std::path::Path;

use super::*;

const FULL: &str = r#"
apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod-cluster
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: Q0EgUEVN
- name: dev-cluster
  cluster:
    server: https://dev:6443
    certificate-authority: ca.crt
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    client-certificate: certs/admin.crt
    client-key-data: S0VZ
    token: abc
- name: robot
  user:
    tokenFile: /var/run/token
contexts:
- name: prod
  context:
    cluster: prod-cluster
    user: admin
- name: dev
  context:
    cluster: dev-cluster
    user: robot
"#;

fn with_context(text: &str, context: &str) -> String {
    text.replace(
        "current-context: prod",
        &format!("current-context: {context}"),
    )
}

#[test]
fn resolves_current_context_with_inline_data_and_relative_paths() {
    let config = Kubeconfig::parse(FULL).expect("parse");
    let ctx = config.current(Path::new("/etc/kube")).expect("resolve");
    assert_eq!(ctx.server, "https://10.0.0.1:6443");
    assert_eq!(
        ctx.certificate_authority,
        Some(PemSource::Inline(b"CA PEM".to_vec()))
    );
    assert!(!ctx.insecure_skip_tls_verify);
    assert_eq!(
        ctx.client_certificate,
        Some(PemSource::File("/etc/kube/certs/admin.crt".into()))
    );
    assert_eq!(ctx.client_key, Some(PemSource::Inline(b"KEY".to_vec())));
    assert_eq!(ctx.token.as_deref(), Some("abc"));
    assert_eq!(ctx.token_file, None);
}

#[test]
fn resolves_token_file_and_insecure_cluster() {
    let config = Kubeconfig::parse(&with_context(FULL, "dev")).expect("parse");
    let ctx = config.current(Path::new("/home/u/.kube")).expect("resolve");
    assert_eq!(ctx.server, "https://dev:6443");
    assert_eq!(
        ctx.certificate_authority,
        Some(PemSource::File("/home/u/.kube/ca.crt".into()))
    );
    assert!(ctx.insecure_skip_tls_verify);
    assert_eq!(ctx.token_file, Some("/var/run/token".into()));
    assert_eq!(ctx.token, None);
}

#[test]
fn refuses_what_it_cannot_do_with_a_clear_error() {
    let cases = [
        (
            "    tokenFile: /var/run/token",
            "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Always",
            "no terminal",
        ),
        (
            "    tokenFile: /var/run/token",
            "    exec:\n      command: aws",
            "exec.apiVersion",
        ),
        (
            "    tokenFile: /var/run/token",
            "    auth-provider:\n      name: gcp",
            "auth-provider",
        ),
        (
            "    tokenFile: /var/run/token",
            "    username: u\n    password: p",
            "basic authentication",
        ),
    ];
    for (from, to, want) in cases {
        let text = with_context(&FULL.replace(from, to), "dev");
        let err = Kubeconfig::parse(&text)
            .expect("parse")
            .current(Path::new("/"))
            .expect_err("unsupported");
        assert!(err.to_string().contains(want), "{err}");
    }
}

#[test]
fn reads_an_exec_plugin_with_the_cluster_it_may_be_told_about() {
    let exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: ./bin/get-token\n      args: [--region, eu]\n      env:\n      - {name: AWS_PROFILE, value: ops}\n      installHint: install get-token\n      provideClusterInfo: true\n      interactiveMode: IfAvailable";
    let text = with_context(&FULL.replace("    tokenFile: /var/run/token", exec), "dev");
    let ctx = Kubeconfig::parse(&text)
        .expect("parse")
        .current(Path::new("/home/me/.kube"))
        .expect("exec is supported");
    let (config, cluster) = ctx.exec.expect("an exec plugin");
    assert_eq!(config.command, "/home/me/.kube/./bin/get-token");
    assert_eq!(config.args, ["--region", "eu"]);
    assert_eq!(config.env[0].name, "AWS_PROFILE");
    assert_eq!(config.install_hint, "install get-token");
    assert!(config.provide_cluster_info);
    assert_eq!(cluster.server, ctx.server);
}

#[test]
fn reports_missing_pieces() {
    let cases = [
        (with_context(FULL, "nope"), "context \"nope\" not found"),
        (with_context(FULL, ""), "current-context is not set"),
        (
            FULL.replace("cluster: prod-cluster", "cluster: gone"),
            "cluster \"gone\" not found",
        ),
        (
            FULL.replace("user: admin", "user: ghost"),
            "user \"ghost\" not found",
        ),
        (
            FULL.replace("server: https://10.0.0.1:6443", "server: \"\""),
            "has no server",
        ),
        (
            FULL.replace("Q0EgUEVN", "not*base64"),
            "certificate-authority-data is not valid base64",
        ),
    ];
    for (text, want) in cases {
        let err = Kubeconfig::parse(&text)
            .expect("parse")
            .current(Path::new("/"))
            .expect_err(want);
        assert!(
            err.to_string().contains(want),
            "{err} should contain {want}"
        );
    }
}

#[test]
fn load_reports_unreadable_and_malformed_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = Kubeconfig::load(&dir.path().join("missing")).expect_err("missing");
    assert!(matches!(missing, KubeconfigError::Read { .. }));
    let bad = dir.path().join("bad");
    std::fs::write(&bad, "clusters: 7").expect("write");
    assert!(matches!(
        Kubeconfig::load(&bad),
        Err(KubeconfigError::Parse { .. })
    ));
}
