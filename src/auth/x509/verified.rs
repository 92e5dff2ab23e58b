//! Chains verified recently against one CA bundle, so that the requests of one keep-alive
//! connection (which present the same chain) pay for verification, certificate parsing and the
//! fingerprint once, not per request.
//!
//! The apiserver verifies and parses on every request; the answer is the same here because an
//! entry is used only for the exact chain bytes (compared in full) and at most
//! [`VERIFIED_TTL`]: a success until the earliest `notAfter` in the chain, and of the failures
//! only "unknown issuer", which time cannot change (the chain does not lead to this bundle's
//! CAs; a reloaded bundle starts a new cache). That failure is the common one: a server with
//! both `--requestheader-client-ca-file` and `--client-ca-file` checks every client
//! certificate against the front-proxy CA first, as the apiserver does, and that check fails
//! for every caller but the front proxy. Other failures (expired, not yet valid, wrong usage)
//! are not remembered.
//!
//! Entries are found by a keyed hash of a sample of each certificate (its length and last
//! bytes, part of its signature) rather than a digest of the whole chain: the full comparison
//! makes a collision a miss, never a wrong answer, and the hash key is random per process. Each
//! entry keeps a copy of its chain for that comparison, so the cache is bounded in bytes as well as
//! in entries, and a chain padded past [`MAX_CHAIN_BYTES`] is verified every time instead. Those
//! bounds matter because the handshake verifies no chain: any client can present any number of
//! self-made ones, and at worst they push the verified chains out (which are then verified again).

use parking_lot::Mutex;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use rustls_pki_types::{CertificateDer, UnixTime};
use sha2::{Digest, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

use super::{hex, CertError, Subject};

/// How long a verified chain is remembered at most, in seconds.
pub(crate) const VERIFIED_TTL: u64 = 60;

/// Most chains remembered per CA bundle, and most bytes of them; when either is reached, expired
/// entries go, then all of them.
const CAPACITY: usize = 4096;
const CAPACITY_BYTES: usize = 8 << 20;

/// Chains longer than this (a client can append certificates it does not need) are verified
/// every time rather than kept. Real chains are a few KiB.
const MAX_CHAIN_BYTES: usize = 16 << 10;

/// How many trailing bytes of each certificate the lookup hash reads.
const SAMPLE_BYTES: usize = 32;

/// What the authenticators need from a verified chain's leaf, read once at verification.
#[derive(Debug)]
pub(crate) struct VerifiedLeaf {
    /// The leaf's subject, or why it could not be read.
    pub(crate) subject: Result<Subject, CertError>,
    /// Lower-case hex SHA-256 of the leaf (the apiserver's credential ID).
    pub(crate) fingerprint: String,
}

impl VerifiedLeaf {
    pub(crate) fn read(leaf: &CertificateDer<'_>) -> Self {
        VerifiedLeaf {
            subject: Subject::parse(leaf),
            fingerprint: hex(&Sha256::digest(leaf.as_ref())),
        }
    }
}

/// Remembered verifications of one CA bundle.
#[derive(Default)]
pub(crate) struct VerifiedChains {
    hasher: RandomState,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    // Sample hash → the chains with that hash (almost always one).
    by_sample: HashMap<u64, Vec<Entry>>,
    len: usize,
    bytes: usize,
}

struct Entry {
    chain: Vec<CertificateDer<'static>>,
    /// The last second (exclusive) it may be used.
    until: u64,
    outcome: Outcome,
}

/// How a remembered verification ended.
pub(crate) type Outcome = Result<Arc<VerifiedLeaf>, CertError>;

impl VerifiedChains {
    /// How verifying `chain` ended earlier, if that may still be used at `now`.
    pub(crate) fn get(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> Option<Outcome> {
        let key = self.sample_hash(chain);
        let entries = self.entries.lock();
        entries
            .by_sample
            .get(&key)?
            .iter()
            .find(|e| e.chain.as_slice() == chain)
            .filter(|e| now.as_secs() < e.until)
            .map(|e| e.outcome.clone())
    }

    /// Remembers that `chain` verified at `now`, with its leaf.
    pub(crate) fn insert_verified(
        &self,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
        leaf: Arc<VerifiedLeaf>,
    ) {
        let Some(not_after) = earliest_not_after(chain) else {
            return;
        };
        let until = not_after.min(now.as_secs().saturating_add(VERIFIED_TTL));
        self.insert(chain, now.as_secs(), until, Ok(leaf));
    }

    /// Remembers that `chain` leads to none of the bundle's CAs (`error` says so).
    pub(crate) fn insert_unknown_issuer(
        &self,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
        error: CertError,
    ) {
        let now = now.as_secs();
        self.insert(chain, now, now.saturating_add(VERIFIED_TTL), Err(error));
    }

    fn insert(&self, chain: &[CertificateDer<'_>], now: u64, until: u64, outcome: Outcome) {
        let size = chain_bytes(chain);
        if size > MAX_CHAIN_BYTES {
            return;
        }
        let key = self.sample_hash(chain);
        let mut entries = self.entries.lock();
        let full = |e: &Entries| e.len >= CAPACITY || e.bytes + size > CAPACITY_BYTES;
        if full(&entries) {
            entries.retain_trusted(now);
            if full(&entries) {
                *entries = Entries::default();
            }
        }
        let entries = &mut *entries;
        let bucket = entries.by_sample.entry(key).or_default();
        if let Some(stale) = bucket.iter().position(|e| e.chain.as_slice() == chain) {
            bucket.swap_remove(stale);
            entries.len -= 1;
            entries.bytes -= size;
        }
        bucket.push(Entry {
            chain: chain.iter().map(|c| c.clone().into_owned()).collect(),
            until,
            outcome,
        });
        entries.len += 1;
        entries.bytes += size;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len
    }

    fn sample_hash(&self, chain: &[CertificateDer<'_>]) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        for cert in chain {
            let der = cert.as_ref();
            der.len().hash(&mut hasher);
            der[der.len().saturating_sub(SAMPLE_BYTES)..].hash(&mut hasher);
        }
        hasher.finish()
    }
}

impl Entries {
    fn retain_trusted(&mut self, now: u64) {
        let (mut len, mut bytes) = (0, 0);
        self.by_sample.retain(|_, bucket| {
            bucket.retain(|e| now < e.until);
            len += bucket.len();
            bytes += bucket.iter().map(|e| chain_bytes(&e.chain)).sum::<usize>();
            !bucket.is_empty()
        });
        self.len = len;
        self.bytes = bytes;
    }
}

fn chain_bytes(chain: &[CertificateDer<'_>]) -> usize {
    chain.iter().map(|c| c.as_ref().len()).sum()
}

/// The earliest `notAfter` of `chain`, in Unix seconds; `None` if a certificate is unreadable
/// (`u64::MAX` for an empty chain).
pub fn earliest_not_after(chain: &[CertificateDer<'_>]) -> Option<u64> {
    chain
        .iter()
        .map(|der| {
            let (_, cert) = X509Certificate::from_der(der).ok()?;
            u64::try_from(cert.validity().not_after.timestamp()).ok()
        })
        .try_fold(u64::MAX, |min, t| t.map(|t| min.min(t)))
}
