//! The operations side of a running proxy, in process: metrics after traffic, the APF debug
//! dumps, readiness, hot reload of the configuration and the serving certificate, and graceful
//! shutdown with requests queued and a watch open. Real sockets on 127.0.0.1:0, a fake apiserver
//! behind the proxy, every wait bounded.

#[path = "../support/mod.rs"]
mod support;

mod binary;
mod dumps;
mod lifecycle;
mod metrics;
mod reload;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kube_apf_proxy::app::App;
use kube_apf_proxy::cli::ServeOptions;
use rustls_pki_types::{CertificateDer, ServerName};
use support::fake_apiserver::FakeApiserver;
use support::pki::TestCa;
use support::TestBody;
use tempfile::TempDir;
use tokio::task::JoinHandle;

/// Upper bound for anything that should happen promptly; never reached when the code is right.
const PROMPTLY: Duration = Duration::from_secs(10);

/// A level `tight` with one seat and one queue of `queue_length_limit`, which every anonymous
/// request (the tests send no credentials) is classified into by the FlowSchema `tight-fs`.
fn tight_config(queue_length_limit: u32) -> String {
    format!(
        r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: tight
  uid: tight-uid
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    limitResponse:
      type: Queue
      queuing:
        queues: 1
        handSize: 1
        queueLengthLimit: {queue_length_limit}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: tight-fs
  uid: tight-fs-uid
spec:
  priorityLevelConfiguration:
    name: tight
  matchingPrecedence: 100
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: Group
      group:
        name: system:unauthenticated
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      namespaces: ["*"]
      clusterScope: true
    nonResourceRules:
    - verbs: ["*"]
      nonResourceURLs: ["*"]
"#
    )
}

/// A proxy in front of a fake apiserver, with its configuration directory and serving
/// certificate in a temporary directory.
struct World {
    fake: Arc<FakeApiserver>,
    app: Option<App>,
    dir: TempDir,
    ca: TestCa,
    secure: SocketAddr,
    admin: SocketAddr,
}

impl World {
    /// Server concurrency limit 6: `tight` gets 1 seat, `catch-all` (5 shares) 5.
    async fn start(queue_length_limit: u32, extra: &[&str]) -> World {
        let fake = Arc::new(FakeApiserver::start_plain().await);
        let dir = tempfile::tempdir().expect("tempdir");
        let config_dir = dir.path().join("config");
        std::fs::create_dir(&config_dir).expect("config dir");
        write(
            &config_dir.join("tight.yaml"),
            &tight_config(queue_length_limit),
        );
        let ca = TestCa::new("ops-ca");
        let (cert, key) = ca.server_cert().write(dir.path(), "serving");
        let mut args = vec![
            format!("--upstream={}", fake.url),
            "--bind-address=127.0.0.1".to_owned(),
            "--secure-port=0".to_owned(),
            "--admin-address=127.0.0.1:0".to_owned(),
            format!("--config-dir={}", config_dir.display()),
            format!("--tls-cert-file={}", cert.display()),
            format!("--tls-private-key-file={}", key.display()),
            "--max-requests-inflight=5".to_owned(),
            "--max-mutating-requests-inflight=1".to_owned(),
        ];
        if extra.iter().any(|a| a.starts_with("--upstream=")) {
            args.remove(0);
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        let opts = ServeOptions::try_parse_from(&args).expect("serve flags");
        let config = kube_apf_proxy::config::load_dir(&config_dir)
            .expect("test configuration")
            .config;
        let app = App::start(opts.config(), &config)
            .await
            .expect("app starts");
        let (secure, admin) = (app.running().secure_addr(), app.running().admin_addr());
        World {
            fake,
            app: Some(app),
            dir,
            ca,
            secure,
            admin,
        }
    }

    fn app(&self) -> &App {
        self.app.as_ref().expect("the app is running")
    }

    fn config_dir(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    /// Sends `path` over a new TLS connection to the secure port; also returns the serving
    /// certificate the handshake presented.
    async fn request(&self, path: &str) -> (Response<Incoming>, CertificateDer<'static>) {
        tls_get(self.secure, &self.ca, path, None).await
    }

    /// Sends `path` in the background and returns its status and body.
    fn spawn_get(self: &Arc<Self>, path: &str) -> JoinHandle<(StatusCode, String)> {
        let world = Arc::clone(self);
        let path = path.to_owned();
        tokio::spawn(async move {
            let (response, _) = world.request(&path).await;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        })
    }

    /// GETs an admin path; its status and body.
    async fn admin(&self, path: &str) -> (StatusCode, String) {
        let client = support::http1_client();
        let request: Request<TestBody> = Request::get(format!("http://{}{path}", self.admin))
            .body(support::body(Bytes::new()))
            .expect("request");
        let response = client.request(request).await.expect("admin answers");
        let status = response.status();
        let body = support::read_body(response).await.expect("admin body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// The level `tight`'s (waiting, executing) counts.
    fn tight(&self) -> (u32, u32) {
        let snapshot = self.app().proxy().flow_control().snapshot();
        let stats = snapshot
            .level("tight")
            .expect("tight level")
            .queues()
            .stats();
        (stats.waiting, stats.executing)
    }

    /// Waits until `tight` holds `waiting` waiting and `executing` executing requests.
    async fn until_tight(&self, waiting: u32, executing: u32) {
        until(|| self.tight() == (waiting, executing)).await;
    }

    /// Releases `/hang` requests until `count` of them have reached the fake and been let go.
    async fn release_hanging(&self, count: usize) {
        until(|| {
            self.fake.release_hanging();
            self.fake
                .requests()
                .iter()
                .filter(|r| r.path == "/hang")
                .count()
                >= count
        })
        .await;
        // Whoever arrived last may have missed the notification; one more after a pause.
        for _ in 0..20 {
            self.fake.release_hanging();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// GETs `path` over a new TLS connection to `addr` trusting `ca`, with `token` as a bearer
/// token if given; also returns the serving certificate the handshake presented.
async fn tls_get(
    addr: SocketAddr,
    ca: &TestCa,
    path: &str,
    token: Option<&str>,
) -> (Response<Incoming>, CertificateDer<'static>) {
    tls_send(addr, ca, http::Method::GET, path, token).await
}

/// [`tls_get`] with any method (and an empty JSON object as the body).
async fn tls_send(
    addr: SocketAddr,
    ca: &TestCa,
    method: http::Method,
    path: &str,
    token: Option<&str>,
) -> (Response<Incoming>, CertificateDer<'static>) {
    let config = support::pki::client_config(ca, None, &[b"http/1.1"]);
    send_with(config, addr, method, path, token).await
}

/// One request over a new HTTP/1.1 connection made with `config`; also returns the certificate
/// the server presented.
async fn send_with(
    config: rustls::ClientConfig,
    addr: SocketAddr,
    method: http::Method,
    path: &str,
    token: Option<&str>,
) -> (Response<Incoming>, CertificateDer<'static>) {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("127.0.0.1").expect("server name");
    let tls = connector.connect(name, tcp).await.expect("handshake");
    let served = tls.get_ref().1.peer_certificates().expect("server cert")[0].clone();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http1 handshake");
    tokio::spawn(conn);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request.body(support::body(Bytes::new())).expect("request");
    let response = sender.send_request(request).await.expect("response");
    (response, served)
}

/// Polls `condition` until it holds (at most [`PROMPTLY`]).
async fn until(mut condition: impl FnMut() -> bool) {
    tokio::time::timeout(PROMPTLY, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("condition reached promptly");
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}

/// The value of the sample of family `name` whose labels include every pair of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A dump's lines with every run of spaces collapsed, so rows compare as `a, b, c`.
fn rows(dump: &str) -> Vec<String> {
    dump.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}
