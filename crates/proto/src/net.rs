//! What every Loligo endpoint shares about the transport: the largest
//! message, and a cache of connections by address so that a process
//! keeps one HTTP/2 connection per peer (OSD to OSD, client to OSD,
//! anyone to a monitor) instead of dialling per call.
//!
//! It must never interpret messages: callers decode their own bodies.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

use crate::v1::mon_client::MonClient;
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

/// A server builder with Loligo's transport settings.
pub fn server() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(FRAME_MAX)
        .tcp_nodelay(true)
}

/// The connections a server accepts on `listener`, with TCP_NODELAY set:
/// Loligo's messages are small request/reply pairs, and Nagle's algorithm
/// with delayed ACKs adds ~40 ms to each.
pub fn incoming(
    listener: tokio::net::TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    tokio_stream::StreamExt::map(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        |s| {
            if let Ok(s) = &s {
                let _ = s.set_nodelay(true);
            }
            s
        },
    )
}

/// Connections by `host:port`, made on first use and forgotten when a call
/// on them fails (the next use dials again).
pub struct Channels {
    conns: Mutex<HashMap<String, Channel>>,
    connect_timeout: Duration,
    /// Per-request deadline set on the channel (`None`: the caller's).
    request_timeout: Option<Duration>,
}

impl Channels {
    /// An empty cache whose new connections give up after
    /// `connect_timeout` and whose requests after `request_timeout`.
    pub fn new(connect_timeout: Duration, request_timeout: Option<Duration>) -> Channels {
        Channels {
            conns: Mutex::new(HashMap::new()),
            connect_timeout,
            request_timeout,
        }
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
        // A panic while holding the lock leaves a usable map of channels.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection to `addr`, dialled if there is none.
    pub async fn channel(&self, addr: &str) -> Result<Channel, String> {
        if let Some(c) = self.conns().get(addr) {
            return Ok(c.clone());
        }
        let mut ep = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| format!("bad address '{addr}': {e}"))?
            .connect_timeout(self.connect_timeout)
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_frame_size(FRAME_MAX)
            .tcp_nodelay(true);
        if let Some(t) = self.request_timeout {
            ep = ep.timeout(t);
        }
        let ch = ep.connect().await.map_err(|e| format!("{addr}: {e}"))?;
        // Two tasks may dial at once: keep the first, both work.
        Ok(self.conns().entry(addr.to_string()).or_insert(ch).clone())
    }

    /// Drop the connection to `addr` (after a failed call).
    pub fn forget(&self, addr: &str) {
        self.conns().remove(addr);
    }

    /// An OSD service client on the cached connection to `addr`.
    pub async fn osd(&self, addr: &str) -> Result<OsdClient<Channel>, String> {
        Ok(OsdClient::new(self.channel(addr).await?)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX))
    }

    /// A monitor service client on the cached connection to `addr`.
    pub async fn mon(&self, addr: &str) -> Result<MonClient<Channel>, String> {
        Ok(MonClient::new(self.channel(addr).await?)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_and_unreachable_addresses_are_errors_and_nothing_is_cached() {
        let c = Channels::new(Duration::from_millis(200), None);
        assert!(c.channel("not an address\n").await.is_err());
        // A port nobody listens on (bound then closed).
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        assert!(c.channel(&addr).await.is_err());
        assert!(c.conns().is_empty());
    }

    #[tokio::test]
    async fn one_connection_per_address() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let c = Channels::new(Duration::from_secs(1), None);
        c.channel(&addr).await.unwrap();
        c.channel(&addr).await.unwrap();
        assert_eq!(c.conns().len(), 1);
        c.forget(&addr);
        assert!(c.conns().is_empty());
    }
}
