//! Reused connections to the one upstream, built on hyper's connection-level client.
//!
//! The proxy talks to exactly one server, so the pool needs no keys: HTTP/1.1 connections with no
//! request in flight wait in a stack (the most recently used is reused first, so surplus
//! connections age out), and once a TLS handshake negotiates `h2`, every request shares that one
//! HTTP/2 connection, as hyper-util's pool and Go's transport do.
//!
//! An HTTP/1.1 connection goes back to the stack when its response body has been read to the
//! end, not when the response head arrives: a connection is only reusable once the body is off
//! the wire. A body dropped half-read, or a `101 Switching Protocols`, takes its connection with
//! it. Idle connections are closed after [`IDLE_TIMEOUT`], at most [`MAX_IDLE`] are kept.
//!
//! A request that a reused connection could not send at all (the upstream closed it while it was
//! idle) is sent again on another connection, as hyper-util's `retry_canceled_requests` does; a
//! request that was sent, even in part, is never repeated.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, HOST};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, StatusCode, Uri};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::time::Instant;
use tower_service::Service;

use crate::proxy::{ProxyBody, UpstreamError};

/// How long an idle connection is kept.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle HTTP/1.1 connections kept at most.
pub(super) const MAX_IDLE: usize = 64;
/// How long connecting (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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
    state: Mutex<State>,
    /// Held while connecting as long as the upstream may still answer with `h2`, so that a burst of
    /// first requests makes one connection, not one each.
    connecting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// HTTP/1.1 connections with nothing in flight, the most recently used last.
    idle: Vec<Idle>,
    /// The HTTP/2 connection every request shares, once one was negotiated.
    h2: Option<http2::SendRequest<ProxyBody>>,
    /// Set when a TLS handshake settled on HTTP/1.1: connects need no longer be serialised.
    h1_only: bool,
    /// Whether the idle reaper task runs.
    reaping: bool,
}

struct Idle {
    sender: http1::SendRequest<ProxyBody>,
    since: Instant,
}

enum Conn {
    H1(http1::SendRequest<ProxyBody>),
    H2(http2::SendRequest<ProxyBody>),
}

// === impl Pool ===

impl Pool {
    pub(super) fn new(
        connector: HttpsConnector<HttpConnector>,
        server: Uri,
        offer_h2: bool,
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
            state: Mutex::new(State::default()),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// Sends `request` (its URI absolute or origin-form; only the path and query are used).
    pub(super) async fn send(
        self: &Arc<Self>,
        mut request: Request<ProxyBody>,
    ) -> Result<Response<PooledBody>, UpstreamError> {
        loop {
            let (conn, reused) = self.checkout().await?;
            let unsent = match conn {
                Conn::H1(mut sender) => {
                    self.h1_form(&mut request);
                    match sender.try_send_request(request).await {
                        Ok(response) => return Ok(self.h1_response(response, sender)),
                        Err(error) => error,
                    }
                }
                Conn::H2(mut sender) => {
                    self.h2_form(&mut request);
                    match sender.try_send_request(request).await {
                        Ok(response) => return Ok(response.map(PooledBody::unpooled)),
                        Err(error) => {
                            self.forget_h2();
                            error
                        }
                    }
                }
            };
            let mut unsent = unsent;
            match unsent.take_message() {
                Some(again) if reused => {
                    tracing::debug!(error = %unsent.error(), "upstream connection closed while idle; sending again");
                    request = again;
                }
                _ => return Err(UpstreamError::BadGateway(Box::new(unsent.into_error()))),
            }
        }
    }

    /// A ready connection and whether it was used before.
    async fn checkout(self: &Arc<Self>) -> Result<(Conn, bool), UpstreamError> {
        if let Some(found) = self.reuse().await {
            return Ok((found, true));
        }
        // Boxed: connecting is rare, and its future (TLS and HTTP/2 handshakes) is large enough
        // that carrying it inline would cost every request a copy of it.
        Box::pin(self.checkout_slow()).await
    }

    async fn checkout_slow(self: &Arc<Self>) -> Result<(Conn, bool), UpstreamError> {
        if !self.offer_h2 || self.lock().h1_only {
            return Ok((self.connect().await?, false));
        }
        let _connecting = self.connecting.lock().await;
        if let Some(found) = self.reuse().await {
            return Ok((found, true));
        }
        Ok((self.connect().await?, false))
    }

    /// The shared HTTP/2 connection, or the most recent idle HTTP/1.1 one that is still open.
    async fn reuse(&self) -> Option<Conn> {
        loop {
            let idle = {
                let mut state = self.lock();
                if let Some(h2) = &state.h2 {
                    if !h2.is_closed() {
                        return Some(Conn::H2(h2.clone()));
                    }
                    state.h2 = None;
                }
                state.idle.pop()?
            };
            if idle.since.elapsed() >= IDLE_TIMEOUT {
                continue;
            }
            let mut sender = idle.sender;
            if sender.ready().await.is_ok() {
                return Some(Conn::H1(sender));
            }
        }
    }

    async fn connect(self: &Arc<Self>) -> Result<Conn, UpstreamError> {
        let unavailable = |error: BoxError| {
            UpstreamError::Unavailable(format!("connecting to {}: {error}", self.authority).into())
        };
        let io = tokio::time::timeout(
            CONNECT_TIMEOUT,
            self.connector.clone().call(self.server.clone()),
        )
        .await
        .map_err(|_| unavailable(format!("no connection within {CONNECT_TIMEOUT:?}").into()))?
        .map_err(unavailable)?;
        if io.connected().is_negotiated_h2() {
            let (sender, connection) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await
                .map_err(|e| unavailable(e.into()))?;
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "upstream HTTP/2 connection ended");
                }
            });
            self.lock().h2 = Some(sender.clone());
            return Ok(Conn::H2(sender));
        }
        if self.offer_h2 {
            self.lock().h1_only = true;
        }
        let (sender, connection) = http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|e| unavailable(e.into()))?;
        tokio::spawn(async move {
            if let Err(error) = connection.with_upgrades().await {
                tracing::debug!(%error, "upstream HTTP/1.1 connection ended");
            }
        });
        Ok(Conn::H1(sender))
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

    fn h1_response(
        self: &Arc<Self>,
        response: Response<Incoming>,
        sender: http1::SendRequest<ProxyBody>,
    ) -> Response<PooledBody> {
        // After a 101 the connection belongs to the upgrade.
        let giveback = (response.status() != StatusCode::SWITCHING_PROTOCOLS).then(|| Giveback {
            pool: Arc::downgrade(self),
            sender,
        });
        response.map(|body| PooledBody::new(body, giveback))
    }

    /// Drops the shared HTTP/2 connection once it is closed (a failed send's sender is a clone of
    /// it, so the stored one tells).
    fn forget_h2(&self) {
        let mut state = self.lock();
        if state.h2.as_ref().is_some_and(|h2| h2.is_closed()) {
            state.h2 = None;
        }
    }

    /// Takes back an HTTP/1.1 connection whose response was read to the end.
    fn put(self: &Arc<Self>, sender: http1::SendRequest<ProxyBody>) {
        if sender.is_closed() {
            return;
        }
        if !sender.is_ready() {
            // The connection task has not yet seen the end of the exchange (or the request body
            // is still being sent): wait for it without holding up the caller.
            let pool = Arc::downgrade(self);
            let mut sender = sender;
            tokio::spawn(async move {
                if sender.ready().await.is_ok() {
                    if let Some(pool) = pool.upgrade() {
                        pool.put_ready(sender);
                    }
                }
            });
            return;
        }
        self.put_ready(sender);
    }

    fn put_ready(self: &Arc<Self>, sender: http1::SendRequest<ProxyBody>) {
        let start_reaper = {
            let mut state = self.lock();
            if state.idle.len() >= MAX_IDLE {
                state.idle.remove(0);
            }
            state.idle.push(Idle {
                sender,
                since: Instant::now(),
            });
            !std::mem::replace(&mut state.reaping, true)
        };
        if start_reaper {
            tokio::spawn(reap(Arc::downgrade(self)));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Closes idle connections older than [`IDLE_TIMEOUT`] until the pool is gone.
async fn reap(pool: Weak<Pool>) {
    let period = IDLE_TIMEOUT / 3;
    loop {
        tokio::time::sleep(period).await;
        let Some(pool) = pool.upgrade() else { return };
        let mut state = pool.lock();
        state
            .idle
            .retain(|idle| idle.since.elapsed() < IDLE_TIMEOUT && !idle.sender.is_closed());
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

/// Where a finished HTTP/1.1 body returns its connection.
struct Giveback {
    pool: Weak<Pool>,
    sender: http1::SendRequest<ProxyBody>,
}

impl Giveback {
    fn give(self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.put(self.sender);
        }
    }
}

/// An upstream response body that returns its HTTP/1.1 connection to the pool once read to the
/// end (and closes it if dropped before).
pub struct PooledBody {
    inner: Incoming,
    giveback: Option<Giveback>,
}

impl PooledBody {
    fn new(inner: Incoming, giveback: Option<Giveback>) -> Self {
        let mut body = PooledBody { inner, giveback };
        if body.inner.is_end_stream() {
            // Nothing to read (HEAD, 204, 304, `Content-Length: 0`): the connection is free now,
            // even if no one ever polls this body.
            body.give_back();
        }
        body
    }

    fn unpooled(inner: Incoming) -> Self {
        PooledBody {
            inner,
            giveback: None,
        }
    }

    fn give_back(&mut self) {
        if let Some(giveback) = self.giveback.take() {
            giveback.give();
        }
    }
}

impl std::fmt::Debug for PooledBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBody")
            .field("pooled", &self.giveback.is_some())
            .finish_non_exhaustive()
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => this.give_back(),
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.give_back(),
            // An error leaves the connection in an unknown state: it is dropped with the body.
            Poll::Ready(Some(Err(_))) => this.giveback = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::{BodyExt, Full};
    use hyper::service::service_fn;
    use hyper_rustls::HttpsConnectorBuilder;
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::proxy::empty_body;

    /// A plain-HTTP upstream on port 0 that counts the connections it accepts.
    struct Upstream {
        addr: SocketAddr,
        accepted: Arc<AtomicUsize>,
    }

    impl Upstream {
        /// hyper with keep-alive: `/big` answers 256 KiB, anything else `ok`.
        async fn keep_alive() -> Self {
            Self::start(|stream| async move {
                let service = service_fn(|request: Request<Incoming>| async move {
                    let body = if request.uri().path() == "/big" {
                        Bytes::from(vec![b'x'; 256 * 1024])
                    } else {
                        Bytes::from_static(b"ok")
                    };
                    Ok::<_, Infallible>(Response::new(Full::new(body)))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            })
            .await
        }

        /// Answers one request per connection (without `Connection: close`), then closes it: a
        /// keep-alive connection that the upstream drops while the proxy holds it idle.
        async fn one_request_per_connection() -> Self {
            Self::start(|mut stream| async move {
                let mut buf = [0u8; 4096];
                let mut read = 0;
                while !buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read += n,
                    }
                }
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
            })
            .await
        }

        async fn start<F, Fut>(serve: F) -> Self
        where
            F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
            Fut: std::future::Future<Output = ()> + Send + 'static,
        {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let accepted = Arc::new(AtomicUsize::new(0));
            let counter = accepted.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    counter.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(serve(stream));
                }
            });
            Upstream { addr, accepted }
        }

        fn pool(&self) -> Arc<Pool> {
            let mut http = HttpConnector::new();
            http.enforce_http(false);
            let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
            let connector = HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .wrap_connector(http);
            let server = format!("http://{}", self.addr).parse().expect("uri");
            Arc::new(Pool::new(connector, server, true))
        }

        fn accepted(&self) -> usize {
            self.accepted.load(Ordering::SeqCst)
        }
    }

    fn request(method: http::Method, path: &str) -> Request<ProxyBody> {
        Request::builder()
            .method(method)
            .uri(path)
            .body(empty_body())
            .expect("request")
    }

    async fn get(pool: &Arc<Pool>, path: &str) -> Bytes {
        let response = pool
            .send(request(http::Method::GET, path))
            .await
            .expect("send");
        assert_eq!(response.status(), StatusCode::OK);
        response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
    }

    #[tokio::test]
    async fn sequential_requests_share_one_connection() {
        let upstream = Upstream::keep_alive().await;
        let pool = upstream.pool();
        for _ in 0..5 {
            assert_eq!(get(&pool, "/").await, "ok");
            assert_eq!(get(&pool, "/big").await.len(), 256 * 1024);
        }
        assert_eq!(upstream.accepted(), 1);
    }

    #[tokio::test]
    async fn a_body_dropped_half_read_takes_its_connection_with_it() {
        let upstream = Upstream::keep_alive().await;
        let pool = upstream.pool();
        let response = pool
            .send(request(http::Method::GET, "/big"))
            .await
            .expect("send");
        let mut body = response.into_body();
        let first = body.frame().await.expect("a frame").expect("data");
        assert!(first.data_ref().is_some_and(|d| d.len() < 256 * 1024));
        drop(body);
        assert_eq!(get(&pool, "/").await, "ok");
        assert_eq!(
            upstream.accepted(),
            2,
            "the half-read connection was not reused"
        );
        assert_eq!(get(&pool, "/").await, "ok");
        assert_eq!(upstream.accepted(), 2);
    }

    #[tokio::test]
    async fn bodiless_responses_return_their_connection_unread() {
        let upstream = Upstream::keep_alive().await;
        let pool = upstream.pool();
        for _ in 0..3 {
            // hyper sends no body for HEAD; nobody polls this one.
            let response = pool
                .send(request(http::Method::HEAD, "/"))
                .await
                .expect("send");
            assert_eq!(response.status(), StatusCode::OK);
        }
        assert_eq!(get(&pool, "/").await, "ok");
        assert_eq!(upstream.accepted(), 1);
    }

    #[tokio::test]
    async fn a_connection_closed_while_idle_is_replaced_without_an_error() {
        let upstream = Upstream::one_request_per_connection().await;
        let pool = upstream.pool();
        for n in 1..=4 {
            assert_eq!(get(&pool, "/").await, "ok", "request {n}");
            // Let the connection task see the close, as happens between real requests.
            tokio::task::yield_now().await;
        }
        assert_eq!(upstream.accepted(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_connections_are_closed_after_the_idle_timeout() {
        let upstream = Upstream::keep_alive().await;
        let pool = upstream.pool();
        assert_eq!(get(&pool, "/").await, "ok");
        tokio::task::yield_now().await;
        assert_eq!(pool.lock().idle.len(), 1);
        tokio::time::sleep(IDLE_TIMEOUT + IDLE_TIMEOUT / 2).await;
        assert_eq!(pool.lock().idle.len(), 0, "the reaper closed it");
        assert_eq!(get(&pool, "/").await, "ok");
        assert_eq!(upstream.accepted(), 2);
    }

    #[tokio::test]
    async fn at_most_max_idle_connections_are_kept() {
        let upstream = Upstream::keep_alive().await;
        let pool = upstream.pool();
        let responses = futures_util::future::join_all(
            (0..MAX_IDLE + 8).map(|_| pool.send(request(http::Method::GET, "/big"))),
        )
        .await;
        for response in responses {
            let body = response
                .expect("send")
                .into_body()
                .collect()
                .await
                .expect("body");
            assert_eq!(body.to_bytes().len(), 256 * 1024);
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(upstream.accepted(), MAX_IDLE + 8);
        assert!(pool.lock().idle.len() <= MAX_IDLE);
    }

    #[test]
    fn host_header_leaves_out_default_ports() {
        let cases = [
            ("http", "10.0.0.1:80", "10.0.0.1"),
            ("http", "10.0.0.1:8080", "10.0.0.1:8080"),
            ("https", "api.example:443", "api.example"),
            ("https", "api.example:6443", "api.example:6443"),
            ("https", "api.example", "api.example"),
            ("https", "[::1]:6443", "[::1]:6443"),
        ];
        for (scheme, authority, want) in cases {
            let scheme: Scheme = scheme.parse().unwrap();
            let authority: Authority = authority.parse().unwrap();
            assert_eq!(
                host_header(&scheme, &authority),
                want,
                "{scheme}://{authority}"
            );
        }
    }

    #[test]
    fn origin_form_keeps_path_and_query() {
        let path = |s: &str| Some(s.parse::<PathAndQuery>().expect("path"));
        assert_eq!(
            origin_form(path("/api/v1/pods?watch=1")),
            "/api/v1/pods?watch=1"
        );
        assert_eq!(origin_form(path("/")), "/");
        assert_eq!(origin_form(None), "/");
    }
}
