//! The direct data path: an OSD's `Op` and `Peer` calls as length-prefixed
//! frames on a plain TCP connection, beside gRPC on the same port.
//!
//! gRPC copies every payload byte three times in user space on each hop
//! (into the protobuf encoding buffer, into tonic's frame-assembly buffer,
//! and again when that buffer grows to the message's size); a profile of
//! 4 MiB reads put a fifth of all CPU time there. Here a sender writes the
//! header and body, then each bulk payload straight from its `Bytes`; a
//! receiver reads the whole frame into one buffer sized from the header
//! and hands out the body and payloads as slices of it. The kernel's
//! socket copies are the only ones left.
//!
//! A connection opens with [`MAGIC`]; an OSD's listener peeks at the first
//! bytes of each connection and routes it here or to gRPC (whose clients
//! open with the HTTP/2 preface), so the map keeps one address per OSD.
//! Frames, both ways, little-endian:
//!
//! ```text
//! id u64 | kind u8 | flags u8 | nbulk u16 | body_len u32 | nbulk x len u32 | body | bulk...
//! ```
//!
//! A reply carries its request's id and kind. Requests on one connection
//! run concurrently (at most [`IN_FLIGHT_MAX`]) and replies come back in
//! any order.
//!
//! This module must never interpret bodies (callers decode their own),
//! and must never let a peer make it allocate more than
//! [`MESSAGE_BYTES_MAX`] for one frame: a header that announces more, or
//! more than [`BULK_MAX`] payloads, closes the connection.

use crate::inject::CallFault;
use crate::net::MESSAGE_BYTES_MAX;
use crate::tls::Expect;
use bytes::{Buf, Bytes, BytesMut};
use loligo_bulk::aligned::BufPool;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

/// The message faults a connection injects (`inject`), if any.
type Faults = Option<&'static (crate::inject::Faults, crate::inject::Rng)>;

/// What a direct connection starts with (never the start of the HTTP/2
/// preface, `PRI * HTTP/2.0`).
pub const MAGIC: [u8; 8] = *b"LOLIGO\x01\n";
/// Most bulk payloads in one frame.
pub const BULK_MAX: usize = 4096;
/// Most requests one connection runs at once; more wait (back-pressure on
/// the sender, not a refusal).
pub const IN_FLIGHT_MAX: usize = 256;
/// Most bytes of requests one connection has in the server at once
/// (read and not yet answered); the next frame is not read until some
/// are answered. At least [`MESSAGE_BYTES_MAX`], so any frame fits.
pub const IN_FLIGHT_BYTES_MAX: usize = 2 * MESSAGE_BYTES_MAX;

/// Bytes of client ops (`Op` calls) one server holds at once, across all
/// its connections (Ceph's `osd_client_message_size_cap`, 500 MiB): a
/// frame past it waits until earlier ones are answered.
pub const SERVER_CLIENT_BYTES_MAX: usize = 500 << 20;
/// Bytes of OSD-to-OSD messages (`Peer` calls) one server holds at once,
/// across all its connections (apart from clients', so that clients
/// cannot hold up replication and recovery).
pub const SERVER_PEER_BYTES_MAX: usize = 1 << 30;
const _: () = assert!(SERVER_CLIENT_BYTES_MAX >= MESSAGE_BYTES_MAX);
const _: () = assert!(SERVER_PEER_BYTES_MAX >= MESSAGE_BYTES_MAX);
const _: () = assert!(IN_FLIGHT_BYTES_MAX >= MESSAGE_BYTES_MAX);

/// Each client entity's share of [`SERVER_CLIENT_BYTES_MAX`] (a half):
/// one user's calls, over however many connections, cannot take all of
/// it, so others are served meanwhile.
pub const ENTITY_CLIENT_SHARE: usize = 2;
/// Entities a server keeps a share for before it forgets those with
/// nothing in flight.
const ENTITIES_KEPT: usize = 256;

/// What all the connections of one server may have in it at once (clones
/// share it): bytes of client calls and of OSD calls, each its own budget,
/// and each client entity's share of the clients' budget.
#[derive(Clone, Debug)]
pub struct ServerBudget {
    client: Arc<Semaphore>,
    client_kib: usize,
    peer: Arc<Semaphore>,
    peer_kib: usize,
    entity_kib: usize,
    entities: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

impl ServerBudget {
    /// A budget of `client_bytes` of `Op` calls and `peer_bytes` of `Peer`
    /// calls in flight.
    pub fn new(client_bytes: usize, peer_bytes: usize) -> ServerBudget {
        let (client_kib, peer_kib) = (
            client_bytes.div_ceil(1024).max(1),
            peer_bytes.div_ceil(1024).max(1),
        );
        let entity_kib = (client_kib / ENTITY_CLIENT_SHARE).max(1);
        ServerBudget {
            client: Arc::new(Semaphore::new(client_kib)),
            client_kib,
            peer: Arc::new(Semaphore::new(peer_kib)),
            peer_kib,
            entity_kib,
            entities: Arc::default(),
        }
    }

    /// Client entity `entity`'s share of the clients' budget, and its
    /// whole size (KiB).
    fn entity(&self, entity: &str) -> (Arc<Semaphore>, usize) {
        let mut m = self.entities.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= ENTITIES_KEPT && !m.contains_key(entity) {
            // Forget the shares no call holds (a held one stays, so an
            // entity never gets a second share).
            let whole = self.entity_kib;
            m.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < whole);
        }
        let s = m
            .entry(entity.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.entity_kib)));
        (s.clone(), self.entity_kib)
    }

    fn of(&self, call: Call) -> (&Arc<Semaphore>, usize) {
        match call {
            Call::Op => (&self.client, self.client_kib),
            Call::Peer => (&self.peer, self.peer_kib),
        }
    }

    /// Take `kib` KiB of a `call` from `entity` (a client's share first,
    /// so that a client waiting on its own share holds none of the
    /// server's), waiting for them; held until the [`Held`] drops.
    pub(crate) async fn take(
        &self,
        call: Call,
        entity: Option<&str>,
        kib: usize,
    ) -> std::io::Result<Held> {
        let share = match (call, entity) {
            (Call::Op, Some(e)) => {
                let (sem, all) = self.entity(e);
                Some(take_kib(&sem, all, kib).await?)
            }
            _ => None,
        };
        let (sem, all) = self.of(call);
        let server = take_kib(sem, all, kib).await?;
        Ok(Held {
            _share: share,
            _server: server,
        })
    }
}

/// A call's bytes taken from a [`ServerBudget`], given back on drop.
pub(crate) struct Held {
    _share: Option<OwnedSemaphorePermit>,
    _server: OwnedSemaphorePermit,
}

impl Default for ServerBudget {
    fn default() -> ServerBudget {
        ServerBudget::new(SERVER_CLIENT_BYTES_MAX, SERVER_PEER_BYTES_MAX)
    }
}

/// What one connection may have in a server at once.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Requests (see [`IN_FLIGHT_MAX`]).
    pub ops: usize,
    /// Bytes of requests (see [`IN_FLIGHT_BYTES_MAX`]); a frame larger
    /// than this waits until nothing else is in flight.
    pub bytes: usize,
    /// The whole server's budget this connection draws on too (`None`:
    /// its own only).
    pub server: Option<ServerBudget>,
    /// How long a connection with no call in flight may send nothing
    /// before the server closes it (its dialler dials again when it has
    /// a call to make).
    pub idle: Duration,
    /// How long a frame may take to arrive once its first byte has (its
    /// header, then its body, each; waits for budget are not counted).
    pub frame_read: Duration,
}

/// Default of [`Limits::idle`] (Ceph's `ms_connection_idle_timeout`).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(900);
/// Default of [`Limits::frame_read`]: a 256 MiB frame at 2 MiB/s.
pub const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(120);

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            ops: IN_FLIGHT_MAX,
            bytes: IN_FLIGHT_BYTES_MAX,
            server: None,
            idle: IDLE_TIMEOUT,
            frame_read: FRAME_READ_TIMEOUT,
        }
    }
}

/// Wait until `r` has the next frame's first byte: `false` if the
/// connection closed, or stayed silent for `idle` with no call of it in
/// flight (`turns` has all of its `ops` places).
async fn next_frame_arrives<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    turns: &Semaphore,
    ops: usize,
    idle: Duration,
) -> std::io::Result<bool> {
    use tokio::io::AsyncBufReadExt;
    loop {
        // `fill_buf` consumes nothing, so a wait cut short loses no byte.
        match tokio::time::timeout(idle, r.fill_buf()).await {
            Ok(Ok(b)) => return Ok(!b.is_empty()),
            Ok(Err(e)) => return Err(e),
            Err(_) if turns.available_permits() >= ops => return Ok(false),
            Err(_) => {}
        }
    }
}

/// `f`, or a timed-out error after `limit`.
async fn within<T>(
    limit: Duration,
    f: impl Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}
/// How long a new connection may take to say which protocol it speaks.
pub const SNIFF_TIMEOUT: Duration = Duration::from_secs(10);

const HEADER_LEN: usize = 16;

/// The call a frame is part of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// A client's op (the `Osd.Op` gRPC call's body and bulk).
    Op,
    /// An OSD-to-OSD message (`Osd.Peer`).
    Peer,
}

impl Call {
    fn code(self) -> u8 {
        match self {
            Call::Op => 1,
            Call::Peer => 2,
        }
    }

    fn from_code(c: u8) -> Option<Call> {
        match c {
            1 => Some(Call::Op),
            2 => Some(Call::Peer),
            _ => None,
        }
    }
}

/// One frame: a request or its reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    pub body: Bytes,
    pub bulk: Vec<Bytes>,
}

struct Frame {
    id: u64,
    call: Call,
    msg: Message,
}

/// The header and body of `f` in one buffer (its payloads follow it on
/// the wire, written from their own buffers).
fn head(f: &Frame) -> Result<Vec<u8>, String> {
    let total = f.msg.body.len() + f.msg.bulk.iter().map(Bytes::len).sum::<usize>();
    if f.msg.bulk.len() > BULK_MAX || total > MESSAGE_BYTES_MAX {
        return Err(format!(
            "message of {total} bytes in {} payloads is over the limit ({MESSAGE_BYTES_MAX} bytes, {BULK_MAX} payloads)",
            f.msg.bulk.len()
        ));
    }
    let mut h = Vec::with_capacity(HEADER_LEN + 4 * f.msg.bulk.len() + f.msg.body.len());
    h.extend_from_slice(&f.id.to_le_bytes());
    h.push(f.call.code());
    h.push(0);
    h.extend_from_slice(&(f.msg.bulk.len() as u16).to_le_bytes());
    h.extend_from_slice(&(f.msg.body.len() as u32).to_le_bytes());
    for b in &f.msg.bulk {
        h.extend_from_slice(&(b.len() as u32).to_le_bytes());
    }
    h.extend_from_slice(&f.msg.body);
    Ok(h)
}

/// Bytes of frames this process wrote to and read from direct connections
/// (headers, bodies and payloads, before TLS: Ceph's `msgr_send_bytes`
/// and `msgr_recv_bytes`).
static WIRE_SENT: AtomicU64 = AtomicU64::new(0);
static WIRE_RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Frame bytes this process has sent and received on direct connections
/// since it started, as (sent, received).
pub fn wire_bytes() -> (u64, u64) {
    (
        WIRE_SENT.load(Ordering::Relaxed),
        WIRE_RECEIVED.load(Ordering::Relaxed),
    )
}

/// Write `f` to `w`, unflushed ([`write_frames`] flushes once its queue
/// is empty).
async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, f: &Frame) -> std::io::Result<()> {
    let h = head(f).map_err(std::io::Error::other)?;
    w.write_all(&h).await?;
    let mut n = h.len();
    for b in &f.msg.bulk {
        w.write_all(b).await?;
        n += b.len();
    }
    WIRE_SENT.fetch_add(n as u64, Ordering::Relaxed);
    Ok(())
}

/// Bytes a connection's writer gathers before it writes them to its
/// stream: small frames queued together (replies to 16 reads in flight)
/// go out in one write, and on TLS in as few records; a payload this
/// large or larger is written from its own buffer.
const WRITE_BUFFER_BYTES: usize = 64 << 10;

/// Write the frames `rx` gives to `w` until it gives `None` or closes,
/// flushing whenever no frame is waiting (so a frame is never held back
/// behind an empty queue); then flush.
async fn write_frames<W: AsyncWrite + Unpin>(
    w: &mut tokio::io::BufWriter<W>,
    rx: &mut mpsc::Receiver<Option<Frame>>,
    faults: Faults,
) -> std::io::Result<()> {
    while let Some(Some(f)) = rx.recv().await {
        pause(w, faults).await?;
        write_frame(w, &f).await?;
        loop {
            match rx.try_recv() {
                Ok(Some(f)) => {
                    pause(w, faults).await?;
                    write_frame(w, &f).await?
                }
                Ok(None) => return w.flush().await,
                Err(_) => break,
            }
        }
        // (A TLS stream also holds the tail of a record back until
        // flushed.)
        w.flush().await?;
    }
    w.flush().await
}

/// An injected pause before the next frame (`inject`; none unless asked
/// for): what was written before it goes out first, and what comes after
/// waits.
async fn pause<W: AsyncWrite + Unpin>(
    w: &mut tokio::io::BufWriter<W>,
    faults: Faults,
) -> std::io::Result<()> {
    if let Some(d) = faults.and_then(|(f, rng)| f.delay(rng)) {
        w.flush().await?;
        tokio::time::sleep(d).await;
    }
    Ok(())
}

/// A frame's header: which call, and how long its parts are.
struct Header {
    id: u64,
    call: Call,
    body_len: usize,
    lens: Vec<usize>,
    /// Body and payloads together (at most [`MESSAGE_BYTES_MAX`]).
    total: usize,
}

/// Read the next frame's header (`None`: the peer closed the connection
/// between frames). A header that announces more than
/// [`MESSAGE_BYTES_MAX`] or [`BULK_MAX`] payloads is an error.
async fn read_header<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
) -> std::io::Result<Option<Header>> {
    let bad = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    let mut h = [0u8; HEADER_LEN];
    match r.read_exact(&mut h).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut hb = &h[..];
    let id = hb.get_u64_le();
    let call = Call::from_code(hb.get_u8()).ok_or_else(|| bad(format!("unknown call {}", h[8])))?;
    let _flags = hb.get_u8();
    let nbulk = hb.get_u16_le() as usize;
    let body_len = hb.get_u32_le() as usize;
    if nbulk > BULK_MAX {
        return Err(bad(format!("{nbulk} payloads (most {BULK_MAX})")));
    }
    let mut lens = vec![0u8; 4 * nbulk];
    r.read_exact(&mut lens).await?;
    let lens: Vec<usize> = lens
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    WIRE_RECEIVED.fetch_add((HEADER_LEN + 4 * nbulk) as u64, Ordering::Relaxed);
    let total = lens.iter().fold(body_len, |a, &l| a.saturating_add(l));
    if total > MESSAGE_BYTES_MAX {
        return Err(bad(format!(
            "frame of {total} bytes (most {MESSAGE_BYTES_MAX})"
        )));
    }
    Ok(Some(Header {
        id,
        call,
        body_len,
        lens,
        total,
    }))
}

/// Read the body and payloads `h` announces.
async fn read_body<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    h: Header,
) -> std::io::Result<Frame> {
    let Header {
        id,
        call,
        body_len,
        lens,
        total,
    } = h;
    let (body, bulk) = if lens.iter().any(|&l| l >= ALIGNED_PAYLOAD_MIN) {
        // Large payloads each in their own page-aligned buffer: a store
        // writes such a buffer to its device with O_DIRECT as it is,
        // where any other would be copied first (8% of the CPU of a 4
        // MiB write, profiled).
        let body = read_into(r, body_len).await?;
        let mut bulk = Vec::with_capacity(lens.len());
        for &l in &lens {
            bulk.push(if l >= ALIGNED_PAYLOAD_MIN {
                read_pooled(r, l).await?
            } else {
                read_into(r, l).await?
            });
        }
        (body, bulk)
    } else {
        // One buffer for body and payloads.
        let mut all = read_into(r, total).await?;
        let body = all.split_to(body_len);
        (body, lens.iter().map(|&l| all.split_to(l)).collect())
    };
    WIRE_RECEIVED.fetch_add(total as u64, Ordering::Relaxed);
    Ok(Frame {
        id,
        call,
        msg: Message { body, bulk },
    })
}

/// Read one whole frame (`None`: closed between frames).
async fn read_frame<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> std::io::Result<Option<Frame>> {
    match read_header(r).await? {
        Some(h) => Ok(Some(read_body(r, h).await?)),
        None => Ok(None),
    }
}

/// Take `kib` KiB of `budget` (of `whole` KiB; a frame over the whole
/// budget takes all of it), waiting for them.
async fn take_kib(
    budget: &Arc<Semaphore>,
    whole: usize,
    kib: usize,
) -> std::io::Result<OwnedSemaphorePermit> {
    let kib = u32::try_from(kib.clamp(1, whole)).unwrap_or(u32::MAX);
    budget
        .clone()
        .acquire_many_owned(kib)
        .await
        .map_err(|_| std::io::Error::other("server closing"))
}

/// Payloads at least this long are read into page-aligned buffers.
const ALIGNED_PAYLOAD_MIN: usize = 64 << 10;

/// This process's page-aligned buffers for received payloads, kept for
/// reuse once the payload is dropped (a fresh one is zeroed first).
static RECEIVED: std::sync::LazyLock<Arc<BufPool>> = std::sync::LazyLock::new(Arc::default);

/// The next `len` bytes of `r` in a page-aligned buffer from
/// [`RECEIVED`]. The buffer is filled through a slice that is already
/// initialised, so the TLS record layer opens records straight into it
/// (`record::RecordStream`) without zeroing it first.
async fn read_pooled<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    len: usize,
) -> std::io::Result<Bytes> {
    let mut buf = RECEIVED.take_any(len);
    r.read_exact(buf.as_mut_slice()).await?;
    Ok(RECEIVED.bytes(buf))
}

/// The next `len` bytes of `r`, read without zeroing a buffer first.
async fn read_into<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    len: usize,
) -> std::io::Result<Bytes> {
    let mut buf = BytesMut::with_capacity(len);
    while buf.len() < len {
        let want = len - buf.len();
        let n = (&mut *r).take(want as u64).read_buf(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(buf.freeze())
}

/// What serves direct calls (an OSD's service).
pub trait Handler: Send + Sync + 'static {
    /// Answer one call (errors are the handler's to encode in the reply),
    /// or `None` to answer nothing and close the connection (a stopped
    /// server: its callers see the connection fail, as after a crash).
    fn call(
        self: Arc<Self>,
        call: Call,
        msg: Message,
        peer: Arc<crate::net::Peer>,
    ) -> Pin<Box<dyn Future<Output = Option<Message>> + Send + 'static>>;

    /// Whether `peer`'s connection closes once the reply to its call is
    /// sent: an OSD closes the connections of a key the map no longer
    /// takes (rotated or revoked), so its open connections end too. The
    /// peer's other calls on it fail; it may dial again (and be refused).
    fn close_after(&self, _peer: &crate::net::Peer) -> bool {
        false
    }
}

/// Serve direct calls on `stream`, whose [`MAGIC`] has been read, from
/// `peer`, until it closes the connection or sends garbage; at most the
/// default [`Limits`] in flight (more wait: the peer's sends stall, the
/// server serves its other connections).
pub async fn serve<H, S>(handler: Arc<H>, stream: S, peer: crate::net::Peer)
where
    H: Handler,
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    serve_with(handler, stream, peer, Limits::default()).await
}

/// As [`serve`], with `limits`.
pub async fn serve_with<H, S>(handler: Arc<H>, stream: S, peer: crate::net::Peer, limits: Limits)
where
    H: Handler,
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (r, w) = tokio::io::split(stream);
    let mut r = BufReader::with_capacity(64 << 10, r);
    // `None` from a handler closes the connection.
    let (tx, mut rx) = mpsc::channel::<Option<Frame>>(IN_FLIGHT_MAX);
    let ended = Arc::new(tokio::sync::Notify::new());
    let e = ended.clone();
    let writer = tokio::spawn(async move {
        let mut w = tokio::io::BufWriter::with_capacity(WRITE_BUFFER_BYTES, w);
        // A peer that stopped reading, or a connection that carried all
        // the records it may: the connection is over, and the peer sees
        // its calls fail.
        if write_frames(&mut w, &mut rx, crate::inject::faults())
            .await
            .is_ok()
        {
            let _ = w.shutdown().await;
        }
        // No more replies can go out: stop reading calls too.
        e.notify_one();
    });
    let turns = Arc::new(Semaphore::new(limits.ops.max(1)));
    let whole = limits.bytes.div_ceil(1024).max(1);
    let budget = Arc::new(Semaphore::new(whole));
    // A client's certificate never sends OSD messages: a connection that
    // tries is closed before the frame's body is read.
    let client = peer
        .entity
        .as_deref()
        .is_some_and(|e| !crate::tls::is_daemon(e));
    let peer = Arc::new(peer);
    loop {
        // The frame's bytes are taken from the connection's budget, then
        // from the server's, before they are read; the permits go with
        // the call until it is answered.
        let next = async {
            if !next_frame_arrives(&mut r, &turns, limits.ops.max(1), limits.idle).await? {
                return Ok(None);
            }
            let Some(h) = within(limits.frame_read, read_header(&mut r)).await? else {
                return Ok(None);
            };
            if client && h.call == Call::Peer {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "a client's connection sent an OSD message",
                ));
            }
            let kib = h.total.div_ceil(1024);
            let mine = take_kib(&budget, whole, kib).await?;
            let server = match &limits.server {
                Some(b) => Some(b.take(h.call, peer.entity.as_deref(), kib).await?),
                None => None,
            };
            let f = within(limits.frame_read, read_body(&mut r, h)).await?;
            Ok::<_, std::io::Error>(Some((f, (mine, server))))
        };
        let read = tokio::select! {
            r = next => r,
            () = ended.notified() => break,
        };
        let (f, bytes) = match read {
            Ok(Some(f)) => f,
            // Closed, or garbage: either way the connection is over (the
            // peer's calls on it fail and it dials again).
            Ok(None) | Err(_) => break,
        };
        let Ok(turn) = turns.clone().acquire_owned().await else {
            break;
        };
        let h = handler.clone();
        let tx = tx.clone();
        let peer = peer.clone();
        tokio::spawn(async move {
            let reply = h
                .clone()
                .call(f.call, f.msg, peer.clone())
                .await
                .map(|msg| Frame {
                    id: f.id,
                    call: f.call,
                    msg,
                });
            let close = reply.is_some() && h.close_after(&peer);
            let _ = tx.send(reply).await;
            if close {
                // The reply goes out, then the connection closes.
                let _ = tx.send(None).await;
            }
            drop(turn);
            drop(bytes);
        });
    }
    drop(tx);
    // Replies still being computed are sent before the writer ends.
    let _ = writer.await;
}

/// How a listener routes an accepted connection.
pub enum Route {
    /// A direct connection, its [`MAGIC`] consumed: give it to [`serve`].
    Direct(TcpStream),
    /// Anything else (gRPC), untouched.
    Other(TcpStream),
}

/// Look at the first bytes of `s` without consuming them unless they are
/// [`MAGIC`]. A connection that says nothing for [`SNIFF_TIMEOUT`], or
/// closes first, is an error (drop it).
pub async fn sniff(mut s: TcpStream) -> std::io::Result<Route> {
    let mut b = [0u8; MAGIC.len()];
    let peeked = tokio::time::timeout(SNIFF_TIMEOUT, async {
        loop {
            let n = s.peek(&mut b).await?;
            if n == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
            // Either enough to decide, or already not a prefix of MAGIC.
            if n == b.len() || b[..n] != MAGIC[..n] {
                return Ok(n);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    if peeked == MAGIC.len() && b == MAGIC {
        s.read_exact(&mut b).await?;
        Ok(Route::Direct(s))
    } else {
        Ok(Route::Other(s))
    }
}

/// Whether callers use the direct path for OSD calls: yes, unless the
/// environment says `LOLIGO_TRANSPORT=grpc` (for side-by-side measurements
/// of the two; OSDs serve both either way).
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("LOLIGO_TRANSPORT").map_or(true, |v| v != "grpc"))
}

/// One OSD call (`Op` or `Peer`) to OSD `osd` at `addr` on the path this
/// process uses ([`enabled`]): the direct path through `direct`, else gRPC
/// through `grpc`. Answered within `timeout`; an error means no answer
/// came, and the connection is dropped so the next call dials again.
/// With TLS, only a server whose certificate `osd` names is reached.
pub async fn osd_call(
    direct: &Conns,
    grpc: &crate::net::Channels,
    osd: &Expect,
    addr: &str,
    call: Call,
    msg: Message,
    timeout: Duration,
) -> Result<Message, String> {
    if enabled() {
        return direct.call(osd, addr, call, msg, timeout).await;
    }
    let req = crate::v1::Raw {
        body: msg.body,
        bulk: msg.bulk,
    };
    let r = tokio::time::timeout(timeout, async {
        let mut c = grpc.osd(addr, osd).await?;
        let r = match call {
            Call::Op => c.op(req).await,
            Call::Peer => c.peer(req).await,
        };
        r.map(|r| {
            let r = r.into_inner();
            Message {
                body: r.body,
                bulk: r.bulk,
            }
        })
        .map_err(|s| s.message().to_string())
    })
    .await
    .unwrap_or_else(|_| Err(format!("{addr}: no answer in {timeout:?}")));
    if r.is_err() {
        grpc.forget(addr);
    }
    r
}

type Waiter = oneshot::Sender<Message>;

/// One client connection: a writer task fed by a queue (so a caller that
/// gives up mid-send cannot leave half a frame on the wire) and a reader
/// task that hands each reply to its waiter.
struct Conn {
    tx: mpsc::Sender<Option<Frame>>,
    waiting: Arc<Mutex<HashMap<u64, Waiter>>>,
    next: AtomicU64,
    dead: Arc<AtomicBool>,
    reader: tokio::task::AbortHandle,
}

impl Conn {
    async fn dial(
        addr: &str,
        expect: &crate::tls::Expect,
        timeout: Duration,
        security: Option<&crate::net::Security>,
        faults: Faults,
    ) -> Result<Conn, String> {
        let s = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| format!("{addr}: connect timed out"))?
            .map_err(|e| format!("{addr}: {e}"))?;
        let _ = s.set_nodelay(true);
        match security {
            None => Conn::start(addr, s, faults).await,
            Some(sec) => {
                // Whole records during the handshake, then the record
                // layer is ours (see `record`).
                let mut wire = crate::wire::Wire::new(s);
                wire.whole_records(true);
                let mut s =
                    tokio::time::timeout(timeout, sec.direct_connector().connect(wire, expect))
                        .await
                        .map_err(|_| format!("{addr}: TLS handshake timed out"))?
                        .map_err(|e| format!("{addr}: TLS: {e}"))?;
                s.flush().await.map_err(|e| format!("{addr}: TLS: {e}"))?;
                let (wire, conn) = s.into_inner();
                let mut s = crate::record::take_over(wire, conn)
                    .map_err(|e| format!("{addr}: TLS: {e}"))?;
                s.limit_records(sec.records_max());
                Conn::start(addr, s, faults).await
            }
        }
    }

    /// The connection on `s`: its magic sent, then the writer and reader
    /// tasks.
    async fn start<S>(addr: &str, mut s: S, faults: Faults) -> Result<Conn, String>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        s.write_all(&MAGIC)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        let (r, w) = tokio::io::split(s);
        // (`None` is never sent: the writer ends when the `Conn` goes.)
        let (tx, mut rx) = mpsc::channel::<Option<Frame>>(IN_FLIGHT_MAX);
        let waiting: Arc<Mutex<HashMap<u64, Waiter>>> = Arc::default();
        let dead = Arc::new(AtomicBool::new(false));
        // The connection is gone: every waiter learns it now (its sender is
        // dropped), and the next call dials again.
        let gone = |d: &AtomicBool, wt: &Mutex<HashMap<u64, Waiter>>| {
            d.store(true, Ordering::Relaxed);
            wt.lock().unwrap_or_else(|p| p.into_inner()).clear();
        };
        let (wt, d) = (waiting.clone(), dead.clone());
        let reader = tokio::spawn(async move {
            let mut r = BufReader::with_capacity(64 << 10, r);
            while let Ok(Some(f)) = read_frame(&mut r).await {
                let w = wt.lock().unwrap_or_else(|p| p.into_inner()).remove(&f.id);
                if let Some(w) = w {
                    let _ = w.send(f.msg);
                }
            }
            gone(&d, &wt);
        });
        let reader_handle = reader.abort_handle();
        let (wt, d) = (waiting.clone(), dead.clone());
        tokio::spawn(async move {
            let mut w = tokio::io::BufWriter::with_capacity(WRITE_BUFFER_BYTES, w);
            if write_frames(&mut w, &mut rx, faults).await.is_err() {
                // Nothing more can be sent (the socket failed, or the
                // connection carried all the records it may): the calls
                // on it fail now, not at their timeouts, and the socket
                // closes once both halves are gone.
                gone(&d, &wt);
                reader.abort();
            } else {
                // Unused (every `Conn` handle dropped): the server reads
                // the end of the stream, closes, and the reader ends.
                let _ = w.shutdown().await;
            }
        });
        Ok(Conn {
            tx,
            waiting,
            next: AtomicU64::new(1),
            dead,
            reader: reader_handle,
        })
    }

    /// An injected socket failure: every call on the connection fails now
    /// and no reply is read; frames already queued still go out (the
    /// receiver may act on them), and the socket closes once the last
    /// handle is gone.
    fn reset(&self) {
        self.dead.store(true, Ordering::Relaxed);
        self.reader.abort();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Queue `msg` once more under an id of its own whose reply nobody
    /// waits for (an injected duplicate).
    async fn send_copy(&self, call: Call, msg: Message) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(Some(Frame { id, call, msg })).await;
    }

    async fn call(&self, call: Call, msg: Message) -> Result<Message, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        // Whatever happens to this call, its entry goes with it.
        struct Forget<'a>(&'a Mutex<HashMap<u64, Waiter>>, u64);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&self.1);
            }
        }
        let _forget = Forget(&self.waiting, id);
        if self.dead.load(Ordering::Relaxed) {
            return Err("connection closed".into());
        }
        self.tx
            .send(Some(Frame { id, call, msg }))
            .await
            .map_err(|_| "connection closed".to_string())?;
        rx.await.map_err(|_| "connection closed".to_string())
    }
}

/// Direct connections to OSDs by `host:port` and OSD id, dialled on first
/// use and dropped when they fail.
pub struct Conns {
    conns: Mutex<HashMap<(String, Expect), Arc<Conn>>>,
    connect_timeout: Duration,
    security: Option<crate::net::Security>,
    faults: Faults,
}

impl Conns {
    pub fn new(connect_timeout: Duration) -> Conns {
        Conns {
            conns: Mutex::new(HashMap::new()),
            connect_timeout,
            security: None,
            faults: crate::inject::faults(),
        }
    }

    /// The same, injecting `faults` (with their generator) instead of
    /// what the environment asks for.
    pub fn injecting(
        mut self,
        faults: &'static (crate::inject::Faults, crate::inject::Rng),
    ) -> Conns {
        self.faults = Some(faults);
        self
    }

    /// The same, its connections made with `security` (mutual TLS), or
    /// plain without.
    pub fn secured(mut self, security: Option<&crate::net::Security>) -> Conns {
        self.security = security.cloned();
        self
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Expect), Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn conn(&self, osd: &Expect, addr: &str) -> Result<Arc<Conn>, String> {
        let key = (addr.to_string(), osd.clone());
        if let Some(c) = self.conns().get(&key) {
            if !c.dead.load(Ordering::Relaxed) {
                return Ok(c.clone());
            }
        }
        let sec = self.security.as_ref();
        let c = Arc::new(Conn::dial(addr, osd, self.connect_timeout, sec, self.faults).await?);
        let mut m = self.conns();
        // Two tasks may dial at once: keep a live one.
        let kept = m
            .entry(key)
            .and_modify(|old| {
                if old.dead.load(Ordering::Relaxed) {
                    *old = c.clone();
                }
            })
            .or_insert(c);
        Ok(kept.clone())
    }

    /// One call to the OSD `osd` names at `addr`, answered within
    /// `timeout`. An error means no answer came (the call may or may not
    /// have run). With TLS, only a server whose certificate `osd` names
    /// is reached.
    pub async fn call(
        &self,
        osd: &Expect,
        addr: &str,
        call: Call,
        msg: Message,
        timeout: Duration,
    ) -> Result<Message, String> {
        let r = tokio::time::timeout(timeout, async {
            let c = self.conn(osd, addr).await?;
            let Some((faults, rng)) = self.faults else {
                return c.call(call, msg).await;
            };
            match faults.call(rng, call == Call::Op) {
                None => c.call(call, msg).await,
                Some(CallFault::ResetBefore) => {
                    c.reset();
                    Err(format!("{addr}: injected socket failure"))
                }
                Some(CallFault::ResetAfter) => {
                    // Queued before the reset, so it is sent.
                    c.send_copy(call, msg).await;
                    c.reset();
                    Err(format!("{addr}: injected socket failure"))
                }
                Some(CallFault::Duplicate) => {
                    c.send_copy(call, msg.clone()).await;
                    c.call(call, msg).await
                }
            }
        })
        .await
        .unwrap_or_else(|_| Err(format!("{addr}: no answer in {timeout:?}")));
        if r.is_err() {
            self.forget(addr);
        }
        r
    }

    /// Drop the connections to `addr`.
    pub fn forget(&self, addr: &str) {
        self.conns().retain(|(a, _), _| a != addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Echoes the body and payloads, reversed, after `delay_ms` taken from
    /// the first body byte (so replies come back out of order).
    struct Echo;

    impl Handler for Echo {
        fn call(
            self: Arc<Self>,
            call: Call,
            msg: Message,
            _peer: Arc<crate::net::Peer>,
        ) -> Pin<Box<dyn Future<Output = Option<Message>> + Send + 'static>> {
            Box::pin(async move {
                let delay = msg.body.first().copied().unwrap_or(0);
                if delay == 255 {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(delay as u64)).await;
                let mut body = msg.body.to_vec();
                body.push(call.code());
                let mut bulk = msg.bulk;
                bulk.reverse();
                Some(Message {
                    body: body.into(),
                    bulk,
                })
            })
        }
    }

    async fn listener() -> (String, tokio::task::JoinHandle<()>) {
        let (addr, _, h) = plain_listener(Arc::new(Echo)).await;
        (addr, h)
    }

    /// A plain listener serving `handler` on the direct path (anything
    /// else gets the gRPC preface it sent back), and how many connections
    /// it has accepted.
    async fn plain_listener<H: Handler>(
        handler: Arc<H>,
    ) -> (String, Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicU64::new(0));
        let n = accepted.clone();
        let h = tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                n.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                tokio::spawn(async move {
                    match sniff(s).await {
                        Ok(Route::Direct(s)) => {
                            let peer = crate::net::Peer {
                                addr: None,
                                entity: None,
                                serial: None,
                            };
                            serve(handler, s, peer).await
                        }
                        Ok(Route::Other(mut s)) => {
                            // What gRPC would read: the preface, intact.
                            let mut pre = [0u8; 24];
                            let _ = s.read_exact(&mut pre).await;
                            let _ = s.write_all(&pre).await;
                            let _ = s.write_all(b" not direct").await;
                        }
                        Err(_) => {}
                    }
                });
            }
        });
        (addr, accepted, h)
    }

    /// Holds calls whose body starts with 1 until opened, counting how
    /// many are inside at once; answers others at once.
    struct Gate {
        inside: AtomicU64,
        most: AtomicU64,
        open: tokio::sync::watch::Receiver<bool>,
    }

    impl Handler for Gate {
        fn call(
            self: Arc<Self>,
            _call: Call,
            msg: Message,
            _peer: Arc<crate::net::Peer>,
        ) -> Pin<Box<dyn Future<Output = Option<Message>> + Send + 'static>> {
            Box::pin(async move {
                if msg.body.first() == Some(&1) {
                    let n = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
                    self.most.fetch_max(n, Ordering::SeqCst);
                    let mut open = self.open.clone();
                    let _ = open.wait_for(|o| *o).await;
                    self.inside.fetch_sub(1, Ordering::SeqCst);
                }
                Some(Message {
                    body: msg.body,
                    bulk: Vec::new(),
                })
            })
        }
    }

    /// A plain direct-path server with `limits` whose handler is a
    /// [`Gate`] (closed until the sender says otherwise); its `i`th
    /// accepted connection is entity `name_of(i)`'s.
    async fn gate_server(
        limits: Limits,
        name_of: fn(usize) -> Option<String>,
    ) -> (String, tokio::sync::watch::Sender<bool>, Arc<Gate>) {
        let (open_tx, open) = tokio::sync::watch::channel(false);
        let gate = Arc::new(Gate {
            inside: AtomicU64::new(0),
            most: AtomicU64::new(0),
            open,
        });
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let g = gate.clone();
        tokio::spawn(async move {
            let mut i = 0;
            while let Ok((s, _)) = l.accept().await {
                let (g, limits) = (g.clone(), limits.clone());
                let entity = name_of(i);
                i += 1;
                tokio::spawn(async move {
                    if let Ok(Route::Direct(s)) = sniff(s).await {
                        let peer = crate::net::Peer {
                            addr: None,
                            entity,
                            serial: None,
                        };
                        serve_with(g, s, peer, limits).await;
                    }
                });
            }
        });
        (addr, open_tx, gate)
    }

    /// Whether the server closed `s` within `wait` (it reads end of file).
    async fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
        let mut b = [0u8; 64];
        loop {
            match tokio::time::timeout(wait, s.read(&mut b)).await {
                Ok(Ok(0) | Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }

    #[tokio::test]
    async fn silent_connections_and_slow_frames_are_closed_but_not_waiting_calls() {
        let (addr, open, _) = gate_server(
            Limits {
                idle: Duration::from_millis(300),
                frame_read: Duration::from_millis(300),
                ..Limits::default()
            },
            |_| None,
        )
        .await;
        // Silent after its magic, nothing in flight: closed.
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&MAGIC).await.unwrap();
        assert!(closed_within(&mut s, Duration::from_secs(5)).await);
        // Half a header, then nothing: closed.
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&MAGIC).await.unwrap();
        s.write_all(&[1, 0, 0, 0]).await.unwrap();
        assert!(closed_within(&mut s, Duration::from_secs(5)).await);
        // A call the server is still working on keeps its connection open
        // however long it takes; once answered, the connection is idle.
        let c = Arc::new(Conns::new(Duration::from_secs(2)));
        let msg = Message {
            body: Bytes::from_static(&[1]),
            bulk: Vec::new(),
        };
        let (c2, a2) = (c.clone(), addr.clone());
        let slow = tokio::spawn(async move {
            c2.call(&Expect::osd(1), &a2, Call::Op, msg, Duration::from_secs(20))
                .await
        });
        tokio::time::sleep(Duration::from_millis(1200)).await;
        open.send(true).unwrap();
        let r = slow.await.unwrap();
        assert!(r.is_ok(), "a call in flight lost its connection: {r:?}");
        // The dialler finds its idle connection closed and dials again.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let msg = Message {
            body: Bytes::from_static(&[2]),
            bulk: Vec::new(),
        };
        let r = c
            .call(
                &Expect::osd(1),
                &addr,
                Call::Op,
                msg,
                Duration::from_secs(5),
            )
            .await;
        assert!(r.is_ok(), "{r:?}");
    }

    #[tokio::test]
    async fn one_client_over_many_connections_takes_only_its_share_of_the_server() {
        // A server budget of 2 MiB of client ops: each entity's share is
        // 1 MiB. client.hog's three connections come first, then
        // client.other's.
        let (addr, open, gate) = gate_server(
            Limits {
                server: Some(ServerBudget::new(2 << 20, 2 << 20)),
                ..Limits::default()
            },
            |i| Some(if i < 3 { "client.hog" } else { "client.other" }.to_string()),
        )
        .await;
        let msg = |body: u8, size: usize| Message {
            body: Bytes::from(vec![body]),
            bulk: vec![Bytes::from(vec![0u8; size])],
        };
        let t = Duration::from_secs(20);
        let (one, two) = (&Expect::osd(1), &Expect::osd(2));
        // Three connections of client.hog, dialled in order (each call on
        // another expectation is another connection).
        let hog = Arc::new(Conns::new(Duration::from_secs(2)));
        for e in [one, two, &Expect::osd(3)] {
            hog.call(e, &addr, Call::Op, msg(2, 0), t).await.unwrap();
        }
        let other = Conns::new(Duration::from_secs(2));
        other
            .call(one, &addr, Call::Op, msg(2, 0), t)
            .await
            .unwrap();
        // Six held calls of 400 KiB from the hog: at most two inside at
        // once (1 MiB), however many connections carry them.
        let held: Vec<_> = (0..6)
            .map(|i| {
                let (hog, addr) = (hog.clone(), addr.clone());
                let e = [Expect::osd(1), Expect::osd(2), Expect::osd(3)][i % 3].clone();
                tokio::spawn(
                    async move { hog.call(&e, &addr, Call::Op, msg(1, 400 << 10), t).await },
                )
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(gate.inside.load(Ordering::SeqCst), 2);
        // The other client is served meanwhile, with 800 KiB.
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            other.call(one, &addr, Call::Op, msg(2, 800 << 10), t),
        )
        .await;
        assert!(matches!(r, Ok(Ok(_))), "{r:?}");
        open.send(true).unwrap();
        for h in held {
            h.await.unwrap().unwrap();
        }
        assert_eq!(gate.most.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_connection_past_its_limits_waits_and_the_server_serves_others() {
        let limits = Limits {
            ops: 8,
            bytes: 1 << 20,
            ..Limits::default()
        };
        let (addr, open_tx, gate) = gate_server(limits, |_| None).await;
        let call = |c: Arc<Conns>, addr: String, body: u8, size: usize| {
            tokio::spawn(async move {
                let msg = Message {
                    body: Bytes::from(vec![body]),
                    bulk: vec![Bytes::from(vec![0u8; size])],
                };
                c.call(
                    &Expect::osd(1),
                    &addr,
                    Call::Op,
                    msg,
                    Duration::from_secs(20),
                )
                .await
            })
        };
        // Bytes: three calls of 600 KiB against 1 MiB: one inside at once.
        let hog = Arc::new(Conns::new(Duration::from_secs(2)));
        let big: Vec<_> = (0..3)
            .map(|_| call(hog.clone(), addr.clone(), 1, 600 << 10))
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(gate.most.load(Ordering::SeqCst), 1);
        // Another connection is served meanwhile.
        let other = Arc::new(Conns::new(Duration::from_secs(2)));
        let r = call(other.clone(), addr.clone(), 0, 10).await.unwrap();
        assert!(r.is_ok(), "{r:?}");
        open_tx.send(true).unwrap();
        for b in big {
            assert!(b.await.unwrap().is_ok());
        }
        // Requests: twenty small ones against 8 at once.
        open_tx.send(false).unwrap();
        gate.most.store(0, Ordering::SeqCst);
        let small: Vec<_> = (0..20)
            .map(|_| call(hog.clone(), addr.clone(), 1, 10))
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(gate.most.load(Ordering::SeqCst), 8);
        assert!(call(other.clone(), addr.clone(), 0, 10)
            .await
            .unwrap()
            .is_ok());
        open_tx.send(true).unwrap();
        for c in small {
            assert!(c.await.unwrap().is_ok());
        }
    }

    /// Many connections, each within its own limits, together stay within
    /// the server's budget: client ops past it wait (OSD messages have
    /// their own budget and go on meanwhile).
    #[tokio::test]
    async fn connections_together_stay_within_the_servers_budget() {
        let limits = Limits {
            server: Some(ServerBudget::new(1 << 20, 1 << 20)),
            ..Limits::default()
        };
        let (addr, open_tx, gate) = gate_server(limits, |_| None).await;
        let call = |addr: String, call: Call, body: u8, size: usize| {
            tokio::spawn(async move {
                let c = Conns::new(Duration::from_secs(2));
                let msg = Message {
                    body: Bytes::from(vec![body]),
                    bulk: vec![Bytes::from(vec![0u8; size])],
                };
                c.call(&Expect::osd(1), &addr, call, msg, Duration::from_secs(20))
                    .await
            })
        };
        // Eight connections of one 600 KiB op each against 1 MiB: one in.
        let big: Vec<_> = (0..8)
            .map(|_| call(addr.clone(), Call::Op, 1, 600 << 10))
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(gate.most.load(Ordering::SeqCst), 1);
        // OSD messages have their own budget.
        let r = call(addr.clone(), Call::Peer, 0, 600 << 10).await.unwrap();
        assert!(r.is_ok(), "{r:?}");
        open_tx.send(true).unwrap();
        for b in big {
            assert!(b.await.unwrap().is_ok());
        }
    }

    /// A client's connection that sends an OSD message is closed before
    /// the message is read; an OSD's is served.
    #[tokio::test]
    async fn a_clients_connection_sending_osd_messages_is_closed() {
        use crate::net::Security;
        use crate::tls::Authority;
        let ca = Authority::generate("t").unwrap();
        let addr = secured_listener(Security::new(ca.issue("osd.1").unwrap()).unwrap()).await;
        let msg = || Message {
            body: Bytes::from_static(&[0]),
            bulk: vec![Bytes::from(vec![1u8; 1 << 20])],
        };
        let t = Duration::from_secs(5);
        let client = Conns::new(Duration::from_secs(2))
            .secured(Some(&Security::new(ca.issue("client.a").unwrap()).unwrap()));
        assert!(client
            .call(&Expect::osd(1), &addr, Call::Op, msg(), t)
            .await
            .is_ok());
        assert!(client
            .call(&Expect::osd(1), &addr, Call::Peer, msg(), t)
            .await
            .is_err());
        let osd = Conns::new(Duration::from_secs(2))
            .secured(Some(&Security::new(ca.issue("osd.2").unwrap()).unwrap()));
        assert!(osd
            .call(&Expect::osd(1), &addr, Call::Peer, msg(), t)
            .await
            .is_ok());
    }

    /// A listener whose connections go through `net::accept` with
    /// `security`: direct ones to the echo handler, gRPC ones get the
    /// peer's entity written back.
    async fn secured_listener(security: crate::net::Security) -> String {
        secured_listener_with(security, Arc::new(Echo)).await
    }

    /// [`secured_listener`] with another handler.
    async fn secured_listener_with<H: Handler>(
        security: crate::net::Security,
        handler: Arc<H>,
    ) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                let (handler, sec) = (handler.clone(), security.clone());
                tokio::spawn(async move {
                    if let Ok(a) = crate::net::accept(s, Some(&sec)).await {
                        if a.direct {
                            let peer = a.io.peer();
                            serve(handler, a.io, peer).await;
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn the_direct_path_runs_inside_tls_and_refuses_strangers() {
        use crate::net::Security;
        use crate::tls::Authority;
        let ca = Authority::generate("t").unwrap();
        let addr = secured_listener(Security::new(ca.issue("osd.1").unwrap()).unwrap()).await;
        let member = Conns::new(Duration::from_secs(2))
            .secured(Some(&Security::new(ca.issue("osd.2").unwrap()).unwrap()));
        // Payloads of several sizes, one after another, so that each
        // side's received buffers are reused (with the last payload's
        // bytes still in them) and must be filled anew.
        let mut rng = loligo_testkit::Rng::new(3);
        for len in [3 << 20, (1 << 20) + 17, 2 << 20, 64 << 10, (3 << 20) - 5] {
            let big = Bytes::from(rng.bytes(len));
            let r = member
                .call(
                    &Expect::osd(1),
                    &addr,
                    Call::Peer,
                    Message {
                        body: Bytes::from_static(&[0, 9]),
                        bulk: vec![big.clone(), Bytes::from_static(b"y")],
                    },
                    Duration::from_secs(5),
                )
                .await
                .unwrap();
            assert_eq!(&r.body[..], &[0, 9, Call::Peer.code()][..]);
            assert_eq!(r.bulk, vec![Bytes::from_static(b"y"), big], "{len} bytes");
        }
        // Plain text, or another cluster's certificate: no answer.
        let msg = || Message {
            body: Bytes::from_static(&[0]),
            bulk: Vec::new(),
        };
        let plain = Conns::new(Duration::from_secs(2));
        assert!(plain
            .call(
                &Expect::osd(1),
                &addr,
                Call::Op,
                msg(),
                Duration::from_secs(2)
            )
            .await
            .is_err());
        let other = Authority::generate("u").unwrap();
        let stranger = Conns::new(Duration::from_secs(2))
            .secured(Some(&Security::new(other.issue("osd.2").unwrap()).unwrap()));
        assert!(stranger
            .call(
                &Expect::osd(1),
                &addr,
                Call::Op,
                msg(),
                Duration::from_secs(2)
            )
            .await
            .is_err());
    }

    /// Answers every call with a payload of its size (so one direction of
    /// a connection carries far more records than the other).
    struct Reply(usize);

    impl Handler for Reply {
        fn call(
            self: Arc<Self>,
            _call: Call,
            _msg: Message,
            _peer: Arc<crate::net::Peer>,
        ) -> Pin<Box<dyn Future<Output = Option<Message>> + Send + 'static>> {
            let bulk = vec![Bytes::from(vec![7u8; self.0])];
            Box::pin(async move {
                Some(Message {
                    body: Bytes::from_static(&[1]),
                    bulk,
                })
            })
        }
    }

    /// A connection that has carried all the records it may (2^24 each
    /// way; 40 here) closes: the calls on it fail at once, not at their
    /// timeout, and the next call dials a new connection. First the
    /// server's sending side runs out (large replies to small calls),
    /// then the client's (large calls, small replies).
    /// Echoes calls; once `revoked`, asks for each connection to close
    /// after its reply.
    struct Revocable(Arc<AtomicBool>);

    impl Handler for Revocable {
        fn call(
            self: Arc<Self>,
            _call: Call,
            msg: Message,
            _peer: Arc<crate::net::Peer>,
        ) -> Pin<Box<dyn Future<Output = Option<Message>> + Send + 'static>> {
            Box::pin(async move { Some(msg) })
        }

        fn close_after(&self, _peer: &crate::net::Peer) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[tokio::test]
    async fn a_revoked_callers_connection_closes_after_its_reply() {
        let revoked = Arc::new(AtomicBool::new(false));
        let (addr, accepted, _server) = plain_listener(Arc::new(Revocable(revoked.clone()))).await;
        let c = Conns::new(Duration::from_secs(2));
        let osd1 = Expect::osd(1);
        let call = |b: u8| {
            let msg = Message {
                body: Bytes::from(vec![b]),
                bulk: vec![],
            };
            c.call(&osd1, &addr, Call::Op, msg, Duration::from_secs(5))
        };
        // Valid: calls share one connection.
        assert_eq!(call(1).await.unwrap().body[..], [1]);
        assert_eq!(call(2).await.unwrap().body[..], [2]);
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        // Revoked: the reply still comes, then the connection closes, so
        // the next call dials again (and is closed after it in turn).
        revoked.store(true, Ordering::SeqCst);
        assert_eq!(call(3).await.unwrap().body[..], [3]);
        let mut answered = false;
        for _ in 0..20 {
            if let Ok(m) = call(4).await {
                assert_eq!(m.body[..], [4]);
                answered = true;
                break;
            }
        }
        assert!(answered, "a call after the close dials again");
        assert!(
            accepted.load(Ordering::SeqCst) >= 2,
            "the closed connection was not reused"
        );
    }

    #[tokio::test]
    async fn a_connection_out_of_records_closes_and_the_next_call_dials_again() {
        use crate::net::Security;
        use crate::record::RECORDS_MAX;
        use crate::tls::Authority;
        let ca = Authority::generate("t").unwrap();
        let big = Bytes::from(vec![7u8; 64 << 10]);
        for (server_max, client_max, call_len, reply_len) in [
            (40, RECORDS_MAX, 0, 64 << 10),
            (RECORDS_MAX, 40, 64 << 10, 0),
        ] {
            let server = Security::new(ca.issue("osd.1").unwrap()).unwrap();
            let addr = secured_listener_with(
                server.with_records_max(server_max),
                Arc::new(Reply(reply_len)),
            )
            .await;
            let client = Security::new(ca.issue("osd.2").unwrap())
                .unwrap()
                .with_records_max(client_max);
            let c = Conns::new(Duration::from_secs(2)).secured(Some(&client));
            let (mut ok, mut failed) = (0, 0);
            for i in 0..30 {
                let t0 = std::time::Instant::now();
                let msg = Message {
                    body: Bytes::from_static(&[0]),
                    bulk: vec![big.slice(..call_len)],
                };
                let r = c
                    .call(
                        &Expect::osd(1),
                        &addr,
                        Call::Op,
                        msg,
                        Duration::from_secs(5),
                    )
                    .await;
                assert!(
                    t0.elapsed() < Duration::from_secs(2),
                    "call {i} waited {:?} (server {server_max}, client {client_max})",
                    t0.elapsed()
                );
                match r {
                    Ok(m) => {
                        assert_eq!(m.bulk, vec![big.slice(..reply_len)]);
                        ok += 1;
                    }
                    Err(_) => failed += 1,
                }
            }
            // About six records each way a call: a connection carries a
            // handful of calls, and one call at each of its ends fails.
            assert!(ok >= 20, "{ok} answered, {failed} failed");
            assert!(failed >= 2, "{ok} answered, {failed} failed");
        }
    }

    #[tokio::test]
    async fn calls_run_concurrently_and_replies_find_their_callers() {
        let (addr, _h) = listener().await;
        let c = Arc::new(Conns::new(Duration::from_secs(2)));
        let wire_before = wire_bytes();
        let mut calls = Vec::new();
        for i in 0..20u8 {
            let (c, addr) = (c.clone(), addr.clone());
            calls.push(tokio::spawn(async move {
                // Later calls answer sooner.
                let body = Bytes::from(vec![40 - 2 * i, i]);
                let big = Bytes::from(vec![i; 1 << 20]);
                let msg = Message {
                    body,
                    bulk: vec![big.clone(), Bytes::new(), Bytes::from_static(b"x")],
                };
                let call = if i % 2 == 0 { Call::Op } else { Call::Peer };
                let r = c
                    .call(&Expect::osd(1), &addr, call, msg, Duration::from_secs(5))
                    .await
                    .unwrap();
                assert_eq!(&r.body[..], &[40 - 2 * i, i, call.code()][..]);
                assert_eq!(r.bulk, vec![Bytes::from_static(b"x"), Bytes::new(), big]);
                // A large payload arrives page-aligned (for O_DIRECT).
                assert_eq!(r.bulk[2].as_ptr() as usize % loligo_bulk::aligned::ALIGN, 0);
            }));
        }
        for t in calls {
            t.await.unwrap();
        }
        assert_eq!(c.conns().len(), 1);
        // Both ends are in this process: each 1 MiB payload was sent and
        // received twice (other tests' frames may add to the counts).
        let (sent, received) = wire_bytes();
        assert!(sent - wire_before.0 >= 40 << 20, "{sent} {wire_before:?}");
        assert!(
            received - wire_before.1 >= 40 << 20,
            "{received} {wire_before:?}"
        );
        // A handler that answers nothing closes the connection: the call
        // fails at once (no waiting for the timeout) and the next dials.
        let t0 = std::time::Instant::now();
        let silent = Message {
            body: Bytes::from_static(&[255]),
            bulk: Vec::new(),
        };
        let r = c
            .call(
                &Expect::osd(1),
                &addr,
                Call::Op,
                silent,
                Duration::from_secs(5),
            )
            .await;
        assert_eq!(r, Err("connection closed".to_string()));
        assert!(t0.elapsed() < Duration::from_secs(2));
        let again = Message {
            body: Bytes::from_static(&[0]),
            bulk: Vec::new(),
        };
        assert!(c
            .call(
                &Expect::osd(1),
                &addr,
                Call::Op,
                again,
                Duration::from_secs(5)
            )
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn other_protocols_pass_through_untouched() {
        let (addr, _h) = listener().await;
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        s.write_all(preface).await.unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, [&preface[..], b" not direct"].concat());
    }

    #[tokio::test]
    async fn oversized_or_garbage_frames_close_the_connection() {
        let (addr, _h) = listener().await;
        // A header announcing more than the limit: closed, nothing allocated.
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&MAGIC).await.unwrap();
        let mut h = Vec::new();
        h.extend_from_slice(&7u64.to_le_bytes());
        h.extend_from_slice(&[1, 0]);
        h.extend_from_slice(&1u16.to_le_bytes());
        h.extend_from_slice(&16u32.to_le_bytes());
        h.extend_from_slice(&u32::MAX.to_le_bytes());
        s.write_all(&h).await.unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        assert!(got.is_empty());
        // An unknown call kind: closed too.
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&MAGIC).await.unwrap();
        s.write_all(&[0u8, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0])
            .await
            .unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        assert!(got.is_empty());
        // A sender refuses to build a frame over the limit.
        let f = Frame {
            id: 1,
            call: Call::Op,
            msg: Message {
                body: Bytes::new(),
                bulk: vec![Bytes::new(); BULK_MAX + 1],
            },
        };
        assert!(head(&f).is_err());
    }

    #[tokio::test]
    async fn a_dead_server_is_an_error_and_the_next_call_dials_again() {
        let c = Conns::new(Duration::from_millis(300));
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let msg = Message::default();
        assert!(c
            .call(
                &Expect::osd(1),
                &addr,
                Call::Op,
                msg.clone(),
                Duration::from_secs(1)
            )
            .await
            .is_err());
        assert!(c.conns().is_empty());
        // A server that accepts and never answers: the call times out.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let _keep = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = l.accept().await {
                held.push(s);
            }
        });
        let r = c
            .call(
                &Expect::osd(1),
                &addr,
                Call::Op,
                msg,
                Duration::from_millis(200),
            )
            .await;
        assert!(r.unwrap_err().contains("no answer"));
        assert!(c.conns().is_empty());
    }

    /// Echoes the body, counting the calls it answered.
    #[derive(Default)]
    struct Counter(AtomicU64);

    impl Handler for Counter {
        fn call(
            self: Arc<Self>,
            _call: Call,
            msg: Message,
            _peer: Arc<crate::net::Peer>,
        ) -> Pin<Box<dyn Future<Output = Option<Message>> + Send + 'static>> {
            Box::pin(async move {
                self.0.fetch_add(1, Ordering::SeqCst);
                Some(Message {
                    body: msg.body,
                    bulk: Vec::new(),
                })
            })
        }
    }

    fn injecting(spec: &str) -> &'static (crate::inject::Faults, crate::inject::Rng) {
        let f = crate::inject::Faults::parse(spec).unwrap();
        Box::leak(Box::new((f, crate::inject::Rng::new(11))))
    }

    async fn settle(n: &AtomicU64) -> u64 {
        let mut last = n.load(Ordering::SeqCst);
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = n.load(Ordering::SeqCst);
            if now == last {
                return now;
            }
            last = now;
        }
    }

    #[tokio::test]
    async fn injected_socket_failures_fail_calls_lose_replies_and_never_answer_wrongly() {
        let counter = Arc::new(Counter::default());
        let (addr, accepted, _h) = plain_listener(counter.clone()).await;
        let c = Conns::new(Duration::from_secs(5)).injecting(injecting("socket_failures=4"));
        let (mut answered, mut failed) = (0, 0);
        for i in 0..400u32 {
            let body = Bytes::copy_from_slice(&i.to_le_bytes());
            let msg = Message {
                body: body.clone(),
                bulk: Vec::new(),
            };
            match c
                .call(
                    &Expect::osd(1),
                    &addr,
                    Call::Peer,
                    msg,
                    Duration::from_secs(5),
                )
                .await
            {
                Ok(r) => {
                    assert_eq!(r.body, body, "the answer to another call");
                    answered += 1;
                }
                Err(e) => {
                    assert!(e.contains("injected socket failure"), "{e}");
                    failed += 1;
                }
            }
        }
        assert!((60..140).contains(&failed), "{failed} of 400 failed");
        // Each failure dialled again.
        assert!(accepted.load(Ordering::SeqCst) >= 40);
        // Half the failures came after the call was sent: the server
        // answered those too, and their replies were lost.
        let served = settle(&counter.0).await;
        assert!(
            served > answered + 20,
            "{served} served, {answered} answered"
        );
        assert!(
            served < answered + failed,
            "{served} served of {}",
            answered + failed
        );
    }

    #[tokio::test]
    async fn injected_duplicates_send_client_ops_twice_and_osd_messages_once() {
        let counter = Arc::new(Counter::default());
        let (addr, _, _h) = plain_listener(counter.clone()).await;
        let osd = Expect::osd(1);
        let c = Conns::new(Duration::from_secs(5)).injecting(injecting("dup_probability=1"));
        for call in [Call::Op, Call::Peer] {
            let before = counter.0.load(Ordering::SeqCst);
            for i in 0..50u8 {
                let msg = Message {
                    body: Bytes::from(vec![i]),
                    bulk: Vec::new(),
                };
                let r = c.call(&osd, &addr, call, msg, Duration::from_secs(5));
                assert_eq!(r.await.unwrap().body, Bytes::from(vec![i]));
            }
            let served = settle(&counter.0).await - before;
            let want = if call == Call::Op { 100 } else { 50 };
            assert_eq!(served, want, "{call:?} calls served");
        }
    }

    #[tokio::test]
    async fn injected_delays_keep_answers_and_slow_each_frame() {
        let (addr, _h) = listener().await;
        let osd = Expect::osd(1);
        let c = Conns::new(Duration::from_secs(5))
            .injecting(injecting("delay_max_ms=4,delay_probability=1"));
        let t = std::time::Instant::now();
        for i in 0..20u8 {
            let msg = Message {
                body: Bytes::from(vec![0, i]),
                bulk: Vec::new(),
            };
            let r = c.call(&osd, &addr, Call::Op, msg, Duration::from_secs(5));
            assert_eq!(
                r.await.unwrap().body,
                Bytes::from(vec![0, i, Call::Op.code()])
            );
        }
        // Every frame the client wrote waited at least 1 ms.
        assert!(
            t.elapsed() >= Duration::from_millis(20),
            "{:?}",
            t.elapsed()
        );
    }
}
