//! What clients, OSDs and the CLI say to a monitor, and what it answers.
//! Requests and replies travel as JSON inside the gRPC `Call`; maps travel
//! in the compact binary encoding of `loligo-types`.
//!
//! This module must never hold logic: it is the wire vocabulary only.

use loligo_types::caps::MonCap;
pub use loligo_types::RecordAsk;
use loligo_types::{EcPlugin, Epoch, MapError, OsdReport, PgState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most write sets one `RecordWriteSets` request may carry (an OSD batches
/// the PGs that changed interval together; the monitors refuse more).
pub const WRITE_SETS_PER_REQUEST_MAX: usize = 4096;

/// Everything a monitor serves through `Call`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonRequest {
    /// The current map (encoded).
    GetMap,
    /// An OSD starts and asks to be marked up at `addr`.
    OsdBoot {
        id: i32,
        addr: String,
        host: String,
        /// CRUSH weight, 16.16 (usually the device size in TiB).
        crush_weight: u32,
    },
    /// `reporter` has not heard from `target` for `failed_for_ms`.
    OsdFailure {
        reporter: i32,
        target: i32,
        failed_for_ms: u64,
    },
    /// An OSD that is stopping cleanly.
    OsdMarkMeDown { id: i32 },
    /// A primary whose log is behind asks for `osds` as the PG's acting
    /// set (empty: clear the override).
    PgTemp {
        pg: loligo_types::PgId,
        osds: Vec<i32>,
    },
    /// An erasure-coded primary whose copy needs a backfill asks for
    /// `osd` (a complete member) as the PG's primary meanwhile (`None`:
    /// clear it).
    PrimaryTemp {
        pg: loligo_types::PgId,
        osd: Option<i32>,
    },
    /// Primaries about to accept writes record each PG's write set. The
    /// reply's value lists the PGs whose record now holds; the rest are
    /// left out (see [`RecordAsk`]).
    RecordWriteSets { items: Vec<RecordAsk> },
    /// PG stats and counters (also the OSD's liveness beacon).
    OsdReport(Box<OsdReport>),
    /// An administrator's command.
    Admin(Admin),
    /// Monitor `id` of the group says it serves with the key it connects
    /// with: the leader records that key's serial for `mon.ID` if none is
    /// recorded yet (a monitor's first start), so that diallers of that
    /// monitor and its Raft peers take no other key of it.
    MonJoin { id: u64 },
}

/// Administrative commands (`loligo pool|osd|crush|ec-profile|status`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Admin {
    Status,
    /// Every PG (of `pool`, if named) with its state and sets, from its
    /// primary's last report (`loligo pg ls`, like `ceph pg ls`).
    PgLs {
        pool: Option<String>,
    },
    PoolCreate {
        name: String,
        pg_num: u32,
        size: u32,
        min_size: Option<u32>,
        /// Erasure-coded with this profile (size then comes from it).
        erasure_profile: Option<String>,
    },
    /// Deleting needs the name twice, as Ceph asks.
    PoolDelete {
        name: String,
        confirm: String,
    },
    PoolLs,
    PoolGet {
        name: String,
    },
    PoolSet {
        name: String,
        key: String,
        value: String,
    },
    OsdTree,
    OsdDump,
    /// Where an object lives: its PG, CRUSH's set and the acting set
    /// (Ceph's `osd map POOL OBJECT`).
    OsdMapObject {
        pool: String,
        name: String,
    },
    OsdDown {
        ids: Vec<i32>,
    },
    OsdOut {
        ids: Vec<i32>,
    },
    OsdIn {
        ids: Vec<i32>,
    },
    OsdReweight {
        id: i32,
        weight: f64,
    },
    OsdRm {
        id: i32,
    },
    /// Declare a down OSD's data lost (needs `confirm`).
    OsdLost {
        id: i32,
        confirm: bool,
    },
    /// Give up a PG's unfound objects (`pg mark-unfound-lost PG delete`;
    /// needs `confirm`).
    PgMarkUnfoundLost {
        pg: String,
        confirm: bool,
    },
    CrushAdd {
        id: i32,
        host: String,
        weight: f64,
    },
    CrushMove {
        name: String,
        parent: String,
    },
    CrushRm {
        name: String,
    },
    EcProfileSet {
        name: String,
        plugin: EcPlugin,
        k: u32,
        m: u32,
        s: u32,
        l: u32,
        optimal: bool,
        alignment: u32,
        /// Chunk bytes per full stripe; 0 = the code's default.
        stripe_unit: u32,
    },
    EcProfileGet {
        name: String,
    },
    EcProfileLs,
    EcProfileRm {
        name: String,
    },
    /// A new user with these caps (`(service, text)` pairs): the reply
    /// carries its keyring, made by the leader and kept nowhere else.
    AuthAdd {
        entity: String,
        caps: Vec<(String, String)>,
    },
    /// A user's caps and certificate serial (never a key).
    AuthGet {
        entity: String,
    },
    /// Every user.
    AuthLs,
    /// Forget a user: its requests are refused from the next epoch.
    AuthRm {
        entity: String,
    },
    /// Replace a user's caps.
    AuthCaps {
        entity: String,
        caps: Vec<(String, String)>,
    },
    /// A new key for a user: the reply carries the keyring, and the old
    /// certificate is refused from the next epoch.
    AuthRotate {
        entity: String,
    },
    /// Set (`on`) or clear a cluster-wide flag by Ceph's name (`osd set
    /// noscrub`).
    OsdFlag {
        flag: String,
        on: bool,
    },
    /// Set one of the full ratios (`osd set-full-ratio 0.97`; `which` is
    /// `nearfull`, `backfillfull` or `full`).
    OsdSetRatio {
        which: String,
        ratio: f64,
    },
    /// Whether these OSDs may stop now without PGs becoming unavailable
    /// (Ceph's `osd ok-to-stop`), from the PGs' reports.
    OsdOkToStop {
        ids: Vec<i32>,
    },
    /// Whether these OSDs hold nothing the cluster still needs, so their
    /// devices may be destroyed without reducing durability (Ceph's
    /// `osd safe-to-destroy`), from the PGs' reports and the map.
    OsdSafeToDestroy {
        ids: Vec<i32>,
    },
    /// Mark a down OSD destroyed: out, its key revoked, its data given up;
    /// its id and CRUSH place kept for a replacement (`osd new`). Needs
    /// `confirm`; refused unless safe to destroy, or `force`.
    OsdDestroy {
        id: i32,
        confirm: bool,
        force: bool,
    },
    /// As `OsdDestroy`, then remove it from the map and CRUSH for good
    /// (Ceph's `osd purge`).
    OsdPurge {
        id: i32,
        confirm: bool,
        force: bool,
    },
    /// Make way for a new OSD: a destroyed id taken again, or (`None`)
    /// the lowest unused id; the reply carries its new keyring (none in a
    /// cluster without keys, or when `serial` names one made offline).
    OsdNew {
        id: Option<i32>,
        /// The serial of a keyring made offline (`auth keyring osd.N`):
        /// recorded as the OSD's key instead of making one.
        #[serde(default)]
        serial: Option<String>,
    },
    /// Add monitor `id` serving at `addr` to the group (Ceph's `mon
    /// add`): it must already run (`mon run --join`) and catch up as a
    /// learner before it becomes a voter.
    MonAdd {
        id: u64,
        addr: String,
    },
    /// Remove monitor `id` from the group (Ceph's `mon rm`), the leader
    /// itself included; its recorded key is forgotten.
    MonRm {
        id: u64,
    },
    /// The group's members, leader, term and which members the leader
    /// hears (Ceph's `quorum_status`; `mon stat` prints it in a line).
    QuorumStatus,
    /// Place an OSD at a CRUSH location: `TYPE=NAME` pairs such as
    /// `host=h1` (Ceph's `osd crush set-location`).
    CrushSetLocation {
        id: i32,
        location: Vec<String>,
    },
    /// Set an OSD's CRUSH weight (Ceph's `osd crush reweight`).
    CrushReweight {
        id: i32,
        weight: f64,
    },
    /// Install a whole CRUSH map, in Loligo's JSON form (Ceph's `osd
    /// setcrushmap`): it must compile, hold every OSD of the map and
    /// every rule a pool uses.
    CrushSet {
        map: String,
    },
    /// The CRUSH map in Loligo's JSON form (Ceph's `osd getcrushmap`).
    CrushGet,
    /// Turn the upmap balancer on or off (`Some`), or ask how it stands
    /// (`None`: Ceph's `balancer status`).
    Balancer {
        on: Option<bool>,
    },
    /// The URLs the leader serves its HTTP services on, as a JSON object
    /// (`{"prometheus": URL}`; Ceph's `mgr services`).
    MgrServices,
    /// The cluster's and each pool's space ([`DfReport`]; Ceph's `df`).
    Df,
    /// Each pool's (or `pool`'s) client and recovery I/O per second and
    /// its degraded and misplaced copies, in the shape of Ceph's `osd
    /// pool stats -f json`.
    PoolStats {
        #[serde(default)]
        pool: Option<String>,
    },
    /// The cluster log's last `n` entries at `level` or worse, after
    /// sequence number `since` when given, oldest first (a JSON array of
    /// [`LogEntry`]; Ceph's `log last`).
    LogLast {
        n: u32,
        #[serde(default)]
        level: Option<LogLevel>,
        #[serde(default)]
        since: Option<u64>,
    },
    /// Make a dashboard access token for `user`, a client with mon
    /// `allow r`, lasting `ttl_secs` (`{"user", "token", "expires",
    /// "url"}`; the token is shown once and never kept).
    DashboardCreateToken {
        user: String,
        ttl_secs: u64,
    },
    /// The dashboard tokens in force: user, when made and when they
    /// expire, and an id (never the token).
    DashboardLsTokens,
    /// Revoke the dashboard tokens of `user`, or every one.
    DashboardRevokeTokens {
        user: Option<String>,
    },
    /// A new S3 user with one key pair, made by the leader unless both
    /// halves are given (`s3 user create`); the reply is the user with
    /// its keys, as `radosgw-admin user create` prints it.
    S3UserCreate {
        uid: String,
        #[serde(default)]
        display_name: Option<String>,
        #[serde(default)]
        access_key: Option<String>,
        #[serde(default)]
        secret_key: Option<String>,
    },
    /// Remove an S3 user and its keys (`s3 user rm`).
    S3UserRm {
        uid: String,
    },
    /// An S3 user with its keys, secrets included (`s3 user info`).
    S3UserInfo {
        uid: String,
    },
    /// Every S3 user id (`s3 user ls`; no keys).
    S3UserLs,
    /// Another key pair for an S3 user (`s3 key create`), made by the
    /// leader unless both halves are given; the reply is the user.
    S3KeyCreate {
        uid: String,
        #[serde(default)]
        access_key: Option<String>,
        #[serde(default)]
        secret_key: Option<String>,
    },
    /// Withdraw one S3 key (`s3 key rm`).
    S3KeyRm {
        access_key: String,
    },
    /// The user and secret key of an access key (`{"user", "secret_key"}`):
    /// what a gateway checks a request's signature with.
    S3Secret {
        access_key: String,
    },
    /// A user's display name (`{"user", "display_name"}`; no keys): what
    /// a gateway shows beside a user id in an ACL or a listing.
    S3UserName {
        uid: String,
    },
}

impl Admin {
    /// The monitor rights a client needs for this command: `allow r`
    /// reads, `allow rw` changes the map, `allow *` manages users.
    pub fn needs(&self) -> MonCap {
        use Admin::*;
        match self {
            Status
            | PgLs { .. }
            | PoolLs
            | PoolGet { .. }
            | OsdTree
            | OsdDump
            | OsdMapObject { .. }
            | OsdOkToStop { .. }
            | OsdSafeToDestroy { .. }
            | QuorumStatus
            | MgrServices
            | Df
            | PoolStats { .. }
            | LogLast { .. }
            | Balancer { on: None }
            | CrushGet
            | EcProfileGet { .. }
            | EcProfileLs
            | S3UserLs => MonCap::Read,
            AuthAdd { .. }
            | AuthGet { .. }
            | AuthLs
            | AuthRm { .. }
            | AuthCaps { .. }
            | AuthRotate { .. }
            | OsdNew { .. }
            | DashboardCreateToken { .. }
            | DashboardLsTokens
            | DashboardRevokeTokens { .. }
            | S3UserCreate { .. }
            | S3UserRm { .. }
            | S3UserInfo { .. }
            | S3KeyCreate { .. }
            | S3KeyRm { .. }
            | MonAdd { .. }
            | MonRm { .. } => MonCap::All,
            PoolCreate { .. }
            | PoolDelete { .. }
            | PoolSet { .. }
            | OsdDown { .. }
            | OsdOut { .. }
            | OsdIn { .. }
            | OsdReweight { .. }
            | OsdRm { .. }
            | OsdDestroy { .. }
            | OsdPurge { .. }
            | OsdLost { .. }
            | OsdFlag { .. }
            | OsdSetRatio { .. }
            | PgMarkUnfoundLost { .. }
            | CrushAdd { .. }
            | CrushMove { .. }
            | CrushSetLocation { .. }
            | CrushReweight { .. }
            | CrushSet { .. }
            | Balancer { on: Some(_) }
            | CrushRm { .. }
            | EcProfileSet { .. }
            | EcProfileRm { .. }
            // A gateway's cap (mon 'allow rw', as RGW's keyring has).
            | S3Secret { .. }
            | S3UserName { .. } => MonCap::ReadWrite,
        }
    }
}

/// One user as `auth get` and `auth ls` answer: caps as text, and the
/// serial of its one valid certificate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthInfo {
    pub entity: String,
    pub caps: Vec<(String, String)>,
    pub serial: String,
}

/// A successful reply: the epoch the change made (or the map's epoch for
/// reads), a JSON value for reports, and the encoded map for `GetMap`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MonReply {
    pub epoch: Epoch,
    #[serde(default)]
    pub value: serde_json::Value,
    #[serde(default)]
    pub map: Option<Vec<u8>>,
}

/// A monitor's typed refusal.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonError {
    /// This monitor is not the leader; ask `leader` (if known).
    #[error("not the leader (leader: {})", leader.as_deref().unwrap_or("unknown"))]
    NotLeader { leader: Option<String> },
    #[error("{0}")]
    Map(#[from] MapError),
    /// The cluster has no map yet (monitors still forming a quorum).
    #[error("the cluster has no map yet: monitors are forming a quorum")]
    NoMap,
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("monitor unavailable: {0}")]
    Unavailable(String),
    /// No majority of the monitors reach each other: nothing can change
    /// the map until one does (what was seen, in words).
    #[error("no monitor quorum: {0}")]
    NoQuorum(String),
    #[error("timed out: {0}")]
    Timeout(String),
    /// A feature this build does not have yet: refused rather than faked.
    #[error("not supported yet: {0}")]
    Unsupported(String),
    /// The caller's entity may not make this request.
    #[error("permission denied: {0}")]
    Denied(String),
    /// What the request names does not exist (an S3 user or key).
    #[error("{0}")]
    NotFound(String),
    /// A cluster-wide flag holds this request back (an OSD's boot under
    /// `noup`): it waits until an operator clears the flag.
    #[error("the {0} flag is set: `loligo osd unset {0}` lets this through")]
    Flagged(String),
}

/// The JSON body of `Call` replies.
pub type CallResult = Result<MonReply, MonError>;

/// One item of the `Watch` stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapUpdate {
    /// The whole map (encoded), when the watcher is too far behind.
    Full(Vec<u8>),
    /// The incremental that makes epoch `n` (encoded).
    Inc(Vec<u8>),
}

/// What `status` answers (`loligo status`, like `ceph -s`); its JSON is
/// what `loligo status --json` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub fsid: String,
    pub health: Health,
    pub monitors: MonStatus,
    pub osdmap: OsdMapStatus,
    /// Number of pools.
    pub pools: usize,
    pub pgs: PgSummary,
    pub usage: Usage,
    pub io: ClientIo,
    /// Recovery and backfill traffic, over the OSDs' last two reports.
    #[serde(default)]
    pub recovery: RecoveryIo,
    /// Each up OSD's counters since it started, from its last report
    /// (what recovery experiments hold to the theory).
    #[serde(default)]
    pub osd_counters: Vec<OsdCounters>,
    /// Work the monitors are walking through, in words (`ceph -s`'s
    /// progress: pgp_num following pg_num).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub progress: Vec<String>,
}

/// One PG as `pg ls` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgRow {
    /// `POOL.PS` in hex, as Ceph prints PG ids.
    pub pg: String,
    /// From its current primary's last report; `unknown` without one,
    /// `down` when no OSD of its acting set is up.
    pub state: PgState,
    /// CRUSH's set, and the set that serves (after pg_temp); an
    /// erasure-coded pool's position i holds shard i, -1 is empty.
    pub up: Vec<i32>,
    pub acting: Vec<i32>,
    pub primary: i32,
    /// From the report (0 without one).
    pub objects: u64,
    pub bytes: u64,
    pub degraded: u64,
    pub misplaced: u64,
    /// The map epoch the report was made under (none: no report).
    pub reported_epoch: Option<Epoch>,
    /// A `down` PG: the OSDs it waits for (see `PgStat::waiting_for`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<i32>,
    /// Objects no up copy can give (see `PgStat::unfound`).
    #[serde(default)]
    pub unfound: u64,
    /// See `PgStat::scrub_errors`, `last_scrub_stamp`,
    /// `last_deep_scrub_stamp` (Unix milliseconds, 0: never).
    #[serde(default)]
    pub scrub_errors: u64,
    #[serde(default)]
    pub last_scrub_stamp: u64,
    #[serde(default)]
    pub last_deep_scrub_stamp: u64,
}

/// One OSD's cumulative I/O counters (see `OsdReport`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsdCounters {
    pub osd: i32,
    /// Bytes the OSD's store holds.
    pub bytes_used: u64,
    /// The store's space (what `bytes_used` is judged against).
    #[serde(default)]
    pub bytes_total: u64,
    pub device_read_bytes: u64,
    pub device_reads: u64,
    pub recovery_objects: u64,
    pub recovery_bytes: u64,
    pub rebuilt_shards: u64,
    pub rebuild_theory_bytes: u64,
    pub rebuild_fetched_bytes: u64,
    pub shard_bytes_sent: u64,
    /// Frame bytes the OSD sent and received on its data connections.
    #[serde(default)]
    pub msgr_send_bytes: u64,
    #[serde(default)]
    pub msgr_recv_bytes: u64,
    /// The store's mean commit time over its last report's interval.
    #[serde(default)]
    pub commit_latency_us: u64,
}

/// Objects and bytes copied per second by recovery and backfill.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryIo {
    pub objects_s: f64,
    pub bytes_s: f64,
}

/// `df`, in the shape of Ceph's `df -f json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DfReport {
    pub stats: DfStats,
    pub pools: Vec<DfPool>,
}

/// The cluster's space, from the up OSDs' last reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DfStats {
    pub total_bytes: u64,
    pub total_avail_bytes: u64,
    pub total_used_bytes: u64,
    pub total_used_raw_bytes: u64,
    pub total_used_raw_ratio: f64,
    pub num_osds: usize,
}

/// One pool's line of `df`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DfPool {
    pub name: String,
    pub id: u64,
    /// Its PG count (Ceph's `df` prints it; its JSON does not).
    #[serde(default)]
    pub pgs: u32,
    pub stats: DfPoolStats,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DfPoolStats {
    /// Bytes its objects hold (before replication or coding).
    pub stored: u64,
    pub objects: u64,
    /// Bytes they take on the OSDs (copies or shards), and in KiB.
    pub bytes_used: u64,
    pub kb_used: u64,
    /// `bytes_used` over itself plus the raw room left (a ratio, as
    /// Ceph's).
    pub percent_used: f64,
    /// Bytes of data the pool can still take before the first OSD is
    /// full.
    pub max_avail: u64,
}

/// A cluster log entry's level, as Ceph's: debug, info, warning, error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// Ceph's tag in a log line (`[INF]`).
    pub fn tag(self) -> &'static str {
        match self {
            LogLevel::Debug => "[DBG]",
            LogLevel::Info => "[INF]",
            LogLevel::Warn => "[WRN]",
            LogLevel::Error => "[ERR]",
        }
    }
}

/// One entry of the cluster log: what happened to the cluster, said by
/// the monitor that saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Its place in the log: one more than the entry before.
    pub seq: u64,
    /// When the monitor saw it (Unix milliseconds).
    pub stamp_ms: u64,
    /// The monitor (`mon.0`).
    pub name: String,
    pub level: LogLevel,
    pub message: String,
}

/// The cluster's health, Ceph's three levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum HealthStatus {
    #[serde(rename = "HEALTH_OK")]
    Ok,
    #[serde(rename = "HEALTH_WARN")]
    Warn,
    #[serde(rename = "HEALTH_ERR")]
    Err,
}

/// The cluster's health: the worst severity, and each check that holds
/// by its Ceph code (`OSD_DOWN`, `PG_DEGRADED`, ...), in Ceph's JSON
/// shape (`ceph health detail -f json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub status: HealthStatus,
    pub checks: BTreeMap<String, HealthCheck>,
}

/// One health check: how bad, a one-line summary with the count of
/// things it is about, and a line per thing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealthCheck {
    pub severity: HealthStatus,
    pub summary: HealthSummary,
    #[serde(default)]
    pub detail: Vec<HealthDetail>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealthSummary {
    pub message: String,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealthDetail {
    pub message: String,
}

impl HealthCheck {
    pub fn new(severity: HealthStatus, summary: String, count: u64, detail: Vec<String>) -> Self {
        HealthCheck {
            severity,
            summary: HealthSummary {
                message: summary,
                count,
            },
            detail: (detail.into_iter())
                .map(|message| HealthDetail { message })
                .collect(),
        }
    }
}

impl HealthStatus {
    /// Ceph's name (`HEALTH_WARN`).
    pub fn name(self) -> &'static str {
        match self {
            HealthStatus::Ok => "HEALTH_OK",
            HealthStatus::Warn => "HEALTH_WARN",
            HealthStatus::Err => "HEALTH_ERR",
        }
    }

    /// `ceph health detail`'s tag (`[WRN]`).
    pub fn tag(self) -> &'static str {
        match self {
            HealthStatus::Ok => "[OK]",
            HealthStatus::Warn => "[WRN]",
            HealthStatus::Err => "[ERR]",
        }
    }
}

impl Health {
    /// The checks, worst first, then by code.
    pub fn ordered(&self) -> Vec<(&str, &HealthCheck)> {
        let mut v: Vec<(&str, &HealthCheck)> =
            self.checks.iter().map(|(k, c)| (k.as_str(), c)).collect();
        v.sort_by(|a, b| b.1.severity.cmp(&a.1.severity).then(a.0.cmp(b.0)));
        v
    }

    /// `CODE: summary` per check, then its detail lines indented (worst
    /// first): what tests and logs look for.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (code, c) in self.ordered() {
            out.push(format!("{code}: {}", c.summary.message));
            out.extend(c.detail.iter().map(|d| format!("    {}", d.message)));
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MonStatus {
    pub members: Vec<u64>,
    pub leader: Option<u64>,
    pub term: u64,
    /// The members the leader heard from lately, itself included (Ceph's
    /// quorum); the rest count as down.
    #[serde(default)]
    pub quorum: Vec<u64>,
    /// Each member's address.
    #[serde(default)]
    pub addrs: BTreeMap<u64, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OsdMapStatus {
    pub epoch: Epoch,
    pub num_osds: usize,
    pub num_up_osds: usize,
    pub num_in_osds: usize,
    /// The cluster-wide flags set (`osd set`), by name.
    #[serde(default)]
    pub flags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PgSummary {
    pub total: u64,
    /// PGs per state (`unknown`: no report from the primary yet).
    pub by_state: BTreeMap<PgState, u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub objects: u64,
    /// Object copies short of their pools' size (recovery pending).
    pub degraded_objects: u64,
    /// Object copies still to be moved to where CRUSH wants them, with
    /// enough copies elsewhere meanwhile (backfill pending).
    #[serde(default)]
    pub misplaced_objects: u64,
    /// Objects no up copy can give at their logged version (reads of
    /// them wait), and how many PGs hold them.
    #[serde(default)]
    pub unfound_objects: u64,
    #[serde(default)]
    pub unfound_pgs: u64,
    /// Objects scrubs found inconsistent and not repaired (Ceph's scrub
    /// errors), and the PGs holding them (`inconsistent`).
    #[serde(default)]
    pub scrub_errors: u64,
    #[serde(default)]
    pub inconsistent_pgs: u64,
    /// Bytes the objects hold, before copies or coding (Ceph's `data`).
    #[serde(default)]
    pub stored_bytes: u64,
    pub used_bytes: u64,
    pub total_bytes: u64,
}

/// Client I/O per second, over the OSDs' last two reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientIo {
    pub read_ops_s: f64,
    pub write_ops_s: f64,
    pub read_bytes_s: f64,
    pub write_bytes_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_keeps_cephs_names() {
        let mut by_state = BTreeMap::new();
        by_state.insert(PgState::ACTIVE | PgState::CLEAN, 60);
        by_state.insert(PgState::UNKNOWN, 4);
        let r = StatusReport {
            fsid: "f".into(),
            health: Health {
                status: HealthStatus::Warn,
                checks: [(
                    "PG_AVAILABILITY".to_string(),
                    HealthCheck::new(
                        HealthStatus::Warn,
                        "Reduced data availability: 4 pgs inactive".into(),
                        4,
                        vec!["pg 1.0 is unknown".into()],
                    ),
                )]
                .into(),
            },
            monitors: MonStatus {
                members: vec![0],
                leader: Some(0),
                term: 1,
                quorum: vec![0],
                addrs: [(0, "h:1".to_string())].into(),
            },
            osdmap: OsdMapStatus {
                epoch: 9,
                num_osds: 4,
                num_up_osds: 4,
                num_in_osds: 4,
                flags: vec!["nodeep-scrub".into()],
            },
            pools: 1,
            pgs: PgSummary {
                total: 64,
                by_state,
            },
            usage: Usage {
                objects: 0,
                degraded_objects: 0,
                misplaced_objects: 0,
                unfound_objects: 0,
                unfound_pgs: 0,
                scrub_errors: 0,
                inconsistent_pgs: 0,
                stored_bytes: 0,
                used_bytes: 0,
                total_bytes: 1,
            },
            io: ClientIo::default(),
            recovery: RecoveryIo {
                objects_s: 3.0,
                bytes_s: 12288.0,
            },
            osd_counters: vec![OsdCounters {
                osd: 2,
                device_read_bytes: 4096,
                ..OsdCounters::default()
            }],
            progress: Vec::new(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["health"]["status"], "HEALTH_WARN");
        // Ceph's shape: checks by code, summary and detail messages.
        let c = &v["health"]["checks"]["PG_AVAILABILITY"];
        assert_eq!(c["severity"], "HEALTH_WARN");
        assert_eq!(c["summary"]["count"], 4);
        assert_eq!(c["detail"][0]["message"], "pg 1.0 is unknown");
        assert_eq!(v["pgs"]["by_state"]["active+clean"], 60);
        assert_eq!(v["pgs"]["by_state"]["unknown"], 4);
        assert_eq!(v["recovery"]["objects_s"], 3.0);
        assert_eq!(v["osd_counters"][0]["device_read_bytes"], 4096);
        let back: StatusReport = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, r);
        // A report from a monitor without recovery rates still reads.
        let mut old = v;
        if let Some(o) = old.as_object_mut() {
            o.remove("recovery");
        }
        let back: StatusReport = serde_json::from_value(old).unwrap();
        assert_eq!(back.recovery, RecoveryIo::default());
    }

    #[test]
    fn replies_round_trip_through_json() {
        let r: CallResult = Ok(MonReply {
            epoch: 59,
            ..Default::default()
        });
        let j = serde_json::to_string(&r).unwrap();
        let back: CallResult = serde_json::from_str(&j).unwrap();
        assert_eq!(back.unwrap().epoch, 59);
        let e: CallResult = Err(MonError::Map(MapError::PoolExists("x".into())));
        let j = serde_json::to_string(&e).unwrap();
        let back: CallResult = serde_json::from_str(&j).unwrap();
        assert_eq!(
            back.unwrap_err(),
            MonError::Map(MapError::PoolExists("x".into()))
        );
    }
}
