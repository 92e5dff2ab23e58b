//! The whole proxy ([`App`]) started on loopback for end-to-end tests: a builder that writes the
//! PKI, token file and configuration directory into a tempdir and turns them into serve flags,
//! and HTTPS clients that trust the proxy's self-signed certificate (HTTP/1.1 or HTTP/2 by ALPN,
//! with or without a client certificate).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::{Request, Response, Version};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_apf_proxy::app::App;
use kube_apf_proxy::cli::ServeOptions;
use kube_apf_proxy::fairqueue::level_queues::LevelStats;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use super::pki::{Issued, TestCa};
use super::tls_world::TlsWorld;
use super::{body, TestBody};

/// The longest any single step of an end-to-end test may take before the test fails.
pub const STEP: Duration = Duration::from_secs(5);

/// Awaits `future`, failing the test after [`STEP`] with `what`.
pub async fn within<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(STEP, future)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Polls `check` until it holds, failing the test with `what` after [`STEP`].
pub async fn eventually(what: &str, check: impl Fn() -> bool) {
    let wait = async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    within(what, wait).await;
}

/// Static tokens of [`AppBuilder::token_file`]: `token,user,uid,"groups"`.
pub const TOKEN_FILE: &str = "static-token,carol,carol-uid,\"ops,dev\"\n";
/// The token of `carol` in [`TOKEN_FILE`].
pub const STATIC_TOKEN: &str = "static-token";
/// The CN of the front-proxy certificate [`TestApp::front_proxy_cert`] issues.
pub const FRONT_PROXY_CN: &str = "front-proxy";

/// Serve flags and files for one [`TestApp`].
pub struct AppBuilder {
    dir: tempfile::TempDir,
    client_ca: TestCa,
    front_proxy_ca: TestCa,
    flags: Vec<String>,
}

impl AppBuilder {
    /// Loopback listeners on free ports, forwarding to `upstream`.
    pub fn new(upstream: &str) -> Self {
        let flags = vec![
            "--bind-address=127.0.0.1".to_string(),
            "--secure-port=0".to_string(),
            "--admin-address=127.0.0.1:0".to_string(),
            format!("--upstream={upstream}"),
        ];
        AppBuilder {
            dir: tempfile::tempdir().expect("tempdir"),
            client_ca: TestCa::new("client-ca"),
            front_proxy_ca: TestCa::new("front-proxy-ca"),
            flags,
        }
    }

    /// Forwards to the TLS fake of `world` with its CA, client certificate and token.
    pub fn for_world(world: &TlsWorld) -> Self {
        let config = &world.config;
        let mut builder = Self::new(config.upstream.as_deref().expect("world upstream"));
        let files = [
            ("--upstream-ca-file", &config.ca_file),
            ("--upstream-client-cert-file", &config.client_cert_file),
            ("--upstream-client-key-file", &config.client_key_file),
            ("--upstream-token-file", &config.token_file),
        ];
        for (flag, path) in files {
            if let Some(path) = path {
                builder = builder.flag(format!("{flag}={}", path.display()));
            }
        }
        builder
    }

    /// `--upstream-token-file` holding `token` (the proxy's own credential, for impersonation).
    pub fn upstream_token(self, token: &str) -> Self {
        let path = self.dir.path().join("upstream-token");
        std::fs::write(&path, format!("{token}\n")).expect("write upstream token");
        self.flag(format!("--upstream-token-file={}", path.display()))
    }

    /// Adds a raw flag.
    pub fn flag(mut self, flag: impl Into<String>) -> Self {
        self.flags.push(flag.into());
        self
    }

    /// `--client-ca-file` with the builder's client CA.
    pub fn client_ca(self) -> Self {
        let path = self.client_ca.write(self.dir.path(), "client-ca.crt");
        self.flag(format!("--client-ca-file={}", path.display()))
    }

    /// `--token-auth-file` with [`TOKEN_FILE`].
    pub fn token_file(self) -> Self {
        let path = self.dir.path().join("tokens.csv");
        std::fs::write(&path, TOKEN_FILE).expect("write token file");
        self.flag(format!("--token-auth-file={}", path.display()))
    }

    /// `--token-auth-file` with `contents` (CSV: `token,user,uid,"groups"`).
    pub fn token_file_with(self, contents: &str) -> Self {
        let path = self.dir.path().join("tokens.csv");
        std::fs::write(&path, contents).expect("write token file");
        self.flag(format!("--token-auth-file={}", path.display()))
    }

    /// Front-proxy authentication: the front-proxy CA, CN [`FRONT_PROXY_CN`] allowed, and the
    /// conventional `X-Remote-*` header names.
    pub fn requestheader(self) -> Self {
        let path = self
            .front_proxy_ca
            .write(self.dir.path(), "front-proxy-ca.crt");
        self.flag(format!("--requestheader-client-ca-file={}", path.display()))
            .flag(format!("--requestheader-allowed-names={FRONT_PROXY_CN}"))
            .flag("--requestheader-username-headers=X-Remote-User")
            .flag("--requestheader-uid-headers=X-Remote-Uid")
            .flag("--requestheader-group-headers=X-Remote-Group")
            .flag("--requestheader-extra-headers-prefix=X-Remote-Extra-")
    }

    /// `--config-dir` holding `yaml` as its one file.
    pub fn config(self, yaml: &str) -> Self {
        let dir = self.dir.path().join("flowcontrol");
        std::fs::create_dir_all(&dir).expect("config dir");
        std::fs::write(dir.join("flowcontrol.yaml"), yaml).expect("write config");
        self.flag(format!("--config-dir={}", dir.display()))
    }

    /// Starts the app with the flags gathered so far.
    pub async fn start(self) -> TestApp {
        let opts = ServeOptions::try_parse_from(&self.flags).expect("serve flags parse");
        let config = match &opts.config_dir {
            Some(dir) => {
                kube_apf_proxy::config::load_dir(dir)
                    .expect("test configuration loads")
                    .config
            }
            None => kube_apf_proxy::config::bootstrap(),
        };
        let app = within("app start", App::start(opts.config(), &config))
            .await
            .expect("app starts");
        let trust = app
            .running()
            .tls()
            .self_signed_cert
            .clone()
            .expect("a self-signed serving certificate");
        TestApp {
            app,
            dir: self.dir,
            client_ca: self.client_ca,
            front_proxy_ca: self.front_proxy_ca,
            trust,
        }
    }
}

/// A running proxy and the files it was started with.
pub struct TestApp {
    /// The proxy.
    pub app: App,
    /// PKI, token file and configuration directory.
    pub dir: tempfile::TempDir,
    /// Signs client certificates that `--client-ca-file` accepts.
    pub client_ca: TestCa,
    /// Signs front-proxy certificates that `--requestheader-client-ca-file` accepts.
    pub front_proxy_ca: TestCa,
    trust: CertificateDer<'static>,
}

impl TestApp {
    /// An HTTP/1.1 client without a client certificate.
    pub fn client(&self) -> TestClient {
        self.client_with(None, Version::HTTP_11)
    }

    /// A client presenting `cert` (when given), speaking `version` (chosen by ALPN).
    pub fn client_with(&self, cert: Option<&Issued>, version: Version) -> TestClient {
        let alpn: &[u8] = if version == Version::HTTP_2 {
            b"h2"
        } else {
            b"http/1.1"
        };
        let mut roots = RootCertStore::empty();
        roots.add(self.trust.clone()).expect("trust anchor");
        TestClient {
            addr: self.app.running().secure_addr(),
            tls: client_tls(roots, cert, alpn),
        }
    }

    /// An HTTP/1.1 client of the secure admin listener (`--admin-secure`), presenting `cert`
    /// when given; it trusts the serving certificate, which the admin listener shares.
    pub fn admin_client(&self, cert: Option<&Issued>) -> TestClient {
        TestClient {
            addr: self.app.running().admin_addr(),
            ..self.client_with(cert, Version::HTTP_11)
        }
    }

    /// A client certificate from the client CA: CN `user`, O `group`.
    pub fn user_cert(&self, user: &str, group: Option<&str>) -> Issued {
        self.client_ca.client_cert(user, group)
    }

    /// A front-proxy certificate (CN [`FRONT_PROXY_CN`]) from the requestheader CA.
    pub fn front_proxy_cert(&self) -> Issued {
        self.front_proxy_ca.client_cert(FRONT_PROXY_CN, None)
    }

    /// The proxy's serving certificate as PEM (for kubeconfigs).
    pub fn serving_cert_pem(&self) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(self.trust.as_ref());
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).expect("base64 is ascii"))
            .collect();
        format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            lines.join("\n")
        )
    }

    /// `https://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("https://{}", self.app.running().secure_addr())
    }

    /// Queue statistics of the priority level `name`.
    pub fn level(&self, name: &str) -> LevelStats {
        self.app
            .proxy()
            .flow_control()
            .levels()
            .into_iter()
            .find(|l| l.priority_level.name == name)
            .unwrap_or_else(|| panic!("no priority level {name}"))
            .queues
            .stats()
    }

    /// Waits (polling, at most [`STEP`]) until the stats of level `name` satisfy `check`.
    pub async fn wait_level(&self, name: &str, what: &str, check: impl Fn(&LevelStats) -> bool) {
        let wait = async {
            while !check(&self.level(name)) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        if tokio::time::timeout(STEP, wait).await.is_err() {
            panic!("timed out: {what}; level {name}: {:?}", self.level(name));
        }
    }

    /// Waits (at most [`STEP`]) until no priority level has a request waiting or executing or
    /// a seat held, and the flow-control gauges say the same: nothing leaked.
    pub async fn assert_settled(&self) {
        let settled = || {
            let levels = self.app.proxy().flow_control().levels();
            let idle = levels.iter().all(|l| {
                let s = l.queues.stats();
                s.waiting == 0 && s.executing == 0 && s.seats_in_use == 0
            });
            let text = self.app.metrics().encode();
            let gauges = [
                "apiserver_flowcontrol_current_executing_seats{",
                "apiserver_flowcontrol_current_executing_requests{",
                "apiserver_flowcontrol_current_inqueue_requests{",
                "apiserver_flowcontrol_current_inqueue_seats{",
            ]
            .iter()
            .map(|g| metric_sum(&text, g))
            .sum::<f64>();
            idle && gauges == 0.0
        };
        eventually("every seat and queue slot is back", settled).await;
    }

    /// `(answered, abandoned)`: responses the proxy gave (`apf_proxy_requests_total`) and requests
    /// whose client left first (`apf_proxy_requests_abandoned_total`).
    pub fn accounted(&self) -> (u64, u64) {
        let text = self.app.metrics().encode();
        (
            metric_sum(&text, "apf_proxy_requests_total{") as u64,
            metric_sum(&text, "apf_proxy_requests_abandoned_total ") as u64,
        )
    }

    /// A file path inside the app's tempdir.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes the proxy's serving certificate as a CA file for real clients; returns its path.
    pub fn serving_ca_file(&self) -> PathBuf {
        let ca = self.path("proxy-ca.crt");
        std::fs::write(&ca, self.serving_cert_pem()).expect("write ca");
        ca
    }
}

/// A client TLS configuration trusting `roots`, presenting `cert` when given, offering `alpn`.
fn client_tls(roots: RootCertStore, cert: Option<&Issued>, alpn: &[u8]) -> TlsConnector {
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots);
    let mut config = match cert {
        Some(id) => builder
            .with_client_auth_cert(vec![id.cert.clone()], id.key())
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// An HTTPS client of the proxy: one connection per [`TestClient::connect`].
#[derive(Clone)]
pub struct TestClient {
    addr: std::net::SocketAddr,
    tls: TlsConnector,
}

impl TestClient {
    /// An HTTP/1.1 client of another HTTPS server at `addr` (a real kube-apiserver) trusting the
    /// CA certificates in `ca_pem`, presenting `cert` when given.
    pub fn to_server(addr: std::net::SocketAddr, ca_pem: &str, cert: Option<&Issued>) -> Self {
        use rustls_pki_types::pem::PemObject;
        let mut roots = RootCertStore::empty();
        for der in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(der.expect("CA PEM")).expect("trust anchor");
        }
        TestClient {
            addr,
            tls: client_tls(roots, cert, b"http/1.1"),
        }
    }

    /// The TLS stream of a fresh connection, before any HTTP (for raw HTTP/2 frame tests).
    pub async fn tls_stream(&self) -> tokio_rustls::client::TlsStream<TcpStream> {
        within("tls connect", async {
            let tcp = TcpStream::connect(self.addr).await.expect("tcp connect");
            let name = ServerName::try_from("localhost").expect("name");
            self.tls.connect(name, tcp).await.expect("tls handshake")
        })
        .await
    }

    /// Opens a connection (TLS, then HTTP/1.1 or HTTP/2 as ALPN chose).
    pub async fn connect(&self) -> Conn {
        within("connect", async {
            let tcp = TcpStream::connect(self.addr).await.expect("tcp connect");
            let name = ServerName::try_from("localhost").expect("name");
            let tls = self.tls.connect(name, tcp).await.expect("tls handshake");
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let io = TokioIo::new(tls);
            if h2 {
                let (sender, conn) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                        .await
                        .expect("h2 handshake");
                Conn {
                    sender: Sender::H2(sender),
                    task: Some(tokio::spawn(async move {
                        let _ = conn.await;
                    })),
                }
            } else {
                let (sender, conn) = hyper::client::conn::http1::handshake(io)
                    .await
                    .expect("h1 handshake");
                Conn {
                    sender: Sender::H1(sender),
                    task: Some(tokio::spawn(async move {
                        let _ = conn.with_upgrades().await;
                    })),
                }
            }
        })
        .await
    }

    /// `GET path` over HTTP/1.1 on a fresh connection; `Err` when the TLS handshake or the
    /// exchange fails (a server that refuses the client certificate may only say so after the
    /// client's side of a TLS 1.3 handshake is done).
    pub async fn try_get(&self, path: &str) -> Result<http::StatusCode, String> {
        let request = request("GET", path, None, Bytes::new());
        within("try_get", self.try_send(request))
            .await
            .map(|r| r.status())
    }

    /// Sends `request` over HTTP/1.1 on a fresh connection, without a time bound of its own;
    /// `Err` when the handshake fails or the connection ends before a response head.
    pub async fn try_send(&self, request: Request<TestBody>) -> Result<Response<Incoming>, String> {
        let tcp = TcpStream::connect(self.addr)
            .await
            .map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").expect("name");
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())
    }

    /// Sends `request` on a fresh connection; the response head within [`STEP`].
    pub async fn send(&self, request: Request<TestBody>) -> Response<Incoming> {
        let mut conn = self.connect().await;
        let response = conn.send(request).await;
        conn.detach();
        response
    }

    /// `GET path` with the bearer token, if any.
    pub async fn get(&self, path: &str, token: Option<&str>) -> Response<Incoming> {
        self.send(request("GET", path, token, Bytes::new())).await
    }
}

/// A request for `path` with `Authorization: Bearer token` when given.
pub fn request(method: &str, path: &str, token: Option<&str>, bytes: Bytes) -> Request<TestBody> {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    builder.body(body(bytes)).expect("request")
}

/// HTTP/2 requests carry the authority in the URI (`:authority`), HTTP/1.1 in `Host`.
fn absolute(request: &mut Request<TestBody>) {
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = format!("https://localhost{path}").parse().expect("uri");
}

// The two protocols' request senders.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<TestBody>),
    H2(hyper::client::conn::http2::SendRequest<TestBody>),
}

/// One client connection; dropping it closes the connection (the caller goes away).
pub struct Conn {
    sender: Sender,
    task: Option<JoinHandle<()>>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Conn {
    /// Sends `request` (a path; the authority is added as each protocol wants it) and waits at
    /// most [`STEP`] for the response head.
    pub async fn send(&mut self, request: Request<TestBody>) -> Response<Incoming> {
        within("response head", self.send_unbounded(request)).await
    }

    /// Sends `request` without a time bound (for requests meant to wait).
    pub async fn send_unbounded(&mut self, mut request: Request<TestBody>) -> Response<Incoming> {
        match &mut self.sender {
            Sender::H1(sender) => {
                request.headers_mut().insert(
                    http::header::HOST,
                    http::HeaderValue::from_static("localhost"),
                );
                sender.ready().await.expect("h1 ready");
                sender.send_request(request).await.expect("h1 response")
            }
            Sender::H2(sender) => {
                absolute(&mut request);
                sender.ready().await.expect("h2 ready");
                sender.send_request(request).await.expect("h2 response")
            }
        }
    }

    /// Sends `request` on this HTTP/2 connection from a task of its own; aborting the task
    /// resets the stream and leaves the connection open.
    pub fn spawn_h2(&self, mut request: Request<TestBody>) -> JoinHandle<Response<Incoming>> {
        let Sender::H2(sender) = &self.sender else {
            panic!("spawn_h2 needs an HTTP/2 connection");
        };
        let mut sender = sender.clone();
        absolute(&mut request);
        tokio::spawn(async move {
            sender.ready().await.expect("h2 ready");
            sender.send_request(request).await.expect("h2 response")
        })
    }

    /// Lets the connection live on its own until its responses are read or dropped.
    fn detach(mut self) {
        self.task = None;
    }
}

/// The sum of the samples whose line starts with `prefix` in Prometheus text.
pub fn metric_sum(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Asserts a Kubernetes `Status` failure body with `code` and `reason`; returns it.
pub async fn assert_status(
    response: Response<Incoming>,
    code: u16,
    reason: &str,
) -> serde_json::Value {
    assert_eq!(response.status().as_u16(), code);
    let bytes = within("response body", super::read_body(response))
        .await
        .expect("body");
    let status: serde_json::Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("json body ({e}): {}", String::from_utf8_lossy(&bytes)));
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["code"], code, "{status}");
    assert_eq!(status["reason"], reason, "{status}");
    status
}
