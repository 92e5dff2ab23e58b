//! The members of the per-(priority level, flow schema) families, looked up once per pair.
//!
//! `MetricVec::with_label_values` hashes the label values and takes a lock on every call; a
//! request touches about ten of these families. [`Metrics::flow`] resolves a pair once (one map
//! lookup) and hands out a [`FlowMetrics`] whose members are made on first use, so a series still
//! appears in the exposition only once something happened to it, as in the apiserver.

use parking_lot::RwLock;
use std::sync::{Arc, OnceLock};

use fnv::FnvHashMap;
use prometheus::{Gauge, GaugeVec, Histogram, HistogramVec, IntCounter, IntCounterVec};
use tokio::time::Instant;

use super::{ExecutionType, Families, PriorityLevelGauges, RejectReason};
use crate::metrics::Metrics;

/// The per-flow families, cloned once from the registry's (each clone shares its family).
struct FlowFamilies {
    rejected: IntCounterVec,
    dispatched: IntCounterVec,
    inqueue_requests: GaugeVec,
    inqueue_seats: GaugeVec,
    queue_length: HistogramVec,
    executing_seats: GaugeVec,
    executing_requests: GaugeVec,
    wait_seconds: HistogramVec,
    execution_seconds: HistogramVec,
    watch_count: HistogramVec,
    work_estimated_seats: HistogramVec,
    no_accommodation: IntCounterVec,
}

/// Every pair seen so far: level name → flow schema name → members. Never shrinks, like the
/// registry's series (a reload keeps the series of removed objects).
pub(in crate::metrics) struct FlowCache {
    families: Arc<FlowFamilies>,
    pairs: RwLock<FnvHashMap<Box<str>, BySchema>>,
}

/// One level's pairs, by flow schema name.
type BySchema = FnvHashMap<Box<str>, Arc<FlowMetrics>>;

impl FlowCache {
    /// An empty cache over the registry's families.
    pub(in crate::metrics) fn new(f: &Families) -> Self {
        let families = FlowFamilies {
            rejected: f.rejected.clone(),
            dispatched: f.dispatched.clone(),
            inqueue_requests: f.inqueue_requests.clone(),
            inqueue_seats: f.inqueue_seats.clone(),
            queue_length: f.queue_length.clone(),
            executing_seats: f.executing_seats.clone(),
            executing_requests: f.executing_requests.clone(),
            wait_seconds: f.wait_seconds.clone(),
            execution_seconds: f.execution_seconds.clone(),
            watch_count: f.watch_count.clone(),
            work_estimated_seats: f.work_estimated_seats.clone(),
            no_accommodation: f.no_accommodation.clone(),
        };
        FlowCache {
            families: Arc::new(families),
            pairs: RwLock::default(),
        }
    }
}

/// The metrics of one (priority level, flow schema) pair.
pub struct FlowMetrics {
    priority_level: Box<str>,
    flow_schema: Box<str>,
    families: Arc<FlowFamilies>,
    /// The level's timing-ratio gauges.
    pub(in crate::metrics) level: PriorityLevelGauges,
    rejected: [OnceLock<IntCounter>; 3],
    dispatched: OnceLock<IntCounter>,
    inqueue_requests: OnceLock<Gauge>,
    inqueue_seats: OnceLock<Gauge>,
    queue_length: OnceLock<Histogram>,
    executing_seats: OnceLock<Gauge>,
    executing_requests: OnceLock<Gauge>,
    /// `[execute="false", execute="true"]`.
    wait_seconds: [OnceLock<Histogram>; 2],
    /// `[type="regular", type="watch"]`.
    execution_seconds: [OnceLock<Histogram>; 2],
    watch_count: OnceLock<Histogram>,
    work_estimated_seats: OnceLock<Histogram>,
    no_accommodation: OnceLock<IntCounter>,
}

impl std::fmt::Debug for FlowMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowMetrics")
            .field("priority_level", &self.priority_level)
            .field("flow_schema", &self.flow_schema)
            .finish_non_exhaustive()
    }
}

/// A member of `vec` for the pair, plus `extra` label values, made on first use.
macro_rules! member {
    ($self:ident, $cell:expr, $vec:ident $(, $extra:expr)?) => {
        $cell.get_or_init(|| {
            $self.families.$vec.with_label_values(&[
                &*$self.priority_level,
                &*$self.flow_schema,
                $($extra)?
            ])
        })
    };
}

impl FlowMetrics {
    fn new(
        priority_level: &str,
        flow_schema: &str,
        families: Arc<FlowFamilies>,
        level: PriorityLevelGauges,
    ) -> Self {
        FlowMetrics {
            priority_level: priority_level.into(),
            flow_schema: flow_schema.into(),
            families,
            level,
            rejected: Default::default(),
            dispatched: OnceLock::new(),
            inqueue_requests: OnceLock::new(),
            inqueue_seats: OnceLock::new(),
            queue_length: OnceLock::new(),
            executing_seats: OnceLock::new(),
            executing_requests: OnceLock::new(),
            wait_seconds: Default::default(),
            execution_seconds: Default::default(),
            watch_count: OnceLock::new(),
            work_estimated_seats: OnceLock::new(),
            no_accommodation: OnceLock::new(),
        }
    }

    /// The priority level's name.
    pub fn priority_level(&self) -> &str {
        &self.priority_level
    }

    /// `rejected_requests_total{reason}`.
    pub(in crate::metrics) fn rejected(&self, reason: RejectReason) -> &IntCounter {
        let index = match reason {
            RejectReason::QueueFull => 0,
            RejectReason::ConcurrencyLimit => 1,
            RejectReason::TimeOut => 2,
        };
        member!(self, self.rejected[index], rejected, reason.as_str())
    }

    /// `dispatched_requests_total`.
    pub(in crate::metrics) fn dispatched(&self) -> &IntCounter {
        member!(self, self.dispatched, dispatched)
    }

    /// `current_inqueue_requests`.
    pub(in crate::metrics) fn inqueue_requests(&self) -> &Gauge {
        member!(self, self.inqueue_requests, inqueue_requests)
    }

    /// `current_inqueue_seats`.
    pub(in crate::metrics) fn inqueue_seats(&self) -> &Gauge {
        member!(self, self.inqueue_seats, inqueue_seats)
    }

    /// `request_queue_length_after_enqueue`.
    pub(in crate::metrics) fn queue_length(&self) -> &Histogram {
        member!(self, self.queue_length, queue_length)
    }

    /// `current_executing_seats`.
    pub(in crate::metrics) fn executing_seats(&self) -> &Gauge {
        member!(self, self.executing_seats, executing_seats)
    }

    /// `current_executing_requests`.
    pub(in crate::metrics) fn executing_requests(&self) -> &Gauge {
        member!(self, self.executing_requests, executing_requests)
    }

    /// `request_wait_duration_seconds{execute}`.
    pub(in crate::metrics) fn wait_seconds(&self, execute: bool) -> &Histogram {
        let label = if execute { "true" } else { "false" };
        member!(
            self,
            self.wait_seconds[usize::from(execute)],
            wait_seconds,
            label
        )
    }

    /// `request_execution_seconds{type}`.
    pub(in crate::metrics) fn execution_seconds(&self, kind: ExecutionType) -> &Histogram {
        let index = match kind {
            ExecutionType::Regular => 0,
            ExecutionType::Watch => 1,
        };
        member!(
            self,
            self.execution_seconds[index],
            execution_seconds,
            kind.as_str()
        )
    }

    /// `watch_count_samples`.
    pub(in crate::metrics) fn watch_count(&self) -> &Histogram {
        member!(self, self.watch_count, watch_count)
    }

    /// `work_estimated_seats`.
    pub(in crate::metrics) fn work_estimated_seats(&self) -> &Histogram {
        member!(self, self.work_estimated_seats, work_estimated_seats)
    }

    /// `request_dispatch_no_accommodation_total`.
    pub(in crate::metrics) fn no_accommodation(&self) -> &IntCounter {
        member!(self, self.no_accommodation, no_accommodation)
    }
}

// === impl Metrics: the pair lookup ===

impl Metrics {
    /// The metrics of the pair (`priority_level`, `flow_schema`), made on first use and kept.
    ///
    /// Callers on the request path look a pair up once and keep the handle; the `&str` methods
    /// (`inc_rejected`, `observe_wait`, ...) look it up on every call.
    pub fn flow(&self, priority_level: &str, flow_schema: &str) -> Arc<FlowMetrics> {
        let cache = &self.flows;
        {
            let pairs = cache.pairs.read();
            if let Some(flow) = pairs.get(priority_level).and_then(|l| l.get(flow_schema)) {
                return Arc::clone(flow);
            }
        }
        let level = self.level_gauges(Instant::now(), priority_level);
        let mut pairs = cache.pairs.write();
        let by_schema = pairs.entry(priority_level.into()).or_default();
        let flow = by_schema.entry(flow_schema.into()).or_insert_with(|| {
            let families = Arc::clone(&cache.families);
            Arc::new(FlowMetrics::new(
                priority_level,
                flow_schema,
                families,
                level,
            ))
        });
        Arc::clone(flow)
    }
}

// === impl FlowMetrics: events the request path reports through its handle ===

impl FlowMetrics {
    /// How long a non-exempt request waited (`ObserveWaitingDuration`); see
    /// [`Metrics::observe_wait`].
    pub fn observe_wait(&self, execute: bool, wait: std::time::Duration) {
        self.wait_seconds(execute).observe(wait.as_secs_f64());
    }

    /// A request's estimated `max_seats` (`ObserveWorkEstimatedSeats`).
    pub fn observe_work_estimated_seats(&self, seats: u32) {
        self.work_estimated_seats().observe(f64::from(seats));
    }

    /// The watch count a mutating request's estimate saw (`ObserveWatchCount`).
    pub fn observe_watch_count(&self, count: usize) {
        self.watch_count().observe(count as f64);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::metrics::Metrics;

    #[test]
    fn a_pair_is_resolved_once_and_its_series_appear_only_when_used() {
        let metrics = Metrics::new();
        let flow = metrics.flow("pl", "fs");
        assert!(Arc::ptr_eq(&flow, &metrics.flow("pl", "fs")));
        assert!(!Arc::ptr_eq(&flow, &metrics.flow("pl", "other")));
        assert!(!Arc::ptr_eq(&flow, &metrics.flow("other", "fs")));
        assert_eq!(flow.priority_level(), "pl");
        let text = metrics.encode();
        assert!(
            !text.contains("apiserver_flowcontrol_request_wait_duration_seconds"),
            "{text}"
        );

        flow.observe_wait(true, Duration::from_millis(250));
        // The handle and the by-name method feed the same series.
        metrics.observe_wait("pl", "fs", true, Duration::from_millis(250));
        let text = metrics.encode();
        let sum = r#"apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="fs",priority_level="pl"} 0.5"#;
        assert!(text.contains(sum), "{text}");
        assert!(!text.contains(r#"execute="false""#), "{text}");
        assert!(!text.contains(r#"flow_schema="other""#), "{text}");
    }
}
