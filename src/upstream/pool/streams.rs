//! The HTTP/2 side of the pool: connections with their stream slots, the builder's windows, and
//! which failures mean the server never processed a request.

use std::error::Error as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Method, Request, Uri, Version};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::body::{empty_body, ProxyBody};
use crate::upstream::frames::PeerSettings;
use crate::upstream::limits::{Route, UpstreamStats};

/// The connection-level receive window: large enough that the streams of one connection never
/// wait on each other (Go's HTTP/2 transport, and so client-go, uses the same 1 GiB). Only a
/// window: memory is taken by data actually buffered, bounded per stream below.
const CONNECTION_WINDOW: u32 = 1 << 30;
/// The per-stream receive window of ordinary requests: Go's transport's 4 MiB, so that a large
/// list streams at full speed.
const SHORT_STREAM_WINDOW: u32 = 4 << 20;
/// The per-stream receive window of watches: kube-apiserver's own per-stream buffer (256 KiB).
/// A watch whose client stops reading holds at most this much in the proxy, and its neighbours
/// on the connection are not held back (the connection window covers every stream).
const WATCH_STREAM_WINDOW: u32 = 256 << 10;
/// Keep-alive pings on an idle connection find an upstream that went away without a word;
/// client-go's `ReadIdleTimeout` and `PingTimeout`.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(15);

/// hyper's HTTP/2 client settings for a route's connections.
pub(super) fn builder(route: Route) -> http2::Builder<TokioExecutor> {
    let stream_window = match route {
        Route::Short => SHORT_STREAM_WINDOW,
        Route::LongRunning | Route::Upgrade => WATCH_STREAM_WINDOW,
    };
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .initial_stream_window_size(stream_window)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    builder
}

/// One HTTP/2 connection and the streams the pool has open on it.
pub(super) struct H2Conn {
    sender: http2::SendRequest<ProxyBody>,
    peer: Arc<PeerSettings>,
    /// Streams open (slots handed out and not yet returned).
    in_use: AtomicU32,
    /// Reaper periods passed with no stream open.
    idle_periods: AtomicU32,
    stats: Arc<UpstreamStats>,
}

impl H2Conn {
    pub(super) fn new(
        sender: http2::SendRequest<ProxyBody>,
        peer: Arc<PeerSettings>,
        stats: Arc<UpstreamStats>,
    ) -> Self {
        Self {
            sender,
            peer,
            in_use: AtomicU32::new(0),
            idle_periods: AtomicU32::new(0),
            stats,
        }
    }

    /// Whether new streams may go here: open and not going away.
    pub(super) fn usable(&self) -> bool {
        !self.peer.going_away() && !self.sender.is_closed()
    }

    /// A slot for one stream, if the server's limit leaves one.
    pub(super) fn try_reserve(self: &Arc<Self>, route: Route) -> Option<StreamSlot> {
        if !self.usable() {
            return None;
        }
        let limit = self.peer.max_concurrent_streams();
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()?;
        self.idle_periods.store(0, Ordering::Relaxed);
        self.stats.stream_opened(route);
        Some(StreamSlot {
            conn: Arc::clone(self),
            route,
        })
    }

    pub(super) fn idle_periods(&self) -> u32 {
        self.idle_periods.load(Ordering::Relaxed)
    }

    /// One more reaper period: counted when no stream is open.
    pub(super) fn tick_idle(&self) {
        if self.in_use.load(Ordering::Acquire) == 0 {
            self.idle_periods.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[cfg(test)]
    pub(super) fn in_use(&self) -> u32 {
        self.in_use.load(Ordering::Acquire)
    }
}

/// One stream's share of a connection, returned when dropped (the response body ended, failed or
/// was dropped, or the request failed).
pub(crate) struct StreamSlot {
    conn: Arc<H2Conn>,
    route: Route,
}

impl StreamSlot {
    /// A sender on the slot's connection.
    pub(super) fn sender(&self) -> http2::SendRequest<ProxyBody> {
        self.conn.sender.clone()
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.conn.in_use.fetch_sub(1, Ordering::AcqRel);
        self.conn.stats.stream_closed(self.route);
    }
}

/// What a failed HTTP/2 exchange says about whether the server processed the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// `RST_STREAM(REFUSED_STREAM)`: certainly not processed (RFC 9113 §8.7).
    Refused,
    /// The connection went away under the request: the server's `GOAWAY` ended the stream (not
    /// processed if the stream was above the frame's last stream ID, which hyper does not tell),
    /// or hyper dropped the request as the connection closed. Only safe methods are sent again.
    Interrupted,
    /// Anything else: the request may have been processed.
    Unknown,
}

impl Refusal {
    pub(super) fn of(error: &hyper::Error) -> Self {
        let mut source = error.source();
        while let Some(cause) = source {
            if let Some(h2) = cause.downcast_ref::<::h2::Error>() {
                if h2.reason() == Some(::h2::Reason::REFUSED_STREAM) && h2.is_remote() {
                    return Refusal::Refused;
                }
                if h2.is_go_away() && h2.is_remote() {
                    return Refusal::Interrupted;
                }
                return Refusal::Unknown;
            }
            source = cause.source();
        }
        if error.is_canceled() {
            return Refusal::Interrupted;
        }
        Refusal::Unknown
    }

    /// Whether a request of `method` may be sent again after this failure.
    pub(super) fn allows(self, method: &Method) -> bool {
        match self {
            Refusal::Refused => true,
            Refusal::Interrupted => matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS),
            Refusal::Unknown => false,
        }
    }
}

/// What it takes to send a body-less request again.
pub(super) struct Replay {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
}

impl Replay {
    /// A copy of `request` when it has no body (most reads, every watch); `None` otherwise (a
    /// body is streamed from the caller and cannot be read twice).
    pub(super) fn of(request: &Request<ProxyBody>) -> Option<Self> {
        use http_body::Body as _;
        request.body().is_end_stream().then(|| Replay {
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: request.headers().clone(),
        })
    }

    pub(super) fn method(&self) -> &Method {
        &self.method
    }

    pub(super) fn into_request(self) -> Request<ProxyBody> {
        let mut request = Request::new(empty_body());
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers;
        request
    }
}
