//! Authentication: who sent a request.
//!
//! Authenticators run in the apiserver's order (front-proxy request headers, client certificates,
//! bearer tokens, anonymous) and produce an [`Identity`].
//!
//! The entry point is [`Authenticator`]: built once from an [`AuthConfig`], it answers
//! [`Authenticator::authenticate`] per request. Mirrors the apiserver's delegating authenticator
//! (`pkg/authentication/authenticatorfactory/delegating.go`): a union of front-proxy request
//! headers, client certificates and bearer tokens (token file, then TokenReview against the
//! upstream), wrapped in the `AuthenticatedGroupAdder`, then anonymous when enabled.
//!
//! Semantics worth knowing (all as the apiserver):
//! - Each authenticator answers "no opinion", "authenticated" or "error". The first
//!   "authenticated" wins; errors are collected and only reported when nobody authenticated.
//!   A credential that was presented and rejected (a certificate that does not verify, an
//!   unknown token, a failed TokenReview) therefore gives [`AuthError::Rejected`] — never
//!   anonymous — unless another credential on the same request is accepted.
//! - Front-proxy headers count only with a client certificate that verifies against the
//!   requestheader CA and whose CN is allowed; a certificate from the client CA with forged
//!   `X-Remote-User` is authenticated as its own CN.
//! - Every failure is `401 Unauthorized`; a TokenReview that errors fails closed.
//!
//! Differences: the TokenReview cache is bounded and limits reviews in flight; a verified client
//! chain is remembered (same bytes, at most 60s, never past `notAfter`); identity header
//! values must be UTF-8; token file errors name the line; anonymous path conditions
//! (structured authentication configuration) and OIDC / service-account / bootstrap token
//! authenticators of kube-apiserver are not part of the proxy (TokenReview covers those tokens).

pub mod authorize;
mod bearer;
mod cached;
mod config;
mod error;
pub mod impersonation;
mod keyhash;
mod requestheader;
mod secret;
mod stats;
mod token_cache;
mod tokenfile;
mod transport;
mod union;
mod webhook;
mod websocket;
mod x509;

#[cfg(test)]
mod fake_transport;
#[cfg(test)]
pub(crate) mod test_pki;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

pub use bearer::is_credential_header;
pub use config::{
    AuthConfig, AuthConfigError, RequestHeaderConfig, RetryBackoff, TokenReviewConfig,
};
pub use error::{
    AuthError, CertError, CredentialError, CredentialKind, RequestHeaderError, TokenReviewError,
};
pub use secret::{Secret, REDACTED};
pub use stats::{AttemptResult, AuthMethod, AuthStats, TokenCacheStats, TokenReviewStats};
pub use tokenfile::TokenFileError;
pub use x509::earliest_not_after;

/// The records of token-file text (for the fuzz targets).
#[cfg(feature = "fuzzing")]
pub(crate) fn tokenfile_records(
    path: &std::path::Path,
    text: &str,
) -> Result<Vec<(String, Identity)>, String> {
    tokenfile::TokenFile::parse(path, text)
        .map(|f| f.records())
        .map_err(|e| e.to_string())
}
pub use transport::{TokenReviewTransport, TransportError};
pub use union::{carries_bearer_token, Authenticated, Authenticator};
pub use websocket::strip_websocket_bearer_protocol;

/// The group every authenticated user belongs to (added as the apiserver adds it).
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The group of anonymous requests.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The user name of anonymous requests.
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// The authenticated caller, as kube-apiserver's `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The user name, e.g. `alice` or `system:serviceaccount:kube-system:default`.
    pub user: String,
    /// The user's UID; empty when the authenticator has none.
    pub uid: String,
    /// Group names, in the order the authenticator gave them.
    pub groups: Vec<String>,
    /// Extra attributes (`X-Remote-Extra-*`, TokenReview `extra`).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Identity {
    /// The anonymous identity: `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        Identity {
            user: ANONYMOUS_USER.to_string(),
            groups: vec![UNAUTHENTICATED_GROUP.to_string()],
            ..Identity::default()
        }
    }

    /// An authenticated identity. Mirrors the apiserver's `AuthenticatedGroupAdder`:
    /// `system:authenticated` is appended unless the user is `system:anonymous` or the groups
    /// already hold `system:authenticated` or `system:unauthenticated`.
    pub fn authenticated(
        user: impl Into<String>,
        uid: impl Into<String>,
        mut groups: Vec<String>,
    ) -> Self {
        let user = user.into();
        let marked = groups
            .iter()
            .any(|g| g == AUTHENTICATED_GROUP || g == UNAUTHENTICATED_GROUP);
        if user != ANONYMOUS_USER && !marked {
            // Exactly one more: the amortised growth would double the list for every request.
            groups.reserve_exact(1);
            groups.push(AUTHENTICATED_GROUP.to_string());
        }
        Identity {
            user,
            uid: uid.into(),
            groups,
            extra: BTreeMap::new(),
        }
    }

    /// Applies the `AuthenticatedGroupAdder` to an authenticator's raw answer, keeping `extra`.
    fn into_authenticated(self) -> Self {
        let extra = self.extra;
        Identity {
            extra,
            ..Identity::authenticated(self.user, self.uid, self.groups)
        }
    }
}
