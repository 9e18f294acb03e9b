//! Serving HTTP (a monitor's metrics and dashboard, an OSD's own
//! metrics, the S3 gateway) on a listener: HTTP/1.1, over TLS when given
//! a server configuration, with bounds a slow or hostile client cannot
//! get past.
//!
//! It must never serve more than its [`Limits`] allow connections at once
//! (more are closed as they come), keep a connection whose request
//! headers take longer than [`HEADER_READ_TIMEOUT`] (between requests
//! too), whose TLS handshake takes longer than [`HANDSHAKE_TIMEOUT`], or
//! that lives longer than its limit, when it has one.

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
}

/// The limits of the metrics and dashboard faces.
pub const WEB_LIMITS: Limits = Limits {
    connections: CONNECTIONS_MAX,
    life: Some(CONNECTION_MAX_LIFE),
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
                None => connection(stream, svc, peer, limits.life).await,
                Some(a) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, a.accept(stream)).await {
                    Ok(Ok(s)) => connection(s, svc, peer, limits.life).await,
                    Ok(Err(e)) => tracing::debug!("https {peer}: handshake: {e}"),
                    Err(_) => tracing::debug!("https {peer}: handshake timed out"),
                },
            }
            drop(slot);
        });
    }
}

/// Serve one connection, within its header timeout and life.
async fn connection<T, S, B>(stream: T, svc: S, peer: std::net::SocketAddr, life: Option<Duration>)
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
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
    let r = match life {
        Some(l) => match tokio::time::timeout(l, conn).await {
            Ok(r) => r,
            Err(_) => return,
        },
        None => conn.await,
    };
    if let Err(e) = r {
        tracing::debug!("http {peer}: {e}");
    }
}

/// Prometheus' text exposition format's content type.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
