//! Trace readers: the workloads `simulate` replays, detected by content.
//!
//! Three formats, one request per JSON line:
//! - Kubernetes audit events (`audit.k8s.io/v1` `Event`, as kube-apiserver writes them with
//!   `--audit-log-path`; an `EventList` line is also read);
//! - the proxy's own JSON access log (`--log-format json -v=1`, target `kube_apf_proxy::access`);
//! - plain trace lines: a `classify --requests` line plus `at` (seconds from any origin) and
//!   `durationMs`.
//!
//! The reader yields [`TraceEvent`]s in arrival order, whatever order the file has them in:
//! audit logs and access logs are written when a request *completes*, so a reorder buffer of
//! [`TraceOptions::reorder_window`] holds events until no earlier arrival can still come. Memory is
//! bounded by the requests that arrive within that window, not by the trace length.

use std::time::Duration;

use crate::auth::Identity;

/// One thing that happens in a recorded workload.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    /// A request arrives.
    Request(TraceRequest),
    /// A long-running request that arrived earlier with `duration: None` ends (its audit
    /// `ResponseComplete` stage). Events of the same `key` pair up.
    Ended {
        /// The key of the [`TraceRequest`] it ends.
        key: String,
        /// When it ended, on the trace's clock.
        at: Duration,
    },
}

/// One recorded request.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// The line it came from (1-based), for messages.
    pub line: u64,
    /// An identifier unique within the trace (the audit ID; for other formats the line number).
    pub key: String,
    /// When it arrived, on the trace's clock: since the UNIX epoch for audit events and access
    /// logs, since the trace's own origin for trace lines.
    pub arrival: Duration,
    /// How long it took from arrival to completion, when the trace knows it now. `None` for a
    /// long-running request whose end comes later as [`TraceEvent::Ended`].
    pub duration: Option<Duration>,
    /// For a long-running request: how long from arrival until its response head was sent
    /// (audit stage `ResponseStarted`), when known.
    pub first_byte: Option<Duration>,
    /// The HTTP method (audit events give the Kubernetes verb; it is mapped back).
    pub method: http::Method,
    /// The request target: path and query, as the apiserver received it.
    pub uri: String,
    /// The user flow control classifies: the impersonated user when there is one.
    pub identity: Identity,
    /// The response status the recording server gave, when known.
    pub status: Option<u16>,
}

/// How a trace is read.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// How far behind the latest timestamp seen an arrival may still turn up. The default is the
    /// request timeout plus 5 s: a request that is not long-running completes within it.
    pub reorder_window: Duration,
    /// Stop at the first malformed line instead of reporting and skipping it.
    pub strict: bool,
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TraceLineError {
    /// 1-based line number.
    pub line: u64,
    /// What is wrong with it.
    pub message: String,
}

/// The format a trace turned out to be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// `audit.k8s.io/v1` events.
    AuditEvents,
    /// The proxy's JSON access log.
    AccessLog,
    /// Plain trace lines.
    TraceLines,
}
