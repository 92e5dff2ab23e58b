//! The concurrency allocation problem solved at every borrowing adjustment.
//!
//! Mirrors `conc_alloc.go: computeConcurrencyAllocation`, including its tolerances, its error cases
//! and the sweep over the sorted relative bounds.

/// Targets below this are treated as this, so that no target divides by zero.
pub const MIN_TARGET: f64 = 0.001;

/// Tolerance on the comparisons of bound sums with the required sum.
const EPSILON: f64 = 0.000_000_1;

/// One class (priority level) of the allocation problem.
///
/// Mirrors `conc_alloc.go: allocProblemItem`. Valid items have `target ≥ lower_bound ≥ 0` and
/// `upper_bound ≥ lower_bound`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllocItem {
    /// What the class would like, in seats.
    pub target: f64,
    /// The least it may get.
    pub lower_bound: f64,
    /// The most it may get.
    pub upper_bound: f64,
}

/// Why an allocation problem has no solution.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AllocError {
    /// The required sum is negative.
    #[error("negative sums are not supported")]
    NegativeSum,
    /// An item has a negative lower bound.
    #[error("lower bound {index} is {lower} but negative lower bounds are not allowed")]
    NegativeLowerBound { index: usize, lower: f64 },
    /// An item's target is below its lower bound.
    #[error("target {index} is {target}, which is below its lower bound of {lower}")]
    TargetBelowLowerBound {
        index: usize,
        target: f64,
        lower: f64,
    },
    /// An item's upper bound is below its lower bound.
    #[error("upper bound {index} is {upper} but should not be less than the lower bound {lower}")]
    UpperBelowLowerBound {
        index: usize,
        upper: f64,
        lower: f64,
    },
    /// The lower bounds alone exceed the required sum.
    #[error("lower bounds sum to {low_sum}, which is higher than the required sum of {required}")]
    LowerBoundsTooHigh { low_sum: f64, required: f64 },
    /// The upper bounds cannot reach the required sum.
    #[error("upper bounds sum to {high_sum}, which is lower than the required sum of {required}")]
    UpperBoundsTooLow { high_sum: f64, required: f64 },
    /// The sweep ran out of bounds: only reachable through floating-point trouble (NaN input).
    #[error("impossible: ran out of bounds to consider in bound-constrained problem")]
    RanOutOfBounds,
}

/// An item with its target kept off zero and its bounds divided by that target.
#[derive(Debug, Clone, Copy)]
struct Relative {
    target: f64,
    lower: f64,
    upper: f64,
}

/// Returns `(allocs, fair_prop)` with `Σ allocs = required_sum` and, for each item,
/// `alloc = clamp(fair_prop × max(target, MIN_TARGET), lower_bound, upper_bound)`, or why no such
/// allocation exists.
///
/// Mirrors `conc_alloc.go: computeConcurrencyAllocation` (the apiserver passes an integer sum; any
/// `f64` works here).
pub fn compute_concurrency_allocation(
    required_sum: f64,
    items: &[AllocItem],
) -> Result<(Vec<f64>, f64), AllocError> {
    if required_sum < 0.0 {
        return Err(AllocError::NegativeSum);
    }
    let relative = relative_items(items)?;
    let low_sum: f64 = items.iter().map(|i| i.lower_bound).sum();
    let high_sum: f64 = items.iter().map(|i| i.upper_bound).sum();
    let target_sum: f64 = relative.iter().map(|r| r.target).sum();
    // Go starts both ranges at MaxFloat32 / 0 (its zero values); keep that for empty problems.
    let lb_min = relative
        .iter()
        .map(|r| r.lower)
        .fold(f64::from(f32::MAX), f64::min);
    let lb_max = relative.iter().map(|r| r.lower).fold(0.0, f64::max);
    let ub_min = relative
        .iter()
        .map(|r| r.upper)
        .fold(f64::from(f32::MAX), f64::min);
    let ub_max = relative.iter().map(|r| r.upper).fold(0.0, f64::max);
    if low_sum - required_sum > EPSILON {
        return Err(AllocError::LowerBoundsTooHigh {
            low_sum,
            required: required_sum,
        });
    }
    if required_sum - high_sum > EPSILON {
        return Err(AllocError::UpperBoundsTooLow {
            high_sum,
            required: required_sum,
        });
    }
    if required_sum == 0.0 {
        return Ok((vec![0.0; items.len()], 0.0));
    }
    if low_sum - required_sum > -EPSILON {
        // No wiggle room: everything is pinned at its lower bound.
        return Ok((items.iter().map(|i| i.lower_bound).collect(), lb_min));
    }
    if required_sum - high_sum > -EPSILON {
        return Ok((items.iter().map(|i| i.upper_bound).collect(), ub_max));
    }
    let fair_prop = required_sum / target_sum;
    if lb_max <= fair_prop && fair_prop <= ub_min {
        // No bound matters.
        let allocs = relative.iter().map(|r| r.target * fair_prop).collect();
        return Ok((allocs, fair_prop));
    }
    let fair_prop = sweep(required_sum, low_sum, lb_min, &relative)?;
    let allocs = items
        .iter()
        .zip(&relative)
        .map(|(i, r)| i.lower_bound.max(i.upper_bound.min(fair_prop * r.target)))
        .collect();
    Ok((allocs, fair_prop))
}

/// Validates the items and relativises them to their (floored) targets.
fn relative_items(items: &[AllocItem]) -> Result<Vec<Relative>, AllocError> {
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            if item.lower_bound < 0.0 {
                return Err(AllocError::NegativeLowerBound {
                    index,
                    lower: item.lower_bound,
                });
            }
            if item.target < item.lower_bound {
                return Err(AllocError::TargetBelowLowerBound {
                    index,
                    target: item.target,
                    lower: item.lower_bound,
                });
            }
            if item.upper_bound < item.lower_bound {
                return Err(AllocError::UpperBelowLowerBound {
                    index,
                    upper: item.upper_bound,
                    lower: item.lower_bound,
                });
            }
            let target = item.target.max(MIN_TARGET);
            Ok(Relative {
                target,
                lower: item.lower_bound / target,
                upper: item.upper_bound / target,
            })
        })
        .collect()
}

/// One relative bound of the sweep: its value, its item's target, and whether it is a lower bound.
struct Bound {
    value: f64,
    target: f64,
    lower: bool,
}

/// Raises `fair_prop` from the smallest relative lower bound through the sorted bounds until the
/// clamped allocations sum to `required_sum`; each stretch between two bounds is linear.
fn sweep(
    required_sum: f64,
    low_sum: f64,
    lb_min: f64,
    relative: &[Relative],
) -> Result<f64, AllocError> {
    let mut bounds: Vec<Bound> = relative
        .iter()
        .flat_map(|r| {
            [
                Bound {
                    value: r.lower,
                    target: r.target,
                    lower: true,
                },
                Bound {
                    value: r.upper,
                    target: r.target,
                    lower: false,
                },
            ]
        })
        .collect();
    bounds.sort_by(|a, b| a.value.total_cmp(&b.value));

    let mut sum_so_far = low_sum;
    let mut fair_prop = lb_min;
    // The classes whose allocation currently moves with fair_prop, and the sum of their targets;
    // the deltas are those of the last bound looked at, applied once fair_prop passes it.
    let mut sensitive_target_sum = 0.0;
    let mut sensitive_classes: i64 = 0;
    let mut delta_target_sum = 0.0;
    let mut delta_classes: i64 = 0;
    let mut next = bounds.iter();
    while sum_so_far < required_sum {
        // Take every bound equal to fair_prop; stop at the first one above it.
        let next_bound = loop {
            sensitive_target_sum += delta_target_sum;
            sensitive_classes += delta_classes;
            let bound = next.next().ok_or(AllocError::RanOutOfBounds)?;
            (delta_classes, delta_target_sum) = if bound.lower {
                (1, bound.target)
            } else {
                (-1, -bound.target)
            };
            if bound.value > fair_prop {
                break bound.value;
            }
        };
        if sensitive_classes == 0 {
            fair_prop = next_bound;
            continue;
        }
        let next_prop = fair_prop + (required_sum - sum_so_far) / sensitive_target_sum;
        if next_prop <= next_bound {
            fair_prop = next_prop;
            break;
        }
        sum_so_far += (next_bound - fair_prop) * sensitive_target_sum;
        fair_prop = next_bound;
    }
    Ok(fair_prop)
}
