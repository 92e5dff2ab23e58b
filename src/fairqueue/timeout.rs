//! How long a request may take in all, and so how long it may wait in a queue: the one
//! computation the pipeline and the simulator share.
//!
//! Mirrors `pkg/endpoints/filters/request_deadline.go` (`parseTimeout`, `withRequestDeadline`):
//! a non-long-running request gets `--request-timeout`, or a shorter positive `?timeout=`; an
//! unparseable `timeout` is the apiserver's 400. And `priority-and-fairness.go`
//! (`getRequestWaitContext`): the queue wait is a quarter of the timeout, at most a minute.

use std::borrow::Cow;
use std::time::Duration;

use super::flow_request::Handling;
use crate::duration::parse_signed;
use crate::request_info::first_query_value;

/// The hard cap on a request's queue wait (`priority-and-fairness.go`: 1 min).
pub const MAX_WAIT_LIMIT: Duration = Duration::from_secs(60);

/// The message prefix of the apiserver's 400 for a bad `?timeout=`.
const INVALID_TIMEOUT_IN_URL: &str = "invalid timeout specified in the request URL";

/// A `?timeout=` that is not a Go duration; its message is the apiserver's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{INVALID_TIMEOUT_IN_URL} - time: {0}")]
pub struct InvalidTimeout(#[source] crate::duration::DurationError);

/// A request's timeout and queue wait limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// How long the request may take in all (`--request-timeout`, or a shorter `?timeout=`; the
    /// full `--request-timeout` for long-running requests, whose `timeout` is the server's to use).
    pub timeout: Duration,
    /// How long it may wait in a queue ([`wait_limit`] of the timeout).
    pub wait_limit: Duration,
}

/// The deadlines of a request handled as `handling`, with this query string, under
/// `--request-timeout` = `maximum`.
pub fn deadlines(
    handling: Handling,
    query: Option<&str>,
    maximum: Duration,
) -> Result<Deadlines, InvalidTimeout> {
    let timeout = match handling {
        Handling::Ordinary => effective_timeout(query, maximum)?,
        Handling::Watch | Handling::Bypass => maximum,
    };
    Ok(Deadlines {
        timeout,
        wait_limit: wait_limit(timeout),
    })
}

/// The wait limit for a request that may take `timeout` in all: a quarter of it, at most 1 min
/// (`getRequestWaitContext`). The default request timeout of 60 s gives 15 s.
pub fn wait_limit(timeout: Duration) -> Duration {
    (timeout / 4).min(MAX_WAIT_LIMIT)
}

/// The deadline length for a non-long-running request with the given query string.
pub fn effective_timeout(
    query: Option<&str>,
    maximum: Duration,
) -> Result<Duration, InvalidTimeout> {
    let Some(value) = query.and_then(timeout_param) else {
        return Ok(maximum);
    };
    match parse_signed(&value) {
        Ok((false, d)) if !d.is_zero() && d < maximum => Ok(d),
        Ok(_) => Ok(maximum),
        Err(e) => Err(InvalidTimeout(e)),
    }
}

/// The first `timeout` query parameter, unescaped as the apiserver reads it
/// (`req.URL.Query().Get("timeout")`: keys are unescaped too, and the pieces Go's
/// `url.ParseQuery` skips are skipped); `None` when absent or empty (Go's `Get` gives "" for
/// both).
fn timeout_param(query: &str) -> Option<Cow<'_, str>> {
    // Most queries name no timeout (a list's `limit=500&resourceVersion=0`): without the word
    // and without an escape that could spell it, no key is `timeout`.
    let bytes = query.as_bytes();
    if !bytes.contains(&b'%') && !bytes.windows(7).any(|w| w == b"timeout") {
        return None;
    }
    first_query_value(query, "timeout").filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests;
