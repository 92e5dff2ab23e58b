//! Cache keys for tokens: HMAC-SHA256 under a random per-process key, so the cache never holds
//! a token and its keys cannot be precomputed. Mirrors `keyFunc` in
//! `pkg/authentication/token/cache/cached_token_authenticator.go` (length-prefixed token, then
//! the audience count and each length-prefixed audience).

use sha2::{Digest, Sha256};

const BLOCK: usize = 64;

/// A token's cache key: 32 bytes of keyed hash.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct CacheKey([u8; 32]);

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CacheKey({:02x}{:02x}..)", self.0[0], self.0[1])
    }
}

/// Derives [`CacheKey`]s with one secret key.
pub(crate) struct KeyHasher {
    key: [u8; 32],
}

impl KeyHasher {
    /// A hasher with a fresh random key from the ring provider's CSPRNG.
    pub(crate) fn random() -> Result<Self, String> {
        let mut key = [0u8; 32];
        rustls::crypto::ring::default_provider()
            .secure_random
            .fill(&mut key)
            .map_err(|e| format!("{e:?}"))?;
        Ok(KeyHasher { key })
    }

    #[cfg(test)]
    pub(crate) fn with_key(key: [u8; 32]) -> Self {
        KeyHasher { key }
    }

    /// The key for arbitrary bytes (a whole review body, say).
    pub(crate) fn key_bytes(&self, bytes: &[u8]) -> CacheKey {
        CacheKey(hmac_sha256(&self.key, bytes))
    }

    /// The key for `token` as reviewed for `audiences`.
    pub(crate) fn key(&self, token: &str, audiences: &[String]) -> CacheKey {
        let mut message = Vec::with_capacity(8 + token.len());
        length_prefixed(&mut message, token.as_bytes());
        message.extend_from_slice(&len32(audiences.len()));
        for aud in audiences {
            length_prefixed(&mut message, aud.as_bytes());
        }
        CacheKey(hmac_sha256(&self.key, &message))
    }
}

fn len32(len: usize) -> [u8; 4] {
    // Go writes uint32(len): lengths beyond 4 GiB wrap there too; a header cannot be that long.
    (len as u32).to_be_bytes()
}

fn length_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&len32(bytes.len()));
    out.extend_from_slice(bytes);
}

/// HMAC (RFC 2104) over SHA-256 for a key no longer than one block.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut ipad = [0x36u8; BLOCK];
    let mut opad = [0x5cu8; BLOCK];
    for (i, k) in key.iter().enumerate() {
        ipad[i] ^= k;
        opad[i] ^= k;
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc4231_test_case_1() {
        // RFC 4231 case 1 with the 20-byte key zero-padded to 32 bytes is the same HMAC
        // (keys shorter than a block are zero-padded by definition).
        let mut key = [0u8; 32];
        key[..20].copy_from_slice(&[0x0b; 20]);
        let mac = hmac_sha256(&key, b"Hi There");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    #[test]
    fn keys_depend_on_token_audiences_and_secret() {
        let a = KeyHasher::with_key([1; 32]);
        let b = KeyHasher::with_key([2; 32]);
        let none: Vec<String> = Vec::new();
        assert_eq!(a.key("tok", &none), a.key("tok", &none));
        assert_ne!(a.key("tok", &none), a.key("tok2", &none));
        assert_ne!(a.key("tok", &none), b.key("tok", &none));
        assert_ne!(a.key("tok", &none), a.key("tok", &["api".to_string()]));
        // Length prefixes keep "xy"+"z" apart from "x"+"yz".
        assert_ne!(
            a.key("xy", &["z".to_string()]),
            a.key("x", &["yz".to_string()])
        );
    }

    #[test]
    fn debug_shows_only_a_prefix_of_the_hash() {
        let key = KeyHasher::with_key([0; 32]).key("secret", &[]);
        assert!(format!("{key:?}").starts_with("CacheKey("));
        assert!(!format!("{key:?}").contains("secret"));
    }
}
