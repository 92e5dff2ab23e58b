//! Random scenarios from a seed: the same seed, the same scenario, on every machine.
//!
//! Each scenario mixes what the apiserver's queue set has to get right: widths from 1 to the
//! maximum, final seats held for an additional latency (some wider than the limit, which are
//! clamped), bursts that overflow queues, waits that reach the wait limit, contexts that end,
//! a concurrency limit at or below hand size × maximum width (k/k#115409) or below the maximum
//! width itself, and ties in virtual finish time (arrivals at the same instant, executions of
//! exactly the estimated service duration).

use super::{Scenario, ScenarioConfig, ScenarioRequest};

/// SplitMix64: small, fast, and fixed here, so a seed means the same scenario for ever.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `percent` %.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const MS: u64 = 1_000_000;

/// The scenario of `seed`.
pub fn generate(seed: u64) -> Scenario {
    let mut rng = Rng(seed ^ 0x243f_6a88_85a3_08d3);
    let queues = rng.pick(&[1, 2, 3, 5, 8, 16, 32, 64, 128]) as u32;
    let hand_size = rng.range(1, u64::from(queues.min(8))) as u32;
    let max_width = rng.pick(&[1, 1, 2, 3, 4, 6, 10]) as u32;
    let concurrency_limit = match rng.range(0, 3) {
        // At or below hand size × maximum width (k/k#115409).
        0 => rng.range(1, u64::from(hand_size * max_width)) as u32,
        // Below the maximum width: the widest run alone.
        1 if max_width > 1 => rng.range(1, u64::from(max_width - 1)) as u32,
        _ => rng.range(1, 24) as u32,
    };
    let queue_length_limit = rng.pick(&[0, 1, 2, 3, 5, 10, 50]) as u32;
    let request_wait_limit_ns = match rng.range(0, 4) {
        0 => 0,
        1 => rng.range(1, 20) * MS,
        _ => rng.range(20, 2000) * MS,
    };
    // Times on a millisecond grid make ties (same instant, same virtual finish time) common.
    let grid = rng.chance(50);
    let flows = rng.range(1, 12) as usize;
    let hashes: Vec<u64> = (0..flows).map(|_| rng.next()).collect();
    // Each flow's habits: width, execution time, final seats.
    let habits: Vec<(u32, u64, u32, u64)> = (0..flows)
        .map(|_| {
            let width = rng.range(1, u64::from(max_width)) as u32;
            let execution = match rng.range(0, 3) {
                // The estimated service duration: no correction of R at completion.
                0 => 3 * MS,
                1 => rng.range(1, 10) * MS,
                _ => rng.range(1, 200) * MS,
            };
            let (final_seats, latency) = if rng.chance(30) {
                let seats = rng.range(1, u64::from(max_width) * 2) as u32;
                (seats, rng.range(1, 50) * MS)
            } else {
                (0, 0)
            };
            (width, execution, final_seats, latency)
        })
        .collect();
    let count = rng.range(1, 250) as usize;
    // The load: the seat-time the requests ask for over the capacity, from light (most are
    // dispatched at once) to heavy overload (most wait, time out or are rejected).
    let load = rng.pick(&[0.2, 0.6, 0.9, 1.2, 2.0, 5.0]);
    let demand: f64 = habits
        .iter()
        .map(|&(width, execution, _, _)| f64::from(width) * execution as f64)
        .sum::<f64>()
        / flows as f64;
    let mean_gap = ((demand / f64::from(concurrency_limit) / load) as u64).max(1);
    let mut requests = Vec::with_capacity(count);
    let mut now: u64 = 0;
    while requests.len() < count {
        // A burst: several arrivals at one instant (or within a few nanoseconds).
        let burst = if rng.chance(25) { rng.range(2, 30) } else { 1 };
        for _ in 0..burst {
            if requests.len() == count {
                break;
            }
            let f = rng.range(0, flows as u64 - 1) as usize;
            let (width, execution, final_seats, latency) = habits[f];
            let jitter = |rng: &mut Rng, v: u64| {
                if grid || rng.chance(50) {
                    v
                } else {
                    (v + rng.range(0, MS)).max(1)
                }
            };
            let initial_seats = if rng.chance(20) {
                rng.range(1, u64::from(max_width)) as u32
            } else {
                width
            };
            let execution_ns = jitter(&mut rng, execution);
            let deadline_ns = rng
                .chance(10)
                .then(|| now + rng.range(1, 100) * if grid { MS } else { rng.range(1, MS) });
            requests.push(ScenarioRequest {
                arrival_ns: now,
                flow_hash: hashes[f],
                initial_seats,
                final_seats,
                additional_latency_ns: if final_seats > 0 {
                    jitter(&mut rng, latency)
                } else {
                    0
                },
                execution_ns,
                deadline_ns,
            });
            if !grid && rng.chance(30) {
                now += rng.range(1, 5);
            }
        }
        // Uniform in 0..=2×mean per arrival; on the grid, whole milliseconds.
        let mean = mean_gap * burst;
        let gap = rng.range(0, 2 * mean);
        let gap = if grid { gap / MS * MS } else { gap };
        now += gap;
    }
    Scenario {
        config: ScenarioConfig {
            queues,
            hand_size,
            queue_length_limit,
            concurrency_limit,
            request_wait_limit_ns,
        },
        requests,
    }
}
