use super::*;
use crate::config::{LimitResponse, LimitedPriorityLevel, PriorityLevelSpec, Queuing};

/// A `Limited` level that queues with the given hand size.
pub(crate) fn queuing_level(
    name: &str,
    shares: u32,
    lendable: u32,
    borrowing: Option<u32>,
    hand_size: u32,
) -> PriorityLevel {
    limited_level(
        name,
        shares,
        lendable,
        borrowing,
        LimitResponse::Queue(Queuing {
            queues: 64,
            hand_size,
            queue_length_limit: 50,
        }),
    )
}

fn limited_level(
    name: &str,
    shares: u32,
    lendable: u32,
    borrowing: Option<u32>,
    limit_response: LimitResponse,
) -> PriorityLevel {
    PriorityLevel {
        name: name.to_string(),
        uid: String::new(),
        spec: PriorityLevelSpec::Limited(LimitedPriorityLevel {
            nominal_concurrency_shares: shares,
            lendable_percent: lendable,
            borrowing_limit_percent: borrowing,
            limit_response,
        }),
    }
}

/// Kubernetes' bootstrap levels (mandatory + suggested), in the order of section (j).
pub(crate) fn bootstrap_levels() -> Vec<PriorityLevel> {
    vec![
        PriorityLevel {
            name: "exempt".into(),
            uid: String::new(),
            spec: PriorityLevelSpec::Exempt {
                nominal_concurrency_shares: 0,
                lendable_percent: 0,
            },
        },
        limited_level("catch-all", 5, 0, None, LimitResponse::Reject),
        queuing_level("system", 30, 33, None, 6),
        queuing_level("node-high", 40, 25, None, 6),
        queuing_level("leader-election", 10, 0, None, 4),
        queuing_level("workload-high", 40, 50, None, 6),
        queuing_level("workload-low", 100, 90, None, 6),
        queuing_level("global-default", 20, 50, None, 6),
    ]
}

fn compute(server_cl: u32, levels: &[PriorityLevel]) -> Vec<LevelLimits> {
    let refs: Vec<&PriorityLevel> = levels.iter().collect();
    compute_limits(server_cl, &refs)
}

#[test]
fn bootstrap_at_server_cl_600_matches_the_worked_example() {
    let limits = compute(600, &bootstrap_levels());
    let nominal: Vec<u32> = limits.iter().map(|l| l.nominal_cl).collect();
    let lendable: Vec<u32> = limits.iter().map(|l| l.lendable_cl).collect();
    let max_seats: Vec<Option<u32>> = limits.iter().map(|l| l.max_seats).collect();
    assert_eq!(nominal, [0, 13, 74, 98, 25, 98, 245, 49]);
    assert_eq!(nominal_cl_sum(&limits), 602);
    assert_eq!(lendable, [0, 0, 24, 25, 0, 49, 221, 25]);
    assert_eq!(
        max_seats,
        [
            None,
            None,
            Some(12),
            Some(15),
            Some(4),
            Some(15),
            Some(37),
            Some(8)
        ]
    );
    for l in &limits {
        assert_eq!(l.borrowing_cl, 600, "unset borrowing percent → ServerCL");
        assert_eq!(l.min_cl, l.nominal_cl - l.lendable_cl);
        assert_eq!(l.max_cl, l.nominal_cl + 600);
    }
}

#[test]
fn initial_current_cl_keeps_half_the_lendable_seats() {
    let limits = compute(600, &bootstrap_levels());
    let initial: Vec<u32> = limits.iter().map(|l| l.initial_current_cl()).collect();
    // NominalCL − floor(LendableCL / 2): system 74 − 12, workload-low 245 − 110, ...
    assert_eq!(initial, [0, 13, 62, 86, 25, 74, 135, 37]);
}

#[test]
fn zero_share_jail_level_gets_no_seats_but_one_max_seat() {
    let levels = vec![
        queuing_level("jail", 0, 0, Some(0), 6),
        queuing_level("other", 10, 0, None, 6),
    ];
    let limits = compute(600, &levels);
    assert_eq!(
        limits[0],
        LevelLimits {
            nominal_cl: 0,
            lendable_cl: 0,
            borrowing_cl: 0,
            min_cl: 0,
            max_cl: 0,
            max_seats: Some(1),
        }
    );
    assert_eq!(limits[1].nominal_cl, 600);
}

#[test]
fn all_levels_without_shares_get_nothing() {
    let levels = vec![queuing_level("a", 0, 0, None, 6)];
    let limits = compute(600, &levels);
    assert_eq!(limits[0].nominal_cl, 0);
    assert_eq!(limits[0].max_cl, 600);
}

#[test]
fn borrowing_percent_table() {
    // (borrowing percent, expected BorrowingCL) at NominalCL 100.
    let cases = [
        (None, 600),
        (Some(0), 0),
        (Some(50), 50),
        (Some(100), 100),
        (Some(250), 250),
        (Some(1000), 1000),
    ];
    for (percent, want) in cases {
        let levels = vec![
            queuing_level("a", 1, 0, percent, 6),
            queuing_level("b", 5, 0, None, 6),
        ];
        let limits = compute(600, &levels);
        assert_eq!(limits[0].nominal_cl, 100);
        assert_eq!(limits[0].borrowing_cl, want, "percent {percent:?}");
        assert_eq!(limits[0].max_cl, 100 + want);
    }
}

#[test]
fn percentages_round_halves_away_from_zero() {
    // NominalCL 5: 50 % → 2.5 → 3 (Go math.Round), 10 % → 0.5 → 1, 30 % → 1.5 → 2.
    for (percent, want) in [(50, 3), (10, 1), (30, 2), (70, 4)] {
        let levels = vec![
            queuing_level("a", 1, percent, Some(percent), 1),
            queuing_level("b", 119, 0, None, 6),
        ];
        let limits = compute(600, &levels);
        assert_eq!(limits[0].nominal_cl, 5);
        assert_eq!(limits[0].lendable_cl, want, "lendable {percent}");
        assert_eq!(limits[0].borrowing_cl, want, "borrowing {percent}");
        assert_eq!(limits[0].min_cl, 5 - want);
    }
}

#[test]
fn nominal_cl_rounds_up_so_the_sum_may_exceed_server_cl() {
    let levels = vec![
        queuing_level("a", 1, 0, None, 1),
        queuing_level("b", 1, 0, None, 1),
        queuing_level("c", 1, 0, None, 1),
    ];
    let limits = compute(100, &levels);
    assert!(limits.iter().all(|l| l.nominal_cl == 34));
    assert_eq!(nominal_cl_sum(&limits), 102);
}

#[test]
fn max_seats_table() {
    // (NominalCL, handSize, expected): min(ceil(0.15 × n), n / handSize), at least 1.
    let cases = [
        (0, 6, 1),
        (1, 1, 1),
        (7, 1, 2),
        (100, 1, 15),
        (100, 8, 12),
        (600, 6, 90),
        (5, 6, 1),
    ];
    for (nominal, hand, want) in cases {
        assert_eq!(max_seats(nominal, hand), want, "n={nominal} hand={hand}");
    }
}

#[test]
fn non_queuing_levels_have_no_max_seats() {
    let limits = compute(600, &bootstrap_levels());
    assert_eq!(limits[0].max_seats, None, "exempt");
    assert_eq!(limits[1].max_seats, None, "reject");
}
