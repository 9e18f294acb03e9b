//! A monitor's HTTP face: `/metrics`, the cluster's metrics in
//! Prometheus' text format under Ceph's names (from the leader; a
//! follower that knows the leader serves an empty page, as a standby
//! Ceph manager does, so that a Prometheus scraping every monitor gets
//! each series once and follows the leader as it changes; a monitor that
//! knows no leader with a majority answers 503, so the scrape fails and
//! alerts on a dark cluster do not quietly resolve); and the dashboard:
//! `/`, a page with its script and style (embedded in the binary: no
//! build step), and `/api/dashboard`, the view it polls, for a bearer
//! token (`loligo dashboard create-token`).
//!
//! Plain HTTP on loopback; beyond loopback, TLS with the monitor's own
//! certificate, or, without one, the metrics alone (the dashboard is
//! refused rather than served in the clear). `/sd/prometheus/sd-config`
//! answers Prometheus' HTTP service discovery with the OSDs' own metrics
//! endpoints (`service=ceph-exporter`) or the leader's
//! (`service=mgr-prometheus`). It serves what `allow r` may read and
//! changes nothing. It must never take a lock the monitor's own work
//! waits on for longer than one render; the connection bounds are
//! [`loligo_proto::http`]'s.

use super::dashboard::ViewAnswer;
use super::Monitor;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// Prometheus' text exposition format.
pub const CONTENT_TYPE: &str = loligo_proto::http::PROMETHEUS_CONTENT_TYPE;

/// The dashboard's files, built into the binary.
const PAGE_HTML: &str = include_str!("../../assets/dashboard.html");
const PAGE_JS: &str = include_str!("../../assets/dashboard.js");
const ERRORS_JS: &str = include_str!("../../assets/errors.js");
const PAGE_CSS: &str = include_str!("../../assets/dashboard.css");

/// What the page may load and talk to: itself only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; \
                   base-uri 'none'; form-action 'none'";

/// What `/metrics` serves now.
pub enum MetricsPage {
    /// The leader's rendering.
    Leader(String),
    /// A follower that knows the leader: empty.
    Standby,
    /// No leader known, or a leader that hears no majority.
    Unavailable(String),
}

/// How a listener serves.
#[derive(Clone)]
struct Face {
    mon: Arc<Monitor>,
    /// Whether the dashboard is served here (loopback, or TLS).
    dashboard: bool,
}

/// Serve on `listener` until the task is dropped, over TLS with `tls`
/// when given; `mgr services` names the address while this monitor
/// leads (the dashboard's only where it is served).
pub async fn serve(
    mon: Arc<Monitor>,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<loligo_proto::http::ServerConfig>>,
) -> std::io::Result<()> {
    let mut addr = listener.local_addr()?;
    let dashboard = addr.ip().is_loopback() || tls.is_some();
    if !dashboard {
        tracing::warn!(
            "mon.{}: HTTP on {addr} is plain and beyond loopback: metrics only; the dashboard needs TLS (start the monitor with a keyring)",
            mon.id()
        );
    }
    if addr.ip().is_unspecified() {
        // Listening on every address: name the one the monitor serves
        // its own clients on, which they can reach.
        if let Some(ip) = mon.serving_ip() {
            addr.set_ip(ip);
        }
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    mon.set_http_url(format!("{scheme}://{addr}/"), dashboard);
    let face = Face { mon, dashboard };
    let app = Router::new()
        .route("/", get(page))
        .route("/dashboard.js", get(|| asset(PAGE_JS, "text/javascript")))
        .route("/errors.js", get(|| asset(ERRORS_JS, "text/javascript")))
        .route("/dashboard.css", get(|| asset(PAGE_CSS, "text/css")))
        .route("/api/dashboard", get(view))
        .route("/metrics", get(metrics))
        .route("/sd/prometheus/sd-config", get(service_discovery))
        .with_state(face);
    loligo_proto::http::serve(listener, app, tls).await
}

/// Prometheus' HTTP service discovery: `[{"targets": [...], "labels":
/// {}}]` for `service=ceph-exporter` (each up OSD's own endpoint, as its
/// last report names it) or `service=mgr-prometheus` (the leader's).
async fn service_discovery(
    State(face): State<Face>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let query = query.unwrap_or_default();
    let service = (query.split('&'))
        .find_map(|kv| kv.strip_prefix("service="))
        .unwrap_or("");
    let targets = match service {
        "ceph-exporter" => face.mon.osd_metrics_targets().await,
        "mgr-prometheus" => face.mon.leader_metrics_target(),
        _ => {
            let why = "service must be ceph-exporter or mgr-prometheus";
            return (StatusCode::BAD_REQUEST, why).into_response();
        }
    };
    let body = serde_json::json!([{ "targets": targets, "labels": {} }]);
    guarded(body.to_string().into_response(), "application/json")
}

async fn metrics(State(face): State<Face>) -> Response {
    match face.mon.metrics_page().await {
        MetricsPage::Leader(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        MetricsPage::Standby => {
            ([(header::CONTENT_TYPE, CONTENT_TYPE)], String::new()).into_response()
        }
        MetricsPage::Unavailable(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// The headers every dashboard answer carries.
fn guarded(mut r: Response, content_type: &'static str) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    guarded(body.into_response(), content_type)
}

async fn page(State(face): State<Face>) -> Response {
    if !face.dashboard {
        let text = format!(
            "mon.{} serves plain HTTP beyond loopback: /metrics only. The dashboard is served on loopback, or over TLS (a monitor with a keyring).\n",
            face.mon.id()
        );
        return (StatusCode::FORBIDDEN, text).into_response();
    }
    guarded(PAGE_HTML.into_response(), "text/html; charset=utf-8")
}

/// The bearer token of a request ("" without one; the scheme's name
/// in any case, as RFC 7235 has it).
fn bearer(headers: &HeaderMap) -> &str {
    (headers.get(header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, t)| t.trim())
}

async fn view(State(face): State<Face>, headers: HeaderMap) -> Response {
    let json = |code: StatusCode, v: serde_json::Value| {
        guarded((code, v.to_string()).into_response(), "application/json")
    };
    if !face.dashboard {
        let why = "the dashboard is served only on loopback or over TLS";
        return json(StatusCode::FORBIDDEN, serde_json::json!({ "error": why }));
    }
    match face.mon.dashboard_view(bearer(&headers)).await {
        ViewAnswer::View(v) => match serde_json::to_value(&v) {
            Ok(v) => json(StatusCode::OK, v),
            Err(e) => json(
                StatusCode::INTERNAL_SERVER_ERROR,
                serde_json::json!({ "error": e.to_string() }),
            ),
        },
        ViewAnswer::Denied(e) => {
            let mut r = json(
                StatusCode::UNAUTHORIZED,
                serde_json::json!({ "error": e.to_string() }),
            );
            let challenge = HeaderValue::from_static("Bearer realm=\"loligo\"");
            r.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
            r
        }
        ViewAnswer::Standby { leader } => json(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({
                "error": format!("mon.{} is a standby", face.mon.id()),
                "standby": true,
                "leader": leader,
            }),
        ),
        ViewAnswer::Unavailable(why) => json(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({ "error": why }),
        ),
    }
}

impl Monitor {
    /// The up OSDs' own metrics endpoints while this monitor leads (a
    /// follower names none, as its `/metrics` is empty: Prometheus asks
    /// every monitor and gets each target once).
    pub async fn osd_metrics_targets(&self) -> Vec<String> {
        // A leader cut off from the majority may no longer lead: it names
        // none, as its /metrics answers 503.
        if !self.is_leader() || self.quorum_recent().await.is_err() {
            return Vec::new();
        }
        let l = self.leader.lock().await;
        let st = self.shared.read();
        st.map
            .as_ref()
            .map_or_else(Vec::new, |m| l.metrics_targets(m))
    }

    /// This monitor's metrics endpoint while it leads.
    pub fn leader_metrics_target(&self) -> Vec<String> {
        let url = self.http_url.get().filter(|_| self.is_leader());
        (url.into_iter())
            .filter_map(|(u, _)| {
                u.split_once("://")
                    .map(|(_, rest)| rest.trim_end_matches('/').to_string())
            })
            .collect()
    }
}
