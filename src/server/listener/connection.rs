//! One client connection: TLS handshake, protocol by ALPN, request tracking, idle and graceful
//! shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::arrival::{too_late_to_start, Arrival, Counted};
use super::coalesce::Coalesced;
use super::gated::Gated;
use super::{ConnectionLimits, Negotiated, ServerStats};
use crate::server::shutdown::ShutdownSignal;
use crate::server::tls::TlsConfigCell;
use crate::server::{BoxError, ConnectionInfo, Handler, ProxyBody};

/// What every connection of one listener shares.
pub(super) struct Context {
    tls: TlsConfigCell,
    handler: Arc<dyn Handler>,
    pub(super) limits: ConnectionLimits,
    pub(super) stats: Arc<ServerStats>,
    builders: Builders,
}

impl Context {
    pub(super) fn new(
        tls: TlsConfigCell,
        handler: Arc<dyn Handler>,
        limits: ConnectionLimits,
        stats: Arc<ServerStats>,
    ) -> Self {
        let builders = Builders::new(&limits);
        Self {
            tls,
            handler,
            limits,
            stats,
            builders,
        }
    }
}

/// Serves one accepted TCP connection to its end; never panics on client misbehaviour.
pub(super) async fn serve(
    ctx: Arc<Context>,
    stream: TcpStream,
    remote_addr: SocketAddr,
    mut shutdown: ShutdownSignal,
) {
    let _active = ActiveConnection::enter(&ctx.stats);
    let _ = stream.set_nodelay(true);
    let handshake = tokio::time::timeout(
        ctx.limits.tls_handshake_timeout,
        TlsAcceptor::from(ctx.tls.current()).accept(stream),
    );
    let tls = tokio::select! {
        () = shutdown.triggered() => return,
        result = handshake => match result {
            Ok(Ok(tls)) => tls,
            Ok(Err(err)) => return handshake_failed(&ctx, &err.to_string()),
            Err(_elapsed) => return handshake_failed(&ctx, "timed out"),
        },
    };
    let session = tls.get_ref().1;
    ctx.stats.handshake_completed(Negotiated::of(session));
    let info = Arc::new(ConnectionInfo {
        remote_addr,
        peer_certificates: session.peer_certificates().map(|c| Arc::new(c.to_vec())),
    });
    tracing::debug!(
        alpn = session.alpn_protocol().map(String::from_utf8_lossy).as_deref(),
        tls_version = ?session.protocol_version(),
        client_certificate = info.peer_certificates.is_some(),
        "TLS established"
    );
    let http2 = session.alpn_protocol() == Some(b"h2");
    let builder = ctx.builders.for_alpn(session.alpn_protocol());
    let arrival = Arc::new(Arrival::default());
    let tls = Coalesced::new(Counted::new(tls, Arc::clone(&arrival)), http2);
    let activity = Arc::new(Activity::new());
    let service = ConnectionService {
        handler: ctx.handler.clone(),
        info,
        activity: Arc::clone(&activity),
    };
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
    tokio::pin!(conn);
    // The task wakes for every read and write of the connection; these two are polled only when
    // their own wake-ups fired.
    let idle = Gated::new(idle(Arc::clone(&activity), ctx.limits.idle_timeout));
    tokio::pin!(idle);
    // Armed by the idle GOAWAY: a client that never answers it (nor the PING hyper sends with
    // it) is not waited for.
    let after_goaway = tokio::time::sleep(Duration::MAX);
    tokio::pin!(after_goaway);
    let mut idle_goaway = false;
    let shutdown = Gated::new(shutdown.triggered());
    tokio::pin!(shutdown);
    let late = Gated::new(too_late_to_start(
        arrival,
        http2,
        ctx.limits.start_timeouts(),
    ));
    tokio::pin!(late);
    let mut closing = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "Connection ended with an error");
                }
                return;
            }
            () = &mut shutdown, if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            () = &mut late => {
                tracing::debug!(http2, "Closing a connection whose client did not start in time");
                return;
            }
            () = &mut idle, if !closing => {
                closing = true;
                idle_goaway = true;
                tracing::debug!("Closing an idle connection");
                conn.as_mut().graceful_shutdown();
                after_goaway.as_mut().reset(Instant::now() + GOAWAY_TIMEOUT);
            }
            () = &mut after_goaway, if idle_goaway => {
                if activity.idle_since().is_some() {
                    tracing::debug!("Closed an idle connection whose client did not close it after GOAWAY");
                    return;
                }
                // A request that came in before the GOAWAY is still running: it may finish.
                after_goaway.as_mut().reset(Instant::now() + GOAWAY_TIMEOUT);
            }
        }
    }
}

fn handshake_failed(ctx: &Context, error: &str) {
    ctx.stats
        .tls_handshake_errors
        .fetch_add(1, Ordering::Relaxed);
    tracing::debug!(error, "TLS handshake failed");
}

/// How long an idle connection is kept after its GOAWAY when the client neither closes it nor
/// answers the PING sent with it: Go's `goAwayTimeout` (its HTTP/2 server closes the connection
/// 1 s after the idle GOAWAY, so kube-apiserver holds an idle connection about 91 s). HTTP/1.1
/// connections close at once when idle.
const GOAWAY_TIMEOUT: Duration = Duration::from_secs(1);

/// Completes once no request has been in flight for `timeout`.
///
/// Requests only touch two atomics; this future wakes once per `timeout` at most, rather than
/// on every request's start and end (a timer armed and cancelled per request showed up in
/// profiles of the request path).
async fn idle(activity: Arc<Activity>, timeout: Duration) {
    let mut deadline = activity.started + timeout;
    loop {
        tokio::time::sleep_until(deadline).await;
        let now = Instant::now();
        deadline = match activity.idle_since() {
            Some(since) if since + timeout <= now => return,
            Some(since) => since + timeout,
            None => now + timeout,
        };
    }
}

/// Requests in flight on one connection and when the last one ended.
#[derive(Debug)]
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Nanoseconds from `started` to the end of the last request.
    idle_since_nanos: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since_nanos: AtomicU64::new(0),
        }
    }

    fn enter(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    fn exit(&self) {
        // Stored before the count drops, so whoever sees zero also sees this end.
        let nanos = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.idle_since_nanos.fetch_max(nanos, Ordering::SeqCst);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    /// When the connection became idle; `None` while a request is in flight.
    fn idle_since(&self) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let nanos = self.idle_since_nanos.load(Ordering::SeqCst);
        Some(self.started + Duration::from_nanos(nanos))
    }
}

/// hyper's own limit on headers per HTTP/1 request (`DEFAULT_MAX_HEADERS` in hyper's `h1::role`).
pub(super) const HYPER_DEFAULT_MAX_HEADERS: usize = 100;

/// The default limit on headers per HTTP/1 request. Go's server counts only bytes (1 MiB,
/// `DefaultMaxHeaderBytes`), and kube-apiserver accepts a request with hundreds of headers
/// (kubectl `exec --as-group` …, SPDY, always HTTP/1.1); hyper answers 431 past its count. 8192
/// headers of a typical group (`Impersonate-Group: team-…`, ~40 bytes) are a third of the byte
/// limit; each slot of hyper's parse arrays costs 64 bytes of uninitialised memory while a
/// request head is parsed (512 KiB, allocated but not touched beyond the headers present).
pub(super) const DEFAULT_MAX_HEADERS: usize = 8192;

/// The three protocol configurations: by ALPN, or sniffed when the client offered none.
struct Builders {
    sniff: auto::Builder<TokioExecutor>,
    http1: auto::Builder<TokioExecutor>,
    http2: auto::Builder<TokioExecutor>,
}

impl Builders {
    fn new(limits: &ConnectionLimits) -> Self {
        let mut sniff = auto::Builder::new(TokioExecutor::new());
        let mut http1 = sniff.http1();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_buf_size(limits.max_header_bytes.max(8192))
            .keep_alive(true);
        // hyper parses into a stack array of its default size (100) unless a limit is set; any
        // explicit limit, even 100, costs two heap allocations per request.
        if limits.max_headers != HYPER_DEFAULT_MAX_HEADERS {
            http1.max_headers(limits.max_headers);
        }
        let connection_window = limits
            .http2_max_frame_size
            .saturating_mul(limits.http2_max_concurrent_streams.max(1))
            .min(i32::MAX as u32);
        sniff
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.http2_max_concurrent_streams)
            .max_header_list_size(limits.http2_max_header_list_size)
            .max_frame_size(limits.http2_max_frame_size)
            .initial_stream_window_size(limits.http2_max_frame_size)
            .initial_connection_window_size(connection_window)
            .max_pending_accept_reset_streams(limits.http2_max_pending_accept_reset_streams)
            .max_local_error_reset_streams(limits.http2_max_local_error_reset_streams)
            .keep_alive_interval(limits.http2_keep_alive_interval)
            .keep_alive_timeout(limits.http2_keep_alive_timeout);
        Self {
            http1: sniff.clone().http1_only(),
            http2: sniff.clone().http2_only(),
            sniff,
        }
    }

    fn for_alpn(&self, alpn: Option<&[u8]>) -> &auto::Builder<TokioExecutor> {
        match alpn {
            Some(b"h2") => &self.http2,
            Some(b"http/1.1") => &self.http1,
            _ => &self.sniff,
        }
    }
}

/// Counts a connection as active while it lives.
struct ActiveConnection<'a>(&'a ServerStats);

impl<'a> ActiveConnection<'a> {
    fn enter(stats: &'a ServerStats) -> Self {
        stats.active.fetch_add(1, Ordering::Relaxed);
        Self(stats)
    }
}

impl Drop for ActiveConnection<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The per-connection hyper service: gives the handler the `ConnectionInfo`, tracks requests in
/// flight.
struct ConnectionService {
    handler: Arc<dyn Handler>,
    info: Arc<ConnectionInfo>,
    activity: Arc<Activity>,
}

impl hyper::service::Service<Request<Incoming>> for ConnectionService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = TrackedResponse;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let guard = InFlight::enter(Arc::clone(&self.activity));
        TrackedResponse {
            response: self.handler.handle_on(request, &self.info),
            guard: Some(guard),
        }
    }
}

/// The handler's response, whose body then keeps the request counted as in flight. A named
/// future rather than an `async` block: the handler's future is already boxed, and boxing a
/// wrapper around it again would cost an allocation per request.
struct TrackedResponse {
    response: BoxFuture<'static, Response<ProxyBody>>,
    guard: Option<InFlight>,
}

impl Future for TrackedResponse {
    type Output = Result<Response<TrackedBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let response = std::task::ready!(self.response.as_mut().poll(cx));
        let guard = self.guard.take();
        Poll::Ready(Ok(response.map(|inner| TrackedBody {
            inner,
            _guard: guard,
        })))
    }
}

/// One request in flight: from the call until its response body is finished or dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn enter(activity: Arc<Activity>) -> Self {
        activity.enter();
        Self(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.exit();
    }
}

/// A response body that keeps its request counted as in flight.
struct TrackedBody {
    inner: ProxyBody,
    _guard: Option<InFlight>,
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
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
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(90);

    /// When `idle` completes, measured from the start, with a request in flight over `busy`
    /// (seconds from the start).
    async fn closes_after(busy: Option<(u64, u64)>) -> u64 {
        let start = Instant::now();
        let activity = Arc::new(Activity::new());
        let idle = tokio::spawn(idle(Arc::clone(&activity), TIMEOUT));
        if let Some((from, to)) = busy {
            tokio::time::sleep(Duration::from_secs(from)).await;
            let guard = InFlight::enter(Arc::clone(&activity));
            tokio::time::sleep(Duration::from_secs(to - from)).await;
            drop(guard);
        }
        idle.await.expect("idle task");
        start.elapsed().as_secs()
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_requests_is_idle_after_the_timeout() {
        assert_eq!(closes_after(None).await, 90);
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_timeout_counts_from_the_end_of_the_last_request() {
        // Ends before the first check, during a check period, and after several periods.
        assert_eq!(closes_after(Some((10, 30))).await, 120);
        assert_eq!(closes_after(Some((80, 100))).await, 190);
        assert_eq!(closes_after(Some((1, 400))).await, 490);
    }
}
