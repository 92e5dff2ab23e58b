use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::*;
use crate::config::PriorityLevel;
use crate::fairqueue::limits::tests::{bootstrap_levels, queuing_level};
use crate::fairqueue::limits::{compute_limits, nominal_cl_sum};

// === integrator ===

#[tokio::test(start_paused = true)]
async fn integrator_weights_values_by_time() {
    let start = Instant::now();
    let mut igr = SeatDemandIntegrator::new(start);
    igr.set(2.0, start);
    igr.set(6.0, start + Duration::from_secs(3));
    let r = igr.reset(start + Duration::from_secs(4));
    // 2 for 3 s, 6 for 1 s: avg 3, E[x²] = (12 + 36) / 4 = 12, variance 3.
    assert_eq!(r.duration, 4.0);
    assert_eq!(r.average, 3.0);
    assert!((r.deviation - 3f64.sqrt()).abs() < 1e-12);
    assert_eq!((r.min, r.max), (0.0, 6.0), "min/max start at 0");
}

#[tokio::test(start_paused = true)]
async fn integrator_reset_restarts_from_the_current_value() {
    let start = Instant::now();
    let mut igr = SeatDemandIntegrator::new(start);
    igr.add(5.0, start);
    igr.add(-1.0, start + Duration::from_secs(1));
    let _ = igr.reset(start + Duration::from_secs(2));
    let r = igr.reset(start + Duration::from_secs(12));
    assert_eq!((r.duration, r.average, r.deviation), (10.0, 4.0, 0.0));
    assert_eq!((r.min, r.max), (4.0, 4.0));
    assert_eq!(igr.value(), 4.0);
}

#[tokio::test(start_paused = true)]
async fn integrator_without_elapsed_time_gives_nan() {
    let start = Instant::now();
    let mut igr = SeatDemandIntegrator::new(start);
    igr.set(3.0, start);
    let r = igr.results(start);
    assert_eq!(r.duration, 0.0);
    assert!(r.average.is_nan() && r.deviation.is_nan());
    assert_eq!(r.max, 3.0);
}

// === seat demand stats ===

fn obs(duration: f64, average: f64, deviation: f64, max: f64) -> IntegratorResults {
    IntegratorResults {
        duration,
        average,
        deviation,
        min: 0.0,
        max,
    }
}

#[test]
fn stats_smooth_with_a_slow_decay_but_follow_rises_at_once() {
    let mut stats = SeatDemandStats::default();
    stats.update(&obs(10.0, 8.0, 2.0, 12.4));
    assert_eq!(stats.high_watermark, 12);
    assert_eq!(stats.smoothed, 10.0, "rise: envelope wins");
    stats.update(&obs(10.0, 0.0, f64::NAN, 0.5));
    assert_eq!(stats.high_watermark, 1, "0.5 rounds away from zero");
    assert_eq!(stats.std_dev, 0.0, "NaN deviation → 0");
    assert!((stats.smoothed - 9.77).abs() < 1e-12, "decay: 0.977 × 10");
}

#[test]
fn stats_of_an_empty_period_keep_all_but_the_high_watermark() {
    let mut stats = SeatDemandStats {
        avg: 3.0,
        std_dev: 1.0,
        high_watermark: 9,
        smoothed: 4.0,
    };
    stats.update(&obs(0.0, f64::NAN, f64::NAN, 2.0));
    assert_eq!(
        stats,
        SeatDemandStats {
            avg: 3.0,
            std_dev: 1.0,
            high_watermark: 2,
            smoothed: 4.0
        }
    );
}

// === adjust_borrowing ===

fn demands(server_cl: u32, levels: &[PriorityLevel]) -> (u32, Vec<LevelDemand>) {
    let refs: Vec<&PriorityLevel> = levels.iter().collect();
    let limits = compute_limits(server_cl, &refs);
    let sum = nominal_cl_sum(&limits);
    let demands = levels
        .iter()
        .zip(limits)
        .map(|(pl, limits)| LevelDemand {
            exempt: pl.is_exempt(),
            limits,
            obs: obs(0.0, f64::NAN, f64::NAN, 0.0),
            stats: SeatDemandStats::default(),
            current_cl: limits.initial_current_cl(),
        })
        .collect();
    (sum, demands)
}

fn current_cls(levels: &[LevelDemand]) -> Vec<u32> {
    levels.iter().map(|l| l.current_cl).collect()
}

#[test]
fn bootstrap_with_zero_demand_spreads_nominal_sum_by_min_cl() {
    let (sum, mut levels) = demands(600, &bootstrap_levels());
    let outcome = adjust_borrowing(600, sum, &mut levels);
    assert!((outcome.seat_fair_frac - 7.0 / 3.0).abs() < 1e-12);
    assert_eq!(outcome.error, None);
    let want = [0, 30, 117, 170, 58, 114, 56, 56];
    assert_eq!(current_cls(&levels), want);
    let reported: Vec<u32> = outcome.levels.iter().map(|a| a.current_cl).collect();
    assert_eq!(reported, want);
    // Exempt's limit is 0, so its gauges divide by round(600 / 10).
    assert_eq!(outcome.levels[0].concurrency_denominator, 60);
    assert_eq!(outcome.levels[2].concurrency_denominator, 117);
    assert_eq!(outcome.levels[2].target, 50.0, "target = MinCL of system");
}

#[test]
fn busy_exempt_level_pushes_everyone_to_min_cl() {
    let (sum, mut levels) = demands(600, &bootstrap_levels());
    levels[0].obs = obs(10.0, 400.0, 0.0, 400.0);
    let outcome = adjust_borrowing(600, sum, &mut levels);
    // remaining = 602 − 400 = 202 ≤ Σ MinCL = 258.
    assert_eq!(current_cls(&levels), [400, 13, 50, 73, 25, 49, 24, 24]);
    assert_eq!(outcome.seat_fair_frac, 0.0);
}

#[test]
fn remaining_between_min_sums_shares_the_surplus_over_min_cl() {
    let levels_cfg = vec![
        queuing_level("a", 1, 50, None, 1),
        queuing_level("b", 1, 50, None, 1),
        exempt_level(),
    ];
    let (sum, mut levels) = demands(200, &levels_cfg);
    assert_eq!(sum, 200, "a, b: NominalCL 100, MinCL 50; exempt 0");
    levels[0].obs = obs(10.0, 100.0, 0.0, 100.0);
    levels[1].obs = obs(10.0, 70.0, 0.0, 70.0);
    levels[2].obs = obs(10.0, 40.0, 0.0, 40.0);
    // remaining 160; Σ MinCL 100; Σ minCurrentCL 100 + 70 = 170 → shareFrac 60 / 70.
    adjust_borrowing(200, sum, &mut levels);
    let frac: f64 = 60.0 / 70.0;
    let a = 50 + (50.0 * frac).round() as u32;
    let b = 50 + (20.0 * frac).round() as u32;
    assert_eq!(current_cls(&levels), [a, b, 40]);
    assert_eq!((a, b), (93, 67));
}

#[test]
fn failed_allocation_keeps_the_previous_limits() {
    // Exempt lends all of its 300 seats, but the other level may not borrow: the upper bounds
    // (300) cannot reach the required 600.
    let levels_cfg = vec![exempt_with(10, 100), queuing_level("a", 10, 0, Some(0), 1)];
    let (sum, mut levels) = demands(600, &levels_cfg);
    levels[1].current_cl = 123;
    let outcome = adjust_borrowing(600, sum, &mut levels);
    assert!(matches!(
        outcome.error,
        Some(AllocError::UpperBoundsTooLow { .. })
    ));
    assert_eq!(current_cls(&levels), [0, 123]);
}

#[test]
fn only_exempt_levels_change_nothing() {
    let (sum, mut levels) = demands(600, &[exempt_with(10, 0)]);
    levels[0].current_cl = 7;
    levels[0].obs = obs(10.0, 1.0, 0.0, 900.0);
    let outcome = adjust_borrowing(600, sum, &mut levels);
    assert_eq!(current_cls(&levels), [7]);
    assert_eq!(
        levels[0].stats.high_watermark, 900,
        "stats are still updated"
    );
    assert_eq!(outcome.levels[0].current_cl, 7);
}

#[test]
fn demand_above_nominal_borrows_from_idle_levels() {
    let levels_cfg = vec![
        queuing_level("busy", 1, 50, None, 1),
        queuing_level("idle", 1, 50, None, 1),
    ];
    let (sum, mut levels) = demands(200, &levels_cfg);
    levels[0].obs = obs(10.0, 150.0, 0.0, 150.0);
    adjust_borrowing(200, sum, &mut levels);
    // busy: lower 100 (capped at NominalCL), target 150; idle: lower = target = 50.
    // fairProp = 200 / 200 = 1 → 150 and 50.
    assert_eq!(current_cls(&levels), [150, 50]);
}

#[test]
fn concurrency_denominator_is_never_zero() {
    for (current, server, want) in [(5, 600, 5), (0, 600, 60), (0, 4, 1), (0, 0, 1), (0, 15, 2)] {
        assert_eq!(concurrency_denominator(current, server), want);
    }
}

fn exempt_level() -> PriorityLevel {
    exempt_with(0, 0)
}

fn exempt_with(shares: u32, lendable: u32) -> PriorityLevel {
    PriorityLevel {
        name: "exempt".into(),
        uid: String::new(),
        spec: crate::config::PriorityLevelSpec::Exempt {
            nominal_concurrency_shares: shares,
            lendable_percent: lendable,
        },
    }
}

// === compute_concurrency_allocation ===

fn item(lower_bound: f64, target: f64, upper_bound: f64) -> AllocItem {
    AllocItem {
        target,
        lower_bound,
        upper_bound,
    }
}

#[test]
fn allocation_rejects_impossible_problems() {
    let cases: Vec<(f64, Vec<AllocItem>, AllocError)> = vec![
        (-1.0, vec![], AllocError::NegativeSum),
        (
            1.0,
            vec![item(-1.0, 1.0, 2.0)],
            AllocError::NegativeLowerBound {
                index: 0,
                lower: -1.0,
            },
        ),
        (
            1.0,
            vec![item(0.0, 1.0, 2.0), item(2.0, 1.0, 3.0)],
            AllocError::TargetBelowLowerBound {
                index: 1,
                target: 1.0,
                lower: 2.0,
            },
        ),
        (
            1.0,
            vec![item(2.0, 3.0, 1.0)],
            AllocError::UpperBelowLowerBound {
                index: 0,
                upper: 1.0,
                lower: 2.0,
            },
        ),
        (
            3.0,
            vec![item(2.0, 2.0, 5.0), item(2.0, 2.0, 5.0)],
            AllocError::LowerBoundsTooHigh {
                low_sum: 4.0,
                required: 3.0,
            },
        ),
        (
            11.0,
            vec![item(2.0, 2.0, 5.0), item(2.0, 2.0, 5.0)],
            AllocError::UpperBoundsTooLow {
                high_sum: 10.0,
                required: 11.0,
            },
        ),
        (
            1.0,
            vec![],
            AllocError::UpperBoundsTooLow {
                high_sum: 0.0,
                required: 1.0,
            },
        ),
    ];
    for (required, items, want) in cases {
        assert_eq!(
            compute_concurrency_allocation(required, &items),
            Err(want.clone()),
            "{want}"
        );
    }
}

#[test]
fn allocation_table() {
    // (required, items, allocs, fair_prop)
    let cases: Vec<(f64, Vec<AllocItem>, Vec<f64>, f64)> = vec![
        (0.0, vec![], vec![], 0.0),
        (0.0, vec![item(0.0, 1.0, 5.0)], vec![0.0], 0.0),
        // Lower bounds exactly meet the sum: fairProp = min lower/target.
        (
            4.0,
            vec![item(1.0, 4.0, 9.0), item(3.0, 3.0, 9.0)],
            vec![1.0, 3.0],
            0.25,
        ),
        // Upper bounds exactly meet the sum: fairProp = max upper/target.
        (
            6.0,
            vec![item(0.0, 1.0, 2.0), item(0.0, 2.0, 4.0)],
            vec![2.0, 4.0],
            2.0,
        ),
        // No bound matters.
        (
            6.0,
            vec![item(0.0, 1.0, 9.0), item(0.0, 2.0, 9.0)],
            vec![2.0, 4.0],
            2.0,
        ),
        // An upper bound bites: the rest goes to the other class.
        (
            10.0,
            vec![item(0.0, 1.0, 2.0), item(0.0, 1.0, 20.0)],
            vec![2.0, 8.0],
            8.0,
        ),
        // A lower bound bites.
        (
            10.0,
            vec![item(6.0, 6.0, 20.0), item(0.0, 6.0, 20.0)],
            vec![6.0, 4.0],
            4.0 / 6.0,
        ),
        // A zero target counts as 0.001.
        (
            1.0,
            vec![item(0.0, 0.0, 5.0), item(0.0, 0.0, 5.0)],
            vec![0.5, 0.5],
            500.0,
        ),
    ];
    for (required, items, want, want_prop) in cases {
        let (allocs, prop) =
            compute_concurrency_allocation(required, &items).expect("feasible problem");
        assert_eq!(allocs.len(), want.len());
        for (a, w) in allocs.iter().zip(&want) {
            assert!(
                (a - w).abs() < 1e-9,
                "{items:?}: got {allocs:?}, want {want:?}"
            );
        }
        assert!((prop - want_prop).abs() < 1e-9, "{items:?}: prop {prop}");
    }
}

/// A feasible problem: items with `0 ≤ lower ≤ target`, `lower ≤ upper`, a required sum between the
/// bound sums, and sometimes zero-target classes (as `conc_alloc_test.go` generates them).
fn feasible_problem() -> impl Strategy<Value = (f64, Vec<AllocItem>)> {
    let class = (
        0.0..4.0f64,
        0.0..2.0f64,
        0.0..3.0f64,
        prop::bool::weighted(0.15),
    )
        .prop_map(|(lower, t, u, zero)| {
            if zero {
                item(0.0, 0.0, u + 0.00001)
            } else {
                item(lower, lower + t, lower + u)
            }
        });
    (prop::collection::vec(class, 1..10), 0.0..=1.0f64).prop_map(|(items, frac)| {
        let low: f64 = items.iter().map(|i| i.lower_bound).sum();
        let high: f64 = items.iter().map(|i| i.upper_bound).sum();
        (low + (high - low) * frac, items)
    })
}

proptest! {
    #[test]
    fn feasible_allocations_sum_to_the_requirement_within_bounds((required, items) in feasible_problem()) {
        let (allocs, prop) = compute_concurrency_allocation(required, &items)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let sum: f64 = allocs.iter().sum();
        prop_assert!((sum - required).abs() <= 1e-6, "sum {} vs {}", sum, required);
        for (a, i) in allocs.iter().zip(&items) {
            prop_assert!(i.lower_bound <= *a && *a <= i.upper_bound, "{} not in {:?}", a, i);
            let fair = prop * i.target.max(MIN_TARGET);
            let want = fair.clamp(i.lower_bound, i.upper_bound);
            prop_assert!((a - want).abs() <= 1e-6 * want.abs().max(1.0), "{} vs {}", a, want);
        }
    }
}
