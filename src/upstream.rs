//! The whole upstream client: where the upstream is and how the proxy proves itself to it
//! ([`UpstreamConfig`] → [`ResolvedUpstream`]: flags, a kubeconfig, or the in-cluster service
//! account; client-go's exec credential plugins in [`exec_credential`]), why an exchange failed
//! ([`UpstreamError`]), and the client itself: pooled connections over rustls (`pool`: hyper's connection-level
//! client, one keyless pool per upstream and TLS identity), HTTP/2 when the upstream offers it by
//! ALPN, and the proxy's own credentials.
//!
//! Requests travel by [`Route`]. Ordinary requests and watches are multiplexed over HTTP/2, each
//! on connections of their own and never beyond the stream limit the server advertises (more
//! connections are opened instead, up to `--upstream-max-connections`, see [`limits`]).
//! Upgrades (exec, attach, port-forward) get HTTP/1.1 connections of their own, since neither
//! SPDY nor WebSockets run over HTTP/2 to kube-apiserver. A caller's ordinary request keeps the
//! caller's protocol ([`UpstreamClient::send_for`]): one from an HTTP/1.1 caller takes a pooled
//! HTTP/1.1 connection, so the apiserver serves it as it would have served the caller directly
//! (kube-apiserver's HTTP/2 server costs a GET about 0.2 ms more than its HTTP/1.1 one on
//! loopback, BENCHMARKS.md). Against an HTTP/1.1-only upstream each request in flight holds a
//! connection.
//!
//! Two TLS identities are kept apart on purpose. Requests sent on the caller's credentials
//! (`passthrough`) never present the proxy's client certificate: the apiserver's authenticators
//! try the client certificate before the bearer token, so presenting it would make every caller
//! the proxy.

mod error;
pub mod exec_credential;
pub(crate) mod frames;
mod insecure;
mod kubeconfig;
pub mod limits;
mod pool;
mod token;
mod upstream_config;

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderValue, AUTHORIZATION};
use http::uri::PathAndQuery;
use http::{Request, Response, Uri};
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::ClientConfig;

use crate::body::ProxyBody;
pub use error::UpstreamError;
use exec_credential::ExecCertResolver;
pub use kubeconfig::{Kubeconfig, KubeconfigContext, KubeconfigError, PemSource};
use limits::ConnectionBudget;
pub use limits::{Protocol, Route, UpstreamLimits, UpstreamStats, DEFAULT_MAX_CONNECTIONS};
use pool::Pool;
pub use pool::PooledBody as UpstreamBody;
use token::TokenSource;
pub use upstream_config::{
    ClientIdentity, Credential, InClusterEnv, ResolvedUpstream, UpstreamConfig,
    UpstreamConfigError, IN_CLUSTER_SERVICE_ACCOUNT_DIR,
};

/// How long a TCP connect to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whose credentials a request carries to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamAuth {
    /// The caller's own (already in the request); the proxy adds nothing and presents no client
    /// certificate.
    Caller,
    /// The proxy's client certificate only (front-proxy `requestheader` mode).
    ProxyCertificate,
    /// The proxy's client certificate and bearer token, whichever are configured.
    Proxy,
}

/// Pools for one TLS identity.
#[derive(Clone)]
struct Pools {
    /// h2 by ALPN, else HTTP/1.1: ordinary and long-running requests.
    pooled: Arc<Pool>,
    /// HTTP/1.1 only: upgrades, and the ordinary requests of HTTP/1.1 callers.
    http1: Arc<Pool>,
}

/// A client for the one upstream apiserver. Cheap to clone (shared pools).
#[derive(Clone)]
pub struct UpstreamClient {
    inner: Arc<Inner>,
}

struct Inner {
    server: Uri,
    with_identity: Pools,
    without_identity: Pools,
    has_client_identity: bool,
    token: TokenSource,
    budget: Arc<ConnectionBudget>,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("server", &self.inner.server)
            .field("has_client_identity", &self.inner.has_client_identity)
            .finish_non_exhaustive()
    }
}

// === impl UpstreamClient ===

impl UpstreamClient {
    /// Builds the pools with the default [`UpstreamLimits`]. An `https://` upstream needs CAs
    /// or `insecure_skip_tls_verify`.
    pub fn new(upstream: ResolvedUpstream) -> Result<Self, UpstreamConfigError> {
        Self::with_limits(upstream, UpstreamLimits::default())
    }

    /// Builds the pools, every connection counted against `limits`.
    pub fn with_limits(
        upstream: ResolvedUpstream,
        limits: UpstreamLimits,
    ) -> Result<Self, UpstreamConfigError> {
        let https = upstream.server.scheme_str() == Some("https");
        if https && upstream.roots.is_empty() && !upstream.insecure_skip_tls_verify {
            return Err(UpstreamConfigError::Pem {
                what: "upstream certificate authority".to_string(),
                reason: "an https upstream needs a CA (--upstream-ca-file or the kubeconfig's certificate-authority)".to_string(),
            });
        }
        let budget = ConnectionBudget::new(limits);
        let without_identity = pools(&upstream, ClientAuth::None, &budget)?;
        let with_identity = match (&upstream.client_identity, &upstream.credential) {
            (Some(identity), _) => pools(&upstream, ClientAuth::Static(identity), &budget)?,
            // An exec plugin may give a client certificate: new connections present the current
            // one (connections already open keep theirs, as client-go's do until they close).
            (None, Credential::Exec(plugin)) => pools(
                &upstream,
                ClientAuth::Resolver(Arc::new(ExecCertResolver(Arc::clone(plugin)))),
                &budget,
            )?,
            (None, _) => without_identity.clone(),
        };
        Ok(UpstreamClient {
            inner: Arc::new(Inner {
                server: upstream.server,
                with_identity,
                without_identity,
                has_client_identity: upstream.client_identity.is_some(),
                token: TokenSource::new(upstream.credential),
                budget,
            }),
        })
    }

    /// The kubeconfig's exec credential plugin, when the proxy's credential comes from one.
    pub fn exec_plugin(&self) -> Option<Arc<exec_credential::ExecPlugin>> {
        self.inner.token.exec_plugin()
    }

    /// The connection and stream counters, for the metrics.
    pub fn stats(&self) -> Arc<UpstreamStats> {
        Arc::clone(self.inner.budget.stats())
    }

    /// The upstream's URL.
    pub fn server(&self) -> &Uri {
        &self.inner.server
    }

    /// Whether the proxy presents a client certificate for [`UpstreamAuth::Proxy`] and
    /// [`UpstreamAuth::ProxyCertificate`].
    pub fn has_client_identity(&self) -> bool {
        self.inner.has_client_identity
    }

    /// Whether the proxy has a bearer token.
    pub fn has_token(&self) -> bool {
        self.inner.token.is_configured()
    }

    /// The upstream URL for a caller's path and query: the server's path prefix (if any) joined
    /// with `path_and_query`.
    pub fn uri_for(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        let server = &self.inner.server;
        let prefix = server.path().trim_end_matches('/');
        let mut parts = server.clone().into_parts();
        parts.path_and_query = Some(format!("{prefix}{path_and_query}").parse()?);
        Ok(Uri::from_parts(parts)?)
    }

    /// The upstream request target for a caller's: the caller's path and query as they are when
    /// the server URL has no path (nothing is parsed again), else joined as in
    /// [`UpstreamClient::uri_for`].
    pub fn target_for(&self, path_and_query: Option<&PathAndQuery>) -> Result<Uri, http::Error> {
        let server_path = self.inner.server.path();
        match path_and_query {
            Some(pq) if server_path.is_empty() || server_path == "/" => {
                let mut parts = http::uri::Parts::default();
                parts.path_and_query = Some(pq.clone());
                Ok(Uri::from_parts(parts)?)
            }
            _ => self.uri_for(path_and_query.map_or("/", PathAndQuery::as_str)),
        }
    }

    /// Sends the proxy's own request (TokenReview, SubjectAccessReview, the configuration's
    /// list and watch, readiness), whose URI is absolute ([`UpstreamClient::uri_for`]) or
    /// origin-form ([`UpstreamClient::target_for`]), by `route`: over HTTP/2 when the upstream
    /// speaks it (an upgrade goes over an HTTP/1.1 connection of its own, never pooled again).
    pub async fn send(
        &self,
        request: Request<ProxyBody>,
        auth: UpstreamAuth,
        route: Route,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        self.send_for(request, auth, route, http::Version::HTTP_2)
            .await
    }

    /// Sends a caller's request, as [`UpstreamClient::send`] does, in the caller's protocol
    /// (`caller`, the version the request arrived with) where it can: an ordinary request of an
    /// HTTP/1.1 (or 1.0) caller takes a pooled HTTP/1.1 connection, as the caller's own
    /// connection would have been to the apiserver. Watches stay multiplexed over HTTP/2 whoever
    /// sends them (each would otherwise hold a connection for its whole life), upgrades always
    /// take HTTP/1.1.
    pub async fn send_for(
        &self,
        mut request: Request<ProxyBody>,
        auth: UpstreamAuth,
        route: Route,
        caller: http::Version,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let pools = match auth {
            UpstreamAuth::Caller => &self.inner.without_identity,
            UpstreamAuth::ProxyCertificate | UpstreamAuth::Proxy => &self.inner.with_identity,
        };
        let mut sent_token = None;
        if auth == UpstreamAuth::Proxy {
            if let Some(token) = self.inner.token.current().await? {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                        UpstreamError::Unavailable(
                            "the proxy's token is not a valid header value".into(),
                        )
                    })?;
                value.set_sensitive(true);
                request.headers_mut().insert(AUTHORIZATION, value);
                sent_token = Some(token);
            }
        }
        let pool = match route {
            Route::Upgrade => &pools.http1,
            Route::Short if caller <= http::Version::HTTP_11 => &pools.http1,
            Route::Short | Route::LongRunning => &pools.pooled,
        };
        let response = pool.send(request, route).await?;
        if response.status() == http::StatusCode::UNAUTHORIZED {
            if let Some(token) = sent_token {
                self.inner.token.refused(&token).await;
            }
        }
        Ok(response)
    }
}

/// What a pool's connections present as their client certificate.
#[derive(Clone)]
enum ClientAuth<'a> {
    None,
    Static(&'a ClientIdentity),
    Resolver(Arc<dyn rustls::client::ResolvesClientCert>),
}

fn pools(
    upstream: &ResolvedUpstream,
    auth: ClientAuth<'_>,
    budget: &Arc<ConnectionBudget>,
) -> Result<Pools, UpstreamConfigError> {
    Ok(Pools {
        pooled: pool(upstream, tls_config(upstream, auth.clone())?, true, budget),
        http1: pool(upstream, tls_config(upstream, auth)?, false, budget),
    })
}

fn tls_config(
    upstream: &ResolvedUpstream,
    auth: ClientAuth<'_>,
) -> Result<ClientConfig, UpstreamConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = if upstream.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(insecure::AcceptAnyServerCert::new(
                provider,
            )))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for root in &upstream.roots {
            roots.add(root.clone())?;
        }
        builder.with_root_certificates(roots)
    };
    Ok(match auth {
        ClientAuth::Static(id) => {
            builder.with_client_auth_cert(id.chain.clone(), id.key.clone_key())?
        }
        ClientAuth::Resolver(resolver) => builder.with_client_cert_resolver(resolver),
        ClientAuth::None => builder.with_no_client_auth(),
    })
}

fn pool(
    upstream: &ResolvedUpstream,
    tls: ClientConfig,
    allow_h2: bool,
    budget: &Arc<ConnectionBudget>,
) -> Arc<Pool> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    let builder = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1();
    let connector = if allow_h2 {
        builder.enable_http2().wrap_connector(http)
    } else {
        builder.wrap_connector(http)
    };
    Arc::new(Pool::new(
        connector,
        upstream.server.clone(),
        allow_h2,
        Arc::clone(budget),
    ))
}

#[cfg(test)]
mod tests {
    use super::UpstreamConfig;
    use super::*;

    fn client(url: &str) -> UpstreamClient {
        let resolved = UpstreamConfig {
            upstream: Some(url.to_string()),
            ..UpstreamConfig::default()
        }
        .resolve()
        .expect("resolve");
        UpstreamClient::new(resolved).expect("client")
    }

    #[test]
    fn upstream_urls_keep_the_servers_path_prefix() {
        let cases = [
            (
                "http://10.0.0.1:8080",
                "/api/v1/pods?watch=1",
                "http://10.0.0.1:8080/api/v1/pods?watch=1",
            ),
            (
                "http://10.0.0.1:8080/",
                "/healthz",
                "http://10.0.0.1:8080/healthz",
            ),
            (
                "http://h/k8s/clusters/c1/",
                "/api",
                "http://h/k8s/clusters/c1/api",
            ),
            (
                "http://h/prefix",
                "/apis/apps/v1?x=%2F",
                "http://h/prefix/apis/apps/v1?x=%2F",
            ),
        ];
        for (server, path, want) in cases {
            let client = client(server);
            let uri = client.uri_for(path).expect("uri");
            assert_eq!(uri.to_string(), want, "{server} + {path}");
            // The forwarding path reaches the same path and query, origin-form.
            let target = client
                .target_for(Some(&path.parse().expect("path")))
                .expect("target");
            assert_eq!(
                target.path_and_query(),
                uri.path_and_query(),
                "{server} + {path}"
            );
        }
    }
}
