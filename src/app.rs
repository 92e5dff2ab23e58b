//! Assembly: a [`ServeConfig`] (each room's plain config, which the command line maps from the
//! serve flags) and a flow-control configuration turned into a running proxy.
//!
//! The one place that knows every part: it builds the upstream client, the authenticator, the
//! flow controller, the work estimator and the pipeline, starts the listeners and the periodic
//! tasks (borrowing adjustment every 10 s, object counts from the upstream's metrics, readiness,
//! hot reload). One [`Metrics`] registry is made here and handed to every part that reports.
//!
//! The admin listener serves `/metrics` and the debug dumps without authentication on loopback
//! (`127.0.0.1:8081`, the default), like the apiserver's insecure debug sockets; bound anywhere
//! else it is secure by default (`--admin-secure`): HTTPS, the proxy's authenticators and a
//! SubjectAccessReview per path ([`AdminGuard`]).

mod admin_gate;
mod admin_routes;
mod config;
mod drain;
mod readiness;
mod reload;
mod replicas;

pub use admin_gate::AdminGuard;
pub use admin_routes::{level_rows, queue_rows, request_rows, AdminPaths, DEBUG_PREFIX};
pub use config::{FlowControlConfig, ServeConfig};
pub use drain::DrainableBody;
pub use readiness::{wait_for_upstream, Readiness, PROBE_INTERVAL};
pub use reload::{ReloadError, Reloader};

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use http::{Method, Request};
use http_body_util::{BodyExt, Limited};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::auth::authorize::{AccessReviewTransport, Authorizer};
use crate::auth::{AuthConfig, Authenticator, TokenReviewConfig};
use crate::body::empty_body;
use crate::config::Config;
use crate::config_source::{ClusterSource, SourceMetrics};
use crate::coordination::Coordinator;
use crate::fairqueue::borrowing::{
    concurrency_denominator, BorrowingOutcome, BORROWING_ADJUSTMENT_PERIOD,
};
use crate::fairqueue::controller::FlowControl;
use crate::fairqueue::level_queues::LevelObserver;
use crate::fairqueue::shadow::{self, Shadow, ShadowMetrics};
use crate::fairqueue::work_estimate::WorkEstimator;
use crate::metrics::Metrics;
use crate::proxy::{Forwarder, Proxy, WatchStream};
use crate::server::{
    self, shutdown_channel, ConnectionInfo, ProxyBody, Running, ServeParts, ShutdownSignal,
    ShutdownTrigger,
};
use crate::upstream::Route;
use crate::upstream::{UpstreamAuth, UpstreamClient};

/// How often the upstream's `/metrics` is read for object counts (the apiserver updates its
/// own counts about once a minute).
pub const OBJECT_COUNT_REFRESH: Duration = Duration::from_secs(60);

/// How long a graceful shutdown waits to give the Lease up.
const LEASE_RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

/// Largest `/metrics` answer read from the upstream.
const MAX_UPSTREAM_METRICS: usize = 64 * 1024 * 1024;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The upstream flags, kubeconfig or in-cluster environment are unusable.
    #[error("upstream: {0}")]
    Upstream(#[from] crate::upstream::UpstreamConfigError),
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
    /// The SubjectAccessReview authorizer (admin listener, callers' impersonation) cannot be built.
    #[error("admin authorization: {0}")]
    AdminAuthorizer(String),
    /// A metrics collector could not be registered.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The coordination flags are unusable.
    #[error("{0}")]
    Coordination(#[from] crate::coordination::CoordinationConfigError),
}

/// A running proxy: its listeners, its pipeline and its background tasks.
#[derive(Debug)]
pub struct App {
    running: Running,
    proxy: Arc<Proxy>,
    metrics: Arc<Metrics>,
    ready: Readiness,
    reloader: Reloader,
    end_watches: ShutdownTrigger,
    shutdown_delay: Duration,
    readiness: JoinHandle<()>,
    tasks: Vec<JoinHandle<()>>,
    /// `--coordination-namespace`: the coordinator and its task.
    coordination: Option<(Arc<Coordinator>, JoinHandle<()>)>,
}

impl App {
    /// Builds every part from `settings` and `config` and starts serving, with a fresh registry.
    pub async fn start(settings: ServeConfig, config: &Config) -> Result<App, StartError> {
        Self::start_with_metrics(settings, config, Metrics::new()).await
    }

    /// [`start`](Self::start), reporting to `metrics`.
    pub async fn start_with_metrics(
        settings: ServeConfig,
        config: &Config,
        metrics: Arc<Metrics>,
    ) -> Result<App, StartError> {
        let ServeConfig {
            server: server_config,
            auth,
            token_review_cache_ttl,
            admin_authorizer,
            upstream,
            upstream_limits,
            forwarder,
            flow_control: flow,
            coordination,
        } = settings;
        let upstream = UpstreamClient::with_limits(upstream.resolve()?, upstream_limits)?;
        metrics.register_upstream_stats(upstream.stats())?;
        let auth = with_token_review(auth, token_review_cache_ttl, &upstream);
        let authenticator = Arc::new(Authenticator::new(auth)?);
        metrics.register_auth_stats(Arc::clone(authenticator.stats()))?;
        if let Some(plugin) = upstream.exec_plugin() {
            metrics.register_exec_plugin(plugin)?;
        }
        let forwarder = Forwarder::new(upstream.clone(), forwarder)?;
        let observer: Arc<dyn LevelObserver> = metrics.clone();
        let server_cl = flow.server_concurrency_limit;
        let (flow_control, problems) =
            FlowControl::with_observer(config, server_cl, Instant::now(), Some(observer))?;
        for problem in problems {
            tracing::warn!(%problem, "Priority level not served");
        }
        let flow_control = Arc::new(flow_control);
        publish_limits(&metrics, &flow_control, None);
        let coordination = coordination
            .map(|c| replicas::coordinator(c, &upstream, &flow_control, &metrics))
            .transpose()?;
        // Weak: the levels report to `metrics`, which must not keep them alive.
        let levels = Arc::downgrade(&flow_control);
        metrics.on_scrape(move |metrics| {
            if let Some(flow_control) = levels.upgrade() {
                publish_queue_set_readings(metrics, &flow_control);
            }
        });
        let estimator = WorkEstimator::default();
        let shadows = shadows(&flow, config, &estimator, &metrics)?;
        // One authorizer, one cache: the admin listener's callers and callers' own
        // `Impersonate-*` headers are both judged by SubjectAccessReviews against the upstream.
        let transport: Arc<dyn AccessReviewTransport> = Arc::new(upstream.clone());
        let authorizer = Arc::new(
            Authorizer::new(transport, admin_authorizer).map_err(StartError::AdminAuthorizer)?,
        );
        let mut proxy = Proxy::new(
            Arc::clone(&authenticator),
            Arc::clone(&flow_control),
            estimator.clone(),
            forwarder,
            flow.request_timeout,
        )
        .with_max_request_bytes(flow.max_request_bytes)
        .with_metrics(Arc::clone(&metrics))
        .with_dry_run(flow.dry_run)
        .with_authorizer(Arc::clone(&authorizer));
        for shadow in &shadows {
            proxy = proxy.with_shadow(Arc::clone(shadow));
        }
        let proxy = Arc::new(proxy);
        let admin_gate = if server_config.admin_secure {
            Some(admin_gate(authorizer, &authenticator, &metrics)?)
        } else {
            None
        };
        let (end_watches, watches_end) = shutdown_channel();
        let mut ready = if flow.from_cluster {
            Readiness::with_config_source()
        } else {
            Readiness::new()
        };
        ready.coordination = coordination.as_ref().map(|(_, flag)| flag.clone());
        let mut admin_paths = AdminPaths::new(Arc::clone(&metrics), Arc::clone(&flow_control))
            .with_shadows(&shadows)
            .with_rejections(Arc::clone(proxy.rejections()));
        if let Some((coordinator, _)) = &coordination {
            admin_paths = admin_paths.with_coordination(Arc::clone(coordinator));
        }
        let parts = ServeParts {
            handler: secure_handler(Arc::clone(&proxy), watches_end),
            client_ca_roots: Some(authenticator.client_ca_roots()),
            admin_routes: Some(admin_handler(admin_paths)),
            ready: ready.serving.clone(),
            upstream_ready: Some(ready.upstream.clone()),
            admin_gate,
            config_ready: ready.config_source.clone(),
            coordination_ready: ready.coordination.clone(),
        };
        let shutdown_delay = server_config.shutdown_delay;
        let cert_files = server_config.cert_files();
        let ca_files = server_config
            .client_ca_files
            .named()
            .map(|(_, path)| path.to_path_buf())
            .collect();
        let running = server::start(server_config, parts).await?;
        metrics.register_server_stats(running.stats())?;
        let reloader = Reloader {
            flow_control: Arc::clone(&flow_control),
            metrics: Arc::clone(&metrics),
            config_dir: flow.config_dir,
            tls: running.tls().clone(),
            admin_tls: running.admin_tls().cloned(),
            cert_files,
            authenticator: Arc::clone(&authenticator),
            ca_files,
            shadows: shadows.clone(),
        };
        reloader.publish_certificate_expiry();
        let mut tasks = vec![
            tokio::spawn(adjust_borrowing(flow_control, Arc::clone(&metrics))),
            tokio::spawn(refresh_object_counts(upstream.clone(), estimator)),
            tokio::spawn(reloader.clone().run()),
        ];
        for shadow in shadows {
            tasks.push(tokio::spawn(shadow.adjust_borrowing()));
        }
        if let Some(config_ready) = &ready.config_source {
            let source_metrics = SourceMetrics::register(metrics.registry())?;
            let source = ClusterSource::new(
                upstream.clone(),
                Arc::new(reloader.clone()),
                config_ready.clone(),
                source_metrics,
            );
            tasks.push(tokio::spawn(source.run()));
        }
        let coordination = coordination.map(|(coordinator, _)| {
            let task = tokio::spawn(Arc::clone(&coordinator).run());
            (coordinator, task)
        });
        let readiness = tokio::spawn(wait_for_upstream(upstream, ready.upstream.clone()));
        tracing::info!(
            secure = %running.secure_addr(),
            admin = %running.admin_addr(),
            "Serving"
        );
        Ok(App {
            running,
            proxy,
            metrics,
            ready,
            reloader,
            end_watches,
            shutdown_delay,
            readiness,
            tasks,
            coordination,
        })
    }

    /// Stops taking part in the coordination without giving the Lease up, as a replica that is
    /// killed does (its peers take its share back once its Lease expires); it keeps its limit.
    /// For tests of a crash without a separate process.
    #[doc(hidden)]
    pub async fn abandon_lease(&mut self) {
        if let Some((_, task)) = self.coordination.take() {
            task.abort();
            let _ = task.await;
        }
    }

    /// The listeners (addresses, TLS).
    pub fn running(&self) -> &Running {
        &self.running
    }

    /// The pipeline (flow controller, work estimator).
    pub fn proxy(&self) -> &Arc<Proxy> {
        &self.proxy
    }

    /// The registry every part reports to.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The readiness behind `/readyz`: the upstream has answered and shutdown has not started.
    pub fn ready(&self) -> &Readiness {
        &self.ready
    }

    /// The configuration and certificate reloader (what SIGHUP and file changes run).
    pub fn reloader(&self) -> &Reloader {
        &self.reloader
    }

    /// Shuts down as the apiserver does on SIGTERM and waits until everything has stopped:
    /// `/readyz` fails at once; requests are still accepted for `--shutdown-delay-duration`; then
    /// the secure listener closes, open watches end cleanly, and executing and queued requests
    /// get `--shutdown-grace-period` to finish; the admin listener goes last.
    pub async fn shutdown(self) {
        // The share goes back to the other replicas first: they take it at once.
        if let Some((coordinator, task)) = self.coordination {
            task.abort();
            let _ = task.await;
            coordinator.release(LEASE_RELEASE_TIMEOUT).await;
        }
        // Readiness must not come back once draining has started: the probe is stopped (and
        // waited for) before `/readyz` turns false.
        self.readiness.abort();
        let _ = self.readiness.await;
        self.running.terminate();
        let end_watches = self.end_watches;
        let delay = self.shutdown_delay;
        let watches = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            end_watches.trigger();
        });
        self.running.wait().await;
        watches.abort();
        for task in self.tasks {
            task.abort();
        }
    }
}

/// The secure port's handler: the pipeline, with watch responses ending at `watches_end`.
fn secure_handler(proxy: Arc<Proxy>, watches_end: ShutdownSignal) -> Arc<dyn server::Handler> {
    Arc::new(SecureHandler { proxy, watches_end })
}

struct SecureHandler {
    proxy: Arc<Proxy>,
    watches_end: ShutdownSignal,
}

impl SecureHandler {
    fn answer(
        &self,
        request: http::Request<hyper::body::Incoming>,
        connection: Option<Arc<ConnectionInfo>>,
    ) -> BoxFuture<'static, http::Response<ProxyBody>> {
        let watches_end = self.watches_end.clone();
        // A combinator, not an async block: a block awaiting the pipeline's future would hold
        // it twice (as its capture and as what it awaits), doubling a waiting request's memory.
        Box::pin(
            Arc::clone(&self.proxy)
                .handle(request, connection)
                .map(move |response| {
                    if response.extensions().get::<WatchStream>().is_some()
                        && response.status().is_success()
                    {
                        return response.map(|body| DrainableBody::wrap(body, watches_end));
                    }
                    response
                }),
        )
    }
}

impl server::Handler for SecureHandler {
    fn handle(
        &self,
        request: http::Request<hyper::body::Incoming>,
    ) -> BoxFuture<'static, http::Response<ProxyBody>> {
        // Not what the server calls (that is `handle_on`): the connection is in the extensions.
        let connection = request
            .extensions()
            .get::<ConnectionInfo>()
            .cloned()
            .map(Arc::new);
        self.answer(request, connection)
    }

    fn handle_on(
        &self,
        request: http::Request<hyper::body::Incoming>,
        connection: &Arc<ConnectionInfo>,
    ) -> BoxFuture<'static, http::Response<ProxyBody>> {
        self.answer(request, Some(Arc::clone(connection)))
    }
}

fn admin_handler(paths: AdminPaths) -> Arc<dyn server::Handler> {
    let paths = Arc::new(paths);
    Arc::new(move |request: http::Request<hyper::body::Incoming>| {
        let response = paths.answer(request.uri().path(), request.uri().query());
        async move { response }
    })
}

/// The secure admin listener's gate: the proxy's authenticators, and SubjectAccessReviews
/// against the upstream.
fn admin_gate(
    authorizer: Arc<Authorizer>,
    authenticator: &Arc<Authenticator>,
    metrics: &Metrics,
) -> Result<Arc<dyn server::AdminGate>, StartError> {
    let guard = AdminGuard::new(Arc::clone(authenticator), authorizer, metrics.registry())?;
    Ok(Arc::new(guard))
}

/// Sets each level's queue-set gauges, which the apiserver sets whenever they change: R
/// (`current_r`) for every level with queues (exempt levels have none) and R and S of its last
/// dispatch from a queue with the S bounds over the queues waiting now. Read at scrape time
/// rather than on every request.
fn publish_queue_set_readings(metrics: &Metrics, flow_control: &FlowControl) {
    for level in flow_control.levels() {
        if level.priority_level.is_exempt() {
            continue;
        }
        let name = &level.priority_level.name;
        metrics.set_current_r(name, level.queues.stats().current_r);
        if let Some(dispatch) = &level.queues.dispatch_readings() {
            metrics.set_dispatch_metrics(name, dispatch);
        }
    }
}

/// Sets every level's limit gauges; with an `outcome` (a borrowing adjustment), also the demand
/// statistics, the target and the fair fraction (`NotePriorityLevelConcurrencyAdjustment`).
pub(crate) fn publish_limits(
    metrics: &Metrics,
    flow_control: &FlowControl,
    outcome: Option<&BorrowingOutcome>,
) {
    let levels = flow_control.levels();
    let now = Instant::now();
    let server_cl = flow_control.server_concurrency_limit();
    let (mut max_waiting, mut max_executing) = (0u32, 0u32);
    for level in &levels {
        let l = &level.limits;
        let name = &level.priority_level.name;
        metrics.set_limits(name, l.nominal_cl, l.min_cl, l.max_cl, level.current_cl);
        let capacity = level
            .priority_level
            .queuing()
            .map_or(0, |q| q.queues.saturating_mul(q.queue_length_limit));
        max_waiting = max_waiting.saturating_add(capacity);
        max_executing = max_executing.saturating_add(l.nominal_cl);
        let denominator = concurrency_denominator(level.current_cl, server_cl);
        let gauges = metrics.level_gauges(now, name);
        gauges.set_denominators(now, capacity.max(1), denominator);
        gauges
            .seat_demand
            .set_denominator(now, f64::from(denominator));
    }
    metrics.set_read_vs_write_denominators(now, max_waiting.max(1), max_executing.max(1));
    let Some(outcome) = outcome else {
        return;
    };
    // The outcome lists levels in the controller's (name) order; a configuration applied in
    // between would change the set, so only a matching count is trusted.
    if outcome.levels.len() == levels.len() {
        for (level, adjustment) in levels.iter().zip(&outcome.levels) {
            let name = &level.priority_level.name;
            metrics.note_concurrency_adjustment(name, &level.stats, adjustment);
        }
    }
    metrics.set_fair_frac(outcome.seat_fair_frac);
}

/// `auth` with TokenReviews against `upstream` when `cache_ttl` asks for them.
fn with_token_review(
    mut auth: AuthConfig,
    cache_ttl: Option<Duration>,
    upstream: &UpstreamClient,
) -> AuthConfig {
    auth.token_review = cache_ttl.map(|ttl| {
        let mut review = TokenReviewConfig::new(Arc::new(upstream.clone()));
        review.success_cache_ttl = ttl;
        review.failure_cache_ttl = ttl;
        review
    });
    auth
}

/// The shadows `--flow-control=dry-run` and `--shadow-config-dir` ask for, their gauges
/// refreshed before each scrape.
fn shadows(
    flow: &FlowControlConfig,
    config: &Config,
    estimator: &WorkEstimator,
    metrics: &Arc<Metrics>,
) -> Result<Vec<Arc<Shadow>>, StartError> {
    let dry_run = flow.dry_run;
    if !dry_run && flow.shadow_config_dir.is_none() {
        return Ok(Vec::new());
    }
    let shadow_metrics = ShadowMetrics::register(metrics.registry())?;
    let server_cl = flow.server_concurrency_limit;
    let mut shadows = Vec::new();
    if dry_run {
        let evaluated = Shadow::new(
            shadow::DRY_RUN,
            config,
            server_cl,
            estimator.clone(),
            shadow_metrics.clone(),
        )?;
        shadows.push(Arc::new(evaluated));
    }
    if let Some(dir) = &flow.shadow_config_dir {
        let candidate =
            Shadow::candidate(dir, config, server_cl, estimator.clone(), shadow_metrics)?;
        shadows.push(Arc::new(candidate));
    }
    let weak: Vec<_> = shadows.iter().map(Arc::downgrade).collect();
    metrics.on_scrape(move |_| {
        weak.iter()
            .filter_map(std::sync::Weak::upgrade)
            .for_each(|s| s.publish_gauges());
    });
    Ok(shadows)
}

/// Every 10 s: re-allocate concurrency limits from seat demand (`updateBorrowingLocked`).
async fn adjust_borrowing(flow_control: Arc<FlowControl>, metrics: Arc<Metrics>) {
    let mut ticks = tokio::time::interval(BORROWING_ADJUSTMENT_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let now = ticks.tick().await;
        let outcome = flow_control.adjust_borrowing(now);
        if let Some(error) = &outcome.error {
            tracing::warn!(%error, "Concurrency allocation failed; limits kept");
        }
        publish_limits(&metrics, &flow_control, Some(&outcome));
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

async fn scrape_metrics(upstream: &UpstreamClient) -> Result<String, crate::body::BoxError> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(upstream.uri_for("/metrics")?)
        .body(empty_body())?;
    let response = upstream
        .send(request, UpstreamAuth::Proxy, Route::Short)
        .await?;
    if !response.status().is_success() {
        return Err(format!("upstream /metrics answered {}", response.status()).into());
    }
    let body = Limited::new(response.into_body(), MAX_UPSTREAM_METRICS)
        .collect()
        .await?;
    Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
}

#[cfg(test)]
mod tests;
