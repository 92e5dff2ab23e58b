//! The endpoint counters the apiserver bumps when API Priority and Fairness answers 429.
//!
//! Mirrors `pkg/server/filters/priority-and-fairness.go` calling `epmetrics.RecordDroppedRequest`
//! and `RecordRequestTermination(.., http.StatusTooManyRequests)`. Differences, for bounded labels:
//! `apiserver_dropped_requests_total` is the family the apiserver had until 1.24 (label
//! `request_kind`, which we keep; today the apiserver counts drops in `apiserver_request_total`);
//! `apiserver_request_terminations_total` is labelled `code` and `request_kind` instead of the
//! apiserver's verb/group/version/resource/subresource/scope/component, whose values come from the
//! URL and could grow without bound behind a proxy. `sum by (code)` queries work unchanged.

use prometheus::{IntCounterVec, Opts, Registry};

use super::labels::{status_code_label, RequestKind};
use super::{register, Metrics};

pub(super) struct Families {
    dropped: IntCounterVec,
    terminations: IntCounterVec,
}

impl Families {
    pub(super) fn register(reg: &Registry) -> prometheus::Result<Self> {
        let dropped = Opts::new(
            "apiserver_dropped_requests_total",
            "[ALPHA] Number of requests dropped with 'Try again later' response",
        );
        let terminations = Opts::new(
            "apiserver_request_terminations_total",
            "[ALPHA] Number of requests which apiserver terminated in self-defense.",
        );
        Ok(Families {
            dropped: register(reg, IntCounterVec::new(dropped, &["request_kind"])?)?,
            terminations: register(
                reg,
                IntCounterVec::new(terminations, &["request_kind", "code"])?,
            )?,
        })
    }
}

// === impl Metrics: endpoint counters ===

impl Metrics {
    /// A request was answered 429 by flow control: counts it as dropped and as terminated with
    /// code 429, as the apiserver's APF filter does.
    pub fn record_dropped(&self, kind: RequestKind) {
        self.endpoints
            .dropped
            .with_label_values(&[kind.as_str()])
            .inc();
        self.record_termination(kind, 429);
    }

    /// The proxy ended a request in self-defense with `code` (e.g. 504 for its own timeout).
    pub fn record_termination(&self, kind: RequestKind, code: u16) {
        let code = status_code_label(code);
        let labels = &[kind.as_str(), code.as_str()];
        self.endpoints.terminations.with_label_values(labels).inc();
    }
}
