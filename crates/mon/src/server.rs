//! The monitor daemon: a Raft member serving the `Mon` gRPC service, and
//! while it leads, the failure detector and status keeper (failure
//! reports, beacons, auto-out, PG stats).
//!
//! Only the leader proposes changes; every member serves maps from its
//! applied state, which only ever holds committed epochs. It must never
//! change the map except through the Raft log.

use crate::admin::{self, Outcome};
use crate::leader::{LeaderState, Timeouts};
use crate::network::Network;
use crate::placements::Placements;
use crate::protocol::{
    Admin, CallResult, MapUpdate, MonError, MonReply, MonRequest, MonStatus, StatusReport,
    WRITE_SETS_PER_REQUEST_MAX,
};
use crate::raft::{MonCmd, MonRaft, MonStore, Shared};
use loligo_proto::net::{peer_identity, Caller, MESSAGE_BYTES_MAX};
use loligo_proto::v1::mon_peer_server::{MonPeer, MonPeerServer};
use loligo_proto::v1::mon_server::{Mon, MonServer};
use loligo_proto::v1::{RaftMessage, Raw, WatchRequest};
use loligo_types::asks::{self, gathered_changes, Gather};
use loligo_types::caps::AuthEntry;
use loligo_types::{Change, Incremental, PgId};
use openraft::error::{ClientWriteError, RaftError};
use openraft::BasicNode;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// Largest `Call` body a monitor parses: the largest request (an OSD's
/// report of every PG it may hold, a batch of write sets) is far smaller.
/// Raft messages, which carry snapshots of the map, may be as large as
/// any message (`MESSAGE_BYTES_MAX`).
pub const CALL_BYTES_MAX: usize = 16 << 20;
/// Largest gRPC message the `Mon` service reads: a call of
/// [`CALL_BYTES_MAX`] and its envelope. A larger one is refused from its
/// frame's header, before its body is read.
const CALL_FRAME_BYTES_MAX: usize = CALL_BYTES_MAX + (64 << 10);

/// How recent an OSD's report must be to count toward client I/O rates.
const IO_WINDOW_MS: u64 = 10_000;

/// A monitor's settings.
#[derive(Clone, Debug)]
pub struct MonConfig {
    pub id: u64,
    /// Every initial member (this one included): id -> `host:port`.
    pub members: BTreeMap<u64, String>,
    pub data_dir: PathBuf,
    /// The cluster's fsid (written into the first map).
    pub fsid: String,
    /// CRUSH failure domain of the first map (`host`, or `osd`).
    pub failure_domain: String,
    /// Distinct OSDs that must report a peer before it is marked down.
    pub min_down_reporters: usize,
    /// `osd_heartbeat_grace`: how long reports stay valid (x2).
    pub heartbeat_grace: Duration,
    /// Mark an OSD down when it has sent no report for this long.
    pub report_timeout: Duration,
    /// `mon_osd_down_out_interval`: mark a down OSD out after this long.
    pub down_out_interval: Duration,
    /// Make a new monitor store (`--mkfs`): refused if the store was made
    /// before. Without it an unmade store is refused: a member whose store
    /// was wiped has lost its Raft vote and log and must not rejoin under
    /// its old id (it could vote twice in a term, or ack entries it no
    /// longer holds).
    pub create: bool,
    /// Map watch streams this monitor serves at once; more are refused
    /// (`RESOURCE_EXHAUSTED`) until some close.
    pub watches_max: usize,
    /// Map watch streams one entity may hold open on this monitor at once
    /// (with TLS; a client process holds one per cluster handle).
    pub watches_per_entity_max: usize,
    /// Mutual TLS as this monitor's entity (`mon.ID`) for its port and its
    /// connections to the other monitors; `None`: plain (anyone may
    /// connect).
    pub security: Option<loligo_proto::net::Security>,
    /// The cluster's certificate authority, with which the leader makes
    /// users' keys (`auth add`, `auth rotate`); `None`: those are refused.
    pub authority: Option<Arc<loligo_proto::tls::Authority>>,
    /// A monitor joining a running group (`mon run --join`): it never
    /// starts a group of its own, and waits for the leader to add it
    /// (`mon add`); `members` names the group's monitors and itself.
    pub join: bool,
    /// The encoded map a new group starts from (`mon run --restore`), in
    /// place of a new cluster's first map: the way back for a group that
    /// lost a majority of its members for good.
    pub restore: Option<Vec<u8>>,
    /// Leave the OSDs' own counter families out of `/metrics` (each OSD
    /// serves them on its own endpoint: Ceph's `exclude_perf_counters`).
    pub exclude_perf_counters: bool,
}

/// Default of [`MonConfig::watches_per_entity_max`].
pub const WATCHES_PER_ENTITY_MAX: usize = 64;

/// Default of [`MonConfig::watches_max`]: every OSD and client of a large
/// cluster holds one.
pub const WATCHES_MAX: usize = 16_384;

impl MonConfig {
    /// Defaults for a member of `members`.
    pub fn new(id: u64, members: BTreeMap<u64, String>, data_dir: PathBuf, fsid: &str) -> Self {
        MonConfig {
            id,
            members,
            data_dir,
            fsid: fsid.to_string(),
            failure_domain: "host".into(),
            min_down_reporters: 2,
            heartbeat_grace: Duration::from_secs(20),
            report_timeout: Duration::from_secs(60),
            down_out_interval: Duration::from_secs(600),
            create: false,
            watches_max: WATCHES_MAX,
            watches_per_entity_max: WATCHES_PER_ENTITY_MAX,
            security: None,
            authority: None,
            join: false,
            restore: None,
            exclude_perf_counters: false,
        }
    }
}

/// A running monitor.
pub struct Monitor {
    cfg: MonConfig,
    raft: MonRaft,
    shared: Arc<Shared>,
    leader: Mutex<LeaderState>,
    /// Every PG's placement, carried between maps: the leader's reports
    /// and its checks of OSDs' asks map PGs with it.
    placements: Arc<Placements>,
    /// Serialises proposals: each is computed from the state its
    /// predecessor left.
    propose_lock: Mutex<()>,
    /// OSD boots and write-set records waiting for the next proposal:
    /// whoever holds `propose_lock` next proposes all of them as one
    /// epoch (a whole cluster booting makes a few epochs, not one per
    /// OSD; the PGs an OSD failure moves record their write sets in a
    /// few epochs, not one per primary).
    gathered: std::sync::Mutex<Vec<Gathered>>,
    /// Map watch streams open now.
    watches: Arc<std::sync::atomic::AtomicUsize>,
    /// Map watch streams open now, by entity (with TLS).
    watchers: Watchers,
    /// How a follower asks the leader to record its key (made on first
    /// use).
    joiner: Mutex<Option<loligo_monc::MonClient>>,
    /// Whether this monitor said that the map records another key of it
    /// (said once per change, not every tick).
    told_other_key: std::sync::atomic::AtomicBool,
    /// When a majority last confirmed this monitor leads (see
    /// `quorum_recent`).
    quorum_at: std::sync::Mutex<Option<Instant>>,
    /// When each peer monitor last answered this one's Raft messages.
    heard: crate::network::Heard,
    /// Serialises membership changes (`mon add`, `mon rm`).
    membership_lock: Mutex<()>,
    /// Where its HTTP services are, once they serve ([`http`]), and
    /// whether the dashboard is among them.
    http_url: std::sync::OnceLock<(String, bool)>,
    /// The leader's reading of the map for the cluster log.
    log_pump: Mutex<clog_pump::LogPump>,
    /// The last `/metrics` rendering and when it was made.
    metrics_cache: Mutex<Option<(Instant, String)>>,
    /// The last dashboard view (but for who asked) and when it was made.
    dashboard_cache: Mutex<Option<(Instant, crate::dashboard::LeaderView)>>,
}

mod clog_pump;
pub mod dashboard;
pub mod http;
mod membership;
mod s3users;

/// Most monitor-map changes the leader makes in one tick (the map, the
/// keys of monitors gone, its own key).
const MON_MAP_CHANGES_MAX: usize = 4;

/// Open map watch streams by entity.
type Watchers = Arc<std::sync::Mutex<HashMap<String, usize>>>;

/// How long a follower's request to record its key may keep trying (it
/// asks again at the next tick).
const JOIN_DEADLINE_MS: u64 = 2_000;

/// How long the proposer of a boot waits for others to join its epoch
/// (Ceph's monitors gather proposals for up to a second).
const BOOT_GATHER_MS: u64 = 2;

/// A change waiting in [`Monitor::gathered`], and where its answer goes.
struct Gathered {
    item: Gather,
    reply: tokio::sync::oneshot::Sender<CallResult>,
}

/// A gathered item's answer: for records, the PGs whose record holds.
fn held_value(held: Option<Vec<PgId>>) -> serde_json::Value {
    held.map_or(serde_json::Value::Null, |h| {
        serde_json::to_value(h).unwrap_or_default()
    })
}

/// One open watch stream's place in [`Monitor::watches`] (and its
/// entity's in [`Monitor::watchers`]), given back when the stream's task
/// ends.
struct WatchSlot {
    all: Arc<std::sync::atomic::AtomicUsize>,
    mine: Option<(Watchers, String)>,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.all.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        if let Some((by, e)) = &self.mine {
            let mut by = by.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = by.get_mut(e) {
                *n -= 1;
                if *n == 0 {
                    by.remove(e);
                }
            }
        }
    }
}

/// Handle to stop a monitor's tasks.
pub struct MonHandle {
    pub mon: Arc<Monitor>,
    pub addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
    ticker: tokio::task::JoinHandle<()>,
}

impl MonHandle {
    /// Stop serving and shut Raft down (the store stays on disk).
    pub async fn stop(self) {
        self.ticker.abort();
        self.server.abort();
        let _ = self.mon.raft.shutdown().await;
    }
}

fn raft_config() -> Result<Arc<openraft::Config>, String> {
    let c = openraft::Config {
        cluster_name: "loligo-mon".into(),
        heartbeat_interval: 150,
        election_timeout_min: 600,
        election_timeout_max: 1200,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(500),
        max_in_snapshot_log_to_keep: 100,
        ..Default::default()
    };
    Ok(Arc::new(c.validate().map_err(|e| e.to_string())?))
}

impl Monitor {
    /// Open the store, join Raft, serve on `listener`. The member with the
    /// lowest id initialises a new group; the first leader writes the
    /// first map.
    pub async fn start(
        cfg: MonConfig,
        listener: tokio::net::TcpListener,
    ) -> Result<MonHandle, String> {
        if !cfg.members.contains_key(&cfg.id) {
            return Err(format!("monitor {} is not among the members", cfg.id));
        }
        std::fs::create_dir_all(&cfg.data_dir)
            .map_err(|e| format!("{}: {e}", cfg.data_dir.display()))?;
        let store = MonStore::open(&cfg.data_dir)?;
        match (store.made()?, cfg.create) {
            (true, false) => {}
            (false, true) => store.mark_made()?,
            (true, true) => {
                return Err(format!(
                    "monitor {}: {} already holds a monitor store; --mkfs is only for a new one",
                    cfg.id,
                    cfg.data_dir.display()
                ))
            }
            (false, false) => {
                return Err(format!(
                    "monitor {}: no monitor store in {} (first start of a new monitor: pass \
                     --mkfs). If this monitor was a member and its store was lost or wiped, it \
                     must not rejoin under its old id: Raft's safety rests on the vote and log \
                     it lost. Restore the store from a backup, or, with the other members up, \
                     remove it (`loligo mon rm {}`), then start it with --mkfs --join and add it \
                     again (`loligo mon add {} ADDR`)",
                    cfg.id,
                    cfg.data_dir.display(),
                    cfg.id,
                    cfg.id
                ))
            }
        }
        let shared = store.shared.clone();
        let network = Network::new(cfg.security.as_ref(), shared.clone());
        let heard = network.heard();
        let raft = openraft::Raft::new(cfg.id, raft_config()?, network, store.clone(), store)
            .await
            .map_err(|e| e.to_string())?;
        // The lowest member starts a new group; a joining monitor never
        // does (it may have the lowest id of those it names).
        if !cfg.join
            && cfg.members.keys().next() == Some(&cfg.id)
            && !raft.is_initialized().await.map_err(|e| e.to_string())?
        {
            let members: BTreeMap<u64, BasicNode> = cfg
                .members
                .iter()
                .map(|(id, a)| (*id, BasicNode { addr: a.clone() }))
                .collect();
            raft.initialize(members).await.map_err(|e| e.to_string())?;
        }
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let placements = Arc::new(Placements::default());
        let mon = Arc::new(Monitor {
            cfg,
            raft,
            shared,
            leader: Mutex::new(LeaderState::with_placements(placements.clone())),
            placements,
            propose_lock: Mutex::new(()),
            gathered: std::sync::Mutex::new(Vec::new()),
            watches: Arc::default(),
            watchers: Arc::default(),
            joiner: Mutex::new(None),
            told_other_key: std::sync::atomic::AtomicBool::new(false),
            quorum_at: std::sync::Mutex::new(None),
            heard,
            membership_lock: Mutex::new(()),
            http_url: std::sync::OnceLock::new(),
            log_pump: Mutex::new(clog_pump::LogPump::default()),
            metrics_cache: Mutex::new(None),
            dashboard_cache: Mutex::new(None),
        });
        // A call's size is checked from its frame's header, before its
        // body is read; Raft (snapshots of the map) has its own service.
        let svc = MonServer::new(Service(mon.clone()))
            .max_decoding_message_size(CALL_FRAME_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX);
        // Raft messages may be as large as any message: only a monitor's
        // of this cluster (with its recorded key) are read at all, judged
        // from the connection before the body is decoded.
        let gate = mon.clone();
        let peer_svc = tonic::service::interceptor::InterceptedService::new(
            MonPeerServer::new(Service(mon.clone()))
                .max_decoding_message_size(MESSAGE_BYTES_MAX)
                .max_encoding_message_size(MESSAGE_BYTES_MAX),
            move |req: Request<()>| {
                gate.authorize_raft(peer_identity(&req))
                    .map_err(|e| Status::permission_denied(e.to_string()))?;
                Ok(req)
            },
        );
        let incoming = loligo_proto::net::incoming(listener, mon.cfg.security.clone());
        let server = tokio::spawn(async move {
            let r = loligo_proto::net::server()
                .add_service(svc)
                .add_service(peer_svc)
                .serve_with_incoming(incoming)
                .await;
            if let Err(e) = r {
                tracing::error!("monitor server stopped: {e}");
            }
        });
        let m2 = mon.clone();
        let ticker = tokio::spawn(async move {
            let mut t = tokio::time::interval(Duration::from_millis(500));
            loop {
                t.tick().await;
                m2.tick().await;
            }
        });
        Ok(MonHandle {
            mon,
            addr,
            server,
            ticker,
        })
    }

    /// This monitor's id.
    pub fn id(&self) -> u64 {
        self.cfg.id
    }

    /// Whether this member leads now.
    pub fn is_leader(&self) -> bool {
        // A leader that removed itself leads until Raft steps it down, a
        // moment after the change commits; in that moment it must not
        // answer as the group's leader (it is not in the group).
        let m = self.raft.metrics();
        let m = m.borrow();
        m.current_leader == Some(self.cfg.id)
            && (m.membership_config.membership())
                .voter_ids()
                .any(|v| v == self.cfg.id)
    }

    /// The current map's epoch on this member.
    pub fn epoch(&self) -> u64 {
        self.shared.read().epoch()
    }

    /// The map updates after epoch `have` that this member holds (the
    /// incrementals, or the whole map when it no longer keeps them all):
    /// what a map watch would send. For watchers in this process, such
    /// as the scale bench's simulated OSDs.
    pub fn updates_since(&self, have: u64) -> Vec<MapUpdate> {
        self.shared.read().updates_since(have)
    }

    fn leader_addr(&self) -> Option<String> {
        let m = self.raft.metrics().borrow().clone();
        let l = m.current_leader?;
        m.membership_config
            .membership()
            .get_node(&l)
            .map(|n| n.addr.clone())
    }

    fn not_leader(&self) -> MonError {
        MonError::NotLeader {
            leader: self.leader_addr(),
        }
    }

    /// Who the peer (entity, serial; `None`: no identity) is to this
    /// monitor: anyone only when it runs without TLS.
    fn caller<'a>(&self, peer: &'a Option<(String, String)>) -> Caller<'a> {
        let peer = peer.as_ref().map(|(e, s)| (e.as_str(), s.as_str()));
        Caller::of(self.cfg.security.is_some(), peer)
    }

    /// Whether the peer (entity, serial; `None`: no identity) may make
    /// `req` under this monitor's map.
    fn authorize(&self, peer: &Option<(String, String)>, req: &MonRequest) -> Result<(), MonError> {
        // Whether an OSD may ask for a PG's overrides or records is judged
        // on the leader's map: a follower's may lag the map the OSD asks
        // from, and a refusal there would not be asked again.
        let by_map = matches!(
            req,
            MonRequest::PgTemp { .. }
                | MonRequest::PrimaryTemp { .. }
                | MonRequest::RecordWriteSets { .. }
        );
        if by_map && !self.is_leader() {
            return Err(self.not_leader());
        }
        let st = self.shared.read();
        crate::auth::authorize_placed(
            self.caller(peer),
            st.map.as_ref(),
            req,
            Some(&self.placements),
        )
    }

    /// Whether the peer (entity, serial) may send Raft messages to this
    /// monitor: a monitor of the cluster, with its recorded key.
    fn authorize_raft(&self, peer: Option<(&str, &str)>) -> Result<(), MonError> {
        let caller = Caller::of(self.cfg.security.is_some(), peer);
        let st = self.shared.read();
        crate::auth::authorize_raft(caller, st.map.as_ref())
    }

    /// Whether the peer may ask this monitor for its vote: a monitor it
    /// knows as a member (of the group as Raft has it, learners too, of
    /// the monitor map, or of those it was started with). Appends and
    /// snapshots come from any monitor of the cluster: a leader added
    /// while this one was away must be heard (its term is Raft's check).
    fn authorize_vote(&self, peer: Option<(&str, &str)>) -> Result<(), MonError> {
        let Some(id) = peer.and_then(|(e, _)| loligo_proto::tls::mon_of(e)) else {
            return match self.cfg.security {
                None => Ok(()),
                Some(_) => Err(MonError::Denied("only a monitor votes".into())),
            };
        };
        let group = self.raft.metrics().borrow().membership_config.clone();
        let in_group = group.membership().nodes().any(|(n, _)| *n == id);
        let in_map = (self.shared.read().map.as_ref()).is_some_and(|m| m.mons.contains_key(&id));
        if in_group || in_map || self.cfg.members.contains_key(&id) {
            Ok(())
        } else {
            Err(MonError::Denied(format!(
                "mon.{id} is not a member of this monitor group: it may not ask for votes"
            )))
        }
    }

    /// Propose a command; the epoch after it is applied.
    async fn propose(&self, cmd: MonCmd) -> Result<u64, MonError> {
        match tokio::time::timeout(Duration::from_secs(10), self.raft.client_write(cmd)).await {
            Err(_) => Err(MonError::Timeout("no quorum to commit the change".into())),
            Ok(Ok(r)) => Ok(r.data?),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                Err(MonError::NotLeader {
                    leader: f.leader_node.map(|n| n.addr),
                })
            }
            Ok(Err(e)) => Err(MonError::Unavailable(e.to_string())),
        }
    }

    /// Compute changes from the freshest map (leader only) and propose
    /// them.
    async fn change_with<F>(&self, f: F) -> CallResult
    where
        F: FnOnce(&loligo_types::OsdMap) -> Result<Vec<Change>, MonError>,
    {
        let _g = self.propose_lock.lock().await;
        self.change_locked(f).await
    }

    /// Commit `item` (a boot, or one OSD's write-set records) in one
    /// epoch with every other such item waiting when the proposal is
    /// made: items arriving while a proposal is in flight gather for the
    /// next. A proposer with a boot in its batch first waits
    /// `BOOT_GATHER_MS` for more (OSDs start together); records do not
    /// wait (PGs wait on them to take writes). A batch the map refuses
    /// (one item of it invalid) is proposed again one item at a time, so
    /// each caller gets its own item's answer.
    async fn gather(&self, item: Gather) -> CallResult {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let queue = || self.gathered.lock().unwrap_or_else(|p| p.into_inner());
        queue().push(Gathered { item, reply });
        {
            let _g = self.propose_lock.lock().await;
            let boots = queue().iter().any(|g| matches!(g.item, Gather::Boot(_)));
            if boots {
                tokio::time::sleep(Duration::from_millis(BOOT_GATHER_MS)).await;
            }
            // Empty if an earlier holder of the lock took this item along.
            let batch = std::mem::take(&mut *queue());
            if !batch.is_empty() {
                let items: Vec<Gather> = batch.iter().map(|g| g.item.clone()).collect();
                let mut values = Vec::new();
                let r = self
                    .change_locked_with_incs(|m, incs| {
                        let mut placer = self.placements.few(m);
                        let (changes, v) = gathered_changes(m, incs, &items, &mut placer);
                        values = v.into_iter().map(held_value).collect();
                        Ok(changes)
                    })
                    .await;
                match r {
                    Err(MonError::Map(_)) if batch.len() > 1 => {
                        for g in batch {
                            let one = [g.item];
                            let mut value = serde_json::Value::Null;
                            let r = self
                                .change_locked_with_incs(|m, incs| {
                                    let mut placer = self.placements.few(m);
                                    let (changes, mut v) =
                                        gathered_changes(m, incs, &one, &mut placer);
                                    value = held_value(v.pop().flatten());
                                    Ok(changes)
                                })
                                .await;
                            let _ = g.reply.send(r.map(|mut r| {
                                r.value = value;
                                r
                            }));
                        }
                    }
                    r => {
                        for (g, value) in batch.into_iter().zip(
                            values
                                .into_iter()
                                .chain(std::iter::repeat(serde_json::Value::Null)),
                        ) {
                            let _ = g.reply.send(r.clone().map(|mut r| {
                                r.value = value;
                                r
                            }));
                        }
                    }
                }
            }
        }
        answer
            .await
            .unwrap_or_else(|_| Err(MonError::Unavailable("monitor stopping".into())))
    }

    /// [`Monitor::change_with`] for a caller that holds `propose_lock`.
    async fn change_locked<F>(&self, f: F) -> CallResult
    where
        F: FnOnce(&loligo_types::OsdMap) -> Result<Vec<Change>, MonError>,
    {
        self.change_locked_with_incs(|m, _| f(m)).await
    }

    /// [`Monitor::change_locked`] whose `f` also sees the kept
    /// incrementals (the map's recent history).
    async fn change_locked_with_incs<F>(&self, f: F) -> CallResult
    where
        F: FnOnce(&loligo_types::OsdMap, &VecDeque<Incremental>) -> Result<Vec<Change>, MonError>,
    {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        self.quorum(QUORUM_WAIT_CHANGE).await?;
        let (changes, lines) = {
            let st = self.shared.read();
            let map = st.map.as_ref().ok_or(MonError::NoMap)?;
            let changes = f(map, &st.incs)?;
            // The cluster log's lines, read against the map the changes
            // apply to (proposals are serialised by `propose_lock`).
            let lines: Vec<_> = (changes.iter())
                .filter_map(|c| crate::clog::change_event(map, c))
                .collect();
            (changes, lines)
        };
        if changes.is_empty() {
            return Ok(MonReply {
                epoch: self.epoch(),
                ..Default::default()
            });
        }
        let epoch = self.propose(MonCmd::Changes(changes)).await?;
        self.log_change_lines(lines).await;
        Ok(MonReply {
            epoch,
            ..Default::default()
        })
    }

    /// Serve one request.
    pub async fn call(&self, req: MonRequest) -> CallResult {
        match req {
            MonRequest::GetMap => {
                let st = self.shared.read();
                let map = st.map.as_ref().ok_or(MonError::NoMap)?;
                Ok(MonReply {
                    epoch: map.epoch,
                    map: Some(loligo_types::encode(map)),
                    ..Default::default()
                })
            }
            MonRequest::OsdBoot {
                id,
                addr,
                host,
                crush_weight,
            } => {
                // Alone first: a malformed boot must not fail the epoch
                // of the boots gathered with it.
                loligo_types::osdmap::check_boot(id, &addr, &host, crush_weight)?;
                let noup = loligo_types::osdmap::OsdFlag::NoUp;
                if (self.shared.read().map.as_ref()).is_some_and(|m| m.flags.contains(&noup)) {
                    return Err(MonError::Flagged(noup.name().into()));
                }
                let r = self
                    .gather(Gather::Boot(Change::OsdBoot {
                        id,
                        addr,
                        host,
                        crush_weight,
                    }))
                    .await?;
                // Left out of its batch: `noup` was set meanwhile.
                if (self.shared.read().map.as_ref())
                    .is_some_and(|m| m.flags.contains(&noup) && !m.is_up(id))
                {
                    return Err(MonError::Flagged(noup.name().into()));
                }
                self.leader.lock().await.on_boot(id);
                Ok(r)
            }
            // The key was recorded before the call (`record_daemon_key`).
            MonRequest::MonJoin { .. } => Ok(MonReply {
                epoch: self.epoch(),
                ..Default::default()
            }),
            MonRequest::OsdMarkMeDown { id } => {
                self.change_with(|m| {
                    Ok(if m.is_up(id) {
                        vec![Change::OsdDown { id }]
                    } else {
                        vec![]
                    })
                })
                .await
            }
            MonRequest::PgTemp { pg, osds } => {
                self.change_with(|m| Ok(asks::pg_temp_changes(m, pg, osds)))
                    .await
            }
            MonRequest::PrimaryTemp { pg, osd } => {
                self.change_with(|m| Ok(asks::primary_temp_changes(m, pg, osd)))
                    .await
            }
            MonRequest::RecordWriteSets { items } => {
                if items.len() > WRITE_SETS_PER_REQUEST_MAX {
                    return Err(MonError::Invalid(format!(
                        "{} write sets in one request (at most {WRITE_SETS_PER_REQUEST_MAX})",
                        items.len()
                    )));
                }
                self.gather(Gather::Records(items)).await
            }
            MonRequest::OsdFailure {
                reporter, target, ..
            } => self.failure_report(reporter, target).await,
            MonRequest::OsdReport(mut r) => {
                if !self.is_leader() {
                    return Err(self.not_leader());
                }
                self.quorum_recent().await?;
                {
                    let st = self.shared.read();
                    let map = st.map.as_ref().ok_or(MonError::NoMap)?;
                    crate::leader::check_report(map, &mut r)?;
                }
                self.leader.lock().await.on_report(*r, Instant::now());
                Ok(MonReply {
                    epoch: self.epoch(),
                    ..Default::default()
                })
            }
            MonRequest::Admin(Admin::Status) => {
                if !self.is_leader() {
                    return Err(self.not_leader());
                }
                // A leader cut off from the majority would report a
                // cluster it no longer speaks for.
                self.quorum(QUORUM_WAIT_STATUS).await?;
                let report = self.status().await?;
                let value = serde_json::to_value(&report)
                    .map_err(|e| MonError::Unavailable(format!("status: {e}")))?;
                Ok(MonReply {
                    epoch: self.epoch(),
                    value,
                    map: None,
                })
            }
            MonRequest::Admin(Admin::OsdOkToStop { ids }) => {
                if !self.is_leader() {
                    return Err(self.not_leader());
                }
                self.quorum(QUORUM_WAIT_STATUS).await?;
                let answer = {
                    let l = self.leader.lock().await;
                    let map = &self.map_now()?;
                    l.ok_to_stop(map, &ids)?
                };
                let value = serde_json::to_value(&answer)
                    .map_err(|e| MonError::Unavailable(format!("ok-to-stop: {e}")))?;
                Ok(MonReply {
                    epoch: self.epoch(),
                    value,
                    map: None,
                })
            }
            MonRequest::Admin(Admin::OsdSafeToDestroy { ids }) => {
                let answer = self.safe_to_destroy(&ids).await?;
                let value = serde_json::to_value(&answer)
                    .map_err(|e| MonError::Unavailable(format!("safe-to-destroy: {e}")))?;
                Ok(MonReply {
                    epoch: self.epoch(),
                    value,
                    map: None,
                })
            }
            MonRequest::Admin(a @ (Admin::OsdDestroy { .. } | Admin::OsdPurge { .. })) => {
                self.destroy(a).await
            }
            MonRequest::Admin(Admin::MonAdd { id, addr }) => self.mon_add(id, addr).await,
            MonRequest::Admin(Admin::MonRm { id }) => self.mon_rm(id).await,
            MonRequest::Admin(Admin::QuorumStatus) => self.quorum_status().await,
            MonRequest::Admin(
                a @ (Admin::DashboardCreateToken { .. }
                | Admin::DashboardLsTokens
                | Admin::DashboardRevokeTokens { .. }),
            ) => self.dashboard_admin(a).await,
            MonRequest::Admin(
                a @ (Admin::S3UserCreate { .. }
                | Admin::S3UserRm { .. }
                | Admin::S3UserInfo { .. }
                | Admin::S3UserLs
                | Admin::S3KeyCreate { .. }
                | Admin::S3KeyRm { .. }
                | Admin::S3Secret { .. }
                | Admin::S3UserName { .. }),
            ) => self.s3_admin(a).await,
            MonRequest::Admin(Admin::LogLast { n, level, since }) => self.log_last(n, level, since),
            MonRequest::Admin(Admin::Df) => {
                if !self.is_leader() {
                    return Err(self.not_leader());
                }
                self.quorum(QUORUM_WAIT_STATUS).await?;
                let report = {
                    let l = self.leader.lock().await;
                    let map = &self.map_now()?;
                    l.df(map)?
                };
                let value = serde_json::to_value(&report)
                    .map_err(|e| MonError::Unavailable(format!("df: {e}")))?;
                Ok(MonReply {
                    epoch: self.epoch(),
                    value,
                    map: None,
                })
            }
            MonRequest::Admin(Admin::PoolStats { pool }) => {
                if !self.is_leader() {
                    return Err(self.not_leader());
                }
                self.quorum(QUORUM_WAIT_STATUS).await?;
                let value = {
                    let l = self.leader.lock().await;
                    let map = &self.map_now()?;
                    let only = match &pool {
                        Some(name) => Some(admin::pool(map, name)?.id),
                        None => None,
                    };
                    l.pool_stats(map, only, Instant::now(), &self.timeouts())?
                };
                Ok(MonReply {
                    epoch: self.epoch(),
                    value,
                    map: None,
                })
            }
            MonRequest::Admin(Admin::MgrServices) => {
                if !self.is_leader() {
                    return Err(self.not_leader());
                }
                let mut services = serde_json::Map::new();
                if let Some((url, dashboard)) = self.http_url.get() {
                    if *dashboard {
                        services.insert("dashboard".into(), url.clone().into());
                    }
                    services.insert("prometheus".into(), format!("{url}metrics").into());
                }
                Ok(MonReply {
                    epoch: self.epoch(),
                    value: services.into(),
                    map: None,
                })
            }
            MonRequest::Admin(Admin::Balancer { on: None }) => {
                if !self.is_leader() {
                    return Err(self.not_leader());
                }
                let value = {
                    let l = self.leader.lock().await;
                    let st = self.shared.read();
                    let map = st.map.as_ref().ok_or(MonError::NoMap)?;
                    l.balancer_status(map, Instant::now())
                };
                Ok(MonReply {
                    epoch: self.epoch(),
                    value,
                    map: None,
                })
            }
            MonRequest::Admin(Admin::PgLs { pool }) => {
                if !self.is_leader() {
                    return Err(self.not_leader());
                }
                let rows = {
                    let l = self.leader.lock().await;
                    let map = &self.map_now()?;
                    let pool = match pool {
                        None => None,
                        Some(name) => Some(
                            map.pool_by_name(&name)
                                .ok_or_else(|| {
                                    MonError::Invalid(format!("pool '{name}' does not exist"))
                                })?
                                .id,
                        ),
                    };
                    l.pg_list(map, pool)?
                };
                let value = serde_json::to_value(&rows)
                    .map_err(|e| MonError::Unavailable(format!("pg ls: {e}")))?;
                Ok(MonReply {
                    epoch: self.epoch(),
                    value,
                    map: None,
                })
            }
            MonRequest::Admin(a) => {
                let outcome = {
                    let st = self.shared.read();
                    let map = st.map.as_ref().ok_or(MonError::NoMap)?;
                    admin::plan(map, &a)?
                };
                match outcome {
                    Outcome::Answer(value) => Ok(MonReply {
                        epoch: self.epoch(),
                        value,
                        map: None,
                    }),
                    Outcome::Changes(_) => {
                        self.change_with(|m| match admin::plan(m, &a)? {
                            Outcome::Changes(c) => Ok(c),
                            Outcome::Answer(_) | Outcome::Issue { .. } => Ok(vec![]),
                        })
                        .await
                    }
                    Outcome::Issue { .. } => self.issue(&a).await,
                }
            }
        }
    }

    /// Before an OSD's boot or a monitor's join: record the serial of
    /// the certificate the daemon connects with if the user table has
    /// none for it yet (its first start; an OSD's in the boots' gathered
    /// epoch). A recorded one was checked by `authorize`.
    async fn record_daemon_key(&self, entity: &str, serial: &str) -> Result<(), MonError> {
        let known = {
            let st = self.shared.read();
            st.map.as_ref().is_some_and(|m| m.auth.contains_key(entity))
        };
        if known {
            return Ok(());
        }
        let put = crate::monmap::key_record(entity, serial);
        self.gather(Gather::Boot(put)).await.map(|_| ())
    }

    /// This monitor's key: its certificate's serial (`None` without TLS).
    fn own_serial(&self) -> Option<String> {
        let sec = self.cfg.security.as_ref()?;
        sec.keyring().identity().ok().map(|i| i.serial)
    }

    /// The group's voters and their addresses, as the monitor map should
    /// name them.
    fn members(&self) -> BTreeMap<u64, String> {
        let m = self.raft.metrics().borrow().membership_config.clone();
        let members = m.membership();
        members
            .voter_ids()
            .filter_map(|id| Some((id, members.get_node(&id)?.addr.clone())))
            .collect()
    }

    /// Leader: keep the monitor map equal to the group and record this
    /// monitor's own key.
    async fn keep_mon_map(&self) {
        let members = self.members();
        let learners: std::collections::BTreeSet<u64> = {
            let m = self.raft.metrics().borrow().membership_config.clone();
            m.membership().learner_ids().collect()
        };
        let serial = self.own_serial();
        let authority = self.cfg.authority.is_some();
        let me = serial.as_deref().map(|s| (self.cfg.id, s, authority));
        let changes =
            |m: &loligo_types::OsdMap| crate::monmap::leader_changes(m, &members, &learners, me);
        // One change at a time, in order: a key the map refuses (a full
        // user table) comes last and holds nothing else back.
        for _ in 0..MON_MAP_CHANGES_MAX {
            let pending = (self.shared.read().map.as_ref()).is_some_and(|m| !changes(m).is_empty());
            if !pending {
                return;
            }
            let r = self
                .change_with(|m| Ok(changes(m).into_iter().take(1).collect()))
                .await;
            if let Err(e) = r {
                tracing::warn!("cannot keep the monitor map yet: {e}");
                return;
            }
        }
    }

    /// Follower: ask the leader to record this monitor's key if the map
    /// has none of it; say so (once) if the map records another.
    async fn join(&self) {
        use crate::monmap::OwnKey;
        let Some(serial) = self.own_serial() else {
            return;
        };
        let stands = {
            let st = self.shared.read();
            let Some(m) = st.map.as_ref() else { return };
            crate::monmap::own_key(m, self.cfg.id, &serial)
        };
        let told = &self.told_other_key;
        match stands {
            OwnKey::Recorded => told.store(false, std::sync::atomic::Ordering::Relaxed),
            OwnKey::Other => {
                if !told.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::error!(
                        "the map records another key of mon.{id} than this keyring's (rotated or \
                         revoked): the other monitors refuse this one until it is restarted with \
                         the keyring `loligo auth rotate mon.{id}` gave",
                        id = self.cfg.id
                    );
                }
            }
            OwnKey::Missing => {
                let mut joiner = self.joiner.lock().await;
                if joiner.is_none() {
                    let addrs = self.cfg.members.values().cloned().collect();
                    match loligo_monc::MonClient::new(addrs) {
                        Ok(c) => {
                            let mut c = c.secured(self.cfg.security.as_ref());
                            c.deadline = Duration::from_millis(JOIN_DEADLINE_MS);
                            *joiner = Some(c);
                        }
                        Err(e) => tracing::warn!("cannot ask to join: {e}"),
                    }
                }
                if let Some(c) = joiner.as_mut() {
                    let id = self.cfg.id;
                    if let Err(e) = c.call(MonRequest::MonJoin { id }).await {
                        tracing::debug!("mon.{id}'s key is not recorded yet: {e}");
                    }
                }
            }
        }
    }

    /// `osd safe-to-destroy` (leader only: it holds the PG reports).
    async fn safe_to_destroy(&self, ids: &[i32]) -> Result<crate::leader::SafeToDestroy, MonError> {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        self.quorum(QUORUM_WAIT_STATUS).await?;
        let l = self.leader.lock().await;
        let map = &self.map_now()?;
        Ok(l.safe_to_destroy(map, ids)?)
    }

    /// `osd destroy` and `osd purge`: refused unless the OSD is safe to
    /// destroy, or the operator forces it.
    async fn destroy(&self, a: Admin) -> CallResult {
        let (Admin::OsdDestroy { id, force, .. } | Admin::OsdPurge { id, force, .. }) = a else {
            return Err(MonError::Invalid("not a destroy".into()));
        };
        {
            // The map's own refusals first (no such OSD, up, unconfirmed).
            let st = self.shared.read();
            admin::plan(st.map.as_ref().ok_or(MonError::NoMap)?, &a)?;
        }
        if !force {
            if let Some(why) = self.safe_to_destroy(&[id]).await?.why_not(id) {
                return Err(MonError::Invalid(format!(
                    "{why}; --force destroys it anyway, giving up what only it holds"
                )));
            }
        }
        self.change_with(|m| match admin::plan(m, &a)? {
            Outcome::Changes(c) => Ok(c),
            Outcome::Answer(_) | Outcome::Issue { .. } => Ok(vec![]),
        })
        .await
    }

    /// `auth add` or `auth rotate`: a new keyring for the user the plan
    /// names, its serial recorded with the caps; the keyring goes back
    /// in the reply and is kept nowhere (not in the map, not in the log).
    async fn issue(&self, a: &Admin) -> CallResult {
        if let Admin::OsdNew { serial, .. } = a {
            if serial.is_some() || self.cfg.security.is_none() {
                return self.osd_new_no_key(a).await;
            }
            if self.cfg.authority.is_none() {
                return Err(MonError::Unsupported(
                    "the monitors make no keys (no --authority): make the OSD's keyring with \
                     `loligo auth keyring osd.N --ca DIR -o FILE` and give it: `osd new N -i FILE`"
                        .into(),
                ));
            }
        }
        let ca = self.cfg.authority.clone().ok_or_else(|| {
            MonError::Unsupported(
                "this monitor holds no certificate authority (`mon run --authority DIR`), so it makes no keys; \
                 a cluster run with --insecure has none"
                    .into(),
            )
        })?;
        let mut made = None;
        let mut r = self
            .change_with(|m| match admin::plan(m, a)? {
                Outcome::Issue { entity, caps, also } => {
                    let k = ca
                        .issue(&entity)
                        .map_err(|e| MonError::Unavailable(format!("making a key: {e}")))?;
                    let serial = k
                        .identity()
                        .map_err(|e| MonError::Unavailable(format!("making a key: {e}")))?
                        .serial;
                    made = Some(k);
                    let put = Change::AuthPut {
                        entity,
                        entry: AuthEntry { caps, serial },
                    };
                    Ok(also.into_iter().chain([put]).collect())
                }
                Outcome::Answer(_) | Outcome::Changes(_) => Ok(vec![]),
            })
            .await?;
        let k = made.ok_or_else(|| MonError::Unavailable("no key was made".into()))?;
        let text = k
            .to_text()
            .map_err(|e| MonError::Unavailable(format!("the keyring: {e}")))?;
        r.value = serde_json::json!({ "entity": k.entity, "keyring": text });
        Ok(r)
    }

    /// `osd new` without a key made here: in a cluster without keys its
    /// changes alone; with a keyring made offline, its serial recorded as
    /// the OSD's key (replacing a revoked one: only that key gets in).
    async fn osd_new_no_key(&self, a: &Admin) -> CallResult {
        let serial = match a {
            Admin::OsdNew { serial, .. } => serial.clone(),
            _ => None,
        };
        let mut entity = None;
        let mut r = self
            .change_with(|m| match admin::plan(m, a)? {
                Outcome::Issue {
                    entity: e,
                    caps,
                    mut also,
                } => {
                    if let Some(serial) = &serial {
                        also.push(Change::AuthPut {
                            entity: e.clone(),
                            entry: AuthEntry {
                                caps,
                                serial: serial.clone(),
                            },
                        });
                    }
                    entity = Some(e);
                    Ok(also)
                }
                Outcome::Answer(_) | Outcome::Changes(_) => Ok(vec![]),
            })
            .await?;
        r.value = serde_json::json!({ "entity": entity });
        Ok(r)
    }

    async fn failure_report(&self, reporter: i32, target: i32) -> CallResult {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        let changes = {
            let mut l = self.leader.lock().await;
            let st = self.shared.read();
            let map = st.map.as_ref().ok_or(MonError::NoMap)?;
            l.on_failure(map, reporter, target, Instant::now(), &self.timeouts())
        };
        if changes.is_empty() {
            return Ok(MonReply {
                epoch: self.epoch(),
                ..Default::default()
            });
        }
        for c in &changes {
            if let Change::OsdDown { id } = c {
                tracing::info!(
                    "marking osd.{id} down: failure reports (osd.{reporter} on osd.{target})"
                );
            }
        }
        // Proposed against the freshest map: only what still applies.
        self.change_with(|m| {
            Ok(changes
                .into_iter()
                .filter(|c| still_applies(m, c))
                .collect())
        })
        .await
    }

    fn timeouts(&self) -> Timeouts {
        Timeouts {
            min_down_reporters: self.cfg.min_down_reporters,
            report_valid: self.cfg.heartbeat_grace * 2,
            // (The other reporters of an OSD cut off from all speak
            // within a heartbeat or two of the first.)
            standoff: self.cfg.heartbeat_grace / 4,
            report_timeout: self.cfg.report_timeout,
            down_out_interval: self.cfg.down_out_interval,
            io_window: Duration::from_millis(IO_WINDOW_MS),
        }
    }

    /// Leader duties, twice a second; a follower's key recorded.
    async fn tick(&self) {
        if !self.is_leader() {
            *self.leader.lock().await = LeaderState::with_placements(self.placements.clone());
            // Only a leader looks at every PG.
            self.placements.clear();
            *self.log_pump.lock().await = clog_pump::LogPump::default();
            self.join().await;
            return;
        }
        let has_map = self.shared.read().map.is_some();
        if !has_map {
            let cmd = match &self.cfg.restore {
                Some(map) => MonCmd::Restore(map.clone()),
                None => MonCmd::Init {
                    fsid: self.cfg.fsid.clone(),
                    failure_domain: self.cfg.failure_domain.clone(),
                },
            };
            let _g = self.propose_lock.lock().await;
            if let Err(e) = self.propose(cmd).await {
                tracing::warn!("cannot write the first map yet: {e}");
            }
            return;
        }
        self.keep_mon_map().await;
        let changes = {
            let mut l = self.leader.lock().await;
            let st = self.shared.read();
            let Some(map) = st.map.as_ref() else { return };
            l.tick(map, Instant::now(), &self.timeouts())
        };
        if !changes.is_empty() {
            tracing::info!("from reports and their absence: {changes:?}");
            let _ = self
                .change_with(|m| {
                    Ok(changes
                        .into_iter()
                        .filter(|c| still_applies(m, c))
                        .collect())
                })
                .await;
        }
        self.balance().await;
        self.step_pgp().await;
        self.log_health().await;
    }

    /// Leader: pgp_num's next step toward pg_num, when one is due.
    async fn step_pgp(&self) {
        let (epoch, changes) = {
            let mut l = self.leader.lock().await;
            let Ok(map) = &self.map_now() else { return };
            (map.epoch, l.pgp_step(map))
        };
        if changes.is_empty() {
            return;
        }
        tracing::info!("{}", self.leader.lock().await.pgp_note());
        // Only onto the map it was computed on.
        let r = self
            .change_with(|m| match m.epoch == epoch {
                true => Ok(changes),
                false => Ok(Vec::new()),
            })
            .await;
        match r {
            Ok(r) => self.leader.lock().await.on_pgp_stepped(r.epoch),
            Err(e) => tracing::warn!("pgp_num step: {e}"),
        }
    }

    /// Leader: the upmap balancer's run, when it is on and due.
    async fn balance(&self) {
        let (epoch, changes) = {
            let mut l = self.leader.lock().await;
            let Ok(map) = &self.map_now() else { return };
            (map.epoch, l.balance(map, Instant::now()))
        };
        if changes.is_empty() {
            return;
        }
        tracing::info!("balancer: {} PG overrides", changes.len());
        // Only onto the map they were computed on, the balancer still on.
        let r = self
            .change_with(|m| match m.epoch == epoch && m.balancer {
                true => Ok(changes),
                false => Ok(Vec::new()),
            })
            .await;
        match r {
            Ok(r) => self.leader.lock().await.on_balanced(r.epoch),
            Err(e) => tracing::warn!("balancer: {e}"),
        }
    }

    /// Whether this leader still leads a majority (Raft's read index):
    /// a leader cut off from it answers `NoQuorum`, never as if it led.
    async fn quorum(&self, wait: Duration) -> Result<(), MonError> {
        use openraft::error::{CheckIsLeaderError, RaftError};
        match tokio::time::timeout(wait, self.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))))
            | Ok(Err(RaftError::Fatal(_))) => Err(self.not_leader()),
            // No majority confirmed it within a heartbeat, or at all.
            Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)))) | Err(_) => {
                Err(self.no_quorum())
            }
        }
    }

    /// As `quorum`, for what comes too often to ask a majority each time
    /// (OSD reports): a confirmation younger than `QUORUM_FRESH` stands.
    /// A leader cut off answers `NoQuorum`: the others may have elected a
    /// leader that waits for these reports and marks silent OSDs down.
    async fn quorum_recent(&self) -> Result<(), MonError> {
        let at = *self.quorum_at.lock().unwrap_or_else(|p| p.into_inner());
        if at.is_some_and(|t| t.elapsed() < QUORUM_FRESH) {
            return Ok(());
        }
        let asked = Instant::now();
        self.quorum(QUORUM_WAIT_REPORT).await?;
        let mut at = self.quorum_at.lock().unwrap_or_else(|p| p.into_inner());
        *at = Some(at.map_or(asked, |t| t.max(asked)));
        Ok(())
    }

    /// This monitor reaches no majority.
    fn no_quorum(&self) -> MonError {
        let metrics = self.raft.metrics().borrow().clone();
        let members = metrics.membership_config.membership().voter_ids().count();
        MonError::NoQuorum(format!(
            "mon.{} reaches fewer than {} of the {members} monitors, so the cluster map cannot change; its newest map is epoch {}",
            self.cfg.id,
            members / 2 + 1,
            self.epoch()
        ))
    }

    /// `/metrics` now ([`http::MetricsPage`]): the cluster's metrics in
    /// Prometheus' text format while this member leads and hears a
    /// majority, rendered at most once per [`METRICS_FRESH`] however
    /// many scrape; empty on a follower that knows the leader; 503 with
    /// no leader known or no majority heard.
    pub async fn metrics_page(&self) -> http::MetricsPage {
        use http::MetricsPage;
        if !self.is_leader() {
            return match self.raft.metrics().borrow().current_leader {
                Some(_) => MetricsPage::Standby,
                None => MetricsPage::Unavailable(format!("mon.{} knows no leader", self.cfg.id)),
            };
        }
        if let Err(e) = self.quorum_recent().await {
            return MetricsPage::Unavailable(e.to_string());
        }
        let mut cache = self.metrics_cache.lock().await;
        if let Some((at, text)) = cache.as_ref() {
            if at.elapsed() < METRICS_FRESH {
                return MetricsPage::Leader(text.clone());
            }
        }
        let monitors = self.mon_status();
        let text = {
            let l = self.leader.lock().await;
            let Ok(map) = &self.map_now() else {
                return MetricsPage::Unavailable("no map yet".into());
            };
            let perf = !self.cfg.exclude_perf_counters;
            match l.metrics(map, monitors, Instant::now(), &self.timeouts(), perf) {
                Ok(text) => text,
                Err(e) => return MetricsPage::Unavailable(format!("metrics: {e}")),
            }
        };
        *cache = Some((Instant::now(), text.clone()));
        MetricsPage::Leader(text)
    }

    /// The IP address this monitor serves its clients on (from the
    /// monitor map), when it is one.
    pub fn serving_ip(&self) -> Option<std::net::IpAddr> {
        let addr = self.cfg.members.get(&self.cfg.id)?;
        let sa: std::net::SocketAddr = addr.parse().ok()?;
        (!sa.ip().is_unspecified()).then_some(sa.ip())
    }

    /// Where this monitor's HTTP services are (`http://HOST:PORT/`), once
    /// they serve, and whether the dashboard is served there: what `mgr
    /// services` names while it leads. Set once.
    pub fn set_http_url(&self, url: String, dashboard: bool) {
        let _ = self.http_url.set((url, dashboard));
    }

    /// The dashboard's URL, when this monitor serves it.
    pub fn dashboard_url(&self) -> Option<&str> {
        (self.http_url.get())
            .filter(|(_, dashboard)| *dashboard)
            .map(|(url, _)| url.as_str())
    }

    /// A copy of the current map, for work that looks at every PG (a
    /// census, a report per PG, the balancer): the map's lock is held only
    /// while copying, because the Raft state machine takes it to apply,
    /// and a census of 333,333 PGs under it held the apply past the commit
    /// timeout.
    pub(crate) fn map_now(&self) -> Result<loligo_types::OsdMap, MonError> {
        self.shared.read().map.clone().ok_or(MonError::NoMap)
    }

    /// The `status` report (leader only: it holds the PG stats).
    async fn status(&self) -> Result<StatusReport, MonError> {
        let monitors = self.mon_status();
        let l = self.leader.lock().await;
        let map = &self.map_now()?;
        Ok(l.status(map, monitors, Instant::now(), &self.timeouts())?)
    }
}

/// How long one rendering of `/metrics` serves every scrape.
const METRICS_FRESH: Duration = Duration::from_secs(1);

/// How long a leader waits to hear a majority confirm it leads, before a
/// change, and before a status report.
const QUORUM_WAIT_CHANGE: Duration = Duration::from_secs(5);
const QUORUM_WAIT_STATUS: Duration = Duration::from_secs(2);
/// How long a leader waits for a majority's confirmation before it takes
/// an OSD report (less than a client's shortest attempt, `monc`'s one
/// second, so that a cut-off leader says so within it).
const QUORUM_WAIT_REPORT: Duration = Duration::from_millis(500);
/// How long a majority's confirmation stands for OSD reports: half the
/// shortest election timeout, so that a leader cut off stops taking them
/// before the others can have elected another.
const QUORUM_FRESH: Duration = Duration::from_millis(300);

/// Whether a change the leader decided on an older map still changes the
/// current one (an OSD marked down or out twice is no change) and no flag
/// set since holds it back.
fn still_applies(m: &loligo_types::OsdMap, c: &Change) -> bool {
    use loligo_types::osdmap::OsdFlag;
    match c {
        Change::OsdDown { id } => m.is_up(*id) && !m.flags.contains(&OsdFlag::NoDown),
        Change::OsdOut { id } => m.osds.get(id).is_some_and(|o| !o.up && o.is_in()),
        Change::OsdAutoOut { id } => {
            m.osds.get(id).is_some_and(|o| !o.up && o.is_in()) && !m.flags.contains(&OsdFlag::NoOut)
        }
        Change::OsdFullness { id, fullness } => m
            .osds
            .get(id)
            .is_some_and(|o| o.up && o.fullness != *fullness),
        _ => true,
    }
}

/// The gRPC face of a monitor.
struct Service(Arc<Monitor>);

fn json_reply<T: serde::Serialize>(v: &T) -> Result<Response<Raw>, Status> {
    let body = serde_json::to_vec(v).map_err(|e| Status::internal(e.to_string()))?;
    Ok(Response::new(Raw {
        body: body.into(),
        bulk: Vec::new(),
    }))
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<Raw, Status>> + Send>>;

#[tonic::async_trait]
impl MonPeer for Service {
    async fn raft(&self, req: Request<RaftMessage>) -> Result<Response<Raw>, Status> {
        self.raft_message(req).await
    }
}

impl Service {
    /// One Raft message from a peer monitor (on either service).
    async fn raft_message(&self, req: Request<RaftMessage>) -> Result<Response<Raw>, Status> {
        if let Err(e) = self.0.authorize_raft(peer_identity(&req)) {
            tracing::warn!("refused: {e}");
            return Err(Status::permission_denied(e.to_string()));
        }
        if req.get_ref().kind == "vote" {
            if let Err(e) = self.0.authorize_vote(peer_identity(&req)) {
                tracing::warn!("refused: {e}");
                return Err(Status::permission_denied(e.to_string()));
            }
        }
        let m = req.into_inner();
        let raft = &self.0.raft;
        let bad = |e: serde_json::Error| Status::invalid_argument(format!("bad raft message: {e}"));
        match m.kind.as_str() {
            "append" => json_reply(
                &raft
                    .append_entries(serde_json::from_slice(&m.body).map_err(bad)?)
                    .await,
            ),
            "vote" => json_reply(
                &raft
                    .vote(serde_json::from_slice(&m.body).map_err(bad)?)
                    .await,
            ),
            "snapshot" => json_reply(
                &raft
                    .install_snapshot(serde_json::from_slice(&m.body).map_err(bad)?)
                    .await,
            ),
            k => Err(Status::invalid_argument(format!(
                "unknown raft message kind '{k}'"
            ))),
        }
    }
}

#[tonic::async_trait]
impl Mon for Service {
    async fn raft(&self, req: Request<RaftMessage>) -> Result<Response<Raw>, Status> {
        self.raft_message(req).await
    }

    async fn call(&self, req: Request<Raw>) -> Result<Response<Raw>, Status> {
        let who = peer_identity(&req).map(|(e, s)| (e.to_string(), s.to_string()));
        let body = req.into_inner().body;
        if body.len() > CALL_BYTES_MAX {
            let e = MonError::Invalid(format!(
                "a request of {} bytes (at most {CALL_BYTES_MAX})",
                body.len()
            ));
            tracing::warn!("refused: {e}");
            return json_reply(&CallResult::Err(e));
        }
        let r: CallResult = match serde_json::from_slice::<MonRequest>(&body) {
            Ok(req) => match self.0.authorize(&who, &req) {
                Ok(()) => match (&req, &who) {
                    (
                        MonRequest::OsdBoot { .. } | MonRequest::MonJoin { .. },
                        Some((e, serial)),
                    ) => match self.0.record_daemon_key(e, serial).await {
                        Ok(()) => self.0.call(req).await,
                        Err(e) => Err(e),
                    },
                    _ => self.0.call(req).await,
                },
                Err(e) => {
                    tracing::warn!("refused: {e}");
                    Err(e)
                }
            },
            Err(e) => Err(MonError::Invalid(format!("cannot parse request: {e}"))),
        };
        json_reply(&r)
    }

    type WatchStream = WatchStream;

    async fn watch(&self, req: Request<WatchRequest>) -> Result<Response<WatchStream>, Status> {
        let id = peer_identity(&req).map(|(e, s)| (e.to_string(), s.to_string()));
        if let Err(e) = self.0.authorize(&id, &MonRequest::GetMap) {
            tracing::warn!("a map watch refused: {e}");
            return Err(Status::permission_denied(e.to_string()));
        }
        let who = id.as_ref().map(|(e, _)| e.clone());
        let mut have = req.into_inner().have;
        let max = self.0.cfg.watches_max;
        let open = self
            .0
            .watches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut slot = WatchSlot {
            all: self.0.watches.clone(),
            mine: None,
        };
        if open >= max {
            tracing::warn!("a map watch refused: {open} open (at most {max})");
            return Err(Status::resource_exhausted(format!(
                "{open} map watches open on this monitor (at most {max})"
            )));
        }
        if let Some(e) = who {
            let most = self.0.cfg.watches_per_entity_max;
            let mut by = self.0.watchers.lock().unwrap_or_else(|p| p.into_inner());
            let n = by.entry(e.clone()).or_insert(0);
            if *n >= most {
                tracing::warn!("a map watch of {e} refused: it has {n} open (at most {most})");
                return Err(Status::resource_exhausted(format!(
                    "{e} has {n} map watches open on this monitor (at most {most})"
                )));
            }
            *n += 1;
            slot.mine = Some((self.0.watchers.clone(), e));
        }
        let shared = self.0.shared.clone();
        let monitor = self.0.clone();
        let mut rx = shared.epoch_tx.subscribe();
        let (tx, out) = tokio::sync::mpsc::channel::<Result<Raw, Status>>(16);
        tokio::spawn(async move {
            let _slot = slot;
            loop {
                let ups: Result<Vec<MapUpdate>, MonError> = {
                    let st = shared.read();
                    // A user removed or rotated away loses its stream too.
                    crate::auth::authorize(
                        monitor.caller(&id),
                        st.map.as_ref(),
                        &MonRequest::GetMap,
                    )
                    .map(|()| st.updates_since(have))
                };
                let ups = match ups {
                    Ok(u) => u,
                    Err(e) => {
                        let _ = tx.send(Err(Status::permission_denied(e.to_string()))).await;
                        return;
                    }
                };
                for u in ups {
                    // Track the epoch the watcher will hold.
                    match &u {
                        MapUpdate::Full(b) => {
                            if let Ok(m) = loligo_types::decode::<loligo_types::OsdMap>("map", b) {
                                have = m.epoch;
                            }
                        }
                        MapUpdate::Inc(b) => {
                            if let Ok(i) =
                                loligo_types::decode::<loligo_types::Incremental>("incremental", b)
                            {
                                have = i.epoch;
                            }
                        }
                    }
                    let body = serde_json::to_vec(&u).unwrap_or_default();
                    if tx
                        .send(Ok(Raw {
                            body: body.into(),
                            bulk: Vec::new(),
                        }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                // Until the next epoch, or until the watcher goes (its
                // slot is given back then, not at the next epoch).
                tokio::select! {
                    r = rx.changed() => if r.is_err() {
                        return;
                    },
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(out),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::{Incremental, LazyPlacer, OsdMap, RecordAsk, WriteSetRecord};

    /// [`gathered_changes`] with CRUSH mapping each PG asked.
    fn gathered(
        m: &OsdMap,
        incs: &VecDeque<Incremental>,
        items: &[Gather],
    ) -> (Vec<Change>, Vec<Option<Vec<PgId>>>) {
        gathered_changes(m, incs, items, &mut LazyPlacer::new(m))
    }

    #[test]
    fn a_daemons_recorded_key_is_never_replaced_by_a_gathered_first_start() {
        let m = crate::auth::tests::cluster();
        let put = |e: &str, s: &str| Gather::Boot(crate::monmap::key_record(e, s));
        // Two first starts of one daemon in a batch: the first is taken.
        let (c, _) = gathered(
            &m,
            &VecDeque::new(),
            &[put("osd.1", "aa"), put("osd.1", "bb"), put("mon.0", "cc")],
        );
        assert_eq!(
            c,
            vec![
                crate::monmap::key_record("osd.1", "aa"),
                crate::monmap::key_record("mon.0", "cc")
            ]
        );
        // A daemon the map has a key of: none is taken.
        let mut keyed = m.clone();
        keyed
            .apply(&Incremental {
                epoch: m.epoch + 1,
                changes: c,
            })
            .unwrap();
        let (c, _) = gathered(&keyed, &VecDeque::new(), &[put("osd.1", "dd")]);
        assert!(c.is_empty(), "{c:?}");
    }

    /// An OSD that boots with another host than CRUSH has it under is
    /// moved there in the boot's epoch (Ceph's osd_crush_update_on_start);
    /// one with the same host, or not placed yet, is not.
    #[test]
    fn a_boot_with_another_host_moves_the_osd_in_crush() {
        let m = crate::auth::tests::cluster();
        let boot = |id, host: &str| {
            Gather::Boot(Change::OsdBoot {
                id,
                addr: format!("127.0.0.1:{}", 7000 + id),
                host: host.into(),
                crush_weight: 0x10000,
            })
        };
        let under = loligo_types::crush_edit::parent_name(&m.crush, 1)
            .unwrap()
            .to_string();
        let (c, _) = gathered(&m, &VecDeque::new(), &[boot(1, &under)]);
        assert_eq!(c.len(), 1, "{c:?}");
        let (c, _) = gathered(
            &m,
            &VecDeque::new(),
            &[boot(1, "elsewhere"), boot(60, "new")],
        );
        assert_eq!(
            c[1],
            Change::CrushSetLocation {
                id: 1,
                location: vec![("host".into(), "elsewhere".into())]
            }
        );
        assert_eq!(c.len(), 3, "{c:?}");
        // A host the map cannot move it to (the root's name): the boot
        // goes on, unmoved.
        let (unmoved, _) = gathered(&m, &VecDeque::new(), &[boot(1, "default")]);
        assert_eq!(unmoved.len(), 1, "{unmoved:?}");
        let mut moved = m.clone();
        moved
            .apply(&Incremental {
                epoch: m.epoch + 1,
                changes: c,
            })
            .unwrap();
        assert_eq!(
            loligo_types::crush_edit::parent_name(&moved.crush, 1),
            Some("elsewhere")
        );
    }

    #[test]
    fn a_boot_gathered_before_noup_was_set_is_left_out() {
        use loligo_types::osdmap::OsdFlag;
        let mut m = crate::auth::tests::cluster();
        let boot = |id| {
            Gather::Boot(Change::OsdBoot {
                id,
                addr: format!("127.0.0.1:{}", 7000 + id),
                host: "h".into(),
                crush_weight: 0x10000,
            })
        };
        let (c, v) = gathered(&m, &VecDeque::new(), &[boot(9)]);
        assert_eq!((c.len(), v.len()), (1, 1));
        m.flags.insert(OsdFlag::NoUp);
        let (c, v) = gathered(&m, &VecDeque::new(), &[boot(9), boot(10)]);
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(v.len(), 2, "one answer per item");
    }

    #[test]
    fn a_record_whose_claim_the_map_contradicts_is_left_out() {
        let m = crate::auth::tests::cluster();
        let pg = PgId { pool: 1, ps: 3 };
        let placed = m.placer().unwrap().map_pg(pg).unwrap();
        let ask = |acting: Vec<i32>, primary: i32| RecordAsk {
            pg,
            record: WriteSetRecord {
                interval: 3,
                osds: acting.clone(),
            },
            as_of: 3,
            acting,
            primary,
        };
        let held = |a: RecordAsk| {
            let (changes, values) = gathered(&m, &VecDeque::new(), &[Gather::Records(vec![a])]);
            (changes.len(), values[0].as_ref().map_or(0, Vec::len))
        };
        // The PG's primary, as the map places it: recorded.
        assert_eq!(
            held(ask(placed.acting.clone(), placed.acting_primary)),
            (1, 1)
        );
        // Another OSD claiming to be the primary of a set holding it.
        let other = placed.acting[1];
        let mut forged = placed.acting.clone();
        forged.swap(0, 1);
        assert_eq!(held(ask(forged, other)), (0, 0));
        let stranger = (0..5).find(|o| !placed.acting.contains(o)).unwrap();
        assert_eq!(held(ask(vec![stranger, 0], stranger)), (0, 0));
    }
}
