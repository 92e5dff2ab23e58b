//! Times and virtual times as the debug endpoints print them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Go's `time.Time{}.UTC().Format(time.RFC3339Nano)`: what a waiting request's start time shows.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// `t.UTC().Format(time.RFC3339Nano)`: `2006-01-02T15:04:05.999999999Z`, the fraction without
/// trailing zeros and left out when zero. `None` is Go's zero time.
pub fn format_rfc3339_nano(time: Option<SystemTime>) -> String {
    let Some(time) = time else {
        return GO_ZERO_TIME.to_owned();
    };
    let (secs, nanos) = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => (i128::from(d.as_secs()), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let whole = -i128::from(d.as_secs());
            match d.subsec_nanos() {
                0 => (whole, 0),
                n => (whole - 1, 1_000_000_000 - n),
            }
        }
    };
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let mut text = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    );
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push('Z');
    text
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i128) -> (i128, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both are small (1..=31, 1..=12) by construction.
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let year = yoe + era * 400 + i128::from(month <= 2);
    (year, month, day)
}

/// Go's `SeatSeconds.String()`: a value in units of 1e-8 seat-seconds printed as
/// `<whole>.<8 digits>ss`.
pub fn format_seat_seconds(ss: u64) -> String {
    const SCALE: u64 = 100_000_000;
    format!("{}.{:08}ss", ss / SCALE, ss % SCALE)
}

/// Seat-seconds as a float to Go's `SeatSeconds` units (×1e8, rounded; negative and NaN give 0,
/// too large saturates).
pub fn seat_seconds_from_f64(seat_seconds: f64) -> u64 {
    // `as` saturates and maps NaN to 0, which is what we want for a display value.
    (seat_seconds * 1e8).round() as u64
}

/// Maps the monotonic instants the queue sets record to wall-clock times for display.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    instant: Instant,
    system: SystemTime,
}

impl WallClock {
    /// An anchor pairing `instant` with `system` (read together, e.g. at start).
    pub fn new(instant: Instant, system: SystemTime) -> Self {
        WallClock { instant, system }
    }

    /// The wall-clock time of `instant`.
    pub fn system_time(&self, instant: Instant) -> SystemTime {
        if instant >= self.instant {
            self.system + (instant - self.instant)
        } else {
            let before: Duration = self.instant - instant;
            self.system.checked_sub(before).unwrap_or(UNIX_EPOCH)
        }
    }
}
