//! An OSD's own metrics endpoint (`osd run --http-addr`): its counters
//! under Ceph's names, labelled `ceph_daemon="osd.N"`, as of its last
//! report to the monitors, so that a large cluster's scrape is spread
//! over its daemons (Ceph's ceph-exporter) instead of one monitor.
//!
//! It serves nothing but `/metrics` and changes nothing; it must never
//! hold a lock the OSD's I/O takes for longer than a copy of one report.

use super::{lock, OsdShared};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

impl OsdShared {
    /// This OSD's metrics page: its counters as of its last report
    /// (`None` before the first).
    pub fn metrics_page(&self) -> Option<String> {
        let report = lock(&self.last_report).clone()?;
        let mut t = loligo_types::prom::Text::default();
        loligo_types::prom::osd_counters(&mut t, &[&report]);
        Some(t.finish())
    }
}

/// Serve this OSD's `/metrics` on `listener` (over TLS with `tls`) until
/// the task is dropped.
pub async fn serve_metrics(
    shared: Arc<OsdShared>,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<loligo_proto::http::ServerConfig>>,
) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let shared = shared.clone();
            async move { page(&shared) }
        }),
    );
    loligo_proto::http::serve(listener, app, tls).await
}

fn page(shared: &OsdShared) -> Response {
    match shared.metrics_page() {
        Some(text) => {
            let ct = loligo_proto::http::PROMETHEUS_CONTENT_TYPE;
            ([(header::CONTENT_TYPE, ct)], text).into_response()
        }
        None => (StatusCode::SERVICE_UNAVAILABLE, "no report made yet").into_response(),
    }
}
