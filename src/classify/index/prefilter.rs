//! A cheap, allocation-free test that rules out most rules before the exact request check.
//!
//! Every list a rule compares a request value against (verbs, API groups, `resource[/sub]`,
//! namespaces) is summarised as a 64-bit mask of the hash buckets of its entries (all bits for a
//! `["*"]` list). A request hashes each of its values to one bit; a rule whose mask lacks that bit
//! cannot match and is skipped. A set bit proves nothing: the exact check in `rule.rs` decides.
//! Resources are bucketed by the part before the first `/`, so `pods/status` and a request for
//! `pods` + `status` share a bucket without joining strings. Non-resource paths are bucketed by
//! their first segment, which every URL entry other than `*` and `/` pins down.

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
    non_resource_paths: u64,
}

impl Prefilter {
    pub(super) fn new(rule: &PolicyRulesWithSubjects) -> Prefilter {
        let mut filter = Prefilter::default();
        for r in &rule.resource_rules {
            filter.add_resource_rule(r);
        }
        for r in &rule.non_resource_rules {
            filter.non_resource_verbs |= mask(&r.verbs);
            filter.non_resource_paths |= r
                .non_resource_urls
                .iter()
                .fold(0, |m, entry| m | url_mask(entry));
        }
        filter
    }

    fn add_resource_rule(&mut self, rule: &ResourcePolicyRule) {
        self.verbs |= mask(&rule.verbs);
        self.api_groups |= mask(&rule.api_groups);
        self.resources |= match rule.resources.as_slice() {
            [only] if only == WILDCARD => ALL,
            list => list.iter().fold(0, |m, entry| m | bit_of(head(entry))),
        };
        self.namespaces |= mask(&rule.namespaces);
        if rule.cluster_scope {
            self.namespaces |= bit_of("");
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
            RequestBits::NonResource { verb, path } => {
                self.non_resource_verbs & verb != 0 && self.non_resource_paths & path != 0
            }
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
        path: u64,
    },
}

impl RequestBits {
    pub(super) fn new(info: &RequestInfo) -> RequestBits {
        if !info.is_resource_request {
            return RequestBits::NonResource {
                verb: bit_of(&info.verb),
                path: bit_of(first_segment(&info.path)),
            };
        }
        RequestBits::Resource {
            verb: bit_of(&info.verb),
            api_group: bit_of(&info.api_group),
            resource: bit_of(head(&info.resource)),
            namespace: bit_of(&info.namespace),
        }
    }
}

/// The mask of a list compared with `containsString`: all bits for exactly `["*"]`.
fn mask(list: &[String]) -> u64 {
    match list {
        [only] if only == WILDCARD => ALL,
        _ => list.iter().fold(0, |m, entry| m | bit_of(entry)),
    }
}

/// The paths a `nonResourceURLs` entry can match (see `rule::non_resource_url_matches`): a path
/// equal to it shares its first segment; a path under its prefix shares the prefix's first
/// segment — the prefix always ends in `/` (the reference appends one), so only `/` leaves the
/// segment open.
fn url_mask(entry: &str) -> u64 {
    if entry == WILDCARD {
        return ALL;
    }
    let prefix = entry.strip_suffix('*').unwrap_or(entry);
    let prefix = prefix.strip_prefix('/').unwrap_or(prefix);
    let segment = match prefix.split_once('/') {
        Some((segment, _)) => segment,
        None if prefix.is_empty() => return ALL,
        None => prefix,
    };
    bit_of(first_segment(entry)) | bit_of(segment)
}

/// A path's first segment: after one leading `/`, up to the next `/`.
fn first_segment(path: &str) -> &str {
    let path = path.strip_prefix('/').unwrap_or(path);
    path.split_once('/').map_or(path, |(segment, _)| segment)
}

/// The part of a resource before its first `/`: `pods` for `pods/status`.
fn head(resource: &str) -> &str {
    resource.split_once('/').map_or(resource, |(head, _)| head)
}

/// The bucket bit of a string: the top six bits of its hash.
fn bit_of(value: &str) -> u64 {
    let mut hasher = WordHasher::default();
    hasher.write(value.as_bytes());
    1 << (hasher.finish() >> 58)
}

/// A multiply-rotate hash over 8-byte words (FxHash's scheme), much faster than SipHash on the
/// short strings of requests. Used for the prefilter and for the subject maps, whose keys come
/// from the configuration: a request's values only probe them, so chosen inputs cannot build up
/// collisions.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WordHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        // The length keeps `a` and `a\0` apart.
        self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        // One more multiply spreads the last word into the top bits that buckets use.
        (self.0 ^ (self.0 >> 29)).wrapping_mul(SEED)
    }
}

/// The hasher of the subject maps (and of `simulate`'s recorder, keyed by configured names).
pub(crate) type WordBuildHasher = BuildHasherDefault<WordHasher>;
