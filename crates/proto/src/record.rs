//! TLS 1.3 record protection (RFC 8446, "The Transport Layer Security
//! (TLS) Protocol Version 1.3", sections 5.2-5.5) for a connection whose
//! handshake rustls did and whose traffic secrets it handed over
//! (`dangerous_extract_secrets`, the call kernel-TLS users make).
//!
//! Why: rustls's buffered stream copies every received byte three times
//! on its way to the caller (into its deframer, into a plaintext `Vec`,
//! out into the caller's buffer). A 4 MiB write through a size-3 pool
//! spent about 10% of all CPU on those copies (BENCHMARKS.md). Here a
//! record is opened in place, in the caller's buffer.
//!
//! A record on the wire: a 5-byte header (`0x17`, `0x03 0x03`, the
//! length of what follows), then the AEAD ciphertext of the data followed
//! by its inner content type, then the 16-byte tag. The nonce is the
//! traffic IV XOR the record's sequence number (big-endian, right-aligned);
//! the header is the associated data.
//!
//! A stream ends without a `close_notify` alert. The direct path's frames
//! carry their lengths, so a connection cut inside a frame is an error
//! to the reader, and one cut between frames reads as the peer closing,
//! as on plain TCP. A direction that reaches [`RECORDS_MAX`] ends its
//! connection (the caller dials a new one) instead of updating its keys.
//!
//! This module must never seal two records under one nonce (each
//! direction counts its own sequence and refuses to go past
//! [`RECORDS_MAX`]), never return bytes whose tag did not verify, and
//! never take a post-handshake message or an alert for data.

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use tokio_rustls::rustls::{ConnectionTrafficSecrets, ExtractedSecrets};

/// Most plaintext bytes in one record (2^14).
pub const PLAINTEXT_MAX: usize = 1 << 14;
/// Most bytes after a record's header: plaintext, content type, padding
/// and tag (RFC 8446 allows 2^14 + 256).
pub const CIPHERTEXT_MAX: usize = PLAINTEXT_MAX + 256;
/// Header bytes.
pub const HEADER_LEN: usize = 5;
/// AEAD tag bytes.
pub const TAG_LEN: usize = 16;
/// Records one direction may carry before the connection must close: the
/// AES-GCM limit of RFC 8446 section 5.5 is 2^24.5 full records.
pub const RECORDS_MAX: u64 = 1 << 24;

const APPLICATION_DATA: u8 = 0x17;
const HANDSHAKE: u8 = 0x16;
const ALERT: u8 = 0x15;

/// Why a record could not be sealed or opened; every one ends the
/// connection.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("the negotiated cipher is not one this record layer speaks")]
    Cipher,
    #[error("a record header that is not TLS 1.3 application data")]
    Header,
    #[error("a record of {0} bytes, over the limit")]
    TooLong(usize),
    #[error("a record that does not authenticate")]
    Forged,
    #[error("a record with no content type")]
    NoType,
    #[error("the peer closed the connection (alert)")]
    Alert,
    #[error("a post-handshake message, which this connection does not take")]
    Handshake,
    #[error("the connection carried its most records and must close")]
    Exhausted,
}

/// One direction's key, IV and next sequence number.
struct Keys {
    key: LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
    /// Records it may carry: [`RECORDS_MAX`], or fewer (see
    /// [`RecordStream::limit_records`]).
    max: u64,
}

impl Keys {
    fn new(seq: u64, secrets: ConnectionTrafficSecrets) -> Result<Keys, RecordError> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv)
            }
            _ => return Err(RecordError::Cipher),
        };
        Keys::from_raw(alg, key.as_ref(), iv.as_ref(), seq)
    }

    fn from_raw(
        alg: &'static aead::Algorithm,
        key: &[u8],
        iv: &[u8],
        seq: u64,
    ) -> Result<Keys, RecordError> {
        let key = UnboundKey::new(alg, key).map_err(|_| RecordError::Cipher)?;
        let iv: [u8; aead::NONCE_LEN] = iv.try_into().map_err(|_| RecordError::Cipher)?;
        Ok(Keys {
            key: LessSafeKey::new(key),
            iv,
            seq,
            max: RECORDS_MAX,
        })
    }

    /// The next record's nonce; counts the record.
    fn next_nonce(&mut self) -> Result<Nonce, RecordError> {
        if self.seq >= self.max {
            return Err(RecordError::Exhausted);
        }
        let mut n = self.iv;
        for (b, s) in n[aead::NONCE_LEN - 8..]
            .iter_mut()
            .zip(self.seq.to_be_bytes())
        {
            *b ^= s;
        }
        self.seq += 1;
        Ok(Nonce::assume_unique_for_key(n))
    }
}

fn header(len: usize) -> [u8; HEADER_LEN] {
    let l = (len as u16).to_be_bytes();
    [APPLICATION_DATA, 0x03, 0x03, l[0], l[1]]
}

/// Seals the records one direction sends.
pub struct Sealer(Keys);

/// Opens the records one direction receives.
pub struct Opener(Keys);

/// The two directions of a connection from the secrets rustls handed over.
pub fn split(secrets: ExtractedSecrets) -> Result<(Sealer, Opener), RecordError> {
    let (tx_seq, tx) = secrets.tx;
    let (rx_seq, rx) = secrets.rx;
    Ok((
        Sealer(Keys::new(tx_seq, tx)?),
        Opener(Keys::new(rx_seq, rx)?),
    ))
}

impl Sealer {
    /// Appends to `out` the records that carry `data`, each with at most
    /// [`PLAINTEXT_MAX`] bytes of it.
    pub fn seal(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
        out.reserve(data.len() + data.len().div_ceil(PLAINTEXT_MAX) * (HEADER_LEN + 1 + TAG_LEN));
        for piece in data.chunks(PLAINTEXT_MAX) {
            let len = piece.len() + 1 + TAG_LEN;
            let head = header(len);
            let nonce = self.0.next_nonce()?;
            out.extend_from_slice(&head);
            let start = out.len();
            out.extend_from_slice(piece);
            out.push(APPLICATION_DATA);
            let tag = self
                .0
                .key
                .seal_in_place_separate_tag(nonce, Aad::from(head), &mut out[start..])
                .map_err(|_| RecordError::TooLong(len))?;
            out.extend_from_slice(tag.as_ref());
        }
        Ok(())
    }
}

/// How long the record whose header is `head` is, header included.
pub fn record_len(head: &[u8; HEADER_LEN]) -> Result<usize, RecordError> {
    if head[0] != APPLICATION_DATA || head[1] != 0x03 || head[2] != 0x03 {
        return Err(RecordError::Header);
    }
    let len = usize::from(u16::from_be_bytes([head[3], head[4]]));
    if len > CIPHERTEXT_MAX {
        return Err(RecordError::TooLong(len));
    }
    if len < 1 + TAG_LEN {
        return Err(RecordError::Forged);
    }
    Ok(HEADER_LEN + len)
}

/// How long the record at the start of `bytes` is, header included, once
/// its header is all there.
fn record_len_at(bytes: &[u8]) -> Result<Option<usize>, RecordError> {
    match bytes.first_chunk::<HEADER_LEN>() {
        Some(head) => record_len(head).map(Some),
        None => Ok(None),
    }
}

impl Opener {
    /// Opens `record` (header included, exactly [`record_len`] bytes) in
    /// place; returns the range of `record` that holds its data.
    pub fn open(&mut self, record: &mut [u8]) -> Result<std::ops::Range<usize>, RecordError> {
        self.open_to_front(record, 0).map(|n| 0..n)
    }

    /// Opens the record at `buf[at..]` (exactly [`record_len`] bytes from
    /// `at` to the end of `buf`), its data moved to the front of `buf` by
    /// the decryption itself (no copy); returns the data's length.
    pub fn open_to_front(&mut self, buf: &mut [u8], at: usize) -> Result<usize, RecordError> {
        let head: [u8; HEADER_LEN] = buf
            .get(at..at + HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(RecordError::Header)?;
        if record_len(&head)? != buf.len() - at {
            return Err(RecordError::Header);
        }
        let nonce = self.0.next_nonce()?;
        let plain = self
            .0
            .key
            .open_within(nonce, Aad::from(head), buf, at + HEADER_LEN..)
            .map_err(|_| RecordError::Forged)?;
        // The content type is the last byte that is not zero padding.
        let end = plain
            .iter()
            .rposition(|&b| b != 0)
            .ok_or(RecordError::NoType)?;
        match plain[end] {
            APPLICATION_DATA => Ok(end),
            ALERT => Err(RecordError::Alert),
            HANDSHAKE => Err(RecordError::Handshake),
            _ => Err(RecordError::NoType),
        }
    }
}

/// A connection's byte stream over its records once rustls has handed
/// over its secrets: reads open records in place in a buffer of this
/// stream's and hand out their data; writes seal records into a buffer
/// that goes to `io` when it fills or on flush.
pub struct RecordStream<IO> {
    io: IO,
    sealer: Sealer,
    opener: Opener,
    /// Data rustls had opened before it handed over, handed out first.
    prefix: Vec<u8>,
    prefix_pos: usize,
    /// Bytes read: `rbuf[plain]` opened data not yet handed out,
    /// `rbuf[rpos..rend]` records not yet opened.
    rbuf: Vec<u8>,
    plain: std::ops::Range<usize>,
    rpos: usize,
    rend: usize,
    /// Sealed records not yet written: each write call's records in a
    /// chunk of their own, `wq[0][wpos..]` first. Written chunks go to
    /// `spare` for the next writes: a busy connection reuses the same
    /// few buffers, where one buffer grown past each large reply and
    /// freed cost reallocation copies and freshly zeroed pages.
    wq: std::collections::VecDeque<Vec<u8>>,
    wpos: usize,
    spare: Vec<Vec<u8>>,
}

/// The stream of a connection whose handshake rustls did through `wire`
/// (in whole-record mode, so rustls holds no part of a record): the data
/// rustls opened and nobody read, then every record after it, opened
/// here. `conn` must have nothing left to send (flush it first).
pub fn take_over<IO>(
    wire: crate::wire::Wire<IO>,
    conn: impl Into<tokio_rustls::rustls::Connection>,
) -> std::io::Result<RecordStream<IO>> {
    use std::io::Read;
    let mut conn = conn.into();
    let mut prefix = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match conn.reader().read(&mut buf) {
            Ok(0) => break,
            Ok(n) => prefix.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    let secrets = conn
        .dangerous_extract_secrets()
        .map_err(|e| std::io::Error::other(format!("TLS secrets: {e}")))?;
    let (io, raw) = wire.into_parts();
    RecordStream::new(io, raw, prefix, secrets).map_err(invalid)
}

/// Most plaintext one write call seals.
const SEAL_PER_WRITE: usize = 256 << 10;
/// Sealed bytes queued before a write waits for the socket.
const QUEUED_MAX: usize = crate::tls::TLS_SEND_BYTES_MAX;
/// Written chunks kept for reuse (each about [`SEAL_PER_WRITE`] bytes).
const SPARE_CHUNKS: usize = 4;
/// Most chunks one socket write takes.
const WRITE_SLICES: usize = 8;
/// The read buffer while a connection is busy (dropped when idle).
const READ_BYTES: usize = crate::wire::WIRE_READ_BYTES_MAX;
/// Reads of at least this much free space go straight into the caller's
/// buffer ([`RecordStream::poll_read_direct`]).
const DIRECT_MIN: usize = 2 * (HEADER_LEN + CIPHERTEXT_MAX);
/// Most of the caller's space one direct read zeroes and fills.
const DIRECT_MAX: usize = 256 << 10;

fn invalid(e: RecordError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

impl<IO> RecordStream<IO> {
    /// The stream on `io`, whose first bytes are `raw` (read from the
    /// socket, not yet opened), with `prefix` (data already opened) to
    /// hand out first.
    pub fn new(
        io: IO,
        raw: Vec<u8>,
        prefix: Vec<u8>,
        secrets: ExtractedSecrets,
    ) -> Result<RecordStream<IO>, RecordError> {
        let (sealer, opener) = split(secrets)?;
        let rend = raw.len();
        Ok(RecordStream {
            io,
            sealer,
            opener,
            prefix,
            prefix_pos: 0,
            rbuf: raw,
            plain: 0..0,
            rpos: 0,
            rend,
            wq: std::collections::VecDeque::new(),
            wpos: 0,
            spare: Vec::new(),
        })
    }

    /// The socket.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// Let each direction carry at most `max` records in all (never more
    /// than [`RECORDS_MAX`]): tests reach the end of a connection's
    /// records without sending 2^24 of them.
    pub fn limit_records(&mut self, max: u64) {
        self.sealer.0.max = max.min(RECORDS_MAX);
        self.opener.0.max = max.min(RECORDS_MAX);
    }
}

impl<IO> RecordStream<IO> {
    /// Sealed bytes not yet written.
    fn queued(&self) -> usize {
        self.wq.iter().map(Vec::len).sum::<usize>() - self.wpos
    }
}

impl<IO: tokio::io::AsyncWrite + Unpin> RecordStream<IO> {
    /// Writes queued records until none is left or the socket is full.
    fn poll_drain(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        while !self.wq.is_empty() {
            let mut slices = [std::io::IoSlice::new(&[]); WRITE_SLICES];
            for (i, c) in self.wq.iter().take(WRITE_SLICES).enumerate() {
                let from = if i == 0 { self.wpos } else { 0 };
                slices[i] = std::io::IoSlice::new(&c[from..]);
            }
            let k = self.wq.len().min(WRITE_SLICES);
            let mut n = match std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, &slices[..k])
            {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            while n > 0 {
                let Some(front) = self.wq.front() else {
                    break;
                };
                let left = front.len() - self.wpos;
                if n < left {
                    self.wpos += n;
                    break;
                }
                n -= left;
                self.wpos = 0;
                if let Some(mut c) = self.wq.pop_front() {
                    if self.spare.len() < SPARE_CHUNKS {
                        c.clear();
                        self.spare.push(c);
                    }
                }
            }
        }
        self.wpos = 0;
        Poll::Ready(Ok(()))
    }
}

impl<IO: tokio::io::AsyncRead + Unpin> RecordStream<IO> {
    /// Reads from the socket into `dst`'s free space (at most
    /// [`DIRECT_MAX`] bytes, zeroed first unless `dst` says they are
    /// initialised already) and opens every
    /// whole record there, each record's data written by its decryption
    /// over the headers and tags before it, so the data reaches the
    /// caller without a copy. A record cut at the read's end goes to
    /// `rbuf`. `Ready(Ok(true))`: data is in `dst`, or the stream ended;
    /// `Ready(Ok(false))`: no data yet (a cut record, or empty records).
    fn poll_read_direct(
        &mut self,
        cx: &mut std::task::Context<'_>,
        dst: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<bool>> {
        use std::task::Poll;
        let room = dst.remaining().min(DIRECT_MAX);
        let space = dst.initialize_unfilled_to(room);
        let mut rb = tokio::io::ReadBuf::new(space);
        match std::pin::Pin::new(&mut self.io).poll_read(cx, &mut rb) {
            Poll::Pending => {
                // Idle: hold no buffer.
                self.rbuf = Vec::new();
                (self.rpos, self.rend) = (0, 0);
                return Poll::Pending;
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Ready(Ok(())) => {}
        }
        let n = rb.filled().len();
        if n == 0 {
            // The end of the stream, between records.
            return Poll::Ready(Ok(true));
        }
        let (mut out, mut inp) = (0, 0);
        while let Some(need) = record_len_at(&space[inp..n]).map_err(invalid)? {
            if n - inp < need {
                break;
            }
            out += self
                .opener
                .open_to_front(&mut space[out..inp + need], inp - out)
                .map_err(invalid)?;
            inp += need;
        }
        // The cut record, to be completed by the next read.
        let cut = n - inp;
        if self.rbuf.len() < cut {
            self.rbuf.resize(READ_BYTES.max(cut), 0);
        }
        self.rbuf[..cut].copy_from_slice(&space[inp..n]);
        (self.rpos, self.rend) = (0, cut);
        self.plain = 0..0;
        dst.advance(out);
        Poll::Ready(Ok(out > 0))
    }
}

impl<IO: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for RecordStream<IO> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        dst: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let me = self.get_mut();
        loop {
            if me.prefix_pos < me.prefix.len() {
                let n = dst.remaining().min(me.prefix.len() - me.prefix_pos);
                dst.put_slice(&me.prefix[me.prefix_pos..me.prefix_pos + n]);
                me.prefix_pos += n;
                if me.prefix_pos == me.prefix.len() {
                    me.prefix = Vec::new();
                    me.prefix_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if !me.plain.is_empty() {
                let n = dst.remaining().min(me.plain.len());
                dst.put_slice(&me.rbuf[me.plain.start..me.plain.start + n]);
                me.plain.start += n;
                return Poll::Ready(Ok(()));
            }
            // A large read with nothing buffered: records go straight
            // into the caller's buffer and are opened there.
            if me.rpos == me.rend && dst.remaining() >= DIRECT_MIN {
                match me.poll_read_direct(cx, dst) {
                    Poll::Ready(Ok(true)) => return Poll::Ready(Ok(())),
                    // No data yet; a cut record waits in `rbuf`.
                    Poll::Ready(Ok(false)) => continue,
                    other => return other.map_ok(|_| ()),
                }
            }
            // The next record, whole, if it is here.
            let need = match record_len_at(&me.rbuf[me.rpos..me.rend]).map_err(invalid)? {
                Some(need) if me.rend - me.rpos >= need => {
                    let at = me.rpos;
                    let r = me
                        .opener
                        .open(&mut me.rbuf[at..at + need])
                        .map_err(invalid)?;
                    me.plain = at + r.start..at + r.end;
                    me.rpos += need;
                    continue;
                }
                Some(need) => need,
                None => HEADER_LEN,
            };
            // Read more: keep the partial record at the buffer's start.
            if me.rpos > 0 {
                me.rbuf.copy_within(me.rpos..me.rend, 0);
                (me.rend, me.rpos) = (me.rend - me.rpos, 0);
                me.plain = 0..0;
            }
            let size = READ_BYTES.max(need);
            if me.rbuf.len() < size {
                me.rbuf.resize(size, 0);
            }
            // Before a large read, only the rest of the cut record, so
            // that what follows goes straight to the caller.
            let end = if dst.remaining() >= DIRECT_MIN {
                need
            } else {
                me.rbuf.len()
            };
            let mut rb = tokio::io::ReadBuf::new(&mut me.rbuf[me.rend..end]);
            match std::pin::Pin::new(&mut me.io).poll_read(cx, &mut rb) {
                Poll::Pending => {
                    if me.rend == 0 {
                        // Idle: hold no buffer.
                        me.rbuf = Vec::new();
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(if me.rend == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the connection ended inside a record",
                    ))
                });
            }
            me.rend += n;
        }
    }
}

impl<IO: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for RecordStream<IO> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.poll_write_vectored(cx, &[std::io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::Poll;
        let me = self.get_mut();
        if me.queued() >= QUEUED_MAX {
            match me.poll_drain(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if me.queued() >= QUEUED_MAX => return Poll::Pending,
                Poll::Pending => {}
            }
        }
        let mut chunk = me.spare.pop().unwrap_or_default();
        let mut taken = 0;
        for b in bufs {
            let n = b.len().min(SEAL_PER_WRITE - taken);
            if n == 0 {
                continue;
            }
            me.sealer.seal(&b[..n], &mut chunk).map_err(invalid)?;
            taken += n;
            if taken == SEAL_PER_WRITE {
                break;
            }
        }
        if chunk.is_empty() {
            me.spare.push(chunk);
        } else {
            me.wq.push_back(chunk);
        }
        // Send what can go now; the rest goes with the next write or flush.
        if let Poll::Ready(Err(e)) = me.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let me = self.get_mut();
        std::task::ready!(me.poll_drain(cx))?;
        std::pin::Pin::new(&mut me.io).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let me = self.get_mut();
        std::task::ready!(me.poll_drain(cx))?;
        std::pin::Pin::new(&mut me.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::Authority;
    use std::io::{Read, Write};
    use std::sync::Arc;
    use tokio_rustls::rustls::{self, ClientConnection, ServerConnection};

    /// A client and a server connection after their handshake, done in
    /// memory; the client's config allows taking its secrets.
    fn handshaken() -> (ClientConnection, ServerConnection) {
        let ca = Authority::generate("test-fsid").unwrap();
        let server_keys = ca.issue("osd.1").unwrap();
        let client_keys = ca.issue("client.admin").unwrap();
        let mut scfg = (*server_keys.server_config().unwrap()).clone();
        scfg.send_tls13_tickets = 0;
        let mut ccfg = (*client_keys.client_config().unwrap()).clone();
        ccfg.enable_secret_extraction = true;
        let name =
            rustls::pki_types::ServerName::try_from(crate::tls::Expect::osd(1).server_name())
                .unwrap();
        let mut c = ClientConnection::new(Arc::new(ccfg), name).unwrap();
        let mut s = ServerConnection::new(Arc::new(scfg)).unwrap();
        while c.is_handshaking() || s.is_handshaking() {
            pump(&mut c, &mut s);
        }
        // Whatever the server still has to say (nothing without tickets).
        pump(&mut c, &mut s);
        (c, s)
    }

    fn pump(c: &mut ClientConnection, s: &mut ServerConnection) {
        let mut buf = Vec::new();
        c.write_tls(&mut buf).unwrap();
        s.read_tls(&mut buf.as_slice()).unwrap();
        s.process_new_packets().unwrap();
        let mut buf = Vec::new();
        s.write_tls(&mut buf).unwrap();
        c.read_tls(&mut buf.as_slice()).unwrap();
        c.process_new_packets().unwrap();
    }

    /// The cluster's connections settle on AES-128-GCM, the suite the
    /// record layer seals fastest.
    #[test]
    fn cluster_connections_prefer_aes_128_gcm() {
        let (c, s) = handshaken();
        for suite in [c.negotiated_cipher_suite(), s.negotiated_cipher_suite()] {
            assert_eq!(
                suite.map(|s| s.suite()),
                Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256)
            );
        }
    }

    /// Our records against rustls's, both ways, across several records
    /// (so the sequence numbers and the record split are checked too).
    #[test]
    fn records_interoperate_with_rustls() {
        let (c, mut s) = handshaken();
        let (mut seal, mut open) = split(c.dangerous_extract_secrets().unwrap()).unwrap();
        let mut rng = loligo_testkit::Rng::new(1);
        for round in 0..4 {
            // Ours to rustls.
            let data = rng.bytes(3 * PLAINTEXT_MAX + 100 * round);
            let mut wire = Vec::new();
            seal.seal(&data, &mut wire).unwrap();
            let mut rest = wire.as_slice();
            let mut got = Vec::new();
            while !rest.is_empty() {
                s.read_tls(&mut rest).unwrap();
                s.process_new_packets().unwrap();
                let mut buf = [0u8; 4096];
                loop {
                    match s.reader().read(&mut buf) {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
            }
            assert_eq!(got, data, "round {round}: rustls read what we sealed");
            // rustls to ours.
            let data = rng.bytes(2 * PLAINTEXT_MAX + 7 + round);
            s.writer().write_all(&data).unwrap();
            let mut wire = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut wire).unwrap();
            }
            let mut got = Vec::new();
            let mut at = 0;
            while at < wire.len() {
                let head: [u8; HEADER_LEN] = wire[at..at + HEADER_LEN].try_into().unwrap();
                let n = record_len(&head).unwrap();
                let r = open.open(&mut wire[at..at + n]).unwrap();
                got.extend_from_slice(&wire[at + r.start..at + r.end]);
                at += n;
            }
            assert_eq!(got, data, "round {round}: we opened what rustls sealed");
        }
    }

    /// A changed byte anywhere, a replayed record and a record out of
    /// order are refused.
    #[test]
    fn forged_replayed_and_reordered_records_are_refused() {
        let (c, mut s) = handshaken();
        let (seq, rx) = c.dangerous_extract_secrets().unwrap().rx;
        let ConnectionTrafficSecrets::Aes128Gcm { key, iv } = rx else {
            panic!("the cluster's TLS prefers AES-128-GCM");
        };
        let (key, iv) = (key.as_ref().to_vec(), iv.as_ref().to_vec());
        let opener = || Opener(Keys::from_raw(&aead::AES_128_GCM, &key, &iv, seq).unwrap());
        s.writer().write_all(b"first").unwrap();
        s.writer().write_all(b"second").unwrap();
        let mut wire = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut wire).unwrap();
        }
        let head: [u8; HEADER_LEN] = wire[..HEADER_LEN].try_into().unwrap();
        let n = record_len(&head).unwrap();
        let (first, second) = wire.split_at(n);
        for i in 0..first.len() {
            let mut forged = first.to_vec();
            forged[i] ^= 1;
            assert!(opener().open(&mut forged).is_err(), "byte {i} changed");
        }
        // Out of order: the second record where the first is due.
        assert_eq!(
            opener().open(&mut second.to_vec()),
            Err(RecordError::Forged)
        );
        // In order, then the first again.
        let mut open = opener();
        let mut rec = first.to_vec();
        let r = open.open(&mut rec).unwrap();
        assert_eq!(&rec[r], b"first");
        assert_eq!(open.open(&mut first.to_vec()), Err(RecordError::Forged));
    }

    /// Hands out `data` in pieces of random size (1 byte to 300 KiB).
    struct Pieces {
        data: Vec<u8>,
        at: usize,
        rng: loligo_testkit::Rng,
    }

    impl tokio::io::AsyncRead for Pieces {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            dst: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let me = self.get_mut();
            let big = me.rng.chance(500);
            let want = 1 + me.rng.index(if big { 300 << 10 } else { 40 });
            let n = want.min(dst.remaining()).min(me.data.len() - me.at);
            dst.put_slice(&me.data[me.at..me.at + n]);
            me.at += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// A socket that takes a random part of each write (1 byte to 300
    /// KiB, across the slices of a vectored one) and now and then is full.
    struct Slow {
        got: Vec<u8>,
        rng: loligo_testkit::Rng,
        vectored: usize,
    }

    impl Slow {
        fn take(
            &mut self,
            cx: &mut std::task::Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            if self.rng.chance(8) {
                cx.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            let big = self.rng.chance(3);
            let mut left = 1 + self.rng.index(if big { 300 << 10 } else { 5000 });
            let mut n = 0;
            for b in bufs {
                let k = b.len().min(left);
                self.got.extend_from_slice(&b[..k]);
                n += k;
                left -= k;
                if left == 0 {
                    break;
                }
            }
            std::task::Poll::Ready(Ok(n))
        }
    }

    impl tokio::io::AsyncWrite for Slow {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.get_mut().take(cx, &[std::io::IoSlice::new(buf)])
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let me = self.get_mut();
            if bufs.len() > 1 {
                me.vectored += 1;
            }
            me.take(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// Writes of every size (up to 3 MiB, more than the stream queues)
    /// through a socket that takes a part of each write and is full now
    /// and then reach the peer whole and in order: rustls opens exactly
    /// what was written. Several queued chunks went out in one vectored
    /// write, and written chunks were reused.
    #[tokio::test]
    async fn the_stream_writes_what_it_is_given_through_a_slow_socket() {
        use tokio::io::AsyncWriteExt;
        let mut vectored = 0;
        for seed in 0..12 {
            let (c, mut s) = handshaken();
            let secrets = c.dangerous_extract_secrets().unwrap();
            let io = Slow {
                got: Vec::new(),
                rng: loligo_testkit::Rng::new(seed),
                vectored: 0,
            };
            let mut stream = RecordStream::new(io, Vec::new(), Vec::new(), secrets).unwrap();
            let mut rng = loligo_testkit::Rng::new(seed + 100);
            let mut sent = Vec::new();
            for _ in 0..1 + rng.index(12) {
                let most = if rng.chance(3) { 3 << 20 } else { 2000 };
                let len = 1 + rng.index(most);
                let data = rng.bytes(len);
                stream.write_all(&data).await.unwrap();
                sent.extend_from_slice(&data);
                if rng.chance(3) {
                    stream.flush().await.unwrap();
                    assert!(stream.wq.is_empty() && stream.queued() == 0);
                }
                assert!(stream.spare.len() <= SPARE_CHUNKS);
            }
            stream.flush().await.unwrap();
            vectored += stream.io.vectored;
            let wire = std::mem::take(&mut stream.io.got);
            let mut rest = wire.as_slice();
            let mut got = Vec::new();
            while !rest.is_empty() {
                s.read_tls(&mut rest).unwrap();
                s.process_new_packets().unwrap();
                let mut buf = [0u8; 1 << 16];
                loop {
                    match s.reader().read(&mut buf) {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
            }
            assert_eq!(got.len(), sent.len(), "seed {seed}");
            assert!(
                got == sent,
                "seed {seed}: rustls opened other bytes than were written"
            );
        }
        assert!(vectored > 0, "no write took more than one chunk");
    }

    /// What rustls's server seals for `chunks`, and the client's stream
    /// over those records, read in random pieces.
    fn stream_of(chunks: &[Vec<u8>], seed: u64) -> (RecordStream<Pieces>, Vec<u8>) {
        let (c, mut s) = handshaken();
        s.set_buffer_limit(None);
        let mut wire = Vec::new();
        for chunk in chunks {
            s.writer().write_all(chunk).unwrap();
            while s.wants_write() {
                s.write_tls(&mut wire).unwrap();
            }
        }
        let io = Pieces {
            data: wire.clone(),
            at: 0,
            rng: loligo_testkit::Rng::new(seed),
        };
        let secrets = c.dangerous_extract_secrets().unwrap();
        (
            RecordStream::new(io, Vec::new(), Vec::new(), secrets).unwrap(),
            wire,
        )
    }

    /// Reads of every size, small ones through the stream's buffer and
    /// large ones straight into the caller's (uninitialised, as
    /// `read_buf` hands it) with records cut anywhere, give back exactly
    /// what was sent, and then the end of the stream.
    #[tokio::test]
    async fn the_stream_reads_what_was_sent_through_both_paths() {
        use tokio::io::AsyncReadExt;
        for seed in 0..20 {
            let mut rng = loligo_testkit::Rng::new(seed);
            let chunks: Vec<Vec<u8>> = (0..1 + rng.index(6))
                .map(|_| {
                    let most = if rng.chance(500) { 1 << 20 } else { 300 };
                    let len = 1 + rng.index(most);
                    rng.bytes(len)
                })
                .collect();
            let sent: Vec<u8> = chunks.concat();
            let (mut stream, _) = stream_of(&chunks, seed);
            let mut got = Vec::new();
            while got.len() < sent.len() {
                let left = sent.len() - got.len();
                let most = if rng.chance(300) { 64 } else { 1 << 20 };
                let want = 1 + rng.index(left.min(most));
                let mut buf = bytes::BytesMut::with_capacity(want);
                let n = (&mut stream)
                    .take(want as u64)
                    .read_buf(&mut buf)
                    .await
                    .unwrap();
                assert!(n > 0, "seed {seed}: data left, but the stream ended");
                got.extend_from_slice(&buf);
            }
            assert_eq!(got, sent, "seed {seed}");
            let mut rest = Vec::new();
            assert_eq!(stream.read_to_end(&mut rest).await.unwrap(), 0);
        }
    }

    /// A changed byte in a record that a large read takes straight into
    /// the caller's buffer ends the stream with an error, and nothing of
    /// that record or after it is handed out.
    #[tokio::test]
    async fn a_forged_record_in_a_large_read_is_refused() {
        use tokio::io::AsyncReadExt;
        let mut rng = loligo_testkit::Rng::new(7);
        let sent = rng.bytes(10 * PLAINTEXT_MAX);
        for seed in 0..8 {
            let (mut stream, wire) = stream_of(std::slice::from_ref(&sent), seed);
            // A byte inside the fourth record.
            let at = 3 * (HEADER_LEN + PLAINTEXT_MAX + 1 + TAG_LEN) + 100 + seed as usize;
            stream.io.data[at] ^= 0x40;
            assert_ne!(stream.io.data, wire);
            let mut buf = vec![0u8; sent.len()];
            let mut got = 0;
            let err = loop {
                match stream.read(&mut buf[got..]).await {
                    Ok(0) => panic!("seed {seed}: the stream ended without an error"),
                    Ok(n) => got += n,
                    Err(e) => break e,
                }
            };
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "seed {seed}");
            assert!(
                got <= 3 * PLAINTEXT_MAX,
                "seed {seed}: {got} bytes handed out"
            );
            assert_eq!(buf[..got], sent[..got], "seed {seed}");
        }
    }

    /// A direction refuses to seal past its record limit.
    #[test]
    fn a_direction_stops_at_its_record_limit() {
        let mut k =
            Keys::from_raw(&aead::AES_256_GCM, &[1; 32], &[2; 12], RECORDS_MAX - 1).unwrap();
        assert!(k.next_nonce().is_ok());
        assert_eq!(k.next_nonce().err(), Some(RecordError::Exhausted));
    }
}
