//! The `kube-apf-proxy` binary under real signals: JSON access logs without tokens, SIGHUP
//! reloads, SIGTERM exits 0.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use super::*;

const BINARY: &str = env!("CARGO_BIN_EXE_kube-apf-proxy");

/// A running binary whose standard error (JSON lines) is read on a thread.
struct Process {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Drop for Process {
    fn drop(&mut self) {
        // Only reached when a test failed midway: never leave the child behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Waits (at most [`PROMPTLY`]) for a JSON log line for which `pick` is true.
    fn wait_for(&mut self, pick: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + PROMPTLY;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .expect("the expected log line");
            self.seen.push(line.clone());
            let value: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            if pick(&value) {
                return value;
            }
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success());
    }
}

fn message(value: &serde_json::Value) -> &str {
    value["message"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_logs_json_reloads_on_sighup_and_exits_0_on_sigterm() {
    let fake = FakeApiserver::start_plain().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("config");
    std::fs::create_dir(&config_dir).expect("config dir");
    write(&config_dir.join("tight.yaml"), &tight_config(10));
    let ca = TestCa::new("binary-ca");
    let (cert, key) = ca.server_cert().write(dir.path(), "serving");
    let child = Command::new(BINARY)
        .args([
            "serve",
            "--log-format=json",
            "-v=1",
            "--bind-address=127.0.0.1",
        ])
        .args(["--secure-port=0", "--admin-address=127.0.0.1:0"])
        .arg(format!("--upstream={}", fake.url))
        .arg(format!("--config-dir={}", config_dir.display()))
        .arg(format!("--tls-cert-file={}", cert.display()))
        .arg(format!("--tls-private-key-file={}", key.display()))
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut child = child;
    let stderr = child.stderr.take().expect("stderr");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut process = Process {
        child,
        lines,
        seen: Vec::new(),
    };
    let serving = process.wait_for(|v| message(v) == "Serving");
    let secure: SocketAddr = serving["secure"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .expect("secure address");

    // One access-log object per request, with its fields and never the credential.
    let secret = "s3cr3t-t0ken-never-logged";
    let (response, _) = tls_get(secure, &ca, "/api/v1/namespaces/ns/pods", None).await;
    assert_eq!(response.status(), StatusCode::OK);
    // No token authenticator is configured: the token is passed on, the caller is anonymous.
    let (response, _) = tls_get(secure, &ca, "/api/v1/namespaces/ns/pods", Some(secret)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let access = |v: &serde_json::Value| v["target"] == "kube_apf_proxy::access";
    let ok = process.wait_for(access);
    assert_eq!(ok["status"], 200);
    assert_eq!(ok["verb"], "list");
    assert_eq!(ok["path"], "/api/v1/namespaces/ns/pods");
    assert_eq!(ok["flow_schema"], "tight-fs");
    assert_eq!(ok["priority_level"], "tight");
    let with_token = process.wait_for(access);
    assert_eq!(with_token["user"], "system:anonymous");

    write(&config_dir.join("tight.yaml"), &tight_config(7));
    process.signal("HUP");
    process.wait_for(|v| message(v) == "Configuration reloaded");

    process.signal("TERM");
    process.wait_for(|v| message(v) == "Stopped");
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    let status = loop {
        if let Some(status) = process.child.try_wait().expect("wait") {
            break status;
        }
        assert!(tokio::time::Instant::now() < deadline, "exits promptly");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(status.success(), "exit status {status}");
    while let Ok(line) = process.lines.recv_timeout(Duration::from_millis(100)) {
        process.seen.push(line);
    }
    assert!(
        process.seen.iter().all(|l| !l.contains(secret)),
        "the token never reaches the log"
    );
}
