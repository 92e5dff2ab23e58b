//! An in-process fake kube-apiserver on `127.0.0.1:0` that records every request it receives.
//!
//! Routes (namespace `ns` is any namespace):
//! - `GET /api/v1/namespaces/{ns}/pods` → a PodList; `GET .../pods/{name}` → a Pod
//! - `POST /api/v1/namespaces/{ns}/pods` → 201 with the request body echoed back
//! - `GET .../pods?watch=true` → a chunked watch stream whose events the test sends through
//!   [`FakeApiserver::next_watch`]; the stream ends when the test drops the sender
//! - `.../pods/{name}/exec|attach|portforward` with `Connection: Upgrade` → 101, then echoes bytes
//! - `POST /apis/authentication.k8s.io/v1/tokenreviews` → a TokenReview answer from the
//!   configured tokens
//! - `POST /apis/authorization.k8s.io/v1/subjectaccessreviews` → non-resource reviews allowed for
//!   user `prometheus` or group `system:monitoring`, denied for anyone else (as the load harness's
//!   fake); verb `impersonate` allowed for user `carol` only (RBAC's empty reason when denied);
//!   500 while [`FakeApiserver::fail_access_reviews`] is set
//! - `/apis/flowcontrol.apiserver.k8s.io/v1/...` → list, watch, get, create, replace and delete of
//!   FlowSchemas and PriorityLevelConfigurations ([`super::fake_flowcontrol`], driven through
//!   [`FakeApiserver::flowcontrol`])
//! - `GET /unauthorized` → 401 `Status` (an expired credential, as the apiserver answers it)
//! - `GET /stream` → the same test-driven stream as a watch, for a non-long-running request
//! - `POST /upload` → reads the request body frame by frame, handing each data frame to the test
//!   as it arrives ([`FakeApiserver::next_upload_chunk`]), then answers 200 with the whole body
//! - `GET /slow?sleep=<ms>` → answers after a (tokio) sleep; `GET /hang` → never answers
//! - `GET /reset` → 200, one chunk, then the stream is broken off when the test calls
//!   [`FakeApiserver::break_stream`]
//! - `GET /metrics` → [`METRICS`]: object counts, as the proxy reads them for list estimates
//! - `GET /api`, `/apis`, `/api/v1`, `/version` → discovery documents (enough for kubectl)
//! - anything else → 404 `Status`

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, Version};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::CertificateDer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};
use tokio_rustls::TlsAcceptor;

use super::fake_flowcontrol::{Answer, FlowControlStore};

use super::pki::{server_config, Issued, TestCa};

/// What `/metrics` answers: 5000 pods and 3 namespaces in storage.
pub const METRICS: &str = "# HELP apiserver_storage_objects [STABLE] Number of stored objects\n\
# TYPE apiserver_storage_objects gauge\n\
apiserver_storage_objects{resource=\"pods\"} 5000\n\
apiserver_storage_objects{resource=\"namespaces\"} 3\n";

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = UnsyncBoxBody<Bytes, BoxError>;

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The method.
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// The headers.
    pub headers: HeaderMap,
    /// HTTP/1.1 or HTTP/2.
    pub version: Version,
    /// The client certificate chain presented on the connection.
    pub peer_certificates: Option<Vec<CertificateDer<'static>>>,
}

impl Recorded {
    /// All values of a header, as strings.
    pub fn header_values(&self, name: &str) -> Vec<String> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or("<non-ascii>").to_string())
            .collect()
    }
}

/// A user a TokenReview answers for a token.
#[derive(Debug, Clone)]
pub struct ReviewedUser {
    /// The user name.
    pub username: String,
    /// The UID.
    pub uid: String,
    /// The groups.
    pub groups: Vec<String>,
    /// The extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// How the fake listens.
#[derive(Default)]
pub struct FakeOptions {
    /// Serve TLS with this certificate; plain HTTP without.
    pub tls: Option<FakeTls>,
    /// TokenReview answers.
    pub tokens: HashMap<String, ReviewedUser>,
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` (hyper's default, 200, without).
    pub h2_max_streams: Option<u32>,
}

/// The fake's TLS settings.
pub struct FakeTls {
    /// The serving certificate.
    pub serving: Issued,
    /// Verify (optional) client certificates against this CA.
    pub client_ca: Option<TestCa>,
    /// Offer HTTP/2 by ALPN (besides HTTP/1.1).
    pub h2: bool,
}

struct State {
    recorded: Mutex<Vec<Recorded>>,
    connections: std::sync::atomic::AtomicUsize,
    tokens: HashMap<String, ReviewedUser>,
    watches: mpsc::Sender<mpsc::Sender<Bytes>>,
    uploads: mpsc::UnboundedSender<Bytes>,
    hang: Notify,
    reset: Notify,
    access_reviews_fail: std::sync::atomic::AtomicBool,
    flowcontrol: FlowControlStore,
    access_review_specs: Mutex<Vec<serde_json::Value>>,
    h2_max_streams: Option<u32>,
    /// Bumped to make every open connection close gracefully (HTTP/2: GOAWAY).
    goaway: tokio::sync::watch::Sender<u64>,
}

/// A running fake apiserver; stops when dropped.
pub struct FakeApiserver {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://127.0.0.1:port` or `https://...`.
    pub url: String,
    state: Arc<State>,
    watches: tokio::sync::Mutex<mpsc::Receiver<mpsc::Sender<Bytes>>>,
    uploads: tokio::sync::Mutex<mpsc::UnboundedReceiver<Bytes>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApiserver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApiserver {
    /// A plain-HTTP fake.
    pub async fn start_plain() -> Self {
        Self::start(FakeOptions::default()).await
    }

    /// Starts listening on `127.0.0.1:0`.
    pub async fn start(options: FakeOptions) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (watch_tx, watch_rx) = mpsc::channel(16);
        let (upload_tx, upload_rx) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            recorded: Mutex::new(Vec::new()),
            connections: Default::default(),
            tokens: options.tokens,
            watches: watch_tx,
            uploads: upload_tx,
            hang: Notify::new(),
            reset: Notify::new(),
            access_reviews_fail: Default::default(),
            flowcontrol: FlowControlStore::default(),
            access_review_specs: Mutex::new(Vec::new()),
            h2_max_streams: options.h2_max_streams,
            goaway: tokio::sync::watch::channel(0).0,
        });
        let acceptor = options.tls.map(|tls| {
            let alpn: &[&[u8]] = if tls.h2 {
                &[b"h2", b"http/1.1"]
            } else {
                &[b"http/1.1"]
            };
            let config = server_config(&tls.serving, tls.client_ca.as_ref(), alpn);
            TlsAcceptor::from(Arc::new(config))
        });
        let scheme = if acceptor.is_some() { "https" } else { "http" };
        let task = tokio::spawn(accept_loop(listener, acceptor, state.clone()));
        FakeApiserver {
            addr,
            url: format!("{scheme}://{addr}"),
            state,
            watches: tokio::sync::Mutex::new(watch_rx),
            uploads: tokio::sync::Mutex::new(upload_rx),
            task,
        }
    }

    /// Closes every open connection gracefully, as an apiserver does at shutdown or by its
    /// `--goaway-chance`: HTTP/2 connections get `GOAWAY` (their open streams finish), HTTP/1.1
    /// ones close after their current response. Later connections are not affected.
    pub fn goaway(&self) {
        self.state.goaway.send_modify(|n| *n += 1);
    }

    /// Makes every SubjectAccessReview fail with 500 (`true`) or be answered again (`false`).
    pub fn fail_access_reviews(&self, fail: bool) {
        self.state
            .access_reviews_fail
            .store(fail, std::sync::atomic::Ordering::SeqCst);
    }

    /// The `spec` of every SubjectAccessReview answered so far (failed ones not included).
    pub fn access_reviews(&self) -> Vec<serde_json::Value> {
        self.state.access_review_specs.lock().clone()
    }

    /// The flow-control objects it serves, lists and watches.
    pub fn flowcontrol(&self) -> &FlowControlStore {
        &self.state.flowcontrol
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.recorded.lock().clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state
            .connections
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The last request received.
    pub fn last_request(&self) -> Recorded {
        self.requests().pop().expect("the fake received a request")
    }

    /// The last request whose path and query start with `prefix` (the proxy also reads
    /// `/metrics` on its own, so "the last request" alone can be that).
    pub fn last_request_to(&self, prefix: &str) -> Recorded {
        self.requests()
            .into_iter()
            .rfind(|r| r.path.starts_with(prefix))
            .unwrap_or_else(|| panic!("the fake received no request to {prefix}"))
    }

    /// Waits for the next watch request; events sent on the returned sender are streamed (one
    /// chunk each), and dropping it ends the watch.
    pub async fn next_watch(&self) -> mpsc::Sender<Bytes> {
        self.watches
            .lock()
            .await
            .recv()
            .await
            .expect("fake apiserver is running")
    }

    /// Waits for the next data frame of a `POST /upload` body, as the fake read it (before the
    /// rest of that body has arrived).
    pub async fn next_upload_chunk(&self) -> Bytes {
        self.uploads
            .lock()
            .await
            .recv()
            .await
            .expect("fake apiserver is running")
    }

    /// Breaks off the (next) `/reset` stream after its first chunk.
    pub fn break_stream(&self) {
        self.state.reset.notify_one();
    }

    /// Releases every request waiting on `/hang`.
    pub fn release_hanging(&self) {
        self.state.hang.notify_waiters();
    }
}

async fn accept_loop(listener: TcpListener, acceptor: Option<TlsAcceptor>, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        state
            .connections
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let acceptor = acceptor.clone();
        let state = state.clone();
        tokio::spawn(async move {
            match acceptor {
                None => serve(TokioIo::new(stream), None, state).await,
                Some(acceptor) => {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let certs = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .map(|c| c.iter().map(|c| c.clone().into_owned()).collect());
                    serve(TokioIo::new(tls), certs, state).await;
                }
            }
        });
    }
}

async fn serve<I>(io: TokioIo<I>, certs: Option<Vec<CertificateDer<'static>>>, state: Arc<State>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut goaway = state.goaway.subscribe();
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if let Some(n) = state.h2_max_streams {
        builder.http2().max_concurrent_streams(n);
    }
    let service = service_fn(move |request: Request<Incoming>| {
        let state = state.clone();
        let certs = certs.clone();
        async move { Ok::<_, Infallible>(route(request, certs, state).await) }
    });
    let conn = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = goaway.changed() => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}

/// Every answer carries `Audit-Id`, as the apiserver's do: `fake-audit-N` for the N-th request
/// recorded (from 1).
async fn route(
    request: Request<Incoming>,
    certs: Option<Vec<CertificateDer<'static>>>,
    state: Arc<State>,
) -> Response<Body> {
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let audit_id = {
        let mut recorded = state.recorded.lock();
        recorded.push(Recorded {
            method: request.method().clone(),
            path: path.clone(),
            headers: request.headers().clone(),
            version: request.version(),
            peer_certificates: certs,
        });
        format!("fake-audit-{}", recorded.len())
    };
    let mut response = answer(request, path, state).await;
    if let Ok(value) = http::HeaderValue::from_str(&audit_id) {
        response.headers_mut().insert("audit-id", value);
    }
    response
}

async fn answer(mut request: Request<Incoming>, path: String, state: Arc<State>) -> Response<Body> {
    let (route_path, query) = path.split_once('?').unwrap_or((&path, ""));
    let segments: Vec<&str> = route_path.trim_matches('/').split('/').collect();
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    match (request.method().clone(), segments.as_slice()) {
        (
            Method::GET,
            ["api"]
            | ["apis"]
            | ["api", "v1"]
            | ["version"]
            | ["apis", "flowcontrol.apiserver.k8s.io", "v1"],
        ) => discovery(&segments),
        (Method::GET, ["api", "v1", "namespaces", ns, "pods"]) if watch => {
            watch_stream(&state).await
        }
        (Method::GET, ["api", "v1", "namespaces", ns, "pods"]) => json(
            StatusCode::OK,
            serde_json::json!({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                "items": [pod(ns, "a"), pod(ns, "b")]}),
        ),
        (Method::GET, ["api", "v1", "namespaces", ns, "pods", name]) => {
            json(StatusCode::OK, pod(ns, name))
        }
        (Method::POST, ["api", "v1", "namespaces", _, "pods"]) => {
            let body = request.into_body().collect().await.map(|b| b.to_bytes());
            match body {
                Ok(bytes) => full(StatusCode::CREATED, "application/json", bytes),
                Err(_) => full(StatusCode::BAD_REQUEST, "text/plain", Bytes::new()),
            }
        }
        (_, ["api", "v1", "namespaces", _, "pods", _, "exec" | "attach" | "portforward"]) => {
            echo_upgrade(&mut request)
        }
        (Method::POST, ["apis", "authentication.k8s.io", "v1", "tokenreviews"]) => {
            token_review(request, &state).await
        }
        (Method::POST, ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"]) => {
            subject_access_review(request, &state).await
        }
        (method, ["apis", "flowcontrol.apiserver.k8s.io", "v1", resource, rest @ ..]) => {
            let name = rest.first().copied();
            let body = match request.into_body().collect().await {
                Ok(body) => body.to_bytes(),
                Err(_) => Bytes::new(),
            };
            match state
                .flowcontrol
                .answer(&method, resource, name, query, &body)
            {
                Answer::Json(status, value) => json(status, value),
                Answer::Watch(rx) => event_stream(rx),
            }
        }
        (Method::GET, ["unauthorized"]) => json(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized",
                "code": 401}),
        ),
        (Method::GET, ["stream"]) => watch_stream(&state).await,
        (Method::POST, ["upload"]) => upload(request.into_body(), &state).await,
        (Method::GET, ["slow"]) => {
            let ms = query
                .split('&')
                .find_map(|p| p.strip_prefix("sleep="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            full(StatusCode::OK, "text/plain", Bytes::from_static(b"slept"))
        }
        (Method::GET, ["hang"]) => {
            state.hang.notified().await;
            full(
                StatusCode::OK,
                "text/plain",
                Bytes::from_static(b"released"),
            )
        }
        (Method::GET, ["reset"]) => reset_mid_stream(state),
        (Method::GET, ["metrics"]) => full(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            Bytes::from_static(METRICS.as_bytes()),
        ),
        _ => json(
            StatusCode::NOT_FOUND,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "NotFound", "code": 404}),
        ),
    }
}

/// What kubectl reads before it lists: the legacy (unaggregated) discovery documents.
fn discovery(segments: &[&str]) -> Response<Body> {
    let document = match segments {
        ["api"] => serde_json::json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        ["apis"] => serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": "flowcontrol.apiserver.k8s.io",
             "versions": [{"groupVersion": "flowcontrol.apiserver.k8s.io/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": "flowcontrol.apiserver.k8s.io/v1", "version": "v1"}}]}),
        ["apis", "flowcontrol.apiserver.k8s.io", "v1"] => {
            let verbs = [
                "create", "delete", "get", "list", "patch", "update", "watch",
            ];
            serde_json::json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "flowcontrol.apiserver.k8s.io/v1", "resources": [
                {"name": "flowschemas", "singularName": "flowschema", "namespaced": false,
                 "kind": "FlowSchema", "verbs": verbs},
                {"name": "prioritylevelconfigurations", "singularName": "prioritylevelconfiguration",
                 "namespaced": false, "kind": "PriorityLevelConfiguration", "verbs": verbs}]})
        }
        ["version"] => {
            serde_json::json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake",
            "platform": "linux/amd64"})
        }
        _ => {
            serde_json::json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
            "resources": [{"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                "shortNames": ["po"]}]})
        }
    };
    json(StatusCode::OK, document)
}

fn pod(ns: &str, name: &str) -> serde_json::Value {
    serde_json::json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"namespace": ns, "name": name}})
}

fn full(status: StatusCode, content_type: &str, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).map_err(|n| match n {}).boxed_unsync());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        content_type.parse().expect("content type"),
    );
    response
}

fn json(status: StatusCode, value: serde_json::Value) -> Response<Body> {
    full(status, "application/json", Bytes::from(value.to_string()))
}

/// A 200 chunked stream of what `rx` yields, ending when its sender is dropped.
fn event_stream(rx: mpsc::UnboundedReceiver<Bytes>) -> Response<Body> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, BoxError>(Frame::data(event)), rx))
    });
    let mut response = Response::new(StreamBody::new(stream).boxed_unsync());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

async fn watch_stream(state: &State) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    if state.watches.send(tx).await.is_err() {
        return full(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            Bytes::new(),
        );
    }
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, BoxError>(Frame::data(event)), rx))
    });
    let mut response = Response::new(StreamBody::new(stream).boxed_unsync());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        "application/json".parse().expect("content type"),
    );
    response
}

fn reset_mid_stream(state: Arc<State>) -> Response<Body> {
    let stream = futures_util::stream::unfold(0, move |step| {
        let state = state.clone();
        async move {
            let item: Result<Frame<Bytes>, BoxError> = match step {
                0 => Ok(Frame::data(Bytes::from_static(b"{\"partial\":"))),
                1 => {
                    state.reset.notified().await;
                    Err("upstream broke off".into())
                }
                _ => return None,
            };
            Some((item, step + 1))
        }
    });
    let mut response = Response::new(StreamBody::new(stream).boxed_unsync());
    response.headers_mut().insert(
        http::header::CONTENT_LENGTH,
        "1000".parse().expect("length"),
    );
    response
}

fn echo_upgrade(request: &mut Request<Incoming>) -> Response<Body> {
    let Some(protocol) = request.headers().get(http::header::UPGRADE).cloned() else {
        return full(
            StatusCode::BAD_REQUEST,
            "text/plain",
            Bytes::from_static(b"Upgrade request required"),
        );
    };
    let on_upgrade = hyper::upgrade::on(request);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let mut io = TokioIo::new(upgraded);
        let mut buf = [0u8; 1024];
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if io.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = io.shutdown().await;
    });
    let mut response = Response::new(
        Full::new(Bytes::new())
            .map_err(|n| match n {})
            .boxed_unsync(),
    );
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(http::header::CONNECTION, "Upgrade".parse().expect("value"));
    headers.insert(http::header::UPGRADE, protocol);
    headers.insert(
        "x-stream-protocol-version",
        "v4.channel.k8s.io".parse().expect("value"),
    );
    response
}

async fn upload(mut body: Incoming, state: &State) -> Response<Body> {
    let mut received = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return full(StatusCode::BAD_REQUEST, "text/plain", Bytes::new());
        };
        if let Ok(data) = frame.into_data() {
            received.extend_from_slice(&data);
            let _ = state.uploads.send(data);
        }
    }
    full(StatusCode::OK, "application/octet-stream", received.into())
}

/// Allowed for user `prometheus` or group `system:monitoring` (on any non-resource path);
/// `impersonate` allowed for user `carol`.
async fn subject_access_review(request: Request<Incoming>, state: &State) -> Response<Body> {
    if state
        .access_reviews_fail
        .load(std::sync::atomic::Ordering::SeqCst)
    {
        return full(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            Bytes::new(),
        );
    }
    let Ok(body) = request.into_body().collect().await else {
        return full(StatusCode::BAD_REQUEST, "text/plain", Bytes::new());
    };
    let review: serde_json::Value =
        serde_json::from_slice(&body.to_bytes()).unwrap_or(serde_json::Value::Null);
    let spec = &review["spec"];
    state.access_review_specs.lock().push(spec.clone());
    let allowed = if spec["resourceAttributes"]["verb"] == "impersonate" {
        spec["user"] == "carol"
    } else {
        spec["user"] == "prometheus"
            || spec["groups"]
                .as_array()
                .is_some_and(|groups| groups.iter().any(|g| g == "system:monitoring"))
    };
    let reason = if allowed { "RBAC: allowed" } else { "" };
    json(
        StatusCode::CREATED,
        serde_json::json!({"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {}, "spec": spec.clone(), "status": {"allowed": allowed, "reason": reason}}),
    )
}

async fn token_review(request: Request<Incoming>, state: &State) -> Response<Body> {
    let Ok(body) = request.into_body().collect().await else {
        return full(StatusCode::BAD_REQUEST, "text/plain", Bytes::new());
    };
    let review: serde_json::Value =
        serde_json::from_slice(&body.to_bytes()).unwrap_or(serde_json::Value::Null);
    let token = review["spec"]["token"].as_str().unwrap_or_default();
    let status = match state.tokens.get(token) {
        Some(user) => serde_json::json!({"authenticated": true, "user": {
            "username": user.username, "uid": user.uid, "groups": user.groups,
            "extra": user.extra}}),
        None => serde_json::json!({"authenticated": false, "error": "invalid token"}),
    };
    json(
        StatusCode::CREATED,
        serde_json::json!({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {}, "spec": review["spec"].clone(), "status": status}),
    )
}
