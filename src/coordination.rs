//! `--coordination-namespace`: replicas that share one budget. The budget
//! (`--max-requests-inflight` + `--max-mutating-requests-inflight`) is the total for every
//! replica; each keeps a `coordination.k8s.io/v1` Lease with its share and seat demand, watches
//! the others', and sets its own server concurrency limit to its share.
//!
//! - [`split`]: how a budget is split among live replicas (pure);
//! - [`protocol`]: one replica's side of the protocol that keeps the shares within the budget
//!   (pure, time as a value);
//! - [`lease`]: the Lease and its versioned annotation, both ways (pure);
//! - [`lease_loop`]: the watch and the writes over the upstream client ([`Coordinator`]);
//! - `apf_proxy_coordination_*` metrics, and [`dump`] for the admin listener.
//!
//! `docs/scale-out.md` describes the protocol and its worst cases.

pub mod lease;
pub mod lease_loop;
mod metrics;
pub mod protocol;
pub mod split;

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

pub use lease_loop::{Coordinator, ShareSink};
pub use metrics::CoordinationMetrics;
use protocol::{Phase, Replica};

/// The Lease duration when `--coordination-lease-duration` is not given.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The replicas assumed at start when the Leases cannot be read (the fall-back share is the
/// budget divided by this).
pub const START_REPLICAS: u32 = 3;

/// The coordination flags as plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinationConfig {
    /// `--coordination-namespace`: where the Leases live.
    pub namespace: String,
    /// `--coordination-kubeconfig`: the Lease store's connection; `None` is the upstream's.
    pub kubeconfig: Option<PathBuf>,
    /// `--replica-id`: this replica's name (`holderIdentity`, and the Lease's name suffix).
    pub replica_id: String,
    /// `--coordination-lease-duration`.
    pub lease_duration: Duration,
}

/// Why the coordination flags are unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinationConfigError {
    /// No `--replica-id`, no `$POD_NAME`, no hostname.
    #[error("--replica-id: not given, and neither $POD_NAME nor the hostname is set")]
    NoReplicaId,
    /// The id cannot be part of a Lease name.
    #[error("--replica-id {0:?}: must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 200 characters")]
    BadReplicaId(String),
    /// The namespace is not a valid name.
    #[error("--coordination-namespace {0:?}: not a valid namespace name")]
    BadNamespace(String),
    /// Less than 3 s: a renew period under a second.
    #[error("--coordination-lease-duration {0:?}: must be at least 3s")]
    LeaseTooShort(Duration),
}

impl CoordinationConfig {
    /// The configuration the flags give: the replica id defaulted to `$POD_NAME`, then the
    /// hostname (empty without any), the Lease duration to [`DEFAULT_LEASE_DURATION`]. Checked
    /// by [`validate`](Self::validate).
    pub fn new(
        namespace: String,
        kubeconfig: Option<PathBuf>,
        replica_id: Option<String>,
        lease_duration: Option<Duration>,
    ) -> Self {
        let replica_id = replica_id
            .or_else(|| std::env::var("POD_NAME").ok().filter(|id| !id.is_empty()))
            .or_else(hostname)
            .unwrap_or_default();
        CoordinationConfig {
            namespace,
            kubeconfig,
            replica_id,
            lease_duration: lease_duration.unwrap_or(DEFAULT_LEASE_DURATION),
        }
    }

    /// Whether the replica id can name a Lease, the namespace is a namespace name, and the Lease
    /// duration leaves a renew period of a second.
    pub fn validate(&self) -> Result<(), CoordinationConfigError> {
        if self.replica_id.is_empty() {
            return Err(CoordinationConfigError::NoReplicaId);
        }
        if !is_dns_subdomain(&self.replica_id, 200) {
            return Err(CoordinationConfigError::BadReplicaId(
                self.replica_id.clone(),
            ));
        }
        if !is_dns_subdomain(&self.namespace, 63) || self.namespace.contains('.') {
            return Err(CoordinationConfigError::BadNamespace(
                self.namespace.clone(),
            ));
        }
        if self.lease_duration < Duration::from_secs(3) {
            return Err(CoordinationConfigError::LeaseTooShort(self.lease_duration));
        }
        Ok(())
    }
}

fn hostname() -> Option<String> {
    std::env::var("HOSTNAME").ok().or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
    })
}

fn is_dns_subdomain(name: &str, max: usize) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    name.len() <= max
        && edge(name.chars().next())
        && edge(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// The debug view of a replica's coordination at `now` (served by the admin listener): itself,
/// then every peer with its share, claim, demand and when it was last seen to change.
pub fn dump(replica: &Replica, now: Instant) -> serde_json::Value {
    let settings = replica.settings();
    let peers: Vec<serde_json::Value> = replica
        .peers()
        .iter()
        .map(|(id, peer)| {
            let seen = now.saturating_duration_since(peer.changed_at).as_secs_f64();
            let record = peer.record.as_ref();
            serde_json::json!({
                "replica": id,
                "live": replica.is_live(peer, now),
                "readable": record.is_some(),
                "share": record.map(|r| r.share),
                "claim": record.map(|r| r.claim),
                "demand": record.map(|r| r.demand),
                "levels": record.map(|r| r.levels.clone()),
                "lastChangeSecondsAgo": (seen * 1000.0).round() / 1000.0,
            })
        })
        .collect();
    let phase = match replica.phase() {
        Phase::Joining => "joining",
        Phase::Joined => "joined",
        Phase::Fallback => "fallback",
    };
    serde_json::json!({
        "replica": replica.id(),
        "phase": phase,
        "share": replica.share(),
        "limit": replica.limit(),
        "replicas": replica.replicas_seen(),
        "budget": settings.budget,
        "floor": settings.floor,
        "leaseDurationSeconds": settings.lease_duration.as_secs(),
        "peers": peers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_ids_and_namespaces_are_checked() {
        let d = Some(Duration::from_secs(15));
        let config = |ns: &str, id: &str, d| {
            CoordinationConfig::new(ns.into(), None, Some(id.into()), d).validate()
        };
        assert_eq!(config("kube-system", "pod-a.1", d), Ok(()));
        for bad in ["Pod", "-a", "a_b"] {
            assert!(config("ns", bad, d).is_err(), "{bad:?}");
        }
        assert_eq!(
            config("ns", "", d),
            Err(CoordinationConfigError::NoReplicaId)
        );
        assert_eq!(
            config("a.b", "a", d),
            Err(CoordinationConfigError::BadNamespace("a.b".into()))
        );
        let short = Some(Duration::from_secs(2));
        assert!(matches!(
            config("ns", "a", short),
            Err(CoordinationConfigError::LeaseTooShort(_))
        ));
        let defaulted = CoordinationConfig::new("ns".into(), None, Some("a".into()), None);
        assert_eq!(defaulted.lease_duration, DEFAULT_LEASE_DURATION);
    }
}
