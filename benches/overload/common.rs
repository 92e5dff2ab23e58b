#![allow(dead_code)] // Shared by the overload and scale benchmarks; each uses a part.
//! What both overload benchmarks share: a fake upstream with a fixed service time, the proxy (the
//! release binary) or nginx in front of it with generated certificates, clients per flow, and
//! latency statistics.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

const POD: &[u8] = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","namespace":"ns"}}"#;

/// The fake apiserver: every request takes `service` while holding one of `capacity` slots (a
/// saturated apiserver: with nginx in front, excess requests wait here in FIFO order); `?watch=1`
/// streams one event every `event_interval` until the client leaves; while `stalled`, requests
/// wait before being served. Plain HTTP (h1 and h2c), or TLS with `h2` by ALPN and a stream
/// limit; it can close its connections gracefully (`goaway`) or go down and come back
/// (`restart`).
pub struct Upstream {
    pub addr: SocketAddr,
    pub served: AtomicU64,
    pub watches: AtomicU64,
    /// Watch events sent.
    pub events: Arc<AtomicU64>,
    stalled: std::sync::atomic::AtomicBool,
    release: Notify,
    slots: Semaphore,
    service: Duration,
    event_interval: Duration,
    /// Bumped: every open connection closes gracefully (HTTP/2: GOAWAY).
    goaway: tokio::sync::watch::Sender<u64>,
    /// Set: the listener and every connection go away for that long.
    outage: tokio::sync::watch::Sender<Option<Duration>>,
}

/// How the fake upstream serves.
pub struct UpstreamOptions {
    pub service: Duration,
    pub capacity: usize,
    pub event_interval: Duration,
    /// TLS with this PKI's serving certificate, offering `h2` with this stream limit.
    pub tls: Option<(rustls::ServerConfig, u32)>,
}

impl Upstream {
    pub async fn start(service: Duration, capacity: usize) -> Arc<Upstream> {
        Self::start_with(UpstreamOptions {
            service,
            capacity,
            event_interval: Duration::from_secs(1),
            tls: None,
        })
        .await
    }

    pub async fn start_with(options: UpstreamOptions) -> Arc<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind upstream");
        let upstream = Arc::new(Upstream {
            addr: listener.local_addr().expect("addr"),
            served: AtomicU64::new(0),
            watches: AtomicU64::new(0),
            events: Arc::default(),
            stalled: false.into(),
            release: Notify::new(),
            slots: Semaphore::new(options.capacity),
            service: options.service,
            event_interval: options.event_interval,
            goaway: tokio::sync::watch::channel(0).0,
            outage: tokio::sync::watch::channel(None).0,
        });
        let (acceptor, max_streams) = match options.tls {
            Some((mut config, max_streams)) => {
                config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
                (
                    Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
                    Some(max_streams),
                )
            }
            None => (None, None),
        };
        tokio::spawn(Arc::clone(&upstream).accept_loop(listener, acceptor, max_streams));
        upstream
    }

    /// Closes every open connection gracefully: HTTP/2 connections get GOAWAY and finish their
    /// open streams.
    pub fn goaway(&self) {
        self.goaway.send_modify(|n| *n += 1);
    }

    /// Goes away for `down_for` (connections cut, the port closed), then listens again.
    pub fn restart(&self, down_for: Duration) {
        self.outage.send_replace(Some(down_for));
    }

    async fn accept_loop(
        self: Arc<Self>,
        mut listener: TcpListener,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
        max_streams: Option<u32>,
    ) {
        let mut outage = self.outage.subscribe();
        loop {
            let (stream, cut) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => (stream, outage.clone()),
                    Err(_) => continue,
                },
                _ = outage.changed() => {
                    let down_for = outage.borrow_and_update().unwrap_or_default();
                    drop(listener);
                    tokio::time::sleep(down_for).await;
                    listener = loop {
                        match TcpListener::bind(self.addr).await {
                            Ok(l) => break l,
                            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    };
                    continue;
                }
            };
            let server = Arc::clone(&self);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let mut cut = cut;
                cut.borrow_and_update();
                let serving = async {
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(stream).await {
                                server
                                    .serve_connection(TokioIo::new(tls), max_streams)
                                    .await;
                            }
                        }
                        None => {
                            server
                                .serve_connection(TokioIo::new(stream), max_streams)
                                .await
                        }
                    }
                };
                tokio::select! {
                    _ = serving => {}
                    _ = cut.changed() => {}
                }
            });
        }
    }

    async fn serve_connection<I>(self: Arc<Self>, io: TokioIo<I>, max_streams: Option<u32>)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let mut goaway = self.goaway.subscribe();
        let server = Arc::clone(&self);
        let service = hyper::service::service_fn(move |req| {
            let server = Arc::clone(&server);
            async move { Ok::<_, Infallible>(server.serve(req).await) }
        });
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        if let Some(n) = max_streams {
            builder.http2().max_concurrent_streams(n);
        }
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = goaway.changed() => conn.as_mut().graceful_shutdown(),
        }
        let _ = conn.await;
    }

    pub fn stall(&self, on: bool) {
        self.stalled.store(on, Ordering::SeqCst);
        if !on {
            self.release.notify_waiters();
        }
    }

    async fn serve(&self, req: Request<Incoming>) -> Response<Body> {
        let query = req.uri().query().unwrap_or_default();
        if query.contains("watch=1") {
            self.watches.fetch_add(1, Ordering::Relaxed);
            let interval = self.event_interval;
            let counter = Arc::clone(&self.events);
            let events = futures_util::stream::unfold(0u64, move |n| {
                let counter = Arc::clone(&counter);
                async move {
                    if n > 0 {
                        tokio::time::sleep(interval).await;
                    }
                    counter.fetch_add(1, Ordering::Relaxed);
                    let event = format!("{{\"type\":\"BOOKMARK\",\"object\":{{\"n\":{n}}}}}\n");
                    Some((Ok::<_, BoxError>(Frame::data(Bytes::from(event))), n + 1))
                }
            });
            return Response::new(StreamBody::new(events).boxed_unsync());
        }
        if req.uri().path().ends_with("/metrics") || req.uri().path() == "/readyz" {
            return Response::new(
                Full::new(Bytes::new())
                    .map_err(|e| match e {})
                    .boxed_unsync(),
            );
        }
        while self.stalled.load(Ordering::SeqCst) {
            let released = self.release.notified();
            if !self.stalled.load(Ordering::SeqCst) {
                break;
            }
            released.await;
        }
        let _slot = self.slots.acquire().await.expect("open");
        tokio::time::sleep(self.service).await;
        self.served.fetch_add(1, Ordering::Relaxed);
        Response::new(
            Full::new(Bytes::from_static(POD))
                .map_err(|e| match e {})
                .boxed_unsync(),
        )
    }
}

/// A serving certificate for 127.0.0.1, its key, and a client TLS configuration trusting it.
pub struct Pki {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client: rustls::ClientConfig,
    cert_der: rustls::pki_types::CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Pki {
    pub fn generate(dir: &Path) -> Pki {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("params");
        let cert = params.self_signed(&key).expect("cert");
        let (cert_file, key_file) = (dir.join("serving.crt"), dir.join("serving.key"));
        std::fs::write(&cert_file, cert.pem()).expect("write cert");
        std::fs::write(&key_file, key.serialize_pem()).expect("write key");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.der().clone()).expect("root");
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Pki {
            cert_file,
            key_file,
            client,
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        }
    }

    /// A server configuration with the same certificate (for a TLS upstream).
    pub fn server_config(&self) -> rustls::ServerConfig {
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(self.key_der.clone().into());
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![self.cert_der.clone()], key)
        .expect("server config")
    }
}

/// A process killed when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    /// Peak and current resident memory (VmHWM, VmRSS) in KiB.
    pub fn memory_kib(&self) -> (u64, u64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        (field("VmHWM:"), field("VmRSS:"))
    }
}

/// Picks a free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Starts the release proxy on free ports; returns it with its secure and admin URLs.
pub async fn start_proxy(
    dir: &Path,
    pki: &Pki,
    upstream: SocketAddr,
    extra: &[String],
) -> (Process, String, String) {
    start_proxy_to(dir, pki, &format!("http://{upstream}"), extra).await
}

/// Starts the release proxy in front of `upstream` (a URL; an `https://` one is verified against
/// the PKI's certificate).
pub async fn start_proxy_to(
    dir: &Path,
    pki: &Pki,
    upstream: &str,
    extra: &[String],
) -> (Process, String, String) {
    let (port, admin) = (free_port(), free_port());
    // `PROXY_WRAPPER="heaptrack -o /tmp/proxy-{port}"` runs the proxy under a profiler (`{port}`
    // becomes the proxy's port: one output per proxy a benchmark starts).
    let wrapper = std::env::var("PROXY_WRAPPER")
        .unwrap_or_default()
        .replace("{port}", &port.to_string());
    let mut command = wrapper.split_whitespace();
    let mut command = match command.next() {
        Some(program) => {
            let mut c = Command::new(program);
            c.args(command).arg(env!("CARGO_BIN_EXE_kube-apf-proxy"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy")),
    };
    let child = command
        .arg("serve")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .arg(format!("--admin-address=127.0.0.1:{admin}"))
        .arg(format!("--upstream={upstream}"))
        .arg(format!("--upstream-ca-file={}", pki.cert_file.display()))
        .arg(format!("--tls-cert-file={}", pki.cert_file.display()))
        .arg(format!("--tls-private-key-file={}", pki.key_file.display()))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("proxy.log")).expect("log"))
        .spawn()
        .expect("start the proxy (cargo bench builds it)");
    let process = Process(child);
    let admin_url = format!("http://127.0.0.1:{admin}");
    if !wait_until_up(&format!("{admin_url}/livez")).await {
        let log = std::fs::read_to_string(dir.join("proxy.log")).unwrap_or_default();
        panic!("the proxy did not come up:\n{log}");
    }
    (process, format!("https://127.0.0.1:{port}"), admin_url)
}

/// Starts nginx (Debian's) as a TLS reverse proxy in front of `upstream`.
pub async fn start_nginx(dir: &Path, pki: &Pki, upstream: SocketAddr) -> Option<(Process, String)> {
    let port = free_port();
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {dir}/nginx.pid;\nerror_log stderr warn;\n\
         events {{ worker_connections 16384; }}\n\
         http {{\n access_log off;\n keepalive_requests 1000000;\n\
         client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy;\n\
         fastcgi_temp_path {dir}/fcgi; uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;\n\
         upstream up {{ server {upstream}; keepalive 256; keepalive_requests 1000000; }}\n\
         server {{\n  listen 127.0.0.1:{port} ssl http2;\n  http2_max_concurrent_streams 1000;\n\
         ssl_certificate {cert};\n  ssl_certificate_key {key};\n\
         location / {{ proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection \"\";\n\
         proxy_buffering off; proxy_read_timeout 3600s; }}\n }}\n}}\n",
        dir = dir.display(),
        cert = pki.cert_file.display(),
        key = pki.key_file.display(),
    );
    let conf_file = dir.join("nginx.conf");
    std::fs::write(&conf_file, conf).expect("nginx.conf");
    let child = Command::new("nginx")
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf_file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("nginx.log")).expect("log"))
        .spawn()
        .ok()?;
    let mut process = Process(child);
    let url = format!("https://127.0.0.1:{port}");
    for _ in 0..100 {
        if let Ok(Some(status)) = process.0.try_wait() {
            let log = std::fs::read_to_string(dir.join("nginx.log")).unwrap_or_default();
            eprintln!("nginx exited ({status}): {log}");
            return None;
        }
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Some((process, url));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

async fn wait_until_up(url: &str) -> bool {
    let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    for _ in 0..200 {
        let req = Request::get(url).body(empty()).expect("request");
        if client.request(req).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

pub fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|e| match e {})
        .boxed_unsync()
}

/// An HTTPS client with its own connection pool (HTTP/2 only: one connection, many streams).
/// An HTTPS client speaking HTTP/1.1 only: a connection per request in flight, pooled.
pub fn https1_client(
    tls: &rustls::ClientConfig,
) -> Client<hyper_rustls::HttpsConnector<HttpConnector>, Body> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_only()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}

pub fn https_client(
    tls: &rustls::ClientConfig,
) -> Client<hyper_rustls::HttpsConnector<HttpConnector>, Body> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_only()
        .enable_http2()
        .build();
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(connector)
}

/// `GET url` with a bearer token; the status, or `None` for a transport error.
pub async fn get(
    client: &Client<hyper_rustls::HttpsConnector<HttpConnector>, Body>,
    url: &str,
    token: &str,
) -> Option<StatusCode> {
    let req = Request::get(url)
        .header("authorization", format!("Bearer {token}"))
        .body(empty())
        .expect("request");
    let response = client.request(req).await.ok()?;
    let status = response.status();
    response.into_body().collect().await.ok()?;
    Some(status)
}

/// Scrapes `name`'s samples (summed) from Prometheus text at `admin/metrics`.
pub async fn scrape(admin: &str) -> String {
    let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let req = Request::get(format!("{admin}/metrics"))
        .body(empty())
        .expect("request");
    let response = client.request(req).await.expect("scrape");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

pub fn metric_sum(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |sum, v| sum + v)
}

/// Latencies of one flow.
#[derive(Default)]
pub struct Latencies(pub Vec<Duration>);

impl Latencies {
    pub fn percentile(&mut self, p: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        self.0.sort_unstable();
        let index = ((self.0.len() as f64 - 1.0) * p).round() as usize;
        self.0[index]
    }
}

pub fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// Runs `concurrency` closed-loop workers of one flow until `until`; returns its latencies of
/// 2xx answers and a count per outcome.
pub async fn closed_loop(
    client: Arc<Client<hyper_rustls::HttpsConnector<HttpConnector>, Body>>,
    url: String,
    token: String,
    concurrency: usize,
    until: Instant,
    backoff: Duration,
) -> (Latencies, Outcomes) {
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, token) = (Arc::clone(&client), url.clone(), token.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut outcomes = Outcomes::default();
                while Instant::now() < until {
                    let started = Instant::now();
                    let status = get(&client, &url, &token).await;
                    outcomes.count(status);
                    if status.is_some_and(|s| s.is_success()) {
                        latencies.push(started.elapsed());
                    }
                    if status == Some(StatusCode::TOO_MANY_REQUESTS) {
                        // client-go backs off (it honours Retry-After, 1 s at least).
                        tokio::time::sleep(backoff).await;
                    }
                }
                (latencies, outcomes)
            })
        })
        .collect();
    let mut all = Latencies::default();
    let mut outcomes = Outcomes::default();
    for worker in workers {
        let (latencies, o) = worker.await.expect("worker");
        all.0.extend(latencies);
        outcomes.add(&o);
    }
    (all, outcomes)
}

/// Requests by outcome, as the client saw them.
#[derive(Default, Debug, Clone, Copy)]
pub struct Outcomes {
    pub ok: u64,
    pub rejected: u64,
    pub other: u64,
    pub errors: u64,
}

impl Outcomes {
    pub fn count(&mut self, status: Option<StatusCode>) {
        match status {
            Some(s) if s.is_success() => self.ok += 1,
            Some(StatusCode::TOO_MANY_REQUESTS) => self.rejected += 1,
            Some(_) => self.other += 1,
            None => self.errors += 1,
        }
    }

    pub fn add(&mut self, o: &Outcomes) {
        self.ok += o.ok;
        self.rejected += o.rejected;
        self.other += o.other;
        self.errors += o.errors;
    }

    pub fn sent(&self) -> u64 {
        self.ok + self.rejected + self.other + self.errors
    }
}

pub fn knob(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn secs(var: &str, default: u64) -> Duration {
    Duration::from_secs(knob(var, default))
}

pub fn level(name: &str, shares: u32, queues: u32, hand: u32, qll: u32) -> String {
    format!(
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n\
         metadata: {{name: {name}}}\nspec:\n  type: Limited\n  limited:\n    \
         nominalConcurrencyShares: {shares}\n    lendablePercent: 0\n    limitResponse:\n      \
         type: Queue\n      queuing: {{queues: {queues}, handSize: {hand}, queueLengthLimit: {qll}}}\n---\n"
    )
}

pub fn schema(name: &str, group: &str, level: &str, precedence: u32) -> String {
    format!(
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata: {{name: {name}}}\n\
         spec:\n  priorityLevelConfiguration: {{name: {level}}}\n  matchingPrecedence: {precedence}\n  \
         distinguisherMethod: {{type: ByUser}}\n  rules:\n  - subjects: [{{kind: Group, group: {{name: {group}}}}}]\n    \
         resourceRules: [{{verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}}]\n---\n"
    )
}

/// Writes the configuration directory and a token file with `users` as `(user, group)`.
pub fn write_setup(dir: &std::path::Path, config: &str, users: &[(String, String)]) -> Vec<String> {
    let config_dir = dir.join("flowcontrol");
    std::fs::create_dir_all(&config_dir).expect("config dir");
    std::fs::write(config_dir.join("config.yaml"), config).expect("config");
    let tokens: String = users
        .iter()
        .map(|(user, group)| format!("tok-{user},{user},uid-{user},\"{group}\"\n"))
        .collect();
    std::fs::write(dir.join("tokens.csv"), tokens).expect("tokens");
    vec![
        format!("--config-dir={}", config_dir.display()),
        format!("--token-auth-file={}", dir.join("tokens.csv").display()),
        "--http2-max-streams-per-connection=1000".to_string(),
    ]
}

pub const POD_PATH: &str = "/api/v1/namespaces/ns/pods/x";

/// CPU seconds of `pid` and every descendant (nginx works in its worker processes).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields after the name start at `state` (field 3): utime is field 14, stime 15.
    let own = (ticks(11) + ticks(12)) / 100.0;
    let children: f64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .map(cpu_seconds)
        .sum();
    own + children
}

/// The load generator's runtime: two workers, like the machine's two cores.
pub fn bench_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}
