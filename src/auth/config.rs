//! What the authenticator is built from, and why building it can fail.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::tokenfile::TokenFileError;
use super::transport::TokenReviewTransport;

/// The authentication settings, as kube-apiserver's flags give them.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// `--client-ca-file`: a PEM bundle; a client certificate that verifies against it is
    /// authenticated as its CN, with its O values as groups.
    pub client_ca_file: Option<PathBuf>,
    /// `--token-auth-file`: kube-apiserver's static token CSV.
    pub token_auth_file: Option<PathBuf>,
    /// `--authentication-token-webhook`: TokenReview against the upstream.
    pub token_review: Option<TokenReviewConfig>,
    /// `--requestheader-*`: front-proxy authentication. `None` without a requestheader CA.
    pub request_header: Option<RequestHeaderConfig>,
    /// `--anonymous-auth`: requests without credentials become `system:anonymous`.
    pub anonymous: bool,
    /// `--api-audiences`: sent in TokenReview `spec.audiences`; empty means no audience check.
    pub api_audiences: Vec<String>,
}

impl Default for AuthConfig {
    /// No authenticator and anonymous enabled (kube-apiserver's `--anonymous-auth` default).
    fn default() -> Self {
        AuthConfig {
            client_ca_file: None,
            token_auth_file: None,
            token_review: None,
            request_header: None,
            anonymous: true,
            api_audiences: Vec::new(),
        }
    }
}

/// Front-proxy (requestheader) authentication settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// `--requestheader-client-ca-file`: the front proxy's client certificate must verify here.
    pub client_ca_file: PathBuf,
    /// `--requestheader-allowed-names`: allowed CNs of that certificate; empty allows any.
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`: the first non-empty one names the user.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`: the first non-empty one gives the UID.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`: every non-empty value of each is a group.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`: `<prefix><key>` headers fill `extra`.
    pub extra_headers_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// The settings the apiserver suggests (and its delegating authenticator defaults to):
    /// `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-`, no UID headers, any CN allowed.
    pub fn new(client_ca_file: impl Into<PathBuf>) -> Self {
        RequestHeaderConfig {
            client_ca_file: client_ca_file.into(),
            allowed_names: Vec::new(),
            username_headers: vec!["X-Remote-User".to_string()],
            uid_headers: Vec::new(),
            group_headers: vec!["X-Remote-Group".to_string()],
            extra_headers_prefixes: vec!["X-Remote-Extra-".to_string()],
        }
    }
}

/// Retry schedule of TokenReview calls. Mirrors `DefaultAuthWebhookRetryBackoff`
/// (500ms, factor 1.5, jitter 0.2, 5 attempts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBackoff {
    /// The wait before the first retry.
    pub initial: Duration,
    /// Each wait is the previous times this.
    pub factor: f64,
    /// Up to this fraction of the wait is added at random.
    pub jitter: f64,
    /// Attempts in all (at least 1).
    pub steps: u32,
}

impl Default for RetryBackoff {
    fn default() -> Self {
        RetryBackoff {
            initial: Duration::from_millis(500),
            factor: 1.5,
            jitter: 0.2,
            steps: 5,
        }
    }
}

/// TokenReview (webhook token authentication) settings.
#[derive(Clone)]
pub struct TokenReviewConfig {
    /// Posts the TokenReview to the upstream.
    pub transport: Arc<dyn TokenReviewTransport>,
    /// How long an authenticated answer is cached
    /// (`--authentication-token-webhook-cache-ttl`, 2m). Zero disables caching successes.
    pub success_cache_ttl: Duration,
    /// How long an unauthenticated answer is cached. kube-apiserver uses the same flag for
    /// both, so this defaults to 2m too. Zero disables caching failures. Errors are never cached.
    pub failure_cache_ttl: Duration,
    /// Most cached answers; beyond it the entry closest to expiry is evicted.
    pub cache_capacity: usize,
    /// Time limit of one review, retries included (the apiserver's `TokenRequestTimeout`, 10s).
    pub request_timeout: Duration,
    /// Retry schedule for transient failures.
    pub retry_backoff: RetryBackoff,
    /// Most distinct tokens under review at once; a further token is rejected, not queued.
    pub max_in_flight: usize,
}

impl TokenReviewConfig {
    /// The defaults: 2m success and failure TTLs, 32768 cached answers, 10s timeout,
    /// the apiserver's retry backoff, 1024 reviews in flight.
    pub fn new(transport: Arc<dyn TokenReviewTransport>) -> Self {
        TokenReviewConfig {
            transport,
            success_cache_ttl: Duration::from_secs(120),
            failure_cache_ttl: Duration::from_secs(120),
            cache_capacity: 32 * 1024,
            request_timeout: Duration::from_secs(10),
            retry_backoff: RetryBackoff::default(),
            max_in_flight: 1024,
        }
    }
}

impl TokenReviewConfig {
    /// Checks the ranges: a positive timeout, at least one attempt, a finite backoff factor of
    /// at least 1 and a jitter between 0 and 1 (beyond them, waits could overflow).
    pub fn validate(&self) -> Result<(), AuthConfigError> {
        let backoff = &self.retry_backoff;
        if self.request_timeout.is_zero() {
            return Err(AuthConfigError::TokenReview(
                "request timeout must be positive",
            ));
        }
        if backoff.steps == 0 {
            return Err(AuthConfigError::TokenReview(
                "number of webhook retry attempts must be at least 1",
            ));
        }
        if !(1.0..=10.0).contains(&backoff.factor) {
            return Err(AuthConfigError::TokenReview(
                "retry backoff factor must be between 1 and 10",
            ));
        }
        if !(0.0..=1.0).contains(&backoff.jitter) {
            return Err(AuthConfigError::TokenReview(
                "retry backoff jitter must be between 0 and 1",
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for TokenReviewConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenReviewConfig")
            .field("success_cache_ttl", &self.success_cache_ttl)
            .field("failure_cache_ttl", &self.failure_cache_ttl)
            .field("cache_capacity", &self.cache_capacity)
            .field("request_timeout", &self.request_timeout)
            .field("retry_backoff", &self.retry_backoff)
            .field("max_in_flight", &self.max_in_flight)
            .finish_non_exhaustive()
    }
}

/// Why an [`AuthConfig`] cannot be turned into an authenticator.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// A file could not be read.
    #[error("reading {what} {path}: {source}")]
    Read {
        /// Which setting named the file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A CA bundle is not PEM, holds no certificate, or holds an unusable one.
    #[error("{what} {path}: {message}")]
    CaBundle {
        /// Which setting named the file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The token file is malformed.
    #[error(transparent)]
    TokenFile(#[from] TokenFileError),
    /// A header name or allowed name is empty or whitespace (`trimHeaders`,
    /// `checkForWhiteSpaceOnly`), or not a valid HTTP header name.
    #[error("invalid value {value:?} in {flag}: {message}")]
    Header {
        /// The flag, e.g. `--requestheader-username-headers`.
        flag: &'static str,
        /// The offending value.
        value: String,
        /// What is wrong with it.
        message: &'static str,
    },
    /// A TokenReview setting is out of range.
    #[error("TokenReview: {0}")]
    TokenReview(&'static str),
    /// No authenticator is configured and anonymous requests are disabled.
    #[error("no authentication method configured")]
    NoMethod,
    /// The random key for hashing cached tokens could not be generated.
    #[error("generating the token cache key: {0}")]
    Random(String),
}
