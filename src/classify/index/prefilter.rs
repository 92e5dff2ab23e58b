//! A cheap, allocation-free test that rules out most rules before the exact request check.
//!
//! Every list a rule compares a request value against (verbs, API groups, `resource[/sub]`,
//! namespaces) is summarised as a 64-bit mask of the hash buckets of its entries (all bits for a
//! `["*"]` list). A request hashes each of its values to one bit; a rule whose mask lacks that bit
//! cannot match and is skipped. A set bit proves nothing: the exact check in `rule.rs` decides.

use std::hash::{BuildHasherDefault, Hasher};

use crate::config::{PolicyRulesWithSubjects, ResourcePolicyRule};
use crate::request_info::RequestInfo;

use super::super::rule::WILDCARD;

/// Every bit: the mask of a wildcard list.
const ALL: u64 = u64::MAX;

/// The masks of one `spec.rules[]` entry: the union over its resource or non-resource rules.
/// A kind of request the rule has no entries for gets empty masks and is always skipped.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Prefilter {
    verbs: u64,
    api_groups: u64,
    resources: u64,
    /// Namespaces, plus the bit of `""` when some entry has `clusterScope`.
    namespaces: u64,
    non_resource_verbs: u64,
}

impl Prefilter {
    pub(super) fn new(rule: &PolicyRulesWithSubjects) -> Prefilter {
        let mut filter = Prefilter::default();
        for r in &rule.resource_rules {
            filter.add_resource_rule(r);
        }
        for r in &rule.non_resource_rules {
            filter.non_resource_verbs |= mask(&r.verbs);
        }
        filter
    }

    fn add_resource_rule(&mut self, rule: &ResourcePolicyRule) {
        self.verbs |= mask(&rule.verbs);
        self.api_groups |= mask(&rule.api_groups);
        self.resources |= mask(&rule.resources);
        self.namespaces |= mask(&rule.namespaces);
        if rule.cluster_scope {
            self.namespaces |= bit_of(&[""]);
        }
    }

    /// False when the rule certainly does not match the request.
    pub(super) fn admits(&self, request: &RequestBits) -> bool {
        match request {
            RequestBits::Resource {
                verb,
                api_group,
                resource,
                namespace,
            } => {
                self.verbs & verb != 0
                    && self.api_groups & api_group != 0
                    && self.resources & resource != 0
                    && self.namespaces & namespace != 0
            }
            RequestBits::NonResource { verb } => self.non_resource_verbs & verb != 0,
        }
    }
}

/// The hash bits of a request's values, computed once per classification.
#[derive(Debug, Clone, Copy)]
pub(super) enum RequestBits {
    Resource {
        verb: u64,
        api_group: u64,
        resource: u64,
        namespace: u64,
    },
    NonResource {
        verb: u64,
    },
}

impl RequestBits {
    pub(super) fn new(info: &RequestInfo) -> RequestBits {
        if !info.is_resource_request {
            return RequestBits::NonResource {
                verb: bit_of(&[&info.verb]),
            };
        }
        // `resource/subresource` is hashed piecewise: the same bit as the joined string.
        let resource = if info.subresource.is_empty() {
            bit_of(&[&info.resource])
        } else {
            bit_of(&[&info.resource, "/", &info.subresource])
        };
        RequestBits::Resource {
            verb: bit_of(&[&info.verb]),
            api_group: bit_of(&[&info.api_group]),
            resource,
            namespace: bit_of(&[&info.namespace]),
        }
    }
}

/// The mask of a list compared with `containsString`: all bits for exactly `["*"]`.
fn mask(list: &[String]) -> u64 {
    match list {
        [only] if only == WILDCARD => ALL,
        _ => list.iter().fold(0, |m, entry| m | bit_of(&[entry])),
    }
}

/// The bit of the concatenation of `pieces`.
fn bit_of(pieces: &[&str]) -> u64 {
    let mut hasher = Fnv1a::default();
    for piece in pieces {
        hasher.write(piece.as_bytes());
    }
    1 << (hasher.finish() % 64)
}

/// FNV-1a, 64 bits: fast on the short strings of requests. Used for the prefilter and for the
/// subject maps, whose keys come from the configuration; a request's values only probe them, so
/// chosen inputs cannot build up collisions.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        // Fold the high bits in: FNV's low bits mix poorly and the mask uses only six.
        self.0 ^ (self.0 >> 32)
    }
}

/// The hasher of the subject maps.
pub(super) type FnvBuildHasher = BuildHasherDefault<Fnv1a>;
