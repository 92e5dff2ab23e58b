//! Prometheus metrics: the apiserver's `apiserver_flowcontrol_*` families (same names, types, help,
//! labels and buckets, so existing dashboards and alerts work), the two endpoint counters the
//! apiserver bumps on a 429, and the proxy's own `apf_proxy_*` families.
//!
//! One explicit [`prometheus::Registry`] per [`Metrics`] (no global statics), so every test asserts
//! on a fresh registry. Callers report events through typed methods and never spell a metric name;
//! every label is bounded (`priority_level`, `flow_schema`, `reason`, `code`, `method`, `result`,
//! `phase`, `request_kind`, `bound`, `success`, `execute`, `type`): never a user, path or namespace.
//!
//! Mirrors `pkg/util/flowcontrol/metrics/metrics.go`. The apiserver's help strings carry the
//! component-base stability prefix (`[ALPHA] `, `[BETA] `) and, for timing histograms, the
//! `EXPERIMENTAL: ` prefix in front of it; ours do the same so the exposition matches.

mod collectors;
mod endpoints;
mod flowcontrol;
mod labels;
mod observer;
mod proxy;
pub mod timing_ratio;

use parking_lot::Mutex;
use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::time::Instant;

pub use flowcontrol::{DispatchR, FlowMetrics, PriorityLevelGauges};
pub use labels::{ExecutionType, Phase, RejectReason, RequestKind, UpstreamOutcome};
pub use proxy::CertificateKind;
pub use timing_ratio::{RatioedGauge, TimingRatioHistogramVec};

/// Every metric the proxy exports, in one registry.
///
/// Shared as `Arc<Metrics>`; all methods take `&self` and are cheap enough for the request path
/// (a label lookup and an atomic add, or a short mutex for the timing-ratio histograms).
pub struct Metrics {
    registry: Registry,
    flowcontrol: flowcontrol::Families,
    endpoints: endpoints::Families,
    proxy: proxy::Families,
    /// Each level's timing-ratio gauges, made on first use ([`Metrics::level_gauges`]).
    /// FNV: looked up several times per request by a configured level name (not caller input).
    level_gauges: Mutex<fnv::FnvHashMap<String, PriorityLevelGauges>>,
    /// The per-(level, flow schema) members, resolved once per pair ([`Metrics::flow`]).
    flows: flowcontrol::FlowCache,
    /// Run before every scrape ([`Metrics::on_scrape`]).
    scrape_hooks: Mutex<Vec<ScrapeHook>>,
}

/// See [`Metrics::on_scrape`].
type ScrapeHook = Box<dyn Fn(&Metrics) + Send + Sync>;

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A fresh registry holding every family (vector families appear in the output once they
    /// have a member, as in the apiserver).
    pub fn new() -> Arc<Metrics> {
        let registry = Registry::new();
        // The definitions are constants; a failure here is a bug that every test would catch.
        let flowcontrol = flowcontrol::Families::register(&registry)
            .expect("invariant: flowcontrol metric definitions are valid and unique");
        let endpoints = endpoints::Families::register(&registry)
            .expect("invariant: endpoint metric definitions are valid and unique");
        let proxy = proxy::Families::register(&registry)
            .expect("invariant: proxy metric definitions are valid and unique");
        let flows = flowcontrol::FlowCache::new(&flowcontrol);
        Arc::new(Metrics {
            registry,
            flowcontrol,
            endpoints,
            proxy,
            level_gauges: Mutex::new(fnv::FnvHashMap::default()),
            flows,
            scrape_hooks: Mutex::new(Vec::new()),
        })
    }

    /// The registry, for callers that add collectors of their own.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The Prometheus text exposition (format 0.0.4) as of now.
    pub fn encode(&self) -> String {
        self.encode_at(Instant::now())
    }

    /// Runs `hook` before every scrape, for values read rather than reported (a level's R, which
    /// the apiserver sets on every change of its queue set, is read off the level instead of
    /// being reported twice per request). The hook must not call `on_scrape` or `encode`.
    pub fn on_scrape(&self, hook: impl Fn(&Metrics) + Send + Sync + 'static) {
        let mut hooks = self.scrape_hooks.lock();
        hooks.push(Box::new(hook));
    }

    /// The text exposition with the timing-ratio histograms accounted up to `now`.
    pub fn encode_at(&self, now: Instant) -> String {
        {
            let hooks = self.scrape_hooks.lock();
            for hook in hooks.iter() {
                hook(self);
            }
        }
        self.flowcontrol.flush_timing(now);
        let families = self.registry.gather();
        let mut out = Vec::new();
        // Writing into a Vec fails only for families the encoder rejects (none of ours: every
        // family has a help text and at least one metric after gather's pruning).
        if let Err(error) = TextEncoder::new().encode(&families, &mut out) {
            tracing::error!(%error, "Encoding metrics failed");
        }
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
    }

    /// The content type of [`Metrics::encode`]'s output.
    pub fn content_type() -> &'static str {
        prometheus::TEXT_FORMAT
    }
}

/// Registers a clone of `collector` and hands the original back.
fn register<C: Collector + Clone + 'static>(
    registry: &Registry,
    collector: C,
) -> prometheus::Result<C> {
    registry.register(Box::new(collector.clone()))?;
    Ok(collector)
}

#[cfg(test)]
mod tests;
