//! The split of a budget among the live replicas: a floor each, the rest where the seat demand
//! is. Pure arithmetic; every replica computes it from what it has seen, and the protocol
//! ([`super::protocol`]) makes disagreements between views safe.

/// The shares of `budget` for replicas whose seat demands are `demands` (one per replica, in a
/// fixed order), in the same order. The shares never sum past `budget`.
///
/// Each replica gets `floor` (the seats that let it serve every priority level). When the floors
/// do not fit (`budget < replicas × floor`) each gets `budget / replicas` instead, rounded down.
/// The rest goes to the demand above the floors: when it covers every replica's demand above
/// its floor, each gets that demand and an equal part of what is left (idle replicas keep room
/// for a burst); otherwise it is shared in proportion to the demand above the floor.
/// Demands that are negative or not numbers count as 0.
pub fn split(budget: u32, floor: u32, demands: &[f64]) -> Vec<u32> {
    let replicas = u32::try_from(demands.len()).unwrap_or(u32::MAX);
    if replicas == 0 {
        return Vec::new();
    }
    let floors = u64::from(floor) * u64::from(replicas);
    if floors >= u64::from(budget) {
        return vec![budget / replicas; demands.len()];
    }
    let rest = budget - floor * replicas;
    let excess: Vec<f64> = demands
        .iter()
        .map(|d| {
            let above = d - f64::from(floor);
            if above.is_finite() && above > 0.0 {
                above
            } else {
                0.0
            }
        })
        .collect();
    let wanted: f64 = excess.iter().sum();
    if wanted <= f64::from(rest) {
        let granted: Vec<u32> = excess.iter().map(|e| e.ceil() as u32).collect();
        let granted_sum: u32 = granted.iter().sum();
        // Ceilings may overshoot `rest` by under one seat per replica; take the overshoot back
        // from the equal part, and if that is not enough, fall back to rounding down.
        if granted_sum <= rest {
            let equal = (rest - granted_sum) / replicas;
            return granted.iter().map(|g| floor + g + equal).collect();
        }
        return excess.iter().map(|e| floor + e.floor() as u32).collect();
    }
    excess
        .iter()
        .map(|e| floor + (f64::from(rest) * e / wanted).floor() as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn splits_as_the_table_says() {
        let cases: &[(u32, u32, &[f64], &[u32])] = &[
            // Idle replicas: floors and an equal part of the rest.
            (30, 7, &[0.0, 0.0, 0.0], &[10, 10, 10]),
            // All the load on one: it gets everything above the others' floors.
            (30, 7, &[100.0, 0.0, 0.0], &[16, 7, 7]),
            // Demand that fits: each gets its demand, the rest equally.
            (60, 5, &[10.0, 20.0], &[25, 35]),
            // Demand that does not fit: in proportion to the demand above the floor.
            (30, 5, &[25.0, 15.0], &[18, 11]),
            // Floors that do not fit: an equal part each.
            (10, 7, &[50.0, 0.0], &[5, 5]),
            (2, 7, &[0.0, 0.0, 0.0], &[0, 0, 0]),
            // Bad numbers count as no demand.
            (30, 7, &[f64::NAN, -3.0, f64::INFINITY], &[10, 10, 10]),
            (30, 7, &[], &[]),
        ];
        for (budget, floor, demands, want) in cases {
            assert_eq!(
                split(*budget, *floor, demands),
                want.to_vec(),
                "split({budget}, {floor}, {demands:?})"
            );
        }
    }

    proptest! {
        #[test]
        fn shares_never_sum_past_the_budget_and_keep_their_floors(
            budget in 0u32..2000,
            floor in 0u32..50,
            demands in proptest::collection::vec(0.0f64..5000.0, 0..12),
        ) {
            let shares = split(budget, floor, &demands);
            prop_assert_eq!(shares.len(), demands.len());
            prop_assert!(shares.iter().map(|s| u64::from(*s)).sum::<u64>() <= u64::from(budget));
            let floors_fit = u64::from(floor) * demands.len() as u64 <= u64::from(budget);
            if floors_fit {
                prop_assert!(shares.iter().all(|s| *s >= floor));
            }
        }

        #[test]
        fn more_demand_never_gets_a_smaller_share(
            budget in 1u32..2000,
            floor in 0u32..20,
            demands in proptest::collection::vec(0.0f64..500.0, 2..8),
        ) {
            let shares = split(budget, floor, &demands);
            for i in 0..demands.len() {
                for j in 0..demands.len() {
                    if demands[i] > demands[j] + 1.0 {
                        prop_assert!(shares[i] + 1 >= shares[j], "{demands:?} → {shares:?}");
                    }
                }
            }
        }
    }
}
