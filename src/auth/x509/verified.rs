//! Chains that verified recently, so the requests of one keep-alive connection (which present
//! the same chain) pay for signature verification once, not per request.
//!
//! The apiserver verifies on every request; the answer is the same here because an entry is
//! trusted only for the exact chain bytes, only until the earliest `notAfter` in the chain, and
//! at most [`VERIFIED_TTL`]. Failures are not remembered.

use std::collections::HashMap;
use std::sync::Mutex;

use rustls_pki_types::{CertificateDer, UnixTime};
use sha2::{Digest, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

/// How long a verified chain is remembered at most, in seconds.
pub(crate) const VERIFIED_TTL: u64 = 60;

/// Most chains remembered per CA bundle; when full, expired entries go, then all of them.
const CAPACITY: usize = 4096;

/// Remembered verifications of one CA bundle.
#[derive(Default)]
pub(crate) struct VerifiedChains {
    // SHA-256 of the length-prefixed chain → last second (exclusive) it may be trusted.
    entries: Mutex<HashMap<[u8; 32], u64>>,
}

impl VerifiedChains {
    /// Whether `chain` verified earlier and may still be trusted at `now`.
    pub(crate) fn contains(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> bool {
        let key = chain_key(chain);
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .get(&key)
            .is_some_and(|until| now.as_secs() < *until)
    }

    /// Remembers that `chain` verified at `now`.
    pub(crate) fn insert(&self, chain: &[CertificateDer<'_>], now: UnixTime) {
        let Some(not_after) = earliest_not_after(chain) else {
            return;
        };
        let until = not_after.min(now.as_secs().saturating_add(VERIFIED_TTL));
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= CAPACITY {
            entries.retain(|_, u| now.as_secs() < *u);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(chain_key(chain), until);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or_default()
    }
}

fn chain_key(chain: &[CertificateDer<'_>]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for cert in chain {
        hash.update((cert.len() as u64).to_be_bytes());
        hash.update(cert.as_ref());
    }
    hash.finalize().into()
}

// The earliest `notAfter` of the chain, in Unix seconds; `None` if a certificate is unreadable.
fn earliest_not_after(chain: &[CertificateDer<'_>]) -> Option<u64> {
    chain
        .iter()
        .map(|der| {
            let (_, cert) = X509Certificate::from_der(der).ok()?;
            u64::try_from(cert.validity().not_after.timestamp()).ok()
        })
        .try_fold(u64::MAX, |min, t| t.map(|t| min.min(t)))
}
