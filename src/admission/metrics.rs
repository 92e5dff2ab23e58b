//! The webhook's metric families, in a registry of its own (it runs as its own process):
//! `apf_proxy_admission_reviews_total{result}`, `apf_proxy_admission_review_errors_total{reason}`,
//! `apf_proxy_admission_review_duration_seconds` and `apf_proxy_admission_config_reloads_total{result}`.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{Encoder, Histogram, HistogramOpts, IntCounterVec, Opts, Registry, TextEncoder};

/// What became of one review: the `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewResult {
    /// Allowed, no findings.
    Allowed,
    /// Allowed with warnings.
    Warned,
    /// Denied: the object (or ConfigMap) is invalid.
    Denied,
    /// The body was not an AdmissionReview the webhook can answer (HTTP 4xx).
    Error,
}

impl ReviewResult {
    fn as_str(self) -> &'static str {
        match self {
            ReviewResult::Allowed => "allowed",
            ReviewResult::Warned => "warned",
            ReviewResult::Denied => "denied",
            ReviewResult::Error => "error",
        }
    }
}

/// The webhook's metrics.
pub struct AdmissionMetrics {
    registry: Registry,
    reviews: IntCounterVec,
    errors: IntCounterVec,
    duration: Histogram,
    reloads: IntCounterVec,
}

impl std::fmt::Debug for AdmissionMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionMetrics").finish_non_exhaustive()
    }
}

impl AdmissionMetrics {
    /// A fresh registry with the webhook's families.
    pub fn new() -> Arc<AdmissionMetrics> {
        Arc::new(
            Self::register().expect("invariant: admission metric definitions are valid and unique"),
        )
    }

    fn register() -> prometheus::Result<AdmissionMetrics> {
        let registry = Registry::new();
        let reviews = IntCounterVec::new(
            Opts::new(
                "apf_proxy_admission_reviews_total",
                "AdmissionReviews answered, by result (allowed, warned, denied, error)",
            ),
            &["result"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "apf_proxy_admission_review_errors_total",
                "Requests to /validate that were not an answerable AdmissionReview, by reason",
            ),
            &["reason"],
        )?;
        let duration = Histogram::with_opts(
            HistogramOpts::new(
                "apf_proxy_admission_review_duration_seconds",
                "Time to judge one AdmissionReview, body read excluded",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0,
            ]),
        )?;
        let reloads = IntCounterVec::new(
            Opts::new(
                "apf_proxy_admission_config_reloads_total",
                "Reloads of the webhook's reference configuration, by result (success, failure)",
            ),
            &["result"],
        )?;
        registry.register(Box::new(reviews.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(reloads.clone()))?;
        Ok(AdmissionMetrics {
            registry,
            reviews,
            errors,
            duration,
            reloads,
        })
    }

    /// Counts one answered review.
    pub fn review(&self, result: ReviewResult, took: Duration) {
        self.reviews.with_label_values(&[result.as_str()]).inc();
        if result != ReviewResult::Error {
            self.duration.observe(took.as_secs_f64());
        }
    }

    /// Counts one unanswerable request, by reason.
    pub fn error(&self, reason: &str) {
        self.reviews
            .with_label_values(&[ReviewResult::Error.as_str()])
            .inc();
        self.errors.with_label_values(&[reason]).inc();
    }

    /// Counts one reload of the reference configuration.
    pub fn reload(&self, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.reloads.with_label_values(&[result]).inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec only fails on invalid metric names, which are constants here.
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}
