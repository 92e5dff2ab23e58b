//! The classifications of the requests a replay has seen lately, for one configuration.
//!
//! [`classify`] is a pure function of the configuration's index, the user, the groups and the
//! request attributes it reads (their class, [`Derived::class`]): a request whose user, groups
//! and class were classified before reuses that classification. At most [`Classifications::CAPACITY`] are kept; the memo
//! starts over when full, and when the configuration's snapshot changes.

use std::collections::{hash_map, HashMap};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use super::attributes::Derived;
use crate::auth::Identity;
use crate::classify::{classify, Classification, KeyHasher};
use crate::fairqueue::controller::Snapshot;

/// Classifications by a hash of the attributes' class and the user; each entry keeps its key
/// and the groups, which are compared on every hit.
#[derive(Debug, Default)]
pub(super) struct Classifications {
    snapshot: Option<Arc<Snapshot>>,
    by_key: HashMap<u64, Entry, BuildHasherDefault<KeyHasher>>,
}

#[derive(Debug)]
struct Entry {
    class: u64,
    user: Box<str>,
    groups: Box<[String]>,
    classification: Classification,
}

impl Classifications {
    /// Classifications kept per configuration.
    pub(super) const CAPACITY: usize = 8192;

    /// `identity`'s request with attributes `derived`, classified against `snapshot`'s index;
    /// kept until the next call (a reference: its shared names are not counted per request).
    pub(super) fn of(
        &mut self,
        snapshot: &Arc<Snapshot>,
        identity: &Identity,
        derived: &Derived,
    ) -> &Classification {
        if !self
            .snapshot
            .as_ref()
            .is_some_and(|kept| Arc::ptr_eq(kept, snapshot))
        {
            self.by_key.clear();
            self.snapshot = Some(Arc::clone(snapshot));
        }
        let key = key(derived.class, &identity.user);
        if self.by_key.len() >= Self::CAPACITY && !self.by_key.contains_key(&key) {
            self.by_key.clear();
        }
        let new = || Entry {
            class: derived.class,
            user: identity.user.as_str().into(),
            groups: identity.groups.clone().into_boxed_slice(),
            classification: classify(snapshot.index(), identity, &derived.info),
        };
        let entry = match self.by_key.entry(key) {
            hash_map::Entry::Occupied(kept) => {
                let kept = kept.into_mut();
                if !kept.is_for(derived.class, identity) {
                    *kept = new();
                }
                kept
            }
            hash_map::Entry::Vacant(vacant) => vacant.insert(new()),
        };
        &entry.classification
    }
}

impl Entry {
    /// Whether this is the classification of `identity`'s requests of attributes class `class`.
    fn is_for(&self, class: u64, identity: &Identity) -> bool {
        self.class == class && *self.user == *identity.user && *self.groups == *identity.groups
    }
}

/// The memo's key: the class and the user. The groups are left out of the hash — a user's
/// groups are the same on every request of a trace, and hashing them cost more than the rest of
/// the lookup — but compared on every hit like the rest (a user seen with other groups replaces
/// the entry). A fast unkeyed hash is enough: the trace is the operator's own, and a collision
/// only costs a classification.
fn key(class: u64, user: &str) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, word: u64| (h.rotate_left(23) ^ word).wrapping_mul(K);
    let bytes = user.as_bytes();
    let mut h = mix(class, bytes.len() as u64);
    if bytes.len() >= 8 {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            h = mix(h, le_word(word));
        }
        if !words.remainder().is_empty() {
            // The last eight bytes, overlapping the word before: no copy of the tail.
            h = mix(h, le_word(&bytes[bytes.len() - 8..]));
        }
    } else {
        let word = bytes
            .iter()
            .rev()
            .fold(0u64, |word, &b| (word << 8) | u64::from(b));
        h = mix(h, word);
    }
    // Both ends spread: the map takes its buckets from the low bits, its tags from the high.
    let h = (h ^ (h >> 32)).wrapping_mul(K);
    h ^ (h >> 29)
}

/// Eight bytes as a little-endian word.
fn le_word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fairqueue::controller::FlowControl;
    use crate::simulate::attributes::Attributes;

    fn identity(user: &str, groups: &[&str]) -> Identity {
        Identity::authenticated(
            user.to_owned(),
            String::new(),
            groups.iter().map(|g| (*g).to_owned()).collect(),
        )
    }

    #[test]
    fn a_classification_is_reused_only_for_the_same_attributes_user_and_groups() {
        let config = crate::config::bootstrap();
        let (flow_control, _) =
            FlowControl::new(&config, 600, tokio::time::Instant::now()).expect("flow control");
        let snapshot = flow_control.snapshot();
        let mut attributes = Attributes::default();
        let mut memo = Classifications::default();
        let lease = attributes
            .of(
                &http::Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
            )
            .unwrap()
            .clone();
        let pods = attributes
            .of(&http::Method::GET, "/api/v1/namespaces/default/pods")
            .unwrap()
            .clone();
        let node = identity("system:node:n1", &["system:nodes"]);
        let cases = [
            (&node, &lease),
            (&node, &pods),
            (
                &identity("system:node:n1", &["system:authenticated"]),
                &lease,
            ),
            (&identity("alice", &["system:authenticated"]), &pods),
            (&identity("bob", &["system:authenticated"]), &pods),
        ];
        // Twice over: the second round is served from the memo, and must agree with the first.
        for _ in 0..2 {
            for (who, derived) in cases {
                let got = memo.of(&snapshot, who, derived);
                assert_eq!(*got, classify(snapshot.index(), who, &derived.info));
            }
        }
        // One entry per class and user: n1's lease with other groups took the entry's place.
        assert_eq!(memo.by_key.len(), cases.len() - 1);
        // Another object of the same class (its name is all that differs): no new entry.
        let pod = attributes
            .of(&http::Method::GET, "/api/v1/namespaces/default/pods/web-1")
            .unwrap()
            .clone();
        let other_pod = attributes
            .of(&http::Method::GET, "/api/v1/namespaces/default/pods/web-2")
            .unwrap()
            .clone();
        let first = memo.of(&snapshot, &node, &pod).clone();
        assert_eq!(*memo.of(&snapshot, &node, &other_pod), first);
        assert_eq!(memo.by_key.len(), cases.len());
        assert_eq!(
            &*memo.of(&snapshot, &node, &lease).flow_schema.name,
            "system-node-high"
        );
        assert_eq!(
            &*memo
                .of(
                    &snapshot,
                    &identity("system:node:n1", &["system:authenticated"]),
                    &lease
                )
                .flow_schema
                .name,
            "global-default"
        );
        // Another snapshot (a configuration swapped in): nothing is kept from the old one.
        let (other, _) =
            FlowControl::new(&config, 600, tokio::time::Instant::now()).expect("flow control");
        memo.of(&other.snapshot(), &node, &lease);
        assert_eq!(memo.by_key.len(), 1);
    }
}
