//! Serving HTTP (a monitor's metrics and dashboard, an OSD's own
//! metrics, the S3 gateway) on a listener: HTTP/1.1, over TLS when given
//! a server configuration, with bounds a slow or hostile client cannot
//! get past.
//!
//! It must never serve more than its [`Limits`] allow connections at once
//! (more are closed as they come), keep a connection whose request
//! headers take longer than [`HEADER_READ_TIMEOUT`] (between requests
//! too), whose TLS handshake takes longer than [`HANDSHAKE_TIMEOUT`],
//! that moves no byte either way for its idle limit (a body that stops
//! coming), or that lives longer than its limit, when it has one.

use std::sync::Arc;
use std::time::Duration;

/// A TLS server's configuration (see `tls::Keyring::web_server_config`).
pub use tokio_rustls::rustls::ServerConfig;

/// Connections served at once; more are closed as they come.
pub const CONNECTIONS_MAX: usize = 64;
/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a TLS handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection may live (a scrape takes well under this; a
/// browser opens another).
pub const CONNECTION_MAX_LIFE: Duration = Duration::from_secs(120);

/// How much a server takes.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once.
    pub connections: usize,
    /// How long one connection may live (`None`: as long as it keeps
    /// sending requests; an upload of gigabytes takes minutes).
    pub life: Option<Duration>,
    /// How long a connection may move no byte, read or written, while
    /// a request is being served (between requests the header timeout
    /// applies).
    pub idle: Duration,
}

/// The limits of the metrics and dashboard faces.
pub const WEB_LIMITS: Limits = Limits {
    connections: CONNECTIONS_MAX,
    life: Some(CONNECTION_MAX_LIFE),
    idle: CONNECTION_MAX_LIFE,
};

/// Serve `app` on `listener` until the task is dropped, over TLS with
/// `tls` when given, within [`WEB_LIMITS`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Option<Arc<ServerConfig>>,
) -> std::io::Result<()> {
    let svc = hyper_util::service::TowerToHyperService::new(app);
    serve_service(listener, svc, tls, WEB_LIMITS).await
}

/// Serve the hyper service `svc` on `listener` until the task is
/// dropped, over TLS with `tls` when given, within `limits`.
pub async fn serve_service<S, B>(
    listener: tokio::net::TcpListener,
    svc: S,
    tls: Option<Arc<ServerConfig>>,
    limits: Limits,
) -> std::io::Result<()>
where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<B>,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.connections));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors, or a connection reset before it
                // was taken: wait a little rather than spin.
                tracing::debug!("http accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(
                "http: {peer} turned away ({} connections open)",
                limits.connections
            );
            continue;
        };
        let svc = svc.clone();
        let acceptor = acceptor.clone();
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            match acceptor {
                None => connection(stream, svc, peer, limits).await,
                Some(a) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, a.accept(stream)).await {
                    Ok(Ok(s)) => connection(s, svc, peer, limits).await,
                    Ok(Err(e)) => tracing::debug!("https {peer}: handshake: {e}"),
                    Err(_) => tracing::debug!("https {peer}: handshake timed out"),
                },
            }
            drop(slot);
        });
    }
}

/// Serve one connection, within its header timeout, idle limit and life.
async fn connection<T, S, B>(stream: T, svc: S, peer: std::net::SocketAddr, limits: Limits)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<
        hyper::Request<hyper::body::Incoming>,
        Response = hyper::Response<B>,
    >,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (stream, moved) = Watched::new(stream);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
    let life = tokio::time::sleep(limits.life.unwrap_or(Duration::MAX / 4));
    let r = tokio::select! {
        r = conn => r,
        _ = life, if limits.life.is_some() => return,
        _ = stalled(&moved, limits.idle) => {
            tracing::debug!("http {peer}: nothing moved for {:?}: closed", limits.idle);
            return;
        }
    };
    if let Err(e) = r {
        tracing::debug!("http {peer}: {e}");
    }
}

/// Resolves once `moved` has stood still for `idle`.
async fn stalled(moved: &std::sync::atomic::AtomicU64, idle: Duration) {
    use std::sync::atomic::Ordering;
    let mut seen = moved.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(idle).await;
        let now = moved.load(Ordering::Relaxed);
        if now == seen {
            return;
        }
        seen = now;
    }
}

/// A stream that counts the bytes it moves (reads and writes), so a
/// watchdog can tell a stalled connection from a busy one.
struct Watched<T> {
    inner: T,
    moved: Arc<std::sync::atomic::AtomicU64>,
}

impl<T> Watched<T> {
    fn new(inner: T) -> (Watched<T>, Arc<std::sync::atomic::AtomicU64>) {
        let moved = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let w = Watched {
            inner,
            moved: moved.clone(),
        };
        (w, moved)
    }

    fn count(&self, n: usize) {
        self.moved
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.count(n);
        r
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = &r {
            self.count(*n);
        }
        r
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let std::task::Poll::Ready(Ok(n)) = &r {
            self.count(*n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Prometheus' text exposition format's content type.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that reads whole bodies, with a short idle limit.
    async fn body_server(idle: Duration) -> std::net::SocketAddr {
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(|b: axum::body::Bytes| async move { b.len().to_string() }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let svc = hyper_util::service::TowerToHyperService::new(app);
        let limits = Limits {
            connections: 4,
            life: None,
            idle,
        };
        tokio::spawn(serve_service(listener, svc, None, limits));
        addr
    }

    const HEAD: &[u8] = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n";

    #[tokio::test]
    async fn a_body_that_stops_coming_is_closed_after_the_idle_limit() {
        let addr = body_server(Duration::from_millis(300)).await;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(HEAD).await.unwrap();
        s.write_all(b"0123456789").await.unwrap(); // half the body, then nothing
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "the stalled connection is still open");
        assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
    }

    #[tokio::test]
    async fn a_slow_body_that_keeps_moving_is_served() {
        let addr = body_server(Duration::from_millis(300)).await;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(HEAD).await.unwrap();
        // Twenty bytes, one every 100 ms: two seconds in all, far past the
        // idle limit, but never idle for it.
        for b in b"abcdefghijklmnopqrst" {
            s.write_all(&[*b]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("20"), "{answer}");
    }
}
