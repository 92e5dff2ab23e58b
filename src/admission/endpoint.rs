//! The webhook over HTTPS: `POST /validate`, `/healthz`, `/readyz`, `/metrics`, on the proxy's
//! own TLS listener ([`SecureServer`]), with the certificate and the reference configuration
//! reloaded when their files change.

use parking_lot::RwLock;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use tokio::sync::Semaphore;

use super::metrics::{AdmissionMetrics, ReviewResult};
use super::{parse_review, ReviewResponse, Reviewer};
use crate::body::{full_body, BoxError, ProxyBody};
use crate::config::load::{read_dir, SourceFile};
use crate::config::parse::Format;
use crate::file_watch::{dir_digest, files_digest, poll_ticks};
use crate::lint::LintOptions;
use crate::server::tls::TlsMinVersion;
use crate::server::{
    build_server_tls, ConnectionLimits, SecureServer, ServerTls, ShutdownSignal, TlsSettings,
};

/// The largest request body read: an AdmissionReview holds the object and, on UPDATE, the old
/// one; the apiserver stores objects of at most about 1.5 MiB (3 MiB request bodies).
pub const MAX_BODY_BYTES: usize = 8 << 20;

/// Reviews judged at once; more wait for a turn (until their deadline, then 429). Judging runs
/// on blocking threads, never on the async workers that answer `/healthz` and accept
/// connections, and one review can take tens of MB at worst (`config::parse::prescan`) against
/// the shipped Deployment's 128 Mi.
pub const MAX_CONCURRENT_REVIEWS: usize = 2;

/// The time a review has from its arrival to its answer: the `timeoutSeconds` of the shipped
/// `ValidatingWebhookConfiguration` (`deploy/webhook/validatingwebhook.yaml`, 5 s; the API's
/// default is 10 s), after which the apiserver has stopped waiting (its `failurePolicy` decides)
/// and an answer would be wasted work.
pub const REVIEW_DEADLINE: Duration = Duration::from_secs(5);

/// What the webhook is built from (the command line maps `webhook`'s flags onto it).
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The address to listen on.
    pub bind_address: IpAddr,
    /// The HTTPS port (0: a free one).
    pub secure_port: u16,
    /// The serving certificate (PEM chain), reloaded when it changes; with the key, or neither
    /// for a self-signed certificate.
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    pub tls_private_key_file: Option<PathBuf>,
    /// The reference configuration single objects are judged against; the embedded default
    /// configuration without it. Reloaded when it changes.
    pub config_dir: Option<PathBuf>,
    /// `(key, value)`: the label of the ConfigMaps that hold the proxy's configuration.
    pub configmap_label: (String, String),
    /// The proxy's limits and the checks' parameters, for the level findings.
    pub lint: LintOptions,
}

impl WebhookConfig {
    /// The reference configuration's files.
    fn base_files(&self) -> Result<Vec<SourceFile>, crate::config::ConfigError> {
        match &self.config_dir {
            Some(dir) => read_dir(dir),
            None => Ok(vec![SourceFile {
                name: "<embedded>/bootstrap.yaml".to_string(),
                bytes: crate::config::BOOTSTRAP_YAML.as_bytes().to_vec(),
                format: Format::Yaml,
            }]),
        }
    }

    fn reviewer(&self) -> Result<Reviewer, crate::config::ConfigError> {
        Reviewer::new(
            self.base_files()?,
            self.lint.clone(),
            self.configmap_label.clone(),
        )
    }
}

/// What the handler shares: the reviewer in force and the metrics.
#[derive(Debug)]
pub struct WebhookState {
    reviewer: RwLock<Arc<Reviewer>>,
    metrics: Arc<AdmissionMetrics>,
    /// Turns to judge a review ([`MAX_CONCURRENT_REVIEWS`]).
    turns: Arc<Semaphore>,
    /// [`REVIEW_DEADLINE`].
    deadline: Duration,
}

impl WebhookState {
    /// A state around one reviewer, with [`MAX_CONCURRENT_REVIEWS`] and [`REVIEW_DEADLINE`].
    pub fn new(reviewer: Reviewer, metrics: Arc<AdmissionMetrics>) -> Arc<WebhookState> {
        Self::with_limits(reviewer, metrics, MAX_CONCURRENT_REVIEWS, REVIEW_DEADLINE)
    }

    /// A state judging at most `concurrency` reviews at once, each answered within `deadline`.
    pub fn with_limits(
        reviewer: Reviewer,
        metrics: Arc<AdmissionMetrics>,
        concurrency: usize,
        deadline: Duration,
    ) -> Arc<WebhookState> {
        Arc::new(WebhookState {
            reviewer: RwLock::new(Arc::new(reviewer)),
            metrics,
            turns: Arc::new(Semaphore::new(concurrency)),
            deadline,
        })
    }

    fn reviewer(&self) -> Arc<Reviewer> {
        Arc::clone(&self.reviewer.read())
    }

    fn replace(&self, reviewer: Reviewer) {
        *self.reviewer.write() = Arc::new(reviewer);
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<AdmissionMetrics> {
        &self.metrics
    }
}

fn response(code: StatusCode, content_type: &'static str, body: Bytes) -> Response<ProxyBody> {
    let mut response = Response::new(full_body(body));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// A `Status` failure body, as the apiserver writes one.
fn status(code: StatusCode, reason: &str, message: String) -> Response<ProxyBody> {
    let status = Status {
        status: Some("Failure".to_string()),
        message: Some(message),
        reason: Some(reason.to_string()),
        code: Some(i32::from(code.as_u16())),
        ..Default::default()
    };
    let body = serde_json::to_vec(&status).unwrap_or_default();
    response(code, "application/json", Bytes::from(body))
}

/// Answers one HTTP request.
pub async fn handle<B>(state: Arc<WebhookState>, request: Request<B>) -> Response<ProxyBody>
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    let text = |s: &'static str| {
        response(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            Bytes::from_static(s.as_bytes()),
        )
    };
    match (request.method(), request.uri().path()) {
        (&Method::POST, "/validate") => validate(&state, request.into_body()).await,
        (_, "/validate") => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "POST an admission.k8s.io/v1 AdmissionReview to /validate".to_string(),
        ),
        (&Method::GET, "/healthz" | "/readyz" | "/livez") => text("ok"),
        (&Method::GET, "/metrics") => response(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            Bytes::from(state.metrics.encode()),
        ),
        _ => crate::server::not_found(),
    }
}

/// One review, within its deadline: a turn (at most [`MAX_CONCURRENT_REVIEWS`] at once), the
/// body (at most [`MAX_BODY_BYTES`]), then the judging on a blocking thread.
async fn validate<B>(state: &Arc<WebhookState>, body: B) -> Response<ProxyBody>
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    let deadline = tokio::time::Instant::now() + state.deadline;
    // Waiting for a turn holds no body: only the connection's own buffers.
    let turn = tokio::time::timeout_at(deadline, Arc::clone(&state.turns).acquire_owned()).await;
    let Ok(Ok(turn)) = turn else {
        state.metrics.error("busy");
        let mut busy = status(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            format!(
                "{MAX_CONCURRENT_REVIEWS} reviews are being judged and none finished within {:?}; retry",
                state.deadline
            ),
        );
        busy.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(1u32));
        return busy;
    };
    let timed_out = || {
        state.metrics.error("deadline");
        status(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("the review did not complete within {:?}", state.deadline),
        )
    };
    let body = match tokio::time::timeout_at(deadline, read_body(state, body)).await {
        Ok(Ok(body)) => body,
        Ok(Err(refused)) => return refused,
        Err(_) => return timed_out(),
    };
    let judging = {
        let state = Arc::clone(state);
        // The turn goes with the judging: a review past its deadline still holds it until its
        // thread is done, so no more than MAX_CONCURRENT_REVIEWS ever run.
        tokio::task::spawn_blocking(move || {
            let answer = review_bytes(&state, &body);
            drop(turn);
            answer
        })
    };
    let started = tokio::time::Instant::now();
    let (code, bytes) = match tokio::time::timeout_at(deadline, judging).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(panicked)) => {
            state.metrics.error("internal");
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                format!("the review failed: {panicked}"),
            );
        }
        Err(_) => return timed_out(),
    };
    if code != StatusCode::OK {
        return status(
            code,
            "BadRequest",
            String::from_utf8_lossy(&bytes).into_owned(),
        );
    }
    tracing::debug!(
        took_us = started.elapsed().as_micros() as u64,
        "AdmissionReview answered"
    );
    response(StatusCode::OK, "application/json", bytes)
}

/// The body, at most [`MAX_BODY_BYTES`]; a `Status` response when it is refused.
async fn read_body<B>(state: &WebhookState, body: B) -> Result<Bytes, Response<ProxyBody>>
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    match http_body_util::Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            state.metrics.error("too_large");
            let message = format!(
                "the AdmissionReview is larger than {} MiB",
                MAX_BODY_BYTES >> 20
            );
            Err(status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                message,
            ))
        }
        Err(e) => {
            state.metrics.error("body");
            Err(status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("reading the body: {e}"),
            ))
        }
    }
}

/// Judges one body: `200` with the answering AdmissionReview, or `400` with the reason.
pub fn review_bytes(state: &WebhookState, body: &[u8]) -> (StatusCode, Bytes) {
    let started = tokio::time::Instant::now();
    let request = match parse_review(body) {
        Ok(request) => request,
        Err(e) => {
            state.metrics.error(e.reason());
            tracing::info!(
                reason = e.reason(),
                "Refused a body that is not an answerable AdmissionReview"
            );
            return (StatusCode::BAD_REQUEST, Bytes::from(e.to_string()));
        }
    };
    let answer = state.reviewer().review(&request);
    let result = match (answer.allowed, answer.warnings.is_empty()) {
        (false, _) => ReviewResult::Denied,
        (true, false) => ReviewResult::Warned,
        (true, true) => ReviewResult::Allowed,
    };
    state.metrics.review(result, started.elapsed());
    tracing::info!(
        uid = %request.uid,
        operation = %request.operation,
        resource = %request.resource.resource,
        name = %request.name,
        allowed = answer.allowed,
        warnings = answer.warnings.len(),
        dry_run = request.dry_run.unwrap_or(false),
        "AdmissionReview"
    );
    match serde_json::to_vec(&ReviewResponse::from(answer)) {
        Ok(bytes) => (StatusCode::OK, Bytes::from(bytes)),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Bytes::from(e.to_string()),
        ),
    }
}

/// A bound webhook, ready to serve.
#[derive(Debug)]
pub struct Webhook {
    server: SecureServer,
    tls: ServerTls,
    state: Arc<WebhookState>,
    config: WebhookConfig,
}

/// Why the webhook could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The reference configuration does not load.
    #[error("the reference configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// The listener or its TLS configuration.
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
}

impl Webhook {
    /// Loads the reference configuration, builds TLS and binds the port (0: a free one).
    pub async fn bind(config: WebhookConfig) -> Result<Webhook, WebhookError> {
        let reviewer = config.reviewer()?;
        let tls = build_server_tls(&TlsSettings {
            cert_file: config.tls_cert_file.clone(),
            key_file: config.tls_private_key_file.clone(),
            min_version: TlsMinVersion::Tls12,
            cipher_suites: Vec::new(),
            client_ca_roots: Vec::new(),
        })
        .map_err(crate::server::ServerError::from)?;
        let addr = SocketAddr::new(config.bind_address, config.secure_port);
        let server =
            SecureServer::bind(addr, tls.cell.clone(), ConnectionLimits::default()).await?;
        let state = WebhookState::new(reviewer, AdmissionMetrics::new());
        Ok(Webhook {
            server,
            tls,
            state,
            config,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The self-signed certificate, when no files were given.
    pub fn self_signed_cert(&self) -> Option<rustls_pki_types::CertificateDer<'static>> {
        self.tls.self_signed_cert.clone()
    }

    /// The shared state (metrics, reviewer).
    pub fn state(&self) -> &Arc<WebhookState> {
        &self.state
    }

    /// Serves until `shutdown`, reloading the certificate and configuration as they change.
    pub async fn run(self, shutdown: ShutdownSignal) {
        let state = self.state.clone();
        let handler = move |request: Request<hyper::body::Incoming>| handle(state.clone(), request);
        let reloads = tokio::spawn(watch(self.config, self.tls, self.state.clone()));
        tracing::info!(addr = %self.server.local_addr(), "Admission webhook serving");
        self.server.serve(Arc::new(handler), shutdown).await;
        reloads.abort();
    }
}

/// Polls the certificate and configuration files; a changed, valid configuration replaces the
/// reviewer (an invalid one is logged and counted, and the last good one stays).
async fn watch(config: WebhookConfig, tls: ServerTls, state: Arc<WebhookState>) {
    let cert_files: Vec<PathBuf> = config
        .tls_cert_file
        .iter()
        .chain(&config.tls_private_key_file)
        .cloned()
        .collect();
    let mut cert_digest = files_digest(&cert_files);
    let mut config_digest = config.config_dir.as_deref().map(dir_digest);
    let mut ticks = poll_ticks();
    loop {
        ticks.tick().await;
        let now = files_digest(&cert_files);
        if now != cert_digest {
            cert_digest = now;
            if let Err(error) = tls.reload() {
                tracing::error!(%error, "Serving certificate reload failed; the current one stays");
            }
        }
        let Some(dir) = &config.config_dir else {
            continue;
        };
        let now = Some(dir_digest(dir));
        if now == config_digest {
            continue;
        }
        config_digest = now;
        let Ok(files) = read_dir(dir) else { continue };
        match Reviewer::new(files, config.lint.clone(), config.configmap_label.clone()) {
            Ok(reviewer) => {
                state.replace(reviewer);
                state.metrics.reload(true);
                tracing::info!(dir = %dir.display(), "Reference configuration reloaded");
            }
            Err(error) => {
                state.metrics.reload(false);
                tracing::error!(%error, "Reference configuration invalid; the last good one stays");
            }
        }
    }
}

/// `kube-apf-proxy webhook`: serves until SIGTERM or Ctrl-C.
pub async fn serve(config: WebhookConfig) -> Result<(), WebhookError> {
    let webhook = Webhook::bind(config).await?;
    let (trigger, signal) = crate::server::shutdown_channel();
    let running = tokio::spawn(webhook.run(signal));
    crate::server::wait_for_termination().await;
    trigger.trigger();
    let _ = running.await;
    Ok(())
}

#[cfg(test)]
mod tests;
