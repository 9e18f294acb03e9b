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
/// How long a connection may move no byte while a request is served (a
/// client gone silent mid-body). It must outlast what the gateway does
/// without sending a byte: a 5 GiB CopyObject at the 17 MiB/s one stream
/// gets under load takes five minutes (RGW sends whitespace while it
/// copies; this gateway does not yet), a DeleteBucket collects its
/// garbage before answering.
pub const IDLE_MAX: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Virtual-hosted addressing under one domain: `BUCKET.DOMAIN[:PORT]`
/// names a bucket; any other host (the domain itself, an IP address, a
/// name of the machine) is path-style.
#[derive(Debug)]
pub struct Domain(String);

impl Domain {
    /// The bucket a `Host` header names, if it names one.
    pub fn bucket_of<'a>(&self, host: &'a str) -> Option<&'a str> {
        let name = match host.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host,
        };
        let b = name.strip_suffix(self.0.as_str())?.strip_suffix('.')?;
        (!b.is_empty()).then_some(b)
    }
}

impl s3s::host::S3Host for Domain {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> s3s::S3Result<s3s::host::VirtualHost<'a>> {
        let vh = s3s::host::VirtualHost::new(self.0.as_str());
        Ok(match self.bucket_of(host) {
            Some(b) => vh.with_bucket(b),
            None => vh,
        })
    }
}

/// The S3 service of `gw` (`domain`: the base of virtual-hosted names),
/// with its buckets' CORS rules answered and applied.
pub fn service(gw: Gateway, domain: Option<&str>, secure: bool) -> std::io::Result<WithCors> {
    let mut b = s3s::service::S3ServiceBuilder::new(gw.clone());
    b.set_auth(crate::auth::Auth(gw.clone()));
    b.set_access(crate::access::Access(gw.clone()));
    let mut host = None;
    if let Some(d) = domain {
        let ok = !d.is_empty()
            && d.split('.').all(|l| {
                !l.is_empty() && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            });
        if !ok {
            return Err(std::io::Error::other(format!("'{d}' is not a domain name")));
        }
        b.set_host(Domain(d.to_ascii_lowercase()));
        host = Some(Arc::new(Domain(d.to_ascii_lowercase())));
    }
    Ok(WithCors {
        inner: b.build(),
        gw,
        domain: host,
        secure,
    })
}

/// The S3 service with CORS: a preflight `OPTIONS` is answered by the
/// bucket's rules (`s3s` serves no `OPTIONS`), and a response to a
/// request with an `Origin` the rules let in carries the CORS headers.
#[derive(Clone)]
pub struct WithCors {
    inner: s3s::service::S3Service,
    gw: Gateway,
    domain: Option<Arc<Domain>>,
    /// Whether it is served over TLS.
    secure: bool,
}

/// A bare response with `status` and S3's error `code`.
fn refusal(status: http::StatusCode, code: &str, message: &str) -> s3s::HttpResponse {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
    );
    let mut r = http::Response::new(s3s::Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/xml"),
    );
    r
}

impl WithCors {
    /// The bucket a request names (by host or path), if any.
    fn bucket_of(&self, req: &http::Request<hyper::body::Incoming>) -> Option<String> {
        let host = req
            .headers()
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok());
        if let (Some(d), Some(h)) = (&self.domain, host) {
            if let Some(b) = d.bucket_of(h) {
                return Some(b.to_string());
            }
        }
        let first = req.uri().path().trim_start_matches('/').split('/').next()?;
        (!first.is_empty()).then(|| first.to_string())
    }

    /// The answer to a preflight request.
    async fn preflight(&self, bucket: Option<String>, h: &http::HeaderMap) -> s3s::HttpResponse {
        let text = |n: http::header::HeaderName| h.get(n).and_then(|v| v.to_str().ok());
        let origin = text(http::header::ORIGIN);
        let method = text(http::header::ACCESS_CONTROL_REQUEST_METHOD);
        let (Some(origin), Some(method), Some(bucket)) = (origin, method, bucket) else {
            return refusal(
                http::StatusCode::BAD_REQUEST,
                "BadRequest",
                "a CORS preflight names a bucket, an Origin and Access-Control-Request-Method",
            );
        };
        let asked: Vec<&str> = (text(http::header::ACCESS_CONTROL_REQUEST_HEADERS))
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let rules = match self.gw.bucket(&bucket).await {
            Ok(b) => b.cors,
            Err(_) => Vec::new(),
        };
        let Some(a) = crate::cors::find(&rules, origin, method, &asked) else {
            return refusal(
                http::StatusCode::FORBIDDEN,
                "AccessForbidden",
                "CORSResponse: this CORS request is not allowed",
            );
        };
        let mut r = http::Response::new(s3s::Body::empty());
        let hs = r.headers_mut();
        allow(hs, &a);
        if !asked.is_empty() {
            put(
                hs,
                http::header::ACCESS_CONTROL_ALLOW_HEADERS,
                &asked.join(", "),
            );
        }
        if let Some(age) = a.rule.max_age_secs {
            put(hs, http::header::ACCESS_CONTROL_MAX_AGE, &age.to_string());
        }
        r
    }

    /// The CORS headers of a response to `method` from `origin`.
    async fn decorate(
        &self,
        bucket: &str,
        origin: &str,
        method: &http::Method,
        r: &mut s3s::HttpResponse,
    ) {
        let Ok(b) = self.gw.bucket(bucket).await else {
            return;
        };
        if let Some(a) = crate::cors::find(&b.cors, origin, method.as_str(), &[]) {
            allow(r.headers_mut(), &a);
        }
    }
}

fn put(h: &mut http::HeaderMap, name: http::header::HeaderName, v: &str) {
    if let Ok(v) = http::HeaderValue::from_str(v) {
        h.insert(name, v);
    }
}

/// The headers a fitting rule answers with.
fn allow(h: &mut http::HeaderMap, a: &crate::cors::Allowed<'_>) {
    put(h, http::header::ACCESS_CONTROL_ALLOW_ORIGIN, &a.origin);
    put(
        h,
        http::header::ACCESS_CONTROL_ALLOW_METHODS,
        &a.rule.methods.join(", "),
    );
    if !a.rule.expose.is_empty() {
        put(
            h,
            http::header::ACCESS_CONTROL_EXPOSE_HEADERS,
            &a.rule.expose.join(", "),
        );
    }
    put(
        h,
        http::header::VARY,
        "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
    );
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for WithCors {
    type Response = s3s::HttpResponse;
    type Error = s3s::HttpError;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn call(&self, mut req: http::Request<hyper::body::Incoming>) -> Self::Future {
        if self.secure {
            req.extensions_mut().insert(crate::access::Secure);
        }
        let this = self.clone();
        Box::pin(async move {
            let bucket = this.bucket_of(&req);
            if req.method() == http::Method::OPTIONS {
                return Ok(this.preflight(bucket, req.headers()).await);
            }
            let origin = (req.headers().get(http::header::ORIGIN))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let method = req.method().clone();
            let mut resp = hyper::service::Service::call(&this.inner, req).await?;
            if let (Some(o), Some(b)) = (origin, bucket) {
                this.decorate(&b, &o, &method, &mut resp).await;
            }
            Ok(resp)
        })
    }
}

/// The TLS configuration of a gateway from a certificate chain and its
/// private key (PEM files, as RGW's `ssl_certificate` and
/// `ssl_private_key` take them).
pub fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> std::io::Result<Arc<loligo_proto::http::ServerConfig>> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |what: &std::path::Path, e: &dyn std::fmt::Display| {
        std::io::Error::other(format!("{}: {e}", what.display()))
    };
    let certs = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(cert, &e))?;
    if certs.is_empty() {
        return Err(bad(cert, &"no certificate in it"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| std::io::Error::other(format!("TLS versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| bad(cert, &e))?;
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}

/// Serve `gw` on `listener` until the task is dropped.
pub async fn serve(
    gw: Gateway,
    listener: tokio::net::TcpListener,
    domain: Option<String>,
    tls: Option<Arc<loligo_proto::http::ServerConfig>>,
) -> std::io::Result<()> {
    let svc = service(gw, domain.as_deref(), tls.is_some())?;
    let limits = loligo_proto::http::Limits {
        connections: CONNECTIONS_MAX,
        life: None,
        idle: IDLE_MAX,
    };
    loligo_proto::http::serve_service(listener, svc, tls, limits).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_name_buckets_only_under_the_domain() {
        let d = Domain("s3.example.com".into());
        assert_eq!(d.bucket_of("photos.s3.example.com"), Some("photos"));
        assert_eq!(d.bucket_of("photos.s3.example.com:7480"), Some("photos"));
        assert_eq!(d.bucket_of("a.b.s3.example.com"), Some("a.b"));
        assert_eq!(d.bucket_of("s3.example.com:7480"), None);
        assert_eq!(d.bucket_of("127.0.0.1:7480"), None);
        assert_eq!(d.bucket_of("evils3.example.com"), None);
        assert_eq!(d.bucket_of("[::1]:7480"), None);
    }
}
