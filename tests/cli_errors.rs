//! The binary's startup errors, run as a user meets them: each cause once, the flag that named
//! a file, and a hint where the cause is a common mistake; and a proxy whose standard error is
//! closed under it.

use std::process::Command;

struct Run {
    code: Option<i32>,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the binary runs");
    Run {
        code: out.status.code(),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// The `error: ` line (serve logs its start on standard error before it).
fn error_line(run: &Run) -> &str {
    run.stderr
        .lines()
        .find(|line| line.starts_with("error: "))
        .unwrap_or_else(|| panic!("an error line in {:?}", run.stderr))
}

fn serve(extra: &[&str]) -> Run {
    let mut args = vec![
        "serve",
        "--secure-port=0",
        "--admin-address=127.0.0.1:0",
        "--upstream=http://127.0.0.1:1",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn a_missing_certificate_names_its_flag_and_the_cause_once() {
    let r = serve(&[
        "--tls-cert-file=/nope/server.crt",
        "--tls-private-key-file=/nope/server.key",
    ]);
    assert_eq!(r.code, Some(2));
    assert_eq!(
        error_line(&r),
        "error: --tls-cert-file /nope/server.crt: cannot read certificate: \
         No such file or directory (os error 2)"
    );
}

#[test]
fn a_missing_key_names_its_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, _) = write_pair(dir.path(), "a");
    let r = serve(&[
        &format!("--tls-cert-file={}", cert.display()),
        "--tls-private-key-file=/nope/server.key",
    ]);
    assert_eq!(
        error_line(&r),
        "error: --tls-private-key-file /nope/server.key: cannot read private key: \
         No such file or directory (os error 2)"
    );
}

#[test]
fn a_key_of_another_certificate_is_said_plainly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, _) = write_pair(dir.path(), "a");
    let (_, other_key) = write_pair(dir.path(), "b");
    let r = serve(&[
        &format!("--tls-cert-file={}", cert.display()),
        &format!("--tls-private-key-file={}", other_key.display()),
    ]);
    assert_eq!(r.code, Some(2));
    assert_eq!(
        error_line(&r),
        format!(
            "error: --tls-cert-file {} and --tls-private-key-file {}: the private key does not \
             belong to the certificate (is it the key of another certificate?)",
            cert.display(),
            other_key.display()
        )
    );
}

#[test]
fn a_client_ca_file_without_certificates_names_its_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("ca.crt");
    std::fs::write(&empty, "not PEM\n").expect("write");
    let r = serve(&[&format!("--client-ca-file={}", empty.display())]);
    assert_eq!(r.code, Some(2));
    let line = error_line(&r);
    assert!(
        line.contains(&format!("--client-ca-file {}", empty.display())),
        "{line}"
    );
}

#[test]
fn a_missing_token_file_names_its_flag_and_the_cause_once() {
    let r = serve(&["--token-auth-file=/nope/tokens.csv"]);
    assert_eq!(r.code, Some(2));
    assert_eq!(
        error_line(&r),
        "error: authentication: --token-auth-file /nope/tokens.csv: cannot read: \
         No such file or directory (os error 2)"
    );
}

#[test]
fn no_upstream_is_said_once() {
    let r = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .args(["serve", "--secure-port=0", "--admin-address=127.0.0.1:0"])
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8(r.stderr).expect("utf-8");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("an error line in {stderr:?}"));
    assert_eq!(
        line.matches("no upstream").count(),
        1,
        "the cause once: {line}"
    );
}

/// A self-signed certificate and its key, as `NAME.crt` and `NAME.key` in `dir`.
fn write_pair(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, generated.cert.pem()).expect("write cert");
    std::fs::write(&key, generated.key_pair.serialize_pem()).expect("write key");
    (cert, key)
}

#[test]
fn missing_upstream_files_name_their_flag() {
    let cases = [
        (
            vec![
                "--upstream=https://127.0.0.1:1",
                "--upstream-ca-file=/nope/ca.crt",
            ],
            "error: upstream: --upstream-ca-file /nope/ca.crt: cannot read: \
             No such file or directory (os error 2)",
        ),
        (
            vec![
                "--upstream=http://127.0.0.1:1",
                "--upstream-token-file=/nope/token",
            ],
            "error: upstream: --upstream-token-file /nope/token: cannot read: \
             No such file or directory (os error 2)",
        ),
        (
            vec!["--kubeconfig=/nope/kubeconfig"],
            "error: upstream: --kubeconfig /nope/kubeconfig: cannot read: \
             No such file or directory (os error 2)",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["serve", "--secure-port=0", "--admin-address=127.0.0.1:0"];
        args.extend(flags);
        let r = run(&args);
        assert_eq!(r.code, Some(2), "{args:?}");
        assert_eq!(error_line(&r), want, "{args:?}");
    }
}

#[test]
fn unreadable_inputs_of_the_cluster_free_commands_name_their_flag() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["simulate", "--trace", "examples/burst.jsonl", "--compare-config-dir", "/nope/dir"],
            "error: --compare-config-dir /nope/dir: cannot read the directory: No such file or directory (os error 2)",
        ),
        (
            &["simulate", "--trace", "examples/burst.jsonl", "--config-dir", "/nope/dir"],
            "error: --config-dir /nope/dir: cannot read the directory: No such file or directory (os error 2)",
        ),
        (
            &["simulate", "--trace", "/nope/audit.log"],
            "error: --trace /nope/audit.log: cannot read: No such file or directory (os error 2)",
        ),
        (
            &["classify", "--requests", "/nope/requests.jsonl"],
            "error: --requests /nope/requests.jsonl: cannot read: No such file or directory (os error 2)",
        ),
        (
            &["lint", "--config-dir", "/nope/dir"],
            "error: --config-dir /nope/dir: cannot read the directory: No such file or directory (os error 2)",
        ),
        (
            &["config", "dump", "--config-dir", "/nope/dir"],
            "error: --config-dir /nope/dir: cannot read the directory: No such file or directory (os error 2)",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("RUST_LOG")
            .output()
            .expect("the binary runs");
        let r = Run {
            code: out.status.code(),
            stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
        };
        assert_eq!(r.code, Some(2), "{args:?}");
        assert_eq!(r.stderr, format!("{want}\n"), "{args:?}");
    }
}

/// An upstream that answers every request `200 {}` (HTTP/1.1, one request per connection).
fn answering_upstream() -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let _ = reader.get_mut().write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
            );
        }
    });
    addr
}

/// Standard error closed under the proxy (a log pipe whose reader died): its log lines are
/// dropped and it goes on serving. tracing-subscriber's default reported a failed write with
/// `eprintln!`, which panics when standard error is what failed, in the task that logged: the
/// secure listener logs as it starts, so its port then refused every connection.
#[test]
fn a_closed_standard_error_leaves_the_proxy_serving() {
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
    };
    let (secure, admin) = (free(), free());
    let upstream = answering_upstream();
    let mut proxy = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .args([
            "serve",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={secure}"),
            &format!("--admin-address=127.0.0.1:{admin}"),
            &format!("--upstream=http://{upstream}"),
        ])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the proxy starts");
    // The reader goes away before the proxy has written a line.
    drop(proxy.stderr.take());
    let get = |url: &str| {
        let out = Command::new("curl")
            .args([
                "-sk",
                "-m",
                "5",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                url,
            ])
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut answered = String::new();
    for _ in 0..100 {
        answered = get(&format!("https://127.0.0.1:{secure}/version"));
        if answered == "200" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let alive = proxy.try_wait().expect("status").is_none();
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert!(alive, "the proxy is still running");
    assert_eq!(answered, "200", "a request through the secure port");
}

/// A port already taken is said with the flag that chose it: `--secure-port` (serve's and the
/// webhook's), `--admin-address`.
#[test]
fn a_port_in_use_names_its_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let port = addr.port().to_string();
    let cases: [(Vec<String>, String); 3] = [
        (
            vec![
                "serve".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
                "--admin-address=127.0.0.1:0".into(),
                "--upstream=http://127.0.0.1:1".into(),
            ],
            format!("error: --secure-port {port}: cannot listen on {addr}: "),
        ),
        (
            vec![
                "serve".into(),
                "--bind-address=127.0.0.1".into(),
                "--secure-port=0".into(),
                format!("--admin-address={addr}"),
                "--upstream=http://127.0.0.1:1".into(),
            ],
            format!("error: --admin-address {addr}: cannot listen on {addr}: "),
        ),
        (
            vec![
                "webhook".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
            ],
            format!("error: --secure-port {port}: cannot listen on {addr}: "),
        ),
    ];
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run(&args);
        assert_eq!(r.code, Some(2), "{args:?}");
        let line = error_line(&r);
        assert!(line.starts_with(&want), "{args:?}: {line}");
    }
    drop(taken);
}

/// One table of exit codes for every command: the same invalid directory is 1 everywhere (its
/// problems printed), the same missing one 2 everywhere, and each command's help shows the table.
#[test]
fn every_command_exits_by_the_same_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n\
         metadata: {name: bad}\nspec: {type: Limited, limited: {nominalConcurrencyShares: -1, \
         limitResponse: {type: Reject}}}\n",
    )
    .expect("write");
    let invalid = dir.path().display().to_string();
    let commands: [&[&str]; 7] = [
        &["check"],
        &["config", "dump"],
        &["lint"],
        &["classify", "--method", "GET", "--url", "/api"],
        &["classify", "--method", "GET", "--url", "/api", "--explain"],
        &["simulate", "--trace", "examples/burst.jsonl"],
        &[
            "simulate",
            "--trace",
            "examples/burst.jsonl",
            "--compare-config-dir",
        ],
    ];
    let root = env!("CARGO_MANIFEST_DIR");
    for (path, code) in [(invalid.as_str(), 1), ("/nope/dir", 2)] {
        for command in commands {
            let mut args = command.to_vec();
            if args.last() != Some(&"--compare-config-dir") {
                args.push("--config-dir");
            }
            args.push(path);
            let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
                .args(&args)
                .current_dir(root)
                .env_remove("RUST_LOG")
                .output()
                .expect("the binary runs");
            let all = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(code), "{args:?}: {all}");
            if code == 1 {
                assert!(
                    all.contains("nominalConcurrencyShares: Invalid value: -1"),
                    "{args:?}: the problem itself: {all}"
                );
            }
        }
    }
    for command in [
        &[][..],
        &["serve"],
        &["check"],
        &["config", "dump"],
        &["lint"],
        &["classify"],
        &["webhook"],
        &["simulate"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let out = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
            .args(&args)
            .output()
            .expect("the binary runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Exit codes (the same for every command):")
                && text.contains("2  something could not be read or started"),
            "{args:?}: {text}"
        );
    }
}
