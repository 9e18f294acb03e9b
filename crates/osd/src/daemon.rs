//! The OSD daemon shell: boots against the monitors, follows the map,
//! runs one task per PG (the only writer of that PG), performs the PG
//! state machines' effects (store commits, replication, info queries,
//! pg_temp requests), serves clients and peers over gRPC, heartbeats the
//! other OSDs and reports failures and PG stats.
//!
//! It must never decide anything a PG decides: every client op and every
//! PG state change goes through the PG's task.

use crate::msg::{PeerMsg, PeerReply};
use crate::pg::{
    replica_accepts, replica_step, Effect, Input, Pg, PgInfo, PgView, RepCtx, RepError,
    ReplicaStep, INFO_KEY, PEER_RETRY_MS,
};
use loligo_monc::protocol::MonRequest;
use loligo_monc::MonClient;
use loligo_proto::net::{Channels, MESSAGE_BYTES_MAX};
use loligo_proto::v1::osd_server::{Osd, OsdServer};
use loligo_proto::v1::Raw;
use loligo_store::{CollectionId, ObjectId, ObjectStore, Transaction};
use loligo_types::ops::{
    decode_msg, encode_msg, ClientReply, ClientRequest, OpError, OpReply, Version,
};
use loligo_types::{Epoch, OsdMap, OsdReport, PgId, PgRw, PgStat};
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status};

/// How long dialling a peer OSD may take.
const PEER_CONNECT_TIMEOUT_MS: u64 = 1_000;
/// How long one request to a peer OSD may take.
const PEER_REQUEST_TIMEOUT_MS: u64 = 30_000;
/// Queue depth per PG task.
const PG_QUEUE_MAX: usize = 1024;
/// PG write sets recorded per monitor request.
const PG_RW_BATCH: usize = 1024;

/// An OSD's settings.
#[derive(Clone, Debug)]
pub struct OsdConfig {
    pub id: i32,
    /// The address peers and clients use (`host:port`).
    pub addr: String,
    pub mon_addrs: Vec<String>,
    /// CRUSH host this OSD sits under.
    pub host: String,
    /// CRUSH weight (16.16).
    pub crush_weight: u32,
    pub heartbeat_interval: Duration,
    /// Report a peer that has not answered for this long.
    pub heartbeat_grace: Duration,
    /// How long a client op may wait for its PG.
    pub op_timeout: Duration,
    pub report_interval: Duration,
}

impl OsdConfig {
    pub fn new(id: i32, addr: &str, mon_addrs: Vec<String>) -> OsdConfig {
        OsdConfig {
            id,
            addr: addr.to_string(),
            mon_addrs,
            host: "localhost".into(),
            crush_weight: 0x10000,
            heartbeat_interval: Duration::from_secs(1),
            heartbeat_grace: Duration::from_secs(6),
            op_timeout: Duration::from_secs(30),
            report_interval: Duration::from_secs(2),
        }
    }
}

struct PgMsg {
    input: Input,
    reply: Option<oneshot::Sender<OpReply>>,
}

#[derive(Default)]
struct Counters {
    read_ops: AtomicU64,
    write_ops: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
}

/// State shared by the OSD's tasks.
pub struct OsdShared {
    cfg: OsdConfig,
    store: Arc<dyn ObjectStore>,
    map: RwLock<Option<Arc<OsdMap>>>,
    epoch_tx: tokio::sync::watch::Sender<Epoch>,
    pgs: Mutex<HashMap<PgId, mpsc::Sender<PgMsg>>>,
    /// The interval each PG is in (for refusing stale primaries).
    views: Mutex<HashMap<PgId, PgView>>,
    /// Serialises replica writes per PG (their info must only grow).
    /// with the newest write version queued on this replica.
    rep_locks: Mutex<HashMap<PgId, Arc<RepLane>>>,
    stats: Mutex<HashMap<PgId, PgStat>>,
    /// Connections to peer OSDs.
    peers: Channels,
    counters: Counters,
    start: Instant,
    /// Set when the OSD stops: PG tasks end at their next tick.
    stopped: std::sync::atomic::AtomicBool,
    /// A re-boot after being wrongly marked down is under way.
    rebooting: std::sync::atomic::AtomicBool,
    /// Write sets PGs want recorded, one per PG (the newest ask wins),
    /// sent to the monitors in batches by `record_rw`.
    rw_asks: Mutex<HashMap<PgId, (PgRw, mpsc::Sender<PgMsg>)>>,
    rw_wake: tokio::sync::Notify,
}

/// A PG's replica writes on this OSD: the newest version queued, and a
/// signal for writes waiting for their predecessor.
#[derive(Default)]
struct RepLane {
    high: tokio::sync::Mutex<Version>,
    moved: tokio::sync::Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl OsdShared {
    fn map(&self) -> Option<Arc<OsdMap>> {
        self.map.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn peer_addr(&self, osd: i32) -> Result<String, String> {
        self.map()
            .and_then(|m| m.osds.get(&osd).map(|o| o.addr.clone()))
            .ok_or_else(|| format!("osd.{osd} has no address"))
    }

    async fn send_peer(&self, osd: i32, m: &PeerMsg) -> Result<PeerReply, String> {
        let addr = self.peer_addr(osd)?;
        let mut c = self
            .peers
            .osd(&addr)
            .await
            .map_err(|e| format!("osd.{osd}: {e}"))?;
        match c
            .peer(Raw {
                body: encode_msg(m),
            })
            .await
        {
            Ok(r) => decode_msg(&r.into_inner().body).map_err(|e| e.to_string()),
            Err(s) => {
                self.peers.forget(&addr);
                Err(format!("osd.{osd}: {}", s.message()))
            }
        }
    }

    fn read_info(&self, pg: PgId) -> Option<PgInfo> {
        let c = CollectionId::pg(pg.pool, pg.ps);
        match self.store.record(c, INFO_KEY) {
            Ok(Some(b)) => postcard::from_bytes(&b).ok(),
            Ok(None) if self.store.collection_exists(c).unwrap_or(false) => Some(PgInfo::default()),
            _ => None,
        }
    }

    fn ensure_collection(&self, pg: PgId) -> Result<(), String> {
        let c = CollectionId::pg(pg.pool, pg.ps);
        if self.store.collection_exists(c).map_err(|e| e.to_string())? {
            return Ok(());
        }
        let mut t = Transaction::new();
        t.create_collection(c);
        match self.store.apply(t) {
            Ok(()) | Err(loligo_store::StoreError::CollectionExists(_)) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A running OSD.
pub struct OsdHandle {
    pub shared: Arc<OsdShared>,
    pub addr: SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl OsdHandle {
    /// Stop serving (abruptly: like a crash, the store keeps what was
    /// committed). `mark_down` first tells the monitors, as a clean stop.
    pub async fn stop(self, mark_down: bool) {
        if mark_down {
            if let Ok(mut mc) = MonClient::new(self.shared.cfg.mon_addrs.clone()) {
                mc.deadline = Duration::from_secs(3);
                let _ = mc
                    .call(MonRequest::OsdMarkMeDown {
                        id: self.shared.cfg.id,
                    })
                    .await;
            }
        }
        self.shared.stopped.store(true, Ordering::Relaxed);
        for t in &self.tasks {
            t.abort();
        }
        let pgs: Vec<_> = lock(&self.shared.pgs).drain().collect();
        drop(pgs);
    }

    /// The newest map epoch this OSD has.
    pub fn epoch(&self) -> Epoch {
        *self.shared.epoch_tx.borrow()
    }
}

/// Start an OSD on `listener` with `store`: serve, boot, follow the map.
pub async fn start(
    cfg: OsdConfig,
    store: Arc<dyn ObjectStore>,
    listener: tokio::net::TcpListener,
) -> Result<OsdHandle, String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (epoch_tx, _) = tokio::sync::watch::channel(0);
    let shared = Arc::new(OsdShared {
        cfg,
        store,
        map: RwLock::new(None),
        epoch_tx,
        pgs: Mutex::new(HashMap::new()),
        views: Mutex::new(HashMap::new()),
        rep_locks: Mutex::new(HashMap::new()),
        stats: Mutex::new(HashMap::new()),
        peers: Channels::new(
            Duration::from_millis(PEER_CONNECT_TIMEOUT_MS),
            Some(Duration::from_millis(PEER_REQUEST_TIMEOUT_MS)),
        ),
        counters: Counters::default(),
        start: Instant::now(),
        stopped: std::sync::atomic::AtomicBool::new(false),
        rebooting: std::sync::atomic::AtomicBool::new(false),
        rw_asks: Mutex::new(HashMap::new()),
        rw_wake: tokio::sync::Notify::new(),
    });
    let mut tasks = Vec::new();
    let svc = OsdServer::new(Service(shared.clone()))
        .max_decoding_message_size(MESSAGE_BYTES_MAX)
        .max_encoding_message_size(MESSAGE_BYTES_MAX);
    // Small request/reply messages: without TCP_NODELAY, Nagle's
    // algorithm and delayed ACKs add ~40 ms to each.
    let incoming = tokio_stream::StreamExt::map(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        |s| {
            if let Ok(s) = &s {
                let _ = s.set_nodelay(true);
            }
            s
        },
    );
    tasks.push(tokio::spawn(async move {
        if let Err(e) = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(incoming)
            .await
        {
            tracing::error!("OSD server stopped: {e}");
        }
    }));
    let mut mc = MonClient::new(shared.cfg.mon_addrs.clone()).map_err(|e| e.to_string())?;
    mc.deadline = Duration::from_secs(60);
    mc.call(MonRequest::OsdBoot {
        id: shared.cfg.id,
        addr: shared.cfg.addr.clone(),
        host: shared.cfg.host.clone(),
        crush_weight: shared.cfg.crush_weight,
    })
    .await
    .map_err(|e| format!("boot: {e}"))?;
    let s = shared.clone();
    let mut wc = mc.clone();
    tasks.push(tokio::spawn(async move {
        wc.watch(None, |m| {
            on_map(&s, m);
            true
        })
        .await;
    }));
    let s = shared.clone();
    tasks.push(tokio::spawn(heartbeats(s, mc.clone())));
    let s = shared.clone();
    tasks.push(tokio::spawn(record_rw(s, mc.clone())));
    let s = shared.clone();
    tasks.push(tokio::spawn(reports(s, mc)));
    // Wait until the map shows this OSD up (so callers can use it).
    let mut rx = shared.epoch_tx.subscribe();
    let up = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if shared.map().is_some_and(|m| {
                m.osds
                    .get(&shared.cfg.id)
                    .is_some_and(|o| o.up && o.addr == shared.cfg.addr)
            }) {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    if up.is_err() {
        return Err("the map never showed this OSD up".into());
    }
    Ok(OsdHandle {
        shared,
        addr,
        tasks,
    })
}

/// A new map: instantiate the PGs this OSD serves and tell every PG.
/// A map that shows this (running) OSD down makes it boot again.
fn on_map(s: &Arc<OsdShared>, m: &OsdMap) {
    let me_down = m.osds.get(&s.cfg.id).is_some_and(|o| !o.up);
    if me_down && !s.stopped.load(Ordering::Relaxed) && !s.rebooting.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "map epoch {} wrongly marks osd.{} down: booting again",
            m.epoch,
            s.cfg.id
        );
        let s2 = s.clone();
        tokio::spawn(async move {
            if let Ok(mut mc) = MonClient::new(s2.cfg.mon_addrs.clone()) {
                let _ = mc
                    .call(MonRequest::OsdBoot {
                        id: s2.cfg.id,
                        addr: s2.cfg.addr.clone(),
                        host: s2.cfg.host.clone(),
                        crush_weight: s2.cfg.crush_weight,
                    })
                    .await;
            }
            s2.rebooting.store(false, Ordering::Relaxed);
        });
    }
    let map = Arc::new(m.clone());
    *s.map.write().unwrap_or_else(|p| p.into_inner()) = Some(map.clone());
    let Ok(mut placer) = map.placer() else {
        tracing::error!("map epoch {} does not compile", map.epoch);
        return;
    };
    let me = s.cfg.id;
    let now_ms = s.now_ms();
    for pool in map.pools.values() {
        for ps in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, ps };
            let Ok(pm) = placer.map_pg(pg) else { continue };
            let mine = pm.acting.contains(&me) || pm.up.contains(&me);

            let tx = {
                let pgs = lock(&s.pgs);
                pgs.get(&pg).cloned()
            };
            let tx = match (tx, mine) {
                (Some(tx), _) => tx,
                (None, true) => match spawn_pg(s, pg) {
                    Some(tx) => tx,
                    None => continue,
                },
                (None, false) => continue,
            };
            let rw = map.pg_rw.get(&pg).cloned();
            let rw_up = rw
                .iter()
                .flat_map(|r| r.osds.iter().copied())
                .filter(|&o| map.is_up(o))
                .collect();
            let _ = tx.try_send(PgMsg {
                input: Input::Map {
                    epoch: map.epoch,
                    acting: pm.acting.clone(),
                    primary: pm.acting_primary,
                    pool: pool.clone(),
                    rw,
                    rw_up,
                    now_ms,
                },
                reply: None,
            });
        }
    }
    s.epoch_tx.send_replace(map.epoch);
}

fn spawn_pg(s: &Arc<OsdShared>, pg: PgId) -> Option<mpsc::Sender<PgMsg>> {
    if let Err(e) = s.ensure_collection(pg) {
        tracing::error!("pg {pg}: cannot create its collection: {e}");
        return None;
    }
    let info = s.read_info(pg).unwrap_or_default();
    let mut core = Pg::new(pg, s.cfg.id, info);
    core.op_timeout_ms = s.cfg.op_timeout.as_millis() as u64;
    let (tx, mut rx) = mpsc::channel::<PgMsg>(PG_QUEUE_MAX);
    lock(&s.pgs).insert(pg, tx.clone());
    let s = s.clone();
    let me = tx.clone();
    tokio::spawn(async move {
        let mut waiters: HashMap<u64, oneshot::Sender<OpReply>> = HashMap::new();
        let mut next_token = 1u64;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            let msg = tokio::select! {
                m = rx.recv() => match m { Some(m) => m, None => return },
                _ = tick.tick() => PgMsg { input: Input::Tick { now_ms: s.now_ms() }, reply: None },
            };
            if s.stopped.load(Ordering::Relaxed) {
                return;
            }
            let mut input = msg.input;
            if let (Some(r), Input::Op { token, .. }) = (msg.reply, &mut input) {
                *token = next_token;
                waiters.insert(next_token, r);
                next_token += 1;
            }
            let is_map = matches!(input, Input::Map { .. });
            // Stats for the monitors are refreshed on every input but the
            // per-op ones (ticks come every 250 ms): building them for
            // each op cost a few allocations on the read path.
            let per_op = matches!(
                input,
                Input::Op { .. } | Input::LocalDone { .. } | Input::RepDone { .. }
            );
            let fx = core.handle(s.store.as_ref(), input);
            if is_map {
                lock(&s.views).insert(pg, core.view());
            }
            perform(&s, &me, &mut core, &mut waiters, fx);
            if per_op {
                continue;
            }
            let mut st = lock(&s.stats);
            match core.stat() {
                Some(x) => {
                    st.insert(pg, x);
                }
                None => {
                    st.remove(&pg);
                }
            }
        }
    });
    Some(tx)
}

fn perform(
    s: &Arc<OsdShared>,
    me: &mpsc::Sender<PgMsg>,
    core: &mut Pg,
    waiters: &mut HashMap<u64, oneshot::Sender<OpReply>>,
    fx: Vec<Effect>,
) {
    for e in fx {
        match e {
            Effect::Reply { token, reply } => {
                if let Some(w) = waiters.remove(&token) {
                    let _ = w.send(reply);
                }
            }
            Effect::Apply { tid, txn } => {
                let commit = s.store.queue_transaction(txn);
                let me = me.clone();
                tokio::spawn(async move {
                    let result = commit.await.map_err(|e| e.to_string());
                    let _ = me
                        .send(PgMsg {
                            input: Input::LocalDone { tid, result },
                            reply: None,
                        })
                        .await;
                });
            }
            Effect::Replicate { tid, to, ctx, txn } => {
                let s = s.clone();
                let me = me.clone();
                let pg = core.id;
                tokio::spawn(async move {
                    let interval = ctx.interval;
                    let msg = PeerMsg::RepOp {
                        pg,
                        from: s.cfg.id,
                        ctx,
                        txn,
                    };
                    let result = replicate(&s, pg, to, interval, &msg).await;
                    let _ = me
                        .send(PgMsg {
                            input: Input::RepDone {
                                tid,
                                from: to,
                                result,
                            },
                            reply: None,
                        })
                        .await;
                });
            }
            Effect::QueryInfo { to, interval } => {
                let s = s.clone();
                let me = me.clone();
                let pg = core.id;
                tokio::spawn(async move {
                    let msg = PeerMsg::GetInfo {
                        pg,
                        from: s.cfg.id,
                        interval,
                    };
                    let give_up = Instant::now() + Duration::from_millis(PEER_RETRY_MS);
                    let info = loop {
                        match s.send_peer(to, &msg).await {
                            Ok(PeerReply::Info(i)) => break i,
                            Ok(_) => break None,
                            Err(_) => {
                                // Unreachable: keep asking a while (the
                                // PG asks again later, and the map marks
                                // a dead member down).
                                if lock(&s.views).get(&pg).map(|v| v.interval) != Some(interval)
                                    || s.map().is_some_and(|m| !m.is_up(to))
                                    || Instant::now() > give_up
                                {
                                    return;
                                }
                                tokio::time::sleep(Duration::from_millis(300)).await;
                            }
                        }
                    };
                    let _ = me
                        .send(PgMsg {
                            input: Input::Info {
                                from: to,
                                interval,
                                info,
                            },
                            reply: None,
                        })
                        .await;
                });
            }
            Effect::RecordRw { interval, osds } => {
                lock(&s.rw_asks).insert(core.id, (PgRw { interval, osds }, me.clone()));
                s.rw_wake.notify_one();
            }
            Effect::RequestPgTemp { osds } => {
                let pg = core.id;
                tracing::info!(
                    "pg {pg}: this primary's log is behind; asking for pg_temp {osds:?}"
                );
                let mons = s.cfg.mon_addrs.clone();
                tokio::spawn(async move {
                    if let Ok(mut mc) = MonClient::new(mons) {
                        let r = mc.call(MonRequest::PgTemp { pg, osds }).await;
                        if let Err(e) = r {
                            tracing::warn!("pg {pg}: pg_temp request failed: {e}");
                        }
                    }
                });
            }
        }
    }
}

/// Record the write sets PGs ask for, in batches: one monitor commit
/// covers every PG that changed interval together (an OSD failure moves
/// many at once). A PG whose record holds is told so; a refused (stale)
/// one has moved to a newer interval and asks again there.
async fn record_rw(s: Arc<OsdShared>, mut mc: MonClient) {
    loop {
        s.rw_wake.notified().await;
        loop {
            let batch: Vec<(PgId, (PgRw, mpsc::Sender<PgMsg>))> = {
                let mut asks = lock(&s.rw_asks);
                let keys: Vec<PgId> = asks.keys().copied().take(PG_RW_BATCH).collect();
                keys.into_iter()
                    .filter_map(|k| asks.remove(&k).map(|v| (k, v)))
                    .collect()
            };
            if batch.is_empty() || s.stopped.load(Ordering::Relaxed) {
                break;
            }
            let items = batch
                .iter()
                .map(|(pg, (rw, _))| (*pg, rw.clone()))
                .collect();
            match mc.call(MonRequest::PgRw { items }).await {
                Ok(r) => {
                    let held: Vec<PgId> = serde_json::from_value(r.value).unwrap_or_default();
                    for (pg, (rw, tx)) in batch {
                        if held.contains(&pg) {
                            let _ = tx
                                .send(PgMsg {
                                    input: Input::RwRecorded {
                                        interval: rw.interval,
                                    },
                                    reply: None,
                                })
                                .await;
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!("recording PG write sets failed (retrying): {e}");
                    {
                        // Put them back unless a newer ask replaced them.
                        let mut asks = lock(&s.rw_asks);
                        for (pg, v) in batch {
                            asks.entry(pg).or_insert(v);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}

/// Send a write to a replica, retrying an unreachable one while the
/// interval lasts (the map marks a dead replica down and a new interval
/// abandons the write).
async fn replicate(
    s: &OsdShared,
    pg: PgId,
    to: i32,
    interval: Epoch,
    msg: &PeerMsg,
) -> Result<(), RepError> {
    let deadline = Instant::now() + s.cfg.op_timeout * 2;
    loop {
        match s.send_peer(to, msg).await {
            Ok(PeerReply::RepDone(r)) => return r.map_err(RepError::Failed),
            Ok(PeerReply::Refused(e)) => return Err(RepError::Stale(e)),
            Ok(_) => return Err(RepError::Failed("unexpected reply".into())),
            Err(e) => {
                if lock(&s.views)
                    .get(&pg)
                    .is_some_and(|v| v.interval != interval)
                {
                    return Err(RepError::Stale(e));
                }
                if Instant::now() > deadline {
                    return Err(RepError::Failed(e));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// OSDs pinged at most, each heartbeat round.
const HEARTBEAT_PEERS_MAX: usize = 256;

/// Whom an OSD pings: the up OSDs it shares a PG with, and its next two up
/// neighbours by id (so that an OSD without PGs is watched too), at most
/// `HEARTBEAT_PEERS_MAX`; with each its `up_from` epoch.
fn heartbeat_peers(map: &OsdMap, me: i32, sharing: &BTreeSet<i32>) -> Vec<(i32, Epoch)> {
    let up: Vec<(i32, Epoch)> = map
        .osds
        .values()
        .filter(|o| o.up && o.id != me)
        .map(|o| (o.id, o.up_from))
        .collect();
    let after = up.iter().position(|&(id, _)| id > me).unwrap_or(0);
    let neighbours: BTreeSet<i32> = up
        .iter()
        .cycle()
        .skip(after)
        .take(2.min(up.len()))
        .map(|&(id, _)| id)
        .collect();
    up.into_iter()
        .filter(|(id, _)| sharing.contains(id) || neighbours.contains(id))
        .take(HEARTBEAT_PEERS_MAX)
        .collect()
}

async fn heartbeats(s: Arc<OsdShared>, mut mc: MonClient) {
    let mut last_ok: HashMap<i32, (Instant, Epoch)> = HashMap::new();
    let mut reported: HashMap<i32, Instant> = HashMap::new();
    let mut t = tokio::time::interval(s.cfg.heartbeat_interval);
    loop {
        t.tick().await;
        let Some(map) = s.map() else { continue };
        let sharing: BTreeSet<i32> = lock(&s.views)
            .values()
            .flat_map(|v| v.acting.iter().copied())
            .collect();
        let peers = heartbeat_peers(&map, s.cfg.id, &sharing);
        let now = Instant::now();
        let mut pings = Vec::new();
        for &(id, up_from) in &peers {
            let e = last_ok.entry(id).or_insert((now, up_from));
            if e.1 != up_from {
                *e = (now, up_from);
            }
            let s2 = s.clone();
            let epoch = map.epoch;
            pings.push(tokio::spawn(async move {
                let m = PeerMsg::Ping {
                    from: s2.cfg.id,
                    epoch,
                };
                let wait = (s2.cfg.heartbeat_grace / 3).max(Duration::from_millis(200));
                let ok = tokio::time::timeout(wait, s2.send_peer(id, &m))
                    .await
                    .is_ok_and(|r| r.is_ok());
                (id, ok)
            }));
        }
        for p in pings {
            if let Ok((id, true)) = p.await {
                if let Some(e) = last_ok.get_mut(&id) {
                    e.0 = Instant::now();
                }
            }
        }
        last_ok.retain(|id, _| peers.iter().any(|p| p.0 == *id));
        for (&id, &(t0, _)) in &last_ok {
            let silent = now.duration_since(t0);
            let recently = reported
                .get(&id)
                .is_some_and(|r| now.duration_since(*r) < s.cfg.heartbeat_grace / 2);
            if silent > s.cfg.heartbeat_grace && !recently {
                reported.insert(id, now);
                let _ = mc
                    .call(MonRequest::OsdFailure {
                        reporter: s.cfg.id,
                        target: id,
                        failed_for_ms: silent.as_millis() as u64,
                    })
                    .await;
            }
        }
    }
}

async fn reports(s: Arc<OsdShared>, mut mc: MonClient) {
    let mut t = tokio::time::interval(s.cfg.report_interval);
    loop {
        t.tick().await;
        let stats = s.store.statfs().ok();
        let r = OsdReport {
            osd: s.cfg.id,
            epoch: *s.epoch_tx.borrow(),
            pgs: lock(&s.stats).values().cloned().collect(),
            bytes_used: stats.map_or(0, |x| x.used),
            bytes_total: stats.map_or(0, |x| x.total),
            read_ops: s.counters.read_ops.load(Ordering::Relaxed),
            write_ops: s.counters.write_ops.load(Ordering::Relaxed),
            read_bytes: s.counters.read_bytes.load(Ordering::Relaxed),
            write_bytes: s.counters.write_bytes.load(Ordering::Relaxed),
        };
        mc.deadline = s.cfg.report_interval;
        let _ = mc.call(MonRequest::OsdReport(r)).await;
    }
}

struct Service(Arc<OsdShared>);

impl Service {
    /// A stopped OSD answers nothing (connections made before the stop
    /// outlive the listener).
    fn alive(&self) -> Result<(), Status> {
        if self.0.stopped.load(Ordering::Relaxed) {
            return Err(Status::unavailable("OSD stopped"));
        }
        Ok(())
    }

    /// Wait (briefly) until this OSD has map `epoch`.
    async fn catch_up(&self, epoch: Epoch) -> Epoch {
        let mut rx = self.0.epoch_tx.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while *rx.borrow_and_update() < epoch {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        let e = *self.0.epoch_tx.borrow();
        e
    }

    async fn client(&self, req: ClientRequest) -> ClientReply {
        match req {
            ClientRequest::Op(op) => {
                let epoch = self.catch_up(op.epoch).await;
                let fail = |e: OpError| {
                    ClientReply::Op(OpReply {
                        result: Err(e),
                        version: Version::default(),
                        epoch,
                    })
                };
                if op.epoch > epoch {
                    return fail(OpError::Behind { epoch });
                }
                let Some(map) = self.0.map() else {
                    return fail(OpError::Behind { epoch });
                };
                let Some(pool) = map.pools.get(&op.pool) else {
                    return fail(OpError::NoPool(op.pool));
                };
                let pg = pool.object_pg(op.name.as_bytes());
                let Some(tx) = lock(&self.0.pgs).get(&pg).cloned() else {
                    return fail(OpError::WrongPrimary { epoch });
                };
                let writes = op.ops.iter().any(|o| o.is_write());
                let in_bytes: u64 = op
                    .ops
                    .iter()
                    .map(|o| match o {
                        loligo_types::ops::SubOp::WriteFull(d)
                        | loligo_types::ops::SubOp::Append(d)
                        | loligo_types::ops::SubOp::Write { data: d, .. } => d.len() as u64,
                        _ => 0,
                    })
                    .sum();
                let (rtx, rrx) = oneshot::channel();
                let msg = PgMsg {
                    input: Input::Op {
                        op,
                        token: 0,
                        now_ms: self.0.now_ms(),
                    },
                    reply: Some(rtx),
                };
                if tx.send(msg).await.is_err() {
                    return fail(OpError::WrongPrimary { epoch });
                }
                let wait = self.0.cfg.op_timeout + Duration::from_secs(5);
                match tokio::time::timeout(wait, rrx).await {
                    Ok(Ok(r)) => {
                        let c = &self.0.counters;
                        if r.result.is_ok() {
                            if writes {
                                c.write_ops.fetch_add(1, Ordering::Relaxed);
                                c.write_bytes.fetch_add(in_bytes, Ordering::Relaxed);
                            } else {
                                c.read_ops.fetch_add(1, Ordering::Relaxed);
                                let out: u64 = r
                                    .result
                                    .as_ref()
                                    .map(|v| {
                                        v.iter()
                                            .map(|x| match x {
                                                loligo_types::ops::SubResult::Data(d) => {
                                                    d.len() as u64
                                                }
                                                _ => 0,
                                            })
                                            .sum()
                                    })
                                    .unwrap_or(0);
                                c.read_bytes.fetch_add(out, Ordering::Relaxed);
                            }
                        }
                        ClientReply::Op(r)
                    }
                    Ok(Err(_)) => fail(OpError::WrongPrimary { epoch }),
                    Err(_) => fail(OpError::Timeout("the PG did not answer".into())),
                }
            }
            ClientRequest::List {
                pool,
                ps,
                epoch,
                start,
                limit,
            } => {
                let epoch = self.catch_up(epoch).await;
                let result = self.list(pool, ps, start, limit);
                ClientReply::List { result, epoch }
            }
        }
    }

    fn list(
        &self,
        pool: u64,
        ps: u32,
        start: Option<String>,
        limit: u32,
    ) -> Result<(Vec<String>, bool), OpError> {
        let map = self.0.map().ok_or(OpError::Behind { epoch: 0 })?;
        let p = map.pools.get(&pool).ok_or(OpError::NoPool(pool))?;
        let pg = PgId { pool, ps };
        if ps >= p.pg_num {
            return Err(OpError::Invalid(format!("pg {pg} past pg_num")));
        }
        let primary = map
            .placer()
            .map_err(|e| OpError::Io(e.to_string()))?
            .map_pg(pg)
            .map_err(|e| OpError::Io(e.to_string()))?
            .acting_primary;
        if primary != self.0.cfg.id {
            return Err(OpError::WrongPrimary { epoch: map.epoch });
        }
        let c = CollectionId::pg(pool, ps);
        if !self
            .0
            .store
            .collection_exists(c)
            .map_err(crate::exec::store_err)?
        {
            return Ok((Vec::new(), false));
        }
        let lim = limit.clamp(1, 10_000) as usize;
        let from =
            start.map(|n| ObjectId::new(loligo_crush::hash::str_hash_rjenkins(n.as_bytes()), n));
        let (mut names, next) = self
            .0
            .store
            .list(c, from.as_ref(), lim + 1)
            .map_err(crate::exec::store_err)?;
        if let Some(f) = &from {
            names.retain(|o| o != f);
        }
        let more = names.len() > lim || next.is_some();
        names.truncate(lim);
        Ok((names.into_iter().map(|o| o.name).collect(), more))
    }

    async fn peer_msg(&self, m: PeerMsg) -> PeerReply {
        match m {
            PeerMsg::Ping { .. } => PeerReply::Pong {
                epoch: *self.0.epoch_tx.borrow(),
            },
            PeerMsg::GetInfo { pg, .. } => PeerReply::Info(self.0.read_info(pg)),
            PeerMsg::RepOp { pg, from, ctx, txn } => {
                let view = lock(&self.0.views).get(&pg).cloned().unwrap_or_default();
                if !replica_accepts(&view, from, &ctx) {
                    return PeerReply::Refused(format!(
                        "pg {pg}: write from osd.{from} at epoch {}, this OSD is at epoch {} with acting {:?}",
                        ctx.epoch, view.epoch, view.acting
                    ));
                }
                if let Err(e) = self.0.ensure_collection(pg) {
                    return PeerReply::RepDone(Err(e));
                }
                PeerReply::RepDone(self.replica_write(pg, ctx, txn).await)
            }
        }
    }
}

impl Service {
    /// Apply a primary's write in the primary's order, waiting a bounded
    /// time for an earlier one still on its way.
    async fn replica_write(&self, pg: PgId, ctx: RepCtx, txn: Transaction) -> Result<(), String> {
        let s = &self.0;
        let c = CollectionId::pg(pg.pool, pg.ps);
        let lane = lock(&s.rep_locks).entry(pg).or_default().clone();
        let deadline = tokio::time::Instant::now() + s.cfg.op_timeout;
        let mut txn = Some(txn);
        loop {
            let moved = lane.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            let commit = {
                let mut high = lane.high.lock().await;
                match replica_step(s.store.as_ref(), c, &mut high, &ctx) {
                    ReplicaStep::Apply => {
                        Some(s.store.queue_transaction(txn.take().unwrap_or_default()))
                    }
                    // Durable once everything queued before it is.
                    ReplicaStep::Duplicate => Some(s.store.queue_transaction(Transaction::new())),
                    ReplicaStep::Refuse { have } => {
                        return Err(format!(
                            "pg {pg}: this replica's log ends at {have:?}, the write follows {:?}",
                            ctx.prev
                        ))
                    }
                    ReplicaStep::Wait => None,
                }
            };
            if let Some(commit) = commit {
                lane.moved.notify_waiters();
                return commit.await.map_err(|e| e.to_string());
            }
            if tokio::time::timeout_at(deadline, moved).await.is_err() {
                return Err(format!(
                    "pg {pg}: write {:?} waited for {:?}, which never came",
                    ctx.version, ctx.prev
                ));
            }
        }
    }
}

#[tonic::async_trait]
impl Osd for Service {
    async fn op(&self, req: Request<Raw>) -> Result<Response<Raw>, Status> {
        self.alive()?;
        let body = req.into_inner().body;
        let reply = match decode_msg::<ClientRequest>(&body) {
            Ok(r) => self.client(r).await,
            Err(e) => ClientReply::Op(OpReply {
                result: Err(e),
                version: Version::default(),
                epoch: *self.0.epoch_tx.borrow(),
            }),
        };
        Ok(Response::new(Raw {
            body: encode_msg(&reply),
        }))
    }

    async fn peer(&self, req: Request<Raw>) -> Result<Response<Raw>, Status> {
        self.alive()?;
        let body = req.into_inner().body;
        let reply = match decode_msg::<PeerMsg>(&body) {
            Ok(m) => self.peer_msg(m).await,
            Err(e) => PeerReply::RepDone(Err(e.to_string())),
        };
        Ok(Response::new(Raw {
            body: encode_msg(&reply),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::Change;

    fn map(n: i32) -> OsdMap {
        let mut m = OsdMap::new("f", "osd").unwrap_or_else(|e| panic!("{e}"));
        let changes = (0..n)
            .map(|id| Change::OsdBoot {
                id,
                addr: format!("127.0.0.1:{}", 7000 + id),
                host: "h".into(),
                crush_weight: 0x10000,
            })
            .collect();
        m.apply(&loligo_types::Incremental { epoch: 2, changes })
            .unwrap_or_else(|e| panic!("{e}"));
        m
    }

    #[test]
    fn heartbeats_go_to_pg_peers_and_two_neighbours() {
        let m = map(100);
        let ids = |v: Vec<(i32, Epoch)>| v.into_iter().map(|p| p.0).collect::<Vec<_>>();
        // No PGs: the two next OSDs by id, wrapping around.
        assert_eq!(ids(heartbeat_peers(&m, 98, &BTreeSet::new())), vec![0, 99]);
        // PG peers too (itself and unknown ids ignored), not all 99 others.
        let sharing: BTreeSet<i32> = [5, 40, 41, 500].into();
        assert_eq!(ids(heartbeat_peers(&m, 40, &sharing)), vec![5, 41, 42]);
        // Alone: nobody.
        assert!(heartbeat_peers(&map(1), 0, &BTreeSet::new()).is_empty());
    }
}
