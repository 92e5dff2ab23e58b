use std::path::Path;

use super::*;

struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["proxy".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        std::fs::write(dir.path().join("ca.crt"), cert.pem()).expect("write");
        std::fs::write(dir.path().join("client.crt"), cert.pem()).expect("write");
        std::fs::write(dir.path().join("client.key"), key.serialize_pem()).expect("write");
        std::fs::write(dir.path().join("token"), "  sa-token\n").expect("write");
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn no_cluster() -> InClusterEnv {
    InClusterEnv {
        host: None,
        port: None,
        service_account_dir: PathBuf::from("/nonexistent"),
    }
}

#[test]
fn flags_alone_name_the_upstream() {
    let pki = Pki::new();
    let config = UpstreamConfig {
        upstream: Some("https://127.0.0.1:6443/prefix".into()),
        ca_file: Some(pki.path("ca.crt")),
        client_cert_file: Some(pki.path("client.crt")),
        client_key_file: Some(pki.path("client.key")),
        token_file: Some(pki.path("token")),
        kubeconfig: None,
    };
    let resolved = config.resolve_with(&no_cluster()).expect("resolve");
    assert_eq!(resolved.server, "https://127.0.0.1:6443/prefix");
    assert_eq!(resolved.roots.len(), 1);
    assert_eq!(resolved.client_identity.map(|c| c.chain.len()), Some(1));
    assert_eq!(
        resolved.credential,
        Credential::TokenFile(pki.path("token"))
    );
}

#[test]
fn in_cluster_uses_service_account_files() {
    let pki = Pki::new();
    let env = |host: &str| InClusterEnv {
        host: Some(host.to_string()),
        port: Some("443".to_string()),
        service_account_dir: pki.dir.path().to_path_buf(),
    };
    let resolved = UpstreamConfig::default()
        .resolve_with(&env("10.96.0.1"))
        .expect("resolve");
    assert_eq!(resolved.server, "https://10.96.0.1:443/");
    assert_eq!(resolved.roots.len(), 1);
    assert_eq!(
        resolved.credential,
        Credential::TokenFile(pki.path("token"))
    );
    let v6 = UpstreamConfig::default()
        .resolve_with(&env("fd00::1"))
        .expect("resolve");
    assert_eq!(v6.server, "https://[fd00::1]:443/");
}

#[test]
fn kubeconfig_is_overridden_by_flags() {
    let pki = Pki::new();
    let kubeconfig = pki.path("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "current-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://from-kubeconfig:6443\n    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n    token: static\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n",
    )
    .expect("write");
    let base = UpstreamConfig {
        kubeconfig: Some(kubeconfig.clone()),
        ..UpstreamConfig::default()
    };
    let resolved = base.resolve_with(&no_cluster()).expect("resolve");
    assert_eq!(resolved.server, "https://from-kubeconfig:6443/");
    assert_eq!(resolved.credential, Credential::Token("static".into()));
    let overridden = UpstreamConfig {
        upstream: Some("http://127.0.0.1:8080".into()),
        token_file: Some(pki.path("token")),
        ..base
    }
    .resolve_with(&no_cluster())
    .expect("resolve");
    assert_eq!(overridden.server, "http://127.0.0.1:8080/");
    assert_eq!(
        overridden.credential,
        Credential::TokenFile(pki.path("token"))
    );
}

#[test]
fn refuses_unusable_configurations() {
    let pki = Pki::new();
    let cases: Vec<(UpstreamConfig, &str)> = vec![
        (UpstreamConfig::default(), "no upstream"),
        (
            UpstreamConfig {
                upstream: Some("ftp://x".into()),
                ..UpstreamConfig::default()
            },
            "the scheme must be https or http",
        ),
        (
            UpstreamConfig {
                upstream: Some("/relative".into()),
                ..UpstreamConfig::default()
            },
            "invalid upstream URL",
        ),
        (
            UpstreamConfig {
                upstream: Some("https://x".into()),
                client_cert_file: Some(pki.path("client.crt")),
                ..UpstreamConfig::default()
            },
            "needs its key",
        ),
        (
            UpstreamConfig {
                upstream: Some("https://x".into()),
                ca_file: Some(pki.path("token")),
                ..UpstreamConfig::default()
            },
            "no PEM certificate found",
        ),
        (
            UpstreamConfig {
                upstream: Some("https://x".into()),
                ca_file: Some(pki.path("missing.crt")),
                ..UpstreamConfig::default()
            },
            "missing.crt",
        ),
        (
            UpstreamConfig {
                upstream: Some("https://x".into()),
                ca_file: Some(pki.path("ca.crt")),
                token_file: Some(pki.path("no-token")),
                ..UpstreamConfig::default()
            },
            "no-token",
        ),
    ];
    for (config, want) in cases {
        let err = config.resolve_with(&no_cluster()).expect_err(want);
        assert!(
            err.to_string().contains(want),
            "{err} should contain {want}"
        );
    }
}

#[test]
fn refuses_oversized_credential_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big");
    let size = usize::try_from(MAX_CREDENTIAL_FILE_BYTES).expect("fits") + 1;
    std::fs::write(&big, vec![b'a'; size]).expect("write");
    let err = read_bounded(&big).expect_err("too large");
    assert!(err.to_string().contains("larger than"), "{err}");
    assert!(read_bounded(Path::new("/nonexistent/file")).is_err());
}

#[test]
fn https_upstream_without_ca_is_refused_by_the_client() {
    let resolved = UpstreamConfig {
        upstream: Some("https://127.0.0.1:6443".into()),
        ..UpstreamConfig::default()
    }
    .resolve_with(&no_cluster())
    .expect("resolve");
    let err = crate::upstream::UpstreamClient::new(resolved).expect_err("no CA");
    assert!(err.to_string().contains("needs a CA"), "{err}");
}
