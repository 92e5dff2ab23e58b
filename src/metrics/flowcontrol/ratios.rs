//! The four timing-ratio families and their handles.
//!
//! Mirrors the `NewTimingRatioHistogramVec` definitions of `metrics.go`, `vec_element_pair.go`
//! (the waiting/executing pair of a level), the `indexOnce` read-vs-write members, and how
//! `queueset.go` (`reqsGaugePair`, `execSeatsGauge`, the seat-demand union gauge) and
//! `apf_controller.go` (denominators after each configuration change) drive them.

use std::sync::OnceLock;

use prometheus::Registry;
use tokio::time::Instant;

use super::names::{annotate, Stability, NAMESPACE, PL, SUBSYSTEM};
use crate::metrics::labels::{Phase, RequestKind};
use crate::metrics::timing_ratio::{RatioedGauge, TimingRatioHistogramVec};
use crate::metrics::{register, Metrics};

const SEAT_UTILIZATION_BUCKETS: &[f64] = &[
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0,
];
const REQUEST_UTILIZATION_BUCKETS: &[f64] =
    &[0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.25, 0.5, 0.75, 1.0];
const READ_VS_WRITE_BUCKETS: &[f64] = &[
    0.0, 0.001, 0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0,
];
const DEMAND_SEATS_BUCKETS: &[f64] = &[0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.7, 2.0, 2.8, 4.0, 6.0];

/// The timing-ratio gauges of one priority level, held by its queue set.
///
/// Mirrors the `reqsGaugePair`, `execSeatsGauge` and `seatDemandRatioedGauge` a queue set gets.
#[derive(Debug, Clone)]
pub struct PriorityLevelGauges {
    /// Waiting requests / (queues × queueLengthLimit, at least 1):
    /// `priority_level_request_utilization{phase="waiting"}`.
    pub requests_waiting: RatioedGauge,
    /// Executing requests (a watch: its initial stage) / concurrency denominator:
    /// `priority_level_request_utilization{phase="executing"}`.
    pub requests_executing: RatioedGauge,
    /// Seats in use (any stage) / concurrency denominator: `priority_level_seat_utilization`.
    pub seats_executing: RatioedGauge,
    /// (Seats in use + seats waiting) / concurrency denominator: `demand_seats`.
    pub seat_demand: RatioedGauge,
}

impl PriorityLevelGauges {
    /// Sets the denominators after a (re)configuration of the level, as `queueset.go:
    /// setConfiguration` does: `waiting_capacity` is queues × queueLengthLimit (pass at least 1),
    /// `concurrency_denominator` the current limit or its substitute when that is 0 (see
    /// [`crate::fairqueue::borrowing::concurrency_denominator`]). The seat-demand denominator moves
    /// with every borrowing adjustment; set it with `seat_demand.set_denominator`.
    pub fn set_denominators(
        &self,
        now: Instant,
        waiting_capacity: u32,
        concurrency_denominator: u32,
    ) {
        self.requests_waiting
            .set_denominator(now, f64::from(waiting_capacity));
        let d = f64::from(concurrency_denominator);
        self.requests_executing.set_denominator(now, d);
        self.seats_executing.set_denominator(now, d);
    }
}

pub(in crate::metrics) struct Families {
    seat_utilization: TimingRatioHistogramVec,
    request_utilization: TimingRatioHistogramVec,
    read_vs_write: TimingRatioHistogramVec,
    demand_seats: TimingRatioHistogramVec,
    /// `[waiting readOnly, executing readOnly, waiting mutating, executing mutating]`, created on
    /// first use as the reference's `indexOnce` does.
    read_vs_write_members: [OnceLock<RatioedGauge>; 4],
}

fn timing(
    reg: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    const_labels: &[(&str, &str)],
    buckets: &[f64],
) -> prometheus::Result<TimingRatioHistogramVec> {
    let fq_name = format!("{NAMESPACE}_{SUBSYSTEM}_{name}");
    let help = annotate(Stability::Alpha, help);
    register(
        reg,
        TimingRatioHistogramVec::new(&fq_name, &help, labels, const_labels, buckets)?,
    )
}

impl Families {
    pub(in crate::metrics) fn register(reg: &Registry) -> prometheus::Result<Self> {
        Ok(Families {
            seat_utilization: timing(
                reg,
                "priority_level_seat_utilization",
                "Observations, at the end of every nanosecond, of utilization of seats for any stage of execution (but only initial stage for WATCHes)",
                &[PL],
                &[("phase", "executing")],
                SEAT_UTILIZATION_BUCKETS,
            )?,
            request_utilization: timing(
                reg,
                "priority_level_request_utilization",
                "Observations, at the end of every nanosecond, of number of requests (as a fraction of the relevant limit) waiting or in any stage of execution (but only initial stage for WATCHes)",
                &["phase", PL],
                &[],
                REQUEST_UTILIZATION_BUCKETS,
            )?,
            read_vs_write: timing(
                reg,
                "read_vs_write_current_requests",
                "Observations, at the end of every nanosecond, of the number of requests (as a fraction of the relevant limit) waiting or in regular stage of execution",
                &["phase", "request_kind"],
                &[],
                READ_VS_WRITE_BUCKETS,
            )?,
            demand_seats: timing(
                reg,
                "demand_seats",
                "Observations, at the end of every nanosecond, of (the number of seats each priority level could use) / (nominal number of seats for that level)",
                &[PL],
                &[],
                DEMAND_SEATS_BUCKETS,
            )?,
            read_vs_write_members: Default::default(),
        })
    }

    pub(in crate::metrics) fn flush(&self, now: Instant) {
        self.seat_utilization.flush(now);
        self.request_utilization.flush(now);
        self.read_vs_write.flush(now);
        self.demand_seats.flush(now);
    }

    fn read_vs_write(&self, now: Instant, phase: Phase, kind: RequestKind) -> &RatioedGauge {
        let index = match (phase, kind) {
            (Phase::Waiting, RequestKind::ReadOnly) => 0,
            (Phase::Executing, RequestKind::ReadOnly) => 1,
            (Phase::Waiting, RequestKind::Mutating) => 2,
            (Phase::Executing, RequestKind::Mutating) => 3,
        };
        self.read_vs_write_members[index].get_or_init(|| {
            self.read_vs_write
                .member(&[phase.as_str(), kind.as_str()], now, 0.0, 1.0)
                .expect("invariant: two label values for two label names")
        })
    }
}

// === impl Metrics: timing-ratio gauges ===

impl Metrics {
    /// The timing-ratio gauges of a priority level, starting at 0 / 1 at `now`.
    ///
    /// Mirrors `RatioedGaugeVecPhasedElementPair(.., 1, 1, ..)`,
    /// `PriorityLevelExecutionSeatsGaugeVec.NewForLabelValuesSafe(0, 1, ..)` and
    /// `ApiserverSeatDemands.NewForLabelValuesSafe(0, 1, ..)`: call once when a level's queue set
    /// is created and keep the handles across reconfigurations (calling again continues the same
    /// histograms but resets their numerators to 0).
    pub fn priority_level_gauges(&self, now: Instant, priority_level: &str) -> PriorityLevelGauges {
        let ratios = &self.flowcontrol.ratios;
        let member = |vec: &TimingRatioHistogramVec, labels: &[&str]| {
            vec.member(labels, now, 0.0, 1.0)
                .expect("invariant: label values match the family's label names")
        };
        PriorityLevelGauges {
            requests_waiting: member(
                &ratios.request_utilization,
                &[Phase::Waiting.as_str(), priority_level],
            ),
            requests_executing: member(
                &ratios.request_utilization,
                &[Phase::Executing.as_str(), priority_level],
            ),
            seats_executing: member(&ratios.seat_utilization, &[priority_level]),
            seat_demand: member(&ratios.demand_seats, &[priority_level]),
        }
    }

    /// Server-wide waiting (`phase = Waiting`) or executing requests of a kind changed by
    /// `delta` at `now` (`read_vs_write_current_requests`, as the APF filter's watermarks report).
    pub fn add_read_vs_write(&self, now: Instant, phase: Phase, kind: RequestKind, delta: i64) {
        self.flowcontrol
            .ratios
            .read_vs_write(now, phase, kind)
            .add(now, delta as f64);
    }

    /// The denominators of `read_vs_write_current_requests` after a configuration change
    /// (`apf_controller.go`): Σ queues × queueLengthLimit over levels for waiting, Σ NominalCL for
    /// executing.
    pub fn set_read_vs_write_denominators(
        &self,
        now: Instant,
        max_waiting: u32,
        max_executing: u32,
    ) {
        let ratios = &self.flowcontrol.ratios;
        for kind in [RequestKind::ReadOnly, RequestKind::Mutating] {
            ratios
                .read_vs_write(now, Phase::Waiting, kind)
                .set_denominator(now, f64::from(max_waiting));
            let executing = ratios.read_vs_write(now, Phase::Executing, kind);
            executing.set_denominator(now, f64::from(max_executing));
        }
    }
}
