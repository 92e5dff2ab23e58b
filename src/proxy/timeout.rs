//! The timeout of a non-long-running request: `--request-timeout`, or a shorter `?timeout=`.
//!
//! Mirrors `pkg/endpoints/filters/request_deadline.go` (`parseTimeout`, `withRequestDeadline`):
//! an unparseable `timeout` is a 400; a positive one shorter than the maximum wins; anything else
//! gets the maximum.

use std::time::Duration;

use super::ProxyError;

/// The message prefix of the apiserver's 400 for a bad `?timeout=`.
const INVALID_TIMEOUT_IN_URL: &str = "invalid timeout specified in the request URL";

/// The deadline length for a non-long-running request with the given query string.
pub fn effective_timeout(query: Option<&str>, maximum: Duration) -> Result<Duration, ProxyError> {
    let Some(value) = query.and_then(timeout_param) else {
        return Ok(maximum);
    };
    match parse_go_duration(&value) {
        Ok(Some(d)) if !d.is_zero() && d < maximum => Ok(d),
        Ok(_) => Ok(maximum),
        Err(e) => Err(ProxyError::BadRequest {
            message: format!("{INVALID_TIMEOUT_IN_URL} - {e}"),
        }),
    }
}

/// The first `timeout` query parameter, percent-decoded; `None` when absent or empty (Go's
/// `Query().Get` gives "" for both).
fn timeout_param(query: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == "timeout")
        .map(|(_, v)| percent_decode_query(v))
        .filter(|v| !v.is_empty())
}

fn percent_decode_query(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() && hex_pair(bytes[i + 1], bytes[i + 2]).is_some() => {
                out.extend(hex_pair(bytes[i + 1], bytes[i + 2]));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_pair(hi: u8, lo: u8) -> Option<u8> {
    let h = (hi as char).to_digit(16)?;
    let l = (lo as char).to_digit(16)?;
    u8::try_from(h * 16 + l).ok()
}

/// Why a Go duration string is refused, worded like Go's `time.ParseDuration`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time: invalid duration {0:?}")]
pub struct GoDurationError(String);

/// Parses a Go duration (`300ms`, `1.5h`, `2h45m`, `-1s`). `Ok(None)` for a negative duration
/// (the caller treats it as "not positive"). Units: ns, us, µs, ms, s, m, h.
pub fn parse_go_duration(value: &str) -> Result<Option<Duration>, GoDurationError> {
    let err = || GoDurationError(value.to_string());
    let (negative, mut rest) = match value.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    if rest == "0" {
        return Ok(Some(Duration::ZERO));
    }
    if rest.is_empty() {
        return Err(err());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| err())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per_unit = match &rest[..unit_len] {
            "ns" => 1e0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += number * nanos_per_unit;
    }
    // Go limits durations to ~292 years; larger values are an overflow error there.
    if !total.is_finite() || total > i64::MAX as f64 {
        return Err(err());
    }
    if negative && total > 0.0 {
        return Ok(None);
    }
    Ok(Some(Duration::from_nanos(total as u64)))
}

#[cfg(test)]
mod tests;
