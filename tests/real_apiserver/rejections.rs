//! Suite item 6: a 429 from the proxy as kubectl shows it, beside the apiserver's own 429 for the
//! same configuration; and the APF response headers of the apiserver and of the proxy on one
//! forwarded response.
//!
//! Both enforce the same two objects: FlowSchema `rt-rita` sends user `rita` to priority level
//! `rt-reject` (Reject, no borrowing). A seat is held by a create whose body is still arriving (the
//! apiserver reads the body after flow control admitted the request), so the next request of
//! rita's is rejected at once.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use tokio::task::JoinHandle;

use crate::kubectl_modes::dev_namespace;
use crate::support::app::{metric_sum, TestApp, TestClient};
use crate::support::kube_apiserver::{kubectl, KubeApiserver};
use crate::support::pki::Issued;
use crate::support::{channel_body, read_body};
use crate::{both, Cred, Front};

const NS: &str = "rt-rejections";
/// One request (`kubectl get --raw`): kubectl retries each 429 up to ten times, and its discovery
/// requests would be rejected and retried too.
const RITA_LIST: &str = "/api/v1/namespaces/rt-rejections/configmaps";

const RITA_CONFIG: &str = r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: rt-reject}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: rt-rita}
spec:
  priorityLevelConfiguration: {name: rt-reject}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: User, user: {name: rita}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"]}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
"#;

/// A create of ConfigMap `name` whose body is held back until the returned sender sends the rest.
fn held_create(
    client: &TestClient,
    name: &str,
) -> (tokio::sync::mpsc::Sender<Bytes>, JoinHandle<StatusCode>) {
    let (sender, body) = channel_body();
    let request = Request::post(format!("/api/v1/namespaces/{NS}/configmaps"))
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(body)
        .expect("request");
    let client = client.clone();
    let task = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let response = client
            .try_send(request)
            .await
            .expect("held create answered");
        let status = response.status();
        let _ = read_body(response).await;
        eprintln!("held create: {status} after {:?}", started.elapsed());
        status
    });
    let head = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"#);
    let sender_head = sender.clone();
    tokio::spawn(async move {
        let _ = sender_head.send(Bytes::from(head)).await;
    });
    (sender, task)
}

async fn release(held: Vec<(tokio::sync::mpsc::Sender<Bytes>, JoinHandle<StatusCode>)>) {
    for (sender, task) in held {
        sender
            .send(Bytes::from_static(br#""data":{"k":"v"}}"#))
            .await
            .expect("send the rest");
        drop(sender);
        let status = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the held create finishes")
            .expect("join");
        assert_eq!(status, StatusCode::CREATED);
    }
}

/// The apiserver's own metric line value, read as admin.
async fn apiserver_metric(api: &KubeApiserver, prefix: &str) -> f64 {
    let text = api.admin_ok(&["get", "--raw", "/metrics"], None).await;
    metric_sum(&text, prefix)
}

/// kubectl as `cred` against `server` (trusting `ca`), expecting failure; its stderr.
async fn kubectl_fails(server: &str, ca: &std::path::Path, cred: &Cred, args: &[&str]) -> String {
    let mut all = vec![
        format!("--server={server}"),
        format!("--certificate-authority={}", ca.display()),
    ];
    if let Cred::Cert(cert, key) = cred {
        all.push(format!("--client-certificate={}", cert.display()));
        all.push(format!("--client-key={}", key.display()));
    }
    all.extend(args.iter().map(ToString::to_string));
    let out = kubectl(all, None).await;
    assert!(
        !out.status.success(),
        "kubectl {args:?} should fail: {}",
        both(&out)
    );
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

fn header_values(response: &http::Response<hyper::body::Incoming>, name: &str) -> Vec<String> {
    response
        .headers()
        .get_all(name)
        .iter()
        .map(|v| v.to_str().expect("ascii").to_string())
        .collect()
}

async fn wait_executing(app: &TestApp, level: &str, want: u32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while u64::from(app.level(level).executing) != u64::from(want) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "level {level}: {:?}",
            app.level(level)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_reads_in_kubectl_as_the_apiservers_and_both_apf_headers_reach_the_client() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let _serial = crate::FLOWCONTROL.lock().await;
    dev_namespace(api, NS).await;
    api.admin_ok(&["apply", "-f", "-"], Some(RITA_CONFIG)).await;
    // The proxy runs the same objects, with the UIDs the apiserver gave them.
    let objects = api
        .admin_ok(
            &[
                "get",
                "flowschema/rt-rita",
                "prioritylevelconfiguration/rt-reject",
                "-o",
                "yaml",
            ],
            None,
        )
        .await;
    let fs_uid = api
        .admin_ok(
            &[
                "get",
                "flowschema/rt-rita",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            None,
        )
        .await;
    let pl_uid = api
        .admin_ok(
            &[
                "get",
                "prioritylevelconfiguration/rt-reject",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            None,
        )
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("flowcontrol");
    std::fs::create_dir_all(&config_dir).expect("config dir");
    std::fs::write(config_dir.join("rita.yaml"), &objects).expect("write config");

    let front = Front::start(
        api,
        &[
            "--identity-forwarding=requestheader".to_string(),
            format!(
                "--upstream-client-cert-file={}",
                api.path("front-proxy-client.crt").display()
            ),
            format!(
                "--upstream-client-key-file={}",
                api.path("front-proxy-client.key").display()
            ),
            format!("--config-dir={}", config_dir.display()),
            // One seat for rt-reject in the proxy.
            "--max-requests-inflight=1".to_string(),
            "--max-mutating-requests-inflight=0".to_string(),
        ],
    )
    .await;
    let (cert, key) = api.client_cert(dir.path(), "rita", "rita", &["dev"]);
    let rita = Issued::from_files(&cert, &key);
    let cred = Cred::Cert(cert.clone(), key.clone());
    let through_proxy = front.app.client_with(Some(&rita), http::Version::HTTP_11);

    // One forwarded response: the apiserver's APF headers and the proxy's, naming the same
    // objects since both run the same configuration.
    let response = through_proxy
        .get(&format!("/api/v1/namespaces/{NS}/configmaps"), None)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let flow_schemas = header_values(&response, "x-kubernetes-pf-flowschema-uid");
    let levels = header_values(&response, "x-kubernetes-pf-prioritylevel-uid");
    assert_eq!(
        (flow_schemas, levels),
        (
            vec![fs_uid.clone(), fs_uid.clone()],
            vec![pl_uid.clone(), pl_uid.clone()]
        ),
        "the proxy's value first, then the apiserver's"
    );
    // That response's seat is free once its body has gone out: only then may the held create
    // take the level's one seat (else the create itself is the one refused).
    let _ = read_body(response).await;
    wait_executing(&front.app, "rt-reject", 0).await;

    // The proxy's 429, as kubectl shows it.
    let held = held_create(&through_proxy, "held-by-proxy");
    wait_executing(&front.app, "rt-reject", 1).await;
    let rejected = through_proxy
        .get(&format!("/api/v1/namespaces/{NS}/configmaps"), None)
        .await;
    assert_eq!(rejected.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(rejected.headers().contains_key("retry-after"));
    assert_eq!(
        header_values(&rejected, "x-kubernetes-pf-flowschema-uid"),
        vec![fs_uid.clone()]
    );
    eprintln!(
        "proxy 429 Retry-After: {:?}",
        rejected.headers().get("retry-after")
    );
    let started = tokio::time::Instant::now();
    let proxy_says = kubectl_fails(
        &front.app.url(),
        &front.ca,
        &cred,
        &["get", "--raw", RITA_LIST],
    )
    .await;
    eprintln!("kubectl through the proxy took {:?}", started.elapsed());
    release(vec![held]).await;

    // The apiserver's own 429 for the same request: hold every seat of rt-reject there.
    let seats = apiserver_metric(
        api,
        r#"apiserver_flowcontrol_nominal_limit_seats{priority_level="rt-reject"}"#,
    )
    .await as u32;
    assert!(seats >= 1, "rt-reject has seats in the apiserver");
    let addr: SocketAddr = api
        .server
        .trim_start_matches("https://")
        .parse()
        .expect("server address");
    let ca = std::fs::read_to_string(api.path("ca.crt")).expect("ca.crt");
    let direct = TestClient::to_server(addr, &ca, Some(&rita));
    let held: Vec<_> = (0..seats)
        .map(|n| held_create(&direct, &format!("held-by-apiserver-{n}")))
        .collect();
    let executing = r#"apiserver_flowcontrol_current_executing_seats{flow_schema="rt-rita",priority_level="rt-reject"}"#;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while apiserver_metric(api, executing).await < f64::from(seats) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the apiserver's seats are held"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let apiserver_says = kubectl_fails(
        &api.server,
        &api.path("ca.crt"),
        &cred,
        &["get", "--raw", RITA_LIST],
    )
    .await;
    release(held).await;

    eprintln!("kubectl, 429 from the proxy:     {proxy_says}");
    eprintln!("kubectl, 429 from the apiserver: {apiserver_says}");
    assert!(
        proxy_says.contains("Error from server (TooManyRequests)"),
        "{proxy_says}"
    );
    assert!(
        apiserver_says.contains("Error from server (TooManyRequests)"),
        "{apiserver_says}"
    );
    // The apiserver's APF rejection is a text/plain body (`http.Error(w, "Too many requests,
    // please try again later.", 429)` in priority-and-fairness.go), for which client-go prints
    // its generic sentence; the proxy answers with a `Status` (DESIGN.md: every response it
    // writes itself is one) whose message is that sentence, so kubectl prints the same line.
    assert_eq!(
        apiserver_says,
        "Error from server (TooManyRequests): the server has received too many requests and has asked us to try again later"
    );
    assert_eq!(proxy_says, apiserver_says);
}
