//! What every Loligo endpoint shares about the transport: the largest
//! message, and a cache of connections by address so that a process
//! keeps one HTTP/2 connection per peer (OSD to OSD, client to OSD,
//! anyone to a monitor) instead of dialling per call.
//!
//! With a [`Security`] (an entity's keyring), every connection is mutual
//! TLS: [`accept`] makes the handshake on the server side and says who
//! the peer is ([`Peer`], in every request's extensions), and
//! [`Channels`] and the direct path dial with the entity's certificate.
//! Without one, connections are plain (the documented opt-out).
//!
//! It must never interpret messages: callers decode their own bodies.

use crate::tls::{Acceptor, Connector, Expect, Keyring, TlsError};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::v1::mon_client::MonClient;
use crate::v1::mon_peer_client::MonPeerClient;
use crate::v1::osd_client::OsdClient;

/// Largest gRPC message on any Loligo port, either way: an object write or
/// read up to the largest object a pool allows (`object_size_max`, 128 MiB
/// by default) with its framing, a full map of a big cluster, a Raft
/// snapshot chunk.
pub const MESSAGE_BYTES_MAX: usize = 256 << 20;

/// HTTP/2 flow-control windows and frame size, both ways. hyper's
/// defaults (a 1 MiB connection window on a server, 16 KiB frames) make a
/// 4 MiB object wait for several window updates and cut it into 256
/// frames, and one connection carries every op between two processes:
/// with 16 ops of 4 MiB in flight, the connection window throttled all
/// of them.
pub const STREAM_WINDOW: u32 = 8 << 20;
/// See [`STREAM_WINDOW`].
pub const CONNECTION_WINDOW: u32 = 64 << 20;
/// See [`STREAM_WINDOW`].
pub const FRAME_MAX: u32 = 1 << 20;

/// How often a gRPC server pings a connection's peer (HTTP/2 PING).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
/// How long a peer may take to answer a ping before its connection is
/// closed (and its admission places given back).
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// A server builder with Loligo's transport settings; a connection runs
/// at most `direct::IN_FLIGHT_MAX` requests at once (more wait), and one
/// whose peer stops answering pings is closed.
pub fn server() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .concurrency_limit_per_connection(crate::direct::IN_FLIGHT_MAX)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(FRAME_MAX)
        .tcp_nodelay(true)
}

/// The gRPC connections a server accepts on `listener`, each through
/// [`admit`] (with TCP_NODELAY set: Loligo's messages are small
/// request/reply pairs, and Nagle's algorithm with delayed ACKs adds
/// ~40 ms to each). Handshakes run concurrently, so a slow or silent peer
/// holds up no one; a failed one (a stranger, plain text to a secured
/// server) and direct-path connections are dropped.
pub fn incoming(
    listener: tokio::net::TcpListener,
    security: Option<Security>,
) -> impl tokio_stream::Stream<Item = std::io::Result<Admitted>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Admitted>>(64);
    let admission = Admission::new(AdmissionLimits::default());
    tokio::spawn(async move {
        loop {
            // The server gone (its stream dropped): the port closes now,
            // not at the next connection.
            let a = tokio::select! {
                a = listener.accept() => a,
                () = tx.closed() => return,
            };
            let (tcp, addr) = match a {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: pause, go on.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (tx, sec, adm) = (tx.clone(), security.clone(), admission.clone());
            tokio::spawn(async move {
                if let Some((a, ticket)) = admit(&adm, tcp, addr, sec.as_ref()).await {
                    if !a.direct {
                        let _ = tx.send(Ok(Admitted::new(a.io, Some(ticket)))).await;
                    }
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Most connections a server keeps open at once; more are closed as they
/// arrive.
pub const CONNECTIONS_MAX: usize = 4096;
/// Most handshakes under way in a server at once (each ends within
/// [`crate::direct::SNIFF_TIMEOUT`]); more connections are closed as
/// they arrive.
pub const HANDSHAKES_MAX: usize = 1024;
/// ... of them from one address, so that one peer that never finishes
/// its handshakes holds up only itself.
pub const HANDSHAKES_PER_ADDR_MAX: usize = 64;
/// Most connections one entity keeps open to one server.
pub const CONNECTIONS_PER_ENTITY_MAX: usize = 256;
const _: () =
    assert!(HANDSHAKES_PER_ADDR_MAX <= HANDSHAKES_MAX && HANDSHAKES_MAX <= CONNECTIONS_MAX);

/// What a server lets in at once (see [`Admission`]).
#[derive(Clone, Copy, Debug)]
pub struct AdmissionLimits {
    /// Connections open.
    pub connections: usize,
    /// Handshakes under way.
    pub handshakes: usize,
    /// Handshakes under way from one address.
    pub handshakes_per_addr: usize,
    /// Connections of one entity (after its handshake).
    pub per_entity: usize,
}

impl Default for AdmissionLimits {
    fn default() -> AdmissionLimits {
        AdmissionLimits {
            connections: CONNECTIONS_MAX,
            handshakes: HANDSHAKES_MAX,
            handshakes_per_addr: HANDSHAKES_PER_ADDR_MAX,
            per_entity: CONNECTIONS_PER_ENTITY_MAX,
        }
    }
}

#[derive(Default)]
struct Counts {
    open: usize,
    shaking: usize,
    shaking_by: HashMap<std::net::IpAddr, usize>,
    by_entity: HashMap<String, usize>,
}

/// The places a server has for connections: each connection takes a
/// [`Ticket`] as it arrives (or is closed at once), gives its handshake
/// place back once the handshake is over, and its connection place when
/// it closes.
pub struct Admission {
    limits: AdmissionLimits,
    counts: Mutex<Counts>,
}

impl Admission {
    /// A server's places, with `limits`.
    pub fn new(limits: AdmissionLimits) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            counts: Mutex::new(Counts::default()),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new connection from `addr`, or `None` (close it): the
    /// server has all the connections or handshakes it takes, or `addr`
    /// all the handshakes it may have under way.
    pub fn arrive(self: &Arc<Self>, addr: std::net::IpAddr) -> Option<Ticket> {
        let l = &self.limits;
        let mut c = self.counts();
        let from = c.shaking_by.get(&addr).copied().unwrap_or(0);
        if c.open >= l.connections || c.shaking >= l.handshakes || from >= l.handshakes_per_addr {
            return None;
        }
        c.open += 1;
        c.shaking += 1;
        *c.shaking_by.entry(addr).or_insert(0) += 1;
        Some(Ticket {
            admission: self.clone(),
            addr,
            shaking: true,
            entity: None,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.counts().open
    }
}

/// One connection's place in a server (see [`Admission`]), given back when
/// dropped.
pub struct Ticket {
    admission: Arc<Admission>,
    addr: std::net::IpAddr,
    shaking: bool,
    entity: Option<String>,
}

impl Ticket {
    fn end_handshake(&mut self, c: &mut Counts) {
        if std::mem::take(&mut self.shaking) {
            c.shaking -= 1;
            if let Some(n) = c.shaking_by.get_mut(&self.addr) {
                *n -= 1;
                if *n == 0 {
                    c.shaking_by.remove(&self.addr);
                }
            }
        }
    }

    /// The handshake is over: its place goes back, and the connection
    /// counts against `entity` (`None`: a server without TLS). False when
    /// that entity has all the connections it may have (close it).
    pub fn identified(&mut self, entity: Option<&str>) -> bool {
        let adm = self.admission.clone();
        let mut c = adm.counts();
        self.end_handshake(&mut c);
        let Some(e) = entity else {
            return true;
        };
        let n = c.by_entity.entry(e.to_string()).or_insert(0);
        if *n >= adm.limits.per_entity {
            return false;
        }
        *n += 1;
        self.entity = Some(e.to_string());
        true
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let adm = self.admission.clone();
        let mut c = adm.counts();
        self.end_handshake(&mut c);
        c.open -= 1;
        if let Some(e) = self.entity.take() {
            if let Some(n) = c.by_entity.get_mut(&e) {
                *n -= 1;
                if *n == 0 {
                    c.by_entity.remove(&e);
                }
            }
        }
    }
}

/// A connection with its place in the server: what servers hand gRPC, so
/// the place goes back when the connection closes.
pub struct Admitted {
    /// The connection.
    pub io: ServerIo,
    _ticket: Option<Ticket>,
}

impl Admitted {
    /// `io`, holding `ticket` for its life.
    pub fn new(io: ServerIo, ticket: Option<Ticket>) -> Admitted {
        Admitted {
            io,
            _ticket: ticket,
        }
    }
}

impl AsyncRead for Admitted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Admitted {
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
        bufs: &[std::io::IoSlice<'_>],
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

impl tonic::transport::server::Connected for Admitted {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.io.peer()
    }
}

/// Take the connection `tcp` from `addr` in: its place in `admission`, the
/// handshake ([`accept`]), then its entity's place. `None`: closed (no
/// place, a failed handshake, or an entity with all it may have).
pub async fn admit(
    admission: &Arc<Admission>,
    tcp: TcpStream,
    addr: SocketAddr,
    security: Option<&Security>,
) -> Option<(Accepted, Ticket)> {
    let ticket = admission.arrive(addr.ip())?;
    admit_placed(admission, ticket, tcp, security).await
}

/// [`admit`] for a connection whose place (`ticket`) its acceptor took
/// when it accepted it: an acceptor that spawns a task per connection
/// takes the place first, so a flood past the limits is closed in the
/// accept loop and not by tasks that wait their turn on a busy runtime
/// (holding a descriptor each meanwhile).
pub async fn admit_placed(
    admission: &Arc<Admission>,
    mut ticket: Ticket,
    tcp: TcpStream,
    security: Option<&Security>,
) -> Option<(Accepted, Ticket)> {
    keep_alive(&tcp);
    let a = accept(tcp, security).await.ok()?;
    let peer = a.io.peer();
    if !ticket.identified(peer.entity.as_deref()) {
        tracing::warn!(
            "{}: a connection refused: it has the most a server takes from one entity ({})",
            peer.entity.as_deref().unwrap_or("?"),
            admission.limits.per_entity
        );
        return None;
    }
    Some((a, ticket))
}

/// TCP keepalive on accepted connections: the first probe after this long
/// without traffic, then one per [`KEEPALIVE_PROBE_INTERVAL`], and the
/// connection closed after [`KEEPALIVE_PROBES`] unanswered, so a peer that
/// died (power lost, cable cut) gives its admission places back within
/// about two minutes even while a call of it is in flight.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
/// See [`KEEPALIVE_IDLE`].
pub const KEEPALIVE_PROBE_INTERVAL: Duration = Duration::from_secs(10);
/// See [`KEEPALIVE_IDLE`].
pub const KEEPALIVE_PROBES: u32 = 6;

/// Turn TCP keepalive on for `tcp` (see [`KEEPALIVE_IDLE`]); a socket that
/// refuses keeps going without it (logged).
pub fn keep_alive(tcp: &TcpStream) {
    let k = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_PROBE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    if let Err(e) = socket2::SockRef::from(tcp).set_tcp_keepalive(&k) {
        tracing::warn!("TCP keepalive not set: {e}");
    }
}

/// ALPN name of the direct data path inside TLS (gRPC's is `h2`).
pub const DIRECT_ALPN: &[u8] = b"loligo-direct";

/// How this process's connections are secured: its entity's keyring and
/// what is built from it once.
#[derive(Clone)]
pub struct Security {
    keyring: Arc<Keyring>,
    acceptor: Acceptor,
    direct: Connector,
    grpc: ClientTlsConfig,
    /// Records each direction of a direct-path connection may carry
    /// before it closes (see [`crate::record::RECORDS_MAX`]).
    records_max: u64,
}

impl Security {
    /// Mutual TLS as the entity `keyring` names.
    pub fn new(keyring: Keyring) -> Result<Security, TlsError> {
        let mut direct = (*keyring.client_config()?).clone();
        direct.alpn_protocols = vec![DIRECT_ALPN.to_vec()];
        direct.enable_secret_extraction = true;
        let grpc = ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&keyring.ca))
            .identity(tonic::transport::Identity::from_pem(
                &keyring.cert,
                &keyring.key,
            ));
        Ok(Security {
            acceptor: Acceptor::new(&keyring)?,
            direct: Connector::from_config(direct),
            grpc,
            keyring: Arc::new(keyring),
            records_max: crate::record::RECORDS_MAX,
        })
    }

    /// The same, its direct-path connections closing after `max` records
    /// each way (at most [`crate::record::RECORDS_MAX`]): for tests of
    /// what happens when a connection has carried all it may.
    pub fn with_records_max(mut self, max: u64) -> Security {
        self.records_max = max.min(crate::record::RECORDS_MAX);
        self
    }

    /// Records each direction of a direct-path connection may carry.
    pub fn records_max(&self) -> u64 {
        self.records_max
    }

    /// The keyring file at `path`, as [`Security::new`].
    pub fn load(path: &std::path::Path) -> Result<Security, TlsError> {
        Security::new(Keyring::load(path)?)
    }

    /// The entity this process is.
    pub fn entity(&self) -> &str {
        &self.keyring.entity
    }

    /// The connector of the direct data path.
    pub(crate) fn direct_connector(&self) -> &Connector {
        &self.direct
    }

    /// Its keyring.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Security({})", self.keyring.entity)
    }
}

/// Who is at the other end of an accepted connection (in each request's
/// extensions).
#[derive(Clone, Debug)]
pub struct Peer {
    /// Its address.
    pub addr: Option<SocketAddr>,
    /// The entity its certificate names; `None` on a server without
    /// [`Security`] (anyone may connect).
    pub entity: Option<String>,
    /// Its certificate's serial (hex), with `entity`.
    pub serial: Option<String>,
}

impl Peer {
    /// The peer's identity: `None` on a server without [`Security`].
    pub fn identity(&self) -> Option<(&str, &str)> {
        Some((self.entity.as_deref()?, self.serial.as_deref()?))
    }
}

/// Who makes a request, as the checks above the transport see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller<'a> {
    /// The server runs without TLS (`--insecure`): no one is identified
    /// and anyone may do anything (the documented opt-out).
    Anyone,
    /// The entity and certificate serial the connection's certificate
    /// gives.
    Entity { entity: &'a str, serial: &'a str },
    /// A secured server that learned no identity for the request: refused,
    /// whatever it asks.
    Unidentified,
}

impl<'a> Caller<'a> {
    /// The caller of a request on a server that is `secured` (runs TLS)
    /// or not, whose connection gave `identity` (entity, serial).
    pub fn of(secured: bool, identity: Option<(&'a str, &'a str)>) -> Caller<'a> {
        match (secured, identity) {
            (false, _) => Caller::Anyone,
            (true, Some((entity, serial))) => Caller::Entity { entity, serial },
            (true, None) => Caller::Unidentified,
        }
    }

    /// The entity, if one is identified.
    pub fn entity(&self) -> Option<&'a str> {
        match self {
            Caller::Entity { entity, .. } => Some(entity),
            _ => None,
        }
    }
}

/// The entity a request's connection belongs to (`None`: a server
/// without TLS).
pub fn peer_entity<T>(req: &tonic::Request<T>) -> Option<&str> {
    req.extensions()
        .get::<Peer>()
        .and_then(|p| p.entity.as_deref())
}

/// The entity and certificate serial a request's connection belongs to
/// (`None`: a server without TLS).
pub fn peer_identity<T>(req: &tonic::Request<T>) -> Option<(&str, &str)> {
    req.extensions().get::<Peer>().and_then(Peer::identity)
}

/// An accepted connection, plain or after a TLS handshake.
pub enum ServerIo {
    Plain(TcpStream),
    Tls(
        Box<tokio_rustls::server::TlsStream<crate::wire::Wire<TcpStream>>>,
        crate::tls::Identity,
    ),
    /// The direct path after a TLS handshake: records sealed and opened by
    /// `record`, with rustls's secrets.
    Records(
        Box<crate::record::RecordStream<TcpStream>>,
        crate::tls::Identity,
    ),
}

impl ServerIo {
    /// Who is at the other end.
    pub fn peer(&self) -> Peer {
        match self {
            ServerIo::Plain(s) => Peer {
                addr: s.peer_addr().ok(),
                entity: None,
                serial: None,
            },
            ServerIo::Tls(s, id) => Peer {
                addr: s.get_ref().0.get_ref().peer_addr().ok(),
                entity: Some(id.entity.clone()),
                serial: Some(id.serial.clone()),
            },
            ServerIo::Records(s, id) => Peer {
                addr: s.get_ref().peer_addr().ok(),
                entity: Some(id.entity.clone()),
                serial: Some(id.serial.clone()),
            },
        }
    }
}

impl AsyncRead for ServerIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ServerIo::Tls(s, _) => Pin::new(s.as_mut()).poll_read(cx, buf),
            ServerIo::Records(s, _) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ServerIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ServerIo::Tls(s, _) => Pin::new(s.as_mut()).poll_write(cx, buf),
            ServerIo::Records(s, _) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ServerIo::Tls(s, _) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            ServerIo::Records(s, _) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ServerIo::Plain(s) => s.is_write_vectored(),
            ServerIo::Tls(s, _) => s.is_write_vectored(),
            ServerIo::Records(s, _) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_flush(cx),
            ServerIo::Tls(s, _) => Pin::new(s.as_mut()).poll_flush(cx),
            ServerIo::Records(s, _) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ServerIo::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ServerIo::Tls(s, _) => Pin::new(s.as_mut()).poll_shutdown(cx),
            ServerIo::Records(s, _) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

impl tonic::transport::server::Connected for ServerIo {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer()
    }
}

/// An accepted connection, ready for its protocol.
pub struct Accepted {
    pub io: ServerIo,
    /// The direct data path (its magic consumed), else gRPC.
    pub direct: bool,
}

/// The server side of a new connection: with `security`, the TLS
/// handshake (only a peer with a certificate of this cluster gets
/// through) and its protocol by ALPN; without, its protocol by its first
/// bytes. A peer that says nothing for `direct::SNIFF_TIMEOUT` is an error.
pub async fn accept(tcp: TcpStream, security: Option<&Security>) -> std::io::Result<Accepted> {
    use crate::direct::{sniff, Route, MAGIC, SNIFF_TIMEOUT};
    let _ = tcp.set_nodelay(true);
    let Some(sec) = security else {
        return Ok(match sniff(tcp).await? {
            Route::Direct(s) => Accepted {
                io: ServerIo::Plain(s),
                direct: true,
            },
            Route::Other(s) => Accepted {
                io: ServerIo::Plain(s),
                direct: false,
            },
        });
    };
    tokio::time::timeout(SNIFF_TIMEOUT, async {
        // Whole records only until the protocol is known: the direct path
        // takes the record layer over from rustls (see `record`).
        let mut wire = crate::wire::Wire::new(tcp);
        wire.whole_records(true);
        let (mut s, entity) = sec.acceptor.accept(wire).await?;
        let direct = s.get_ref().1.alpn_protocol() == Some(DIRECT_ALPN);
        if !direct {
            s.get_mut().0.whole_records(false);
            return Ok(Accepted {
                io: ServerIo::Tls(Box::new(s), entity),
                direct,
            });
        }
        let mut b = [0u8; MAGIC.len()];
        s.read_exact(&mut b).await?;
        if b != MAGIC {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a direct-path connection without its magic",
            ));
        }
        tokio::io::AsyncWriteExt::flush(&mut s).await?;
        let (wire, conn) = s.into_inner();
        let mut records = crate::record::take_over(wire, conn)?;
        records.limit_records(sec.records_max);
        Ok(Accepted {
            io: ServerIo::Records(Box::new(records), entity),
            direct,
        })
    })
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// Connections by `host:port` and the daemon expected there, made on first
/// use and forgotten when a call on them fails (the next use dials again).
pub struct Channels {
    conns: Mutex<HashMap<(String, Expect), Channel>>,
    connect_timeout: Duration,
    /// Per-request deadline set on the channel (`None`: the caller's).
    request_timeout: Option<Duration>,
    /// TLS for new connections (`None`: plain).
    tls: Option<ClientTlsConfig>,
    /// HTTP/2 pings from this side (every, answered within), idle or not.
    keepalive: Option<(Duration, Duration)>,
}

impl Channels {
    /// An empty cache whose new connections give up after
    /// `connect_timeout` and whose requests after `request_timeout`.
    pub fn new(connect_timeout: Duration, request_timeout: Option<Duration>) -> Channels {
        Channels {
            conns: Mutex::new(HashMap::new()),
            connect_timeout,
            request_timeout,
            tls: None,
            keepalive: None,
        }
    }

    /// The same, pinging each peer every `every` (idle or not) and closing
    /// a connection whose peer does not answer within `within`: a peer
    /// whose host went dark (packets vanish, nothing is refused) fails
    /// the calls and streams on it then, not when TCP gives up.
    pub fn pinging(mut self, every: Duration, within: Duration) -> Channels {
        self.keepalive = Some((every, within));
        self
    }

    /// The same, its connections made with `security` (mutual TLS), or
    /// plain without.
    pub fn secured(mut self, security: Option<&Security>) -> Channels {
        self.tls = security.map(|s| s.grpc.clone());
        self
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Expect), Channel>> {
        // A panic while holding the lock leaves a usable map of channels.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection to the daemon `expect` names at `addr`, dialled if
    /// there is none. With TLS, the handshake fails unless the server's
    /// certificate names that daemon.
    pub async fn channel(&self, addr: &str, expect: &Expect) -> Result<Channel, String> {
        let key = (addr.to_string(), expect.clone());
        if let Some(c) = self.conns().get(&key) {
            return Ok(c.clone());
        }
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut ep = Endpoint::from_shared(format!("{scheme}://{addr}"))
            .map_err(|e| format!("bad address '{addr}': {e}"))?
            .connect_timeout(self.connect_timeout)
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_frame_size(FRAME_MAX)
            .tcp_nodelay(true);
        if let Some(t) = self.request_timeout {
            ep = ep.timeout(t);
        }
        if let Some((every, within)) = self.keepalive {
            ep = ep
                .http2_keep_alive_interval(every)
                .keep_alive_timeout(within)
                .keep_alive_while_idle(true);
        }
        if let Some(tls) = &self.tls {
            ep = ep
                .tls_config(tls.clone().domain_name(expect.server_name()))
                .map_err(|e| format!("{addr}: TLS: {e}"))?;
        }
        let ch = ep
            .connect()
            .await
            .map_err(|e| format!("{addr}: {}", with_causes(&e)))?;
        // Two tasks may dial at once: keep the first, both work.
        Ok(self.conns().entry(key).or_insert(ch).clone())
    }

    /// Drop the connections to `addr` (after a failed call).
    pub fn forget(&self, addr: &str) {
        self.conns().retain(|(a, _), _| a != addr);
    }

    /// An OSD service client on the cached connection to the OSD `osd`
    /// names (`osd.N`, with the key the map records) at `addr`.
    pub async fn osd(&self, addr: &str, osd: &Expect) -> Result<OsdClient<Channel>, String> {
        Ok(OsdClient::new(self.channel(addr, osd).await?)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX))
    }

    /// A monitor service client on the cached connection to `addr`, where
    /// `mon` names the monitor taken (any monitor of the cluster on a
    /// first contact, else the one the map puts there).
    pub async fn mon(&self, addr: &str, mon: &Expect) -> Result<MonClient<Channel>, String> {
        Ok(MonClient::new(self.channel(addr, mon).await?)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX))
    }

    /// A monitor's Raft service client on the cached connection to the
    /// monitor `mon` names at `addr`.
    pub async fn mon_peer(
        &self,
        addr: &str,
        mon: &Expect,
    ) -> Result<MonPeerClient<Channel>, String> {
        Ok(MonPeerClient::new(self.channel(addr, mon).await?)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX))
    }
}

/// An error with the chain of errors under it (tonic's transport errors
/// say only "transport error"; the reason, such as a server's certificate
/// naming another daemon, is below).
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !s.contains(&c_text) {
            s = format!("{s}: {c_text}");
        }
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn admitted_connections_probe_a_silent_peer() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let mut dialled = TcpStream::connect(addr).await.unwrap();
        // Enough bytes for a plain server to tell the protocol.
        tokio::io::AsyncWriteExt::write_all(&mut dialled, b"PRI * HTTP/2.0\r\n")
            .await
            .unwrap();
        let (s, from) = l.accept().await.unwrap();
        let adm = Admission::new(AdmissionLimits::default());
        let (a, _ticket) = admit(&adm, s, from, None).await.unwrap();
        let ServerIo::Plain(tcp) = &a.io else {
            panic!("a plain server admits plain connections")
        };
        let sock = socket2::SockRef::from(tcp);
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), KEEPALIVE_IDLE);
        assert_eq!(
            sock.tcp_keepalive_interval().unwrap(),
            KEEPALIVE_PROBE_INTERVAL
        );
        assert_eq!(sock.tcp_keepalive_retries().unwrap(), KEEPALIVE_PROBES);
    }

    #[tokio::test]
    async fn bad_and_unreachable_addresses_are_errors_and_nothing_is_cached() {
        let c = Channels::new(Duration::from_millis(200), None);
        let any = Expect::AnyMonitor;
        assert!(c.channel("not an address\n", &any).await.is_err());
        // A port nobody listens on (bound then closed).
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        assert!(c.channel(&addr, &any).await.is_err());
        assert!(c.conns().is_empty());
    }

    #[tokio::test]
    async fn one_connection_per_address() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let c = Channels::new(Duration::from_secs(1), None);
        let any = Expect::AnyMonitor;
        c.channel(&addr, &any).await.unwrap();
        c.channel(&addr, &any).await.unwrap();
        assert_eq!(c.conns().len(), 1);
        c.forget(&addr);
        assert!(c.conns().is_empty());
    }

    #[test]
    fn admission_counts_places_and_gives_them_back() {
        let adm = Admission::new(AdmissionLimits {
            connections: 4,
            handshakes: 3,
            handshakes_per_addr: 2,
            per_entity: 1,
        });
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let (a, b, c) = (ip("127.0.0.2"), ip("127.0.0.3"), ip("127.0.0.4"));
        let t1 = adm.arrive(a).unwrap();
        let _t2 = adm.arrive(a).unwrap();
        assert!(adm.arrive(a).is_none(), "two handshakes from one address");
        let mut t3 = adm.arrive(b).unwrap();
        assert!(adm.arrive(c).is_none(), "three handshakes in all");
        // A handshake over gives its place back.
        assert!(t3.identified(Some("client.x")));
        let mut t4 = adm.arrive(c).unwrap();
        assert_eq!(adm.open(), 4);
        assert!(adm.arrive(b).is_none(), "four connections in all");
        // One connection per entity here: the second is refused.
        assert!(!t4.identified(Some("client.x")));
        drop(t4);
        drop(t3);
        let mut t5 = adm.arrive(c).unwrap();
        assert!(
            t5.identified(Some("client.x")),
            "client.x's place came back"
        );
        drop(t1);
        let _t6 = adm.arrive(a).expect("t1's handshake place came back");
        assert_eq!(adm.open(), 3);
    }

    /// Thousands of connections from one address that never finish their
    /// handshake: the server holds at most its per-address handshakes of
    /// them (it closes the rest at once) and serves others meanwhile.
    #[tokio::test]
    async fn silent_handshakes_hold_up_only_their_own_address() {
        use crate::tls::Authority;
        let ca = Authority::generate("t").unwrap();
        let sec = Security::new(ca.issue("osd.1").unwrap()).unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let adm = Admission::new(AdmissionLimits::default());
        let server = adm.clone();
        tokio::spawn(async move {
            while let Ok((tcp, from)) = l.accept().await {
                let (adm, sec) = (server.clone(), sec.clone());
                tokio::spawn(async move {
                    if let Some((a, _ticket)) = admit(&adm, tcp, from, Some(&sec)).await {
                        if a.direct {
                            let peer = a.io.peer();
                            crate::direct::serve(Arc::new(Nothing), a.io, peer).await;
                        }
                    }
                });
            }
        });
        let mut silent = Vec::new();
        for _ in 0..2000 {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            if let Ok(c) = s.connect(addr).await {
                silent.push(c);
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            adm.open() <= HANDSHAKES_PER_ADDR_MAX,
            "{} connections held",
            adm.open()
        );
        // Another client is served at once.
        let client = Security::new(ca.issue("client.a").unwrap()).unwrap();
        let c = crate::direct::Conns::new(Duration::from_secs(2)).secured(Some(&client));
        let t0 = std::time::Instant::now();
        let msg = crate::direct::Message {
            body: bytes::Bytes::from_static(b"x"),
            bulk: Vec::new(),
        };
        let r = c
            .call(
                &Expect::osd(1),
                &addr.to_string(),
                crate::direct::Call::Op,
                msg,
                Duration::from_secs(5),
            )
            .await;
        assert!(r.is_ok(), "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(2));
        drop(silent);
    }

    /// Answers every call with an empty message.
    struct Nothing;

    impl crate::direct::Handler for Nothing {
        fn call(
            self: Arc<Self>,
            _call: crate::direct::Call,
            _msg: crate::direct::Message,
            _peer: Arc<Peer>,
        ) -> Pin<
            Box<dyn std::future::Future<Output = Option<crate::direct::Message>> + Send + 'static>,
        > {
            Box::pin(async { Some(crate::direct::Message::default()) })
        }
    }
}
