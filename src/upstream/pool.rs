//! Reused connections to the one upstream, built on hyper's connection-level client.
//!
//! The proxy talks to exactly one server, so the pool needs no keys.
//!
//! **HTTP/2** (negotiated by ALPN): requests are multiplexed, but never beyond what the server
//! takes. Each connection's I/O passes through a [`FrameWatcher`](super::frames), which reads
//! the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (kube-apiserver: 250 unless
//! `--http2-max-streams-per-connection`; changes are honoured as they come) and its `GOAWAY`. A
//! request takes a stream slot on the first connection with one free and opens another
//! connection when none has, as client-go's transport does: an admitted request never waits in
//! the HTTP/2 client's own first-come-first-served queue, outside flow control. Ordinary requests
//! and long-running ones (watches) use separate sets of connections, so that watches, which hold
//! their streams for minutes, never take the streams of ordinary requests, and their
//! connections get flow-control windows sized for many quiet streams. A connection that sent
//! `GOAWAY` takes no new stream; its open streams finish, then it closes. A request that the
//! server certainly did not process (never sent, refused with `REFUSED_STREAM`, or a read above
//! the `GOAWAY`'s last stream) is sent again on another connection.
//!
//! **HTTP/1.1**: connections with no request in flight wait in a stack (the most recently used is
//! reused first, so surplus connections age out). A connection goes back to the stack when its
//! response body has been read to the end, not when the response head arrives: a body dropped
//! half-read, or a `101 Switching Protocols`, takes its connection with it. At most [`MAX_IDLE`]
//! are kept. A request that a reused connection could not send at all (the upstream closed it
//! while it was idle) is sent again on another connection, as hyper-util's
//! `retry_canceled_requests` does; a request that was sent, even in part, is never repeated.
//!
//! Every connection holds a permit of the client's [`ConnectionBudget`]; idle connections of
//! either protocol are closed after [`IDLE_TIMEOUT`].

mod body;
mod idle;
mod streams;

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderValue, HOST};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use hyper::client::conn::http1;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tower_service::Service;

use super::frames::{PeerSettings, WatchedFrames};
use super::limits::{ConnectionBudget, ConnectionPermit, Protocol, Route};
use super::UpstreamError;
use crate::body::ProxyBody;
pub use body::PooledBody;
use streams::{H2Conn, Refusal, Replay, StreamSlot};

/// How long an idle connection is kept.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle HTTP/1.1 connections kept at most.
pub(super) const MAX_IDLE: usize = 64;
/// How long connecting (TCP and TLS, then the server's first `SETTINGS`) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often one request is tried on another connection after one that did not take it.
const MAX_ATTEMPTS: usize = 3;

/// Connections to one upstream over one TLS identity.
pub(super) struct Pool {
    connector: HttpsConnector<HttpConnector>,
    /// The upstream's root URL (scheme and authority are what matter).
    server: Uri,
    scheme: Scheme,
    authority: Authority,
    /// `Host` for HTTP/1.1 requests: the upstream's authority without a default port.
    host: HeaderValue,
    /// Whether TLS connections offer `h2` by ALPN.
    offer_h2: bool,
    budget: Arc<ConnectionBudget>,
    state: Mutex<State>,
    /// Held while connecting (per HTTP/2 set) as long as the upstream may answer with `h2`, so
    /// that a burst of requests that find no free stream makes one connection, not one each.
    connecting: [tokio::sync::Mutex<()>; 2],
}

#[derive(Default)]
struct State {
    /// HTTP/1.1 connections with nothing in flight, the most recently used last.
    idle: Vec<idle::Idle>,
    /// HTTP/2 connections, for ordinary requests (0) and long-running ones (1).
    h2: [Vec<Arc<H2Conn>>; 2],
    /// Set when a TLS handshake settled on HTTP/1.1: connects need no longer be serialised.
    h1_only: bool,
    /// Whether the idle reaper task runs.
    reaping: bool,
}

/// A connection ready for one request.
enum Checkout {
    H1 {
        sender: http1::SendRequest<ProxyBody>,
        /// Whether it served a request before (then a request it could not send is retried).
        reused: bool,
    },
    H2(StreamSlot),
}

/// The HTTP/2 set a route's requests use.
fn h2_set(route: Route) -> usize {
    match route {
        Route::Short => 0,
        Route::LongRunning | Route::Upgrade => 1,
    }
}

// === impl Pool ===

impl Pool {
    pub(super) fn new(
        connector: HttpsConnector<HttpConnector>,
        server: Uri,
        offer_h2: bool,
        budget: Arc<ConnectionBudget>,
    ) -> Self {
        let scheme = server.scheme().cloned().unwrap_or(Scheme::HTTP);
        let authority = server
            .authority()
            .cloned()
            .unwrap_or_else(|| Authority::from_static("localhost"));
        let host = host_header(&scheme, &authority);
        let offer_h2 = offer_h2 && scheme == Scheme::HTTPS;
        Pool {
            connector,
            server,
            scheme,
            authority,
            host,
            offer_h2,
            budget,
            state: Mutex::new(State::default()),
            connecting: Default::default(),
        }
    }

    /// Sends `request` (its URI absolute or origin-form; only the path and query are used).
    pub(super) async fn send(
        self: &Arc<Self>,
        mut request: Request<ProxyBody>,
        route: Route,
    ) -> Result<Response<PooledBody>, UpstreamError> {
        let mut attempt = 1;
        loop {
            let again = attempt < MAX_ATTEMPTS;
            attempt += 1;
            match self.checkout(route).await? {
                Checkout::H1 { mut sender, reused } => {
                    self.h1_form(&mut request);
                    let mut unsent = match sender.try_send_request(request).await {
                        Ok(response) => return Ok(self.h1_response(response, sender)),
                        Err(error) => error,
                    };
                    match unsent.take_message() {
                        Some(message) if reused && again => {
                            tracing::debug!(error = %unsent.error(), "upstream connection closed while idle; sending again");
                            self.budget.stats().retried();
                            request = message;
                        }
                        _ => return Err(UpstreamError::BadGateway(Box::new(unsent.into_error()))),
                    }
                }
                Checkout::H2(slot) => {
                    self.h2_form(&mut request);
                    let replay = Replay::of(&request);
                    let mut failed = match slot.sender().try_send_request(request).await {
                        Ok(response) => return Ok(response.map(|b| PooledBody::h2(b, slot))),
                        Err(error) => error,
                    };
                    drop(slot);
                    let refusal = Refusal::of(failed.error());
                    request = match (failed.take_message(), replay) {
                        // Never handed to the connection (it closed first).
                        (Some(message), _) if again => message,
                        (_, Some(replay)) if again && refusal.allows(replay.method()) => {
                            replay.into_request()
                        }
                        _ if refusal == Refusal::Refused => {
                            return Err(UpstreamError::Unavailable(
                                format!(
                                    "the upstream refused the stream before processing it: {}",
                                    failed.error()
                                )
                                .into(),
                            ))
                        }
                        _ => return Err(UpstreamError::BadGateway(Box::new(failed.into_error()))),
                    };
                    tracing::debug!(error = %failed.error(), "upstream connection did not take the request; sending again");
                    self.budget.stats().retried();
                }
            }
        }
    }

    /// A connection ready for one request of `route`.
    async fn checkout(self: &Arc<Self>, route: Route) -> Result<Checkout, UpstreamError> {
        if let Some(found) = self.reuse(route).await {
            return Ok(found);
        }
        // Boxed: connecting is rare, and its future (TLS and HTTP/2 handshakes) is large enough
        // that carrying it inline would cost every request a copy of it.
        Box::pin(self.checkout_slow(route)).await
    }

    async fn checkout_slow(self: &Arc<Self>, route: Route) -> Result<Checkout, UpstreamError> {
        if !self.offer_h2 || self.state.lock().h1_only {
            return self.connect(route).await;
        }
        let _connecting = self.connecting[h2_set(route)].lock().await;
        if let Some(found) = self.reuse(route).await {
            return Ok(found);
        }
        self.connect(route).await
    }

    /// A free stream on an open HTTP/2 connection, or the most recent idle HTTP/1.1 connection
    /// that is still open.
    async fn reuse(&self, route: Route) -> Option<Checkout> {
        if let Some(slot) = self.reserve_stream(route) {
            return Some(Checkout::H2(slot));
        }
        loop {
            let idle = self.state.lock().idle.pop()?;
            if let Some(sender) = idle.ready().await {
                return Some(Checkout::H1 {
                    sender,
                    reused: true,
                });
            }
        }
    }

    /// A stream slot on the first connection of the route's set with one free; connections the
    /// server is closing leave the set.
    fn reserve_stream(&self, route: Route) -> Option<StreamSlot> {
        let mut state = self.state.lock();
        let set = &mut state.h2[h2_set(route)];
        if set.is_empty() {
            return None;
        }
        set.retain(|conn| conn.usable());
        set.iter().find_map(|conn| conn.try_reserve(route))
    }

    async fn connect(self: &Arc<Self>, route: Route) -> Result<Checkout, UpstreamError> {
        let permit = self.budget.try_open(route)?;
        let io = tokio::time::timeout(
            CONNECT_TIMEOUT,
            self.connector.clone().call(self.server.clone()),
        )
        .await
        .map_err(|_| self.unavailable(format!("no connection within {CONNECT_TIMEOUT:?}").into()))?
        .map_err(|e| self.unavailable(e))?;
        if io.connected().is_negotiated_h2() {
            let conn = self.handshake_h2(io, route, permit).await?;
            return conn.try_reserve(route).map(Checkout::H2).ok_or_else(|| {
                self.unavailable(
                    "the upstream allows no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0)".into(),
                )
            });
        }
        if self.offer_h2 {
            self.state.lock().h1_only = true;
        }
        let (sender, connection) = http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|e| self.unavailable(e.into()))?;
        let permit = permit.established(Protocol::Http1);
        tokio::spawn(async move {
            if let Err(error) = connection.with_upgrades().await {
                tracing::debug!(%error, "upstream HTTP/1.1 connection ended");
            }
            drop(permit);
        });
        Ok(Checkout::H1 {
            sender,
            reused: false,
        })
    }

    /// The HTTP/2 handshake, then the server's first `SETTINGS` (its stream limit), then the new
    /// connection joins the route's set.
    async fn handshake_h2<T>(
        self: &Arc<Self>,
        io: T,
        route: Route,
        permit: ConnectionPermit,
    ) -> Result<Arc<H2Conn>, UpstreamError>
    where
        T: hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
    {
        let peer = Arc::new(PeerSettings::new(Some(Arc::clone(self.budget.stats()))));
        let io = TokioIo::new(WatchedFrames::watch(TokioIo::new(io), Arc::clone(&peer)));
        let (sender, connection) = streams::builder(route)
            .handshake(io)
            .await
            .map_err(|e| self.unavailable(e.into()))?;
        let permit = permit.established(Protocol::Http2);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "upstream HTTP/2 connection ended");
            }
            drop(permit);
        });
        tokio::time::timeout(CONNECT_TIMEOUT, peer.settled())
            .await
            .map_err(|_| {
                self.unavailable(format!("no HTTP/2 SETTINGS within {CONNECT_TIMEOUT:?}").into())
            })?;
        let conn = Arc::new(H2Conn::new(sender, peer, Arc::clone(self.budget.stats())));
        if !conn.usable() {
            return Err(self.unavailable("the connection closed at once".into()));
        }
        let start_reaper = {
            let mut state = self.state.lock();
            state.h2[h2_set(route)].push(Arc::clone(&conn));
            !std::mem::replace(&mut state.reaping, true)
        };
        if start_reaper {
            tokio::spawn(reap(Arc::downgrade(self)));
        }
        Ok(conn)
    }

    fn unavailable(&self, error: BoxError) -> UpstreamError {
        UpstreamError::Unavailable(
            super::error::connect_failure(error.as_ref(), &self.scheme, &self.authority).into(),
        )
    }

    /// HTTP/1.1 wants origin-form (`/path?query`) and a `Host`.
    fn h1_form(&self, request: &mut Request<ProxyBody>) {
        if request.uri().scheme().is_some() {
            let path = request.uri().path_and_query().cloned();
            *request.uri_mut() = origin_form(path);
        }
        request
            .headers_mut()
            .entry(HOST)
            .or_insert_with(|| self.host.clone());
        *request.version_mut() = http::Version::HTTP_11;
    }

    /// HTTP/2 takes `:scheme` and `:authority` from an absolute URI.
    fn h2_form(&self, request: &mut Request<ProxyBody>) {
        if request.uri().scheme().is_none() {
            let mut parts = http::uri::Parts::default();
            parts.scheme = Some(self.scheme.clone());
            parts.authority = Some(self.authority.clone());
            parts.path_and_query = request.uri().path_and_query().cloned();
            if let Ok(uri) = Uri::from_parts(parts) {
                *request.uri_mut() = uri;
            }
        }
        request.headers_mut().remove(HOST);
        *request.version_mut() = http::Version::HTTP_2;
    }
}

use crate::body::BoxError;

/// Closes idle connections of both protocols after [`IDLE_TIMEOUT`], until the pool is gone.
async fn reap(pool: std::sync::Weak<Pool>) {
    const PERIODS: u32 = 3;
    let period = IDLE_TIMEOUT / PERIODS;
    loop {
        tokio::time::sleep(period).await;
        let Some(pool) = pool.upgrade() else { return };
        let mut state = pool.state.lock();
        state.idle.retain(idle::Idle::fresh);
        for set in &mut state.h2 {
            set.retain(|conn| conn.usable() && conn.idle_periods() < PERIODS);
            for conn in set.iter() {
                conn.tick_idle();
            }
        }
    }
}

fn origin_form(path: Option<PathAndQuery>) -> Uri {
    match path {
        Some(path) if path.as_str() != "/" => {
            let mut parts = http::uri::Parts::default();
            parts.path_and_query = Some(path);
            Uri::from_parts(parts).unwrap_or_default()
        }
        _ => Uri::default(),
    }
}

/// `host[:port]`, the port left out when it is the scheme's default (as Go and hyper-util send).
fn host_header(scheme: &Scheme, authority: &Authority) -> HeaderValue {
    let default_port = if *scheme == Scheme::HTTPS { 443 } else { 80 };
    let full = authority.as_str();
    let without_userinfo = full.rsplit_once('@').map_or(full, |(_, host)| host);
    let value = match authority.port_u16() {
        Some(port) if port != default_port => without_userinfo,
        _ => authority.host(),
    };
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static("localhost"))
}

#[cfg(test)]
mod tests;
