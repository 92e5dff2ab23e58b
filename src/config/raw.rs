//! Mirror types of the API objects as written in files, before validation.
//!
//! One set of types covers all five API versions: they differ only in the name and the pointer-ness
//! of the concurrency-shares field, which [`ApiVersion`] records. Optional sections stay `Option`
//! (as the apiserver's pointers do) so that validation can tell "absent" from "empty".

mod decode;
mod encode;

use std::collections::BTreeMap;
use std::fmt;

pub(in crate::config) use decode::decode_object;
pub(in crate::config) use decode::did_you_mean;

/// The API group of FlowSchema and PriorityLevelConfiguration.
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The annotation that makes v1beta3 keep an explicit zero `nominalConcurrencyShares`.
pub(in crate::config) const PRESERVE_ZERO_ANNOTATION: &str =
    "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares";

/// A version of `flowcontrol.apiserver.k8s.io`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApiVersion {
    /// `v1alpha1` (Kubernetes 1.18–1.20): the fields and defaults of `v1beta1`.
    V1alpha1,
    /// `v1beta1` (Kubernetes 1.20–1.25).
    V1beta1,
    /// `v1beta2` (1.23–1.28).
    V1beta2,
    /// `v1beta3` (1.26–1.31).
    V1beta3,
    /// `v1` (1.29+).
    V1,
}

impl ApiVersion {
    /// Parses a full `apiVersion` (`flowcontrol.apiserver.k8s.io/v1`).
    pub fn parse(api_version: &str) -> Option<ApiVersion> {
        let version = api_version.strip_prefix(GROUP)?.strip_prefix('/')?;
        match version {
            "v1alpha1" => Some(ApiVersion::V1alpha1),
            "v1beta1" => Some(ApiVersion::V1beta1),
            "v1beta2" => Some(ApiVersion::V1beta2),
            "v1beta3" => Some(ApiVersion::V1beta3),
            "v1" => Some(ApiVersion::V1),
            _ => None,
        }
    }

    /// The JSON name of the limited concurrency-shares field in this version.
    pub fn shares_field(self) -> &'static str {
        match self {
            ApiVersion::V1alpha1 | ApiVersion::V1beta1 | ApiVersion::V1beta2 => {
                "assuredConcurrencyShares"
            }
            ApiVersion::V1beta3 | ApiVersion::V1 => "nominalConcurrencyShares",
        }
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = match self {
            ApiVersion::V1alpha1 => "v1alpha1",
            ApiVersion::V1beta1 => "v1beta1",
            ApiVersion::V1beta2 => "v1beta2",
            ApiVersion::V1beta3 => "v1beta3",
            ApiVersion::V1 => "v1",
        };
        write!(f, "{GROUP}/{v}")
    }
}

/// `metadata`, the parts we use or validate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawMeta {
    /// `name`.
    pub name: String,
    /// `namespace`; must be empty (both kinds are cluster-scoped).
    pub namespace: String,
    /// `uid`.
    pub uid: String,
    /// `generation`; 0 when absent (the apiserver sets 1 at creation).
    pub generation: i64,
    /// `labels`.
    pub labels: BTreeMap<String, String>,
    /// `annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// `status.conditions[].type` of either kind: all that validation looks at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawStatus {
    /// The `type` of each condition, in order.
    pub condition_types: Vec<String>,
}

/// A FlowSchema of any version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::config) struct RawFlowSchema {
    /// The version it was written in.
    pub version: ApiVersion,
    /// `metadata`.
    pub meta: RawMeta,
    /// `spec`.
    pub spec: RawFlowSchemaSpec,
    /// `status`.
    pub status: RawStatus,
}

/// `FlowSchemaSpec`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawFlowSchemaSpec {
    /// `priorityLevelConfiguration.name`.
    pub priority_level_name: String,
    /// `matchingPrecedence`; 0 when absent.
    pub matching_precedence: i32,
    /// `distinguisherMethod.type`, when `distinguisherMethod` is present.
    pub distinguisher_method: Option<String>,
    /// `rules`.
    pub rules: Vec<RawPolicyRulesWithSubjects>,
}

/// `PolicyRulesWithSubjects`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawPolicyRulesWithSubjects {
    /// `subjects`.
    pub subjects: Vec<RawSubject>,
    /// `resourceRules`.
    pub resource_rules: Vec<RawResourcePolicyRule>,
    /// `nonResourceRules`.
    pub non_resource_rules: Vec<RawNonResourcePolicyRule>,
}

/// `Subject`: a kind and up to three union members.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawSubject {
    /// `kind`.
    pub kind: String,
    /// `user.name`, when `user` is present.
    pub user: Option<String>,
    /// `group.name`, when `group` is present.
    pub group: Option<String>,
    /// `serviceAccount`, when present.
    pub service_account: Option<RawServiceAccount>,
}

/// `ServiceAccountSubject`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawServiceAccount {
    /// `namespace`.
    pub namespace: String,
    /// `name`.
    pub name: String,
}

/// `ResourcePolicyRule`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawResourcePolicyRule {
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources`.
    pub resources: Vec<String>,
    /// `clusterScope`.
    pub cluster_scope: bool,
    /// `namespaces`.
    pub namespaces: Vec<String>,
}

/// `NonResourcePolicyRule`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawNonResourcePolicyRule {
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `nonResourceURLs`.
    pub non_resource_urls: Vec<String>,
}

/// A PriorityLevelConfiguration of any version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::config) struct RawPriorityLevelConfiguration {
    /// The version it was written in.
    pub version: ApiVersion,
    /// `metadata`.
    pub meta: RawMeta,
    /// `spec`.
    pub spec: RawPriorityLevelSpec,
    /// `status`.
    pub status: RawStatus,
}

/// `PriorityLevelConfigurationSpec`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawPriorityLevelSpec {
    /// `type`.
    pub type_: String,
    /// `limited`.
    pub limited: Option<RawLimited>,
    /// `exempt`.
    pub exempt: Option<RawExempt>,
}

/// `LimitedPriorityLevelConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawLimited {
    /// `nominalConcurrencyShares` / `assuredConcurrencyShares`. Before v1 the field is not a
    /// pointer, so absent decodes as `Some(0)`; in v1 absent is `None`.
    pub shares: Option<i32>,
    /// `lendablePercent`.
    pub lendable_percent: Option<i32>,
    /// `borrowingLimitPercent`.
    pub borrowing_limit_percent: Option<i32>,
    /// `limitResponse` (a struct, not a pointer: absent means type `""`).
    pub limit_response: RawLimitResponse,
}

/// `LimitResponse`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawLimitResponse {
    /// `type`.
    pub type_: String,
    /// `queuing`.
    pub queuing: Option<RawQueuing>,
}

/// `QueuingConfiguration`; 0 when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::config) struct RawQueuing {
    /// `queues`.
    pub queues: i32,
    /// `handSize`.
    pub hand_size: i32,
    /// `queueLengthLimit`.
    pub queue_length_limit: i32,
}

/// `ExemptPriorityLevelConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::config) struct RawExempt {
    /// `nominalConcurrencyShares`.
    pub nominal_concurrency_shares: Option<i32>,
    /// `lendablePercent`.
    pub lendable_percent: Option<i32>,
}

/// A decoded object of one of the two kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::config) enum RawObject {
    /// A FlowSchema.
    FlowSchema(RawFlowSchema),
    /// A PriorityLevelConfiguration.
    PriorityLevel(RawPriorityLevelConfiguration),
}

impl RawObject {
    /// `FlowSchema` or `PriorityLevelConfiguration`.
    pub fn kind(&self) -> &'static str {
        match self {
            RawObject::FlowSchema(_) => "FlowSchema",
            RawObject::PriorityLevel(_) => "PriorityLevelConfiguration",
        }
    }

    /// The API version the object was written in.
    pub fn version(&self) -> ApiVersion {
        match self {
            RawObject::FlowSchema(fs) => fs.version,
            RawObject::PriorityLevel(pl) => pl.version,
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        match self {
            RawObject::FlowSchema(fs) => &fs.meta.name,
            RawObject::PriorityLevel(pl) => &pl.meta.name,
        }
    }
}
