//! What the pipeline reports to [`Metrics`]: dispatches and executions, rejections, waits,
//! upstream exchanges.
//!
//! Mirrors the metric calls of `pkg/server/filters/priority-and-fairness.go` and
//! `apf_filter.go: Handle` (section (g) of the APF reference): every executed request counts as
//! dispatched (exempt ones too); waits are observed for non-exempt requests only, with
//! `execute="false"` just for rejections at arrival; a 429 also counts as dropped and as a
//! termination.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::super::ProxyError;
use crate::fairqueue::level_queues::Rejection;
use crate::fairqueue::work_estimate::WorkEstimator;
use crate::fairqueue::WorkEstimate;
use crate::metrics::{
    ExecutionType, FlowMetrics, Metrics, RejectReason, RequestKind, UpstreamOutcome,
};
use crate::request_info::RequestInfo;
use crate::upstream::UpstreamError;

/// One request's execution as APF sees it: counted from dispatch until the value is dropped (a
/// regular request: the end of its response body; a watch: its initialisation).
pub(super) struct Execution {
    metrics: Arc<Metrics>,
    flow: Arc<FlowMetrics>,
    kind: RequestKind,
    execution: ExecutionType,
    started: Instant,
}

impl Execution {
    /// Counts a dispatch and one more executing request.
    pub(super) fn start(metrics: &Arc<Metrics>, flow: Arc<FlowMetrics>, verb: &str) -> Execution {
        let kind = RequestKind::of_verb(verb);
        let started = metrics.execution_started(&flow, kind);
        Execution {
            metrics: Arc::clone(metrics),
            flow,
            kind,
            execution: ExecutionType::of_verb(verb),
            started,
        }
    }
}

impl Drop for Execution {
    fn drop(&mut self) {
        self.metrics
            .execution_ended(&self.flow, self.kind, self.execution, self.started);
    }
}

/// A request's work estimate (`ObserveWorkEstimatedSeats`, exempt ones included) and, for a
/// mutating request, the watches it will notify (`ObserveWatchCount`, as the mutating estimator
/// reports it).
pub(super) fn record_estimate(
    flow: &FlowMetrics,
    estimator: &WorkEstimator,
    info: &RequestInfo,
    estimate: &WorkEstimate,
) {
    flow.observe_work_estimated_seats(estimate.max_seats());
    if matches!(info.verb.as_str(), "create" | "update" | "patch" | "delete") {
        let watches = estimator.watches().interested_watch_count(info);
        flow.observe_watch_count(watches);
    }
}

/// A request was refused by flow control (answered 429).
pub(super) fn record_rejection(
    metrics: &Metrics,
    flow_schema: &str,
    verb: &str,
    rejection: &Rejection,
) {
    let pl = &*rejection.priority_level;
    let reason = rejection.reason;
    // Only a request that timed out in its queue had "got a queue slot" (section g).
    let execute = match reason {
        RejectReason::QueueFull | RejectReason::ConcurrencyLimit => false,
        RejectReason::TimeOut => true,
    };
    metrics.inc_rejected(pl, flow_schema, reason);
    metrics.observe_wait(pl, flow_schema, execute, rejection.waited);
    metrics.record_dropped(RequestKind::of_verb(verb));
}

/// An upstream exchange ended with `result` after `latency` (errors that are not the upstream's,
/// such as an unreadable request, are not counted).
pub(super) fn record_upstream<T>(
    metrics: &Metrics,
    result: &Result<http::Response<T>, ProxyError>,
    latency: Duration,
) {
    let outcome = match result {
        Ok(response) => UpstreamOutcome::Status(response.status().as_u16()),
        Err(ProxyError::Upstream(UpstreamError::Timeout { .. })) => UpstreamOutcome::Timeout,
        Err(ProxyError::Upstream(_)) => UpstreamOutcome::Error,
        Err(_) => return,
    };
    metrics.observe_upstream(outcome, latency);
}
