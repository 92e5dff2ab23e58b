//! The HTTP/1.1 side of the pool: the stack of idle connections and the way a finished response
//! body gives its connection back.

use std::sync::{Arc, Weak};

use http::{Response, StatusCode};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use tokio::time::Instant;

use super::{reap, Pool, PooledBody, IDLE_TIMEOUT, MAX_IDLE};
use crate::body::ProxyBody;

/// An HTTP/1.1 connection with nothing in flight.
pub(super) struct Idle {
    sender: http1::SendRequest<ProxyBody>,
    since: Instant,
}

impl Idle {
    /// The connection, if it has not been idle too long and is still open.
    pub(super) async fn ready(self) -> Option<http1::SendRequest<ProxyBody>> {
        if !self.fresh() {
            return None;
        }
        let mut sender = self.sender;
        sender.ready().await.ok().map(|()| sender)
    }

    /// Whether it may be kept: idle for less than [`IDLE_TIMEOUT`] and not closed.
    pub(super) fn fresh(&self) -> bool {
        self.since.elapsed() < IDLE_TIMEOUT && !self.sender.is_closed()
    }
}

/// Where a finished HTTP/1.1 body returns its connection.
pub(super) struct Giveback {
    pool: Weak<Pool>,
    sender: http1::SendRequest<ProxyBody>,
}

impl Giveback {
    pub(super) fn give(self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.put(self.sender);
        }
    }
}

// === impl Pool: HTTP/1.1 ===

impl Pool {
    pub(super) fn h1_response(
        self: &Arc<Self>,
        response: Response<Incoming>,
        sender: http1::SendRequest<ProxyBody>,
    ) -> Response<PooledBody> {
        // After a 101 the connection belongs to the upgrade.
        let giveback = (response.status() != StatusCode::SWITCHING_PROTOCOLS).then(|| Giveback {
            pool: Arc::downgrade(self),
            sender,
        });
        response.map(|body| PooledBody::h1(body, giveback))
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
            let mut state = self.state.lock();
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
}
