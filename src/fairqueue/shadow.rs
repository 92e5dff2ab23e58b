//! Shadow configurations and dry-run: flow control evaluated on live traffic without enforcing.
//!
//! A [`Shadow`] is a [`FlowControl`] of its own (a candidate configuration, or in dry-run the
//! configuration in force) fed every request that reaches flow control, in real time, through
//! the same front door ([`FrontDoor`]) and [`FlowControl::start_admit`] that enforce. A request the
//! shadow would have queued "starts" when the shadow would have dispatched it and holds its
//! shadow seats for as long as the real request executed. The shadow never delays, rejects or
//! changes a request: it runs in a task of its own, and its verdicts go to the
//! `apf_proxy_shadow_*` metrics and the shadow's debug dumps.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::controller::{Admitting, FlowControl, FlowControlError};
use super::flow_request::{Described, FlowRequest, FrontDoor};
use super::level_queues::{Rejection, Seat};
use super::work_estimate::WorkEstimator;
use crate::config::Config;

/// The `shadow` label of a dry-run: the configuration in force, evaluated.
pub const DRY_RUN: &str = "dry-run";
/// The `shadow` label of `--shadow-config-dir`.
pub const CANDIDATE: &str = "candidate";

/// The apiserver's `request_wait_duration_seconds` buckets.
const WAIT_BUCKETS: [f64; 13] = [
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];

/// The `apf_proxy_shadow_*` families, shared by every shadow (label `shadow`).
#[derive(Debug, Clone)]
pub struct ShadowMetrics {
    dispatched: IntCounterVec,
    rejected: IntCounterVec,
    wait: HistogramVec,
    seats: IntGaugeVec,
    waiting: IntGaugeVec,
    reloads: IntCounterVec,
}

impl ShadowMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<ShadowMetrics> {
        let labels = ["shadow", "priority_level", "flow_schema"];
        let dispatched = IntCounterVec::new(
            Opts::new(
                "apf_proxy_shadow_dispatched_requests_total",
                "Requests a shadow configuration would have dispatched (given seats).",
            ),
            &labels,
        )?;
        let rejected = IntCounterVec::new(
            Opts::new(
                "apf_proxy_shadow_rejected_requests_total",
                "Requests a shadow configuration would have rejected, by reason.",
            ),
            &["shadow", "priority_level", "flow_schema", "reason"],
        )?;
        let wait = HistogramVec::new(
            HistogramOpts::new(
                "apf_proxy_shadow_request_wait_duration_seconds",
                "How long requests would have waited in a shadow configuration's queues before \
                 being dispatched.",
            )
            .buckets(WAIT_BUCKETS.to_vec()),
            &labels,
        )?;
        let seats = IntGaugeVec::new(
            Opts::new(
                "apf_proxy_shadow_current_executing_seats",
                "Seats a shadow configuration's priority level would hold now.",
            ),
            &["shadow", "priority_level"],
        )?;
        let waiting = IntGaugeVec::new(
            Opts::new(
                "apf_proxy_shadow_current_inqueue_requests",
                "Requests that would be waiting in a shadow configuration's queues now.",
            ),
            &["shadow", "priority_level"],
        )?;
        let reloads = IntCounterVec::new(
            Opts::new(
                "apf_proxy_shadow_config_reloads_total",
                "Loads of a shadow configuration directory, by success.",
            ),
            &["shadow", "success"],
        )?;
        registry.register(Box::new(reloads.clone()))?;
        registry.register(Box::new(dispatched.clone()))?;
        registry.register(Box::new(rejected.clone()))?;
        registry.register(Box::new(wait.clone()))?;
        registry.register(Box::new(seats.clone()))?;
        registry.register(Box::new(waiting.clone()))?;
        Ok(ShadowMetrics {
            dispatched,
            rejected,
            wait,
            seats,
            waiting,
            reloads,
        })
    }
}

/// One configuration evaluated on live traffic.
#[derive(Debug)]
pub struct Shadow {
    name: &'static str,
    /// Whether it is evaluating: a candidate directory that has never loaded is not.
    active: AtomicBool,
    /// The candidate's directory (`None` in dry-run: it follows the configuration in force).
    dir: Option<PathBuf>,
    flow_control: Arc<FlowControl>,
    estimator: WorkEstimator,
    metrics: ShadowMetrics,
}

/// The shadows' side of one real request: when it is dropped, each shadow learns how long the
/// real request executed (zero if it never started), so the shadow holds its seats as long.
#[derive(Debug, Default)]
pub struct ShadowTickets {
    /// Shadow seats taken at once: given back when the real request ends.
    held: Vec<Seat>,
    /// Shadows still queuing the request: told how long the real request executed.
    waiting: Vec<oneshot::Sender<Duration>>,
    started: Option<Instant>,
}

/// One shadow's side of a real request.
#[derive(Debug)]
pub enum ShadowTicket {
    /// The shadow dispatched it at once: its seats, held for as long as the real request runs.
    Held(Seat),
    /// The shadow queued it: a task waits for the shadow's verdict and the real execution time.
    Waiting(oneshot::Sender<Duration>),
}

impl ShadowTickets {
    /// Whether no shadow is waiting on this request.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.waiting.is_empty()
    }

    /// The real request starts executing now.
    pub fn start(&mut self) {
        if !self.waiting.is_empty() {
            self.started = Some(Instant::now());
        }
    }
}

impl Drop for ShadowTickets {
    fn drop(&mut self) {
        let executed = self.started.map_or(Duration::ZERO, |t| t.elapsed());
        for done in self.waiting.drain(..) {
            let _ = done.send(executed);
        }
        // `held` seats are given back as the vector drops.
    }
}

/// Feeds one request to every shadow (see [`Shadow::observe`]).
pub fn observe_all(shadows: &[Arc<Shadow>], request: &Described<'_>) -> ShadowTickets {
    let mut tickets = ShadowTickets::default();
    for ticket in shadows.iter().filter_map(|s| s.observe(request)) {
        match ticket {
            ShadowTicket::Held(seat) => tickets.held.push(seat),
            ShadowTicket::Waiting(done) => tickets.waiting.push(done),
        }
    }
    tickets
}

// === impl Shadow ===

impl Shadow {
    /// A shadow named `name` ([`CANDIDATE`] or [`DRY_RUN`]) evaluating `config` at the server
    /// limit `server_cl`, estimating seats with the proxy's own `estimator` (the same object
    /// counts and watches).
    pub fn new(
        name: &'static str,
        config: &Config,
        server_cl: u32,
        estimator: WorkEstimator,
        metrics: ShadowMetrics,
    ) -> Result<Shadow, FlowControlError> {
        let (flow_control, problems) = FlowControl::new(config, server_cl, Instant::now())?;
        for problem in problems {
            tracing::warn!(shadow = name, %problem, "Shadow priority level left out");
        }
        Ok(Shadow {
            name,
            active: AtomicBool::new(true),
            dir: None,
            flow_control: Arc::new(flow_control),
            estimator,
            metrics,
        })
    }

    /// A [`CANDIDATE`] shadow over the configuration in `dir`. A directory that does not load
    /// is logged and counted, and the shadow stays idle (flow control built from `fallback`,
    /// never fed) until a reload succeeds: a bad shadow never stops the proxy.
    pub fn candidate(
        dir: &Path,
        fallback: &Config,
        server_cl: u32,
        estimator: WorkEstimator,
        metrics: ShadowMetrics,
    ) -> Result<Shadow, FlowControlError> {
        let mut shadow = Shadow::new(CANDIDATE, fallback, server_cl, estimator, metrics)?;
        shadow.dir = Some(dir.to_path_buf());
        shadow.active.store(false, Ordering::Relaxed);
        shadow.reload();
        Ok(shadow)
    }

    /// The `shadow` label.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The candidate's directory; `None` for a dry-run shadow.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Whether the shadow is evaluating requests.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Loads the candidate's directory again and applies it; on failure the last good
    /// configuration stays (or the shadow stays idle). Counted in
    /// `apf_proxy_shadow_config_reloads_total`. A no-op for a dry-run shadow.
    pub fn reload(&self) -> bool {
        let Some(dir) = &self.dir else {
            return true;
        };
        match crate::config::load_dir(dir) {
            Ok(loaded) => {
                self.apply_config(&loaded.config);
                self.active.store(true, Ordering::Relaxed);
                self.metrics
                    .reloads
                    .with_label_values(&[self.name, "true"])
                    .inc();
                tracing::info!(shadow = self.name, dir = %dir.display(), "Shadow configuration loaded");
                true
            }
            Err(error) => {
                self.metrics
                    .reloads
                    .with_label_values(&[self.name, "false"])
                    .inc();
                tracing::error!(
                    shadow = self.name,
                    dir = %dir.display(),
                    %error,
                    "Shadow configuration not loaded; the last good one stays"
                );
                false
            }
        }
    }

    /// The shadow's flow control (debug dumps; reloads).
    pub fn flow_control(&self) -> &Arc<FlowControl> {
        &self.flow_control
    }

    /// Applies a new configuration, as a reload of the main one does.
    pub fn apply_config(&self, config: &Config) {
        for problem in self.flow_control.apply_config(config, Instant::now()) {
            tracing::warn!(shadow = self.name, %problem, "Shadow priority level not (re)configured");
        }
    }

    /// Every 10 s, as for the configuration in force: concurrency borrowing between levels.
    pub async fn adjust_borrowing(self: Arc<Self>) {
        let mut ticks = tokio::time::interval(super::borrowing::BORROWING_ADJUSTMENT_PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let now = ticks.tick().await;
            let _ = self.flow_control.adjust_borrowing(now);
        }
    }

    /// Refreshes the seat and queue gauges (before a scrape).
    pub fn publish_gauges(&self) {
        for level in self.flow_control.levels() {
            let stats = level.queues.stats();
            let name = level.priority_level.name.as_str();
            self.metrics
                .seats
                .with_label_values(&[self.name, name])
                .set(i64::try_from(stats.seats_in_use).unwrap_or(i64::MAX));
            self.metrics
                .waiting
                .with_label_values(&[self.name, name])
                .set(i64::from(stats.waiting));
        }
    }

    /// Feeds one request that reached flow control. Returns at once; the shadow's verdict is
    /// reached in a task of its own. `None` when the shadow has no queues for its level.
    pub fn observe(self: &Arc<Self>, request: &Described<'_>) -> Option<ShadowTicket> {
        if !self.is_active() {
            return None;
        }
        let snapshot = self.flow_control.snapshot();
        let now = Instant::now();
        let entered = FrontDoor::new(&snapshot, &self.estimator).enter(request, now, &mut ());
        let FlowRequest {
            classification,
            level,
            admit,
        } = entered.ok()?;
        let verdict = Verdict {
            shadow: Arc::clone(self),
            priority_level: classification.priority_level.name.clone(),
            flow_schema: classification.flow_schema.name.clone(),
        };
        // Most requests get their seats at once: then the real request holds them, and the
        // shadow costs no task.
        let admitting = match self.flow_control.start_admit_at(level, admit, now) {
            Admitting::Decided(admitted) => {
                return verdict.record(admitted).map(ShadowTicket::Held)
            }
            waiting => waiting,
        };
        let (done, executed) = oneshot::channel();
        tokio::spawn(async move {
            if let Some(seat) = verdict.record(admitting.outcome().await) {
                hold(seat, executed).await;
            }
        });
        Some(ShadowTicket::Waiting(done))
    }
}

/// Where a shadow's verdict on one request is counted.
struct Verdict {
    shadow: Arc<Shadow>,
    priority_level: String,
    flow_schema: String,
}

impl Verdict {
    fn record(&self, admitted: Result<Seat, Rejection>) -> Option<Seat> {
        let metrics = &self.shadow.metrics;
        let (name, pl, fs) = (self.shadow.name, &*self.priority_level, &*self.flow_schema);
        match admitted {
            Ok(seat) => {
                metrics.dispatched.with_label_values(&[name, pl, fs]).inc();
                let waited = seat.waited().as_secs_f64();
                metrics
                    .wait
                    .with_label_values(&[name, pl, fs])
                    .observe(waited);
                Some(seat)
            }
            Err(rejection) => {
                let reason = rejection.reason.as_str();
                metrics
                    .rejected
                    .with_label_values(&[name, pl, fs, reason])
                    .inc();
                None
            }
        }
    }
}

/// Holds the shadow seats from the shadow's dispatch for as long as the real request executed.
async fn hold(seat: Seat, executed: oneshot::Receiver<Duration>) {
    let dispatched = Instant::now();
    let executed = executed.await.unwrap_or_default();
    tokio::time::sleep_until(dispatched + executed).await;
    drop(seat);
}

#[cfg(test)]
mod tests;
