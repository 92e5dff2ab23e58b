//! A real kube-apiserver (with an embedded etcd) for the tests of `tests/real_apiserver/`: ONE per
//! test binary, started on first use by `scripts/kube-apiserver.sh start` (which builds it from Go
//! modules the first time) and gone when the test binary exits: the harness is started with
//! `KUBE_APISERVER_OWNER_PID` set to this process and exits once it is gone (the crate forbids the
//! unsafe code an `atexit` hook would need).
//!
//! Where Go is missing the tests skip with one line saying why; with `CI=true` they never skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The tokens of the apiserver's `tokens.csv` (the script's contract).
pub const ADMIN_TOKEN: &str = "admin-token";
/// `alice` in group `dev`.
pub const ALICE_TOKEN: &str = "alice-token";
/// `bob`, no group of his own.
pub const BOB_TOKEN: &str = "bob-token";

/// The apiserver's `--http2-max-streams-per-connection`: small, so that tests can hold more
/// streams than one connection may carry.
pub const STREAMS_PER_CONNECTION: usize = 16;

/// A running kube-apiserver and the directory of files the script wrote.
pub struct KubeApiserver {
    /// `server`, `ca.crt`, `admin.kubeconfig`, `client-ca.*`, `front-proxy-*`, `tokens.csv`,
    /// `audit.log`, `apiserver.log`, `pid`.
    pub dir: PathBuf,
    /// The https URL.
    pub server: String,
}

static SHARED: OnceLock<Option<KubeApiserver>> = OnceLock::new();

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Why the real-apiserver tests cannot run here, if they cannot.
fn missing_prerequisite() -> Option<String> {
    let go = Command::new("go")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !go.is_ok_and(|s| s.success()) {
        return Some("Go is not installed (kube-apiserver is built from Go modules)".into());
    }
    let kubectl = Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !kubectl.is_ok_and(|s| s.success()) {
        return Some("kubectl is not installed".into());
    }
    None
}

impl KubeApiserver {
    /// The apiserver of this test binary, started on first call; `None` (after one line on
    /// stderr) when this machine cannot run it outside CI. Panics in CI instead of skipping, and
    /// whenever the build or the start fails.
    pub fn shared() -> Option<&'static KubeApiserver> {
        SHARED.get_or_init(Self::start).as_ref()
    }

    fn start() -> Option<KubeApiserver> {
        if let Some(why) = missing_prerequisite() {
            assert!(
                !in_ci(),
                "CI=true: the real-apiserver tests may not be skipped, but {why}"
            );
            // Straight to the process's stderr: libtest captures `eprintln!` of passing tests.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "skipping the real kube-apiserver tests: {why}"
            );
            return None;
        }
        let root = repo_root();
        let runs = root.join("target/kube-apiserver/runs");
        std::fs::create_dir_all(&runs).expect("create target/kube-apiserver/runs");
        remove_stale_runs(&runs);
        let binary = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "test".into());
        let dir = runs.join(format!("{binary}-{}", std::process::id()));
        let out = Command::new(root.join("scripts/kube-apiserver.sh"))
            .arg("start")
            .arg(&dir)
            .arg("--")
            // etcd compaction every 10 s (default 5 min), so the 410 test need not wait long.
            .arg("--etcd-compaction-interval=10s")
            .arg(format!(
                "--http2-max-streams-per-connection={STREAMS_PER_CONNECTION}"
            ))
            // No watch cache for PodTemplates (which nothing else here uses): their watches are
            // served by etcd, so a compacted resourceVersion gets the apiserver's 410.
            .arg("--watch-cache-sizes=podtemplates#0")
            .env("KUBE_APISERVER_OWNER_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/kube-apiserver.sh runs");
        assert!(
            out.status.success(),
            "scripts/kube-apiserver.sh start {} failed; see {}/apiserver.log",
            dir.display(),
            dir.display()
        );
        let server = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            server.starts_with("https://127.0.0.1:"),
            "the script prints the server URL, got {server:?}"
        );
        let file = std::fs::read_to_string(dir.join("server")).expect("DIR/server");
        assert_eq!(file.trim(), server, "DIR/server names the printed URL");
        Some(KubeApiserver { dir, server })
    }

    /// A file the script wrote.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `kubectl --kubeconfig admin.kubeconfig ARGS` (system:masters), stdin from `input`.
    pub async fn admin_kubectl(&self, args: &[&str], input: Option<&str>) -> Output {
        let mut all = vec![
            format!("--kubeconfig={}", self.path("admin.kubeconfig").display()),
            // Discovery cache beside the apiserver's files, not in $HOME.
            format!("--cache-dir={}", self.path("kube-cache").display()),
        ];
        all.extend(args.iter().map(ToString::to_string));
        kubectl(all, input.map(ToString::to_string)).await
    }

    /// Like [`KubeApiserver::admin_kubectl`], panicking unless it exits 0; its stdout.
    pub async fn admin_ok(&self, args: &[&str], input: Option<&str>) -> String {
        let out = self.admin_kubectl(args, input).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} (admin): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A client certificate from the apiserver's client CA (CN `user`, O `groups`); returns the
    /// paths of `<name>.crt` and `<name>.key` in `dir`.
    pub fn client_cert(
        &self,
        dir: &Path,
        name: &str,
        user: &str,
        groups: &[&str],
    ) -> (PathBuf, PathBuf) {
        let out = dir.join(name);
        let status = Command::new(harness_binary())
            .arg("client-cert")
            .arg(self.path("client-ca.crt"))
            .arg(self.path("client-ca.key"))
            .arg(&out)
            .arg(user)
            .args(groups)
            .status()
            .expect("kube-apiserver-harness client-cert runs");
        assert!(status.success(), "client-cert {user}");
        (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        )
    }

    /// A token of the ServiceAccount `namespace/name` from the TokenRequest API (there is no
    /// controller manager here to fill a token Secret).
    pub async fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let token = self
            .admin_ok(
                &["-n", namespace, "create", "token", name, "--duration=1h"],
                None,
            )
            .await;
        token.trim().to_string()
    }

    /// The audit log so far.
    pub fn audit_log(&self) -> String {
        std::fs::read_to_string(self.path("audit.log")).expect("read audit.log")
    }
}

/// The harness binary the script built.
pub fn harness_binary() -> PathBuf {
    let dir = std::env::var_os("KUBE_APISERVER_BIN_DIR")
        .map_or_else(|| repo_root().join("target/kube-apiserver"), PathBuf::from);
    dir.join("kube-apiserver-harness")
}

/// Removes the run directories of earlier test processes that are gone (their apiserver went
/// with them), keeping the directories of running ones.
fn remove_stale_runs(runs: &Path) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    for entry in entries.flatten() {
        let pid = std::fs::read_to_string(entry.path().join("pid")).unwrap_or_default();
        let alive = !pid.trim().is_empty() && Path::new("/proc").join(pid.trim()).exists();
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Runs kubectl with `args` (no kubeconfig from the environment) off the runtime's threads;
/// panics unless it finishes within 60 s.
pub async fn kubectl(args: Vec<String>, input: Option<String>) -> Output {
    let run = tokio::task::spawn_blocking(move || {
        let mut command = Command::new("kubectl");
        command
            .env("KUBECONFIG", "/dev/null")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .arg("--request-timeout=30s")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = command.spawn().expect("kubectl runs");
        if let Some(input) = input {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(input.as_bytes()).expect("write stdin");
        }
        child.wait_with_output().expect("kubectl output")
    });
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("kubectl finishes within 60 s")
        .expect("join")
}
