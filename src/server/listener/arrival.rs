//! Whether a client starts speaking in time after its TLS handshake, as Go's `http.Server` and
//! `http2.Server` (as `pkg/server/secure_serving.go` configures them) require:
//!
//! - HTTP/1.1: the first request's header read starts right after the handshake, with
//!   `ReadHeaderTimeout` (32 s): a client that sends nothing is closed then. (hyper's own header
//!   timeout starts with the first byte, so without this such a client was held for the idle
//!   timeout, 90 s.)
//! - HTTP/2: the client preface within `prefaceTimeout` (10 s), then its first SETTINGS frame
//!   within `firstSettingsTimeout` (2 s) — Go's `http2/server.go` constants. (hyper waited for
//!   the idle timeout, 90 s, or more.)
//!
//! Counting stops once the bytes that matter have arrived, so a connection pays an atomic add
//! per read for its first few reads only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::read_tap::{ReadObserver, ReadTap};

/// `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
const PREFACE_LEN: usize = 24;
/// An HTTP/2 frame header: the client's first frame after the preface must be SETTINGS.
const FRAME_HEADER_LEN: usize = 9;
/// Past this many bytes nothing is counted any more.
const COUNTED: usize = PREFACE_LEN + FRAME_HEADER_LEN;

/// How long a client may take to start speaking after its handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartTimeouts {
    /// HTTP/1.1 (and no ALPN): the first byte of the first request (`ReadHeaderTimeout`, 32 s).
    pub first_request: Duration,
    /// HTTP/2: the client preface (Go's `prefaceTimeout`, 10 s).
    pub http2_preface: Duration,
    /// HTTP/2: the first SETTINGS frame after the preface (Go's `firstSettingsTimeout`, 2 s).
    pub http2_settings: Duration,
}

/// The bytes a client has sent so far (up to [`COUNTED`]).
#[derive(Debug, Default)]
pub(super) struct Arrival {
    read: AtomicUsize,
    more: Notify,
}

impl Arrival {
    /// Whether `bytes` have arrived by `deadline`.
    async fn reached(&self, bytes: usize, deadline: Instant) -> bool {
        loop {
            if self.read.load(Ordering::SeqCst) >= bytes {
                return true;
            }
            // A notification between the load and this wait is kept as a permit.
            if tokio::time::timeout_at(deadline, self.more.notified())
                .await
                .is_err()
            {
                return self.read.load(Ordering::SeqCst) >= bytes;
            }
        }
    }

    fn add(&self, bytes: usize) {
        if bytes > 0 && self.read.load(Ordering::Relaxed) < COUNTED {
            self.read.fetch_add(bytes, Ordering::SeqCst);
            self.more.notify_one();
        }
    }
}

/// Completes when the client did not start speaking in time (the connection is then dropped);
/// pends forever once it did.
pub(super) async fn too_late_to_start(arrival: Arc<Arrival>, http2: bool, limits: StartTimeouts) {
    let start = Instant::now();
    let started = if http2 {
        arrival
            .reached(PREFACE_LEN, start + limits.http2_preface)
            .await
            && arrival
                .reached(COUNTED, Instant::now() + limits.http2_settings)
                .await
    } else {
        arrival.reached(1, start + limits.first_request).await
    };
    if started {
        std::future::pending::<()>().await;
    }
}

/// An I/O stream whose reads are counted into an [`Arrival`].
pub(super) type Counted<IO> = ReadTap<IO, Arc<Arrival>>;

impl ReadObserver for Arc<Arrival> {
    fn read(&mut self, bytes: &[u8]) {
        self.add(bytes.len());
    }
}
