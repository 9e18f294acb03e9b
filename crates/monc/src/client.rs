//! The client side of the monitor protocol, for the CLI, OSDs and the
//! client library: finds the leader among the monitor addresses (following
//! `NotLeader` hints), retries while a quorum forms, and follows map
//! epochs.
//!
//! It must never hide a refusal: map errors come back as they are; only
//! "ask another monitor" conditions are retried, and only until the
//! deadline.

use crate::protocol::{CallResult, MapUpdate, MonError, MonReply, MonRequest};
use loligo_proto::net::Channels;
use loligo_proto::v1::{mon_client, Raw, WatchRequest};
use loligo_types::{decode, Incremental, OsdMap};
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// How long dialling a monitor may take.
const CONNECT_TIMEOUT_MS: u64 = 2_000;
/// How long one request to one monitor may take.
const REQUEST_TIMEOUT_MS: u64 = 15_000;

/// A connection to the monitors (clones share the connections).
#[derive(Clone)]
pub struct MonClient {
    addrs: Vec<String>,
    /// Index into `addrs` of the monitor to try first (last known leader).
    preferred: usize,
    /// How long one call may keep retrying.
    pub deadline: Duration,
    channels: Arc<Channels>,
}

impl MonClient {
    /// A client of the monitors at `addrs` (`host:port`).
    pub fn new(addrs: Vec<String>) -> Result<MonClient, MonError> {
        if addrs.is_empty() {
            return Err(MonError::Invalid("no monitor addresses".into()));
        }
        for a in &addrs {
            Endpoint::from_shared(format!("http://{a}"))
                .map_err(|e| MonError::Invalid(format!("bad monitor address '{a}': {e}")))?;
        }
        Ok(MonClient {
            addrs,
            preferred: 0,
            deadline: Duration::from_secs(30),
            channels: Arc::new(Channels::new(
                Duration::from_millis(CONNECT_TIMEOUT_MS),
                Some(Duration::from_millis(REQUEST_TIMEOUT_MS)),
            )),
        })
    }

    /// The same client, its connections made with `security` (mutual
    /// TLS as its entity), or plain without.
    pub fn secured(mut self, security: Option<&loligo_proto::net::Security>) -> MonClient {
        self.channels = Arc::new(
            Channels::new(
                Duration::from_millis(CONNECT_TIMEOUT_MS),
                Some(Duration::from_millis(REQUEST_TIMEOUT_MS)),
            )
            .secured(security),
        );
        self
    }

    async fn connect(&self, addr: &str) -> Result<mon_client::MonClient<Channel>, MonError> {
        self.channels.mon(addr).await.map_err(MonError::Unavailable)
    }

    async fn call_one(&self, addr: &str, req: &MonRequest) -> CallResult {
        let mut c = self.connect(addr).await?;
        let body = serde_json::to_vec(req).map_err(|e| MonError::Invalid(e.to_string()))?;
        let r = c
            .call(Raw {
                body: body.into(),
                bulk: Vec::new(),
            })
            .await
            .map_err(|s| {
                self.channels.forget(addr);
                MonError::Unavailable(format!("{addr}: {}", s.message()))
            })?;
        let body = r.into_inner().body;
        serde_json::from_slice::<CallResult>(&body).map_err(|e| {
            let shown = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            MonError::Unavailable(format!("{addr}: bad reply ({e}): {shown}"))
        })?
    }

    /// Send a request to the leader, retrying on other monitors, hints
    /// and transient unavailability until the deadline.
    pub async fn call(&mut self, req: MonRequest) -> CallResult {
        let start = tokio::time::Instant::now();
        let mut last = MonError::Unavailable("no monitor answered".into());
        let mut i = self.preferred;
        let mut hint: Option<String> = None;
        let mut pause = Duration::from_millis(50);
        while start.elapsed() < self.deadline {
            let addr = hint
                .take()
                .unwrap_or_else(|| self.addrs[i % self.addrs.len()].clone());
            match self.call_one(&addr, &req).await {
                Ok(r) => {
                    if let Some(p) = self.addrs.iter().position(|a| *a == addr) {
                        self.preferred = p;
                    }
                    return Ok(r);
                }
                Err(MonError::NotLeader { leader }) => {
                    last = MonError::NotLeader {
                        leader: leader.clone(),
                    };
                    match leader {
                        Some(l) if l != addr => {
                            hint = Some(l);
                            continue;
                        }
                        _ => i += 1,
                    }
                }
                Err(e @ (MonError::Unavailable(_) | MonError::NoMap | MonError::Timeout(_))) => {
                    last = e;
                    i += 1;
                }
                Err(e) => return Err(e),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
        Err(match last {
            MonError::NotLeader { .. } => MonError::Unavailable("monitors have no leader".into()),
            e => e,
        })
    }

    /// The current map.
    pub async fn get_map(&mut self) -> Result<OsdMap, MonError> {
        let r: MonReply = self.call(MonRequest::GetMap).await?;
        let b = r
            .map
            .ok_or_else(|| MonError::Unavailable("reply without a map".into()))?;
        Ok(loligo_types::decode_map(&b)?)
    }

    /// Follow the map (with TLS, as long as the entity may read it): calls `f` with each new map, from epoch `have`
    /// on; reconnects to another monitor when a stream ends. Returns only
    /// when `f` returns false.
    pub async fn watch(&mut self, mut map: Option<OsdMap>, mut f: impl FnMut(&OsdMap) -> bool) {
        let mut i = self.preferred;
        loop {
            let addr = self.addrs[i % self.addrs.len()].clone();
            i += 1;
            let Ok(mut c) = self.connect(&addr).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let have = map.as_ref().map_or(0, |m| m.epoch);
            let stream = match c.watch(WatchRequest { have }).await {
                Ok(s) => s,
                Err(st) if st.code() == tonic::Code::PermissionDenied => {
                    // Removed or rotated away: asking again soon would
                    // only be refused again.
                    tracing::warn!("the map watch is refused: {}", st.message());
                    tokio::time::sleep(Duration::from_millis(DENIED_RETRY_MS)).await;
                    continue;
                }
                Err(_) => {
                    self.channels.forget(&addr);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let mut s = stream.into_inner();
            while let Ok(Some(raw)) = s.message().await {
                let Ok(u) = serde_json::from_slice::<MapUpdate>(&raw.body) else {
                    break;
                };
                let next = match (u, map.take()) {
                    // A map that does not decode or check out is passed
                    // over (the old one stays).
                    (MapUpdate::Full(b), old) => match loligo_types::decode_map(&b) {
                        Ok(m) => Some(m),
                        Err(e) => {
                            tracing::warn!("a map from {addr} is refused: {e}");
                            old
                        }
                    },
                    (MapUpdate::Inc(b), Some(mut m)) => {
                        if let Ok(inc) = decode::<Incremental>("incremental", &b) {
                            if inc.epoch == m.epoch + 1 && m.apply(&inc).is_err() {
                                tracing::warn!("incremental {} does not apply", inc.epoch);
                            }
                        }
                        Some(m)
                    }
                    (MapUpdate::Inc(_), None) => None,
                };
                map = next;
                if let Some(m) = &map {
                    if !f(m) {
                        return;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// How long a watcher the monitors refused waits before it asks again.
const DENIED_RETRY_MS: u64 = 5_000;
