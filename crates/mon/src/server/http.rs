//! A monitor's HTTP face: `/metrics`, the cluster's metrics in
//! Prometheus' text format under Ceph's names (from the leader; a
//! follower's page is empty, as a standby Ceph manager's is, so that a
//! Prometheus scraping every monitor gets each series once and follows
//! the leader as it changes), and `/`, a page naming what is served.
//!
//! Plain HTTP, meant for loopback or a monitoring network: it serves
//! what `allow r` may read and changes nothing. It must never take a
//! lock the monitor's own work waits on for longer than one render.

use super::Monitor;
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// Prometheus' text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serve on `listener` until the task is dropped; `mgr services` names
/// the address while this monitor leads.
pub async fn serve(mon: Arc<Monitor>, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    mon.set_http_url(format!("http://{addr}/"));
    let app = Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .with_state(mon);
    axum::serve(listener, app).await
}

async fn metrics(State(mon): State<Arc<Monitor>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        mon.metrics_text().await,
    )
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
