//! A monitor's HTTP face: `/metrics`, the cluster's metrics in
//! Prometheus' text format under Ceph's names (from the leader; a
//! follower that knows the leader serves an empty page, as a standby
//! Ceph manager does, so that a Prometheus scraping every monitor gets
//! each series once and follows the leader as it changes; a monitor that
//! knows no leader with a majority answers 503, so the scrape fails and
//! alerts on a dark cluster do not quietly resolve), and `/`, a page
//! naming what is served.
//!
//! Plain HTTP, meant for loopback or a monitoring network: it serves
//! what `allow r` may read and changes nothing. It must never take a
//! lock the monitor's own work waits on for longer than one render, nor
//! let slow or idle clients hold more than [`CONNECTIONS_MAX`]
//! connections or a connection whose request headers take longer than
//! [`HEADER_READ_TIMEOUT`].

use super::Monitor;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;
use std::time::Duration;

/// Prometheus' text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Connections served at once; more are closed as they come.
pub const CONNECTIONS_MAX: usize = 64;
/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection may live (a scrape takes well under this).
const CONNECTION_MAX_LIFE: Duration = Duration::from_secs(120);

/// What `/metrics` serves now.
pub enum MetricsPage {
    /// The leader's rendering.
    Leader(String),
    /// A follower that knows the leader: empty.
    Standby,
    /// No leader known, or a leader that hears no majority.
    Unavailable(String),
}

/// Serve on `listener` until the task is dropped; `mgr services` names
/// the address while this monitor leads.
pub async fn serve(mon: Arc<Monitor>, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let mut addr = listener.local_addr()?;
    if addr.ip().is_unspecified() {
        // Listening on every address: name the one the monitor serves
        // its own clients on, which they can reach.
        if let Some(ip) = mon.serving_ip() {
            addr.set_ip(ip);
        }
    }
    mon.set_http_url(format!("http://{addr}/"));
    let app = Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .with_state(mon);
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
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_MAX_LIFE, conn).await {
                tracing::debug!("http {peer}: {e}");
            }
            drop(slot);
        });
    }
}

async fn metrics(State(mon): State<Arc<Monitor>>) -> Response {
    match mon.metrics_page().await {
        MetricsPage::Leader(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        MetricsPage::Standby => {
            ([(header::CONTENT_TYPE, CONTENT_TYPE)], String::new()).into_response()
        }
        MetricsPage::Unavailable(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

async fn index(State(mon): State<Arc<Monitor>>) -> Html<String> {
    let role = match mon.is_leader() {
        true => "the leader: <a href=\"/metrics\">/metrics</a> serves the cluster's metrics",
        false => {
            "a follower: its <a href=\"/metrics\">/metrics</a> is empty; the leader's serves them"
        }
    };
    Html(format!(
        "<!doctype html><html><head><title>Loligo mon.{id}</title></head><body>\
         <h1>Loligo monitor mon.{id}</h1><p>This monitor is {role}.</p></body></html>",
        id = mon.id(),
    ))
}
