//! Definitions of the plain `apiserver_flowcontrol_*` families: names, help texts, label names and
//! buckets exactly as `metrics.go` declares them.

use prometheus::{Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use super::names::{annotate, Stability, FS, NAMESPACE, PL, SUBSYSTEM};
use super::ratios;
use crate::metrics::register;

const QUEUE_LENGTH_BUCKETS: &[f64] = &[0.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0];
const REQUEST_DURATION_SECONDS_BUCKETS: &[f64] = &[
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];
const WATCH_COUNT_BUCKETS: &[f64] = &[0.0, 1.0, 10.0, 100.0, 1000.0, 10000.0];
const WORK_ESTIMATED_SEATS_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 100.0];

/// The plain (non-timing) families.
pub(in crate::metrics) struct Families {
    pub(super) rejected: IntCounterVec,
    pub(super) dispatched: IntCounterVec,
    pub(super) current_r: GaugeVec,
    pub(super) dispatch_r: GaugeVec,
    pub(super) latest_s: GaugeVec,
    pub(super) next_s_bounds: GaugeVec,
    pub(super) next_discounted_s_bounds: GaugeVec,
    pub(super) inqueue_requests: GaugeVec,
    pub(super) inqueue_seats: GaugeVec,
    pub(super) queue_length: HistogramVec,
    pub(super) executing_seats: GaugeVec,
    pub(super) executing_requests: GaugeVec,
    pub(super) wait_seconds: HistogramVec,
    pub(super) execution_seconds: HistogramVec,
    pub(super) watch_count: HistogramVec,
    pub(super) epoch_advance: IntCounterVec,
    pub(super) work_estimated_seats: HistogramVec,
    pub(super) no_accommodation: IntCounterVec,
    pub(super) nominal_limit: GaugeVec,
    pub(super) lower_limit: GaugeVec,
    pub(super) upper_limit: GaugeVec,
    pub(super) demand_hwm: GaugeVec,
    pub(super) demand_avg: GaugeVec,
    pub(super) demand_stdev: GaugeVec,
    pub(super) demand_smoothed: GaugeVec,
    pub(super) target_seats: GaugeVec,
    pub(super) fair_frac: Gauge,
    pub(super) current_limit: GaugeVec,
    pub(super) ratios: ratios::Families,
}

fn opts(name: &str, stability: Stability, help: &str) -> Opts {
    Opts::new(name, annotate(stability, help))
        .namespace(NAMESPACE)
        .subsystem(SUBSYSTEM)
}

fn counter(
    reg: &Registry,
    name: &str,
    st: Stability,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    register(reg, IntCounterVec::new(opts(name, st, help), labels)?)
}

fn gauge(
    reg: &Registry,
    name: &str,
    st: Stability,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<GaugeVec> {
    register(reg, GaugeVec::new(opts(name, st, help), labels)?)
}

fn histogram(
    reg: &Registry,
    name: &str,
    help: &str,
    buckets: &[f64],
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    let opts = HistogramOpts::from(opts(name, Stability::Alpha, help)).buckets(buckets.to_vec());
    register(reg, HistogramVec::new(opts, labels)?)
}

fn beta_histogram(
    reg: &Registry,
    name: &str,
    help: &str,
    buckets: &[f64],
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    let opts = HistogramOpts::from(opts(name, Stability::Beta, help)).buckets(buckets.to_vec());
    register(reg, HistogramVec::new(opts, labels)?)
}

impl Families {
    /// Defines and registers every family (names, help and buckets as in metrics.go).
    pub(in crate::metrics) fn register(reg: &Registry) -> prometheus::Result<Self> {
        use Stability::{Alpha, Beta};
        let pl_fs = &[PL, FS][..];
        let rejected = counter(
            reg,
            "rejected_requests_total",
            Beta,
            "Number of requests rejected by API Priority and Fairness subsystem",
            &[PL, FS, "reason"],
        )?;
        let dispatched = counter(
            reg,
            "dispatched_requests_total",
            Beta,
            "Number of requests executed by API Priority and Fairness subsystem",
            pl_fs,
        )?;
        let current_r = gauge(reg, "current_r", Alpha, "R(time of last change)", &[PL])?;
        let dispatch_r = gauge(reg, "dispatch_r", Alpha, "R(time of last dispatch)", &[PL])?;
        let latest_s = gauge(
            reg,
            "latest_s",
            Alpha,
            "S(most recently dispatched request)",
            &[PL],
        )?;
        let next_s_bounds = gauge(
            reg,
            "next_s_bounds",
            Alpha,
            "min and max, over queues, of S(oldest waiting request in queue)",
            &[PL, "bound"],
        )?;
        let next_discounted_s_bounds = gauge(
            reg,
            "next_discounted_s_bounds",
            Alpha,
            "min and max, over queues, of S(oldest waiting request in queue) - estimated work in progress",
            &[PL, "bound"],
        )?;
        let inqueue_requests = gauge(
            reg,
            "current_inqueue_requests",
            Beta,
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            pl_fs,
        )?;
        let inqueue_seats = gauge(
            reg,
            "current_inqueue_seats",
            Alpha,
            "Number of seats currently pending in queues of the API Priority and Fairness subsystem",
            pl_fs,
        )?;
        let queue_length = histogram(
            reg,
            "request_queue_length_after_enqueue",
            "Length of queue in the API Priority and Fairness subsystem, as seen by each request after it is enqueued",
            QUEUE_LENGTH_BUCKETS,
            pl_fs,
        )?;
        let executing_seats = gauge(
            reg,
            "current_executing_seats",
            Beta,
            "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
            pl_fs,
        )?;
        let executing_requests = gauge(
            reg,
            "current_executing_requests",
            Beta,
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
            pl_fs,
        )?;
        let wait_seconds = beta_histogram(
            reg,
            "request_wait_duration_seconds",
            "Length of time a request spent waiting in its queue",
            REQUEST_DURATION_SECONDS_BUCKETS,
            &[PL, FS, "execute"],
        )?;
        let execution_seconds = histogram(
            reg,
            "request_execution_seconds",
            "Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request execution in the API Priority and Fairness subsystem",
            REQUEST_DURATION_SECONDS_BUCKETS,
            &[PL, FS, "type"],
        )?;
        let watch_count = histogram(
            reg,
            "watch_count_samples",
            "count of watchers for mutating requests in API Priority and Fairness",
            WATCH_COUNT_BUCKETS,
            pl_fs,
        )?;
        let epoch_advance = counter(
            reg,
            "epoch_advance_total",
            Alpha,
            "Number of times the queueset's progress meter jumped backward",
            &[PL, "success"],
        )?;
        let work_estimated_seats = histogram(
            reg,
            "work_estimated_seats",
            "Number of estimated seats (maximum of initial and final seats) associated with requests in API Priority and Fairness",
            WORK_ESTIMATED_SEATS_BUCKETS,
            pl_fs,
        )?;
        let no_accommodation = counter(
            reg,
            "request_dispatch_no_accommodation_total",
            Alpha,
            "Number of times a dispatch attempt resulted in a non accommodation due to lack of available seats",
            pl_fs,
        )?;
        let nominal_limit = gauge(
            reg,
            "nominal_limit_seats",
            Beta,
            "Nominal number of execution seats configured for each priority level",
            &[PL],
        )?;
        let lower_limit = gauge(
            reg,
            "lower_limit_seats",
            Alpha,
            "Configured lower bound on number of execution seats available to each priority level",
            &[PL],
        )?;
        let upper_limit = gauge(
            reg,
            "upper_limit_seats",
            Alpha,
            "Configured upper bound on number of execution seats available to each priority level",
            &[PL],
        )?;
        let demand_hwm = gauge(
            reg,
            "demand_seats_high_watermark",
            Alpha,
            "High watermark, over last adjustment period, of demand_seats",
            &[PL],
        )?;
        let demand_avg = gauge(
            reg,
            "demand_seats_average",
            Alpha,
            "Time-weighted average, over last adjustment period, of demand_seats",
            &[PL],
        )?;
        let demand_stdev = gauge(
            reg,
            "demand_seats_stdev",
            Alpha,
            "Time-weighted standard deviation, over last adjustment period, of demand_seats",
            &[PL],
        )?;
        let demand_smoothed = gauge(
            reg,
            "demand_seats_smoothed",
            Alpha,
            "Smoothed seat demands",
            &[PL],
        )?;
        let target_seats = gauge(reg, "target_seats", Alpha, "Seat allocation targets", &[PL])?;
        let fair_frac = Gauge::with_opts(opts(
            "seat_fair_frac",
            Alpha,
            "Fair fraction of server's concurrency to allocate to each priority level that can use it",
        ))?;
        let fair_frac = register(reg, fair_frac)?;
        let current_limit = gauge(
            reg,
            "current_limit_seats",
            Alpha,
            "current derived number of execution seats available to each priority level",
            &[PL],
        )?;
        let ratios = ratios::Families::register(reg)?;
        Ok(Families {
            rejected,
            dispatched,
            current_r,
            dispatch_r,
            latest_s,
            next_s_bounds,
            next_discounted_s_bounds,
            inqueue_requests,
            inqueue_seats,
            queue_length,
            executing_seats,
            executing_requests,
            wait_seconds,
            execution_seconds,
            watch_count,
            epoch_advance,
            work_estimated_seats,
            no_accommodation,
            nominal_limit,
            lower_limit,
            upper_limit,
            demand_hwm,
            demand_avg,
            demand_stdev,
            demand_smoothed,
            target_seats,
            fair_frac,
            current_limit,
            ratios,
        })
    }

    pub(in crate::metrics) fn flush_timing(&self, now: tokio::time::Instant) {
        self.ratios.flush(now);
    }
}
