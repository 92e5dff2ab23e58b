//! Durations written as Kubernetes writes them (`60s`, `1m30s`, `500ms`, `2h`).
//!
//! Mirrors Go's `time.ParseDuration`, which every kube-apiserver duration flag uses: an optional
//! sign, then one or more decimal numbers (with an optional fraction), each followed by a unit
//! (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`); a lone `0` needs no unit. We differ in two ways:
//! a negative duration is an error (every flag here is a non-negative length of time), and the
//! fraction is applied with exact integer arithmetic where Go uses a float (so Go may be off by a
//! nanosecond on long fractions; we truncate towards zero).

use std::time::Duration;

/// Why a duration could not be parsed; the message names the offending input as Go does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Empty input, a stray character, or a number without digits.
    #[error("invalid duration {0:?}")]
    Invalid(String),
    /// A number not followed by a unit.
    #[error("missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit that Go does not know.
    #[error("unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// More than Go's maximum duration (about 292 years).
    #[error("invalid duration {0:?}: out of range")]
    Overflow(String),
    /// A negative duration.
    #[error("invalid duration {0:?}: must not be negative")]
    Negative(String),
}

/// Go's `time.Duration` is an `int64` of nanoseconds; larger values are out of range there too.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses a duration as Go's `time.ParseDuration` does (see the module documentation).
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    match parse_signed(input)? {
        (true, d) if !d.is_zero() => Err(DurationError::Negative(input.to_owned())),
        (_, d) => Ok(d),
    }
}

/// Parses a duration that may be negative, as Go's `time.ParseDuration` does: whether it was
/// negative, and its magnitude (for `?timeout=`, where a negative value means "none").
pub fn parse_signed(input: &str) -> Result<(bool, Duration), DurationError> {
    let invalid = || DurationError::Invalid(input.to_owned());
    let (negative, rest) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if rest == "0" {
        return Ok((negative, Duration::ZERO));
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    let mut s = rest;
    while !s.is_empty() {
        let (term, tail) = parse_term(s, input)?;
        total = total
            .checked_add(term)
            .filter(|t| *t <= MAX_NANOS)
            .ok_or_else(|| DurationError::Overflow(input.to_owned()))?;
        s = tail;
    }
    let nanos = u64::try_from(total).map_err(|_| DurationError::Overflow(input.to_owned()))?;
    Ok((negative, Duration::from_nanos(nanos)))
}

/// Parses one `<number>[.<fraction>]<unit>` term; returns its nanoseconds and the rest.
fn parse_term<'a>(s: &'a str, input: &str) -> Result<(u128, &'a str), DurationError> {
    let overflow = || DurationError::Overflow(input.to_owned());
    let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
    let (int_digits, after_int) = s.split_at(int_len);
    let (frac_digits, after_num) = match after_int.strip_prefix('.') {
        Some(f) => f.split_at(f.bytes().take_while(u8::is_ascii_digit).count()),
        None => ("", after_int),
    };
    // Go accepts "1.s" and ".5s" but not "." alone.
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(DurationError::Invalid(input.to_owned()));
    }
    let unit_len = after_num
        .char_indices()
        .find(|(_, c)| *c == '.' || c.is_ascii_digit())
        .map_or(after_num.len(), |(i, _)| i);
    if unit_len == 0 {
        return Err(DurationError::MissingUnit(input.to_owned()));
    }
    let (unit_text, tail) = after_num.split_at(unit_len);
    let unit = unit_nanos(unit_text).ok_or_else(|| DurationError::UnknownUnit {
        unit: unit_text.to_owned(),
        input: input.to_owned(),
    })?;
    let mut nanos: u128 = 0;
    for d in int_digits.bytes() {
        nanos = nanos
            .checked_mul(10)
            .and_then(|n| n.checked_add(u128::from(d - b'0')))
            .filter(|n| *n <= MAX_NANOS)
            .ok_or_else(overflow)?;
    }
    nanos = nanos
        .checked_mul(unit)
        .filter(|n| *n <= MAX_NANOS)
        .ok_or_else(overflow)?;
    Ok((nanos + fraction_nanos(frac_digits, unit), tail))
}

/// The nanoseconds of `0.<digits>` units, truncated; digits beyond nanosecond precision are dropped.
fn fraction_nanos(digits: &str, unit: u128) -> u128 {
    let mut value: u128 = 0;
    let mut scale: u128 = 1;
    // 3.6e12 ns per hour needs at most 13 significant fraction digits; 19 is plenty.
    for d in digits.bytes().take(19) {
        value = value * 10 + u128::from(d - b'0');
        scale *= 10;
    }
    value * unit / scale
}

/// Nanoseconds per unit, as Go's `unitMap`.
fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Formats a duration as Go's `Duration.String` does (`1m30s`, `500ms`, `0s`), for logs and help.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (unit, per) = match nanos {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, per));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000 % 60;
    let seconds = decimal(nanos % 60_000_000_000, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `value / per` with the fraction's trailing zeros removed (`1.5`, `2`).
fn decimal(value: u128, per: u128) -> String {
    let whole = value / per;
    let frac = value % per;
    if frac == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let frac = format!("{frac:0width$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests;
