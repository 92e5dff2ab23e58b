//! kube-apiserver's `--tls-min-version` and `--tls-cipher-suites` names, mapped to rustls.
//!
//! Mirrors `k8s.io/component-base/cli/flag/ciphersuites_flag.go`. rustls implements only AEAD suites
//! with forward secrecy, so Go's CBC, RC4, 3DES and RSA-key-exchange names are refused with a
//! clear error rather than silently dropped. As in Go, the list restricts TLS 1.2 only: TLS 1.3
//! suites are always enabled and naming them is accepted and changes nothing.

use std::fmt;

use rustls::crypto::ring::cipher_suite as ring_suites;
use rustls::SupportedCipherSuite;

/// Why a TLS flag value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsFlagError {
    /// A version kube-apiserver knows but rustls does not implement.
    #[error("{0} is not supported: the proxy implements TLS 1.2 and 1.3 only (VersionTLS12, VersionTLS13)")]
    UnsupportedVersion(String),
    /// Not a version name at all.
    #[error("unknown TLS version {0:?}: use VersionTLS12 or VersionTLS13")]
    UnknownVersion(String),
    /// A cipher suite kube-apiserver accepts but rustls does not implement.
    #[error("cipher suite {0} is not supported: the proxy implements only ECDHE AEAD suites (no CBC, RC4, 3DES or RSA key exchange); supported: {list}", list = TlsCipherSuite::names())]
    UnsupportedCipherSuite(String),
    /// Not a cipher suite name at all.
    #[error("unknown cipher suite {0:?}; supported: {list}", list = TlsCipherSuite::names())]
    UnknownCipherSuite(String),
}

/// `--tls-min-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMinVersion {
    /// TLS 1.2 and 1.3.
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

impl TlsMinVersion {
    /// Parses Go's constant names, as kube-apiserver spells them.
    pub fn parse(value: &str) -> Result<Self, TlsFlagError> {
        match value {
            "VersionTLS12" => Ok(Self::Tls12),
            "VersionTLS13" => Ok(Self::Tls13),
            "VersionTLS10" | "VersionTLS11" => {
                Err(TlsFlagError::UnsupportedVersion(value.to_owned()))
            }
            _ => Err(TlsFlagError::UnknownVersion(value.to_owned())),
        }
    }

    /// The protocol versions to enable.
    pub fn protocol_versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static TLS12_AND_UP: [&rustls::SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static TLS13_ONLY: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self {
            Self::Tls12 => &TLS12_AND_UP,
            Self::Tls13 => &TLS13_ONLY,
        }
    }
}

impl fmt::Display for TlsMinVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tls12 => "VersionTLS12",
            Self::Tls13 => "VersionTLS13",
        })
    }
}

/// One `--tls-cipher-suites` entry that rustls implements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TlsCipherSuite {
    name: &'static str,
    suite: SupportedCipherSuite,
}

/// Go's names (with its aliases) and the rustls suite for each.
const SUITES: &[(&str, SupportedCipherSuite)] = &[
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ring_suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        ring_suites::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        ring_suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        ring_suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ring_suites::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        ring_suites::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        ring_suites::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ring_suites::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_AES_128_GCM_SHA256",
        ring_suites::TLS13_AES_128_GCM_SHA256,
    ),
    (
        "TLS_AES_256_GCM_SHA384",
        ring_suites::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        ring_suites::TLS13_CHACHA20_POLY1305_SHA256,
    ),
];

/// Names Go's `ciphersuites_flag.go` accepts that rustls does not implement.
const GO_ONLY_SUITES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

impl TlsCipherSuite {
    /// Parses one IANA-style name as kube-apiserver takes it.
    pub fn parse(value: &str) -> Result<Self, TlsFlagError> {
        let value = value.trim();
        if let Some((name, suite)) = SUITES.iter().find(|(name, _)| *name == value) {
            return Ok(Self {
                name,
                suite: *suite,
            });
        }
        if GO_ONLY_SUITES.contains(&value) {
            return Err(TlsFlagError::UnsupportedCipherSuite(value.to_owned()));
        }
        Err(TlsFlagError::UnknownCipherSuite(value.to_owned()))
    }

    /// The name as given on the command line.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The rustls suite.
    pub fn suite(&self) -> SupportedCipherSuite {
        self.suite
    }

    /// Whether this is a TLS 1.3 suite (always enabled; naming it changes nothing).
    pub fn is_tls13(&self) -> bool {
        self.suite.tls13().is_some()
    }

    /// Every accepted name, comma-separated, for error messages.
    fn names() -> String {
        SUITES
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for TlsCipherSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The suites to enable for a `--tls-cipher-suites` list, in the server's order of preference: all
/// TLS 1.3 suites, then the named TLS 1.2 suites (every one when the list is empty). A list naming
/// only TLS 1.3 suites leaves TLS 1.2 without suites, as in Go.
///
/// The handshake picks by this order, not the client's (`ignore_client_order`), as Go's
/// `crypto/tls` server does since Go 1.17, whose order with AES hardware is AES-128-GCM, then
/// AES-256-GCM, then ChaCha20-Poly1305, for both versions; like Go, the order the flag lists the
/// suites in is ignored. (Go also moves ChaCha20 first for a client that lists it first, a sign
/// that it lacks AES hardware; rustls has no such hook, so such a client gets AES-GCM here.)
pub fn enabled_suites(named: &[TlsCipherSuite]) -> Vec<SupportedCipherSuite> {
    let mut tls12: Vec<SupportedCipherSuite> = if named.is_empty() {
        rustls::crypto::ring::ALL_CIPHER_SUITES
            .iter()
            .copied()
            .filter(|s| s.tls13().is_none())
            .collect()
    } else {
        named
            .iter()
            .filter(|s| !s.is_tls13())
            .map(|s| s.suite)
            .collect()
    };
    tls12.sort_by_key(|s| preference(*s));
    let mut tls13: Vec<SupportedCipherSuite> = SUITES
        .iter()
        .map(|(_, s)| *s)
        .filter(|s| s.tls13().is_some())
        .collect();
    tls13.sort_by_key(|s| preference(*s));
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    for suite in tls13.into_iter().chain(tls12) {
        if !out.contains(&suite) {
            out.push(suite);
        }
    }
    out
}

/// Go's rank of a suite's AEAD (`cipherSuitesPreferenceOrder` with AES hardware): AES-128-GCM is
/// as safe as AES-256-GCM against every known attack and takes fewer rounds per block.
fn preference(suite: SupportedCipherSuite) -> u8 {
    use rustls::CipherSuite as C;
    match suite.suite() {
        C::TLS13_AES_128_GCM_SHA256
        | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
        C::TLS13_AES_256_GCM_SHA384
        | C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 1,
        _ => 2,
    }
}
