//! Static concurrency limits of the priority levels: section (e) of the reference.
//!
//! Mirrors `apf_controller.go: finishQueueSetReconfigsLocked` (NominalCL, LendableCL, BorrowingCL,
//! MinCL, MaxCL, the per-level `maxSeats` of `MaxSeatsTracker`, the initial currentCL). The
//! arithmetic is done in `f64` like Go's `float64`; Rust's `f64::round` rounds halves away from zero,
//! exactly as Go's `math.Round`.

use crate::config::PriorityLevel;

/// `priorityLevelMaxSeatsPercent`: the share of NominalCL one request may occupy at most.
const MAX_SEATS_PERCENT: f64 = 0.15;

/// The limits of one priority level, derived from the server concurrency limit and the shares of
/// every level.
///
/// Mirrors the `nominalCL`, `minCL`, `maxCL` fields of `apf_controller.go: priorityLevelState` plus
/// the LendableCL/BorrowingCL it derives them from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelLimits {
    /// `ceil(ServerCL × shares / shareSum)`.
    pub nominal_cl: u32,
    /// `round(NominalCL × lendablePercent / 100)`.
    pub lendable_cl: u32,
    /// `round(NominalCL × borrowingLimitPercent / 100)`, or ServerCL when the percent is unset.
    pub borrowing_cl: u32,
    /// `NominalCL − LendableCL`: the level never goes below this.
    pub min_cl: u32,
    /// `NominalCL + BorrowingCL`: the level never goes above this.
    pub max_cl: u32,
    /// Max seats one request may take, for levels that queue: `max(1, min(ceil(NominalCL × 0.15),
    /// floor(NominalCL / handSize)))`. `None` for exempt and `Reject` levels (the work estimator
    /// then uses its global caps).
    pub max_seats: Option<u32>,
}

impl LevelLimits {
    /// The concurrency limit a level's queue set starts with when it is first created:
    /// `NominalCL − floor(LendableCL / 2)`. A level that already has a queue set keeps its current
    /// limit across configuration changes.
    pub fn initial_current_cl(&self) -> u32 {
        self.nominal_cl - self.lendable_cl / 2
    }
}

/// Computes the limits of every level, in the order given.
///
/// `levels` must hold every level of the configuration (exempt and quiescing ones included), since
/// the share sum runs over all of them. When every level has 0 shares, every NominalCL is 0 (Go would
/// divide by zero; validation makes that impossible anyway since `catch-all` has 5 shares).
pub fn compute_limits(server_cl: u32, levels: &[&PriorityLevel]) -> Vec<LevelLimits> {
    let share_sum: f64 = levels.iter().map(|pl| f64::from(shares(pl))).sum();
    levels
        .iter()
        .map(|pl| level_limits(server_cl, share_sum, pl))
        .collect()
}

/// `Σ NominalCL`: the `nominalCLSum` the borrowing adjustment distributes (may exceed ServerCL by
/// up to one seat per level, because of the ceilings).
pub fn nominal_cl_sum(limits: &[LevelLimits]) -> u32 {
    limits.iter().map(|l| l.nominal_cl).sum()
}

/// The shares of a level.
fn shares(pl: &PriorityLevel) -> u32 {
    pl.nominal_concurrency_shares()
}

/// Rounds a non-negative product to a seat count the way Go's `int(math.Round(x))` does for the
/// values that can occur here (`as` saturates a product beyond `u32`).
fn round_percent(cl: u32, percent: u32) -> u32 {
    (f64::from(cl) * f64::from(percent) / 100.0).round() as u32
}

fn level_limits(server_cl: u32, share_sum: f64, pl: &PriorityLevel) -> LevelLimits {
    let nominal_cl = if share_sum > 0.0 {
        // Same operation order as Go: (ServerCL × shares) / shareSum, then ceil.
        (f64::from(server_cl) * f64::from(shares(pl)) / share_sum).ceil() as u32
    } else {
        0
    };
    // Validation keeps lendablePercent within 0..=100; clamp so MinCL can never underflow.
    let lendable_cl = round_percent(nominal_cl, pl.lendable_percent()).min(nominal_cl);
    let borrowing_cl = match pl.borrowing_limit_percent() {
        Some(percent) => round_percent(nominal_cl, percent),
        None => server_cl,
    };
    let max_seats = pl.queuing().map(|q| max_seats(nominal_cl, q.hand_size));
    LevelLimits {
        nominal_cl,
        lendable_cl,
        borrowing_cl,
        min_cl: nominal_cl - lendable_cl,
        max_cl: nominal_cl.saturating_add(borrowing_cl),
        max_seats,
    }
}

/// `max(1, min(ceil(NominalCL × 0.15), NominalCL / handSize))` with Go's integer division.
fn max_seats(nominal_cl: u32, hand_size: u32) -> u32 {
    let by_percent = (f64::from(nominal_cl) * MAX_SEATS_PERCENT).ceil();
    // handSize ≥ 1 after validation; 0 (a level built by hand) only loses the hand-size bound.
    let by_hand = match nominal_cl.checked_div(hand_size) {
        Some(n) => f64::from(n),
        None => by_percent,
    };
    by_percent.min(by_hand).max(1.0) as u32
}

#[cfg(test)]
pub(crate) mod tests;
