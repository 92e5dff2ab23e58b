//! Assembly: the serve flags and a configuration turned into a running proxy.
//!
//! The one place that knows every part: it builds the upstream client, the authenticator, the
//! flow controller, the work estimator and the pipeline, starts the listeners and the periodic
//! tasks (borrowing adjustment every 10 s, object counts from the upstream's metrics).

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request};
use http_body_util::{BodyExt, Limited};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::auth::{AuthConfig, Authenticator, RequestHeaderConfig, TokenReviewConfig};
use crate::config::Config;
use crate::fairqueue::borrowing::BORROWING_ADJUSTMENT_PERIOD;
use crate::fairqueue::controller::FlowControl;
use crate::fairqueue::work_estimate::WorkEstimator;
use crate::proxy::{
    empty_body, Forwarder, ForwarderConfig, Proxy, UpstreamAuth, UpstreamClient, UpstreamConfig,
};
use crate::server::{self, ReadyFlag, Running, ServeOptions, ServeParts};

/// How often the upstream's `/metrics` is read for object counts (the apiserver updates its
/// own counts about once a minute).
pub const OBJECT_COUNT_REFRESH: Duration = Duration::from_secs(60);

/// Largest `/metrics` answer read from the upstream.
const MAX_UPSTREAM_METRICS: usize = 64 * 1024 * 1024;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The upstream flags, kubeconfig or in-cluster environment are unusable.
    #[error("upstream: {0}")]
    Upstream(#[from] crate::proxy::UpstreamConfigError),
    /// The identity-forwarding mode lacks the credentials it needs.
    #[error("identity forwarding: {0}")]
    Forwarding(#[from] crate::proxy::ForwarderConfigError),
    /// The authentication flags are unusable (unreadable CA or token file, ...).
    #[error("authentication: {0}")]
    Auth(#[from] crate::auth::AuthConfigError),
    /// Flow control cannot be built (e.g. a server concurrency limit of 0).
    #[error("flow control: {0}")]
    FlowControl(#[from] crate::fairqueue::controller::FlowControlError),
    /// The listeners could not start.
    #[error(transparent)]
    Server(#[from] server::ServerError),
}

/// A running proxy: its listeners, its pipeline and its background tasks.
#[derive(Debug)]
pub struct App {
    running: Running,
    proxy: Arc<Proxy>,
    tasks: Vec<JoinHandle<()>>,
}

impl App {
    /// Builds every part from `opts` and `config` and starts serving.
    pub async fn start(opts: ServeOptions, config: &Config) -> Result<App, StartError> {
        let upstream = UpstreamClient::new(UpstreamConfig::from_serve_options(&opts).resolve()?)?;
        let authenticator = Arc::new(Authenticator::new(auth_config(&opts, &upstream))?);
        let forwarder =
            Forwarder::new(upstream.clone(), ForwarderConfig::from_serve_options(&opts))?;
        let (flow_control, problems) =
            FlowControl::new(config, opts.server_concurrency_limit(), Instant::now())?;
        for problem in problems {
            tracing::warn!(%problem, "Priority level not served");
        }
        let flow_control = Arc::new(flow_control);
        let estimator = WorkEstimator::default();
        let proxy = Arc::new(Proxy::new(
            Arc::clone(&authenticator),
            Arc::clone(&flow_control),
            estimator.clone(),
            forwarder,
            opts.request_timeout,
        ));
        let handler_proxy = Arc::clone(&proxy);
        let handler: Arc<dyn server::Handler> = Arc::new(move |request| {
            let proxy = Arc::clone(&handler_proxy);
            async move { proxy.handle(request).await }
        });
        let parts = ServeParts {
            handler,
            client_ca_roots: Some(authenticator.client_ca_roots()),
            admin_routes: None,
            ready: ReadyFlag::new(true),
        };
        let running = server::start(opts, parts).await?;
        let tasks = vec![
            tokio::spawn(adjust_borrowing(flow_control)),
            tokio::spawn(refresh_object_counts(upstream, estimator)),
        ];
        tracing::info!(
            secure = %running.secure_addr(),
            admin = %running.admin_addr(),
            "Serving"
        );
        Ok(App {
            running,
            proxy,
            tasks,
        })
    }

    /// The listeners (addresses, TLS).
    pub fn running(&self) -> &Running {
        &self.running
    }

    /// The pipeline (flow controller, work estimator).
    pub fn proxy(&self) -> &Arc<Proxy> {
        &self.proxy
    }

    /// Shuts down as [`Running::terminate`] describes and waits for the listeners to stop.
    pub async fn shutdown(self) {
        self.running.terminate();
        self.running.wait().await;
        for task in self.tasks {
            task.abort();
        }
    }
}

/// The authenticator's settings from the serve flags; TokenReviews go through `upstream`.
fn auth_config(opts: &ServeOptions, upstream: &UpstreamClient) -> AuthConfig {
    let token_review = opts.authentication_token_webhook.then(|| {
        let mut review = TokenReviewConfig::new(Arc::new(upstream.clone()));
        review.success_cache_ttl = opts.authentication_token_webhook_cache_ttl;
        review.failure_cache_ttl = opts.authentication_token_webhook_cache_ttl;
        review
    });
    let request_header = opts
        .requestheader_client_ca_file
        .as_ref()
        .map(|ca| RequestHeaderConfig {
            client_ca_file: ca.clone(),
            allowed_names: opts.requestheader_allowed_names.clone(),
            username_headers: opts.requestheader_username_headers.clone(),
            uid_headers: opts.requestheader_uid_headers.clone(),
            group_headers: opts.requestheader_group_headers.clone(),
            extra_headers_prefixes: opts.requestheader_extra_headers_prefix.clone(),
        });
    AuthConfig {
        client_ca_file: opts.client_ca_file.clone(),
        token_auth_file: opts.token_auth_file.clone(),
        token_review,
        request_header,
        anonymous: opts.anonymous_auth,
        api_audiences: Vec::new(),
    }
}

/// Every 10 s: re-allocate concurrency limits from seat demand (`updateBorrowingLocked`).
async fn adjust_borrowing(flow_control: Arc<FlowControl>) {
    let mut ticks = tokio::time::interval(BORROWING_ADJUSTMENT_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let now = ticks.tick().await;
        let outcome = flow_control.adjust_borrowing(now);
        if let Some(error) = outcome.error {
            tracing::warn!(%error, "Concurrency allocation failed; limits kept");
        }
    }
}

/// Every minute: read object counts from the upstream's `/metrics` with the proxy's own
/// credentials. Without them (no access, or an old upstream) list and watch requests cost what
/// the apiserver charges for unknown resources.
async fn refresh_object_counts(upstream: UpstreamClient, estimator: WorkEstimator) {
    let mut ticks = tokio::time::interval(OBJECT_COUNT_REFRESH);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let now = ticks.tick().await;
        match scrape_metrics(&upstream).await {
            Ok(text) => {
                let resources = estimator.objects().apply_metrics(&text, now);
                tracing::debug!(resources, "Object counts refreshed from the upstream");
            }
            Err(error) => tracing::debug!(%error, "Object counts not refreshed"),
        }
        estimator.objects().prune(now);
    }
}

async fn scrape_metrics(upstream: &UpstreamClient) -> Result<String, crate::proxy::BoxError> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(upstream.uri_for("/metrics")?)
        .body(empty_body())?;
    let response = upstream.send(request, UpstreamAuth::Proxy, false).await?;
    if !response.status().is_success() {
        return Err(format!("upstream /metrics answered {}", response.status()).into());
    }
    let body = Limited::new(response.into_body(), MAX_UPSTREAM_METRICS)
        .collect()
        .await?;
    Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
}
