//! Classification: which FlowSchema a request matches, its priority level and its flow.
//!
//! Mirrors `k8s.io/apiserver/pkg/util/flowcontrol/rule.go` and the classification part of
//! `apf_controller.go` (`startRequest`, `computeFlowDistinguisher`, `hashFlowID`). Pure: no I/O,
//! no clock.

pub mod explain;
mod index;
mod input;
mod rule;

use std::cell::RefCell;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::Arc;

use sha2::{Digest, Sha256};

pub(crate) use self::index::WordBuildHasher;

use crate::auth::Identity;
use crate::config::{DistinguisherMethod, FlowSchemaRef, PriorityLevelRef};
use crate::request_info::RequestInfo;
use crate::shuffle_sharding::{Dealer, Hand};

pub use explain::{explain, Explanation};
pub use index::MatchIndex;
pub use input::{read_bounded_line, request_target, ClassifyInput, Impersonate, MAX_LINE_BYTES};
pub use rule::{
    contains_string, matches, non_resource_rule_matches, non_resource_rule_mismatch,
    non_resource_url_matches, request_matches, resource_matches, resource_rule_matches,
    resource_rule_mismatch, service_account_matches, subject_matches, subjects_match, Mismatch,
    SERVICE_ACCOUNT_PREFIX, WILDCARD,
};

/// How one request is classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// The first FlowSchema in matching order that matched (`catch-all` when none did).
    pub flow_schema: FlowSchemaRef,
    /// Its name, shared by every request it classifies (no allocation per request).
    pub flow_schema_name: Arc<str>,
    /// That FlowSchema's priority level.
    pub priority_level: PriorityLevelRef,
    /// The flow distinguisher; `""` unless the level queues with more than one queue. Shared
    /// with the queue set's record of the request ([`crate::fairqueue::queueset::FlowMeta`]).
    pub flow_distinguisher: Arc<str>,
    /// The flow's hash for shuffle sharding; `0` unless the level queues with more than one queue.
    pub flow_hash: u64,
}

impl Classification {
    /// Whether the priority level is `Exempt` (the request is never queued).
    pub fn is_exempt(&self) -> bool {
        self.priority_level.is_exempt()
    }

    /// The queues the flow is dealt, in deal order, when the level queues with more than one
    /// queue; `None` otherwise (exempt, `Reject`, or a single queue) or when the level's
    /// `queues`/`handSize` cannot be dealt (validation rejects such levels).
    pub fn hand(&self) -> Option<Hand> {
        let queuing = sharded_queuing(&self.priority_level)?;
        let dealer = Dealer::new(queuing.queues.into(), queuing.hand_size.into()).ok()?;
        Some(dealer.deal(self.flow_hash))
    }
}

/// Classifies a request: the first FlowSchema of `config.flow_schemas()` that matches wins,
/// `config.catch_all()` when none does; then its level and flow.
///
/// Mirrors `apf_controller.go: startRequest` up to the queue set. A distinguisher and hash are
/// computed only when the level is not exempt and queues with `queues > 1`; a FlowSchema without
/// `distinguisherMethod` then still gets the hash of the empty distinguisher, as in the apiserver.
///
/// Searches the configuration's [`MatchIndex`]: no FlowSchema whose subjects cannot name the
/// caller is looked at.
pub fn classify(index: &MatchIndex, identity: &Identity, info: &RequestInfo) -> Classification {
    let target = index.find(identity, info);
    let (flow_distinguisher, flow_hash) = if sharded_queuing(&target.priority_level).is_some() {
        let distinguisher =
            flow_distinguisher(target.flow_schema.distinguisher_method, identity, info);
        let hash = flow_hash(&target.flow_schema.name, distinguisher);
        (Arc::from(distinguisher), hash)
    } else {
        (no_distinguisher(), 0)
    };
    Classification {
        flow_schema: target.flow_schema.clone(),
        flow_schema_name: Arc::clone(&target.name),
        priority_level: target.priority_level.clone(),
        flow_distinguisher,
        flow_hash,
    }
}

/// The empty distinguisher, allocated once per thread.
fn no_distinguisher() -> Arc<str> {
    thread_local! {
        static EMPTY: Arc<str> = Arc::from("");
    }
    EMPTY.with(Arc::clone)
}

/// The flow distinguisher a method picks. Mirrors `apf_controller.go: computeFlowDistinguisher`:
/// `ByUser` → the user name, `ByNamespace` → the request's namespace (`""` for cluster-scoped and
/// non-resource requests), no method → `""`.
pub fn flow_distinguisher<'a>(
    method: Option<DistinguisherMethod>,
    identity: &'a Identity,
    info: &'a RequestInfo,
) -> &'a str {
    match method {
        None => "",
        Some(DistinguisherMethod::ByUser) => &identity.user,
        Some(DistinguisherMethod::ByNamespace) => &info.namespace,
    }
}

/// The flow's hash. Mirrors `apf_controller.go: hashFlowID`: the first 8 bytes of
/// `sha256(flow_schema ‖ 0x00 ‖ distinguisher)`, read little-endian.
///
/// A pure function of its two strings, so each thread keeps the flows it hashed lately
/// (`FlowHashes`): a request of a flow seen before costs a map lookup instead of a SHA-256.
pub fn flow_hash(flow_schema: &str, distinguisher: &str) -> u64 {
    FLOW_HASHES.with_borrow_mut(|hashes| hashes.get_or_compute(flow_schema, distinguisher))
}

thread_local! {
    static FLOW_HASHES: RefCell<FlowHashes> = RefCell::new(FlowHashes::default());
}

/// The flow hashes a thread computed lately, by a keyed hash of the flow: at most
/// [`FlowHashes::CAPACITY`] of them (it starts over when full, so a caller cannot grow it by
/// varying its distinguisher). Each entry keeps its flow's strings, compared on every hit: two
/// flows whose keys collide take turns, each getting its own SHA-256.
///
/// The key is SipHash with this thread's random key (`RandomState`), not the classifier's fast
/// unkeyed hash: a distinguisher is chosen by the caller (its user name, the namespace in its URL),
/// and must not be able to pile flows up in one bucket. Still about a third of a SHA-256 with
/// the CPU's SHA instructions, and far less without them.
#[derive(Debug, Default)]
struct FlowHashes {
    keys: RandomState,
    by_key: HashMap<u64, CachedFlowHash, BuildHasherDefault<KeyHasher>>,
}

#[derive(Debug)]
struct CachedFlowHash {
    flow_schema: Box<str>,
    distinguisher: Box<str>,
    hash: u64,
}

// === impl FlowHashes ===

impl FlowHashes {
    /// Flows kept per thread (a few hundred KiB at most).
    const CAPACITY: usize = 4096;

    fn get_or_compute(&mut self, flow_schema: &str, distinguisher: &str) -> u64 {
        let key = self.key(flow_schema, distinguisher);
        if let Some(cached) = self.by_key.get(&key) {
            if *cached.flow_schema == *flow_schema && *cached.distinguisher == *distinguisher {
                return cached.hash;
            }
        }
        let hash = sha256_flow_hash(flow_schema, distinguisher);
        if self.by_key.len() >= Self::CAPACITY {
            self.by_key.clear();
        }
        let cached = CachedFlowHash {
            flow_schema: flow_schema.into(),
            distinguisher: distinguisher.into(),
            hash,
        };
        self.by_key.insert(key, cached);
        hash
    }

    fn key(&self, flow_schema: &str, distinguisher: &str) -> u64 {
        let mut key = self.keys.build_hasher();
        key.write(flow_schema.as_bytes());
        key.write_u8(0);
        key.write(distinguisher.as_bytes());
        key.finish()
    }
}

/// The hasher of maps whose keys are hashes already (SipHash values here; `simulate`'s memo of
/// classifications).
#[derive(Debug, Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; fold anything else in all the same.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// [`flow_hash`] computed.
fn sha256_flow_hash(flow_schema: &str, distinguisher: &str) -> u64 {
    let digest = Sha256::new()
        .chain_update(flow_schema.as_bytes())
        .chain_update([0u8])
        .chain_update(distinguisher.as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// The queuing parameters of a level that shuffle-shards: not exempt, `Queue`, `queues > 1`.
fn sharded_queuing(level: &PriorityLevelRef) -> Option<crate::config::Queuing> {
    level.queuing().filter(|q| q.queues > 1)
}

#[cfg(test)]
pub(crate) mod tests;
