//! The `apiserver_flowcontrol_*` families and the events that feed them.
//!
//! Mirrors `pkg/util/flowcontrol/metrics/metrics.go` (definitions and the `Add*`/`Observe*`/`Set*`
//! functions) and the places that call them: `fairqueuing/queueset/queueset.go`, `apf_filter.go`,
//! `apf_controller.go`, `request/mutating_work_estimator.go` and
//! `pkg/server/filters/priority-and-fairness.go`.

mod families;
mod flow;
mod names;
mod ratios;

use std::time::Duration;

use super::labels::{ExecutionType, RejectReason};
use super::Metrics;
use crate::fairqueue::borrowing::{LevelAdjustment, SeatDemandStats};

pub(super) use families::Families;
pub(super) use flow::FlowCache;
pub use flow::FlowMetrics;
pub use ratios::PriorityLevelGauges;

pub use crate::fairqueue::queueset::DispatchR;

// === impl Metrics: flow-control events ===

impl Metrics {
    /// A request was rejected (`AddReject`): queue full or concurrency limit at arrival, or a
    /// time-out in its queue.
    pub fn inc_rejected(&self, priority_level: &str, flow_schema: &str, reason: RejectReason) {
        self.flow(priority_level, flow_schema)
            .rejected(reason)
            .inc();
    }

    /// How long a non-exempt request waited (`ObserveWaitingDuration`). `execute` is false only
    /// for a request rejected on arrival; one that timed out in its queue is `true`.
    pub fn observe_wait(
        &self,
        priority_level: &str,
        flow_schema: &str,
        execute: bool,
        wait: Duration,
    ) {
        self.flow(priority_level, flow_schema)
            .observe_wait(execute, wait);
    }

    /// A dispatch attempt found too few free seats for the oldest request of the chosen queue
    /// (`AddDispatchWithNoAccommodation`).
    pub fn inc_dispatch_no_accommodation(&self, priority_level: &str, flow_schema: &str) {
        self.flow(priority_level, flow_schema)
            .no_accommodation()
            .inc();
    }

    /// The queue set's virtual clock was rebased (`AddEpochAdvance`).
    pub fn inc_epoch_advance(&self, priority_level: &str, success: bool) {
        let success = if success { "true" } else { "false" };
        self.flowcontrol
            .epoch_advance
            .with_label_values(&[priority_level, success])
            .inc();
    }

    /// R at the last virtual-time update (`SetCurrentR`).
    pub fn set_current_r(&self, priority_level: &str, r: f64) {
        self.flowcontrol
            .current_r
            .with_label_values(&[priority_level])
            .set(r);
    }

    /// R and S of a level's last dispatch from a queue and the S bounds (`SetDispatchMetrics`).
    pub fn set_dispatch_metrics(&self, priority_level: &str, d: &DispatchR) {
        let fc = &self.flowcontrol;
        fc.dispatch_r.with_label_values(&[priority_level]).set(d.r);
        fc.latest_s.with_label_values(&[priority_level]).set(d.s);
        for (vec, min, max) in [
            (&fc.next_s_bounds, d.s_min, d.s_max),
            (
                &fc.next_discounted_s_bounds,
                d.discounted_s_min,
                d.discounted_s_max,
            ),
        ] {
            vec.with_label_values(&[priority_level, "min"]).set(min);
            vec.with_label_values(&[priority_level, "max"]).set(max);
        }
    }

    /// A level's configured limits (`SetPriorityLevelConfiguration`: NominalCL, MinCL, MaxCL) and
    /// its current limit (which the apiserver first reports at the next borrowing adjustment; we
    /// report the initial one at once so the gauge is never missing).
    pub fn set_limits(
        &self,
        priority_level: &str,
        nominal: u32,
        lower: u32,
        upper: u32,
        current: u32,
    ) {
        let fc = &self.flowcontrol;
        let pl = &[priority_level];
        fc.nominal_limit
            .with_label_values(pl)
            .set(f64::from(nominal));
        fc.lower_limit.with_label_values(pl).set(f64::from(lower));
        fc.upper_limit.with_label_values(pl).set(f64::from(upper));
        fc.current_limit
            .with_label_values(pl)
            .set(f64::from(current));
    }

    /// The outcome of one borrowing adjustment for a level
    /// (`NotePriorityLevelConcurrencyAdjustment`).
    pub fn note_concurrency_adjustment(
        &self,
        priority_level: &str,
        stats: &SeatDemandStats,
        adjustment: &LevelAdjustment,
    ) {
        let fc = &self.flowcontrol;
        let pl = &[priority_level];
        fc.demand_hwm
            .with_label_values(pl)
            .set(f64::from(stats.high_watermark));
        fc.demand_avg.with_label_values(pl).set(stats.avg);
        fc.demand_stdev.with_label_values(pl).set(stats.std_dev);
        fc.demand_smoothed.with_label_values(pl).set(stats.smoothed);
        fc.target_seats.with_label_values(pl).set(adjustment.target);
        fc.current_limit
            .with_label_values(pl)
            .set(f64::from(adjustment.current_cl));
    }

    /// The fair fraction of the last allocation (`SetFairFrac`; 0 when bounds decided it).
    pub fn set_fair_frac(&self, fair_frac: f64) {
        self.flowcontrol.fair_frac.set(fair_frac);
    }
}
