//! How long a request may take in all, and so how long it may wait in a queue: the one
//! computation the pipeline and the simulator share.
//!
//! Mirrors `pkg/endpoints/filters/request_deadline.go` (`withRequestDeadline`): a
//! non-long-running request gets `--request-timeout`, or a shorter positive `?timeout=` (read
//! with the request's attributes, [`RequestOptions::timeout`]); an unparseable `timeout` is the
//! apiserver's 400. And `priority-and-fairness.go`
//! (`getRequestWaitContext`): the queue wait is a quarter of the timeout, at most a minute.

use std::time::Duration;

use super::flow_request::Handling;
#[cfg(doc)]
use crate::request_info::RequestOptions;
use crate::request_info::{RequestInfo, Timeout};

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

/// The deadlines of a request with attributes `info` handled as `handling`, under
/// `--request-timeout` = `maximum`.
pub fn deadlines(
    handling: Handling,
    info: &RequestInfo,
    maximum: Duration,
) -> Result<Deadlines, InvalidTimeout> {
    let timeout = match handling {
        Handling::Ordinary => effective_timeout(info.options.timeout(), maximum)?,
        Handling::Watch | Handling::Bypass => maximum,
    };
    Ok(Deadlines::of(timeout))
}

impl Deadlines {
    /// The deadlines of a request that may take `timeout` in all.
    pub fn of(timeout: Duration) -> Deadlines {
        Deadlines {
            timeout,
            wait_limit: wait_limit(timeout),
        }
    }
}

/// The wait limit for a request that may take `timeout` in all: a quarter of it, at most 1 min
/// (`getRequestWaitContext`). The default request timeout of 60 s gives 15 s.
pub fn wait_limit(timeout: Duration) -> Duration {
    (timeout / 4).min(MAX_WAIT_LIMIT)
}

/// The deadline length for a non-long-running request with this `?timeout=`.
pub fn effective_timeout(timeout: &Timeout, maximum: Duration) -> Result<Duration, InvalidTimeout> {
    match timeout {
        Timeout::Given(d) if *d < maximum => Ok(*d),
        Timeout::Given(_) | Timeout::Unset => Ok(maximum),
        Timeout::Invalid(e) => Err(InvalidTimeout(e.clone())),
    }
}

#[cfg(test)]
mod tests;
