//! Time-weighted statistics of a level's seat demand.
//!
//! Mirrors `fairqueuing/integrator.go` (`integrator`, `Moments`, `IntegratorResults`), with time
//! passed in instead of read from a clock.

use tokio::time::Instant;

/// What an integrator observed since its last reset.
///
/// Mirrors `fairqueuing/integrator.go: IntegratorResults`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntegratorResults {
    /// Seconds covered.
    pub duration: f64,
    /// Time-weighted average; NaN when `duration` is 0.
    pub average: f64,
    /// Time-weighted standard deviation; NaN when `duration` is 0 or the variance came out negative.
    pub deviation: f64,
    /// Least value set since the reset (the value at the reset included).
    pub min: f64,
    /// Greatest value set since the reset (the value at the reset included).
    pub max: f64,
}

/// ∫dt, ∫x dt and ∫x² dt.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Moments {
    elapsed_seconds: f64,
    integral_x: f64,
    integral_xx: f64,
}

impl Moments {
    fn add_constant(&mut self, dt: f64, x: f64) {
        self.elapsed_seconds += dt;
        self.integral_x += x * dt;
        self.integral_xx += x * x * dt;
    }

    fn avg_and_std_dev(&self) -> (f64, f64) {
        if self.elapsed_seconds <= 0.0 {
            return (f64::NAN, f64::NAN);
        }
        let avg = self.integral_x / self.elapsed_seconds;
        let variance = self.integral_xx / self.elapsed_seconds - avg * avg;
        if variance >= 0.0 {
            (avg, variance.sqrt())
        } else {
            (avg, f64::NAN)
        }
    }
}

/// Integrates a piecewise-constant value (a level's seat demand) over time.
///
/// Mirrors `fairqueuing/integrator.go: integrator`. The value starts at 0 with min = max = 0.
#[derive(Debug, Clone)]
pub struct SeatDemandIntegrator {
    last_time: Instant,
    x: f64,
    moments: Moments,
    min: f64,
    max: f64,
}

impl SeatDemandIntegrator {
    /// A new integrator whose value is 0 from `now` on.
    pub fn new(now: Instant) -> Self {
        SeatDemandIntegrator {
            last_time: now,
            x: 0.0,
            moments: Moments::default(),
            min: 0.0,
            max: 0.0,
        }
    }

    /// The value is `x` from `now` on.
    pub fn set(&mut self, x: f64, now: Instant) {
        self.update(now);
        self.x = x;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }

    /// The value changes by `delta` from `now` on.
    pub fn add(&mut self, delta: f64, now: Instant) {
        self.set(self.x + delta, now);
    }

    /// The current value.
    pub fn value(&self) -> f64 {
        self.x
    }

    /// The statistics since the last reset, up to `now`, without resetting.
    pub fn results(&mut self, now: Instant) -> IntegratorResults {
        self.update(now);
        let (average, deviation) = self.moments.avg_and_std_dev();
        IntegratorResults {
            duration: self.moments.elapsed_seconds,
            average,
            deviation,
            min: self.min,
            max: self.max,
        }
    }

    /// The statistics up to `now`; then starts over with min = max = the current value.
    pub fn reset(&mut self, now: Instant) -> IntegratorResults {
        let results = self.results(now);
        self.moments = Moments::default();
        self.min = self.x;
        self.max = self.x;
        results
    }

    // A `now` earlier than the last one counts as no time passing (Go would integrate a negative
    // interval; a monotonic clock never gives one).
    fn update(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last_time).as_secs_f64();
        self.last_time = self.last_time.max(now);
        self.moments.add_constant(dt, self.x);
    }
}
