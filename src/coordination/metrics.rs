//! `apf_proxy_coordination_*` families.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

/// The coordination's gauges and counters, registered on the proxy's registry.
#[derive(Clone)]
pub struct CoordinationMetrics {
    replicas: IntGauge,
    share: IntGauge,
    fallback: IntGauge,
    requests: IntCounterVec,
}

impl std::fmt::Debug for CoordinationMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinationMetrics")
            .field("share", &self.share.get())
            .finish_non_exhaustive()
    }
}

impl CoordinationMetrics {
    /// Registers the families on `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let metrics = CoordinationMetrics {
            replicas: IntGauge::new(
                "apf_proxy_coordination_replicas",
                "Live replicas sharing the budget, as this replica last saw them, itself included.",
            )?,
            share: IntGauge::new(
                "apf_proxy_coordination_share_seats",
                "This replica's current share of the budget: its server concurrency limit.",
            )?,
            fallback: IntGauge::new(
                "apf_proxy_coordination_fallback",
                "1 while this replica cannot use the Lease store and serves with a conservative \
                 share, else 0.",
            )?,
            requests: IntCounterVec::new(
                Opts::new(
                    "apf_proxy_coordination_lease_requests_total",
                    "Requests this replica made to the Lease store, by verb.",
                ),
                &["verb"],
            )?,
        };
        registry.register(Box::new(metrics.replicas.clone()))?;
        registry.register(Box::new(metrics.share.clone()))?;
        registry.register(Box::new(metrics.fallback.clone()))?;
        registry.register(Box::new(metrics.requests.clone()))?;
        Ok(metrics)
    }

    pub(super) fn set(&self, replicas: u32, share: u32, fallback: bool) {
        self.replicas.set(i64::from(replicas));
        self.share.set(i64::from(share));
        self.fallback.set(i64::from(fallback));
    }

    pub(super) fn request(&self, verb: &'static str) {
        self.requests.with_label_values(&[verb]).inc();
    }
}
