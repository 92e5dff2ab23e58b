//! Assembly of `--coordination-namespace`: the Lease store's client (the upstream's, or
//! `--coordination-kubeconfig`'s), the replica's protocol state with the budget and the floor
//! taken from the flow controller, and the closure through which each new share becomes the
//! server concurrency limit.

use std::sync::Arc;

use tokio::time::Instant;

use super::{publish_limits, StartError};
use crate::coordination::protocol::{Replica, Settings};
use crate::coordination::{
    CoordinationConfig, CoordinationMetrics, Coordinator, ShareSink, START_REPLICAS,
};
use crate::fairqueue::controller::FlowControl;
use crate::metrics::Metrics;
use crate::server::ReadyFlag;
use crate::upstream::{UpstreamClient, UpstreamConfig};

/// The coordinator of this replica, its limit already set to the share it starts with (the
/// floor, not ready), and its readiness check.
pub(super) fn coordinator(
    config: CoordinationConfig,
    upstream: &UpstreamClient,
    flow_control: &Arc<FlowControl>,
    metrics: &Arc<Metrics>,
) -> Result<(Arc<Coordinator>, ReadyFlag), StartError> {
    config.validate()?;
    let client = match &config.kubeconfig {
        Some(kubeconfig) => {
            let store = UpstreamConfig {
                kubeconfig: Some(kubeconfig.clone()),
                ..UpstreamConfig::default()
            };
            UpstreamClient::new(store.resolve()?)?
        }
        None => upstream.clone(),
    };
    let budget = flow_control.server_concurrency_limit();
    let floor = flow_control.nominal_seats_for(1);
    let settings = Settings {
        budget,
        floor,
        lease_duration: config.lease_duration,
        start_replicas: START_REPLICAS,
    };
    // Records are numbered from the start time, above those of an earlier run of this replica.
    let first_seq = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2));
    let replica =
        Replica::new(config.replica_id.clone(), settings, Instant::now()).with_first_seq(first_seq);
    if u64::from(budget) < 2 * u64::from(floor) {
        tracing::warn!(
            budget,
            floor,
            "The budget does not cover the floors of two replicas; raise \
             --max-requests-inflight + --max-mutating-requests-inflight"
        );
    }
    tracing::info!(
        replica = %config.replica_id,
        namespace = %config.namespace,
        budget,
        floor,
        "Sharing the budget with the other replicas"
    );
    let sink = share_sink(flow_control, metrics);
    sink(replica.limit());
    let ready = ReadyFlag::new(false);
    let coordination_metrics = CoordinationMetrics::register(metrics.registry())?;
    let coordinator = Coordinator::new(
        config,
        client,
        Arc::clone(flow_control),
        sink,
        replica,
        ready.clone(),
        coordination_metrics,
    );
    Ok((coordinator, ready))
}

/// Sets a share as the server concurrency limit and the limit gauges follow.
fn share_sink(flow_control: &Arc<FlowControl>, metrics: &Arc<Metrics>) -> ShareSink {
    let flow_control = Arc::clone(flow_control);
    let metrics = Arc::clone(metrics);
    Box::new(move |share| {
        let before = flow_control.server_concurrency_limit();
        if before == share {
            return;
        }
        match flow_control.set_server_concurrency_limit(share, Instant::now()) {
            Ok(()) => {
                tracing::debug!(before, share, "Share of the budget changed");
                publish_limits(&metrics, &flow_control, None);
            }
            Err(error) => tracing::error!(%error, share, "Share not applied"),
        }
    })
}
