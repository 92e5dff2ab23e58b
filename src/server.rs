//! Listeners: the secure proxy port (TLS, HTTP/1.1 and HTTP/2) and the plain-HTTP admin port.
//!
//! The one seam to the request pipeline is [`run`] (or [`run_with`] / [`start`] with
//! [`ServeParts`]): it takes a [`ServerConfig`] (plain values; the command line maps its flags
//! onto it) and a [`Handler`], which gets every request with its
//! [`ConnectionInfo`] (in its extensions, or beside it) and must always answer (errors become
//! responses in the handler; the server never writes one itself, except hyper's own 400/431,
//! without a body, for unparseable or oversized HTTP/1 heads). [`SecureServer`] and
//! [`AdminServer`] are the building blocks, usable alone in tests.

mod admin;
mod listener;
mod logging;
mod shutdown;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use http::{Request, Response};
use hyper::body::Incoming;
use rustls_pki_types::CertificateDer;

pub use crate::duration::{format_duration, parse_duration, DurationError};
pub use admin::{not_found, AdminGate, AdminRoutes, AdminServer, DenyAll, ReadyFlag};
pub use listener::{
    ConnectionLimits, Negotiated, SecureServer, ServerStats, DEFAULT_MAX_CONNECTIONS,
};
pub use logging::{init_logging, verbosity_filter, LogFormat, LoggingError};
pub use shutdown::{shutdown_channel, ShutdownSignal, ShutdownTrigger};
pub use tls::{
    build_server_tls, load_client_ca_roots, ClientCaFiles, ServerTls, TlsConfigCell, TlsError,
    TlsSettings,
};

pub use crate::body::{full_body, BoxError, ProxyBody};

/// Who is on the other end of a connection; in the extensions of every request.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// The client's address.
    pub remote_addr: SocketAddr,
    /// The client's certificate chain, leaf first, as presented at the handshake: the client
    /// proved it holds the leaf's key, but no CA has been checked (the authenticators verify the
    /// chain per request). `None` when the client presented none.
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// Answers requests. Implemented for every `Fn(Request<Incoming>) -> impl Future<Output =
/// Response<ProxyBody>>`, so a closure is a handler.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request; infallible: failures are responses too.
    fn handle(&self, request: Request<Incoming>) -> BoxFuture<'static, Response<ProxyBody>>;

    /// Answers one request that arrived on `connection`: what the server calls. The default puts
    /// the connection into the request's extensions and calls [`handle`](Self::handle); that
    /// costs an extensions map per request (about 220 bytes), which a handler on the hot path
    /// avoids by taking the connection from here.
    fn handle_on(
        &self,
        mut request: Request<Incoming>,
        connection: &Arc<ConnectionInfo>,
    ) -> BoxFuture<'static, Response<ProxyBody>> {
        request
            .extensions_mut()
            .insert(ConnectionInfo::clone(connection));
        self.handle(request)
    }
}

impl<F, Fut> Handler for F
where
    F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    fn handle(&self, request: Request<Incoming>) -> BoxFuture<'static, Response<ProxyBody>> {
        Box::pin(self(request))
    }
}

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// An address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Which listener: the caller names the flag that set its address.
        listener: Listener,
        /// The address.
        addr: SocketAddr,
        /// The reason.
        source: std::io::Error,
    },
    /// The TLS configuration is unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// What the listeners are built from: the secure port with its TLS and connection limits, the
/// admin listener, and the shutdown sequence's delay.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where the secure port listens (`--bind-address`, `--secure-port`; port 0 picks one).
    pub secure_address: SocketAddr,
    /// The serving certificate, versions and cipher suites; its client CAs are
    /// [`ServeParts::client_ca_roots`], or else read from `client_ca_files`.
    pub tls: TlsSettings,
    /// The client CA bundles read when [`ServeParts::client_ca_roots`] is `None`.
    pub client_ca_files: ClientCaFiles,
    /// The secure port's connection limits and timeouts (its `grace_period` is how long
    /// in-flight requests may take to finish once the listener closes).
    pub limits: ConnectionLimits,
    /// Where the admin listener listens.
    pub admin_address: SocketAddr,
    /// Whether the admin listener serves HTTPS with [`ServeParts::admin_gate`] (else plain HTTP).
    pub admin_secure: bool,
    /// The secure admin listener's own certificate and key (PEM); the serving certificate
    /// without them.
    pub admin_cert_files: Option<(PathBuf, PathBuf)>,
    /// After termination is requested, how long requests are still served with `/readyz`
    /// failing.
    pub shutdown_delay: Duration,
}

impl ServerConfig {
    /// The certificate and key files that reloads watch: the serving pair's and the admin
    /// listener's.
    pub fn cert_files(&self) -> Vec<PathBuf> {
        let admin = self.admin_cert_files.iter().flat_map(|(c, k)| [c, k]);
        [&self.tls.cert_file, &self.tls.key_file]
            .into_iter()
            .flatten()
            .chain(admin)
            .cloned()
            .collect()
    }
}

/// What the pipeline hands the server beside its [`ServerConfig`].
#[derive(Clone)]
pub struct ServeParts {
    /// Answers every request on the secure port.
    pub handler: Arc<dyn Handler>,
    /// The client CAs the handshake names (the authenticator's `client_ca_roots()`); `None`: read
    /// [`ServerConfig::client_ca_files`] here.
    pub client_ca_roots: Option<Vec<CertificateDer<'static>>>,
    /// Admin paths other than the health endpoints (`/metrics`, `/debug/...`).
    pub admin_routes: Option<Arc<dyn Handler>>,
    /// The `shutdown` check of `/readyz`: fails while it is false and from the moment shutdown
    /// starts.
    pub ready: ReadyFlag,
    /// The `upstream` check of `/readyz`, if the caller has one.
    pub upstream_ready: Option<ReadyFlag>,
    /// Authentication and authorization of the admin listener in secure mode
    /// (`--admin-secure`); without one, a secure admin listener refuses all but the health
    /// endpoints.
    pub admin_gate: Option<Arc<dyn AdminGate>>,
    /// The `config-source` check of `/readyz` (`--config-source cluster`): false until the
    /// first list has been applied.
    pub config_ready: Option<ReadyFlag>,
    /// The `coordination` check of `/readyz` (`--coordination-namespace`): false while the
    /// replica waits for its first share of the budget; passes, with a note, when it serves with
    /// a conservative share because the Lease store cannot be used.
    pub coordination_ready: Option<ReadyFlag>,
}

impl ServeParts {
    /// Just a handler: client CAs from [`ServerConfig::client_ca_files`], health endpoints only,
    /// ready at once.
    pub fn new(handler: Arc<dyn Handler>) -> Self {
        Self {
            handler,
            client_ca_roots: None,
            admin_routes: None,
            ready: ReadyFlag::new(true),
            upstream_ready: None,
            admin_gate: None,
            config_ready: None,
            coordination_ready: None,
        }
    }
}

/// Serves until SIGTERM or Ctrl-C. See [`run_with`].
pub async fn run(config: ServerConfig, handler: Arc<dyn Handler>) -> Result<(), ServerError> {
    run_with(config, ServeParts::new(handler)).await
}

/// Serves the secure and admin listeners until SIGTERM or Ctrl-C, then shuts down as
/// [`Running::terminate`] describes.
pub async fn run_with(config: ServerConfig, parts: ServeParts) -> Result<(), ServerError> {
    let running = start(config, parts).await?;
    // The listeners only stop after termination, so there is nothing else to wait for.
    wait_for_termination().await;
    running.terminate();
    running.wait().await;
    tracing::info!("Stopped");
    Ok(())
}

/// Which of the proxy's listeners an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// The secure (serving) listener; also the webhook's only one.
    Secure,
    /// The admin listener (`/metrics`, health, debug dumps).
    Admin,
}

impl ServerError {
    /// The same error, said of `listener` (both listeners bind the same way, so the one that
    /// failed is known only to the caller that bound it).
    pub fn of(self, listener: Listener) -> Self {
        match self {
            ServerError::Bind { addr, source, .. } => ServerError::Bind {
                listener,
                addr,
                source,
            },
            other => other,
        }
    }
}

/// Binds both listeners and starts serving them in the background.
pub async fn start(config: ServerConfig, parts: ServeParts) -> Result<Running, ServerError> {
    let mut settings = config.tls.clone();
    settings.client_ca_roots = match parts.client_ca_roots {
        Some(roots) => roots,
        None => load_client_ca_roots(&config.client_ca_files)?,
    };
    let tls = build_server_tls(&settings)?;
    let server = SecureServer::bind(
        config.secure_address,
        tls.cell.clone(),
        config.limits.clone(),
    )
    .await?;
    let gate = config.admin_secure.then(|| {
        parts
            .admin_gate
            .clone()
            .unwrap_or_else(|| Arc::new(DenyAll) as Arc<dyn AdminGate>)
    });
    let routes = AdminRoutes {
        ready: parts.ready.clone(),
        upstream: parts.upstream_ready,
        config_source: parts.config_ready,
        coordination: parts.coordination_ready,
        other: parts.admin_routes,
        gate,
    };
    let (admin, admin_tls) = if config.admin_secure {
        let admin_tls = match &config.admin_cert_files {
            Some((cert, key)) => Some(build_server_tls(&TlsSettings {
                cert_file: Some(cert.clone()),
                key_file: Some(key.clone()),
                ..settings.clone()
            })?),
            None => None,
        };
        let cell = admin_tls.as_ref().unwrap_or(&tls).cell.clone();
        let limits = admin_limits(&config.limits);
        let server = SecureServer::bind(config.admin_address, cell, limits)
            .await
            .map_err(|e| e.of(Listener::Admin))?;
        (AdminListener::Secure(server, Arc::new(routes)), admin_tls)
    } else {
        let server = AdminServer::bind(config.admin_address, routes)
            .await
            .map_err(|e| e.of(Listener::Admin))?;
        (AdminListener::Plain(server), None)
    };
    let (terminate, termination) = shutdown_channel();
    let secure_addr = server.local_addr();
    let stats = server.stats();
    let admin_addr = admin.local_addr();
    let lifecycle = Lifecycle {
        ready: parts.ready,
        delay: config.shutdown_delay,
        termination,
    };
    let task = tokio::spawn(lifecycle.serve(server, parts.handler, admin));
    Ok(Running {
        secure_addr,
        admin_addr,
        tls,
        admin_tls,
        stats,
        terminate,
        task,
    })
}

/// Listeners serving in the background. Dropping it terminates them (see [`Running::terminate`]).
#[derive(Debug)]
pub struct Running {
    secure_addr: SocketAddr,
    admin_addr: SocketAddr,
    tls: ServerTls,
    admin_tls: Option<ServerTls>,
    stats: Arc<ServerStats>,
    terminate: ShutdownTrigger,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// The secure listener's address.
    pub fn secure_addr(&self) -> SocketAddr {
        self.secure_addr
    }

    /// The admin listener's address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// The TLS configuration in use (its `cert` cell reloads the serving certificate; its
    /// `self_signed_cert` is what clients trust when no certificate file was given).
    pub fn tls(&self) -> &ServerTls {
        &self.tls
    }

    /// The admin listener's own TLS configuration, when `--admin-tls-cert-file` gave it one
    /// (otherwise a secure admin listener serves [`Running::tls`]).
    pub fn admin_tls(&self) -> Option<&ServerTls> {
        self.admin_tls.as_ref()
    }

    /// The secure listener's counters (the metrics registry reads them at scrape time).
    pub fn stats(&self) -> Arc<ServerStats> {
        Arc::clone(&self.stats)
    }

    /// Starts shutdown as the apiserver does on SIGTERM: `/readyz` fails at once, requests are
    /// still served for `--shutdown-delay-duration`, then the secure listener closes and
    /// in-flight requests get `--shutdown-grace-period` to finish; the admin listener goes last.
    pub fn terminate(&self) {
        self.terminate.trigger();
    }

    /// Waits until both listeners have stopped.
    pub async fn wait(self) {
        if let Err(err) = self.task.await {
            tracing::error!(error = %err, "The server task failed");
        }
    }
}

/// The admin listener, plain or secure.
enum AdminListener {
    /// Plain HTTP/1.1 (loopback by default).
    Plain(AdminServer),
    /// TLS, HTTP/1.1 and HTTP/2, with the gate in the routes.
    Secure(SecureServer, Arc<AdminRoutes>),
}

impl AdminListener {
    fn local_addr(&self) -> SocketAddr {
        match self {
            AdminListener::Plain(server) => server.local_addr(),
            AdminListener::Secure(server, _) => server.local_addr(),
        }
    }

    async fn serve(self, shutdown: ShutdownSignal) {
        match self {
            AdminListener::Plain(server) => server.serve(shutdown).await,
            AdminListener::Secure(server, routes) => {
                tracing::info!(address = %server.local_addr(), "Serving admin endpoints over HTTPS");
                let handler: Arc<dyn Handler> = Arc::new(move |request: Request<Incoming>| {
                    let routes = Arc::clone(&routes);
                    async move { routes.handle(request).await }
                });
                server.serve(handler, shutdown).await;
            }
        }
    }
}

/// Limits of a secure admin listener: the secure port's, with fewer connections (scrapers and
/// probes) and a short grace period, as the plain admin listener has.
fn admin_limits(secure: &ConnectionLimits) -> ConnectionLimits {
    ConnectionLimits {
        max_connections: ADMIN_MAX_CONNECTIONS,
        grace_period: std::time::Duration::from_secs(5),
        ..secure.clone()
    }
}

/// Connections a secure admin listener holds at once.
const ADMIN_MAX_CONNECTIONS: usize = 256;

/// The shutdown sequence around the two listeners.
struct Lifecycle {
    ready: ReadyFlag,
    delay: std::time::Duration,
    termination: ShutdownSignal,
}

impl Lifecycle {
    async fn serve(self, server: SecureServer, handler: Arc<dyn Handler>, admin: AdminListener) {
        let (admin_trigger, admin_signal) = shutdown_channel();
        let admin_task = tokio::spawn(admin.serve(admin_signal));
        let (trigger, signal) = shutdown_channel();
        let Self {
            ready,
            delay,
            mut termination,
        } = self;
        tokio::spawn(async move {
            termination.triggered().await;
            ready.set(false);
            tracing::info!(delay = %format_duration(delay), "Shutdown requested; /readyz now fails");
            tokio::time::sleep(delay).await;
            trigger.trigger();
        });
        server.serve(handler, signal).await;
        admin_trigger.trigger();
        let _ = admin_task.await;
    }
}

/// Completes on SIGTERM or SIGINT (Ctrl-C).
/// Resolves on SIGTERM or Ctrl-C.
pub async fn wait_for_termination() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %err, "Cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "Cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
