//! Serving an HTTP router (a monitor's metrics and dashboard, an OSD's
//! own metrics) on a listener: HTTP/1.1, over TLS when given a server
//! configuration, with bounds a slow or hostile client cannot get past.
//!
//! It must never serve more than [`CONNECTIONS_MAX`] connections at once
//! (more are closed as they come), keep a connection whose request
//! headers take longer than [`HEADER_READ_TIMEOUT`], whose TLS handshake
//! takes longer than [`HANDSHAKE_TIMEOUT`], or that lives longer than
//! [`CONNECTION_MAX_LIFE`].

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

/// Serve `app` on `listener` until the task is dropped, over TLS with
/// `tls` when given.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Option<Arc<ServerConfig>>,
) -> std::io::Result<()> {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
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
            tracing::debug!("http: {peer} turned away ({CONNECTIONS_MAX} connections open)");
            continue;
        };
        let svc = hyper_util::service::TowerToHyperService::new(app.clone());
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor {
                None => connection(stream, svc, peer).await,
                Some(a) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, a.accept(stream)).await {
                    Ok(Ok(s)) => connection(s, svc, peer).await,
                    Ok(Err(e)) => tracing::debug!("https {peer}: handshake: {e}"),
                    Err(_) => tracing::debug!("https {peer}: handshake timed out"),
                },
            }
            drop(slot);
        });
    }
}

/// Serve one connection, within its header timeout and life.
async fn connection<S>(
    stream: S,
    svc: hyper_util::service::TowerToHyperService<axum::Router>,
    peer: std::net::SocketAddr,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
    if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_MAX_LIFE, conn).await {
        tracing::debug!("http {peer}: {e}");
    }
}

/// Prometheus' text exposition format's content type.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
