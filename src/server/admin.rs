//! The admin listener (`--admin-address`): `/healthz`, `/livez`, `/readyz`, and a seam for
//! `/metrics` and the `/debug/api_priority_and_fairness/*` endpoints. Plain HTTP on loopback;
//! in secure mode (`--admin-secure`) it is served by a [`super::SecureServer`] (TLS, HTTP/1.1
//! and HTTP/2) and every path but the health endpoints passes an [`AdminGate`] first
//! (authentication and authorization), as the apiserver's `system:public-info-viewer` leaves
//! only its health endpoints open.
//!
//! Mirrors the apiserver's `pkg/server/healthz/healthz.go` output: `ok` on success; with
//! `?verbose`, one `[+]check ok` line per check and `<path> check passed`; on failure, 500 with
//! `[-]check failed: reason withheld` lines and `<path> check failed` (the reason itself, such as
//! why the upstream is not ready, to a `?verbose` caller allowed to read `/metrics`). The only checks are `ping`
//! and, for `/readyz`, `upstream` and `config-source` (when the caller has them) and `shutdown`
//! (failing once shutdown starts or while the caller says not ready);
//! each is also served alone, as `/healthz/ping` or `/readyz/shutdown`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::header::{HeaderValue, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::shutdown::ShutdownSignal;
use super::{full_body, Handler, ProxyBody, ServerError};

/// Whether `/readyz` passes, and why not when it does not; shared between the admin listener and
/// whoever decides readiness.
#[derive(Debug, Clone)]
pub struct ReadyFlag(Arc<ReadyState>);

#[derive(Debug)]
struct ReadyState {
    ready: AtomicBool,
    /// Why the check fails, for `?verbose` callers allowed to see it.
    reason: parking_lot::Mutex<Option<String>>,
}

// === impl ReadyFlag ===

impl ReadyFlag {
    /// A flag with the given initial state.
    pub fn new(ready: bool) -> Self {
        Self(Arc::new(ReadyState {
            ready: AtomicBool::new(ready),
            reason: parking_lot::Mutex::new(None),
        }))
    }

    /// Sets readiness (clearing any reason).
    pub fn set(&self, ready: bool) {
        *self.reason() = None;
        self.0.ready.store(ready, Ordering::Relaxed);
    }

    /// Not ready, because of `reason` (shown by `/readyz?verbose` to callers allowed to see it).
    pub fn set_not_ready(&self, reason: String) {
        *self.reason() = Some(reason);
        self.0.ready.store(false, Ordering::Relaxed);
    }

    /// Ready, with a note on how it is degraded (shown by `/readyz?verbose` after the check's
    /// `ok`, to callers allowed to see reasons).
    pub fn set_degraded(&self, note: String) {
        *self.reason() = Some(note);
        self.0.ready.store(true, Ordering::Relaxed);
    }

    /// The note of a check that passes degraded ([`set_degraded`](Self::set_degraded)).
    pub fn degraded_note(&self) -> Option<String> {
        if !self.is_ready() {
            return None;
        }
        self.reason().clone()
    }

    /// Whether `/readyz` passes now.
    pub fn is_ready(&self) -> bool {
        self.0.ready.load(Ordering::Relaxed)
    }

    /// Why the check fails, when it does and a reason was given.
    pub fn failure_reason(&self) -> Option<String> {
        if self.is_ready() {
            return None;
        }
        self.reason().clone()
    }

    fn reason(&self) -> parking_lot::MutexGuard<'_, Option<String>> {
        self.0.reason.lock()
    }
}

/// Guards every admin path but the health endpoints (authentication, then authorization).
pub trait AdminGate: Send + Sync + 'static {
    /// `None` lets the request through; `Some(response)` answers it instead (401, 403).
    fn check(&self, request: &Request<Incoming>)
        -> BoxFuture<'static, Option<Response<ProxyBody>>>;
}

/// The gate of a secure admin listener that was given none: refuses everything but the health
/// endpoints, so that a missing authorizer can never open `/metrics` or the dumps.
#[derive(Debug)]
pub struct DenyAll;

impl AdminGate for DenyAll {
    fn check(&self, _: &Request<Incoming>) -> BoxFuture<'static, Option<Response<ProxyBody>>> {
        let response = crate::status::failure(
            http::StatusCode::FORBIDDEN,
            "Forbidden",
            "forbidden: the admin listener has no authorizer".to_string(),
        );
        Box::pin(async move { Some(response) })
    }
}

/// What the admin listener serves.
#[derive(Clone)]
pub struct AdminRoutes {
    /// The `shutdown` check of `/readyz`: false once shutdown starts.
    pub ready: ReadyFlag,
    /// The `upstream` check of `/readyz`, when the caller has one: false until the upstream has
    /// answered.
    pub upstream: Option<ReadyFlag>,
    /// The `config-source` check of `/readyz`, when the configuration comes from the cluster:
    /// false until the first list has been applied.
    pub config_source: Option<ReadyFlag>,
    /// The `coordination` check of `/readyz`, when replicas share the budget.
    pub coordination: Option<ReadyFlag>,
    /// Every path other than the health endpoints (`/metrics`, `/debug/...`); it answers 404
    /// itself for paths it does not know. Without it such paths get a 404 Status.
    pub other: Option<Arc<dyn Handler>>,
    /// Checked before `other` (secure mode); the health endpoints never pass it.
    pub gate: Option<Arc<dyn AdminGate>>,
}

impl std::fmt::Debug for AdminRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminRoutes")
            .field("ready", &self.ready)
            .field("upstream", &self.upstream)
            .field("config_source", &self.config_source)
            .field("other", &self.other.is_some())
            .field("gate", &self.gate.is_some())
            .finish()
    }
}

impl AdminRoutes {
    /// Health endpoints only.
    pub fn new(ready: ReadyFlag) -> Self {
        Self {
            ready,
            upstream: None,
            config_source: None,
            coordination: None,
            other: None,
            gate: None,
        }
    }

    /// The checks of a health endpoint (none for other paths).
    fn checks(&self, endpoint: &str) -> Vec<Check> {
        match endpoint {
            "healthz" | "livez" => vec![Check::passed("ping")],
            "readyz" => {
                let mut checks = vec![Check::passed("ping")];
                if let Some(upstream) = &self.upstream {
                    checks.push(Check::of("upstream", upstream));
                }
                if let Some(config) = &self.config_source {
                    checks.push(Check::of("config-source", config));
                }
                if let Some(coordination) = &self.coordination {
                    checks.push(Check::of("coordination", coordination));
                }
                checks.push(Check::of("shutdown", &self.ready));
                checks
            }
            _ => Vec::new(),
        }
    }

    /// Whether the caller may read why a check fails: anyone who reaches a listener without a
    /// gate (plain HTTP, loopback unless `--admin-secure=false` says otherwise, where `/metrics`
    /// is open too), and in secure mode a caller the gate lets through to `/metrics`. Others get
    /// the apiserver's `reason withheld`.
    async fn may_see_reasons(&self, request: &Request<Incoming>) -> bool {
        match &self.gate {
            None => true,
            Some(gate) => gate.check(request).await.is_none(),
        }
    }

    /// Answers one admin request.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let verbose = request.uri().query().is_some_and(|q| {
            q.split('&')
                .any(|p| p == "verbose" || p.starts_with("verbose="))
        });
        let path = request.uri().path();
        let (endpoint, check) = match path.split_once('/').map(|(_, p)| p.split_once('/')) {
            Some(Some((endpoint, check))) => (endpoint, Some(check)),
            _ => (path.trim_start_matches('/'), None),
        };
        let checks = self.checks(endpoint);
        match check {
            _ if checks.is_empty() => {}
            None => {
                let reasons = verbose && checks.iter().any(|c| c.reason.is_some());
                let shown = reasons && self.may_see_reasons(&request).await;
                return health(endpoint, &checks, verbose, shown);
            }
            Some(name) => {
                if let Some(found) = checks.iter().find(|c| c.name == name) {
                    return single_check(name, found.passed);
                }
            }
        }
        if let Some(gate) = &self.gate {
            if let Some(refusal) = gate.check(&request).await {
                return refusal;
            }
        }
        match &self.other {
            Some(other) => other.handle(request).await,
            None => not_found(),
        }
    }
}

/// `/<endpoint>/<check>`: one check alone, as the apiserver serves it.
fn single_check(name: &str, passed: bool) -> Response<ProxyBody> {
    if passed {
        text(StatusCode::OK, "ok".to_owned())
    } else {
        text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {name} check failed\n"),
        )
    }
}

/// One check of a health endpoint.
#[derive(Debug)]
struct Check {
    name: &'static str,
    passed: bool,
    /// Why it fails, or, for a check that passes degraded, how.
    reason: Option<String>,
}

impl Check {
    fn passed(name: &'static str) -> Self {
        Check {
            name,
            passed: true,
            reason: None,
        }
    }

    fn of(name: &'static str, flag: &ReadyFlag) -> Self {
        Check {
            name,
            passed: flag.is_ready(),
            reason: flag.failure_reason().or_else(|| flag.degraded_note()),
        }
    }
}

/// A health endpoint's answer for the given checks; `show_reasons` replaces the apiserver's
/// `reason withheld` with the check's reason where it has one.
fn health(path: &str, checks: &[Check], verbose: bool, show_reasons: bool) -> Response<ProxyBody> {
    let passed = checks.iter().all(|c| c.passed);
    if passed && !verbose {
        return text(StatusCode::OK, "ok".to_owned());
    }
    let mut body = String::new();
    for check in checks {
        let name = check.name;
        if check.passed {
            match &check.reason {
                Some(note) if verbose && show_reasons => {
                    body.push_str(&format!("[+]{name} ok: {}\n", note.replace('\n', " ")))
                }
                _ if verbose => body.push_str(&format!("[+]{name} ok\n")),
                _ => {}
            }
        } else {
            let reason = match &check.reason {
                Some(reason) if show_reasons => reason.replace('\n', " "),
                _ => "reason withheld".to_owned(),
            };
            body.push_str(&format!("[-]{name} failed: {reason}\n"));
        }
    }
    if passed {
        body.push_str(&format!("{path} check passed\n"));
        text(StatusCode::OK, body)
    } else {
        // Go's http.Error appends a newline.
        body.push_str(&format!("{path} check failed\n"));
        text(StatusCode::INTERNAL_SERVER_ERROR, body)
    }
}

fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(full_body(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// The apiserver's 404: a `Status` with reason `NotFound`.
pub fn not_found() -> Response<ProxyBody> {
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    });
    let mut response = Response::new(full_body(Bytes::from(status.to_string())));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// How long admin clients have to send headers; the endpoints are cheap, so this is short.
const ADMIN_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long admin connections may take to finish after shutdown.
const ADMIN_GRACE_PERIOD: Duration = Duration::from_secs(5);

/// A bound admin listener.
#[derive(Debug)]
pub struct AdminServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    routes: Arc<AdminRoutes>,
}

impl AdminServer {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(addr: SocketAddr, routes: AdminRoutes) -> Result<Self, ServerError> {
        let (listener, local_addr) = super::listener::bind_tcp(addr).await?;
        Ok(Self {
            listener,
            local_addr,
            routes: Arc::new(routes),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves HTTP/1.1 until `shutdown`, then lets open requests finish for a few seconds.
    pub async fn serve(self, mut shutdown: ShutdownSignal) {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(ADMIN_HEADER_READ_TIMEOUT);
        let mut connections = JoinSet::new();
        tracing::info!(address = %self.local_addr, "Serving admin endpoints");
        loop {
            let (stream, _) = tokio::select! {
                biased;
                () = shutdown.triggered() => break,
                Some(_) = connections.join_next() => continue,
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        tracing::warn!(error = %err, "Accepting an admin connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let routes = self.routes.clone();
            let conn = builder.serve_connection(
                TokioIo::new(stream),
                hyper::service::service_fn(move |request| {
                    let routes = routes.clone();
                    async move { Ok::<_, std::convert::Infallible>(routes.handle(request).await) }
                }),
            );
            let mut signal = shutdown.clone();
            connections.spawn(async move {
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => return,
                    () = signal.triggered() => conn.as_mut().graceful_shutdown(),
                }
                let _ = conn.await;
            });
        }
        drop(self.listener);
        let drained = tokio::time::timeout(ADMIN_GRACE_PERIOD, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            connections.shutdown().await;
        }
    }
}
