//! Borrowing between priority levels: seat-demand statistics and the periodic adjustment of every
//! level's current concurrency limit (section (e) of the reference).
//!
//! Mirrors `apf_controller.go: updateBorrowingLocked` and `seatDemandStats`, `conc_alloc.go` and
//! `fairqueuing/integrator.go`. Sans-I/O: the caller resets each level's integrator, hands the
//! results in, and applies the returned limits to the queue sets.

mod allocation;
mod integrator;

use std::time::Duration;

pub use allocation::{compute_concurrency_allocation, AllocError, AllocItem, MIN_TARGET};
pub use integrator::{IntegratorResults, SeatDemandIntegrator};

use super::limits::LevelLimits;

/// How often the apiserver runs the adjustment (`borrowingAdjustmentPeriod`).
pub const BORROWING_ADJUSTMENT_PERIOD: Duration = Duration::from_secs(10);

/// Weight of the previous smoothed demand at each adjustment (`seatDemandSmoothingCoefficient`);
/// with one adjustment per 10 s this is a half-life of about 5 minutes.
pub const SEAT_DEMAND_SMOOTHING_COEFFICIENT: f64 = 0.977;

/// The seat-demand statistics of a level, carried from one adjustment to the next.
///
/// Mirrors `apf_controller.go: seatDemandStats`. A level whose queue set is (re)created starts from
/// `Default` (all zero).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeatDemandStats {
    /// Time-weighted average demand of the last period with a non-zero duration.
    pub avg: f64,
    /// Its standard deviation (NaN replaced by 0).
    pub std_dev: f64,
    /// `round(max demand)` over the last period.
    pub high_watermark: u32,
    /// `max(avg + std_dev, 0.977 × smoothed + 0.023 × (avg + std_dev))`.
    pub smoothed: f64,
}

impl SeatDemandStats {
    /// Folds in the observations of one period. The high watermark is always taken; the other
    /// fields only when the period had a positive duration.
    pub fn update(&mut self, obs: &IntegratorResults) {
        // `as` saturates: negative and NaN maxima (never produced by seat counts) give 0.
        self.high_watermark = obs.max.round() as u32;
        if obs.duration <= 0.0 {
            return;
        }
        let deviation = if obs.deviation.is_nan() {
            0.0
        } else {
            obs.deviation
        };
        self.avg = obs.average;
        self.std_dev = deviation;
        let envelope = obs.average + deviation;
        self.smoothed = envelope.max(
            SEAT_DEMAND_SMOOTHING_COEFFICIENT * self.smoothed
                + (1.0 - SEAT_DEMAND_SMOOTHING_COEFFICIENT) * envelope,
        );
    }
}

/// One level's input to, and state carried across, [`adjust_borrowing`].
#[derive(Debug, Clone, PartialEq)]
pub struct LevelDemand {
    /// Whether the level is `Exempt` (its demand is taken off the top instead of being allocated).
    pub exempt: bool,
    /// The level's static limits.
    pub limits: LevelLimits,
    /// What its integrator returned from `reset(now)` for the period just ended.
    pub obs: IntegratorResults,
    /// In/out: the statistics, updated with `obs`.
    pub stats: SeatDemandStats,
    /// In/out: the current concurrency limit; the previous value is kept if the allocation fails.
    pub current_cl: u32,
}

/// The result of one adjustment for one level (same index as the input).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelAdjustment {
    /// The new concurrency limit (also written to [`LevelDemand::current_cl`]).
    pub current_cl: u32,
    /// The denominator of the level's seat ratio gauges: `current_cl`, or
    /// `max(1, round(ServerCL / 10))` when that is 0.
    pub concurrency_denominator: u32,
    /// The allocation target (`max(minCurrentCL, smoothed)`) for the
    /// `apiserver_flowcontrol_target_seats` gauge; for exempt levels its current limit (the
    /// apiserver reports an arbitrary other level's target there, an indexing slip).
    pub target: f64,
}

/// The result of one adjustment.
#[derive(Debug, Clone, PartialEq)]
pub struct BorrowingOutcome {
    /// Per level, in input order.
    pub levels: Vec<LevelAdjustment>,
    /// The fair proportion found by the allocation (`apiserver_flowcontrol_seat_fair_frac`); 0 when
    /// the lower bounds decided everything.
    pub seat_fair_frac: f64,
    /// Why the allocation failed, if it did (the old limits were kept for non-exempt levels).
    pub error: Option<AllocError>,
}

/// Runs one borrowing adjustment over all levels: folds each level's observations into its stats,
/// then sets every `current_cl`.
///
/// Mirrors `apf_controller.go: updateBorrowingLocked`. The exempt levels' demand
/// (`max(MinCL, highWatermark)`) comes off `nominal_cl_sum` first; if what remains does not cover
/// the non-exempt MinCLs everyone gets MinCL; if it does not cover their `minCurrentCL`
/// (`max(MinCL, min(NominalCL, highWatermark))`) the surplus over MinCL is shared in proportion;
/// otherwise the full `nominal_cl_sum` is allocated by [`compute_concurrency_allocation`] (the
/// reference uses the full sum here, not the remainder). When there are no non-exempt levels but
/// `nominal_cl_sum > 0` the reference logs "impossible" and changes nothing; so do we (after
/// updating the stats).
pub fn adjust_borrowing(
    server_cl: u32,
    nominal_cl_sum: u32,
    levels: &mut [LevelDemand],
) -> BorrowingOutcome {
    let mut remaining = i64::from(nominal_cl_sum);
    let (mut min_cl_sum, mut min_current_cl_sum) = (0i64, 0i64);
    let mut items = Vec::with_capacity(levels.len());
    for level in levels.iter_mut() {
        level.stats.update(&level.obs);
        let min_current_cl = min_current_cl(level);
        if level.exempt {
            remaining -= i64::from(min_current_cl);
        } else {
            items.push(AllocItem {
                lower_bound: f64::from(min_current_cl),
                upper_bound: f64::from(level.limits.max_cl),
                target: f64::from(min_current_cl).max(level.stats.smoothed),
            });
            min_cl_sum += i64::from(level.limits.min_cl);
            min_current_cl_sum += i64::from(min_current_cl);
        }
    }
    if items.is_empty() && nominal_cl_sum > 0 {
        let unchanged = levels
            .iter()
            .map(|l| adjustment(server_cl, l.current_cl, f64::from(l.current_cl)))
            .collect();
        return BorrowingOutcome {
            levels: unchanged,
            seat_fair_frac: 0.0,
            error: None,
        };
    }

    let mut share_frac = 0.0;
    let mut seat_fair_frac = 0.0;
    let mut error = None;
    let mut allocs = Vec::new();
    if remaining <= min_cl_sum {
        // Everyone gets MinCL.
    } else if remaining <= min_current_cl_sum {
        share_frac = (remaining - min_cl_sum) as f64 / (min_current_cl_sum - min_cl_sum) as f64;
    } else {
        match compute_concurrency_allocation(f64::from(nominal_cl_sum), &items) {
            Ok((a, fair_prop)) => {
                allocs = a;
                seat_fair_frac = fair_prop;
            }
            Err(e) => {
                tracing::error!(error = %e, "Unable to derive new concurrency limits");
                allocs = levels
                    .iter()
                    .filter(|l| !l.exempt)
                    .map(|l| f64::from(l.current_cl))
                    .collect();
                error = Some(e);
            }
        }
    }

    let mut item_index = 0;
    let mut adjustments = Vec::with_capacity(levels.len());
    for level in levels.iter_mut() {
        let min_current_cl = min_current_cl(level);
        let (current_cl, target) = if level.exempt {
            (min_current_cl, f64::from(min_current_cl))
        } else {
            let target = items[item_index].target;
            let min_cl = level.limits.min_cl;
            let cl = if remaining <= min_cl_sum {
                min_cl
            } else if remaining <= min_current_cl_sum {
                min_cl + (f64::from(min_current_cl - min_cl) * share_frac).round() as u32
            } else {
                allocs[item_index].round() as u32
            };
            item_index += 1;
            (cl, target)
        };
        level.current_cl = current_cl;
        adjustments.push(adjustment(server_cl, current_cl, target));
    }
    BorrowingOutcome {
        levels: adjustments,
        seat_fair_frac,
        error,
    }
}

/// The lowest limit the level may get this period: exempt `max(MinCL, highWatermark)`, others
/// `max(MinCL, min(NominalCL, highWatermark))`.
fn min_current_cl(level: &LevelDemand) -> u32 {
    let hw = level.stats.high_watermark;
    if level.exempt {
        level.limits.min_cl.max(hw)
    } else {
        level.limits.min_cl.max(level.limits.nominal_cl.min(hw))
    }
}

fn adjustment(server_cl: u32, current_cl: u32, target: f64) -> LevelAdjustment {
    LevelAdjustment {
        current_cl,
        concurrency_denominator: concurrency_denominator(current_cl, server_cl),
        target,
    }
}

/// `currentCL` if positive, else `max(1, round(ServerCL / 10))`: the denominator of the seat ratio
/// gauges, never 0.
pub fn concurrency_denominator(current_cl: u32, server_cl: u32) -> u32 {
    if current_cl > 0 {
        current_cl
    } else {
        (f64::from(server_cl) / 10.0).round().max(1.0) as u32
    }
}

#[cfg(test)]
mod tests;
