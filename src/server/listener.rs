//! The secure listener: accept → TLS handshake → hyper-util auto (h1 + h2 by ALPN) → handler.
//!
//! Mirrors the `http.Server` that `pkg/server/secure_serving.go` configures: 1 MiB of request
//! headers (`MaxHeaderBytes`), a 32 s header read timeout (`ReadHeaderTimeout`, which also bounds
//! the TLS handshake in Go, and a client silent after it), an HTTP/2 client preface within 10 s
//! and its SETTINGS within 2 s after it (Go's `http2` server), a 90 s idle timeout, HTTP/2 with 100 streams per connection unless
//! `--http2-max-streams-per-connection` says otherwise, 256 KiB frames and per-stream windows.
//! On shutdown it stops accepting, asks every connection to finish gracefully (h1: after the
//! current response; h2: GOAWAY) and closes what is left when the grace period ends.

mod arrival;
mod coalesce;
mod connection;
mod gated;

pub use arrival::StartTimeouts;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::tls::TlsConfigCell;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;

use super::shutdown::ShutdownSignal;
use super::{Handler, ServerError};

/// Client connections open at once by default (`--max-connections`): 5,000 nodes (Kubernetes'
/// largest supported cluster) with a kubelet and about four other agents each, and room for the
/// controllers.
pub const DEFAULT_MAX_CONNECTIONS: usize = 25_000;

/// Per-connection limits and timeouts.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Open connections at most; further clients wait in the kernel's accept backlog.
    pub max_connections: usize,
    /// Time a client has to complete the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// HTTP/1: time a client has to send a request's headers (also bounds keep-alive idling).
    pub header_read_timeout: Duration,
    /// HTTP/1: request line and headers, in bytes, beyond which the answer is 431 (at least 8 KiB).
    pub max_header_bytes: usize,
    /// HTTP/1: headers per request, beyond which the answer is 431. Go's server has no such count
    /// (only the byte limit), so the default is far above any real request (kubectl `exec` with
    /// many `--as-group`, SPDY, always HTTP/1.1); hyper parses into an array of this many slots.
    pub max_headers: usize,
    /// HTTP/2: time a client has to send the connection preface after the TLS handshake (Go's
    /// `prefaceTimeout`).
    pub http2_preface_timeout: Duration,
    /// HTTP/2: time a client has to send its first SETTINGS frame after the preface (Go's
    /// `firstSettingsTimeout`).
    pub http2_settings_timeout: Duration,
    /// A connection with no request in flight for this long is closed gracefully.
    pub idle_timeout: Duration,
    /// HTTP/2: `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2: `SETTINGS_MAX_HEADER_LIST_SIZE`.
    pub http2_max_header_list_size: u32,
    /// HTTP/2: `SETTINGS_MAX_FRAME_SIZE` and the initial per-stream window.
    pub http2_max_frame_size: u32,
    /// HTTP/2: streams a client may reset before they are accepted (rapid-reset protection).
    pub http2_max_pending_accept_reset_streams: usize,
    /// HTTP/2: streams the server may reset for protocol errors before it closes the connection.
    pub http2_max_local_error_reset_streams: usize,
    /// HTTP/2: interval of keep-alive pings that detect dead peers (none: no pings).
    pub http2_keep_alive_interval: Option<Duration>,
    /// HTTP/2: how long to wait for a ping's answer.
    pub http2_keep_alive_timeout: Duration,
    /// After shutdown starts, how long connections may take to finish.
    pub grace_period: Duration,
}

impl Default for ConnectionLimits {
    /// kube-apiserver's values (see the module documentation), `--max-connections`' default.
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            tls_handshake_timeout: Duration::from_secs(32),
            header_read_timeout: Duration::from_secs(32),
            max_header_bytes: 1 << 20,
            max_headers: connection::DEFAULT_MAX_HEADERS,
            idle_timeout: Duration::from_secs(90),
            http2_preface_timeout: Duration::from_secs(10),
            http2_settings_timeout: Duration::from_secs(2),
            http2_max_concurrent_streams: 100,
            http2_max_header_list_size: 1 << 20,
            http2_max_frame_size: 256 * 1024,
            http2_max_pending_accept_reset_streams: 20,
            http2_max_local_error_reset_streams: 1024,
            http2_keep_alive_interval: Some(Duration::from_secs(180)),
            http2_keep_alive_timeout: Duration::from_secs(20),
            grace_period: Duration::from_secs(60),
        }
    }
}

impl ConnectionLimits {
    /// How long a client may take to start speaking after its TLS handshake: the first request
    /// within `header_read_timeout` (HTTP/1.1), the preface and SETTINGS within their timeouts
    /// (HTTP/2).
    pub fn start_timeouts(&self) -> StartTimeouts {
        StartTimeouts {
            first_request: self.header_read_timeout,
            http2_preface: self.http2_preface_timeout,
            http2_settings: self.http2_settings_timeout,
        }
    }
}

/// Counters of the secure listener (for metrics such as `apiserver_tls_handshake_errors_total`).
#[derive(Debug, Default)]
pub struct ServerStats {
    accepted: AtomicU64,
    tls_handshake_errors: AtomicU64,
    /// Completed handshakes, indexed by [`Negotiated::index`].
    tls_handshakes: [AtomicU64; Negotiated::ALL.len()],
    active: AtomicUsize,
}

/// What a completed TLS handshake agreed on: the protocol by ALPN and the TLS version.
/// Bounded on purpose (3 × 2 values), for a metric's labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// `h2`, `http/1.1`, or `none` when the client offered no protocol we speak by ALPN.
    pub protocol: &'static str,
    /// `1.2` or `1.3` (rustls speaks no other).
    pub tls_version: &'static str,
}

impl Negotiated {
    /// Every combination, in `Negotiated::index` order.
    pub const ALL: [Negotiated; 6] = {
        const fn n(protocol: &'static str, tls_version: &'static str) -> Negotiated {
            Negotiated {
                protocol,
                tls_version,
            }
        }
        [
            n("h2", "1.3"),
            n("http/1.1", "1.3"),
            n("none", "1.3"),
            n("h2", "1.2"),
            n("http/1.1", "1.2"),
            n("none", "1.2"),
        ]
    };

    /// Reads the outcome off a server session.
    pub(crate) fn of(session: &rustls::ServerConnection) -> Self {
        let protocol = match session.alpn_protocol() {
            Some(b"h2") => "h2",
            Some(b"http/1.1") => "http/1.1",
            _ => "none",
        };
        let tls_version = match session.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_2) => "1.2",
            _ => "1.3",
        };
        Negotiated {
            protocol,
            tls_version,
        }
    }

    fn index(self) -> usize {
        Self::ALL
            .iter()
            .position(|n| *n == self)
            .unwrap_or(Self::ALL.len() - 1)
    }
}

impl ServerStats {
    /// TCP connections accepted.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// TLS handshakes that failed or timed out.
    pub fn tls_handshake_errors(&self) -> u64 {
        self.tls_handshake_errors.load(Ordering::Relaxed)
    }

    /// Completed TLS handshakes by what they negotiated, every combination listed (zeros too).
    pub fn tls_handshakes(&self) -> impl Iterator<Item = (Negotiated, u64)> + '_ {
        Negotiated::ALL
            .into_iter()
            .zip(&self.tls_handshakes)
            .map(|(n, count)| (n, count.load(Ordering::Relaxed)))
    }

    pub(super) fn handshake_completed(&self, negotiated: Negotiated) {
        self.tls_handshakes[negotiated.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Connections open now (handshaking or serving).
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }
}

/// A bound secure listener, ready to serve.
pub struct SecureServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    tls: TlsConfigCell,
    limits: ConnectionLimits,
    stats: Arc<ServerStats>,
}

impl std::fmt::Debug for SecureServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureServer")
            .field("local_addr", &self.local_addr)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Binds a TCP listener on `addr` (port 0 picks a free port) and returns it with the address it
/// got; both listeners start this way.
pub(crate) async fn bind_tcp(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), ServerError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind {
            listener: super::Listener::Secure,
            addr,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| ServerError::Bind {
        listener: super::Listener::Secure,
        addr,
        source,
    })?;
    Ok((listener, local_addr))
}

impl SecureServer {
    /// Binds `addr` (port 0 picks a free port; see [`SecureServer::local_addr`]). Each
    /// handshake uses the configuration `tls` holds at that moment.
    pub async fn bind(
        addr: SocketAddr,
        tls: impl Into<TlsConfigCell>,
        limits: ConnectionLimits,
    ) -> Result<Self, ServerError> {
        let (listener, local_addr) = bind_tcp(addr).await?;
        Ok(Self {
            listener,
            local_addr,
            tls: tls.into(),
            limits,
            stats: Arc::default(),
        })
    }

    /// Binds 127.0.0.1 on a free port, for tests.
    pub async fn bind_loopback(
        tls: impl Into<TlsConfigCell>,
        limits: ConnectionLimits,
    ) -> Result<Self, ServerError> {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)), tls, limits).await
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The listener's counters.
    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// Serves until `shutdown`, then drains connections for at most the grace period.
    pub async fn serve(self, handler: Arc<dyn Handler>, mut shutdown: ShutdownSignal) {
        let ctx = Arc::new(connection::Context::new(
            self.tls,
            handler,
            self.limits,
            self.stats,
        ));
        let permits = Arc::new(Semaphore::new(
            ctx.limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
        ));
        let mut connections = JoinSet::new();
        tracing::info!(address = %self.local_addr, "Serving securely");
        loop {
            tokio::select! {
                biased;
                () = shutdown.triggered() => break,
                Some(done) = connections.join_next() => log_task_end(done),
                accepted = accept(&self.listener, &permits) => {
                    let Some((stream, remote_addr, permit)) = accepted else { continue };
                    ctx.stats.accepted.fetch_add(1, Ordering::Relaxed);
                    let conn = connection::serve(ctx.clone(), stream, remote_addr, shutdown.clone());
                    let span = tracing::debug_span!("connection", %remote_addr);
                    connections.spawn(
                        async move {
                            conn.await;
                            drop(permit);
                        }
                        .instrument(span),
                    );
                }
            }
        }
        drop(self.listener);
        tracing::info!(
            address = %self.local_addr,
            connections = connections.len(),
            "Stopped listening; draining connections"
        );
        drain(connections, ctx.limits.grace_period).await;
    }
}

/// Waits for a connection slot, then for a client. `None` after an accept error (already logged
/// and backed off), so that the caller's loop goes round again.
async fn accept(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
) -> Option<(tokio::net::TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let permit = permits
        .clone()
        .acquire_owned()
        .await
        .expect("invariant: the connection semaphore is never closed");
    match listener.accept().await {
        Ok((stream, remote_addr)) => Some((stream, remote_addr, permit)),
        Err(err) => {
            // Typically EMFILE/ENFILE: back off instead of spinning on the error.
            tracing::warn!(error = %err, "Accepting a connection failed");
            tokio::time::sleep(Duration::from_millis(100)).await;
            None
        }
    }
}

/// Waits for the connections to finish, closing what is left after `grace`.
async fn drain(mut connections: JoinSet<()>, grace: Duration) {
    let finished = tokio::time::timeout(grace, async {
        while let Some(done) = connections.join_next().await {
            log_task_end(done);
        }
    })
    .await;
    if finished.is_err() {
        tracing::warn!(
            connections = connections.len(),
            "Shutdown grace period over; closing the remaining connections"
        );
        connections.shutdown().await;
    }
}

fn log_task_end(done: Result<(), tokio::task::JoinError>) {
    if let Err(err) = done {
        if err.is_panic() {
            tracing::error!(error = %err, "A connection task panicked");
        }
    }
}
