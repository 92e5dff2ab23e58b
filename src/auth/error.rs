//! Authentication errors: why a request's credentials were not accepted.
//!
//! Every variant ends in `401 Unauthorized`, as in the apiserver's authentication filter. The
//! `Display` text is for logs; the response body says only `Unauthorized`, as the apiserver's.
//! No variant ever carries a token.

use std::time::Duration;

use http::StatusCode;

use super::stats::AuthMethod;
use super::transport::TransportError;

/// Which kind of presented credential an authenticator rejected (a bounded metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialKind {
    /// Front-proxy request headers with a client certificate.
    RequestHeader,
    /// A client certificate checked against `--client-ca-file`.
    ClientCertificate,
    /// A bearer token, in `Authorization` or in a WebSocket subprotocol.
    BearerToken,
}

impl CredentialKind {
    /// Every kind, in authenticator order.
    pub const ALL: [CredentialKind; 3] = [
        CredentialKind::RequestHeader,
        CredentialKind::ClientCertificate,
        CredentialKind::BearerToken,
    ];

    /// The label value, e.g. `bearer_token`.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::RequestHeader => "requestheader",
            CredentialKind::ClientCertificate => "client_certificate",
            CredentialKind::BearerToken => "bearer_token",
        }
    }
}

/// A client certificate that failed a check. Mirrors the errors of
/// `pkg/authentication/request/x509/x509.go`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    /// The chain does not verify against the CA bundle (unknown issuer, expired, wrong usage...).
    #[error("verifying certificate {id} failed: {reason}")]
    Verify {
        /// `SN=<serial>, SKID=<hex>, AKID=<hex>`, as the apiserver names certificates.
        id: String,
        /// Why verification failed.
        reason: String,
    },
    /// The requestheader client certificate's CN is not in `--requestheader-allowed-names`.
    #[error("x509: subject with cn={0} is not in the allowed list")]
    NotAllowed(String),
    /// The certificate could not be parsed.
    #[error("parsing client certificate: {0}")]
    Parse(String),
    /// The subject's UID attribute is unusable (several, empty, or not a string).
    #[error("{0}")]
    Uid(String),
}

/// A front-proxy request that was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestHeaderError {
    /// The proxy's client certificate is missing the requestheader CA or allowed names.
    #[error(transparent)]
    Certificate(#[from] CertError),
    /// An identity header value is not UTF-8 (an `Identity` holds strings).
    #[error("header {0} is not valid UTF-8")]
    InvalidHeaderValue(String),
}

/// One authenticator's reason for rejecting a presented credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// Front-proxy request headers were not trusted.
    #[error("requestheader: {0}")]
    RequestHeader(#[from] RequestHeaderError),
    /// The client certificate did not verify against `--client-ca-file`.
    #[error(transparent)]
    ClientCertificate(#[from] CertError),
    /// A bearer token that no token authenticator accepted (`bearertoken.go`'s `invalidToken`).
    #[error("invalid bearer token")]
    InvalidBearerToken,
    /// A malformed `base64url.bearer.authorization.k8s.io.` WebSocket subprotocol.
    #[error("{0}")]
    InvalidWebSocketProtocol(&'static str),
    /// The TokenReview failed (transport, status, decoding) or reported an error.
    #[error(transparent)]
    TokenReview(#[from] TokenReviewError),
}

impl CredentialError {
    /// The kind of credential that was rejected.
    pub fn kind(&self) -> CredentialKind {
        match self {
            CredentialError::RequestHeader(_) => CredentialKind::RequestHeader,
            CredentialError::ClientCertificate(_) => CredentialKind::ClientCertificate,
            CredentialError::InvalidBearerToken
            | CredentialError::InvalidWebSocketProtocol(_)
            | CredentialError::TokenReview(_) => CredentialKind::BearerToken,
        }
    }
}

/// Why a request is not authenticated. Mirrors the union authenticator's answer:
/// `(nil, false, nil)` is [`AuthError::NoCredentials`], `(nil, false, aggregate)` is
/// [`AuthError::Rejected`]. Both become `401 Unauthorized`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No authenticator recognised a credential, and anonymous requests are disabled.
    #[error("no credentials presented and anonymous requests are disabled")]
    NoCredentials,
    /// At least one presented credential was rejected and none was accepted. Never anonymous:
    /// the apiserver chains anonymous with `union.NewFailOnError`.
    #[error("{}", aggregate(.0))]
    Rejected(Vec<CredentialError>),
    /// The credential that authenticated (a client certificate, or front-proxy headers) ends at
    /// the proxy, and no bearer token travels in its place: the upstream would serve the
    /// request as `system:anonymous`, not as the caller (`passthrough` identity forwarding; see
    /// [`Authenticator::authenticate_forwarded`](super::Authenticator::authenticate_forwarded)).
    #[error("{}", not_forwarded(*.0))]
    NotForwarded(AuthMethod),
}

impl AuthError {
    /// The status the apiserver answers with: always `401 Unauthorized`.
    pub fn status_code(&self) -> StatusCode {
        StatusCode::UNAUTHORIZED
    }

    /// The individual rejections, in authenticator order (empty for `NoCredentials`).
    pub fn errors(&self) -> &[CredentialError] {
        match self {
            AuthError::NoCredentials | AuthError::NotForwarded(_) => &[],
            AuthError::Rejected(errors) => errors,
        }
    }

    /// The message of the caller's `401` Status: the apiserver's bare `Unauthorized`, which
    /// says nothing about credentials, except for [`AuthError::NotForwarded`], whose caller
    /// holds a valid credential and is told why it is not enough.
    pub fn status_message(&self) -> String {
        match self {
            AuthError::NoCredentials | AuthError::Rejected(_) => "Unauthorized".to_string(),
            AuthError::NotForwarded(_) => self.to_string(),
        }
    }
}

fn not_forwarded(method: AuthMethod) -> &'static str {
    match method {
        AuthMethod::RequestHeader => {
            "front-proxy identity headers authenticate to this proxy only: in passthrough identity forwarding they are not forwarded and no bearer token travels in their place, so the upstream would serve the request as system:anonymous; send a bearer token, or run the proxy with --identity-forwarding=requestheader or impersonate"
        }
        AuthMethod::ClientCertificate
        | AuthMethod::TokenFile
        | AuthMethod::TokenReview
        | AuthMethod::Anonymous => {
            "a client certificate authenticates to this proxy only: in passthrough identity forwarding it cannot be forwarded and no bearer token travels in its place, so the upstream would serve the request as system:anonymous; send a bearer token, or run the proxy with --identity-forwarding=impersonate or requestheader"
        }
    }
}

// Formats like apimachinery's `utilerrors.NewAggregate`: one error as itself, several in brackets.
fn aggregate(errors: &[CredentialError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => {
            let parts: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

/// Why a TokenReview gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenReviewError {
    /// No response from the upstream.
    #[error("TokenReview: {0}")]
    Transport(#[from] TransportError),
    /// The upstream answered with a non-2xx status.
    #[error("TokenReview: the server responded with status {code}: {message}")]
    Status {
        /// The HTTP status code.
        code: u16,
        /// The `Status` message, or a generic text.
        message: String,
    },
    /// A 2xx answer that is not a TokenReview.
    #[error("TokenReview: decoding the response: {0}")]
    Decode(String),
    /// `status.authenticated` is false and `status.error` says why.
    #[error("{0}")]
    Rejected(String),
    /// The review, retries included, took longer than the request timeout.
    #[error("TokenReview: no answer within {0:?}")]
    Timeout(Duration),
    /// Too many distinct tokens are under review at once.
    #[error("TokenReview: too many reviews in flight")]
    TooManyInFlight,
    /// The review task ended without an answer (a bug).
    #[error("TokenReview: authentication failed unexpectedly")]
    Crashed,
}
