//! The OSD daemon shell: boots against the monitors, follows the map,
//! runs one task per PG (the only writer of that PG), performs the PG
//! state machines' effects, serves clients and peers over gRPC, heartbeats
//! the other OSDs and reports to the monitors. One file per seam:
//!
//! - `mod.rs` — settings, shared state, start and stop, map arrival
//! - `mailbox.rs` — a PG task's queue (maps are never dropped)
//! - `pg_task.rs` — the PG task: feed inputs, perform effects
//! - `service.rs` — the gRPC service: client ops, listings, peer messages
//! - `peers.rs` — messages to other OSDs (replica writes, info queries)
//! - `heartbeat.rs` — whom to ping, and failure reports
//! - `monitor.rs` — write-set records, pg_temp requests, reports, re-boot
//! - `reserve` — the recovery slots the OSD's primary PGs share (from the PG crate)
//!
//! It must never decide anything a PG decides: every client op, replica
//! write, listing and PG state change goes through the PG's task.

mod compress;
mod gone;
mod handed;
mod heartbeat;
mod http;
pub use http::serve_metrics;
mod mailbox;
mod merge;
mod monitor;
mod ops;
mod peers;
mod pg_task;
mod retire;
/// The recovery slots (pure; kept with the PG core).
pub use loligo_pg::reserve;
mod service;
mod split;

use crate::error::OsdError;
use crate::pg::{map_input, seen_since, Input, PgInfo, PgView, INFO_KEY};
use loligo_ec::stripe::Striper;
use loligo_monc::protocol::{MonRequest, RecordAsk};
use loligo_monc::MonClient;
use loligo_proto::net::{Channels, MESSAGE_BYTES_MAX};

// An op's largest reply, with its framing, fits one message.
const _: () = assert!(crate::exec::REPLY_BYTES_MAX + (1 << 20) <= MESSAGE_BYTES_MAX as u64);
use loligo_proto::v1::osd_server::OsdServer;
use loligo_store::{CollectionId, ObjectStore, Transaction};
use loligo_types::mapping::{Changed, PgMappings};
use loligo_types::{EcProfile, Epoch, Fullness, OsdMap, PgId, PgMapping, PgStat, Pool, PoolKind};
use mailbox::Mailbox;
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

pub use mailbox::PG_REQUESTS_MAX;

/// How long dialling a peer OSD may take.
const PEER_CONNECT_TIMEOUT_MS: u64 = 1_000;
/// How long one request to a peer OSD may take.
const PEER_REQUEST_TIMEOUT_MS: u64 = 30_000;
/// How long booting may wait for the monitors.
const BOOT_TIMEOUT_MS: u64 = 60_000;
/// How long `stop` waits for the gRPC server to close its connections.
const STOP_WAIT_MS: u64 = 2_000;
/// How long `start` waits for a map that shows this OSD up.
const UP_WAIT_MS: u64 = 30_000;
/// How often, at most, a write looks at how full this OSD's device is.
const FULL_CHECK_MS: u64 = 100;

/// An OSD's settings.
#[derive(Clone, Debug)]
pub struct OsdConfig {
    pub id: i32,
    /// The address peers and clients use (`host:port`).
    pub addr: String,
    pub mon_addrs: Vec<String>,
    /// CRUSH host this OSD sits under.
    pub host: String,
    /// The device or file the store's data lives on, as reported for
    /// `ceph_disk_occupation` (empty: not known).
    pub device: String,
    /// The class of that device (`hdd` or `ssd`, Ceph's device classes);
    /// empty when not known.
    pub device_class: String,
    /// Where this OSD serves its own metrics (`HOST:PORT`), as its
    /// reports name it for the monitors' service discovery (empty:
    /// nowhere).
    pub metrics_addr: String,
    /// CRUSH weight (16.16).
    pub crush_weight: u32,
    pub heartbeat_interval: Duration,
    /// Report a peer that has not answered for this long.
    pub heartbeat_grace: Duration,
    /// An OSD the maps mark down while it runs more than this many times
    /// within `max_markdown_period` stops, as a flapping one (Ceph's
    /// `osd_max_markdown_count`, 5, and `osd_max_markdown_period`,
    /// 600 s): each marking down starts new intervals in all its PGs.
    pub max_markdown_count: u32,
    pub max_markdown_period: Duration,
    /// How long a client op (or a replica write waiting for its
    /// predecessor) may wait in its PG.
    pub op_timeout: Duration,
    /// A client op in flight longer than this is a slow op (Ceph's
    /// `osd_op_complaint_time`): counted in reports for the monitors'
    /// `SLOW_OPS`. Under the time a stuck op is answered in (five sixths
    /// of `op_timeout`), or no op would ever be slow.
    pub op_complaint_time: Duration,
    pub report_interval: Duration,
    /// PG log entries each PG keeps: a copy that missed more writes than
    /// this is backfilled instead of recovered from the log.
    pub pg_log_entries: u64,
    /// Objects per backfill scan and chunk.
    pub backfill_chunk_objects: usize,
    /// Primary PGs that recover or backfill at once (pushes a client op
    /// waits for do not count).
    pub recovery_max_active: usize,
    /// Pause after each push or backfill chunk of a PG before its next.
    pub recovery_sleep: Duration,
    /// Pushes and backfill chunks from other OSDs' primaries this OSD
    /// takes at once; more wait (up to `INCOMING_WAIT_MS`, then the
    /// sender retries later), so a new or returning OSD that many PGs
    /// copy onto is not swamped (Ceph's remote reservations bound the
    /// same thing).
    pub recovery_max_incoming: usize,
    /// Leaves of each replicated PG's Merkle tree (a power of two,
    /// 1,024-65,536; 0: no trees, backfill scans every object). A copy
    /// whose persisted tree has another shape rebuilds it at start.
    pub merkle_leaves: u32,
    /// How often a clean primary compares its members' Merkle roots with
    /// its own (zero: never); a difference shows the PG `inconsistent`.
    pub scrub_interval: Duration,
    /// When scrubs and deep scrubs come due on their own.
    pub scrub_schedule: crate::pg::scrub::ScrubSchedule,
    /// Scheduled scrubs under the minimum interval's rule start only
    /// while the load average per CPU is under this (Ceph's
    /// `osd_scrub_load_threshold`).
    pub scrub_load_threshold: f64,
    /// Pause between scrub chunks (Ceph's `osd_scrub_sleep`).
    pub scrub_sleep: Duration,
    /// Pause after each piece a scrub reads while clients use this OSD
    /// (see [`SCRUB_BUSY_SLEEP`]).
    pub scrub_busy_sleep: Duration,
    /// Repair what a scheduled deep scrub found when it found at most
    /// this many objects (`None`: never; Ceph's `osd_scrub_auto_repair`).
    pub scrub_auto_repair: Option<usize>,
    /// Scrubs this OSD takes part in at once, as primary or member
    /// (Ceph's `osd_max_scrubs`; at least one).
    pub max_scrubs: usize,
    /// A read of a replicated object at least this large (bytes) runs
    /// on a thread of its own beside its PG's task, which serves other
    /// ops meanwhile (see [`READ_ASIDE_MIN`]); `u64::MAX`: none does.
    pub read_aside_min: u64,
    /// Mutual TLS as this OSD's entity (`osd.ID`) for its port and every
    /// connection it makes; `None`: plain (anyone may connect).
    pub security: Option<loligo_proto::net::Security>,
    /// How `tell osd.N injectdataerr` makes reads of a copy fail (`None`:
    /// refused; an OSD takes it only when started for such tests).
    pub read_error_injector: Option<ReadErrorInjector>,
}

/// Makes this OSD's store fail reads of one object's copy until the copy
/// is written or removed (a store wrapped for fault injection).
#[derive(Clone)]
pub struct ReadErrorInjector(pub Arc<InjectReadError>);

/// What a [`ReadErrorInjector`] calls: fail reads of this copy.
pub type InjectReadError = dyn Fn(CollectionId, &loligo_store::ObjectId) + Send + Sync;

impl std::fmt::Debug for ReadErrorInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadErrorInjector")
    }
}

/// Default `OsdConfig::scrub_load_threshold` (Ceph's).
pub const SCRUB_LOAD_THRESHOLD: f64 = 0.5;

/// Default `OsdConfig::max_scrubs` (Ceph's).
pub const MAX_SCRUBS: usize = 1;

/// Default `OsdConfig::scrub_busy_sleep`: a scrub reads a piece (about
/// 8 MiB, a few milliseconds of a disk) and then leaves the disk to
/// clients for this long while they use it, so under load it reads some
/// 25 MB/s per OSD at most, and at the disk's speed when idle. Big reads
/// delay the small synced writes behind them on one device whatever their
/// I/O class: 4 KiB writes under a deep scrub kept 0.83-0.86x of their
/// rate alone with 0.3 s, 0.77x with 0.1 s (experiments/scrub).
pub const SCRUB_BUSY_SLEEP: Duration = Duration::from_millis(300);

/// A client op or replica write within this long makes the OSD busy for
/// its scrubs (ms).
pub(crate) const CLIENT_BUSY_MS: u64 = 500;

/// Default `OsdConfig::read_aside_min`: a read of 64 KiB or more may
/// wait on the device for milliseconds, which the PG's other ops would
/// otherwise wait out behind it (4 MiB reads at 64 in flight queued
/// several deep on some PGs); a smaller object's read is mostly served
/// from memory, where the hand-over to another thread would cost more
/// than it saves.
pub const READ_ASIDE_MIN: u64 = 64 << 10;

/// Default `OsdConfig::recovery_max_active`.
pub const RECOVERY_MAX_ACTIVE: usize = 4;
/// Default `OsdConfig::recovery_max_incoming`: as many as one primary
/// OSD sends at most (its active PGs' pushes).
pub const RECOVERY_MAX_INCOMING: usize = RECOVERY_MAX_ACTIVE * crate::pg::RECOVERY_PUSHES_MAX;
/// How long an incoming push or chunk waits for its turn before it is
/// refused (its sender retries).
const INCOMING_WAIT_MS: u64 = 5_000;

impl OsdConfig {
    pub fn new(id: i32, addr: &str, mon_addrs: Vec<String>) -> OsdConfig {
        OsdConfig {
            id,
            addr: addr.to_string(),
            mon_addrs,
            host: "localhost".into(),
            device: String::new(),
            device_class: String::new(),
            metrics_addr: String::new(),
            crush_weight: 0x10000,
            heartbeat_interval: Duration::from_secs(1),
            heartbeat_grace: Duration::from_secs(6),
            max_markdown_count: MAX_MARKDOWN_COUNT,
            max_markdown_period: Duration::from_secs(MAX_MARKDOWN_PERIOD_S),
            op_timeout: Duration::from_secs(30),
            op_complaint_time: Duration::from_secs(10),
            report_interval: Duration::from_secs(2),
            pg_log_entries: crate::pg::LOG_ENTRIES_MAX,
            backfill_chunk_objects: crate::pg::backfill::CHUNK_OBJECTS,
            recovery_max_active: RECOVERY_MAX_ACTIVE,
            recovery_sleep: Duration::ZERO,
            recovery_max_incoming: RECOVERY_MAX_INCOMING,
            merkle_leaves: crate::pg::merkle::LEAVES_DEFAULT,
            scrub_interval: Duration::from_millis(crate::pg::SCRUB_INTERVAL_MS),
            scrub_schedule: crate::pg::scrub::ScrubSchedule::default(),
            scrub_load_threshold: SCRUB_LOAD_THRESHOLD,
            scrub_sleep: Duration::ZERO,
            scrub_busy_sleep: SCRUB_BUSY_SLEEP,
            scrub_auto_repair: None,
            max_scrubs: MAX_SCRUBS,
            read_aside_min: READ_ASIDE_MIN,
            security: None,
            read_error_injector: None,
        }
    }

    /// A client of the monitors, secured as this OSD.
    fn mon_client(&self) -> Result<MonClient, loligo_monc::MonError> {
        Ok(MonClient::new(self.mon_addrs.clone())?.secured(self.security.as_ref()))
    }

    /// The PGs' read lease (ms): Ceph's share of the heartbeat grace, so
    /// that a primary cut off from its members has lost its lease before
    /// the monitors mark it down.
    pub fn read_lease_ms(&self) -> u64 {
        self.heartbeat_grace
            .mul_f64(crate::pg::READ_LEASE_RATIO)
            .as_millis() as u64
    }

    fn boot_request(&self) -> MonRequest {
        MonRequest::OsdBoot {
            id: self.id,
            addr: self.addr.clone(),
            host: self.host.clone(),
            crush_weight: self.crush_weight,
        }
    }
}

/// Client I/O served, for the monitors' status.
#[derive(Default)]
struct Counters {
    read_ops: AtomicU64,
    write_ops: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    /// Microseconds client reads and writes took, summed.
    read_latency_us: AtomicU64,
    write_latency_us: AtomicU64,
    /// Sent to other copies by recovery and backfill.
    recovery_objects: AtomicU64,
    recovery_bytes: AtomicU64,
    /// Erasure-coded rebuilds led here (see `OsdReport`).
    rebuilt_shards: AtomicU64,
    rebuild_theory_bytes: AtomicU64,
    rebuild_fetched_bytes: AtomicU64,
    shard_bytes_sent: AtomicU64,
    /// Per pool: client ops served as primary, recovery sent (a read
    /// lock and atomics on the op path; the write lock only for a pool's
    /// first op).
    pools: RwLock<HashMap<u64, Arc<PoolCounters>>>,
    /// Backfills finished as primary (see `OsdReport`).
    backfills: AtomicU64,
    backfills_by_tree: AtomicU64,
    backfill_tree_nodes: AtomicU64,
    backfill_listed: AtomicU64,
    backfill_copied: AtomicU64,
    /// Calls of the key-value store's object class served.
    kv_calls: AtomicU64,
}

/// One pool's counters on this OSD (see `loligo_types::PoolIo`).
#[derive(Default)]
struct PoolCounters {
    read_ops: AtomicU64,
    write_ops: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    recovery_objects: AtomicU64,
    recovery_bytes: AtomicU64,
}

impl PoolCounters {
    fn read(&self) -> loligo_types::PoolIo {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        loligo_types::PoolIo {
            read_ops: get(&self.read_ops),
            write_ops: get(&self.write_ops),
            read_bytes: get(&self.read_bytes),
            write_bytes: get(&self.write_bytes),
            recovery_objects: get(&self.recovery_objects),
            recovery_bytes: get(&self.recovery_bytes),
        }
    }
}

impl Counters {
    /// Pool `pool`'s counters, made at its first use.
    fn pool(&self, pool: u64) -> Arc<PoolCounters> {
        let known = (self.pools.read().unwrap_or_else(|p| p.into_inner()))
            .get(&pool)
            .cloned();
        known.unwrap_or_else(|| {
            let mut w = self.pools.write().unwrap_or_else(|p| p.into_inner());
            w.entry(pool).or_default().clone()
        })
    }

    /// The counters of the pools `map` has, for a report.
    fn pools(&self, map: Option<&OsdMap>) -> std::collections::BTreeMap<u64, loligo_types::PoolIo> {
        let pools = self.pools.read().unwrap_or_else(|p| p.into_inner());
        (pools.iter())
            .filter(|(p, _)| map.is_none_or(|m| m.pools.contains_key(p)))
            .map(|(p, c)| (*p, c.read()))
            .collect()
    }
}

/// State shared by the OSD's tasks.
pub struct OsdShared {
    /// Its last report to the monitors, without the PG stats: what its
    /// own metrics endpoint serves.
    last_report: Mutex<Option<loligo_types::OsdReport>>,
    cfg: OsdConfig,
    store: Arc<dyn ObjectStore>,
    map: RwLock<Option<Arc<OsdMap>>>,
    epoch_tx: tokio::sync::watch::Sender<Epoch>,
    /// The PG tasks' mailboxes.
    pgs: Mutex<HashMap<PgId, Mailbox>>,
    /// Where each PG stands in the map, as its task last saw it (for the
    /// peer and heartbeat tasks).
    views: Mutex<HashMap<PgId, PgView>>,
    stats: Mutex<HashMap<PgId, PgStat>>,
    /// A PG's state changed: report now rather than at the next interval.
    stats_changed: tokio::sync::Notify,
    /// Connections to peer OSDs.
    peers: Channels,
    /// Direct data-path connections to peers (`loligo_proto::direct`).
    direct: loligo_proto::direct::Conns,
    counters: Counters,
    /// The client ops being served now.
    ops: Arc<ops::OpTracker>,
    start: Instant,
    /// The Unix time (ms) at `start`: PGs report scrub stamps by it.
    clock_base_unix_ms: u64,
    /// The load average per CPU is under `scrub_load_threshold` (checked
    /// at each report).
    scrub_load_ok: AtomicBool,
    /// When (`now_ms`) a client op or replica write last came.
    client_io_ms: AtomicU64,
    /// The newest map's `noscrub` and `nodeep-scrub` flags.
    no_scrub: AtomicBool,
    no_deep_scrub: AtomicBool,
    /// Set when the OSD stops: PG tasks end at their next input.
    stopped: AtomicBool,
    /// A re-boot after being wrongly marked down is under way.
    rebooting: AtomicBool,
    /// Wakes the gRPC server to stop.
    shutdown: tokio::sync::Notify,
    /// Write sets PGs want recorded, one per PG (the newest ask wins),
    /// sent to the monitors in batches.
    record_asks: Mutex<HashMap<PgId, (RecordAsk, Mailbox)>>,
    record_wake: tokio::sync::Notify,
    /// The recovery slots.
    reserver: Mutex<reserve::Reserver>,
    /// The scrub slots, shared by the PGs (`OsdConfig::max_scrubs`).
    scrub_slots: Arc<loligo_pg::scrub_slots::ScrubSlots>,
    /// Copies on disk of PGs the first map did not give this OSD were
    /// started (as strays, so they are removed once their PGs are clean).
    strays_started: AtomicBool,
    /// Every PG's placement under the newest map, carried from epoch to
    /// epoch (`None` before the first map).
    mappings: Mutex<Option<PgMappings>>,
    /// Why the OSD stopped itself (a store transaction failed), once it
    /// has; `failed` wakes `OsdHandle::failed`.
    failure: Mutex<Option<String>>,
    failed: tokio::sync::Notify,
    /// Turns for incoming pushes and backfill chunks.
    incoming: tokio::sync::Semaphore,
    /// OSDs the current map shows full.
    full: Mutex<BTreeSet<i32>>,
    /// This OSD's device was full at its last look (at most every
    /// `FULL_CHECK_MS` while writes come): its PGs refuse writes at once,
    /// before the map says so.
    self_full: AtomicBool,
    /// When it last looked (ms since start; `u64::MAX`: never).
    full_checked_ms: AtomicU64,
    /// The first epoch from which this OSD has seen every map
    /// ([`seen_since`]).
    seen_since: AtomicU64,
    /// The last map showed this OSD up (so the next that shows it down
    /// is a marking down), and when the maps marked it down while it ran.
    seen_up: AtomicBool,
    markdowns: Mutex<std::collections::VecDeque<Instant>>,
    /// Erasure-coded pools' striping, built once per profile and read
    /// coalescing (and again if the profile named changes).
    stripers: Mutex<StriperCache>,
    /// PGs waiting for their parent's copy here to split (`split`).
    splitting: Mutex<std::collections::HashSet<PgId>>,
    /// Read-lease grants handed to copies here at splits and merges
    /// (`handed`).
    handed: Mutex<HashMap<PgId, crate::pg::Grants>>,
    /// Retiring PGs here, and whether their tasks have stopped
    /// (`retire`).
    retiring: Mutex<HashMap<PgId, bool>>,
    /// Deleted pools whose copies here are being removed (`gone`).
    removing: Mutex<std::collections::HashSet<u64>>,
    /// The compression each collection here was last given (`compress`).
    compression: Mutex<HashMap<CollectionId, loligo_store::Compression>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Stripers by (profile name, read coalescing), with the profile each
/// was built from.
type StriperCache = HashMap<(String, loligo_ec::plan::Coalesce), (EcProfile, Arc<Striper>)>;

impl OsdShared {
    /// How PGs of `pool` stripe objects into shards: `Ok(None)` for a
    /// replicated pool; an error for an EC pool whose profile cannot be
    /// built (its PGs are not served rather than served as replicated).
    fn striper(&self, map: &OsdMap, pool: &Pool) -> Result<Option<Arc<Striper>>, String> {
        let PoolKind::Erasure { profile } = &pool.kind else {
            return Ok(None);
        };
        let prof = map
            .ec_profiles
            .get(profile)
            .ok_or_else(|| format!("pool '{}': no profile '{profile}'", pool.name))?;
        let opts = map.pool_opts.get(&pool.id).copied().unwrap_or_default();
        let coalesce = opts.read_coalesce.plan();
        let mut cache = lock(&self.stripers);
        let key = (profile.clone(), coalesce);
        if let Some((p, st)) = cache.get(&key) {
            if p == prof {
                return Ok(Some(st.clone()));
            }
        }
        let st = Arc::new(
            prof.striper()
                .map_err(|e| format!("pool '{}': {e}", pool.name))?
                .with_coalesce(coalesce),
        );
        cache.insert(key, (prof.clone(), st.clone()));
        Ok(Some(st))
    }

    /// PG `pg`'s place in `map`, as its task's input (`None`: the pool's
    /// profile cannot be built; logged).
    fn map_input(
        &self,
        map: &OsdMap,
        pool: &Pool,
        pg: PgId,
        pm: &PgMapping,
        now_ms: u64,
    ) -> Option<Input> {
        let since = self.seen_since.load(Ordering::Relaxed);
        match self.striper(map, pool) {
            Ok(st) => Some(map_input(map, pool, pg, pm, st, since, now_ms)),
            Err(e) => {
                tracing::error!("pg {pg} not served: {e}");
                None
            }
        }
    }

    /// Whether this OSD's own device is full, looking again if the last
    /// look is older than `FULL_CHECK_MS`; a change is reported to the
    /// monitors at once.
    fn device_full(&self) -> bool {
        let now = self.now_ms();
        let last = self.full_checked_ms.load(Ordering::Relaxed);
        if last != u64::MAX && now.saturating_sub(last) < FULL_CHECK_MS {
            return self.self_full.load(Ordering::Relaxed);
        }
        self.full_checked_ms.store(now, Ordering::Relaxed);
        let ratios = self.map().map(|m| m.full_ratios).unwrap_or_default();
        let full = self.store.statfs().is_ok_and(|x| {
            let (used, total) = x.fill();
            ratios.fullness(used, total) == Fullness::Full
        });
        if full != self.self_full.swap(full, Ordering::Relaxed) {
            if full {
                tracing::error!("this OSD's device is full: writes to its PGs are refused");
            } else {
                tracing::info!("this OSD's device is no longer full");
            }
            self.stats_changed.notify_one();
        }
        full
    }

    /// A member of `pg` that is full, if this OSD is its primary: this
    /// OSD itself by its own last look at its device, or a member of the
    /// acting set the map shows full (`None` also when this OSD does not
    /// serve `pg`: its PG task answers that).
    fn full_member(&self, pg: PgId) -> Option<i32> {
        let me = self.cfg.id;
        let self_full = self.device_full();
        let full = lock(&self.full);
        if !self_full && full.is_empty() {
            return None;
        }
        let views = lock(&self.views);
        let v = views.get(&pg).filter(|v| v.primary == me)?;
        if self_full {
            return Some(me);
        }
        v.acting.iter().copied().find(|o| full.contains(o))
    }

    fn map(&self) -> Option<Arc<OsdMap>> {
        self.map.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stop serving at once (a store transaction failed) and tell the
    /// monitors (peers would report it anyway: it answers nothing).
    fn fail(self: &Arc<Self>, why: String) {
        tracing::error!("osd.{}: {why}; stopping", self.cfg.id);
        if self.stopped.swap(true, Ordering::Relaxed) {
            return;
        }
        lock(&self.failure).get_or_insert(why);
        self.failed.notify_waiters();
        let s = self.clone();
        tokio::spawn(async move { monitor::mark_me_down(&s).await });
    }

    /// A turn for an incoming push or backfill chunk (`None`: none came
    /// free in time; the sender retries later).
    async fn incoming_turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        let wait = Duration::from_millis(INCOMING_WAIT_MS);
        match tokio::time::timeout(wait, self.incoming.acquire()).await {
            Ok(Ok(p)) => Some(p),
            _ => None,
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn epoch(&self) -> Epoch {
        *self.epoch_tx.borrow()
    }

    fn read_info(&self, pg: PgId) -> Option<PgInfo> {
        let c = CollectionId::pg(pg.pool, pg.ps);
        match self.store.record(c, INFO_KEY) {
            Ok(Some(b)) => match crate::pg::record::decode_info(&b) {
                Ok(i) => Some(i),
                Err(e) => {
                    // Answered as "no copy here": peering relies on the
                    // PG's other members.
                    tracing::error!("pg {pg}: {e}");
                    None
                }
            },
            Ok(None) if self.store.collection_exists(c).unwrap_or(false) => Some(PgInfo::default()),
            _ => None,
        }
    }

    fn ensure_collection(&self, pg: PgId) -> Result<bool, OsdError> {
        // A new copy is of the PG as the current map counts them.
        let pg_num = self
            .map()
            .and_then(|m| m.pools.get(&pg.pool).map(|p| p.pg_num));
        self.make_copy(pg, pg_num)
    }

    /// Make PG `pg`'s collection here if it has none, with the pg_num
    /// record it is made for (none: no record) and its pool's compression;
    /// whether this call made it (`false`: it was there).
    fn make_copy(&self, pg: PgId, pg_num: Option<u32>) -> Result<bool, OsdError> {
        let c = CollectionId::pg(pg.pool, pg.ps);
        if self.store.collection_exists(c)? {
            return Ok(false);
        }
        let mut t = Transaction::new();
        t.create_collection(c);
        let algo = self.map().and_then(|m| compress::wanted(&m, pg.pool));
        if let Some(algo) = algo.filter(|a| *a != loligo_store::Compression::None) {
            t.set_compression(c, algo);
        }
        if let Some(n) = pg_num {
            let key = crate::pg::split::PG_NUM_KEY;
            t.set_record(c, key, crate::pg::record::encode_pg_num(n));
        }
        match self.store.apply(t) {
            Ok(()) => Ok(true),
            Err(loligo_store::StoreError::CollectionExists(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The mailbox of PG `pg`'s task; with `spawn`, the task is started
    /// (under the current map) if this OSD has none.
    fn pg(self: &Arc<Self>, pg: PgId, spawn: bool) -> Option<Mailbox> {
        if let Some(m) = lock(&self.pgs).get(&pg) {
            return Some(m.clone());
        }
        // (Never a PG the map does not have yet, nor one whose parent's
        // copy here has still to split: its copy would start empty.)
        let known = self.map().is_some_and(|m| m.pg_exists(pg));
        if !spawn || !known || split::pending(self, pg) || retire::retiring(self, pg) {
            return None;
        }
        let mb = pg_task::spawn(self, pg)?;
        // Its first input: where the PG stands in the current map.
        if let Some(map) = self.map() {
            // The carried mapping when it is of this map; else CRUSH.
            let carried = lock(&self.mappings)
                .as_ref()
                .filter(|c| c.epoch() == map.epoch)
                .and_then(|c| c.mapping(&map, pg));
            let pm = match carried {
                Some(pm) => Ok(pm),
                None => map.placer().and_then(|mut p| p.map_pg(pg)),
            };
            if let (Some(pool), Ok(pm)) = (map.pools.get(&pg.pool), pm) {
                if let Some(input) = self.map_input(&map, pool, pg, &pm, self.now_ms()) {
                    mb.control(input);
                }
            }
        }
        Some(mb)
    }
}

/// Serve the OSD's port until `shutdown`: each connection is routed by
/// its first bytes to the direct data path (`loligo_proto::direct`) or to
/// gRPC. On shutdown the listener closes, gRPC stops, and direct
/// connections are cut.
async fn serve(
    shared: Arc<OsdShared>,
    listener: tokio::net::TcpListener,
    service: Arc<service::Service>,
    svc: OsdServer<service::Service>,
) {
    use loligo_proto::direct;
    use loligo_proto::net::{Admission, AdmissionLimits, Admitted};
    let admission = Admission::new(AdmissionLimits::default());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // What all connections together may hold (client ops and OSD
    // messages each their own budget), direct and gRPC alike.
    let budget = direct::ServerBudget::default();
    let svc = loligo_proto::grpc_budget::Budgeted::new(svc, budget.clone());
    let (grpc_tx, grpc_rx) = tokio::sync::mpsc::channel::<std::io::Result<Admitted>>(64);
    let grpc = tokio::spawn(async move {
        let incoming = tokio_stream::wrappers::ReceiverStream::new(grpc_rx);
        if let Err(e) = loligo_proto::net::server()
            .max_concurrent_streams(Some(loligo_proto::grpc_budget::STREAMS_PER_CONNECTION))
            .add_service(svc)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stop_rx.await;
            })
            .await
        {
            tracing::error!("OSD gRPC server stopped: {e}");
        }
    });
    let mut conns = tokio::task::JoinSet::new();
    let limits = direct::Limits {
        server: Some(budget),
        ..direct::Limits::default()
    };
    loop {
        tokio::select! {
            _ = shared.shutdown.notified() => break,
            a = listener.accept() => match a {
                Ok((s, addr)) => {
                    // Its place first, here: past the limits it is closed
                    // at once, whatever the runtime's queue.
                    let Some(ticket) = admission.arrive(addr.ip()) else {
                        continue;
                    };
                    let (svc, tx) = (service.clone(), grpc_tx.clone());
                    let sec = shared.cfg.security.clone();
                    let (limits, adm) = (limits.clone(), admission.clone());
                    conns.spawn(async move {
                        // The handshake (with TLS), then the protocol; the
                        // place goes back when it closes.
                        match loligo_proto::net::admit_placed(&adm, ticket, s, sec.as_ref()).await {
                            Some((a, ticket)) if a.direct => {
                                let peer = a.io.peer();
                                direct::serve_with(svc, a.io, peer, limits).await;
                                drop(ticket);
                            }
                            Some((a, ticket)) => {
                                let _ = tx.send(Ok(Admitted::new(a.io, Some(ticket)))).await;
                            }
                            None => {}
                        }
                    });
                }
                Err(e) => {
                    // Out of descriptors and the like: pause, go on.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(());
    conns.abort_all();
    let _ = grpc.await;
}

/// A running OSD.
pub struct OsdHandle {
    pub shared: Arc<OsdShared>,
    pub addr: SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The gRPC server, stopped through `OsdShared::shutdown`.
    server: tokio::task::JoinHandle<()>,
}

impl OsdHandle {
    /// Why the OSD stopped itself, if it has.
    pub fn failed_now(&self) -> Option<String> {
        lock(&self.shared.failure).clone()
    }

    /// Resolves once the OSD has stopped itself, with why: a store
    /// transaction failed (I/O error, no space), so this copy may lack a
    /// write its PG's state already counts. Like a crash, and like Ceph's
    /// OSDs, it then answers nothing more; the caller should `stop` it
    /// (marking it down) and exit. Restarted, it reopens the store from
    /// what was committed and peers again.
    pub async fn failed(&self) -> String {
        loop {
            let wait = self.shared.failed.notified();
            if let Some(why) = lock(&self.shared.failure).clone() {
                return why;
            }
            wait.await;
        }
    }

    /// Stop serving (abruptly: like a crash, the store keeps what was
    /// committed). `mark_down` first tells the monitors, as a clean stop.
    pub async fn stop(self, mark_down: bool) {
        if mark_down {
            monitor::mark_me_down(&self.shared).await;
        }
        self.shared.stopped.store(true, Ordering::Relaxed);
        for t in &self.tasks {
            t.abort();
        }
        let pgs: Vec<_> = lock(&self.shared.pgs).drain().collect();
        drop(pgs);
        // The server closes its connections; requests still running end
        // at once (a stopped OSD answers nothing), or are cut after a
        // bound.
        self.shared.shutdown.notify_one();
        let mut server = self.server;
        if tokio::time::timeout(Duration::from_millis(STOP_WAIT_MS), &mut server)
            .await
            .is_err()
        {
            server.abort();
        }
    }

    /// The newest map epoch this OSD has.
    pub fn epoch(&self) -> Epoch {
        self.shared.epoch()
    }
}

/// The store's device-wait hook for an OSD (`loligo_store::DeviceWait`):
/// a PG task reads objects through the store on one of the runtime's
/// worker threads, and a large read from the device (megabytes, several
/// milliseconds on a slow disk) would hold up every task queued on that
/// worker (other PGs' ops, replies, heartbeats). On tokio's multi-thread
/// runtime the worker's other tasks move to another thread for the read
/// (`block_in_place`); anywhere else the read runs as it is.
pub fn device_wait(read: &mut dyn FnMut()) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(read)
        }
        _ => read(),
    }
}

/// Ask the monitors to mark this OSD up, waiting while they hold boots
/// back (`noup`: the OSD stays down, as Ceph's do, until it is cleared).
async fn boot(s: &OsdShared, mc: &mut MonClient) -> Result<(), OsdError> {
    let mut told = false;
    loop {
        match mc.call(s.cfg.boot_request()).await {
            Err(loligo_monc::protocol::MonError::Flagged(flag)) => {
                if !told {
                    tracing::warn!(
                        "osd.{} waits to boot: the monitors' {flag} flag is set",
                        s.cfg.id
                    );
                    told = true;
                }
                tokio::time::sleep(Duration::from_millis(BOOT_HELD_RETRY_MS)).await;
            }
            r => return r.map(|_| ()).map_err(OsdError::from),
        }
    }
}

/// How often a boot held back by a flag is asked again.
const BOOT_HELD_RETRY_MS: u64 = 1_000;

/// An OSD whose store holds PGs may have run before and granted read
/// leases it no longer remembers (its PGs report a grant to any primary
/// for one lease after the start, see `loligo_pg::pg::lease`): it boots
/// only once those have run out, so that no new primary it answers waits
/// for them with client ops blocked (Ceph's `wait`). A fresh store
/// boots at once.
async fn wait_out_forgotten_leases(s: &OsdShared) {
    let held = s.store.collections().map_or(true, |c| {
        c.iter()
            .any(|c| c.shard == CollectionId::NO_SHARD && c != &CollectionId::meta())
    });
    if !held {
        return;
    }
    let until = Duration::from_millis(crate::pg::stretch(s.cfg.read_lease_ms()));
    let left = until.saturating_sub(s.start.elapsed());
    if !left.is_zero() {
        tracing::info!(
            "osd.{}: boots in {} ms, once read leases it may have granted before a restart ran out",
            s.cfg.id,
            left.as_millis()
        );
        tokio::time::sleep(left).await;
    }
}

/// Start an OSD on `listener` with `store`: serve, boot, follow the map.
pub async fn start(
    cfg: OsdConfig,
    store: Arc<dyn ObjectStore>,
    listener: tokio::net::TcpListener,
) -> Result<OsdHandle, OsdError> {
    let addr = listener
        .local_addr()
        .map_err(|e| OsdError::Listener(e.to_string()))?;
    let (epoch_tx, _) = tokio::sync::watch::channel(0);
    let reserver = Mutex::new(reserve::Reserver::new(cfg.recovery_max_active));
    let scrub_slots = loligo_pg::scrub_slots::ScrubSlots::new(cfg.max_scrubs);
    let incoming = tokio::sync::Semaphore::new(cfg.recovery_max_incoming.max(1));
    let tracker = Arc::new(ops::OpTracker::new(cfg.op_complaint_time));
    let security = cfg.security.clone();
    let shared = Arc::new(OsdShared {
        cfg,
        store,
        map: RwLock::new(None),
        epoch_tx,
        pgs: Mutex::new(HashMap::new()),
        views: Mutex::new(HashMap::new()),
        last_report: Mutex::new(None),
        stats: Mutex::new(HashMap::new()),
        stats_changed: tokio::sync::Notify::new(),
        direct: loligo_proto::direct::Conns::new(Duration::from_millis(PEER_CONNECT_TIMEOUT_MS))
            .secured(security.as_ref()),
        peers: Channels::new(
            Duration::from_millis(PEER_CONNECT_TIMEOUT_MS),
            Some(Duration::from_millis(PEER_REQUEST_TIMEOUT_MS)),
        )
        .secured(security.as_ref()),
        counters: Counters::default(),
        ops: tracker,
        start: Instant::now(),
        clock_base_unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        scrub_load_ok: AtomicBool::new(true),
        client_io_ms: AtomicU64::new(0),
        no_scrub: AtomicBool::new(false),
        no_deep_scrub: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
        rebooting: AtomicBool::new(false),
        shutdown: tokio::sync::Notify::new(),
        record_asks: Mutex::new(HashMap::new()),
        record_wake: tokio::sync::Notify::new(),
        reserver,
        scrub_slots,
        strays_started: AtomicBool::new(false),
        mappings: Mutex::new(None),
        failure: Mutex::new(None),
        failed: tokio::sync::Notify::new(),
        incoming,
        full: Mutex::new(BTreeSet::new()),
        self_full: AtomicBool::new(false),
        full_checked_ms: AtomicU64::new(u64::MAX),
        seen_since: AtomicU64::new(0),
        seen_up: AtomicBool::new(false),
        markdowns: Mutex::new(std::collections::VecDeque::new()),
        stripers: Mutex::new(HashMap::new()),
        splitting: Mutex::new(Default::default()),
        handed: Mutex::new(Default::default()),
        retiring: Mutex::new(Default::default()),
        removing: Mutex::new(Default::default()),
        compression: Mutex::new(HashMap::new()),
    });
    // A scrub slot given back wakes the PGs that waited for one (a weak
    // reference: the slots live in what they would point back to).
    let weak = Arc::downgrade(&shared);
    shared.scrub_slots.set_wake(Box::new(move |pg| {
        let Some(s) = weak.upgrade() else {
            return;
        };
        let mb = lock(&s.pgs).get(&pg).cloned();
        if let Some(mb) = mb {
            mb.control(Input::ScrubSlotFree { now_ms: s.now_ms() });
        }
    }));
    let mut tasks = Vec::new();
    let service = Arc::new(service::Service(shared.clone()));
    let svc = OsdServer::from_arc(service.clone())
        .max_decoding_message_size(MESSAGE_BYTES_MAX)
        .max_encoding_message_size(MESSAGE_BYTES_MAX);
    let server = tokio::spawn(serve(shared.clone(), listener, service, svc));
    let mut mc = shared.cfg.mon_client()?;
    mc.deadline = Duration::from_millis(BOOT_TIMEOUT_MS);
    wait_out_forgotten_leases(&shared).await;
    boot(&shared, &mut mc).await?;
    let s = shared.clone();
    let mut wc = mc.clone();
    tasks.push(tokio::spawn(async move {
        wc.watch(None, |m| {
            on_map(&s, m);
            true
        })
        .await;
    }));
    tasks.push(tokio::spawn(heartbeat::run(shared.clone(), mc.clone())));
    tasks.push(tokio::spawn(monitor::record_write_sets(
        shared.clone(),
        mc.clone(),
    )));
    tasks.push(tokio::spawn(monitor::reports(shared.clone(), mc)));
    tasks.push(tokio::spawn(compress::run(shared.clone())));
    // Wait until the map shows this OSD up (so callers can use it).
    let mut rx = shared.epoch_tx.subscribe();
    let up = tokio::time::timeout(Duration::from_millis(UP_WAIT_MS), async {
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
        return Err(OsdError::NeverUp);
    }
    Ok(OsdHandle {
        shared,
        addr,
        tasks,
        server,
    })
}

/// The PGs OSD `me` tells of a new map: those it holds (`held`: its
/// running PGs and the copies on its disk), and those the map may have
/// moved: what `changed` names, or, when CRUSH's inputs changed, every
/// PG whose CRUSH step, pg_temp or upmap names this OSD. The caller
/// starts the ones that are now its own and skips the rest.
pub fn pgs_to_tell(
    me: i32,
    map: &OsdMap,
    cache: &PgMappings,
    changed: &Changed,
    held: impl IntoIterator<Item = PgId>,
) -> BTreeSet<PgId> {
    let mut candidates: BTreeSet<PgId> = held.into_iter().collect();
    match changed {
        Changed::Pgs(v) => candidates.extend(v.iter().copied()),
        Changed::All => {
            candidates.extend(cache.pgs_of(me).iter().copied());
            candidates.extend(
                map.pg_temp
                    .iter()
                    .filter(|(_, t)| t.contains(&me))
                    .map(|(pg, _)| *pg),
            );
            candidates.extend(
                map.pg_upmap_items
                    .iter()
                    .filter(|(_, items)| items.iter().any(|&(_, to)| to == me))
                    .map(|(pg, _)| *pg),
            );
        }
    }
    candidates
}

/// Default `OsdConfig::max_markdown_count` and `max_markdown_period`
/// (seconds), Ceph's.
pub const MAX_MARKDOWN_COUNT: u32 = 5;
pub const MAX_MARKDOWN_PERIOD_S: u64 = 600;

/// The maps marked this running OSD down once more: whether that makes it
/// a flapping one, which then stops (Ceph's markdown counting) rather than
/// boot again and start new intervals in all its PGs once more.
fn flapping(s: &Arc<OsdShared>) -> bool {
    let now = Instant::now();
    let period = s.cfg.max_markdown_period;
    let n = {
        let mut d = lock(&s.markdowns);
        d.push_back(now);
        while d.front().is_some_and(|&t| now.duration_since(t) > period) {
            d.pop_front();
        }
        d.len()
    };
    if n <= s.cfg.max_markdown_count as usize {
        return false;
    }
    s.fail(format!(
        "marked down {n} times in {} s while running (more than {}, Ceph's osd_max_markdown_count): a flapping OSD; check its network before starting it again",
        period.as_secs(),
        s.cfg.max_markdown_count
    ));
    true
}

/// The PGs this OSD's store holds a copy of (its collections but its
/// own metadata's).
fn pg_copies(
    store: &dyn ObjectStore,
) -> Result<std::collections::HashSet<PgId>, loligo_store::StoreError> {
    Ok((store.collections()?.into_iter())
        .filter(|c| c.shard == CollectionId::NO_SHARD && c != &CollectionId::meta())
        .map(|c| PgId {
            pool: c.pool,
            ps: c.pg,
        })
        .collect())
}

/// A new map: start the PGs this OSD now serves and tell every PG (no map
/// is ever dropped: a PG's control queue has no bound). A map that shows
/// this running OSD down makes it boot again.
fn on_map(s: &Arc<OsdShared>, m: &OsdMap) {
    let me = s.cfg.id;
    if m.osds.get(&me).is_some_and(|o| o.up) {
        s.seen_up.store(true, Ordering::Relaxed);
    }
    if m.osds.get(&me).is_some_and(|o| !o.up) {
        if s.seen_up.swap(false, Ordering::Relaxed) && flapping(s) {
            return;
        }
        monitor::reboot_if_marked_down(s, m.epoch);
    }
    // Whether maps were skipped, settled before the map is published: a
    // PG started from the new map must see the new floor with it.
    let carried = lock(&s.mappings).as_ref().map(PgMappings::epoch);
    let since = seen_since(carried, s.seen_since.load(Ordering::Relaxed), m.epoch);
    s.seen_since.store(since, Ordering::Relaxed);
    let map = Arc::new(m.clone());
    // Once: every PG copy this OSD holds gets its task, mapped here or not.
    let on_disk: std::collections::HashSet<PgId> = if s.strays_started.swap(true, Ordering::Relaxed)
    {
        Default::default()
    } else {
        pg_copies(&*s.store).unwrap_or_default()
    };
    // Splits: the children of copies here wait for them, from before
    // anything can start one under this map.
    split::mark_pending(s, s.map().as_deref(), &map);
    // Merges: the sources stop, and their targets here are told.
    let targets = merge::mark_sources(s, s.map().as_deref(), &map);
    // Deleted pools: their copies here go.
    gone::mark(s, s.map().as_deref(), &map);
    {
        let mut held = s.map.write().unwrap_or_else(|p| p.into_inner());
        // The watcher passes over older maps: epochs never go back.
        debug_assert!(
            held.as_ref().is_none_or(|h| h.epoch <= map.epoch),
            "map epoch {} after {:?}",
            map.epoch,
            held.as_ref().map(|h| h.epoch)
        );
        *held = Some(map.clone());
    }
    use loligo_types::osdmap::OsdFlag;
    (s.no_scrub).store(map.flags.contains(&OsdFlag::NoScrub), Ordering::Relaxed);
    (s.no_deep_scrub).store(map.flags.contains(&OsdFlag::NoDeepScrub), Ordering::Relaxed);
    *lock(&s.full) = map
        .osds
        .values()
        .filter(|o| o.fullness == Fullness::Full)
        .map(|o| o.id)
        .collect();
    let now_ms = s.now_ms();
    let mut mappings = lock(&s.mappings);
    // The PGs whose mapping may have changed: what the carried mappings
    // say (an OSD marked down moves only the PGs that name it), or, when
    // CRUSH's inputs changed or maps were skipped, every PG that could be
    // this OSD's.
    let changed = match mappings.as_mut() {
        Some(c) if c.epoch() < map.epoch && since < map.epoch => c.advance(&map),
        _ => PgMappings::new(&map).map(|c| {
            *mappings = Some(c);
            Changed::All
        }),
    };
    let (Ok(changed), Some(cache)) = (changed, mappings.as_ref()) else {
        tracing::error!("map epoch {} does not compile", map.epoch);
        *mappings = None;
        return;
    };
    let held = lock(&s.pgs)
        .keys()
        .chain(&on_disk)
        .chain(&targets)
        .copied()
        .collect::<Vec<_>>();
    for pg in pgs_to_tell(me, &map, cache, &changed, held) {
        let (Some(pool), Some(pm)) = (map.pools.get(&pg.pool), cache.mapping(&map, pg)) else {
            continue;
        };
        if split::pending(s, pg) {
            // (Its parent's task starts it once the split is durable.)
            continue;
        }
        let mine = pm.acting.contains(&me)
            || pm.up.contains(&me)
            || on_disk.contains(&pg)
            || targets.contains(&pg);
        let existing = lock(&s.pgs).get(&pg).cloned();
        let mb = match (existing, mine) {
            (Some(mb), _) => mb,
            (None, true) => match pg_task::spawn(s, pg) {
                Some(mb) => mb,
                None => continue,
            },
            (None, false) => continue,
        };
        if let Some(input) = s.map_input(&map, pool, pg, &pm, now_ms) {
            mb.control(input);
        }
    }
    drop(mappings);
    s.epoch_tx.send_replace(map.epoch);
}

#[cfg(test)]
mod tests {
    use super::device_wait;

    fn read_with_hook() -> bool {
        let mut ran = false;
        device_wait(&mut || ran = true);
        ran
    }

    /// The hook runs the read wherever the store is called from: a worker
    /// of a multi-thread runtime (other tasks move away first), a
    /// current-thread runtime (where `block_in_place` would panic), a
    /// blocking thread, and outside any runtime.
    #[test]
    fn device_wait_runs_the_read_on_every_kind_of_thread() {
        assert!(read_with_hook());
        let mt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        assert!(mt.block_on(async { tokio::spawn(async { read_with_hook() }).await.unwrap() }));
        assert!(mt.block_on(async { tokio::task::spawn_blocking(read_with_hook).await.unwrap() }));
        // While one worker task waits in the hook, another task still runs.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let waiting = mt.spawn(async move {
            let mut got = false;
            device_wait(&mut || got = rx.recv_timeout(std::time::Duration::from_secs(10)).is_ok());
            got
        });
        let other = mt.spawn(async move { tx.send(()).is_ok() });
        assert!(mt.block_on(other).unwrap());
        assert!(mt.block_on(waiting).unwrap());
        let ct = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(ct.block_on(async { read_with_hook() }));
    }
}
