//! The `kube-apf-proxy` binary under real signals: JSON access logs without tokens, SIGHUP
//! reloads, SIGTERM exits 0; and the README's quick-start command on the embedded configuration.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use super::*;
use kube_apf_proxy::server::tls::fingerprint;

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
    /// Starts the binary with `args`, reading its standard error line by line.
    fn start(args: &[&str]) -> Process {
        let mut child = Command::new(BINARY)
            .args(args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Process {
            child,
            lines,
            seen: Vec::new(),
        }
    }

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
    let mut process = Process::start(&[
        "serve",
        "--log-format=json",
        "-v=1",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        "--admin-address=127.0.0.1:0",
        &format!("--upstream={}", fake.url),
        &format!("--config-dir={}", config_dir.display()),
        &format!("--tls-cert-file={}", cert.display()),
        &format!("--tls-private-key-file={}", key.display()),
    ]);
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

/// The README's quick-start command (`serve --bind-address 127.0.0.1 --upstream URL`): no
/// configuration directory and no certificate files, so the embedded bootstrap configuration and a
/// self-signed certificate whose logged SHA-256 fingerprint is the one served. Only the ports (0
/// here, where the README uses the defaults) and the log format (to read the addresses) differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_command_serves_the_embedded_configuration() {
    let fake = FakeApiserver::start_plain().await;
    let mut process = Process::start(&[
        "serve",
        "--bind-address",
        "127.0.0.1",
        "--upstream",
        &fake.url,
        "--secure-port=0",
        "--admin-address=127.0.0.1:0",
        "--log-format=json",
    ]);
    let loaded = process.wait_for(|v| message(v) == "Serving certificate loaded");
    let logged = loaded["sha256"].as_str().expect("fingerprint").to_owned();
    let serving = process.wait_for(|v| message(v) == "Serving");
    let secure: SocketAddr = serving["secure"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .expect("secure address");

    let (response, served) = pinned_get(secure, &logged, "/api/v1/namespaces/ns/pods").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(fingerprint(&served), logged);
    // Anonymous and unconfigured: the bootstrap `global-default` FlowSchema and level, with the
    // UIDs derived from their names.
    let header = |name: &str| response.headers()[name].to_str().expect("ASCII").to_owned();
    let embedded = kube_apf_proxy::config::bootstrap();
    let flow_schema = embedded
        .flow_schemas()
        .iter()
        .find(|fs| fs.name == "global-default")
        .expect("the embedded FlowSchema global-default");
    let level = embedded
        .priority_level("global-default")
        .expect("the embedded level global-default");
    assert_eq!(header("x-kubernetes-pf-flowschema-uid"), flow_schema.uid);
    assert_eq!(header("x-kubernetes-pf-prioritylevel-uid"), level.uid);
    process.signal("TERM");
    process.wait_for(|v| message(v) == "Stopped");
}

/// A GET over TLS that trusts exactly the certificate whose fingerprint is `pinned`.
async fn pinned_get(
    addr: SocketAddr,
    pinned: &str,
    path: &str,
) -> (Response<Incoming>, CertificateDer<'static>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(Pinned {
        fingerprint: pinned.to_owned(),
        algorithms: provider.signature_verification_algorithms,
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    send_with(config, addr, http::Method::GET, path, None).await
}

/// Trusts one certificate, by fingerprint; the handshake's signatures are still checked.
#[derive(Debug)]
struct Pinned {
    fingerprint: String,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if fingerprint(end_entity) == self.fingerprint {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("not the pinned certificate".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Text logs written to a pipe (as to a file or journald) carry no terminal colour codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_to_a_pipe_have_no_colour_codes() {
    let fake = FakeApiserver::start_plain().await;
    let process = Process::start(&[
        "serve",
        "--bind-address=127.0.0.1",
        &format!("--upstream={}", fake.url),
        "--secure-port=0",
        "--admin-address=127.0.0.1:0",
    ]);
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.contains("Serving") && !l.contains("certificate"))
    {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        lines.push(process.lines.recv_timeout(left).expect("a log line"));
    }
    for line in &lines {
        assert!(!line.contains('\u{1b}'), "a colour code in {line:?}");
        assert!(
            line.contains(" INFO ") || line.contains(" WARN "),
            "{line:?}"
        );
    }
    process.signal("TERM");
}
