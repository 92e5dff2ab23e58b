//! `apf_proxy_config_*` families of the cluster configuration source.

use std::time::{SystemTime, UNIX_EPOCH};

use prometheus::{Gauge, IntCounterVec, IntGaugeVec, Opts, Registry};

/// The source's counters and gauges, registered on the proxy's registry.
#[derive(Clone)]
pub struct SourceMetrics {
    last_sync: Gauge,
    watch_restarts: IntCounterVec,
    lists: IntCounterVec,
    objects: IntGaugeVec,
}

impl SourceMetrics {
    /// Registers the families on `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let metrics = SourceMetrics {
            last_sync: Gauge::new(
                "apf_proxy_config_last_sync_timestamp_seconds",
                "When the configuration from the cluster was last applied (Unix time); now minus \
                 this is how stale the configuration in force may be.",
            )?,
            watch_restarts: IntCounterVec::new(
                Opts::new(
                    "apf_proxy_config_watch_restarts_total",
                    "Watches of the cluster's flow-control objects that ended and were started \
                     again, by resource.",
                ),
                &["resource"],
            )?,
            lists: IntCounterVec::new(
                Opts::new(
                    "apf_proxy_config_lists_total",
                    "Successful lists of the cluster's flow-control objects (the first, and one \
                     after each expired resource version), by resource.",
                ),
                &["resource"],
            )?,
            objects: IntGaugeVec::new(
                Opts::new(
                    "apf_proxy_config_objects",
                    "Flow-control objects read from the cluster, by kind.",
                ),
                &["kind"],
            )?,
        };
        registry.register(Box::new(metrics.last_sync.clone()))?;
        registry.register(Box::new(metrics.watch_restarts.clone()))?;
        registry.register(Box::new(metrics.lists.clone()))?;
        registry.register(Box::new(metrics.objects.clone()))?;
        Ok(metrics)
    }

    pub(super) fn synced(&self) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.last_sync.set(now);
    }

    pub(super) fn watch_restarted(&self, resource: &str) {
        self.watch_restarts.with_label_values(&[resource]).inc();
    }

    pub(super) fn listed(&self, resource: &str) {
        self.lists.with_label_values(&[resource]).inc();
    }

    pub(super) fn objects(&self, (flow_schemas, levels): (usize, usize)) {
        let set = |kind: &str, n: usize| {
            self.objects
                .with_label_values(&[kind])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        };
        set("FlowSchema", flow_schemas);
        set("PriorityLevelConfiguration", levels);
    }
}
