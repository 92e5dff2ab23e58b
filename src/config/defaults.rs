//! Per-version defaulting of raw objects, applied before validation.
//!
//! Mirrors `pkg/apis/flowcontrol/{v1,v1beta1,v1beta2,v1beta3}/defaults.go` (v1alpha1 had v1beta1's) and the v1beta3
//! conversion that drops the preserve-zero annotation. Defaulting only fills structs that exist:
//! a missing `limited`, `queuing` or `exempt` section is not created.

use super::raw::*;

/// `matchingPrecedence` of a FlowSchema that sets none.
pub(in crate::config) const DEFAULT_MATCHING_PRECEDENCE: i32 = 1000;
/// Concurrency shares of a limited level that sets none.
pub(in crate::config) const DEFAULT_CONCURRENCY_SHARES: i32 = 30;
/// `queuing.queues` default.
pub(in crate::config) const DEFAULT_QUEUES: i32 = 64;
/// `queuing.handSize` default.
pub(in crate::config) const DEFAULT_HAND_SIZE: i32 = 8;
/// `queuing.queueLengthLimit` default.
pub(in crate::config) const DEFAULT_QUEUE_LENGTH_LIMIT: i32 = 50;

/// Applies the defaults of any version to a FlowSchema (they are the same in all five).
pub(in crate::config) fn default_flow_schema(fs: &mut RawFlowSchema) {
    if fs.spec.matching_precedence == 0 {
        fs.spec.matching_precedence = DEFAULT_MATCHING_PRECEDENCE;
    }
}

/// Applies the defaults of the object's version to a PriorityLevelConfiguration.
///
/// Shares: v1 defaults only an absent value (an explicit 0 is kept); v1beta1/v1beta2 default 0;
/// v1beta3 defaults 0 unless the preserve-zero annotation is present, and then removes that
/// annotation as its conversion to the internal version does.
pub(in crate::config) fn default_priority_level(pl: &mut RawPriorityLevelConfiguration) {
    let preserve_zero = pl.version == ApiVersion::V1beta3
        && pl
            .meta
            .annotations
            .remove(PRESERVE_ZERO_ANNOTATION)
            .is_some();
    if let Some(limited) = &mut pl.spec.limited {
        limited.shares = match (pl.version, limited.shares) {
            (ApiVersion::V1, None) => Some(DEFAULT_CONCURRENCY_SHARES),
            (ApiVersion::V1, shares) => shares,
            (_, Some(0) | None) if !preserve_zero => Some(DEFAULT_CONCURRENCY_SHARES),
            (_, shares) => Some(shares.unwrap_or(0)),
        };
        limited.lendable_percent.get_or_insert(0);
        if let Some(q) = &mut limited.limit_response.queuing {
            default_queuing(q);
        }
    }
    if let Some(exempt) = &mut pl.spec.exempt {
        exempt.nominal_concurrency_shares.get_or_insert(0);
        exempt.lendable_percent.get_or_insert(0);
    }
}

fn default_queuing(q: &mut RawQueuing) {
    if q.hand_size == 0 {
        q.hand_size = DEFAULT_HAND_SIZE;
    }
    if q.queues == 0 {
        q.queues = DEFAULT_QUEUES;
    }
    if q.queue_length_limit == 0 {
        q.queue_length_limit = DEFAULT_QUEUE_LENGTH_LIMIT;
    }
}
