//! The validated, version-independent configuration model.
//!
//! Every API version (`v1beta1`, `v1beta2`, `v1beta3`, `v1`) is defaulted and converted into these
//! types; nothing downstream knows which version a file was written in.

use std::sync::Arc;

/// Name of the mandatory exempt FlowSchema and priority level.
pub(in crate::config) const EXEMPT: &str = "exempt";
/// Name of the mandatory catch-all FlowSchema and priority level.
pub const CATCH_ALL: &str = "catch-all";

/// A FlowSchema after defaulting and validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSchema {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`; empty in files that set none, until [`super::Config::resolve`] gives the
    /// object a [`derived_uid`].
    pub uid: String,
    /// `spec.matchingPrecedence` (defaulted: 0 → 1000).
    pub matching_precedence: i32,
    /// `spec.priorityLevelConfiguration.name`.
    pub priority_level: String,
    /// `spec.distinguisherMethod.type`; `None` puts all requests of the schema in one flow.
    pub distinguisher_method: Option<DistinguisherMethod>,
    /// `spec.rules`.
    pub rules: Vec<PolicyRulesWithSubjects>,
}

/// How a FlowSchema splits its requests into flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistinguisherMethod {
    /// One flow per user name.
    ByUser,
    /// One flow per namespace (`""` for cluster-scoped and non-resource requests).
    ByNamespace,
}

/// One entry of `spec.rules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRulesWithSubjects {
    /// Who the rule applies to; never empty after validation.
    pub subjects: Vec<Subject>,
    /// Rules for resource requests.
    pub resource_rules: Vec<ResourcePolicyRule>,
    /// Rules for non-resource requests.
    pub non_resource_rules: Vec<NonResourcePolicyRule>,
}

/// A subject of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// `kind: User`; name `*` matches every user.
    User { name: String },
    /// `kind: Group`; name `*` matches every request.
    Group { name: String },
    /// `kind: ServiceAccount`; name `*` matches every service account of the namespace.
    ServiceAccount { namespace: String, name: String },
}

/// A `resourceRules[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub cluster_scope: bool,
    pub namespaces: Vec<String>,
}

/// A `nonResourceRules[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonResourcePolicyRule {
    pub verbs: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

/// A PriorityLevelConfiguration after defaulting and validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityLevel {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`; empty in files that set none, until [`super::Config::resolve`] gives the
    /// object a [`derived_uid`].
    pub uid: String,
    /// `spec`.
    pub spec: PriorityLevelSpec,
}

/// `spec.type` with its section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorityLevelSpec {
    /// `type: Exempt`: never queued. Both fields default to 0.
    Exempt {
        /// `nominalConcurrencyShares` (validated non-negative).
        nominal_concurrency_shares: u32,
        /// `lendablePercent` (validated within 0..=100).
        lendable_percent: u32,
    },
    /// `type: Limited`.
    Limited(LimitedPriorityLevel),
}

/// `spec.limited`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitedPriorityLevel {
    /// `nominalConcurrencyShares` (`assuredConcurrencyShares` before v1beta3), defaulted;
    /// validated non-negative.
    pub nominal_concurrency_shares: u32,
    /// `lendablePercent` (nil → 0), validated within 0..=100.
    pub lendable_percent: u32,
    /// `borrowingLimitPercent` (validated non-negative); `None` means unlimited borrowing.
    pub borrowing_limit_percent: Option<u32>,
    /// `limitResponse`.
    pub limit_response: LimitResponse,
}

/// `spec.limited.limitResponse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitResponse {
    /// Requests over the limit are rejected at once.
    Reject,
    /// Requests over the limit wait in fair queues.
    Queue(Queuing),
}

/// `spec.limited.limitResponse.queuing`, defaulted (64 / 8 / 50); each validated positive, and
/// `handSize` at most `queues`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuing {
    pub queues: u32,
    pub hand_size: u32,
    pub queue_length_limit: u32,
}

impl PriorityLevel {
    /// Whether this is an `Exempt` level.
    pub fn is_exempt(&self) -> bool {
        matches!(self.spec, PriorityLevelSpec::Exempt { .. })
    }

    /// The queuing parameters, when the level is `Limited` with `limitResponse.type: Queue`.
    pub fn queuing(&self) -> Option<Queuing> {
        match &self.spec {
            PriorityLevelSpec::Limited(LimitedPriorityLevel {
                limit_response: LimitResponse::Queue(q),
                ..
            }) => Some(*q),
            _ => None,
        }
    }

    /// The concurrency shares (limited or exempt section).
    pub fn nominal_concurrency_shares(&self) -> u32 {
        match &self.spec {
            PriorityLevelSpec::Exempt {
                nominal_concurrency_shares,
                ..
            } => *nominal_concurrency_shares,
            PriorityLevelSpec::Limited(l) => l.nominal_concurrency_shares,
        }
    }

    /// `lendablePercent` of either section.
    pub fn lendable_percent(&self) -> u32 {
        match &self.spec {
            PriorityLevelSpec::Exempt {
                lendable_percent, ..
            } => *lendable_percent,
            PriorityLevelSpec::Limited(l) => l.lendable_percent,
        }
    }

    /// `borrowingLimitPercent`; always `None` for exempt levels.
    pub fn borrowing_limit_percent(&self) -> Option<u32> {
        match &self.spec {
            PriorityLevelSpec::Exempt { .. } => None,
            PriorityLevelSpec::Limited(l) => l.borrowing_limit_percent,
        }
    }
}

/// A shared, immutable FlowSchema.
pub type FlowSchemaRef = Arc<FlowSchema>;
/// The UID of an object whose files set no `metadata.uid`: the apiserver assigns a random one at
/// creation; objects read from files have no creation, so theirs is derived from the kind and the
/// name (SHA-256, written as an RFC 9562 version-8 UUID). It is the same on every replica and
/// restart, and stays when the object's spec changes, as an API object's UID does.
pub fn derived_uid(kind: &str, name: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(b"kube-apf-proxy/flowcontrol/")
        .chain_update(kind.as_bytes())
        .chain_update(b"/")
        .chain_update(name.as_bytes())
        .finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x80; // version 8
    b[8] = (b[8] & 0x3f) | 0x80; // variant 10
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

impl FlowSchema {
    /// This object, with a [`derived_uid`] if it has no UID.
    pub fn with_uid(mut self) -> Self {
        if self.uid.is_empty() {
            self.uid = derived_uid("FlowSchema", &self.name);
        }
        self
    }
}

impl PriorityLevel {
    /// This object, with a [`derived_uid`] if it has no UID.
    pub fn with_uid(mut self) -> Self {
        if self.uid.is_empty() {
            self.uid = derived_uid("PriorityLevelConfiguration", &self.name);
        }
        self
    }
}

/// A shared, immutable priority level.
pub type PriorityLevelRef = Arc<PriorityLevel>;
