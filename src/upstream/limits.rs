//! The bound on upstream connections, and the counters behind the `apf_proxy_upstream_*`
//! metrics.
//!
//! Every connection the client opens, over any protocol and TLS identity, holds a
//! `ConnectionPermit` from one `ConnectionBudget` for as long as it is open. When the
//! budget is spent a request that needs a new connection fails at once with
//! [`UpstreamError::ConnectionLimit`] (503, counted) rather than waiting in a queue that flow
//! control cannot see. Long-running requests (watches) may not take the last
//! [`UpstreamLimits::reserved_for_short`] connections, so that however many watches are open,
//! ordinary requests, which flow control bounds, can still reach the upstream.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::UpstreamError;

/// Upstream connections the client opens at most, by default: enough for a cluster's watches
/// over HTTP/1.1 upstreams, where each watch holds a connection (over HTTP/2 a connection carries
/// up to the server's stream limit, 250 for kube-apiserver).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10_000;

/// How a request travels to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// An ordinary request, bounded by flow control: pooled, multiplexed over HTTP/2 when the
    /// upstream speaks it.
    Short,
    /// A watch or another long-running request: multiplexed over HTTP/2 connections of their
    /// own (so that they never take the streams ordinary requests need), one HTTP/1.1
    /// connection each otherwise.
    LongRunning,
    /// An upgrade (exec, attach, port-forward): an HTTP/1.1 connection of its own, never pooled.
    Upgrade,
}

impl Route {
    /// Every route, in the order of their metric slots.
    pub const ALL: [Route; 3] = [Route::Short, Route::LongRunning, Route::Upgrade];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Short => "short",
            Route::LongRunning => "long-running",
            Route::Upgrade => "upgrade",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The application protocol of an upstream connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1.
    Http1,
    /// HTTP/2 (negotiated by ALPN).
    Http2,
}

impl Protocol {
    /// Both protocols, in the order of their metric slots.
    pub const ALL: [Protocol; 2] = [Protocol::Http1, Protocol::Http2];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::Http2 => "h2",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The bound on upstream connections (`--upstream-max-connections`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamLimits {
    /// Connections open at once at most, across protocols and TLS identities.
    pub max_connections: usize,
    /// Of those, how many long-running requests may never take: kept for ordinary requests.
    pub reserved_for_short: usize,
}

impl Default for UpstreamLimits {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_CONNECTIONS as usize, 600)
    }
}

impl UpstreamLimits {
    /// `max_connections`, reserving for ordinary requests as many connections as the server
    /// concurrency limit allows of them at once (what an HTTP/1.1 upstream needs), but never more
    /// than half.
    pub fn new(max_connections: usize, server_concurrency_limit: usize) -> Self {
        let max_connections = max_connections.max(1);
        Self {
            max_connections,
            reserved_for_short: server_concurrency_limit.min(max_connections / 2),
        }
    }
}

/// Counters of the upstream client, read by the metrics at scrape time.
#[derive(Debug, Default)]
pub struct UpstreamStats {
    /// Open connections by [`Protocol::index`].
    connections: [AtomicUsize; 2],
    /// HTTP/2 streams in use by [`Route::index`].
    streams: [AtomicUsize; 3],
    /// Requests refused because the connection bound was reached, by [`Route::index`].
    limit_refusals: [AtomicU64; 3],
    /// `GOAWAY` frames received.
    goaways: AtomicU64,
    /// Requests sent again on another connection because the first did not take them.
    retries: AtomicU64,
}

// === impl UpstreamStats ===

impl UpstreamStats {
    /// Open connections per protocol.
    pub fn connections(&self) -> impl Iterator<Item = (Protocol, usize)> + '_ {
        Protocol::ALL
            .into_iter()
            .map(|p| (p, self.connections[p.index()].load(Ordering::Relaxed)))
    }

    /// HTTP/2 streams in use per route.
    pub fn streams_in_use(&self) -> impl Iterator<Item = (Route, usize)> + '_ {
        Route::ALL
            .into_iter()
            .map(|r| (r, self.streams[r.index()].load(Ordering::Relaxed)))
    }

    /// Requests refused at the connection bound, per route.
    pub fn limit_refusals(&self) -> impl Iterator<Item = (Route, u64)> + '_ {
        Route::ALL
            .into_iter()
            .map(|r| (r, self.limit_refusals[r.index()].load(Ordering::Relaxed)))
    }

    /// `GOAWAY` frames received from the upstream.
    pub fn goaways(&self) -> u64 {
        self.goaways.load(Ordering::Relaxed)
    }

    /// Requests sent again because a connection closed or refused them before processing.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    pub(crate) fn stream_opened(&self, route: Route) {
        self.streams[route.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stream_closed(&self, route: Route) {
        self.streams[route.index()].fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn goaway(&self) {
        self.goaways.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
}

/// The connection bound, shared by every pool of one client.
#[derive(Debug)]
pub(crate) struct ConnectionBudget {
    limits: UpstreamLimits,
    open: AtomicUsize,
    stats: Arc<UpstreamStats>,
}

impl ConnectionBudget {
    pub(crate) fn new(limits: UpstreamLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            open: AtomicUsize::new(0),
            stats: Arc::default(),
        })
    }

    pub(crate) fn stats(&self) -> &Arc<UpstreamStats> {
        &self.stats
    }

    /// A permit for one more connection, or the error a request gets at the bound.
    pub(crate) fn try_open(
        self: &Arc<Self>,
        route: Route,
    ) -> Result<ConnectionPermit, UpstreamError> {
        let max = match route {
            Route::Short => self.limits.max_connections,
            Route::LongRunning | Route::Upgrade => {
                self.limits.max_connections - self.limits.reserved_for_short
            }
        };
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < max).then_some(open + 1)
            });
        match taken {
            Ok(_) => Ok(ConnectionPermit {
                budget: Arc::clone(self),
                protocol: None,
            }),
            Err(_) => {
                self.stats.limit_refusals[route.index()].fetch_add(1, Ordering::Relaxed);
                Err(UpstreamError::ConnectionLimit {
                    max: self.limits.max_connections,
                    reserved: match route {
                        Route::Short => 0,
                        _ => self.limits.reserved_for_short,
                    },
                })
            }
        }
    }
}

/// One open (or opening) upstream connection's share of the budget; returned when dropped.
#[derive(Debug)]
pub(crate) struct ConnectionPermit {
    budget: Arc<ConnectionBudget>,
    protocol: Option<Protocol>,
}

impl ConnectionPermit {
    /// Counts the connection as open over `protocol` (once its handshake is done).
    pub(crate) fn established(mut self, protocol: Protocol) -> Self {
        self.budget.stats.connections[protocol.index()].fetch_add(1, Ordering::Relaxed);
        self.protocol = Some(protocol);
        self
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        if let Some(protocol) = self.protocol {
            self.budget.stats.connections[protocol.index()].fetch_sub(1, Ordering::Relaxed);
        }
        self.budget.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_running_requests_leave_the_reserved_connections_to_short_ones() {
        let budget = ConnectionBudget::new(UpstreamLimits {
            max_connections: 4,
            reserved_for_short: 2,
        });
        let watches: Vec<_> = (0..2)
            .map(|_| {
                budget
                    .try_open(Route::LongRunning)
                    .expect("under the bound")
            })
            .collect();
        let refused = budget.try_open(Route::LongRunning).expect_err("reserved");
        assert!(matches!(
            refused,
            UpstreamError::ConnectionLimit {
                max: 4,
                reserved: 2
            }
        ));
        let short: Vec<_> = (0..2)
            .map(|_| budget.try_open(Route::Short).expect("reserved for short"))
            .collect();
        assert!(budget.try_open(Route::Short).is_err(), "the bound");
        let counted: Vec<_> = budget.stats().limit_refusals().collect();
        assert_eq!(
            counted,
            vec![
                (Route::Short, 1),
                (Route::LongRunning, 1),
                (Route::Upgrade, 0)
            ]
        );
        drop(short);
        drop(watches);
        assert_eq!(budget.open.load(Ordering::Acquire), 0);
        assert!(budget.try_open(Route::LongRunning).is_ok());
    }

    #[test]
    fn open_connections_are_counted_by_protocol_until_dropped() {
        let budget = ConnectionBudget::new(UpstreamLimits::default());
        let h2 = budget
            .try_open(Route::Short)
            .expect("permit")
            .established(Protocol::Http2);
        let opening = budget.try_open(Route::Short).expect("permit");
        let open: Vec<_> = budget.stats().connections().collect();
        assert_eq!(open, vec![(Protocol::Http1, 0), (Protocol::Http2, 1)]);
        assert_eq!(budget.open.load(Ordering::Acquire), 2);
        drop(h2);
        drop(opening);
        let open: Vec<_> = budget.stats().connections().collect();
        assert_eq!(open, vec![(Protocol::Http1, 0), (Protocol::Http2, 0)]);
        assert_eq!(budget.open.load(Ordering::Acquire), 0);
    }

    #[test]
    fn the_reserve_is_the_server_limit_but_at_most_half() {
        assert_eq!(UpstreamLimits::new(10_000, 600).reserved_for_short, 600);
        assert_eq!(UpstreamLimits::new(100, 600).reserved_for_short, 50);
        assert_eq!(UpstreamLimits::new(0, 600).max_connections, 1);
        assert_eq!(UpstreamLimits::new(1, 600).reserved_for_short, 0);
    }
}
