//! Families read at scrape time from counters other modules already keep: the authenticator's
//! [`AuthStats`], the secure listener's [`ServerStats`] and the upstream client's
//! [`UpstreamStats`]. Reading them (instead of counting twice)
//! keeps one source of truth; the families appear once their owner is registered.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};

use super::Metrics;
use crate::auth::{AttemptResult, AuthMethod, AuthStats, CredentialKind};
use crate::server::ServerStats;
use crate::upstream::exec_credential::ExecPlugin;
use crate::upstream::UpstreamStats;

/// One family: its description and how to read its series.
struct Family {
    desc: Desc,
    kind: MetricType,
}

impl Family {
    fn new(name: &str, help: &str, labels: &[&str], kind: MetricType) -> prometheus::Result<Self> {
        let labels = labels.iter().map(|l| (*l).to_owned()).collect();
        let desc = Desc::new(name.to_owned(), help.to_owned(), labels, Default::default())?;
        Ok(Family { desc, kind })
    }

    /// The family with one series per `(label values, value)`; label values follow the
    /// descriptor's label names.
    fn collect(&self, series: Vec<(Vec<&str>, f64)>) -> MetricFamily {
        let metrics = series
            .into_iter()
            .map(|(values, value)| self.metric(&values, value))
            .collect();
        let mut family = MetricFamily::default();
        family.set_name(self.desc.fq_name.clone());
        family.set_help(self.desc.help.clone());
        family.set_field_type(self.kind);
        family.set_metric(metrics);
        family
    }

    fn metric(&self, values: &[&str], value: f64) -> Metric {
        let mut labels: Vec<LabelPair> = self
            .desc
            .variable_labels
            .iter()
            .zip(values)
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name(name.clone());
                pair.set_value((*value).to_owned());
                pair
            })
            .collect();
        labels.sort_by(|a, b| a.name().cmp(b.name()));
        let mut metric = Metric::default();
        metric.set_label(labels);
        match self.kind {
            MetricType::GAUGE => {
                let mut gauge = Gauge::default();
                gauge.set_value(value);
                metric.set_gauge(gauge);
            }
            _ => {
                let mut counter = Counter::default();
                counter.set_value(value);
                metric.set_counter(counter);
            }
        }
        metric
    }
}

/// `apf_proxy_authentications_total{method,result}`, `apf_proxy_token_review_cache_lookups_total
/// {result}` and `apf_proxy_token_reviews_total{result}` from an [`AuthStats`].
struct AuthCollector {
    stats: Arc<AuthStats>,
    authentications: Family,
    cache_lookups: Family,
    reviews: Family,
}

/// The `method` label of a rejected credential: the bearer token's authenticator is not known
/// when it is rejected (file and TokenReview both refused it).
fn credential_label(kind: CredentialKind) -> &'static str {
    match kind {
        CredentialKind::RequestHeader => AuthMethod::RequestHeader.as_str(),
        CredentialKind::ClientCertificate => AuthMethod::ClientCertificate.as_str(),
        CredentialKind::BearerToken => "bearer_token",
    }
}

impl Collector for AuthCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![
            &self.authentications.desc,
            &self.cache_lookups.desc,
            &self.reviews.desc,
        ]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let s = &self.stats;
        let mut attempts: Vec<(Vec<&str>, f64)> = AuthMethod::ALL
            .iter()
            .map(|m| (vec![m.as_str(), "success"], s.succeeded(*m) as f64))
            .collect();
        for kind in CredentialKind::ALL {
            attempts.push((
                vec![credential_label(kind), "error"],
                s.rejected(kind) as f64,
            ));
        }
        attempts.push((
            vec!["none", "failure"],
            s.attempts(AttemptResult::Failure) as f64,
        ));
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
        vec![
            self.authentications.collect(attempts),
            self.cache_lookups.collect(vec![
                (vec!["hit"], load(&s.token_cache.hits)),
                (vec!["miss"], load(&s.token_cache.misses)),
            ]),
            self.reviews.collect(vec![
                (vec!["ok"], load(&s.token_review.ok)),
                (vec!["error"], load(&s.token_review.failed)),
            ]),
        ]
    }
}

/// The secure listener's counters: `apiserver_tls_handshake_errors_total` (as the apiserver
/// exports it), `apf_proxy_tls_handshakes_total`, `apf_proxy_connections_accepted_total` and
/// `apf_proxy_open_connections`.
struct ServerCollector {
    stats: Arc<ServerStats>,
    handshake_errors: Family,
    handshakes: Family,
    accepted: Family,
    open: Family,
}

impl Collector for ServerCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![
            &self.handshake_errors.desc,
            &self.handshakes.desc,
            &self.accepted.desc,
            &self.open.desc,
        ]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let s = &self.stats;
        vec![
            self.handshake_errors
                .collect(vec![(vec![], s.tls_handshake_errors() as f64)]),
            self.handshakes.collect(
                s.tls_handshakes()
                    .map(|(n, count)| (vec![n.protocol, n.tls_version], count as f64))
                    .collect(),
            ),
            self.accepted.collect(vec![(vec![], s.accepted() as f64)]),
            self.open.collect(vec![(vec![], s.active() as f64)]),
        ]
    }
}

/// The kubeconfig exec credential plugin's runs.
struct ExecPluginCollector {
    plugin: Arc<ExecPlugin>,
    runs: Family,
}

impl Collector for ExecPluginCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.runs.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let (runs, failures) = self.plugin.runs();
        vec![self.runs.collect(vec![
            (vec!["success"], runs.saturating_sub(failures) as f64),
            (vec!["failure"], failures as f64),
        ])]
    }
}

/// The upstream client's connections, streams and refusals.
struct UpstreamCollector {
    stats: Arc<UpstreamStats>,
    connections: Family,
    streams: Family,
    limit_rejections: Family,
    goaways: Family,
    retries: Family,
}

impl Collector for UpstreamCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![
            &self.connections.desc,
            &self.streams.desc,
            &self.limit_rejections.desc,
            &self.goaways.desc,
            &self.retries.desc,
        ]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let s = &self.stats;
        vec![
            self.connections.collect(
                s.connections()
                    .map(|(p, n)| (vec![p.as_str()], n as f64))
                    .collect(),
            ),
            self.streams.collect(
                s.streams_in_use()
                    .map(|(r, n)| (vec![r.as_str()], n as f64))
                    .collect(),
            ),
            self.limit_rejections.collect(
                s.limit_refusals()
                    .map(|(r, n)| (vec![r.as_str()], n as f64))
                    .collect(),
            ),
            self.goaways.collect(vec![(vec![], s.goaways() as f64)]),
            self.retries.collect(vec![(vec![], s.retries() as f64)]),
        ]
    }
}

// === impl Metrics: registering other modules' counters ===

impl Metrics {
    /// Exports the authenticator's counters (`Authenticator::stats()`): authentications by method
    /// and result (`success` per method; `error` per rejected credential kind; `failure` with
    /// method `none` when nothing authenticated and anonymous is off), TokenReview cache hits and
    /// misses, and TokenReview calls by result. Fails if called twice on one registry.
    pub fn register_auth_stats(&self, stats: Arc<AuthStats>) -> prometheus::Result<()> {
        use MetricType::COUNTER;
        let collector = AuthCollector {
            stats,
            authentications: Family::new(
                "apf_proxy_authentications_total",
                "Authentications by the authenticator that decided (or the rejected credential) and result",
                &["method", "result"],
                COUNTER,
            )?,
            cache_lookups: Family::new(
                "apf_proxy_token_review_cache_lookups_total",
                "TokenReview cache lookups by result (hit or miss)",
                &["result"],
                COUNTER,
            )?,
            reviews: Family::new(
                "apf_proxy_token_reviews_total",
                "TokenReview calls to the upstream by result (ok: a 2xx answer)",
                &["result"],
                COUNTER,
            )?,
        };
        self.registry.register(Box::new(collector))
    }

    /// Exports the runs of the upstream kubeconfig's exec credential plugin,
    /// `apf_proxy_exec_plugin_runs_total{result="success|failure"}` (a failure: missing command,
    /// non-zero exit, timeout or output that is not a credential).
    pub fn register_exec_plugin(&self, plugin: Arc<ExecPlugin>) -> prometheus::Result<()> {
        let collector = ExecPluginCollector {
            plugin,
            runs: Family::new(
                "apf_proxy_exec_plugin_runs_total",
                "Runs of the upstream kubeconfig's exec credential plugin, by result",
                &["result"],
                MetricType::COUNTER,
            )?,
        };
        self.registry.register(Box::new(collector))
    }

    /// Exports the upstream client's counters (`UpstreamClient::stats()`): open connections by
    /// protocol, HTTP/2 streams in use by route, requests refused at `--upstream-max-connections`,
    /// `GOAWAY`s received and requests sent again after a connection did not take them.
    pub fn register_upstream_stats(&self, stats: Arc<UpstreamStats>) -> prometheus::Result<()> {
        use MetricType::{COUNTER, GAUGE};
        let collector = UpstreamCollector {
            stats,
            connections: Family::new(
                "apf_proxy_upstream_connections",
                "Connections open to the upstream, by protocol (h2 or http/1.1)",
                &["protocol"],
                GAUGE,
            )?,
            streams: Family::new(
                "apf_proxy_upstream_streams_in_use",
                "HTTP/2 streams open to the upstream, by route (short, long-running)",
                &["route"],
                GAUGE,
            )?,
            limit_rejections: Family::new(
                "apf_proxy_upstream_connection_limit_rejections_total",
                "Requests answered 503 because they needed a new upstream connection and --upstream-max-connections were open, by route",
                &["route"],
                COUNTER,
            )?,
            goaways: Family::new(
                "apf_proxy_upstream_goaways_total",
                "HTTP/2 GOAWAY frames received from the upstream",
                &[],
                COUNTER,
            )?,
            retries: Family::new(
                "apf_proxy_upstream_retries_total",
                "Requests sent again on another upstream connection because the first closed or refused them before processing",
                &[],
                COUNTER,
            )?,
        };
        self.registry.register(Box::new(collector))
    }

    /// Exports the secure listener's counters (`SecureServer::stats()`). Fails if called twice on
    /// one registry.
    pub fn register_server_stats(&self, stats: Arc<ServerStats>) -> prometheus::Result<()> {
        let collector = ServerCollector {
            stats,
            handshake_errors: Family::new(
                "apiserver_tls_handshake_errors_total",
                "[ALPHA] Number of requests dropped with 'TLS handshake error from' error",
                &[],
                MetricType::COUNTER,
            )?,
            handshakes: Family::new(
                "apf_proxy_tls_handshakes_total",
                "TLS handshakes completed on the secure port, by the protocol agreed by ALPN (h2, http/1.1 or none) and the TLS version",
                &["protocol", "tls_version"],
                MetricType::COUNTER,
            )?,
            accepted: Family::new(
                "apf_proxy_connections_accepted_total",
                "TCP connections accepted on the secure port (TLS handshakes attempted)",
                &[],
                MetricType::COUNTER,
            )?,
            open: Family::new(
                "apf_proxy_open_connections",
                "Client connections open on the secure port (handshaking or serving)",
                &[],
                MetricType::GAUGE,
            )?,
        };
        self.registry.register(Box::new(collector))
    }
}
