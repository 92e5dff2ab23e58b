//! End to end with a real Prometheus (Debian's `prometheus` package): it scrapes
//! `Metrics::encode()` from a tiny HTTP server on loopback and its query API returns what the
//! proxy counted. Skipped, with a message, when `prometheus` is not installed
//! (`scripts/install-test-deps.sh` installs it).
//!
//! A second test scrapes the whole proxy's secure admin listener (`--admin-secure`) over HTTPS
//! with a bearer token that the fake apiserver's TokenReview and SubjectAccessReview accept, as
//! `deploy/prometheus/prometheus.yml` does in a cluster.
//!
//! A third scrapes a proxy under a little load and runs every query of the Grafana dashboard
//! (`deploy/grafana/kube-apf-proxy.json`) and of the alerts (`deploy/prometheus/alerts.yaml`)
//! through Prometheus' query API.
//!
//! These are the tests that wait on wall-clock time: Prometheus is an external process that
//! scrapes on its own clock. The wait is bounded (polls every 500 ms, at most 60 s).

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_apf_proxy::metrics::{Metrics, RejectReason};
use tokio::net::TcpListener;
use tokio::time::Instant;

mod support;

const POLL_EVERY: Duration = Duration::from_millis(500);
const POLL_FOR: Duration = Duration::from_secs(60);

/// A child process killed (and reaped) on drop.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn prometheus_installed() -> bool {
    Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A port free at the time of asking (Prometheus needs a number on its command line).
fn free_port() -> u16 {
    let listener = StdTcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Serves `metrics.encode()` at every path on 127.0.0.1:0.
async fn serve_metrics(metrics: Arc<Metrics>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let metrics = Arc::clone(&metrics);
            tokio::spawn(async move {
                let service = service_fn(move |_req: Request<Incoming>| {
                    let body = metrics.encode();
                    async move {
                        let response = Response::builder()
                            .header(header::CONTENT_TYPE, Metrics::content_type())
                            .body(Full::new(Bytes::from(body)))
                            .expect("valid response");
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// One plain-HTTP scrape job of `target`.
fn scrape_config(target: SocketAddr) -> String {
    format!("  - job_name: apf-proxy\n    static_configs:\n      - targets: ['{target}']\n")
}

/// `prometheus.yml` scraping every second with the given `scrape_configs` entries.
fn write_config(dir: &Path, scrape_configs: &str) -> std::path::PathBuf {
    let path = dir.join("prometheus.yml");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n{scrape_configs}"
    );
    std::fs::write(&path, config).expect("write prometheus.yml");
    path
}

/// A Prometheus server on a loopback port, killed on drop.
struct Prometheus {
    listen: SocketAddr,
    log: std::path::PathBuf,
    child: KillOnDrop,
}

impl Prometheus {
    fn start(dir: &Path, config: &Path) -> Self {
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log_path = dir.join("prometheus.log");
        let log = std::fs::File::create(&log_path).expect("log file");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--web.listen-address={listen}"))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn prometheus");
        Prometheus {
            listen,
            log: log_path,
            child: KillOnDrop(child),
        }
    }

    /// The first sample of `promql`, polled until one is there (bounded by [`POLL_FOR`]).
    async fn first_sample(&mut self, promql: &str) -> String {
        let deadline = Instant::now() + POLL_FOR;
        loop {
            if let Some(value) = query(self.listen, promql).await {
                return value;
            }
            let exited = self.child.0.try_wait().expect("try_wait");
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            assert!(exited.is_none(), "prometheus exited ({exited:?}):\n{log}");
            assert!(
                Instant::now() < deadline,
                "no sample of {promql} within {POLL_FOR:?}:\n{log}"
            );
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
}

/// The answer of an instant query (Prometheus' JSON), if Prometheus answered.
async fn api_query(prometheus: SocketAddr, promql: &str) -> Option<serde_json::Value> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let encoded: String = promql
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let uri = format!("http://{prometheus}/api/v1/query?query={encoded}");
    let response = client.get(uri.parse().ok()?).await.ok()?;
    let body = response.into_body().collect().await.ok()?.to_bytes();
    serde_json::from_slice(&body).ok()
}

/// The value of the first sample of an instant query, if any.
async fn query(prometheus: SocketAddr, promql: &str) -> Option<String> {
    let json = api_query(prometheus, promql).await?;
    let value = json.pointer("/data/result/0/value/1")?;
    value.as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_flowcontrol_metrics() {
    if !prometheus_installed() {
        eprintln!(
            "SKIPPED: `prometheus` is not installed (run scripts/install-test-deps.sh as root)"
        );
        return;
    }
    let metrics = Metrics::new();
    for _ in 0..3 {
        metrics.inc_rejected("workload-low", "service-accounts", RejectReason::QueueFull);
    }
    let gauges = metrics.priority_level_gauges(Instant::now(), "workload-low");
    gauges.seats_executing.add(Instant::now(), 1.0);
    let target = serve_metrics(Arc::clone(&metrics)).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &scrape_config(target));
    let mut prometheus = Prometheus::start(dir.path(), &config);
    let listen = prometheus.listen;
    let value = prometheus
        .first_sample("sum(apiserver_flowcontrol_rejected_requests_total)")
        .await;
    assert_eq!(value, "3");

    // The hand-written timing-ratio histogram parses too: its count (nanoseconds observed) grows.
    let count = query(
        listen,
        "apiserver_flowcontrol_priority_level_seat_utilization_count{priority_level=\"workload-low\",phase=\"executing\"}",
    )
    .await
    .expect("timing-ratio histogram scraped");
    assert!(count.parse::<f64>().expect("number") > 0.0, "{count}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_secure_admin_listener_with_a_bearer_token() {
    use std::collections::{BTreeMap, HashMap};
    use support::app::AppBuilder;
    use support::fake_apiserver::{FakeApiserver, FakeOptions, ReviewedUser};

    if !prometheus_installed() {
        eprintln!(
            "SKIPPED: `prometheus` is not installed (run scripts/install-test-deps.sh as root)"
        );
        return;
    }
    // The fake's TokenReview knows the scraper's token; its SubjectAccessReview allows the group
    // system:monitoring (as the ClusterRole in deploy/ does).
    let scraper = ReviewedUser {
        username: "system:serviceaccount:monitoring:prometheus".into(),
        uid: "sa-uid".into(),
        groups: vec!["system:monitoring".into()],
        extra: BTreeMap::new(),
    };
    let upstream = FakeApiserver::start(FakeOptions {
        tokens: HashMap::from([("scraper-token".to_string(), scraper)]),
        ..FakeOptions::default()
    })
    .await;
    let app = AppBuilder::new(&upstream.url)
        .flag("--authentication-token-webhook")
        .flag("--admin-secure")
        .start()
        .await;

    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("proxy-ca.crt");
    std::fs::write(&ca, app.serving_cert_pem()).expect("write CA");
    let token = dir.path().join("token");
    std::fs::write(&token, "scraper-token").expect("write token");
    let job = format!(
        "  - job_name: apf-proxy-secure\n    scheme: https\n    authorization:\n      \
         credentials_file: {}\n    tls_config:\n      ca_file: {}\n      \
         server_name: localhost\n    static_configs:\n      - targets: ['{}']\n",
        token.display(),
        ca.display(),
        app.app.running().admin_addr()
    );
    let config = write_config(dir.path(), &job);
    let mut prometheus = Prometheus::start(dir.path(), &config);
    let value = prometheus
        .first_sample(
            r#"sum(apiserver_flowcontrol_nominal_limit_seats{priority_level="global-default"})"#,
        )
        .await;
    // ceil(600 × 20 / 245): global-default's shares of the bootstrap total at 400 + 200 seats.
    assert_eq!(value, "49");
    let up = prometheus
        .first_sample(r#"up{job="apf-proxy-secure"}"#)
        .await;
    assert_eq!(up, "1");
    assert!(
        !upstream.access_reviews().is_empty(),
        "the scrape was authorized by SubjectAccessReview"
    );
}

/// One priority level with one seat and a queue of one, for every request: a held seat, a
/// queued request and a rejection are easy to make.
const DASHBOARD_LEVELS: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: tiny, uid: tiny-pl-uid}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    limitResponse:
      type: Queue
      queuing: {queues: 1, handSize: 1, queueLengthLimit: 1}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: tenants, uid: tenants-fs-uid}
spec:
  priorityLevelConfiguration: {name: tiny}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - {kind: Group, group: {name: system:authenticated}}
    - {kind: Group, group: {name: system:unauthenticated}}
    resourceRules:
    - {verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}
    nonResourceRules:
    - {verbs: ['*'], nonResourceURLs: ['*']}
"#;

/// The dashboard's variables as Grafana fills them in, for a query sent to Prometheus itself.
fn expand_dashboard_variables(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$job", "kube-apf-proxy")
        .replace("$instance", ".*")
}

/// Every PromQL expression of the dashboard: (panel title, expression).
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().expect("title").to_owned();
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr");
            queries.push((title.clone(), expand_dashboard_variables(expr)));
        }
    }
    queries
}

/// An instant query's status and number of series, with the answer for messages; `None` when
/// Prometheus did not answer.
async fn query_series(prometheus: SocketAddr, promql: &str) -> Option<(String, usize, String)> {
    let json = api_query(prometheus, promql).await?;
    let status = json["status"].as_str()?.to_owned();
    let series = json
        .pointer("/data/result")
        .and_then(|r| r.as_array())
        .map_or(0, Vec::len);
    Some((status, series, json.to_string()))
}

/// The dashboard's queries, variables filled in.
fn dashboard_from_file() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/kube-apf-proxy.json");
    let text = std::fs::read_to_string(path).expect("dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 10, "{queries:?}");
    for (title, expr) in &queries {
        assert!(!expr.contains('$'), "{title}: a variable left in {expr}");
    }
    queries
}

/// A proxy over `fake` with one seat for everything, requests that time out after 4 s (so
/// /hang ends as an upstream timeout) and wait at most a quarter of that in their queue,
/// impersonation, and a token file with `alice` and `mallory<DEL>` (whose identity cannot be
/// forwarded). Replica coordination is on, with the fake as its Lease store: the fake has no
/// Leases (404), so the replica serves alone in fall-back with its one seat (a fall-back share is
/// never below 1) and publishes the coordination gauges the "Replicas and shares" panel shows.
async fn dashboard_app(fake: &support::fake_apiserver::FakeApiserver) -> support::app::TestApp {
    support::app::AppBuilder::new(&fake.url)
        .config(DASHBOARD_LEVELS)
        .flag("--max-requests-inflight=1")
        .flag("--max-mutating-requests-inflight=0")
        .flag("--request-timeout=4s")
        .flag("--identity-forwarding=impersonate")
        .flag("--coordination-namespace=kube-apf-proxy")
        .flag("--coordination-lease-duration=3s")
        .upstream_token("proxy-token")
        .token_file_with("alice-token,alice,alice-uid,\"dev\"\nmallory-token,mallory\u{7f},,\n")
        .start()
        .await
}

/// `GET path` as alice on a connection of its own, without a deadline; its status.
fn spawn_get(
    app: &support::app::TestApp,
    path: &'static str,
) -> tokio::task::JoinHandle<http::StatusCode> {
    let client = app.client();
    tokio::spawn(async move {
        let mut conn = client.connect().await;
        let get = support::app::request("GET", path, Some("alice-token"), Bytes::new());
        conn.send_unbounded(get).await.status()
    })
}

/// A little load through [`dashboard_app`]: /hang holds the one seat until the upstream times
/// out (504); one request queues behind it; the next finds the queue full (429); mallory is
/// refused (401); alice's lists are answered.
async fn dashboard_load(app: &support::app::TestApp) {
    use http::StatusCode;
    let hang = spawn_get(app, "/hang");
    app.wait_level("tiny", "/hang holds the seat", |s| s.executing == 1)
        .await;
    let queued = spawn_get(app, "/api/v1/namespaces/ns/pods/queued");
    app.wait_level("tiny", "a request waits", |s| s.waiting == 1)
        .await;
    let client = app.client();
    let rejected = client
        .get("/api/v1/namespaces/ns/pods/x", Some("alice-token"))
        .await;
    assert_eq!(rejected.status(), StatusCode::TOO_MANY_REQUESTS);
    let queued = queued.await.expect("join");
    assert!(
        queued == StatusCode::TOO_MANY_REQUESTS || queued == StatusCode::GATEWAY_TIMEOUT,
        "the queued request times out in its queue (429) or behind /hang: {queued}"
    );
    assert_eq!(hang.await.expect("join"), StatusCode::GATEWAY_TIMEOUT);
    let refused = client
        .get("/api/v1/namespaces/ns/pods", Some("mallory-token"))
        .await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    for _ in 0..5 {
        let ok = client
            .get("/api/v1/namespaces/ns/pods", Some("alice-token"))
            .await;
        assert_eq!(ok.status(), StatusCode::OK);
    }
}

/// Polls each query until it has a series (rates need two scrapes after the load); a query
/// Prometheus refuses fails at once.
async fn assert_every_query_has_series(prometheus: SocketAddr, queries: &[(String, String)]) {
    let deadline = Instant::now() + POLL_FOR;
    for (title, expr) in queries {
        loop {
            let answer = query_series(prometheus, expr).await;
            if let Some((status, _, body)) = &answer {
                assert_eq!(status, "success", "panel {title:?}: {expr}\n{body}");
            }
            if answer.as_ref().is_some_and(|(_, series, _)| *series > 0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "panel {title:?}: no series for {expr} within {POLL_FOR:?}: {answer:?}"
            );
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
}

/// Every alert's expression parses and evaluates (whether it fires is promtool's test, in
/// deploy_manifests).
async fn assert_alerts_evaluate(prometheus: SocketAddr) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/alerts.yaml");
    let text = std::fs::read_to_string(path).expect("alerts");
    let alerts: serde_yaml::Value = serde_yaml::from_str(&text).expect("alerts YAML");
    for group in alerts["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let expr = rule["expr"].as_str().expect("expr");
            let answer = query_series(prometheus, expr).await;
            let (status, _, body) = answer.expect("Prometheus answers");
            assert_eq!(status, "success", "{:?}: {expr}\n{body}", rule["alert"]);
        }
    }
}

/// deploy/grafana/kube-apf-proxy.json against a real Prometheus scraping a real proxy under
/// [`dashboard_load`] (a held seat, a queued request, a 429, an upstream timeout, an identity
/// refusal, answered requests): every panel's query is valid PromQL and returns at least one
/// series. The alerts of deploy/prometheus/alerts.yaml evaluate against the same series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_panel_returns_series_from_a_proxy_under_load() {
    if !prometheus_installed() {
        eprintln!(
            "SKIPPED: `prometheus` is not installed (run scripts/install-test-deps.sh as root)"
        );
        return;
    }
    let queries = dashboard_from_file();
    let fake = support::fake_apiserver::FakeApiserver::start_plain().await;
    let app = dashboard_app(&fake).await;
    // The job name of deploy/prometheus/prometheus.yml and of the chart's ServiceMonitor.
    let dir = tempfile::tempdir().expect("tempdir");
    let job = format!(
        "  - job_name: kube-apf-proxy\n    static_configs:\n      - targets: ['{}']\n",
        app.app.running().admin_addr()
    );
    let config = write_config(dir.path(), &job);
    let mut prometheus = Prometheus::start(dir.path(), &config);
    prometheus.first_sample(r#"up{job="kube-apf-proxy"}"#).await;

    dashboard_load(&app).await;
    assert_every_query_has_series(prometheus.listen, &queries).await;
    // The coordination series come from a replica in fall-back (no Leases in the fake), the
    // state KubeApfProxyCoordinationStale is about.
    prometheus
        .first_sample(r#"apf_proxy_coordination_fallback{job="kube-apf-proxy"} == 1"#)
        .await;
    assert_alerts_evaluate(prometheus.listen).await;
}
