//! The client side of the monitor protocol, for the CLI, OSDs and the
//! client library: finds the leader among the monitors (following
//! `NotLeader` hints), retries while a quorum forms, and follows map
//! epochs.
//!
//! The configured addresses are a first contact only, where any monitor
//! of the cluster is taken: the first map that names the monitors (its
//! monitor map, and each monitor's key in its user table) replaces them,
//! and from then on each address is dialled as the monitor the map puts
//! there, with the key the map records for it. So a monitor's old key,
//! or a server at an address the map does not name, gets no request
//! after the first map.
//!
//! It must never hide a refusal: map errors come back as they are; only
//! "ask another monitor" conditions are retried, and only until the
//! deadline.

use crate::protocol::{CallResult, MapUpdate, MonError, MonReply, MonRequest};
use loligo_proto::net::Channels;
use loligo_proto::tls::Expect;
use loligo_proto::v1::{mon_client, Raw, WatchRequest};
use loligo_types::{decode, Incremental, OsdMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// How long dialling a monitor may take.
const CONNECT_TIMEOUT_MS: u64 = 2_000;
/// How long one request to one monitor may take.
const REQUEST_TIMEOUT_MS: u64 = 15_000;
/// The least one attempt at one monitor is given within a call (see
/// `MonClient::call`).
const ATTEMPT_MIN_MS: u64 = 1_000;

/// How often a client pings each monitor it is connected to, and how
/// long an answer may take: a monitor whose host went dark fails the
/// calls and the map watch on it within their sum (the watch then moves
/// to another monitor), not when TCP gives up, minutes later; a monitor
/// starved of CPU for a moment is not taken for gone.
const PING_EVERY_MS: u64 = 1_000;
/// See [`PING_EVERY_MS`].
const PING_WITHIN_MS: u64 = 5_000;

/// A client's connections to monitors.
fn channels() -> Channels {
    Channels::new(
        Duration::from_millis(CONNECT_TIMEOUT_MS),
        Some(Duration::from_millis(REQUEST_TIMEOUT_MS)),
    )
    .pinging(
        Duration::from_millis(PING_EVERY_MS),
        Duration::from_millis(PING_WITHIN_MS),
    )
}

/// One monitor to ask: where, and whom to expect there.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    addr: String,
    expect: Expect,
}

/// Where the monitors are, as far as this client knows.
#[derive(Debug)]
struct Targets {
    list: Vec<Target>,
    /// Whether `list` is a map's monitor map (else the configured
    /// addresses, each taken for any monitor).
    from_map: bool,
    /// Whether a first map was asked for through the configured
    /// addresses (a map that names no monitors leaves them in use).
    asked: bool,
}

/// A connection to the monitors (clones share the connections and what
/// they learn of the monitors).
#[derive(Clone)]
pub struct MonClient {
    targets: Arc<RwLock<Targets>>,
    /// Index into the targets of the monitor to try first (last known
    /// leader).
    preferred: usize,
    /// How long one call may keep retrying.
    pub deadline: Duration,
    channels: Arc<Channels>,
}

impl MonClient {
    /// A client of the monitors at `addrs` (`host:port`): a first contact,
    /// until a map names the monitors.
    pub fn new(addrs: Vec<String>) -> Result<MonClient, MonError> {
        if addrs.is_empty() {
            return Err(MonError::Invalid("no monitor addresses".into()));
        }
        for a in &addrs {
            Endpoint::from_shared(format!("http://{a}"))
                .map_err(|e| MonError::Invalid(format!("bad monitor address '{a}': {e}")))?;
        }
        let list = addrs
            .into_iter()
            .map(|addr| Target {
                addr,
                expect: Expect::AnyMonitor,
            })
            .collect();
        Ok(MonClient {
            targets: Arc::new(RwLock::new(Targets {
                list,
                from_map: false,
                asked: false,
            })),
            preferred: 0,
            deadline: Duration::from_secs(30),
            channels: Arc::new(channels()),
        })
    }

    /// The same client, its connections made with `security` (mutual
    /// TLS as its entity), or plain without.
    pub fn secured(mut self, security: Option<&loligo_proto::net::Security>) -> MonClient {
        self.channels = Arc::new(channels().secured(security));
        self
    }

    fn targets(&self) -> std::sync::RwLockReadGuard<'_, Targets> {
        // A panic while holding the lock leaves a whole list behind.
        self.targets.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The `i`th monitor to ask (modulo their number).
    fn target(&self, i: usize) -> Target {
        let t = self.targets();
        t.list[i % t.list.len()].clone()
    }

    /// Calls start past `t` (a monitor that did not answer or reaches no
    /// majority) from now on, if it is where they start now.
    fn pass_over(&mut self, t: &Target) {
        let (n, first) = {
            let ts = self.targets();
            let n = ts.list.len().max(1);
            (n, ts.list.get(self.preferred % n) == Some(t))
        };
        if first {
            self.preferred = (self.preferred + 1) % n;
        }
    }

    /// Where a `NotLeader` hint points: the monitor the map puts at that
    /// address, any monitor there before a map named them, or nothing
    /// (an address the map does not name is not dialled).
    fn hinted(&self, addr: &str) -> Option<Target> {
        let t = self.targets();
        match t.list.iter().find(|x| x.addr == addr) {
            Some(x) => Some(x.clone()),
            None if !t.from_map => Some(Target {
                addr: addr.to_string(),
                expect: Expect::AnyMonitor,
            }),
            None => None,
        }
    }

    /// Take the monitors `map` names, each with the key it records, in
    /// place of what this client knew (a map that names none changes
    /// nothing).
    pub fn follow(&self, map: &OsdMap) {
        // Monitors bound to every address (`0.0.0.0:6789`) name no address
        // a client elsewhere can dial: the configured ones stay in use.
        let unspecified = |a: &String| {
            a.parse::<std::net::SocketAddr>()
                .is_ok_and(|s| s.ip().is_unspecified())
        };
        if map.mons.is_empty() || map.mons.values().any(unspecified) {
            return;
        }
        let list: Vec<Target> = map
            .mons
            .iter()
            .map(|(id, addr)| {
                let entity = format!("mon.{id}");
                Target {
                    addr: addr.clone(),
                    expect: Expect::daemon(&entity, map.daemon_serial(&entity)),
                }
            })
            .collect();
        let mut t = self.targets.write().unwrap_or_else(|p| p.into_inner());
        if t.list != list {
            t.list = list;
        }
        t.from_map = true;
        t.asked = true;
    }

    async fn connect(&self, t: &Target) -> Result<mon_client::MonClient<Channel>, MonError> {
        self.channels
            .mon(&t.addr, &t.expect)
            .await
            .map_err(MonError::Unavailable)
    }

    async fn call_one(&self, t: &Target, req: &MonRequest) -> CallResult {
        let addr = t.addr.as_str();
        let mut c = self.connect(t).await?;
        let body = serde_json::to_vec(req).map_err(|e| MonError::Invalid(e.to_string()))?;
        let r = c
            .call(Raw {
                body: body.into(),
                bulk: Vec::new(),
            })
            .await
            .map_err(|s| {
                if s.code() == tonic::Code::OutOfRange {
                    // Too large for the monitor: no monitor takes it.
                    return MonError::Invalid(format!("{addr}: {}", s.message()));
                }
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
    /// and transient unavailability until the deadline. The first call
    /// of a client asks for the map through the configured addresses
    /// first, and then goes to the monitors it names. One attempt at one
    /// monitor takes at most the deadline's share of one monitor (a
    /// second at least), and the next call starts past a monitor that
    /// failed to answer or reaches no majority.
    pub async fn call(&mut self, req: MonRequest) -> CallResult {
        let asked = self.targets().asked;
        if !asked {
            let r = self.call_targets(&MonRequest::GetMap).await?;
            let map = r
                .map
                .as_deref()
                .ok_or_else(|| MonError::Unavailable("reply without a map".into()))?;
            self.follow(&loligo_types::decode_map(map)?);
            self.targets
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .asked = true;
        }
        self.call_targets(&req).await
    }

    async fn call_targets(&mut self, req: &MonRequest) -> CallResult {
        let start = tokio::time::Instant::now();
        let mut last = MonError::Unavailable("no monitor answered".into());
        let mut i = self.preferred;
        let mut hint: Option<Target> = None;
        let mut pause = Duration::from_millis(50);
        // Monitors that answered, none of them leading; a leader's word
        // that it reaches no majority.
        let mut leaderless = std::collections::BTreeSet::new();
        let mut quorumless: Option<MonError> = None;
        // One attempt may take the deadline's share of one monitor (at
        // least `ATTEMPT_MIN_MS`): a monitor whose host went dark (an open
        // connection whose packets vanish) costs a call that share, not
        // all of it, before the next is asked.
        let count = self.targets().list.len().max(1);
        let share = (self.deadline / count as u32).max(Duration::from_millis(ATTEMPT_MIN_MS));
        while start.elapsed() < self.deadline {
            let t = hint.take().unwrap_or_else(|| self.target(i));
            let attempt = share.min(self.deadline.saturating_sub(start.elapsed()));
            let r = match tokio::time::timeout(attempt, self.call_one(&t, req)).await {
                Ok(r) => r,
                Err(_) => {
                    self.channels.forget(&t.addr);
                    Err(MonError::Timeout(format!(
                        "{}: no answer in {attempt:?}",
                        t.addr
                    )))
                }
            };
            match r {
                Ok(r) => {
                    let at = self.targets().list.iter().position(|x| *x == t);
                    if let Some(p) = at {
                        self.preferred = p;
                    }
                    return Ok(r);
                }
                Err(MonError::NotLeader { leader }) => {
                    leaderless.insert(t.addr.clone());
                    last = MonError::NotLeader {
                        leader: leader.clone(),
                    };
                    match leader
                        .filter(|l| *l != t.addr)
                        .and_then(|l| self.hinted(&l))
                    {
                        Some(h) => {
                            hint = Some(h);
                            continue;
                        }
                        None => i += 1,
                    }
                }
                Err(e @ MonError::NoQuorum(_)) => {
                    leaderless.insert(t.addr.clone());
                    quorumless = Some(e.clone());
                    last = e;
                    i += 1;
                    self.pass_over(&t);
                }
                Err(e @ (MonError::Unavailable(_) | MonError::NoMap | MonError::Timeout(_))) => {
                    last = e;
                    i += 1;
                    // The next call starts past it too (a report every
                    // few seconds would otherwise spend each deadline on
                    // the same dark or cut-off monitor).
                    self.pass_over(&t);
                }
                Err(e) => return Err(e),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
        if let Some(e) = quorumless {
            return Err(e);
        }
        let members = self.targets().list.len();
        Err(match last {
            _ if !leaderless.is_empty() => MonError::NoQuorum(no_quorum(leaderless.len(), members)),
            e => e,
        })
    }

    /// The current map (whose monitors this client follows from then on).
    pub async fn get_map(&mut self) -> Result<OsdMap, MonError> {
        let r: MonReply = self.call(MonRequest::GetMap).await?;
        let b = r
            .map
            .ok_or_else(|| MonError::Unavailable("reply without a map".into()))?;
        let map = loligo_types::decode_map(&b)?;
        self.follow(&map);
        Ok(map)
    }

    /// Follow the map (with TLS, as long as the entity may read it): calls `f` with each new map, from epoch `have`
    /// on; reconnects to another monitor when a stream ends. Returns only
    /// when `f` returns false.
    pub async fn watch(&mut self, mut map: Option<OsdMap>, mut f: impl FnMut(&OsdMap) -> bool) {
        let mut i = self.preferred;
        loop {
            let t = self.target(i);
            let addr = t.addr.clone();
            i += 1;
            let Ok(mut c) = self.connect(&t).await else {
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
                map = next_map(u, map.take(), &addr);
                if let Some(m) = &map {
                    self.follow(m);
                    if !f(m) {
                        return;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The map a watcher holds after update `u` from the monitor at `addr`,
/// given the one it held: a full map that does not decode or check out,
/// or that is older than the one held, is passed over (the held map
/// stays: epochs never go back), and an incremental applies only as the
/// next epoch.
fn next_map(u: MapUpdate, held: Option<OsdMap>, addr: &str) -> Option<OsdMap> {
    match (u, held) {
        (MapUpdate::Full(b), held) => match loligo_types::decode_map(&b) {
            Ok(m) if held.as_ref().is_some_and(|h| m.epoch < h.epoch) => {
                tracing::warn!(
                    "a map of epoch {} from {addr} is older than the one held: passed over",
                    m.epoch
                );
                held
            }
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!("a map from {addr} is refused: {e}");
                held
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
    }
}

/// How long a watcher the monitors refused waits before it asks again.
const DENIED_RETRY_MS: u64 = 5_000;

/// Why no monitor led: `answered` of `members` monitors answered and none
/// knew a leader. A minority of a group never commits a change: the map
/// stays as it is until a majority reaches each other.
fn no_quorum(answered: usize, members: usize) -> String {
    format!(
        "{answered} of {members} monitors answered and none leads; until a majority \
         reach each other the cluster map cannot change"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::{encode, Change};

    /// A map at `epoch`: each epoch past the first marks osd.0 down or up.
    fn map_at(epoch: u64) -> OsdMap {
        let mut m = OsdMap::new("fsid-watch", "osd").unwrap();
        for e in m.epoch + 1..=epoch {
            let changes = if e == 2 {
                vec![Change::OsdBoot {
                    id: 0,
                    addr: "127.0.0.1:6800".into(),
                    host: "h".into(),
                    crush_weight: 0x10000,
                }]
            } else {
                vec![Change::OsdDown { id: 0 }]
            };
            m.apply(&Incremental { epoch: e, changes }).unwrap();
        }
        m
    }

    #[test]
    fn a_watchers_map_never_goes_back() {
        let held = map_at(5);
        // An older full map is passed over; a newer one is taken.
        let older = MapUpdate::Full(encode(&map_at(3)));
        assert_eq!(next_map(older, Some(held.clone()), "m").unwrap().epoch, 5);
        let newer = MapUpdate::Full(encode(&map_at(7)));
        assert_eq!(next_map(newer, Some(held.clone()), "m").unwrap().epoch, 7);
        // Damaged bytes leave the held map.
        let damaged = MapUpdate::Full(vec![1, 2, 3]);
        assert_eq!(next_map(damaged, Some(held.clone()), "m").unwrap().epoch, 5);
        // An incremental applies only as the next epoch.
        let inc = |epoch| {
            MapUpdate::Inc(encode(&Incremental {
                epoch,
                changes: vec![Change::OsdDown { id: 0 }],
            }))
        };
        assert_eq!(next_map(inc(6), Some(held.clone()), "m").unwrap().epoch, 6);
        assert_eq!(next_map(inc(4), Some(held.clone()), "m").unwrap().epoch, 5);
        assert_eq!(next_map(inc(9), Some(held), "m").unwrap().epoch, 5);
        assert!(next_map(inc(1), None, "m").is_none());
    }
}
