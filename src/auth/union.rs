//! The authenticator: every configured method in the apiserver's order.
//!
//! Mirrors `authenticatorfactory/delegating.go`: `union.New(requestheader, x509, bearer token)`
//! — each tried in turn, the first success wins, errors collected — wrapped in the
//! `AuthenticatedGroupAdder`, then `union.NewFailOnError(that, anonymous)`: anonymous is reached
//! only when no authenticator both recognised and rejected a credential. Tokens come from
//! `Authorization: Bearer` and then from the WebSocket subprotocol (`bearertoken` and
//! `websocket` authenticators), each checked against the token file and then the cached
//! TokenReview (`token/union`), as in kube-apiserver.

use std::sync::Arc;

use http::{HeaderMap, HeaderName};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::bearer::{bearer_token, BearerToken};
use super::cached::CachedTokenReview;
use super::config::{AuthConfig, AuthConfigError};
use super::error::{AuthError, CredentialError};
use super::keyhash::KeyHasher;
use super::requestheader::{is_standard_identity_header, RequestHeaderAuthenticator};
use super::secret::Secret;
use super::stats::{AuthMethod, AuthStats};
use super::tokenfile::TokenFile;
use super::websocket::{protocol_token, ProtocolToken};
use super::x509::{CaBundle, ClientCertAuthenticator};
use super::Identity;

/// A successful authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// Who: `system:authenticated` already added as the apiserver adds it.
    pub identity: Identity,
    /// How.
    pub method: AuthMethod,
}

/// Whether a bearer token travels with the request: `Authorization: Bearer` or the WebSocket
/// token subprotocol (what the upstream authenticates in `passthrough` mode).
pub fn carries_bearer_token(headers: &HeaderMap) -> bool {
    bearer_token(headers) != BearerToken::Absent || protocol_token(headers) != ProtocolToken::Absent
}

/// Authenticates requests with every configured method. Cheap to share behind an `Arc`.
pub struct Authenticator {
    request_header: Option<RequestHeaderAuthenticator>,
    client_cert: Option<ClientCertAuthenticator>,
    token_file: Option<TokenFile>,
    token_review: Option<CachedTokenReview>,
    anonymous: bool,
    stats: Arc<AuthStats>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("request_header", &self.request_header.is_some())
            .field("client_cert", &self.client_cert.is_some())
            .field("token_file", &self.token_file.is_some())
            .field("token_review", &self.token_review.is_some())
            .field("anonymous", &self.anonymous)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Loads the CA bundles and token file and checks the settings.
    pub fn new(cfg: AuthConfig) -> Result<Self, AuthConfigError> {
        let stats = Arc::new(AuthStats::default());
        let request_header = cfg
            .request_header
            .as_ref()
            .map(RequestHeaderAuthenticator::new)
            .transpose()?;
        let client_cert = cfg
            .client_ca_file
            .as_deref()
            .map(|path| CaBundle::load("--client-ca-file", path).map(ClientCertAuthenticator::new))
            .transpose()?;
        let token_file = cfg
            .token_auth_file
            .as_deref()
            .map(TokenFile::load)
            .transpose()?;
        let token_review = match &cfg.token_review {
            None => None,
            Some(review) => {
                review.validate()?;
                let hasher = KeyHasher::random().map_err(AuthConfigError::Random)?;
                Some(CachedTokenReview::new(
                    review,
                    cfg.api_audiences.clone(),
                    hasher,
                    stats.clone(),
                ))
            }
        };
        let configured = request_header.is_some()
            || client_cert.is_some()
            || token_file.is_some()
            || token_review.is_some();
        if !configured && !cfg.anonymous {
            return Err(AuthConfigError::NoMethod);
        }
        Ok(Authenticator {
            request_header,
            client_cert,
            token_file,
            token_review,
            anonymous: cfg.anonymous,
            stats,
        })
    }

    /// Authenticates one request from its headers and the TLS peer's certificate chain (leaf
    /// first), at the current wall-clock time. Runs inside a Tokio runtime: TokenReviews are
    /// spawned so that a client going away does not cancel a review others wait for.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        peer_certificates: Option<&[CertificateDer<'static>]>,
    ) -> Result<Authenticated, AuthError> {
        self.authenticate_at(headers, peer_certificates, UnixTime::now())
            .await
    }

    /// [`Authenticator::authenticate`] with certificates checked at `now`.
    pub async fn authenticate_at(
        &self,
        headers: &HeaderMap,
        peer_certificates: Option<&[CertificateDer<'static>]>,
        now: UnixTime,
    ) -> Result<Authenticated, AuthError> {
        let result = self.union(headers, peer_certificates, now).await;
        self.record(&result);
        result
    }

    /// Authenticates one request as the upstream will when only its bearer token travels there
    /// (`--identity-forwarding=passthrough`): a client certificate ends at the proxy, and
    /// front-proxy identity headers are stripped. At the current wall-clock time.
    ///
    /// The union runs as in [`authenticate`](Self::authenticate), so that a rejected credential
    /// is still a 401. When a credential that does not travel wins (a client certificate or
    /// front-proxy headers), the identity is the one of the credential that does: the bearer
    /// token (`Authorization` or the WebSocket subprotocol), authenticated alone — or anonymous
    /// when the proxy authenticates no tokens, as for a caller that sends only the token. With
    /// no token, the upstream would serve the request as `system:anonymous`, not as the
    /// caller: [`AuthError::NotForwarded`].
    pub async fn authenticate_forwarded(
        &self,
        headers: &HeaderMap,
        peer_certificates: Option<&[CertificateDer<'static>]>,
    ) -> Result<Authenticated, AuthError> {
        self.authenticate_forwarded_at(headers, peer_certificates, UnixTime::now())
            .await
    }

    /// [`Authenticator::authenticate_forwarded`] with certificates checked at `now`.
    pub async fn authenticate_forwarded_at(
        &self,
        headers: &HeaderMap,
        peer_certificates: Option<&[CertificateDer<'static>]>,
        now: UnixTime,
    ) -> Result<Authenticated, AuthError> {
        let mut result = self.union(headers, peer_certificates, now).await;
        let stays = match &result {
            Ok(ok) => match ok.method {
                AuthMethod::RequestHeader | AuthMethod::ClientCertificate => Some(ok.method),
                AuthMethod::TokenFile | AuthMethod::TokenReview | AuthMethod::Anonymous => None,
            },
            Err(_) => None,
        };
        if let Some(method) = stays {
            let travels = bearer_token(headers) != BearerToken::Absent
                || protocol_token(headers) != ProtocolToken::Absent;
            result = if travels {
                match self.union(headers, None, now).await {
                    Err(AuthError::NoCredentials) => Err(AuthError::NotForwarded(method)),
                    other => other,
                }
            } else {
                Err(AuthError::NotForwarded(method))
            };
        }
        self.record(&result);
        result
    }

    fn record(&self, result: &Result<Authenticated, AuthError>) {
        match result {
            Ok(ok) => {
                let method = ok.method.as_str();
                tracing::debug!(method, user = %ok.identity.user, "Request authenticated");
                self.stats.record_success(ok.method);
            }
            Err(AuthError::NoCredentials) => {
                tracing::debug!("No credentials and anonymous requests are disabled");
                self.stats.record_unauthenticated();
            }
            Err(err @ AuthError::Rejected(errors)) => {
                // The apiserver's "Unable to authenticate the request"; errors never hold tokens.
                tracing::debug!(error = %err, "Unable to authenticate the request");
                self.stats
                    .record_rejection(errors.iter().map(CredentialError::kind));
            }
            Err(err @ AuthError::NotForwarded(_)) => {
                tracing::debug!(error = %err, "The credential does not reach the upstream");
                self.stats.record_unauthenticated();
            }
        }
    }

    async fn union(
        &self,
        headers: &HeaderMap,
        certs: Option<&[CertificateDer<'static>]>,
        now: UnixTime,
    ) -> Result<Authenticated, AuthError> {
        let mut errors = Vec::new();
        if let Some(rh) = &self.request_header {
            match rh.authenticate(headers, certs, now) {
                Ok(Some(id)) => return Ok(authenticated(id, AuthMethod::RequestHeader)),
                Ok(None) => {}
                Err(e) => errors.push(e.into()),
            }
        }
        if let Some(x509) = &self.client_cert {
            match x509.authenticate(certs, now) {
                Ok(Some(id)) => return Ok(authenticated(id, AuthMethod::ClientCertificate)),
                Ok(None) => {}
                Err(e) => errors.push(e.into()),
            }
        }
        if self.token_file.is_some() || self.token_review.is_some() {
            match self.authenticate_bearer(headers).await {
                Ok(Some(ok)) => return Ok(ok),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
            match self.authenticate_websocket(headers).await {
                Ok(Some(ok)) => return Ok(ok),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(AuthError::Rejected(errors));
        }
        if self.anonymous {
            return Ok(Authenticated {
                identity: Identity::anonymous(),
                method: AuthMethod::Anonymous,
            });
        }
        Err(AuthError::NoCredentials)
    }

    // `bearertoken.Authenticator` over the token union (file, then TokenReview).
    async fn authenticate_bearer(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<Authenticated>, CredentialError> {
        let token = match bearer_token(headers) {
            BearerToken::Absent => return Ok(None),
            BearerToken::Malformed => return Err(CredentialError::InvalidBearerToken),
            BearerToken::Token(token) => token,
        };
        match self.authenticate_token(&token).await? {
            Some(ok) => Ok(Some(ok)),
            None => Err(CredentialError::InvalidBearerToken),
        }
    }

    // `websocket.ProtocolAuthenticator` over the same token union.
    async fn authenticate_websocket(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<Authenticated>, CredentialError> {
        let token = match protocol_token(headers) {
            ProtocolToken::Absent => return Ok(None),
            ProtocolToken::Invalid(why) => {
                return Err(CredentialError::InvalidWebSocketProtocol(why))
            }
            ProtocolToken::Token(token) => token,
        };
        match self.authenticate_token(&token).await? {
            Some(ok) => Ok(Some(ok)),
            None => Err(CredentialError::InvalidBearerToken),
        }
    }

    async fn authenticate_token(
        &self,
        token: &Secret,
    ) -> Result<Option<Authenticated>, CredentialError> {
        if let Some(id) = self
            .token_file
            .as_ref()
            .and_then(|f| f.authenticate(token.expose()))
        {
            return Ok(Some(authenticated(id.clone(), AuthMethod::TokenFile)));
        }
        let Some(review) = &self.token_review else {
            return Ok(None);
        };
        Ok(review
            .authenticate(token)
            .await?
            .map(|id| authenticated(id, AuthMethod::TokenReview)))
    }

    /// The union of the client CA and requestheader CA certificates, which the server's TLS
    /// certificate request names (it verifies nothing: [`authenticate`](Self::authenticate)
    /// does). Empty when neither is configured.
    pub fn client_ca_roots(&self) -> Vec<CertificateDer<'static>> {
        let mut roots: Vec<CertificateDer<'static>> = Vec::new();
        for cert in self.ca_bundles().flat_map(CaBundle::certs) {
            if !roots.contains(&cert) {
                roots.push(cert);
            }
        }
        roots
    }

    fn ca_bundles(&self) -> impl Iterator<Item = &CaBundle> {
        let client = self.client_cert.iter().map(ClientCertAuthenticator::ca);
        let front_proxy = self
            .request_header
            .iter()
            .map(RequestHeaderAuthenticator::ca);
        client.chain(front_proxy)
    }

    /// Reads `--client-ca-file` and `--requestheader-client-ca-file` again. `Ok(true)` when
    /// either changed (new authentications use it; the server's certificate request should name
    /// [`client_ca_roots`](Self::client_ca_roots) again). A file that cannot be used is refused
    /// and its last good bundle stays; the other one is still reloaded.
    pub fn reload_client_cas(&self) -> Result<bool, AuthConfigError> {
        let mut changed = false;
        let mut first_error = None;
        for bundle in self.ca_bundles() {
            match bundle.reload() {
                Ok(c) => changed |= c,
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(changed),
        }
    }

    /// Whether `name` carries front-proxy identity and must not be forwarded as received: the
    /// configured requestheader headers and prefixes, and always the standard `X-Remote-User`,
    /// `X-Remote-Uid`, `X-Remote-Group` and `X-Remote-Extra-*` (the apiserver's authentication
    /// filter clears both sets). `Authorization` is [`super::is_credential_header`].
    pub fn is_identity_header(&self, name: &HeaderName) -> bool {
        match &self.request_header {
            Some(rh) => rh.is_identity_header(name),
            None => is_standard_identity_header(name),
        }
    }

    /// The authentication counters.
    pub fn stats(&self) -> &Arc<AuthStats> {
        &self.stats
    }
}

fn authenticated(raw: Identity, method: AuthMethod) -> Authenticated {
    Authenticated {
        identity: raw.into_authenticated(),
        method,
    }
}
