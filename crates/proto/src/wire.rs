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
    /// Reads stop at TLS record boundaries (see [`Wire::whole_records`]).
    whole_records: bool,
    /// Bytes of the current record not yet handed out (whole-record mode).
    record_left: usize,
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
            whole_records: false,
            record_left: 0,
        }
    }

    /// While on, a read never hands out bytes of two TLS records: it stops
    /// at the end of the record it is in. During a handshake this leaves
    /// rustls holding whole records only, so that when it hands over its
    /// secrets afterwards no half-read record is lost with it (the bytes
    /// after the handshake stay here). Turn it on before the first read.
    pub fn whole_records(&mut self, on: bool) {
        self.whole_records = on;
    }

    /// The socket.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// The socket and the bytes read from it that no reader has had.
    pub fn into_parts(self) -> (IO, Vec<u8>) {
        let rest = self.buf[self.pos..self.filled].to_vec();
        (self.io, rest)
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
        if me.whole_records && me.record_left == 0 {
            return me.poll_record_start(cx, dst);
        }
        if me.pos == me.filled {
            // A reader that wants as much as the buffer would hold reads
            // straight from the socket.
            if dst.remaining() >= me.size && !me.whole_records {
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
        let mut n = dst.remaining().min(me.filled - me.pos);
        if me.whole_records {
            n = n.min(me.record_left);
            me.record_left -= n;
        }
        dst.put_slice(&me.buf[me.pos..me.pos + n]);
        me.pos += n;
        Poll::Ready(Ok(()))
    }
}

/// A TLS record's header: type, version, length.
const RECORD_HEADER: usize = 5;

impl<IO: AsyncRead + Unpin> Wire<IO> {
    /// A read at a record's start in whole-record mode: gathers the
    /// record's header (reading more from the socket while fewer than its
    /// bytes are here), learns the record's length, and reads on.
    fn poll_record_start(
        &mut self,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        while self.filled - self.pos < RECORD_HEADER {
            // Keep what is here at the buffer's start and read behind it.
            self.buf.copy_within(self.pos..self.filled, 0);
            (self.filled, self.pos) = (self.filled - self.pos, 0);
            if self.buf.len() < self.size {
                self.buf.resize(self.size, 0);
            }
            let mut rb = ReadBuf::new(&mut self.buf[self.filled..]);
            match Pin::new(&mut self.io).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let n = rb.filled().len();
            if n == 0 {
                // The end of the stream: hand out what is left (a torn
                // header, which the reader above will refuse).
                self.record_left = self.filled - self.pos;
                if self.record_left == 0 {
                    return Poll::Ready(Ok(()));
                }
                break;
            }
            self.filled += n;
        }
        if self.record_left == 0 {
            let h = &self.buf[self.pos..self.pos + RECORD_HEADER];
            self.record_left = RECORD_HEADER + usize::from(u16::from_be_bytes([h[3], h[4]]));
        }
        let n = dst
            .remaining()
            .min(self.filled - self.pos)
            .min(self.record_left);
        self.record_left -= n;
        dst.put_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
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

    /// In whole-record mode no read crosses a record's end, whatever the
    /// sizes of the writes and reads, and every byte comes through in
    /// order; turned off, reads go on from where the records stopped.
    #[tokio::test]
    async fn whole_record_reads_stop_at_record_ends() {
        let mut rng = loligo_testkit::Rng::new(3);
        let mut stream = Vec::new();
        let mut ends = Vec::new();
        for _ in 0..200 {
            let len = match rng.below(4) {
                0 => rng.index(20),
                1 => 16_401,
                _ => rng.index(5000),
            };
            stream.extend_from_slice(&[0x17, 3, 3]);
            stream.extend_from_slice(&(len as u16).to_be_bytes());
            stream.extend((0..len).map(|_| rng.below(256) as u8));
            ends.push(stream.len());
        }
        let tail = b"after the records".to_vec();
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut w = Wire::new(a);
        w.whole_records(true);
        let sent = [stream.clone(), tail.clone()].concat();
        let writer = tokio::spawn(async move {
            let mut at = 0;
            let mut k = 1usize;
            while at < sent.len() {
                // Writes as small as one byte, so headers arrive torn.
                let n = (k * 131 % 9000 + 1).min(sent.len() - at);
                b.write_all(&sent[at..at + n]).await.unwrap();
                at += n;
                k += 1;
            }
            b
        });
        let mut got = Vec::new();
        let mut k = 1usize;
        while got.len() < stream.len() {
            let mut chunk = vec![0u8; 1 + k * 977 % 40_000];
            let n = w.read(&mut chunk).await.unwrap();
            assert!(n > 0, "early end at {}", got.len());
            let (from, to) = (got.len(), got.len() + n);
            let crossed = ends.iter().any(|&e| from < e && e < to);
            assert!(!crossed, "a read of {from}..{to} crossed a record's end");
            got.extend_from_slice(&chunk[..n]);
            k += 1;
        }
        assert_eq!(got, stream);
        w.whole_records(false);
        let _b = writer.await.unwrap();
        let mut rest = vec![0u8; tail.len()];
        w.read_exact(&mut rest).await.unwrap();
        assert_eq!(rest, tail);
    }

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
