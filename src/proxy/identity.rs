//! The caller's identity as it may travel upstream: checked once, right after authentication and
//! before flow control, into a [`ForwardableIdentity`] — the only thing the forwarder accepts.
//!
//! In `impersonate` and `requestheader` modes the upstream learns who the caller is from headers
//! alone (`Impersonate-*`, `X-Remote-*`), and it runs the request as the proxy itself when they are
//! missing. An identity the headers cannot carry exactly is therefore refused, whole: never
//! forwarded in part, never with a value the upstream would read differently.
//!
//! What the upstream reads, and so what is refused (`reason` label of
//! `apf_proxy_identity_refused_total`):
//!
//! - `empty`: an empty user name (the apiserver's impersonation filter sees no `Impersonate-User`
//!   and serves the request as the proxy; the requestheader authenticator skips empty values),
//!   an empty group, extra key or extra value (an empty header value is never sent).
//! - `control_character`: any control character (C0, DEL, C1) in a user name, UID, group, extra
//!   key or extra value. HTTP/1.1 and HTTP/2 refuse CR, LF and NUL; the others would pass some
//!   parsers and not others. They cannot come from an identity a person chose.
//! - `surrounding_whitespace`: a value that starts or ends with a space (or any Unicode
//!   whitespace). Go's and hyper's HTTP/1.1 parsers trim it (`"system:monitoring "` becomes
//!   `system:monitoring`, another subject), and exec, attach and port-forward always go over
//!   HTTP/1.1, even to an HTTP/2 apiserver.
//! - `uppercase_extra_key`: an extra key with ASCII upper-case letters. Header names are
//!   case-insensitive and the apiserver lower-cases the key before unescaping it
//!   (`unescapeExtraKey(strings.ToLower(...))` in `impersonation.go` and `requestheader.go`); the
//!   key would arrive changed. (Non-ASCII letters are percent-encoded, so they survive.)
//! - `unencodable`: an extra key so long that its header name cannot be made.
//!
//! Non-ASCII text (UTF-8 user names, groups, extra values) travels unchanged: it is sent as its
//! UTF-8 bytes (`obs-text`), as client-go sends it (Go's `httpguts.ValidHeaderFieldValue` accepts
//! every byte from 0x80, and the apiserver reads the header back as the same Go string). Extra
//! keys are percent-encoded as client-go's `headerKeyEscape` does, so any key without upper-case
//! letters travels too.
//!
//! The answer is 401 `Unauthorized`, as the apiserver's authentication filter answers when an
//! authenticator fails: the proxy cannot vouch for the caller to the upstream, so the caller is
//! not authenticated there. (403 would say the caller is known and not allowed, and it is not
//! known as anyone the upstream could name.)
//!
//! In `passthrough` mode no identity travels: the caller's own bearer token goes upstream, which
//! authenticates it itself. So the caller is classified as the identity of that token
//! ([`authenticate`]): a client certificate or front-proxy headers, which end at the proxy, never
//! make the identity, and a caller whose only credential is one of those is refused with 401
//! (the upstream would serve it as `system:anonymous`). Nothing else is refused there (the
//! apiserver would serve such a caller too).

use std::fmt;

use http::HeaderMap;
use rustls_pki_types::CertificateDer;

use crate::auth::{AuthError, Authenticated, Authenticator, Identity};

/// Authenticates a request as `mode` lets its identity reach the upstream: in `passthrough`
/// mode by the credential that travels ([`Authenticator::authenticate_forwarded`]), so that the
/// request is classified as the identity the upstream runs it as; in the other modes by every
/// credential, in the apiserver's order, since the proxy itself tells the upstream who it is.
pub async fn authenticate(
    authenticator: &Authenticator,
    mode: IdentityForwarding,
    headers: &HeaderMap,
    peer_certificates: Option<&[CertificateDer<'static>]>,
) -> Result<Authenticated, AuthError> {
    match mode {
        IdentityForwarding::Passthrough => {
            authenticator
                .authenticate_forwarded(headers, peer_certificates)
                .await
        }
        IdentityForwarding::Impersonate | IdentityForwarding::Requestheader => {
            authenticator.authenticate(headers, peer_certificates).await
        }
    }
}

/// Why an identity cannot travel upstream unchanged (a bounded metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// An empty user name, group, extra key or extra value.
    Empty,
    /// A control character.
    ControlCharacter,
    /// Leading or trailing whitespace.
    SurroundingWhitespace,
    /// Upper-case letters in an extra key (the apiserver lower-cases it).
    UppercaseExtraKey,
    /// An extra key too long for a header name once percent-encoded.
    Unencodable,
}

impl RefusalReason {
    /// Every reason, in a fixed order (for tests and documentation).
    pub const ALL: [RefusalReason; 5] = [
        RefusalReason::Empty,
        RefusalReason::ControlCharacter,
        RefusalReason::SurroundingWhitespace,
        RefusalReason::UppercaseExtraKey,
        RefusalReason::Unencodable,
    ];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Empty => "empty",
            RefusalReason::ControlCharacter => "control_character",
            RefusalReason::SurroundingWhitespace => "surrounding_whitespace",
            RefusalReason::UppercaseExtraKey => "uppercase_extra_key",
            RefusalReason::Unencodable => "unencodable",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            RefusalReason::Empty => "is empty",
            RefusalReason::ControlCharacter => "contains a control character",
            RefusalReason::SurroundingWhitespace => "has leading or trailing whitespace",
            RefusalReason::UppercaseExtraKey => {
                "contains upper-case letters, which the apiserver lower-cases"
            }
            RefusalReason::Unencodable => "cannot be encoded as a header",
        }
    }
}

/// An identity that cannot be forwarded unchanged: which part, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the authenticated identity cannot be forwarded to the upstream unchanged: {field} {}", reason.describe())]
pub struct IdentityRefused {
    /// The part, e.g. `user`, `groups[1]`, `extra["example.org/team"][0]` (values are not
    /// repeated: the field says which).
    pub field: String,
    /// Why.
    pub reason: RefusalReason,
}

/// An authenticated identity checked to travel upstream unchanged in the mode it was checked for.
/// Made only by [`ForwardableIdentity::check`]; the forwarder takes nothing else, and picks the
/// upstream credentials from its mode, so a request cannot go upstream with the proxy's
/// credentials and without the caller's identity.
#[derive(Debug, Clone)]
pub struct ForwardableIdentity {
    identity: Identity,
    mode: IdentityForwarding,
}

// === impl ForwardableIdentity ===

impl ForwardableIdentity {
    /// Checks `identity` for `mode`; `passthrough` forwards no identity and accepts any.
    pub fn check(identity: Identity, mode: IdentityForwarding) -> Result<Self, IdentityRefused> {
        if mode != IdentityForwarding::Passthrough {
            check_identity(&identity)?;
        }
        Ok(ForwardableIdentity { identity, mode })
    }

    /// The identity (for classification and the logs).
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The mode it was checked for.
    pub fn mode(&self) -> IdentityForwarding {
        self.mode
    }
}

fn check_identity(identity: &Identity) -> Result<(), IdentityRefused> {
    check_value(&identity.user, || "user".to_string())?;
    // An empty UID is the absence of one: no header is sent.
    if !identity.uid.is_empty() {
        check_value(&identity.uid, || "uid".to_string())?;
    }
    for (i, group) in identity.groups.iter().enumerate() {
        check_value(group, || format!("groups[{i}]"))?;
    }
    for (key, values) in &identity.extra {
        let quoted = Quoted(key);
        check_value(key, || format!("extra key {quoted}"))?;
        if key.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(IdentityRefused {
                field: format!("extra key {quoted}"),
                reason: RefusalReason::UppercaseExtraKey,
            });
        }
        if LONGEST_EXTRA_PREFIX + escaped_len(key) > MAX_HEADER_NAME_LEN {
            return Err(IdentityRefused {
                field: format!("extra key {quoted}"),
                reason: RefusalReason::Unencodable,
            });
        }
        for (i, value) in values.iter().enumerate() {
            check_value(value, || format!("extra[{quoted}][{i}]"))?;
        }
    }
    Ok(())
}

/// `impersonate-extra-`, the longer of the two extra prefixes.
const LONGEST_EXTRA_PREFIX: usize = "impersonate-extra-".len();
/// The longest header name the `http` crate makes (and far beyond any server's limit).
const MAX_HEADER_NAME_LEN: usize = (1 << 16) - 1;

/// The length of `key` once [`escape_extra_key`](super::escape_extra_key) has encoded it.
fn escaped_len(key: &str) -> usize {
    let escaped = |b: &u8| needs_escape(*b);
    key.len() + 2 * key.bytes().filter(escaped).count()
}

/// `value` is non-empty, has no control character and no surrounding whitespace.
fn check_value(value: &str, field: impl FnOnce() -> String) -> Result<(), IdentityRefused> {
    let reason = if value.is_empty() {
        RefusalReason::Empty
    } else if value.chars().any(char::is_control) {
        RefusalReason::ControlCharacter
    } else if value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace) {
        RefusalReason::SurroundingWhitespace
    } else {
        return Ok(());
    };
    Err(IdentityRefused {
        field: field(),
        reason,
    })
}

/// A key as a Rust string literal (control characters escaped), for messages.
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// How the caller's identity reaches the upstream (`--identity-forwarding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdentityForwarding {
    /// The caller's own `Authorization` goes upstream unchanged; the proxy adds no credential and
    /// presents no client certificate (the apiserver would authenticate the certificate before
    /// the token, turning every caller into the proxy).
    #[default]
    Passthrough,
    /// The proxy's credentials plus `Impersonate-User`, `-Group` (one header per group), `-Uid`
    /// and `Impersonate-Extra-<key>`.
    Impersonate,
    /// The proxy's front-proxy client certificate plus `X-Remote-User`, `X-Remote-Uid`,
    /// `X-Remote-Group` and `X-Remote-Extra-<key>`.
    Requestheader,
}

/// Percent-encodes an extra key for a header name as client-go's `headerKeyEscape` does
/// (`transport/round_trippers.go`): every byte that is not an RFC 7230 token character, and `%`
/// itself, becomes `%XX` (upper-case hex). The apiserver reverses it with `url.PathUnescape`.
pub fn escape_extra_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if needs_escape(b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

/// Whether [`escape_extra_key`] percent-encodes `b`.
fn needs_escape(b: u8) -> bool {
    !is_token_byte(b) || b == b'%'
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests;
