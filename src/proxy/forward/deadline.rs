//! A response body that ends with an error when the request's deadline passes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::body::BoxError;
use crate::upstream::UpstreamError;

pin_project! {
    /// Streams `inner` until the deadline, then fails with [`UpstreamError::Timeout`].
    pub(super) struct DeadlineBody<B> {
        #[pin]
        inner: B,
        #[pin]
        sleep: Sleep,
        after: Duration,
        expired: bool,
    }
}

impl<B> DeadlineBody<B> {
    pub(super) fn new(inner: B, deadline: Instant, after: Duration) -> Self {
        DeadlineBody {
            inner,
            sleep: tokio::time::sleep_until(deadline),
            after,
            expired: false,
        }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        if *this.expired {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.sleep.poll(cx).is_ready() {
            *this.expired = true;
            let error = UpstreamError::Timeout { after: *this.after };
            return Poll::Ready(Some(Err(Box::new(error))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.expired || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
