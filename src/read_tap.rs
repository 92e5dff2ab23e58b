//! An I/O stream whose reads are shown to an observer as they arrive; writes pass through
//! untouched. The listener counts a client's first bytes with it (`server::listener::arrival`),
//! the upstream pool reads an HTTP/2 server's SETTINGS and GOAWAY frames with it
//! (`upstream::frames`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a [`ReadTap`] tells as its stream is read.
pub trait ReadObserver {
    /// `bytes` were just read (never empty).
    fn read(&mut self, bytes: &[u8]);

    /// A read ended with nothing: the end of the stream, or an error.
    fn ended(&mut self) {}
}

pin_project_lite::pin_project! {
    /// `io`, its reads shown to `observer`.
    pub struct ReadTap<IO, O> {
        #[pin]
        io: IO,
        observer: O,
    }
}

impl<IO, O> ReadTap<IO, O> {
    /// Wraps `io`.
    pub fn new(io: IO, observer: O) -> Self {
        ReadTap { io, observer }
    }
}

impl<IO: AsyncRead, O: ReadObserver> AsyncRead for ReadTap<IO, O> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let polled = this.io.poll_read(cx, buf);
        let read = &buf.filled()[before..];
        if !read.is_empty() {
            this.observer.read(read);
        } else if polled.is_ready() {
            this.observer.ended();
        }
        polled
    }
}

impl<IO: AsyncWrite, O> AsyncWrite for ReadTap<IO, O> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
