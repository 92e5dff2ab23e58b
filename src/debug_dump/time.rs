//! Times and virtual times as the debug endpoints print them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::OffsetDateTime;
use tokio::time::Instant;

/// Go's `time.Time{}.UTC().Format(time.RFC3339Nano)`: what a waiting request's start time shows.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// `t.UTC().Format(time.RFC3339Nano)`: `2006-01-02T15:04:05.999999999Z`, the fraction without
/// trailing zeros and left out when zero. `None` is Go's zero time. A time outside the years
/// 0000 to 9999, which no clock reads, prints as the nearest one within them.
pub fn format_rfc3339_nano(time: Option<SystemTime>) -> String {
    let Some(time) = time else {
        return GO_ZERO_TIME.to_owned();
    };
    // Nanoseconds since the epoch: a `SystemTime` spans far fewer than i128's.
    let nanos = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(i128::MAX),
        Err(e) => i128::try_from(e.duration().as_nanos()).map_or(i128::MIN, |n| -n),
    };
    let utc = OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(if nanos < 0 { FIRST } else { LAST })
        .clamp(FIRST, LAST);
    // RFC 3339 refuses only years outside 0000..=9999 and offsets that are not whole minutes.
    utc.format(&Rfc3339)
        .unwrap_or_else(|_| GO_ZERO_TIME.to_owned())
}

/// The first and last instants RFC 3339 writes (four-digit years).
const FIRST: OffsetDateTime = datetime!(0000-01-01 00:00:00 UTC);
const LAST: OffsetDateTime = datetime!(9999-12-31 23:59:59.999_999_999 UTC);

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
