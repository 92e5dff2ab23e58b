//! The proxy's own families that the pipeline reports as events, prefixed `apf_proxy_`: the
//! upstream, configuration reloads and responses. (Authentication and connection counters are read
//! from their owners' stats: see `collectors.rs`.)

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts,
    Registry,
};

use super::labels::{
    status_code_index, status_code_label, UpstreamOutcome, STATUS_CODE_LABELS,
    UPSTREAM_CODE_CLASSES,
};
use super::{register, Metrics};

/// The apiserver's `apiserver_request_duration_seconds` buckets, so upstream latency lines up with
/// the apiserver's own view of the same requests.
const UPSTREAM_DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

pub(super) struct Families {
    upstream_requests: IntCounterVec,
    upstream_duration: HistogramVec,
    config_reloads: IntCounterVec,
    certificate_reloads: IntCounterVec,
    certificate_expiry: GaugeVec,
    last_reload: Gauge,
    requests: IntCounterVec,
    abandoned: IntCounter,
    identity_refused: IntCounterVec,
    // The members every request reports to, resolved on first use (so a series appears only
    // once it has counted something) and then without a label lookup or a formatted label.
    upstream_members: [OnceLock<(IntCounter, Histogram)>; UPSTREAM_CODE_CLASSES],
    request_members: Box<[OnceLock<IntCounter>]>,
}

fn counter(
    reg: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    register(reg, IntCounterVec::new(Opts::new(name, help), labels)?)
}

impl Families {
    pub(super) fn register(reg: &Registry) -> prometheus::Result<Self> {
        let upstream_duration = HistogramOpts::new(
            "apf_proxy_upstream_request_duration_seconds",
            "Time from sending a request upstream to receiving its response headers (or failing), by status class",
        )
        .buckets(UPSTREAM_DURATION_BUCKETS.to_vec());
        Ok(Families {
            upstream_requests: counter(
                reg,
                "apf_proxy_upstream_requests_total",
                "Requests sent upstream, by status class (2xx..5xx) or error/timeout",
                &["code"],
            )?,
            upstream_duration: register(reg, HistogramVec::new(upstream_duration, &["code"])?)?,
            config_reloads: counter(
                reg,
                "apf_proxy_config_reloads_total",
                "Flow-control configuration reloads by result",
                &["result"],
            )?,
            certificate_reloads: counter(
                reg,
                "apf_proxy_certificate_reloads_total",
                "Reloads of changed certificate files (kind: serving, client_ca) by result",
                &["kind", "result"],
            )?,
            certificate_expiry: register(
                reg,
                GaugeVec::new(
                    Opts::new(
                        "apf_proxy_certificate_expiration_timestamp_seconds",
                        "Unix time at which the earliest-expiring certificate in force expires (kind: serving, the served chains of both listeners; client_ca, the client CA bundles)",
                    ),
                    &["kind"],
                )?,
            )?,
            last_reload: register(
                reg,
                Gauge::new(
                    "apf_proxy_config_last_reload_success_timestamp_seconds",
                    "Unix time of the last successful flow-control configuration load",
                )?,
            )?,
            requests: counter(
                reg,
                "apf_proxy_requests_total",
                "Responses to clients by HTTP status code, proxied or written by the proxy",
                &["code"],
            )?,
            abandoned: register(
                reg,
                IntCounter::new(
                    "apf_proxy_requests_abandoned_total",
                    "Requests whose client went away before their response head (while being authenticated, queued or forwarded); with apf_proxy_requests_total, every request received",
                )?,
            )?,
            identity_refused: counter(
                reg,
                "apf_proxy_identity_refused_total",
                "Authenticated requests refused (401) because their identity cannot be forwarded upstream unchanged, by reason (empty, control_character, surrounding_whitespace, uppercase_extra_key, unencodable)",
                &["reason"],
            )?,
            upstream_members: Default::default(),
            request_members: (0..STATUS_CODE_LABELS).map(|_| OnceLock::new()).collect(),
        })
    }
}

fn result_label(success: bool) -> &'static str {
    if success {
        "success"
    } else {
        "failure"
    }
}

// === impl Metrics: proxy events ===

impl Metrics {
    /// An upstream exchange ended after `latency` (to the response headers, or to the failure).
    pub fn observe_upstream(&self, outcome: UpstreamOutcome, latency: Duration) {
        let p = &self.proxy;
        let (count, duration) = p.upstream_members[outcome.code_class_index()].get_or_init(|| {
            let code = &[outcome.code_class()];
            (
                p.upstream_requests.with_label_values(code),
                p.upstream_duration.with_label_values(code),
            )
        });
        count.inc();
        duration.observe(latency.as_secs_f64());
    }

    /// A configuration reload ended; a successful one also sets the last-reload timestamp to `at`.
    pub fn record_config_reload(&self, success: bool, at: SystemTime) {
        self.proxy
            .config_reloads
            .with_label_values(&[result_label(success)])
            .inc();
        if success {
            let secs = at
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            self.proxy.last_reload.set(secs);
        }
    }

    /// Changed certificate files were read again: the serving certificate and key
    /// (`kind = "serving"`) or the client CA bundles (`"client_ca"`).
    pub fn record_certificate_reload(&self, kind: CertificateKind, success: bool) {
        self.proxy
            .certificate_reloads
            .with_label_values(&[kind.as_str(), result_label(success)])
            .inc();
    }

    /// The certificates of `kind` in force expire first at `not_after` (Unix seconds); `None`:
    /// none is in force, or one is unreadable (the series is removed rather than left stale).
    pub fn set_certificate_expiry(&self, kind: CertificateKind, not_after: Option<u64>) {
        let family = &self.proxy.certificate_expiry;
        match not_after {
            // Seconds since 1970 are exact in an f64 until the year 285 million.
            #[allow(clippy::cast_precision_loss)]
            Some(at) if at != u64::MAX => family.with_label_values(&[kind.as_str()]).set(at as f64),
            _ => {
                let _ = family.remove_label_values(&[kind.as_str()]);
            }
        }
    }

    /// A client went away before its request had a response head.
    pub fn inc_abandoned(&self) {
        self.proxy.abandoned.inc();
    }

    /// An authenticated request was refused because its identity cannot travel upstream
    /// unchanged; `reason` is one of a fixed set (`RefusalReason::as_str`).
    pub fn inc_identity_refused(&self, reason: &'static str) {
        self.proxy
            .identity_refused
            .with_label_values(&[reason])
            .inc();
    }

    /// The proxy answered a client with `code` (proxied from upstream or its own).
    pub fn inc_requests(&self, code: u16) {
        let p = &self.proxy;
        p.request_members[status_code_index(code)]
            .get_or_init(|| p.requests.with_label_values(&[&status_code_label(code)]))
            .inc();
    }
}

/// Which certificate files a reload read (a bounded label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateKind {
    /// `--tls-cert-file` and `--tls-private-key-file`.
    Serving,
    /// `--client-ca-file` and `--requestheader-client-ca-file`.
    ClientCa,
}

impl CertificateKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CertificateKind::Serving => "serving",
            CertificateKind::ClientCa => "client_ca",
        }
    }
}
