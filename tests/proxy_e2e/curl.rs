//! curl (when installed) through the whole app: a client certificate over HTTP/2 by ALPN, and
//! a large upload, which curl sends with `Expect: 100-continue`.

use std::process::Output;

use crate::support::app::{AppBuilder, TestApp};
use crate::support::fake_apiserver::FakeApiserver;
use crate::support::tools;

async fn curl(app: &TestApp, args: Vec<String>) -> Output {
    let mut command = std::process::Command::new("curl");
    command
        .arg("--silent")
        .arg("--show-error")
        .args(["--max-time", "10", "--cacert"])
        .arg(app.serving_ca_file())
        .args(args);
    tools::run_ok(command, "curl").await
}

async fn setup() -> Option<(FakeApiserver, TestApp)> {
    if !tools::installed("curl", &["--version"]) {
        eprintln!("curl is not installed; skipping");
        return None;
    }
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .client_ca()
        .upstream_token("proxy-token")
        .flag("--identity-forwarding=impersonate")
        .start()
        .await;
    Some((fake, app))
}

#[tokio::test]
async fn curl_with_a_client_certificate_speaks_http2() {
    let Some((fake, app)) = setup().await else {
        return;
    };
    let (cert, key) = app
        .user_cert("gina", Some("ops"))
        .write(app.dir.path(), "gina");
    let out = curl(
        &app,
        vec![
            "--http2".into(),
            "--cert".into(),
            cert.display().to_string(),
            "--key".into(),
            key.display().to_string(),
            "--write-out".into(),
            "\n%{http_version} %{http_code}".into(),
            format!("{}/api/v1/namespaces/ns/pods/web", app.url()),
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.ends_with("\n2 200"), "{stdout}");
    let seen = fake.last_request_to("/api/v1/namespaces/ns/pods/web");
    assert_eq!(seen.header_values("impersonate-user"), ["gina"]);
}

#[tokio::test]
async fn curl_uploads_a_large_body_with_expect_continue() {
    let Some((fake, app)) = setup().await else {
        return;
    };
    let upload = app.path("upload.json");
    // Just under --max-request-bytes (3 MiB), above which the proxy answers 413.
    let payload = format!("{{\"data\":\"{}\"}}", "x".repeat(3 * 1024 * 1024 - 64));
    std::fs::write(&upload, &payload).expect("write upload");
    let out = curl(
        &app,
        vec![
            "--http1.1".into(),
            "--header".into(),
            "Content-Type: application/json".into(),
            "--data-binary".into(),
            format!("@{}", upload.display()),
            "--output".into(),
            "/dev/null".into(),
            "--write-out".into(),
            "%{http_code} %{size_upload} %{size_download}".into(),
            format!("{}/api/v1/namespaces/ns/pods", app.url()),
        ],
    )
    .await;
    let size = payload.len();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("201 {size} {size}")
    );
    let seen = fake.last_request_to("/api/v1/namespaces/ns/pods");
    assert_eq!(seen.method, http::Method::POST);
}
