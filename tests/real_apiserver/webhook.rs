//! Suite item 4: the admission webhook registered in the real apiserver from `deploy/webhook/`
//! (the Service reference swapped for a loopback URL, caBundle filled in): a configuration
//! ConfigMap the proxy would refuse is denied with our message, a risky FlowSchema is admitted
//! with our warnings printed by kubectl, and the apiserver's own controller still maintains the
//! mandatory objects through it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;

use crate::support::app::TestClient;
use crate::support::kube_apiserver::KubeApiserver;
use crate::support::pki::TestCa;
use crate::{both, FLOWCONTROL};

const CONFIGMAP: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: rt-webhook-flowcontrol
  namespace: kube-system
  labels: {kube-apf-proxy.io/flowcontrol-config: "true"}
data:
  levels.yaml: |
    apiVersion: flowcontrol.apiserver.k8s.io/v1
    kind: PriorityLevelConfiguration
    metadata: {name: rt-wide}
    spec:
      type: Limited
      limited:
        nominalConcurrencyShares: 10
        limitResponse:
          type: Queue
          queuing: {queues: 64, handSize: 65, queueLengthLimit: 50}
"#;

const RISKY: &str = r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: rt-everyone-exempt}
spec:
  priorityLevelConfiguration: {name: exempt}
  matchingPrecedence: 9500
  rules:
  - subjects: [{kind: Group, group: {name: system:authenticated}}]
    nonResourceRules: [{verbs: ["get"], nonResourceURLs: ["/rt-webhook-only"]}]
"#;

struct Webhook(Child);

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// `deploy/webhook/validatingwebhook.yaml` pointing at `url` with `ca_pem` as its caBundle.
fn registration(url: &str, ca_pem: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/webhook/validatingwebhook.yaml");
    let text = std::fs::read_to_string(&path).expect("validatingwebhook.yaml");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    if let Some(annotations) = doc["metadata"].as_mapping_mut() {
        annotations.remove("annotations");
    }
    for webhook in doc["webhooks"]
        .as_sequence_mut()
        .expect("webhooks")
        .iter_mut()
    {
        let path = webhook["clientConfig"]["service"]["path"]
            .as_str()
            .expect("service path")
            .to_string();
        webhook["clientConfig"] =
            serde_yaml::from_str(&format!("{{url: \"{url}{path}\", caBundle: \"{bundle}\"}}"))
                .expect("clientConfig");
    }
    serde_yaml::to_string(&doc).expect("yaml out")
}

async fn until_output<F, Fut>(what: &str, limit: Duration, mut check: F) -> String
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<String>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(out) = check().await {
            return out;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_registered_in_the_apiserver_denies_warns_and_lets_the_controller_work() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    // While registered, the webhook judges every other test's flow-control objects too.
    let _serial = FLOWCONTROL.lock().await;
    let ca = TestCa::new("webhook-ca");
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = ca.server_cert().write(dir.path(), "webhook");
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .arg("webhook")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .arg(format!("--tls-cert-file={}", cert.display()))
        .arg(format!("--tls-private-key-file={}", key.display()))
        .arg(format!(
            "--config-dir={}",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("config")
                .display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kube-apf-proxy webhook runs");
    let _webhook = Webhook(child);
    let client = TestClient::to_server(
        format!("127.0.0.1:{port}").parse().expect("addr"),
        &ca.cert_pem(),
        None,
    );
    until_output(
        "the webhook answers /healthz",
        Duration::from_secs(20),
        || {
            let client = client.clone();
            async move {
                match client.try_get("/healthz").await {
                    Ok(status) if status.is_success() => Some(String::new()),
                    _ => None,
                }
            }
        },
    )
    .await;

    let url = format!("https://127.0.0.1:{port}");
    api.admin_ok(
        &["apply", "-f", "-"],
        Some(&registration(&url, &ca.cert_pem())),
    )
    .await;

    // The ConfigMap webhook (failurePolicy Fail): our message, once the apiserver has picked up
    // the registration.
    let denied = until_output(
        "the apiserver calls the webhook for the ConfigMap",
        Duration::from_secs(30),
        || async {
            let out = api
                .admin_kubectl(&["apply", "-f", "-"], Some(CONFIGMAP))
                .await;
            if out.status.success() {
                let _ = api
                    .admin_kubectl(
                        &[
                            "-n",
                            "kube-system",
                            "delete",
                            "configmap",
                            "rt-webhook-flowcontrol",
                        ],
                        None,
                    )
                    .await;
                return None;
            }
            Some(both(&out))
        },
    )
    .await;
    // Our Status (422 Invalid with one cause per problem) is what kubectl prints, as it prints
    // the apiserver's own validation errors.
    assert!(
        denied.contains(
            r#"The ConfigMap "rt-webhook-flowcontrol" is invalid: data[levels.yaml]: PriorityLevelConfiguration/rt-wide: spec.limited.limitResponse.queuing.handSize: Invalid value: 65: should not be greater than queues (64)"#
        ),
        "{denied}"
    );

    // A risky FlowSchema (system:authenticated to exempt, on one path nobody uses): admitted,
    // kubectl prints our warning.
    {
        let out = api.admin_kubectl(&["apply", "-f", "-"], Some(RISKY)).await;
        let text = both(&out);
        let _ = api
            .admin_kubectl(&["delete", "flowschema", "rt-everyone-exempt"], None)
            .await;
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains("Warning: [broad-subject-privileged-level]"),
            "kubectl prints our warning: {text}"
        );
    }

    // The apiserver's own controller still maintains the mandatory objects with the webhook in
    // place: it creates the catch-all FlowSchema again after a delete (it checks once a minute),
    // a CREATE the webhook judges and must allow.
    let uid_of = |out: String| out.trim().to_string();
    let before = uid_of(
        api.admin_ok(
            &[
                "get",
                "flowschema",
                "catch-all",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            None,
        )
        .await,
    );
    api.admin_ok(&["delete", "flowschema", "catch-all"], None)
        .await;
    until_output(
        "the apiserver creates the mandatory catch-all FlowSchema again",
        Duration::from_secs(90),
        || async {
            let out = api
                .admin_kubectl(
                    &[
                        "get",
                        "flowschema",
                        "catch-all",
                        "-o",
                        "jsonpath={.metadata.uid}",
                    ],
                    None,
                )
                .await;
            let now = uid_of(String::from_utf8_lossy(&out.stdout).into_owned());
            (out.status.success() && !now.is_empty() && now != before).then_some(now)
        },
    )
    .await;
    let metrics = until_output("webhook metrics", Duration::from_secs(5), || {
        let client = client.clone();
        async move {
            let response = client
                .try_send(crate::support::app::request(
                    "GET",
                    "/metrics",
                    None,
                    bytes::Bytes::new(),
                ))
                .await
                .ok()?;
            let bytes = crate::support::read_body(response).await.ok()?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
    })
    .await;
    let reviews = crate::support::app::metric_sum(&metrics, "apf_proxy_admission_reviews_total{");
    assert!(
        reviews >= 3.0,
        "the webhook judged the apiserver's requests: {metrics}"
    );

    api.admin_ok(
        &["delete", "validatingwebhookconfiguration", "kube-apf-proxy"],
        None,
    )
    .await;
}
