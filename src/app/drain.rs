//! Ending watches cleanly at shutdown: once the secure listener stops accepting, every watch's
//! response stream ends at a chunk boundary (a well-formed end of the chunked body, or an HTTP/2
//! end of stream), so clients see a closed watch and re-establish it elsewhere instead of a reset
//! connection at the end of the grace period.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::body::{BoxError, ProxyBody};
use crate::server::ShutdownSignal;

/// A watch's response body that ends when `signal` fires.
pub struct DrainableBody {
    inner: ProxyBody,
    drained: Pin<Box<dyn Future<Output = ()> + Send>>,
    ended: bool,
}

impl DrainableBody {
    /// Wraps `inner` so that it ends (between frames) once `signal` fires.
    pub fn wrap(inner: ProxyBody, mut signal: ShutdownSignal) -> ProxyBody {
        let drained = Box::pin(async move { signal.triggered().await });
        DrainableBody {
            inner,
            drained,
            ended: false,
        }
        .boxed_unsync()
    }
}

impl Body for DrainableBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        // Frames already upstream are passed on first; the drain only ends an idle stream.
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.drained.as_mut().poll(cx).is_ready() {
            tracing::debug!("Shutting down: watch ended");
            self.ended = true;
            // Dropping the upstream stream releases its watch registration now.
            self.inner = crate::body::empty_body();
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.ended {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}
