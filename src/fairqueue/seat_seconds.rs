//! Seat-seconds: the unit of work of fair queuing.
//!
//! Mirrors `k8s.io/apiserver/pkg/util/flowcontrol/request/seat_seconds.go`: a `u64` fixed point
//! where one unit is 1e-8 seat-second. Arithmetic wraps like Go's `uint64`, which the queue set
//! relies on when it corrects a queue's `nextDispatchR` by a negative amount.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

/// Units per seat-second (`ssScale`).
const SCALE: u64 = 100_000_000;

/// Nanoseconds per unit, per seat (`1e9 / ssScale`).
const NANOS_PER_UNIT: f64 = 10.0;

/// An amount of work (or a reading of the virtual clock R) in units of 1e-8 seat-second.
///
/// `+` and `-` wrap around like Go's `uint64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeatSeconds(u64);

impl SeatSeconds {
    /// No work.
    pub const ZERO: SeatSeconds = SeatSeconds(0);
    /// The largest representable value (`MaxSeatSeconds`).
    pub const MAX: SeatSeconds = SeatSeconds(u64::MAX);

    /// The value of `units` × 1e-8 seat-second.
    pub const fn from_units(units: u64) -> SeatSeconds {
        SeatSeconds(units)
    }

    /// The raw fixed-point value.
    pub const fn units(self) -> u64 {
        self.0
    }

    /// `SeatsTimesDuration`: `round(seats × duration_ns / 10)`.
    ///
    /// Meant for increments of work, not for totals since process start.
    pub fn seats_times_duration(seats: f64, duration: Duration) -> SeatSeconds {
        let nanos = i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
        Self::seats_times_nanos(seats, nanos)
    }

    /// `SeatsTimesDuration` for a signed duration in nanoseconds. A negative product wraps around
    /// exactly like Go's `SeatSeconds(int64(...))` conversion, so subtracting it adds the magnitude.
    pub fn seats_times_nanos(seats: f64, nanos: i64) -> SeatSeconds {
        // Go: int64(math.Round(x)) then reinterpret as uint64; `as i64` saturates where Go's
        // conversion is undefined, which only matters for absurd inputs.
        SeatSeconds((seats * nanos as f64 / NANOS_PER_UNIT).round() as i64 as u64)
    }

    /// `DurationPerSeat`: how long `seats` seats take to do this much work (truncated to whole
    /// nanoseconds, as Go's float-to-int conversion does).
    pub fn duration_per_seat(self, seats: f64) -> Duration {
        Duration::from_nanos((self.0 as f64 / seats * NANOS_PER_UNIT) as u64)
    }

    /// The value in seat-seconds as a float (may lose precision).
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / SCALE as f64
    }

    /// Subtraction that reports underflow instead of wrapping.
    pub fn checked_sub(self, other: SeatSeconds) -> Option<SeatSeconds> {
        self.0.checked_sub(other.0).map(SeatSeconds)
    }
}

impl Add for SeatSeconds {
    type Output = SeatSeconds;
    fn add(self, rhs: SeatSeconds) -> SeatSeconds {
        SeatSeconds(self.0.wrapping_add(rhs.0))
    }
}

impl AddAssign for SeatSeconds {
    fn add_assign(&mut self, rhs: SeatSeconds) {
        *self = *self + rhs;
    }
}

impl Sub for SeatSeconds {
    type Output = SeatSeconds;
    fn sub(self, rhs: SeatSeconds) -> SeatSeconds {
        SeatSeconds(self.0.wrapping_sub(rhs.0))
    }
}

impl SubAssign for SeatSeconds {
    fn sub_assign(&mut self, rhs: SeatSeconds) {
        *self = *self - rhs;
    }
}

/// Formats as the apiserver does: `%d.%08dss`, e.g. `0.00300000ss` for 3 ms of one seat.
impl fmt::Display for SeatSeconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:08}ss", self.0 / SCALE, self.0 % SCALE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seats_times_duration_rounds_to_units_of_ten_nanoseconds() {
        let cases: &[(f64, Duration, u64)] = &[
            (1.0, Duration::from_millis(3), 300_000),
            (2.0, Duration::from_secs(1), 200_000_000),
            (1.0, Duration::from_nanos(14), 1),
            (1.0, Duration::from_nanos(15), 2),
            (0.5, Duration::from_nanos(10), 1),
            (0.0, Duration::from_secs(5), 0),
        ];
        for (seats, d, want) in cases {
            assert_eq!(
                SeatSeconds::seats_times_duration(*seats, *d).units(),
                *want,
                "{seats} × {d:?}"
            );
        }
    }

    #[test]
    fn negative_products_wrap_like_go() {
        let minus = SeatSeconds::seats_times_nanos(1.0, -3_000_000);
        let r = SeatSeconds::from_units(1_000_000);
        assert_eq!((r - minus).units(), 1_300_000);
        assert_eq!((r + minus).units(), 700_000);
    }

    #[test]
    fn duration_per_seat_inverts_seats_times_duration() {
        let work = SeatSeconds::seats_times_duration(10.0, Duration::from_millis(5));
        assert_eq!(work.duration_per_seat(10.0), Duration::from_millis(5));
        assert_eq!(work.duration_per_seat(4.0), Duration::from_micros(12_500));
    }

    #[test]
    fn displays_like_the_apiserver() {
        let cases: &[(u64, &str)] = &[
            (0, "0.00000000ss"),
            (300_000, "0.00300000ss"),
            (1_234_567_890, "12.34567890ss"),
            (u64::MAX, "184467440737.09551615ss"),
        ];
        for (units, want) in cases {
            assert_eq!(SeatSeconds::from_units(*units).to_string(), *want);
        }
    }

    #[test]
    fn to_f64_is_in_seat_seconds() {
        assert_eq!(SeatSeconds::from_units(150_000_000).to_f64(), 1.5);
    }
}
