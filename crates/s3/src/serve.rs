//! The gateway's HTTP face: an `s3s` service (Signature V4 checked with
//! the monitors' secrets, path-style and, given a domain,
//! virtual-hosted bucket addressing) served by the bounded HTTP loop the
//! daemons share, over TLS when given a server configuration.
//!
//! It must never serve a request without an auth provider set (s3s
//! would then skip every signature check).

use crate::Gateway;
use std::sync::Arc;

/// Connections served at once (S3 clients open many).
pub const CONNECTIONS_MAX: usize = 1024;

/// The S3 service of `gw` (`domain`: the base of virtual-hosted names).
pub fn service(gw: Gateway, domain: Option<&str>) -> std::io::Result<s3s::service::S3Service> {
    let mut b = s3s::service::S3ServiceBuilder::new(gw.clone());
    b.set_auth(crate::auth::Auth(gw));
    if let Some(d) = domain {
        let host = s3s::host::SingleDomain::new(d)
            .map_err(|e| std::io::Error::other(format!("domain '{d}': {e}")))?;
        b.set_host(host);
    }
    Ok(b.build())
}

/// Serve `gw` on `listener` until the task is dropped.
pub async fn serve(
    gw: Gateway,
    listener: tokio::net::TcpListener,
    domain: Option<String>,
    tls: Option<Arc<loligo_proto::http::ServerConfig>>,
) -> std::io::Result<()> {
    let svc = service(gw, domain.as_deref())?;
    let limits = loligo_proto::http::Limits {
        connections: CONNECTIONS_MAX,
        life: None,
    };
    loligo_proto::http::serve_service(listener, svc, tls, limits).await
}
