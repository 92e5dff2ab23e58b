//! The proxy in front of a REAL kube-apiserver (built from Go modules by
//! `scripts/kube-apiserver.sh`, one per test binary: [`KubeApiserver::shared`]), driven by real
//! clients (kubectl). Where the apiserver and the proxy disagree, a test here says so.
//!
//! Skipped with one line when Go or kubectl is missing outside CI; with `CI=true` never skipped.

#[path = "../support/mod.rs"]
mod support;

mod apf_e2e;
mod authn_authz;
mod config_source;
mod helm;
mod impersonation;
mod kubectl_modes;
mod rejections;
mod replicas;
mod simulate;
mod upstream_h2;
mod webhook;

use std::path::PathBuf;
use std::process::Output;

use support::app::{AppBuilder, TestApp};
use support::kube_apiserver::{kubectl, KubeApiserver};

/// Held by the tests that change the apiserver's flow-control objects in ways that change how
/// other tests' requests are classified.
pub static FLOWCONTROL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How a kubectl invocation authenticates to the proxy.
#[derive(Clone)]
pub enum Cred {
    /// `--token`.
    Token(&'static str),
    /// `--client-certificate` / `--client-key`.
    Cert(PathBuf, PathBuf),
}

/// The proxy started in front of the shared apiserver, and what kubectl needs to reach it.
pub struct Front {
    pub api: &'static KubeApiserver,
    pub app: TestApp,
    pub ca: PathBuf,
}

impl Front {
    /// The proxy with `--upstream` the apiserver (its CA trusted), the apiserver's client CA and
    /// token file as its own authenticators (the token file unless `flags` turn on
    /// `--authentication-token-webhook`), then `flags`.
    pub async fn start(api: &'static KubeApiserver, flags: &[String]) -> Front {
        let mut builder = AppBuilder::new(&api.server)
            .flag(format!(
                "--upstream-ca-file={}",
                api.path("ca.crt").display()
            ))
            .flag(format!(
                "--client-ca-file={}",
                api.path("client-ca.crt").display()
            ));
        if !flags.iter().any(|f| f == "--authentication-token-webhook") {
            builder = builder.flag(format!(
                "--token-auth-file={}",
                api.path("tokens.csv").display()
            ));
        }
        for flag in flags {
            builder = builder.flag(flag.clone());
        }
        let app = builder.start().await;
        let ca = app.serving_ca_file();
        Front { api, app, ca }
    }

    /// kubectl through the proxy as `cred`; `HOME` is the proxy's tempdir (discovery cache).
    pub async fn kubectl(&self, cred: &Cred, args: &[&str], input: Option<&str>) -> Output {
        let mut all = vec![
            format!("--server={}", self.app.url()),
            format!("--certificate-authority={}", self.ca.display()),
            format!("--cache-dir={}", self.app.path("kube-cache").display()),
        ];
        match cred {
            Cred::Token(token) => all.push(format!("--token={token}")),
            Cred::Cert(cert, key) => {
                all.push(format!("--client-certificate={}", cert.display()));
                all.push(format!("--client-key={}", key.display()));
            }
        }
        all.extend(args.iter().map(ToString::to_string));
        kubectl(all, input.map(ToString::to_string)).await
    }

    /// Like [`Front::kubectl`], panicking unless it exits 0; its stdout.
    pub async fn ok(&self, cred: &Cred, args: &[&str], input: Option<&str>) -> String {
        let out = self.kubectl(cred, args, input).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} through the proxy: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Applies `deploy/rbac.yaml` and writes a token of its ServiceAccount (the proxy's own identity)
/// to `dir/proxy-token`; returns the file.
pub async fn proxy_identity(api: &KubeApiserver, dir: &std::path::Path) -> PathBuf {
    // Applied once per apiserver: tests run in parallel, and two `kubectl apply`s of objects
    // that do not exist yet race to create them (the loser gets AlreadyExists).
    static RBAC: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    RBAC.get_or_init(|| async {
        let rbac =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml"))
                .expect("deploy/rbac.yaml");
        api.admin_ok(&["apply", "-f", "-"], Some(&rbac)).await;
    })
    .await;
    let token = api
        .service_account_token("kube-system", "kube-apf-proxy")
        .await;
    let path = dir.join("proxy-token");
    std::fs::write(&path, token).expect("write proxy token");
    path
}

/// stdout + stderr of a kubectl run, for messages.
pub fn both(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
