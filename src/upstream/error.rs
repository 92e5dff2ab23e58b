//! [`UpstreamError`]: why an exchange with the upstream failed, in the terms the proxy answers
//! with (`proxy::error_response` maps each variant to 502, 503 or 504).

use std::time::Duration;

use crate::body::BoxError;

/// Why forwarding to the upstream failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection to the upstream could be made (refused, unreachable, DNS, TLS handshake):
    /// nothing was sent, so a retry is safe. 503, as the aggregator's and peer proxy's responders
    /// answer when their backend cannot be reached.
    #[error("the upstream apiserver is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The request was sent (at least in part) but no valid response came back: the connection
    /// was closed or reset, or the upstream spoke garbage. 502, as a reverse proxy answers.
    #[error("bad response from the upstream apiserver: {0}")]
    BadGateway(#[source] BoxError),
    /// A new upstream connection was needed and `--upstream-max-connections` are open (for a
    /// long-running request: all but the `reserved` ones kept for ordinary requests). Nothing was
    /// sent. 503 with `Retry-After: 1`, which client-go honours by retrying.
    #[error("the proxy's upstream connection limit is reached ({max} connections{}); retry later", reserved_note(*.reserved))]
    ConnectionLimit {
        /// `--upstream-max-connections`.
        max: usize,
        /// Connections kept for ordinary requests that this (long-running) request could not take.
        reserved: usize,
    },
    /// The upstream did not answer within the request's timeout. 504, as the apiserver's own
    /// timeout filter answers.
    #[error("request did not complete within the allotted timeout ({after:?})")]
    Timeout {
        /// The timeout that elapsed.
        after: Duration,
    },
}

fn reserved_note(reserved: usize) -> String {
    match reserved {
        0 => String::new(),
        n => format!(", of which {n} are kept for requests that are not long-running"),
    }
}
