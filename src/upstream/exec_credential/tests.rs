use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;

const V1: &str = "client.authentication.k8s.io/v1";

fn config(command: &Path) -> ExecConfig {
    ExecConfig {
        command: command.display().to_string(),
        api_version: V1.into(),
        ..ExecConfig::default()
    }
}

/// A plugin script in `dir` that counts its runs in `dir/runs` and runs `body`.
fn script(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("plugin.sh");
    let text = format!("#!/bin/sh\necho run >> '{}/runs'\n{body}\n", dir.display());
    std::fs::write(&path, text).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn credential_json(token: &str, expires: Option<&str>) -> String {
    let mut status = serde_json::json!({"token": token});
    if let Some(expires) = expires {
        status["expirationTimestamp"] = expires.into();
    }
    serde_json::json!({"apiVersion": V1, "kind": "ExecCredential", "status": status}).to_string()
}

fn in_an_hour() -> String {
    (now() + k8s_openapi::jiff::SignedDuration::from_secs(3600)).to_string()
}

#[test]
fn parses_both_api_versions_and_the_expiry() {
    for version in API_VERSIONS {
        let out = format!(
            r#"{{"apiVersion":"{version}","kind":"ExecCredential","status":{{"token":"t","expirationTimestamp":"2026-11-24T10:00:00Z"}}}}"#
        );
        let credential = parse_output("p", version, out.as_bytes()).expect("parses");
        assert_eq!(credential.token.as_deref(), Some("t"));
        assert!(credential.client_key.is_none());
        assert_eq!(
            credential.expires,
            Some("2026-11-24T10:00:00Z".parse().expect("time"))
        );
    }
    let no_expiry = credential_json("t", None);
    assert_eq!(
        parse_output("p", V1, no_expiry.as_bytes())
            .expect("ok")
            .expires,
        None
    );
}

#[test]
fn output_that_is_not_a_token_credential_is_refused_without_echoing_it() {
    let cases = [
        ("not json at all secret-ish", "not an ExecCredential"),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod","status":{"token":"s3cr3t"}}"#,
            "kind",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"s3cr3t"}}"#,
            "apiVersion",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}"#,
            "no status",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}"#,
            "neither status.token nor a client certificate",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"c","clientKeyData":"k"}}"#,
            "holds no certificate",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"c"}}"#,
            "without its key",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"s3cr3t","expirationTimestamp":"tomorrow"}}"#,
            "RFC 3339",
        ),
    ];
    for (out, expected) in cases {
        let error = parse_output("p", V1, out.as_bytes())
            .expect_err(out)
            .to_string();
        assert!(error.contains(expected), "{out}: {error}");
        assert!(
            !error.contains("s3cr3t") && !error.contains("secret-ish"),
            "{error}"
        );
    }
}

#[test]
fn a_client_certificate_and_key_become_what_handshakes_present() {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["plugin-user".into()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    let out = serde_json::json!({"apiVersion": V1, "kind": "ExecCredential",
        "status": {"clientCertificateData": cert.pem(), "clientKeyData": key.serialize_pem()}})
    .to_string();
    let credential = parse_output("p", V1, out.as_bytes()).expect("parses");
    assert_eq!(credential.token, None);
    let certified = credential.client_key.expect("a client certificate");
    assert_eq!(certified.cert[0].as_ref(), cert.der().as_ref());
}

#[test]
fn the_stanza_is_checked_as_client_go_does() {
    let ok = ExecConfig {
        command: "p".into(),
        api_version: V1.into(),
        interactive_mode: "IfAvailable".into(),
        ..ExecConfig::default()
    };
    assert_eq!(validate(&ok), Ok(()));
    let always = ExecConfig {
        interactive_mode: "Always".into(),
        ..ok.clone()
    };
    assert!(validate(&always)
        .expect_err("Always")
        .to_string()
        .contains("no terminal"));
    let old = ExecConfig {
        api_version: "client.authentication.k8s.io/v1alpha1".into(),
        ..ok.clone()
    };
    assert!(validate(&old).is_err());
}

#[test]
fn freshness_leaves_a_margin_before_expiry() {
    let now: Timestamp = "2026-11-24T10:00:00Z".parse().expect("time");
    let at = |s: &str| ExecCredential {
        token: Some("t".into()),
        client_key: None,
        expires: Some(s.parse().expect("time")),
    };
    assert!(is_fresh(&at("2026-11-24T10:01:00Z"), now));
    assert!(
        !is_fresh(&at("2026-11-24T10:00:05Z"), now),
        "within the margin"
    );
    assert!(is_unexpired(&at("2026-11-24T10:00:05Z"), now));
    assert!(!is_unexpired(&at("2026-11-24T09:59:59Z"), now));
    let forever = ExecCredential {
        token: Some("t".into()),
        client_key: None,
        expires: None,
    };
    assert!(is_fresh(&forever, now));
}

#[tokio::test]
async fn a_valid_credential_is_cached_and_shared_by_concurrent_callers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = credential_json("tok-1", Some(&in_an_hour()));
    let plugin = Arc::new(ExecPlugin::new(
        config(&script(dir.path(), &format!("sleep 0.2\necho '{out}'"))),
        ExecCluster::default(),
    ));
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let plugin = Arc::clone(&plugin);
            tokio::spawn(async move { plugin.token().await })
        })
        .collect();
    for call in calls {
        assert_eq!(
            call.await.expect("task").expect("token").as_deref(),
            Some("tok-1")
        );
    }
    assert_eq!(
        plugin.token().await.expect("token").as_deref(),
        Some("tok-1")
    );
    assert_eq!(runs(dir.path()), 1, "one run for eleven callers");
}

#[tokio::test]
async fn an_expiring_or_refused_credential_runs_the_plugin_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Expires within the refresh margin: every call runs the plugin.
    let soon = (now() + k8s_openapi::jiff::SignedDuration::from_secs(2)).to_string();
    let out = credential_json("tok", Some(&soon));
    let plugin = ExecPlugin::new(
        config(&script(dir.path(), &format!("echo '{out}'"))),
        ExecCluster::default(),
    );
    plugin.token().await.expect("token");
    plugin.token().await.expect("token");
    assert_eq!(runs(dir.path()), 2);

    let dir = tempfile::tempdir().expect("tempdir");
    let out = credential_json("tok", Some(&in_an_hour()));
    let plugin = ExecPlugin::new(
        config(&script(dir.path(), &format!("echo '{out}'"))),
        ExecCluster::default(),
    );
    plugin.token().await.expect("token");
    plugin.invalidate("another token").await;
    plugin.token().await.expect("token");
    assert_eq!(
        runs(dir.path()),
        1,
        "a 401 to an older token changes nothing"
    );
    plugin.invalidate("tok").await;
    plugin.token().await.expect("token");
    assert_eq!(
        runs(dir.path()),
        2,
        "a 401 to the current token runs the plugin again"
    );
}

#[tokio::test]
async fn failing_plugins_give_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = ExecConfig {
        install_hint: "Install it with: apt-get install the-plugin".into(),
        ..config(&dir.path().join("no-such-plugin"))
    };
    let error = ExecPlugin::new(missing, ExecCluster::default())
        .token()
        .await
        .expect_err("missing")
        .to_string();
    assert!(
        error.contains("not found") && error.contains("apt-get install the-plugin"),
        "{error}"
    );

    let failing = script(
        dir.path(),
        "echo 'plugin: no session (expected by this test)' >&2\nexit 3",
    );
    let error = ExecPlugin::new(config(&failing), ExecCluster::default())
        .token()
        .await
        .expect_err("exit 3")
        .to_string();
    assert!(error.contains("exit status: 3"), "{error}");

    let garbage = script(dir.path(), "echo 's3cr3t garbage'");
    let error = ExecPlugin::new(config(&garbage), ExecCluster::default())
        .token()
        .await
        .expect_err("garbage")
        .to_string();
    assert!(
        error.contains("not an ExecCredential") && !error.contains("s3cr3t"),
        "{error}"
    );

    let hangs = script(dir.path(), "exec sleep 30");
    let plugin = ExecPlugin::with_timeout(
        config(&hangs),
        ExecCluster::default(),
        Duration::from_millis(300),
    );
    let error = plugin.token().await.expect_err("hangs");
    assert!(matches!(error, ExecError::Timeout { .. }), "{error}");
    assert_eq!(plugin.runs(), (1, 1));
}

#[tokio::test]
async fn the_last_good_credential_is_kept_while_unexpired() {
    let dir = tempfile::tempdir().expect("tempdir");
    let soon = (now() + k8s_openapi::jiff::SignedDuration::from_secs(5)).to_string();
    let out = credential_json("tok", Some(&soon));
    // First run succeeds; later runs fail.
    let body = format!(
        "if [ \"$(wc -l < '{}/runs')\" -gt 1 ]; then exit 1; fi\necho '{out}'",
        dir.path().display()
    );
    let plugin = ExecPlugin::new(config(&script(dir.path(), &body)), ExecCluster::default());
    assert_eq!(plugin.token().await.expect("first").as_deref(), Some("tok"));
    assert_eq!(
        plugin
            .token()
            .await
            .expect("stale but unexpired")
            .as_deref(),
        Some("tok")
    );
    assert_eq!(plugin.runs(), (2, 1));
}

#[tokio::test]
async fn the_plugin_gets_its_env_and_exec_info() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = ExecConfig {
        env: vec![ExecEnvVar {
            name: "PLUGIN_ZONE".into(),
            value: "eu".into(),
        }],
        args: vec!["--flag".into()],
        provide_cluster_info: true,
        ..config(&script(
            dir.path(),
            &format!(
                "printf '%s|%s|%s' \"$PLUGIN_ZONE\" \"$1\" \"$KUBERNETES_EXEC_INFO\" > '{}/seen'\necho '{}'",
                dir.path().display(),
                credential_json("t", None)
            ),
        ))
    };
    let cluster = ExecCluster {
        server: "https://10.0.0.1:6443".into(),
        certificate_authority_data: "Q0E=".into(),
        insecure_skip_tls_verify: false,
    };
    ExecPlugin::new(cfg, cluster).token().await.expect("token");
    let seen = std::fs::read_to_string(dir.path().join("seen")).expect("seen");
    let mut parts = seen.splitn(3, '|');
    assert_eq!(parts.next(), Some("eu"));
    assert_eq!(parts.next(), Some("--flag"));
    let info: serde_json::Value = serde_json::from_str(parts.next().expect("info")).expect("json");
    assert_eq!(info["kind"], "ExecCredential");
    assert_eq!(info["apiVersion"], V1);
    assert_eq!(info["spec"]["interactive"], false);
    assert_eq!(info["spec"]["cluster"]["server"], "https://10.0.0.1:6443");
    assert_eq!(
        info["spec"]["cluster"]["certificate-authority-data"],
        "Q0E="
    );
}

/// Whether process `pid` is alive (a zombie, which only waits for its parent to reap it, is
/// not).
fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`; comm may hold spaces and parentheses.
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with('Z'))
}

/// Polls (real time: these are real processes) until none of `pids` is alive; those left after
/// 5 s otherwise.
async fn gone(pids: &[i32]) -> Vec<i32> {
    for _ in 0..100 {
        if !pids.iter().any(|p| alive(*p)) {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pids.iter().copied().filter(|p| alive(*p)).collect()
}

/// The process group of `pid`.
fn group_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let (_, rest) = stat.rsplit_once(") ").expect("stat format");
    rest.split(' ')
        .nth(2)
        .and_then(|g| g.parse().ok())
        .expect("pgrp")
}

/// A wrapper script whose child hangs (a cloud CLI stuck on the network) and holds standard
/// output: the script's pid is written to `pgid` (it leads its group), its child's to `child`.
fn hanging_wrapper(dir: &Path) -> PathBuf {
    script(
        dir,
        &format!(
            "echo $$ > '{}/pgid'\nsleep 300 &\necho $! > '{}/child'\nwait",
            dir.display(),
            dir.display()
        ),
    )
}

fn read_pid(dir: &Path, name: &str) -> i32 {
    std::fs::read_to_string(dir.join(name))
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid")
}

#[tokio::test]
async fn a_timed_out_plugin_leaves_no_process_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = ExecPlugin::with_timeout(
        config(&hanging_wrapper(dir.path())),
        ExecCluster::default(),
        Duration::from_millis(500),
    );
    let error = plugin.token().await.expect_err("hangs");
    assert!(matches!(error, ExecError::Timeout { .. }), "{error}");
    let (leader, child) = (read_pid(dir.path(), "pgid"), read_pid(dir.path(), "child"));
    assert_eq!(
        gone(&[leader, child]).await,
        Vec::<i32>::new(),
        "left behind"
    );
}

#[tokio::test]
async fn a_plugin_whose_caller_goes_away_leaves_no_process_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = ExecPlugin::with_timeout(
        config(&hanging_wrapper(dir.path())),
        ExecCluster::default(),
        Duration::from_secs(60),
    );
    // The request waiting for the run is cancelled once the wrapper has started its child.
    let waiting = tokio::time::timeout(Duration::from_secs(30), async {
        let run = plugin.token();
        tokio::pin!(run);
        loop {
            tokio::select! {
                _ = &mut run => panic!("the plugin hangs"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    let started = std::fs::read_to_string(dir.path().join("child"))
                        .is_ok_and(|t| t.ends_with('\n'));
                    if started {
                        // The plugin leads its own group, and its child is in it.
                        let leader = read_pid(dir.path(), "pgid");
                        let child = read_pid(dir.path(), "child");
                        assert_eq!(group_of(leader), leader);
                        assert_eq!(group_of(child), leader);
                        return;
                    }
                }
            }
        }
    });
    waiting.await.expect("the wrapper starts its child");
    let (leader, child) = (read_pid(dir.path(), "pgid"), read_pid(dir.path(), "child"));
    assert_eq!(
        gone(&[leader, child]).await,
        Vec::<i32>::new(),
        "left behind"
    );
}

#[tokio::test]
async fn output_past_the_limit_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Writes past the limit, then keeps writing (blocked on the full pipe) for ever.
    let flood = script(
        dir.path(),
        &format!(
            "echo $$ > '{}/pgid'\nhead -c {} /dev/zero\nexec cat /dev/zero",
            dir.path().display(),
            MAX_OUTPUT_BYTES + 1
        ),
    );
    let timeout = Duration::from_secs(60);
    let plugin = ExecPlugin::with_timeout(config(&flood), ExecCluster::default(), timeout);
    // Real time: the plugin is a real process (tokio's clock is not paused here).
    let started = tokio::time::Instant::now();
    let error = plugin.token().await.expect_err("too much");
    let took = started.elapsed();
    assert!(
        error.to_string().contains("more than 1048576 bytes"),
        "{error}"
    );
    // Bounded by a generous real limit, far below the plugin timeout it used to wait for.
    assert!(took < Duration::from_secs(10), "{took:?}");
    let plugin_pid = read_pid(dir.path(), "pgid");
    assert_eq!(gone(&[plugin_pid]).await, Vec::<i32>::new(), "left behind");
}
