//! HTTP/2: the frames of one connection written to TLS together once the scheduler has run every
//! other task that was ready, instead of one TLS record and one `writev` per response.
//!
//! Each HTTP/2 stream runs as its own task and wakes the connection's task when it has queued a
//! response; that task then encrypts and writes what is queued. Under load several streams of a
//! connection finish in the same turn of the scheduler, but the connection's task ran after the
//! first of them and wrote that response alone (one TLS record and one system call per response,
//! where HAProxy sends several responses per write). Here a flush with data waiting first yields
//! once (`tokio::task::yield_now`: the task runs again after the other ready tasks and a poll of
//! the I/O driver), so the responses finished meanwhile go out in the same records and the same
//! system call. Writes are held in a buffer of at most [`LIMIT`] bytes, and only until the flush
//! that follows them: nothing waits for a timer.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes held before they are handed to the inner stream without waiting for a flush.
const LIMIT: usize = 64 * 1024;

pin_project_lite::pin_project! {
    /// Passes everything through when `enabled` is false (HTTP/1.1: one response at a time).
    pub(super) struct Coalesced<IO> {
        #[pin]
        io: IO,
        enabled: bool,
        buf: Vec<u8>,
        // Bytes of `buf` already written to `io`.
        written: usize,
        // The flush under way has already let the other ready tasks run.
        yielded: bool,
    }
}

impl<IO> Coalesced<IO> {
    pub(super) fn new(io: IO, enabled: bool) -> Self {
        Coalesced {
            io,
            enabled,
            buf: Vec::new(),
            written: 0,
            yielded: false,
        }
    }
}

impl<IO: AsyncWrite> Coalesced<IO> {
    /// Writes everything held to `io`.
    fn drain(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        while *this.written < this.buf.len() {
            let n = ready!(this.io.as_mut().poll_write(cx, &this.buf[*this.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *this.written += n;
        }
        this.buf.clear();
        *this.written = 0;
        Poll::Ready(Ok(()))
    }

    fn hold(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[&[u8]],
    ) -> Poll<io::Result<usize>> {
        if self.buf.len() >= LIMIT {
            ready!(self.as_mut().drain(cx))?;
        }
        let this = self.project();
        let mut n = 0;
        for chunk in bufs {
            this.buf.extend_from_slice(chunk);
            n += chunk.len();
        }
        Poll::Ready(Ok(n))
    }
}

impl<IO: AsyncRead> AsyncRead for Coalesced<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.project().io.poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite> AsyncWrite for Coalesced<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.enabled {
            return self.project().io.poll_write(cx, buf);
        }
        self.hold(cx, &[buf])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if !self.enabled {
            return self.project().io.poll_write_vectored(cx, bufs);
        }
        let slices: smallvec::SmallVec<[&[u8]; 8]> = bufs.iter().map(|b| &**b).collect();
        self.hold(cx, &slices)
    }

    fn is_write_vectored(&self) -> bool {
        self.enabled || self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.enabled && self.written < self.buf.len() {
            if !self.yielded {
                *self.as_mut().project().yielded = true;
                // Registers this task to run again after the other ready tasks (and a poll of
                // the I/O driver); the future itself is not needed after its first poll.
                let yielding = std::pin::pin!(tokio::task::yield_now());
                if yielding.poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            ready!(self.as_mut().drain(cx))?;
        }
        *self.as_mut().project().yielded = false;
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.enabled {
            ready!(self.as_mut().drain(cx))?;
        }
        self.project().io.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn held_writes_reach_the_stream_in_order_at_the_flush() {
        let (client, mut server) = tokio::io::duplex(1 << 20);
        let mut io = Coalesced::new(client, true);
        io.write_all(b"one ").await.expect("write");
        io.write_all(b"two").await.expect("write");
        let mut got = vec![0u8; 7];
        // Nothing has left before the flush.
        let early = tokio::time::timeout(
            std::time::Duration::from_millis(10),
            tokio::io::AsyncReadExt::read(&mut server, &mut got),
        )
        .await;
        assert!(early.is_err(), "a write left before its flush");
        io.flush().await.expect("flush");
        tokio::io::AsyncReadExt::read_exact(&mut server, &mut got)
            .await
            .expect("read");
        assert_eq!(&got, b"one two");
    }

    #[tokio::test]
    async fn a_large_write_is_handed_on_without_a_flush() {
        let (client, mut server) = tokio::io::duplex(1 << 20);
        let mut io = Coalesced::new(client, true);
        let big = vec![7u8; LIMIT + 1];
        io.write_all(&big).await.expect("write");
        io.write_all(b"x").await.expect("write");
        let mut got = vec![0u8; LIMIT + 1];
        tokio::io::AsyncReadExt::read_exact(&mut server, &mut got)
            .await
            .expect("the first write left once the buffer was over the limit");
        io.shutdown().await.expect("shutdown drains the rest");
        let mut rest = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut server, &mut rest)
            .await
            .expect("read");
        assert_eq!(rest, b"x");
    }

    #[tokio::test]
    async fn disabled_passes_writes_through() {
        let (client, mut server) = tokio::io::duplex(1 << 20);
        let mut io = Coalesced::new(client, false);
        io.write_all(b"now").await.expect("write");
        let mut got = [0u8; 3];
        tokio::io::AsyncReadExt::read_exact(&mut server, &mut got)
            .await
            .expect("read");
        assert_eq!(&got, b"now");
    }
}
