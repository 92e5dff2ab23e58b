//! The admission webhook end to end over HTTPS (HTTP/1.1 and HTTP/2, as the apiserver's client
//! negotiates), with AdmissionReview bodies shaped as kube-apiserver sends them.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_apf_proxy::admission::{Webhook, WebhookConfig, MAX_BODY_BYTES};
use serde_json::{json, Value};
use support::pki::{client_config, TestCa};

struct Running {
    addr: SocketAddr,
    ca: TestCa,
    _dir: tempfile::TempDir,
    _trigger: kube_apf_proxy::server::ShutdownTrigger,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("webhook-ca");
    let (cert, key) = ca.server_cert().write(dir.path(), "serving");
    let config = dir.path().join("flowcontrol");
    std::fs::create_dir(&config).expect("mkdir");
    std::fs::write(
        config.join("bootstrap.yaml"),
        kube_apf_proxy::config::BOOTSTRAP_YAML,
    )
    .expect("write");
    let options = WebhookConfig {
        bind_address: "127.0.0.1".parse().expect("ip"),
        secure_port: 0,
        tls_cert_file: Some(cert),
        tls_private_key_file: Some(key),
        config_dir: Some(config),
        configmap_label: ("kube-apf-proxy.io/flowcontrol-config".into(), "true".into()),
        lint: Default::default(),
    };
    let webhook = Webhook::bind(options).await.expect("binds");
    let addr = webhook.local_addr();
    let (trigger, signal) = kube_apf_proxy::server::shutdown_channel();
    tokio::spawn(webhook.run(signal));
    Running {
        addr,
        ca,
        _dir: dir,
        _trigger: trigger,
    }
}

impl Running {
    async fn send(&self, h2: bool, method: &str, path: &str, body: Bytes) -> (StatusCode, Bytes) {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let connector =
            tokio_rustls::TlsConnector::from(Arc::new(client_config(&self.ca, None, alpn)));
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .expect("connect");
        let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
        let tls = TokioIo::new(connector.connect(name, tcp).await.expect("handshake"));
        let request = Request::builder()
            .method(method)
            .uri(format!("https://localhost:{}{path}", self.addr.port()))
            .header("content-type", "application/json")
            .body(Full::new(body))
            .expect("request");
        let response = if h2 {
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), tls)
                .await
                .expect("h2");
            tokio::spawn(conn);
            send.send_request(request).await.expect("response")
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(tls)
                .await
                .expect("h1");
            tokio::spawn(conn);
            send.send_request(request).await.expect("response")
        };
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, body)
    }

    async fn review(&self, h2: bool, review: &Value) -> Value {
        let (status, body) = self
            .send(h2, "POST", "/validate", Bytes::from(review.to_string()))
            .await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let answer: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(
            answer["response"]["uid"], review["request"]["uid"],
            "the uid is echoed"
        );
        answer["response"].clone()
    }
}

fn review(
    uid: &str,
    operation: &str,
    resource: (&str, &str, &str),
    object: Value,
    old: Option<Value>,
    dry_run: bool,
) -> Value {
    let (group, version, plural) = resource;
    let kind = object["kind"].clone();
    let mut request = json!({
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": plural},
        "name": object["metadata"]["name"],
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": old,
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-client-side-apply"},
    });
    if let Some(ns) = request["object"]["metadata"]["namespace"].as_str() {
        request["namespace"] = json!(ns);
    }
    json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request})
}

const FC: &str = "flowcontrol.apiserver.k8s.io";

fn flow_schema(version: &str, name: &str, level: &str, group: &str) -> Value {
    json!({
        "apiVersion": format!("{FC}/{version}"), "kind": "FlowSchema",
        "metadata": {"name": name, "creationTimestamp": null},
        "spec": {"matchingPrecedence": 600, "priorityLevelConfiguration": {"name": level},
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": group}}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]}]}
    })
}

#[tokio::test]
async fn reviews_over_https_allow_warn_and_deny() {
    let hook = start().await;
    for h2 in [false, true] {
        // Every API version the proxy reads; the removed ones warn.
        for version in ["v1", "v1beta3", "v1beta2", "v1beta1"] {
            let fs = flow_schema(version, "scrapers", "workload-high", "monitoring");
            let r = hook
                .review(
                    h2,
                    &review(
                        &format!("uid-{version}"),
                        "CREATE",
                        (FC, version, "flowschemas"),
                        fs,
                        None,
                        false,
                    ),
                )
                .await;
            assert_eq!(r["allowed"], true);
            let warnings = r["warnings"].as_array().cloned().unwrap_or_default();
            assert_eq!(
                version != "v1",
                warnings.iter().any(|w| w
                    .as_str()
                    .is_some_and(|w| w.contains("api-version-removed"))),
                "{version}: {r}"
            );
            for w in &warnings {
                assert!(w.as_str().is_some_and(|w| w.chars().count() <= 256), "{w}");
            }
        }
        // UPDATE carries the old object; a dry run is answered the same way.
        let old = flow_schema("v1", "scrapers", "workload-high", "monitoring");
        let new = flow_schema("v1", "scrapers", "exempt", "system:authenticated");
        let r = hook
            .review(
                h2,
                &review(
                    "uid-update",
                    "UPDATE",
                    (FC, "v1", "flowschemas"),
                    new,
                    Some(old),
                    true,
                ),
            )
            .await;
        assert_eq!(r["allowed"], true);
        assert_eq!(
            r["auditAnnotations"]["lint-codes"], "broad-subject-privileged-level",
            "{r}"
        );
        // An invalid object: 422 Invalid with a cause per field.
        let mut bad = flow_schema("v1", "scrapers", "workload-high", "monitoring");
        bad["spec"]["matchingPrecedence"] = json!(20000);
        let r = hook
            .review(
                h2,
                &review(
                    "uid-bad",
                    "CREATE",
                    (FC, "v1", "flowschemas"),
                    bad,
                    None,
                    false,
                ),
            )
            .await;
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["code"], 422);
        assert_eq!(r["status"]["reason"], "Invalid");
        assert_eq!(
            r["status"]["details"]["causes"][0]["field"],
            "spec.matchingPrecedence"
        );
        assert_eq!(
            r["status"]["details"]["causes"][0]["reason"],
            "FieldValueInvalid"
        );
    }
}

#[tokio::test]
async fn the_proxys_configmap_is_refused_when_its_reload_would_be() {
    let hook = start().await;
    let cm = |yaml: &str| {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube-apf-proxy-flowcontrol", "namespace": "kube-system",
                "labels": {"kube-apf-proxy.io/flowcontrol-config": "true"}},
            "data": {"bootstrap-config.yaml": yaml}
        })
    };
    let good = cm(kube_apf_proxy::config::BOOTSTRAP_YAML);
    let broken =
        cm(&kube_apf_proxy::config::BOOTSTRAP_YAML.replace("handSize: 6", "handSize: 600"));
    let r = hook
        .review(
            true,
            &review(
                "cm-1",
                "UPDATE",
                ("", "v1", "configmaps"),
                broken,
                Some(good.clone()),
                false,
            ),
        )
        .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["details"]["kind"], "ConfigMap");
    assert_eq!(
        r["status"]["details"]["causes"][0]["field"],
        "data[bootstrap-config.yaml]"
    );
    let r = hook
        .review(
            true,
            &review(
                "cm-2",
                "CREATE",
                ("", "v1", "configmaps"),
                good,
                None,
                false,
            ),
        )
        .await;
    assert_eq!(r, json!({"uid": "cm-2", "allowed": true}));
}

#[tokio::test]
async fn bad_bodies_get_a_status_and_are_counted() {
    let hook = start().await;
    let cases: Vec<(Bytes, StatusCode, &str)> = vec![
        (Bytes::from_static(b"{not json"), StatusCode::BAD_REQUEST, "not an AdmissionReview"),
        (Bytes::from(json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "x"}}).to_string()), StatusCode::BAD_REQUEST, "admissionReviewVersions"),
        (Bytes::from(json!({"apiVersion": "v1", "kind": "Pod"}).to_string()), StatusCode::BAD_REQUEST, "expected kind AdmissionReview"),
        (Bytes::from(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string()), StatusCode::BAD_REQUEST, "no request"),
        (Bytes::from(vec![b' '; MAX_BODY_BYTES + 1]), StatusCode::PAYLOAD_TOO_LARGE, "larger than"),
    ];
    for (body, code, text) in cases {
        let (status, answer) = hook.send(false, "POST", "/validate", body).await;
        assert_eq!(status, code);
        let status_body: Value = serde_json::from_slice(&answer).expect("a Status");
        assert_eq!(status_body["kind"], "Status");
        assert_eq!(status_body["code"], code.as_u16());
        assert!(
            status_body["message"]
                .as_str()
                .is_some_and(|m| m.contains(text)),
            "{status_body}"
        );
    }
    let (status, _) = hook.send(false, "GET", "/validate", Bytes::new()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    for path in ["/healthz", "/readyz"] {
        let (status, body) = hook.send(true, "GET", path, Bytes::new()).await;
        assert_eq!((status, body.as_ref()), (StatusCode::OK, &b"ok"[..]));
    }
    let (_, metrics) = hook.send(false, "GET", "/metrics", Bytes::new()).await;
    let metrics = String::from_utf8_lossy(&metrics);
    for line in [
        "apf_proxy_admission_reviews_total{result=\"error\"} 5",
        "apf_proxy_admission_review_errors_total{reason=\"too_large\"} 1",
        "apf_proxy_admission_review_errors_total{reason=\"not_json\"} 1",
        "apf_proxy_admission_review_errors_total{reason=\"unsupported_version\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
}

#[tokio::test]
async fn curl_posts_a_review_as_a_real_client_would() {
    if !support::tools::installed("curl", &["--version"]) {
        eprintln!("curl not installed; skipped");
        return;
    }
    let hook = start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = hook.ca.write(dir.path(), "ca");
    let body = review(
        "curl-1",
        "CREATE",
        (FC, "v1", "flowschemas"),
        flow_schema("v1", "scrapers", "workload-high", "monitoring"),
        None,
        false,
    );
    let mut command = std::process::Command::new("curl");
    command.args(["-sS", "--fail", "--cacert"]).arg(&ca).args([
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        &body.to_string(),
        &format!("https://localhost:{}/validate", hook.addr.port()),
    ]);
    let out = support::tools::run_ok(command, "curl").await;
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        answer["response"],
        json!({"uid": "curl-1", "allowed": true})
    );
}

/// `kubectl apply` of a chart's flow control: a new level first (not reported unused), a
/// FlowSchema carrying the namespace Helm stamps on everything (allowed, as the apiserver clears
/// it), and a v1alpha1 object (read, warned as removed); every warning within 256 characters.
#[tokio::test]
async fn a_charts_objects_are_judged_as_the_apiserver_stores_them() {
    let hook = start().await;
    let level = json!({
        "apiVersion": format!("{FC}/v1"), "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "chart-level"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 10,
            "limitResponse": {"type": "Reject"}}}
    });
    let mut namespaced = flow_schema("v1", "chart-schema", "chart-level", "chart-users");
    namespaced["metadata"]["namespace"] = json!("chart-ns");
    let old = flow_schema("v1alpha1", "old-schema", "workload-low", "old-users");
    let plural = |o: &Value| {
        if o["kind"] == "FlowSchema" {
            "flowschemas"
        } else {
            "prioritylevelconfigurations"
        }
    };
    // (object, operation, a warning code expected, a code never expected)
    let cases = [
        (&level, "CREATE", None, Some("priority-level-unused")),
        (&level, "UPDATE", Some("priority-level-unused"), None),
        (&namespaced, "CREATE", None, None),
        (&old, "CREATE", Some("api-version-removed"), None),
    ];
    for (i, (object, operation, expected, absent)) in cases.into_iter().enumerate() {
        let version = object["apiVersion"]
            .as_str()
            .and_then(|v| v.rsplit('/').next());
        let resource = (FC, version.unwrap_or("v1"), plural(object));
        let old = (operation == "UPDATE").then(|| object.clone());
        let body = review(
            &format!("u{i}"),
            operation,
            resource,
            object.clone(),
            old,
            false,
        );
        let r = hook.review(i % 2 == 0, &body).await;
        assert_eq!(r["allowed"], true, "{i}: {r}");
        let warnings: Vec<&str> = r["warnings"]
            .as_array()
            .map(|w| w.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for w in &warnings {
            assert!(w.chars().count() <= 256, "{w}");
            assert!(!w.contains("namespace"), "{i}: {w}");
        }
        if let Some(code) = expected {
            assert!(
                warnings.iter().any(|w| w.contains(code)),
                "{i}: {warnings:?}"
            );
        }
        if let Some(code) = absent {
            assert!(
                !warnings.iter().any(|w| w.contains(code)),
                "{i}: {warnings:?}"
            );
        }
    }
}
