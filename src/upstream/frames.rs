//! The two frames of an HTTP/2 server that the pool acts on, read as they pass to hyper.
//!
//! hyper does not tell its caller what the server's `SETTINGS` say, and queues requests beyond
//! the server's `SETTINGS_MAX_CONCURRENT_STREAMS` first come first served, outside flow control.
//! The pool therefore reads the decrypted bytes on their way from the TLS session to hyper: a
//! [`FrameWatcher`] walks the frame headers, skips every payload but two, and reports
//! [`Event::MaxConcurrentStreams`] (from `SETTINGS`) and [`Event::GoAway`]. It sees each frame a
//! little before hyper does, so the pool stops choosing a closing connection before hyper can
//! refuse a request on it. The watcher only reads; a malformed frame is hyper's to reject.
//!
//! [`Watched`] is the I/O wrapper that feeds a watcher and publishes what it saw in a
//! [`PeerSettings`].

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use super::limits::UpstreamStats;
use crate::read_tap::{ReadObserver, ReadTap};

/// Frame type `SETTINGS` (RFC 9113 §6.5).
const SETTINGS: u8 = 0x4;
/// Frame type `GOAWAY` (RFC 9113 §6.8).
const GOAWAY: u8 = 0x7;
/// The `ACK` flag of `SETTINGS`.
const ACK: u8 = 0x1;
/// `SETTINGS_MAX_CONCURRENT_STREAMS`.
const MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// A frame header's length.
const HEADER_LEN: usize = 9;

/// What the watcher reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`.
    MaxConcurrentStreams(u32),
    /// The server is closing the connection: streams above `last_stream_id` were not processed.
    GoAway {
        /// The last stream the server processed or may still process.
        last_stream_id: u32,
        /// The error code (0: a graceful close).
        error_code: u32,
    },
}

/// Reads HTTP/2 frames from a server, fed in pieces of any size.
#[derive(Debug, Default)]
pub struct FrameWatcher {
    /// The frame header being read (or the start of a payload field, see `Phase`).
    buf: [u8; HEADER_LEN],
    /// Bytes of `buf` filled.
    have: usize,
    phase: Phase,
    /// Frames read to their end.
    frames: u64,
}

#[derive(Debug, Default, Clone, Copy)]
enum Phase {
    /// Reading a 9-byte frame header.
    #[default]
    Header,
    /// Skipping `remaining` payload bytes.
    Skip { remaining: usize },
    /// Reading 6-byte `SETTINGS` entries, `remaining` payload bytes left (`buf` holds a partial
    /// entry).
    Settings { remaining: usize },
    /// Reading the 8 fixed bytes of a `GOAWAY` (`buf`), then skipping the debug data.
    GoAway { remaining: usize },
}

// === impl FrameWatcher ===

impl FrameWatcher {
    /// A watcher at the start of the server's frames (the server sends no preface but its
    /// `SETTINGS` frame).
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads `bytes`, the next bytes from the server, calling `on` for each event.
    pub fn feed(&mut self, mut bytes: &[u8], mut on: impl FnMut(Event)) {
        while !bytes.is_empty() {
            match self.phase {
                Phase::Header => {
                    if !self.fill(&mut bytes, HEADER_LEN) {
                        return;
                    }
                    self.have = 0;
                    let len = usize::from(self.buf[0]) << 16
                        | usize::from(self.buf[1]) << 8
                        | usize::from(self.buf[2]);
                    let (kind, flags) = (self.buf[3], self.buf[4]);
                    let stream =
                        u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]])
                            & 0x7fff_ffff;
                    self.phase = match kind {
                        SETTINGS if flags & ACK == 0 && stream == 0 => {
                            Phase::Settings { remaining: len }
                        }
                        GOAWAY if stream == 0 && len >= 8 => Phase::GoAway { remaining: len },
                        _ => Phase::Skip { remaining: len },
                    };
                    self.end_of_payload_if_empty();
                }
                Phase::Skip { remaining } => {
                    let n = remaining.min(bytes.len());
                    bytes = &bytes[n..];
                    self.phase = Phase::Skip {
                        remaining: remaining - n,
                    };
                    self.end_of_payload_if_empty();
                }
                Phase::Settings { remaining } => {
                    if self.have + remaining < 6 {
                        // A trailing partial entry (a malformed frame hyper will refuse).
                        self.have = 0;
                        self.phase = Phase::Skip { remaining };
                        self.end_of_payload_if_empty();
                        continue;
                    }
                    let before = bytes.len();
                    let complete = self.fill(&mut bytes, 6);
                    let remaining = remaining - (before - bytes.len());
                    self.phase = Phase::Settings { remaining };
                    if complete {
                        self.have = 0;
                        let id = u16::from_be_bytes([self.buf[0], self.buf[1]]);
                        if id == MAX_CONCURRENT_STREAMS {
                            let value = u32::from_be_bytes([
                                self.buf[2],
                                self.buf[3],
                                self.buf[4],
                                self.buf[5],
                            ]);
                            on(Event::MaxConcurrentStreams(value));
                        }
                        self.end_of_payload_if_empty();
                    }
                }
                Phase::GoAway { remaining } => {
                    let before = bytes.len();
                    let complete = self.fill(&mut bytes, 8);
                    let remaining = remaining - (before - bytes.len());
                    if complete {
                        self.have = 0;
                        let word = |i: usize| {
                            u32::from_be_bytes([
                                self.buf[i],
                                self.buf[i + 1],
                                self.buf[i + 2],
                                self.buf[i + 3],
                            ])
                        };
                        on(Event::GoAway {
                            last_stream_id: word(0) & 0x7fff_ffff,
                            error_code: word(4),
                        });
                        self.phase = Phase::Skip { remaining };
                        self.end_of_payload_if_empty();
                    } else {
                        self.phase = Phase::GoAway { remaining };
                    }
                }
            }
        }
    }

    /// Copies from `bytes` into `buf` until it holds `want` bytes; whether it does.
    fn fill(&mut self, bytes: &mut &[u8], want: usize) -> bool {
        let n = (want - self.have).min(bytes.len());
        self.buf[self.have..self.have + n].copy_from_slice(&bytes[..n]);
        self.have += n;
        *bytes = &bytes[n..];
        self.have == want
    }

    /// Frames read to their end so far.
    pub fn frames_read(&self) -> u64 {
        self.frames
    }

    fn end_of_payload_if_empty(&mut self) {
        if let Phase::Skip { remaining: 0 } | Phase::Settings { remaining: 0 } = self.phase {
            self.phase = Phase::Header;
            self.frames += 1;
        }
    }
}

/// What one connection's server has said so far, shared between its I/O and the pool.
#[derive(Debug)]
pub struct PeerSettings {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`; [`u32::MAX`] until the server says (RFC 9113: no limit
    /// until then, though the pool waits for the server's first `SETTINGS`).
    max_concurrent_streams: AtomicU32,
    /// Whether the server's first `SETTINGS` frame has arrived.
    settled: AtomicBool,
    settled_notify: tokio::sync::Notify,
    /// Whether a `GOAWAY` has arrived.
    going_away: AtomicBool,
    /// Where `GOAWAY`s are counted for the metrics.
    stats: Option<Arc<UpstreamStats>>,
}

impl Default for PeerSettings {
    fn default() -> Self {
        Self::new(None)
    }
}

// === impl PeerSettings ===

impl PeerSettings {
    /// Nothing heard yet; `GOAWAY`s counted in `stats` too.
    pub fn new(stats: Option<Arc<UpstreamStats>>) -> Self {
        Self {
            max_concurrent_streams: AtomicU32::new(u32::MAX),
            settled: AtomicBool::new(false),
            settled_notify: tokio::sync::Notify::new(),
            going_away: AtomicBool::new(false),
            stats,
        }
    }

    /// The server's stream limit (`u32::MAX` while unknown).
    pub fn max_concurrent_streams(&self) -> u32 {
        self.max_concurrent_streams.load(Ordering::Acquire)
    }

    /// Whether the server has sent `GOAWAY`.
    pub fn going_away(&self) -> bool {
        self.going_away.load(Ordering::Acquire)
    }

    /// Waits until the server's first `SETTINGS` frame has been read.
    pub async fn settled(&self) {
        loop {
            let notified = self.settled_notify.notified();
            if self.settled.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    fn apply(&self, event: Event) {
        match event {
            Event::MaxConcurrentStreams(n) => {
                self.max_concurrent_streams.store(n, Ordering::Release);
            }
            Event::GoAway { .. } => {
                self.going_away.store(true, Ordering::Release);
                if let Some(stats) = &self.stats {
                    stats.goaway();
                }
            }
        }
    }

    /// Marks the server's first frame (its `SETTINGS`) as read.
    fn settle(&self) {
        if !self.settled.swap(true, Ordering::AcqRel) {
            self.settled_notify.notify_waiters();
        }
    }
}

/// An HTTP/2 client connection's I/O whose incoming frames a [`FrameWatcher`] reads.
pub type Watched<T> = ReadTap<T, WatchedFrames>;

/// What a [`Watched`] stream's reads feed: its [`FrameWatcher`] and the connection's
/// [`PeerSettings`].
pub struct WatchedFrames {
    watcher: FrameWatcher,
    peer: Arc<PeerSettings>,
}

impl WatchedFrames {
    /// Wraps `inner`, publishing what its server says to `peer`.
    pub fn watch<T>(inner: T, peer: Arc<PeerSettings>) -> Watched<T> {
        ReadTap::new(
            inner,
            WatchedFrames {
                watcher: FrameWatcher::new(),
                peer,
            },
        )
    }
}

impl ReadObserver for WatchedFrames {
    fn read(&mut self, bytes: &[u8]) {
        let peer = &*self.peer;
        self.watcher.feed(bytes, |event| peer.apply(event));
        // The server's first frame is its SETTINGS: once it is read, the connection's limits
        // are known.
        if self.watcher.frames_read() > 0 {
            peer.settle();
        }
    }

    /// End of stream or an error: nothing more will be said.
    fn ended(&mut self) {
        self.peer.settle();
    }
}

#[cfg(test)]
mod tests;
