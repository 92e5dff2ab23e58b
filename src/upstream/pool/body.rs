//! The response body the pool hands out: it returns an HTTP/1.1 connection, or frees an HTTP/2
//! stream slot, once read to the end (or dropped).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::idle::Giveback;
use super::streams::StreamSlot;

/// An upstream response body that returns its HTTP/1.1 connection to the pool once read to the
/// end (and closes it if dropped before), or frees its HTTP/2 stream slot.
pub struct PooledBody {
    inner: Incoming,
    giveback: Option<Giveback>,
    slot: Option<StreamSlot>,
}

impl PooledBody {
    pub(super) fn h1(inner: Incoming, giveback: Option<Giveback>) -> Self {
        Self::new(inner, giveback, None)
    }

    pub(super) fn h2(inner: Incoming, slot: StreamSlot) -> Self {
        Self::new(inner, None, Some(slot))
    }

    fn new(inner: Incoming, giveback: Option<Giveback>, slot: Option<StreamSlot>) -> Self {
        let mut body = PooledBody {
            inner,
            giveback,
            slot,
        };
        if body.inner.is_end_stream() {
            // Nothing to read (HEAD, 204, 304, `Content-Length: 0`): the connection is free now,
            // even if no one ever polls this body.
            body.finished();
        }
        body
    }

    fn finished(&mut self) {
        if let Some(giveback) = self.giveback.take() {
            giveback.give();
        }
        self.slot = None;
    }
}

impl std::fmt::Debug for PooledBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBody")
            .field("pooled", &self.giveback.is_some())
            .field("stream", &self.slot.is_some())
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
            Poll::Ready(None) => this.finished(),
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.finished(),
            // An error leaves an HTTP/1.1 connection in an unknown state: it is dropped with the
            // body. An HTTP/2 stream that failed is closed.
            Poll::Ready(Some(Err(_))) => {
                this.giveback = None;
                this.slot = None;
            }
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
