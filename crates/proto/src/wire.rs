//! The socket beneath a TLS stream, with a read buffer that exists only
//! while the connection is busy.
//!
//! rustls asks its reader for at most 4 KiB at a time, so a TLS stream
//! reading straight from a socket makes a `read` call per 4 KiB: over a
//! thousand for a 4 MiB payload. [`Wire`] reads from the socket in larger
//! pieces and hands rustls its 4 KiB from memory. Its buffer starts at
//! [`WIRE_READ_BYTES_MIN`], doubles while reads fill it (a stream of bulk
//! data), up to [`WIRE_READ_BYTES_MAX`], and shrinks back whenever the
//! socket has nothing more to give, so an idle connection holds at most
//! the smallest (a server may have thousands), and one that was never
//! read holds none.
//!
//! This module must never reorder, drop or invent bytes: what the reader
//! above gets is exactly what the socket gave, in order. Writes pass
//! straight through.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The read buffer's size when a busy period starts.
pub const WIRE_READ_BYTES_MIN: usize = 16 << 10;
/// The most the read buffer grows to (a 4 MiB payload then costs 16
/// `read` calls).
pub const WIRE_READ_BYTES_MAX: usize = 256 << 10;

/// `io` with a read buffer beneath whatever reads it (see the module).
pub struct Wire<IO> {
    io: IO,
    /// Bytes read from `io` and not yet handed out: `buf[pos..filled]`.
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    /// Size of the next buffer.
    size: usize,
}

impl<IO> Wire<IO> {
    /// `io`, with no buffer until it is first read.
    pub fn new(io: IO) -> Wire<IO> {
        Wire {
            io,
            buf: Vec::new(),
            pos: 0,
            filled: 0,
            size: WIRE_READ_BYTES_MIN,
        }
    }

    /// The socket.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// Bytes of read buffer this connection holds now.
    pub fn buffer_bytes(&self) -> usize {
        self.buf.capacity()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Wire<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        if me.pos == me.filled {
            // A reader that wants as much as the buffer would hold reads
            // straight from the socket.
            if dst.remaining() >= me.size {
                return Pin::new(&mut me.io).poll_read(cx, dst);
            }
            if me.buf.len() != me.size {
                me.buf = vec![0; me.size];
            }
            let mut rb = ReadBuf::new(&mut me.buf);
            match Pin::new(&mut me.io).poll_read(cx, &mut rb) {
                Poll::Pending => {
                    // Nothing more for now: back to the smallest buffer
                    // (kept, so request-sized traffic allocates nothing).
                    if me.size > WIRE_READ_BYTES_MIN {
                        me.buf = Vec::new();
                        me.size = WIRE_READ_BYTES_MIN;
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let n = rb.filled().len();
            if n == 0 {
                // The end of the stream.
                return Poll::Ready(Ok(()));
            }
            (me.pos, me.filled) = (0, n);
            if n == me.size {
                me.size = (me.size * 2).min(WIRE_READ_BYTES_MAX);
            }
        }
        let n = dst.remaining().min(me.filled - me.pos);
        dst.put_slice(&me.buf[me.pos..me.pos + n]);
        me.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Wire<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Whatever the sizes of the writes and of the reads above, the
    /// reader gets the bytes in order; a stream of bulk data grows the
    /// buffer, and an idle connection holds none.
    #[tokio::test]
    async fn bytes_come_through_in_order_and_idle_holds_no_buffer() {
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let mut w = Wire::new(a);
        assert_eq!(w.buffer_bytes(), 0);
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            // Writes of varied sizes, some tiny.
            let mut at = 0;
            let mut k = 1usize;
            while at < sent.len() {
                let n = (k * 977 % 70_000 + 1).min(sent.len() - at);
                b.write_all(&sent[at..at + n]).await.unwrap();
                at += n;
                k += 1;
            }
            b
        });
        let mut got = Vec::new();
        let mut k = 1usize;
        let mut biggest = 0;
        while got.len() < data.len() {
            // Reads of varied sizes, mostly rustls's 4 KiB, some large.
            let want = if k.is_multiple_of(7) {
                300_000
            } else {
                4096 - k % 100
            };
            let mut chunk = vec![0u8; want];
            let n = w.read(&mut chunk).await.unwrap();
            assert!(n > 0, "early end at {}", got.len());
            got.extend_from_slice(&chunk[..n]);
            biggest = biggest.max(w.buffer_bytes());
            k += 1;
        }
        assert_eq!(got, data);
        assert!(biggest > WIRE_READ_BYTES_MIN, "never grew: {biggest}");
        assert!(biggest <= WIRE_READ_BYTES_MAX, "{biggest}");
        // Nothing more to read: the next read waits, and the buffer
        // shrinks to the smallest.
        let mut one = [0u8; 1];
        let r = tokio::time::timeout(std::time::Duration::from_millis(50), w.read(&mut one)).await;
        assert!(r.is_err(), "read something after the end of the data");
        assert!(
            w.buffer_bytes() <= WIRE_READ_BYTES_MIN,
            "{}",
            w.buffer_bytes()
        );
        // The end of the stream is an end, after any buffered bytes.
        let mut b = writer.await.unwrap();
        b.write_all(b"tail").await.unwrap();
        drop(b);
        let mut rest = Vec::new();
        w.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"tail");
    }
}
