//! The proxy's own families, prefixed `apf_proxy_`: authentication, the TokenReview cache, the
//! upstream, TLS handshakes, configuration reloads, connections and responses.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus::{Gauge, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

use super::labels::{status_code_label, AuthMethod, AuthResult, UpstreamOutcome};
use super::{register, Metrics};

/// The apiserver's `apiserver_request_duration_seconds` buckets, so upstream latency lines up with
/// the apiserver's own view of the same requests.
const UPSTREAM_DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

pub(super) struct Families {
    authentications: IntCounterVec,
    token_review_cache: IntCounterVec,
    upstream_requests: IntCounterVec,
    upstream_duration: HistogramVec,
    tls_handshakes: IntCounterVec,
    config_reloads: IntCounterVec,
    last_reload: Gauge,
    open_connections: IntGauge,
    requests: IntCounterVec,
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
            authentications: counter(
                reg,
                "apf_proxy_authentications_total",
                "Authentications by the authenticator that decided and their result",
                &["method", "result"],
            )?,
            token_review_cache: counter(
                reg,
                "apf_proxy_token_review_cache_lookups_total",
                "TokenReview cache lookups by result (hit or miss)",
                &["result"],
            )?,
            upstream_requests: counter(
                reg,
                "apf_proxy_upstream_requests_total",
                "Requests sent upstream, by status class (2xx..5xx) or error/timeout",
                &["code"],
            )?,
            upstream_duration: register(reg, HistogramVec::new(upstream_duration, &["code"])?)?,
            tls_handshakes: counter(
                reg,
                "apf_proxy_tls_handshakes_total",
                "TLS handshakes on the secure port by result",
                &["result"],
            )?,
            config_reloads: counter(
                reg,
                "apf_proxy_config_reloads_total",
                "Flow-control configuration reloads by result",
                &["result"],
            )?,
            last_reload: register(
                reg,
                Gauge::new(
                    "apf_proxy_config_last_reload_success_timestamp_seconds",
                    "Unix time of the last successful flow-control configuration load",
                )?,
            )?,
            open_connections: register(
                reg,
                IntGauge::new(
                    "apf_proxy_open_connections",
                    "Client connections currently open on the secure port",
                )?,
            )?,
            requests: counter(
                reg,
                "apf_proxy_requests_total",
                "Responses to clients by HTTP status code, proxied or written by the proxy",
                &["code"],
            )?,
        })
    }
}

/// An open client connection, counted in `apf_proxy_open_connections` until dropped.
#[derive(Debug)]
#[must_use = "the connection is counted only while the guard lives"]
pub struct OpenConnection {
    gauge: IntGauge,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.gauge.dec();
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
    /// An authentication ended: which authenticator decided, and how.
    pub fn inc_authentication(&self, method: AuthMethod, result: AuthResult) {
        let labels = &[method.as_str(), result.as_str()];
        self.proxy.authentications.with_label_values(labels).inc();
    }

    /// A token was looked up in the TokenReview cache.
    pub fn inc_token_review_cache(&self, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.proxy
            .token_review_cache
            .with_label_values(&[result])
            .inc();
    }

    /// An upstream exchange ended after `latency` (to the response headers, or to the failure).
    pub fn observe_upstream(&self, outcome: UpstreamOutcome, latency: Duration) {
        let code = &[outcome.code_class()];
        self.proxy.upstream_requests.with_label_values(code).inc();
        self.proxy
            .upstream_duration
            .with_label_values(code)
            .observe(latency.as_secs_f64());
    }

    /// A TLS handshake on the secure port ended.
    pub fn inc_tls_handshake(&self, success: bool) {
        self.proxy
            .tls_handshakes
            .with_label_values(&[result_label(success)])
            .inc();
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

    /// Counts a connection as open until the returned guard is dropped.
    pub fn open_connection(&self) -> OpenConnection {
        self.proxy.open_connections.inc();
        OpenConnection {
            gauge: self.proxy.open_connections.clone(),
        }
    }

    /// The proxy answered a client with `code` (proxied from upstream or its own).
    pub fn inc_requests(&self, code: u16) {
        let code = status_code_label(code);
        self.proxy
            .requests
            .with_label_values(&[code.as_str()])
            .inc();
    }
}
