//! The shuffle-sharding check: how likely a mouse flow is to find every queue of its hand taken
//! by elephant flows.

use crate::config::PriorityLevel;

use super::{Code, Files, Finding, LintOptions};

/// The probability that every one of the `hand_size` queues a mouse flow is dealt (out of
/// `queues`) is also in the hand of at least one of `elephants` other flows, each dealt an
/// independent, uniformly random hand — the event in which shuffle sharding cannot keep the mouse
/// away from the elephants, whichever queue of its hand it picks.
///
/// Exact, by inclusion–exclusion over the mouse's queues that no elephant covers:
/// `P = Σ_{j=0..H} (−1)^j · C(H, j) · (C(Q−j, H) / C(Q, H))^E`, where `C(Q−j, H) / C(Q, H)` is the
/// chance that one elephant's hand avoids `j` given queues. The dealer (`shuffle_sharding.rs`)
/// deals a hand as a uniformly random `H`-subset of the deck (up to the 60-bit hash's rounding),
/// which is what the formula assumes.
pub fn mouse_squash_probability(queues: u32, hand_size: u32, elephants: u32) -> f64 {
    if hand_size == 0 || hand_size > queues {
        return 0.0;
    }
    let (q, h) = (f64::from(queues), f64::from(hand_size));
    let mut total = 0.0;
    let mut choose_h_j = 1.0; // C(H, j)
    let mut avoid: f64 = 1.0; // C(Q−j, H) / C(Q, H) = Π_{i<j} (Q−H−i) / (Q−i)
    for j in 0..=hand_size {
        let jf = f64::from(j);
        let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
        total += sign * choose_h_j * avoid.powi(i32::try_from(elephants).unwrap_or(i32::MAX));
        choose_h_j = choose_h_j * (h - jf) / (jf + 1.0);
        avoid *= ((q - h - jf) / (q - jf)).max(0.0);
    }
    total.clamp(0.0, 1.0)
}

/// The finding for a queuing level whose hand is too likely to be squashed.
pub(super) fn lint_level(
    pl: &PriorityLevel,
    options: &LintOptions,
    files: &Files<'_>,
) -> Option<Finding> {
    let queuing = pl.queuing()?;
    let (queues, hand) = (queuing.queues, queuing.hand_size);
    if queues <= 1 {
        return None;
    }
    let p = mouse_squash_probability(queues, hand, options.elephant_flows);
    if p <= options.squash_threshold {
        return None;
    }
    let kind = "PriorityLevelConfiguration";
    let mut f = files.finding(
        Code::ShuffleShardingWeak,
        kind,
        &pl.name,
        "spec.limited.limitResponse.queuing.handSize",
    );
    f.message = format!(
        "with handSize {hand} of {queues} queues, a mouse flow shares every queue of its hand with \
         {} elephant flows with probability {:.1}%; raise queues or handSize",
        options.elephant_flows,
        p * 100.0
    );
    Some(f)
}
