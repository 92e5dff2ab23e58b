//! Pauses between retries, spread at random as client-go's `wait` package spreads them, so that
//! many proxies failing together do not retry together.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// `wait.Jitter`: `wait` plus up to `factor` × `wait` more, at random (`factor` ≤ 0: `wait`).
pub fn jittered(wait: Duration, factor: f64) -> Duration {
    if factor <= 0.0 {
        return wait;
    }
    wait + wait.mul_f64(factor * random_fraction())
}

/// A number in `[0, 1)`. Retry spreading needs no CSPRNG: the standard library's randomly keyed
/// hasher is enough.
fn random_fraction() -> f64 {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (random >> 11) as f64 / (1u64 << 53) as f64
}

/// Exponential backoff with jitter, as the reflector's backoff manager: each pause is the current
/// step plus up to one step more, and the step doubles up to a cap.
#[derive(Debug, Clone)]
pub struct Backoff {
    step: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `initial`, doubling up to `max`.
    pub const fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { step: initial, max }
    }

    /// The next pause.
    pub fn pause(&mut self) -> Duration {
        let step = self.step;
        self.step = (step * 2).min(self.max);
        jittered(step, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_with_at_most_one_step_of_jitter() {
        let (initial, max) = (Duration::from_millis(800), Duration::from_secs(30));
        let mut backoff = Backoff::new(initial, max);
        let mut step = initial;
        for _ in 0..10 {
            let pause = backoff.pause();
            assert!(
                pause >= step && pause <= step * 2,
                "{pause:?} for step {step:?}"
            );
            step = (step * 2).min(max);
        }
        assert_eq!(backoff.step, max);
    }

    #[test]
    fn jitter_stays_within_its_factor() {
        let wait = Duration::from_secs(10);
        assert_eq!(jittered(wait, 0.0), wait);
        for _ in 0..100 {
            let got = jittered(wait, 0.5);
            assert!(got >= wait && got <= wait.mul_f64(1.5), "{got:?}");
        }
    }
}
