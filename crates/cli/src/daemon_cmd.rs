//! `loligo mon` and `loligo osd`: run one daemon in the foreground until
//! SIGINT/SIGTERM. `loligo up` starts these as child processes; on other
//! machines an operator starts them directly (README has an example).
//!
//! They must never start on a data directory of another cluster (the fsid
//! is checked) nor mkfs over an existing store.

use crate::CliError;
use clap::Args;
use loligo_mon::{MonConfig, Monitor};
use loligo_osd::OsdConfig;
use loligo_store::{BlockConfig, BlockStore, DeviceClass, DeviceWait, ObjectStore};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct MonArgs {
    /// This monitor's id (0, 1, ...).
    #[arg(long)]
    id: u64,
    /// Every initial monitor as ID=HOST:PORT, comma-separated (this one included).
    #[arg(long, value_name = "ID=ADDR,...")]
    members: String,
    /// Where the monitor keeps its Raft log and snapshots.
    #[arg(long)]
    data: PathBuf,
    /// The cluster's fsid (written into the first map).
    #[arg(long)]
    fsid: String,
    /// CRUSH failure domain of a new cluster: host, or osd for one machine.
    #[arg(long, default_value = "host")]
    failure_domain: String,
    /// Distinct OSDs that must report a peer before it is marked down.
    #[arg(long, default_value_t = 2)]
    min_down_reporters: usize,
    /// Seconds without any report before an OSD is marked down.
    #[arg(long, default_value_t = 60.0)]
    report_timeout: f64,
    /// Seconds an OSD may stay down before it is marked out.
    #[arg(long, default_value_t = 600.0)]
    down_out_interval: f64,
    /// Make this monitor's store (its first start; refused if the store
    /// exists). Without it a missing store is refused: a monitor whose
    /// store was wiped must not rejoin under its old id.
    #[arg(long)]
    mkfs: bool,
    /// Join a running group instead of starting one: --members names its
    /// monitors and this one; the leader adds it with `loligo mon add ID
    /// ADDR` once it runs.
    #[arg(long)]
    join: bool,
    /// Start a new group (with --mkfs, this monitor its only member) from
    /// FILE, the map of a group that lost a majority of its monitors for
    /// good (`loligo osd getmap --mon ADDR -o FILE` from the survivor with
    /// the newest map). Its epoch moves on by 100,000; add the other
    /// monitors afresh with `mon add`.
    #[arg(long, value_name = "FILE", requires = "mkfs", conflicts_with = "join")]
    restore: Option<PathBuf>,
    /// This monitor's keyring (made by `loligo up` or `loligo auth`): every
    /// connection to and from it is mutual TLS, and only this cluster's
    /// entities get through. Required unless --insecure is given.
    #[arg(long, value_name = "FILE")]
    keyring: Option<PathBuf>,
    /// Serve without a keyring: the port is plain and open to anyone who
    /// can reach it, and every request is allowed (for benchmarks on a
    /// trusted machine only).
    #[arg(long, conflicts_with = "keyring")]
    insecure: bool,
    /// The folder of the cluster's certificate authority (ca.pem, ca.key):
    /// with it, this monitor makes users' keys while it leads (`loligo
    /// auth add`, `auth rotate`). Without it those are refused.
    #[arg(long, value_name = "DIR", requires = "keyring")]
    authority: Option<PathBuf>,
    /// Where to serve HTTP (`/metrics`: the cluster's metrics in
    /// Prometheus' format under Ceph's names, from the leader; `/`: the
    /// dashboard, for a token from `loligo dashboard create-token`), as
    /// HOST:PORT (Ceph's manager port by default, on loopback); `off` for
    /// none. Plain HTTP on loopback; beyond it, HTTPS with the monitor's
    /// certificate from its keyring (with --insecure: plain, and the
    /// metrics only). A port already taken is logged, and the monitor
    /// runs without it.
    #[arg(long, value_name = "HOST:PORT|off", default_value = "127.0.0.1:9283")]
    http_addr: String,
    /// Leave the OSDs' own counters (`ceph_osd_op_r`, ...) out of
    /// `/metrics`, for a Prometheus that scrapes each OSD's own endpoint
    /// (`osd run --http-addr`; Ceph's `exclude_perf_counters`).
    #[arg(long)]
    exclude_perf_counters: bool,
}

/// `--deferred-max`: whole 4 KiB blocks, at most 512 KiB (Ceph's largest
/// blob on hard disks). Larger would send large writes through the
/// metadata journal (and around compression and O_DIRECT).
fn deferred_max(s: &str) -> Result<u64, String> {
    let v: u64 = s.parse().map_err(|e| format!("{e}"))?;
    if v == 0 || !v.is_multiple_of(4096) || v > 512 << 10 {
        return Err(format!("{v} is not a multiple of 4096 from 4096 to 524288"));
    }
    Ok(v)
}

/// `osd run --device-class`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceClassArg {
    /// What the kernel reports for the disk under the store's data.
    #[default]
    Auto,
    /// A spinning disk.
    Hdd,
    /// Solid state.
    Ssd,
}

impl DeviceClassArg {
    /// The value as `osd run --device-class` takes it.
    pub fn name(self) -> &'static str {
        match self {
            DeviceClassArg::Auto => "auto",
            DeviceClassArg::Hdd => "hdd",
            DeviceClassArg::Ssd => "ssd",
        }
    }

    /// The class: named, or asked of the kernel for the disk holding
    /// `data`; `None` when the kernel does not say (a file system with no
    /// disk of its own under it: tmpfs, overlayfs, btrfs, ZFS).
    fn resolve(self, data: &std::path::Path) -> Option<DeviceClass> {
        match self {
            DeviceClassArg::Hdd => Some(DeviceClass::Hdd),
            DeviceClassArg::Ssd => Some(DeviceClass::Ssd),
            DeviceClassArg::Auto => DeviceClass::of(data),
        }
    }
}

#[derive(Args)]
pub struct OsdArgs {
    /// This OSD's id.
    #[arg(long)]
    id: i32,
    /// Address to listen on and advertise (HOST:PORT).
    #[arg(long)]
    addr: String,
    /// Monitor address(es), comma-separated.
    #[arg(long)]
    mon: String,
    /// The OSD's store directory (created with --size if missing).
    #[arg(long)]
    data: PathBuf,
    /// Size of a new store's block file in bytes.
    #[arg(long, default_value_t = 8 << 30)]
    size: u64,
    /// Bytes of large reads the store keeps in memory for reads that come
    /// again (0: none).
    #[arg(long, default_value_t = loligo_store::DEFAULT_READ_CACHE)]
    read_cache: u64,
    /// The class of the disk the store's data lives on (Ceph's device
    /// class): `auto` asks the kernel (sysfs's `rotational` flag; the ssd
    /// defaults, and no class reported, when it does not say, as on
    /// tmpfs, overlayfs, btrfs or ZFS). It picks the small-write
    /// defaults: on `hdd` writes of at most 64 KiB are deferred, on `ssd`
    /// those of at most 32 KiB go as `--small-writes auto` says. Virtual
    /// disks often report `hdd` whatever backs them.
    #[arg(long, value_enum, default_value_t)]
    device_class: DeviceClassArg,
    /// How the store writes small writes (default: the device class's;
    /// may change between runs of the OSD).
    #[arg(long, value_enum)]
    small_writes: Option<crate::store_cmd::SmallWritesArg>,
    /// Writes of at most this many bytes are small: a multiple of 4096
    /// from 4096 to 524288 (default: the device class's; may change
    /// between runs of the OSD).
    #[arg(long, value_parser = deferred_max)]
    deferred_max: Option<u64>,
    /// Use this device (or file) for data instead of DATA/block (mkfs only).
    #[arg(long)]
    device: Option<PathBuf>,
    /// The store a new DATA is made with (an existing one must match).
    #[arg(long, value_enum, default_value_t)]
    objectstore: crate::store_cmd::ObjectStoreArg,
    /// A new filestore's journal size in bytes (Ceph's osd_journal_size).
    #[arg(long, default_value_t = 1 << 30)]
    journal_size: u64,
    /// CRUSH host name (default: this machine's hostname).
    #[arg(long)]
    host: Option<String>,
    /// Where to serve this OSD's own metrics (`/metrics`: its counters
    /// under Ceph's names, as of its last report; Ceph's ceph-exporter),
    /// as HOST:PORT (port 0: any free one); `off` for none. Its reports
    /// name it, and the monitors' `/sd/prometheus/sd-config?service=ceph-exporter`
    /// lists it for Prometheus. Plain HTTP on loopback; beyond it, HTTPS
    /// with the OSD's certificate (with --insecure: plain).
    #[arg(long, value_name = "HOST:PORT|off", default_value = "off")]
    http_addr: String,
    /// Seconds a peer may be silent before it is reported.
    #[arg(long, default_value_t = 6.0)]
    heartbeat_grace: f64,
    /// Stop, as a flapping OSD, once marked down while running more than
    /// this many times within ten minutes (Ceph's osd_max_markdown_count).
    #[arg(long, default_value_t = loligo_osd::MAX_MARKDOWN_COUNT)]
    max_markdown_count: u32,
    /// Seconds a client op may wait for its PG (it is answered with why
    /// after five sixths of this, before a client with the same timeout
    /// gives up).
    #[arg(long, default_value_t = 30.0)]
    op_timeout: f64,
    /// Seconds after which a client op still in flight is a slow op:
    /// counted in this OSD's reports, raising SLOW_OPS (Ceph's
    /// osd_op_complaint_time, 30 there). Less than five sixths of
    /// --op-timeout, when a stuck op is answered.
    #[arg(long, default_value_t = 10.0)]
    op_complaint_time: f64,
    /// PG log entries kept per PG (a copy that missed more writes than
    /// this is backfilled: its objects are scanned and compared).
    #[arg(long, default_value_t = loligo_osd::pg::LOG_ENTRIES_MAX)]
    pg_log_entries: u64,
    /// Objects per backfill scan and chunk.
    #[arg(long, default_value_t = loligo_osd::pg::backfill::CHUNK_OBJECTS)]
    backfill_chunk: usize,
    /// Primary PGs of this OSD that recover or backfill at once, the most
    /// degraded first (an op waiting for an object is always served).
    #[arg(long, default_value_t = loligo_osd::daemon::RECOVERY_MAX_ACTIVE)]
    recovery_max_active: usize,
    /// Milliseconds a PG pauses after each recovery push or backfill
    /// chunk (gives client I/O more of the disk; 0: no pause).
    #[arg(long, default_value_t = 0)]
    recovery_sleep_ms: u64,
    /// Recovery pushes and backfill chunks from other OSDs this OSD takes
    /// at once (more wait their turn), so one that many PGs copy onto is
    /// not swamped.
    #[arg(long, default_value_t = loligo_osd::daemon::RECOVERY_MAX_INCOMING)]
    recovery_max_incoming: usize,
    /// Leaves of each replicated PG's Merkle tree (a power of two from
    /// 1024 to 65536; 16 bytes of memory each): backfill compares trees
    /// and scans only where they differ. 0: no trees (backfill scans
    /// every object). Changing it rebuilds each PG's tree at start.
    #[arg(long, default_value_t = loligo_osd::pg::merkle::LEAVES_DEFAULT)]
    merkle_leaves: u32,
    /// Seconds between a clean primary's comparisons of its members'
    /// Merkle roots with its own (a difference shows the PG
    /// `inconsistent`; 0: never).
    #[arg(long, default_value_t = loligo_osd::pg::SCRUB_INTERVAL_MS as f64 / 1000.0)]
    scrub_interval: f64,
    /// Seconds after a PG's last scrub before it is scrubbed again while
    /// the load is under --scrub-load-threshold (plus a per-PG share of up
    /// to half of it; Ceph's osd_scrub_min_interval; 0: never).
    #[arg(long, default_value_t = 86_400.0)]
    scrub_min_interval: f64,
    /// Seconds after which a PG is scrubbed whatever the load (0: never).
    #[arg(long, default_value_t = 604_800.0)]
    scrub_max_interval: f64,
    /// Seconds after a PG's last deep scrub before the next (plus its
    /// share; 0: never).
    #[arg(long, default_value_t = 604_800.0)]
    deep_scrub_interval: f64,
    /// Scheduled scrubs wait while the one-minute load average per CPU is
    /// at or over this.
    #[arg(long, default_value_t = loligo_osd::daemon::SCRUB_LOAD_THRESHOLD)]
    scrub_load_threshold: f64,
    /// Seconds to pause between scrub chunks (lower the scrubs' share of
    /// the disk; Ceph's osd_scrub_sleep).
    #[arg(long, default_value_t = 0.0)]
    scrub_sleep: f64,
    /// Seconds a scrub pauses after each piece it reads (about 8 MiB)
    /// while clients use this OSD (a client op or replica write in the
    /// last half second): client I/O goes first (0: no pause).
    #[arg(long, default_value_t = loligo_osd::daemon::SCRUB_BUSY_SLEEP.as_secs_f64())]
    scrub_busy_sleep: f64,
    /// After a scheduled deep scrub, repair what it found if it found at
    /// most --scrub-auto-repair-num-errors objects (Ceph's
    /// osd_scrub_auto_repair; off by default).
    #[arg(long)]
    scrub_auto_repair: bool,
    /// The most inconsistent objects a deep scrub may find for
    /// --scrub-auto-repair to repair them (more: the operator decides).
    #[arg(long, default_value_t = 5)]
    scrub_auto_repair_num_errors: usize,
    /// Scrubs this OSD takes part in at once, as primary or replica
    /// (Ceph's osd_max_scrubs): a primary scrubs only once it holds a
    /// slot on its own OSD and on each replica's.
    #[arg(long, default_value_t = loligo_osd::daemon::MAX_SCRUBS)]
    osd_max_scrubs: usize,
    /// This OSD's keyring (made by `loligo up` or `loligo auth`): every
    /// connection to and from it is mutual TLS, and only this cluster's
    /// entities get through. Required unless --insecure is given.
    #[arg(long, value_name = "FILE")]
    keyring: Option<PathBuf>,
    /// Serve without a keyring: the port is plain and open to anyone who
    /// can reach it, and every request is allowed (for benchmarks on a
    /// trusted machine only).
    #[arg(long, conflicts_with = "keyring")]
    insecure: bool,
    /// Let `loligo tell osd.N injectdataerr POOL OBJ` make reads of a copy
    /// fail (until it is rewritten), to test scrub and read repair. For
    /// test clusters: every store call then passes a fault-injecting layer.
    #[arg(long)]
    debug_inject_read_err: bool,
}

fn secs(v: f64, what: &str) -> Result<Duration, CliError> {
    if !(v > 0.0 && v < 1e7) {
        return Err(CliError(format!(
            "{what} must be a positive number of seconds"
        )));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Log to stderr (RUST_LOG or `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,openraft=warn,h2=warn,tower=warn")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn parse_members(s: &str) -> Result<BTreeMap<u64, String>, CliError> {
    let mut m = BTreeMap::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| CliError(format!("--members: '{part}' is not ID=HOST:PORT")))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| CliError(format!("--members: bad id '{id}'")))?;
        m.insert(id, addr.trim().to_string());
    }
    if m.is_empty() || ![1, 3, 5].contains(&m.len()) {
        return Err(CliError("--members: give 1, 3 or 5 monitors".into()));
    }
    Ok(m)
}

/// Open files a daemon needs besides the connections it admits: its
/// store's files, its own connections to peers and monitors, the runtime.
const FILES_BESIDES_CONNECTIONS: u64 = 1024;
/// The soft open-file limit a daemon raises itself to when the hard limit
/// allows (room for a large cluster's peer connections).
const FILES_WANTED: u64 = 65_536;

/// Raise this process's soft limit on open files so that a daemon can
/// hold every connection it admits (`net::CONNECTIONS_MAX`) and its
/// files; refused, before anything starts, when the hard limit is below
/// that (the daemon would fail to accept, or to open its store, under
/// load).
fn raise_file_limit() -> Result<(), CliError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let need = loligo_proto::net::CONNECTIONS_MAX as u64 + FILES_BESIDES_CONNECTIONS;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| CliError(format!("reading the open-file limit: {e}")))?;
    if hard < need {
        return Err(CliError(format!(
            "the open-file limit is {hard}, and a daemon needs {need} ({} connections and its \
             files): raise it (`ulimit -n {need}` in the shell that starts it, or LimitNOFILE= \
             in its systemd unit)",
            loligo_proto::net::CONNECTIONS_MAX
        )));
    }
    let want = FILES_WANTED.clamp(need, hard);
    if soft < want {
        setrlimit(Resource::RLIMIT_NOFILE, want, hard)
            .map_err(|e| CliError(format!("raising the open-file limit to {want}: {e}")))?;
    }
    Ok(())
}

pub fn mon(a: MonArgs) -> Result<(), CliError> {
    init_logging();
    raise_file_limit()?;
    let security = security(a.keyring.as_deref(), a.insecure, &format!("mon.{}", a.id))?;
    let members = parse_members(&a.members)?;
    let addr = members
        .get(&a.id)
        .cloned()
        .ok_or_else(|| CliError(format!("--members has no monitor {}", a.id)))?;
    let mut cfg = MonConfig::new(a.id, members, a.data.clone(), &a.fsid);
    cfg.failure_domain = a.failure_domain;
    cfg.min_down_reporters = a.min_down_reporters;
    cfg.report_timeout = secs(a.report_timeout, "--report-timeout")?;
    cfg.down_out_interval = secs(a.down_out_interval, "--down-out-interval")?;
    cfg.create = a.mkfs;
    cfg.join = a.join;
    if let Some(f) = &a.restore {
        let bytes = std::fs::read(f).map_err(|e| CliError(format!("{}: {e}", f.display())))?;
        let map = loligo_types::decode_map(&bytes)
            .map_err(|e| CliError(format!("{}: not a cluster map: {e}", f.display())))?;
        if map.fsid != a.fsid {
            return Err(CliError(format!(
                "{} is the map of cluster {}, not {}",
                f.display(),
                map.fsid,
                a.fsid
            )));
        }
        if cfg.members.len() != 1 {
            return Err(CliError(
                "--restore starts a group of one: --members names this monitor alone (add the others after)".into(),
            ));
        }
        eprintln!(
            "mon.{}: a new group from the map of epoch {} in {} (epochs go on from {})",
            a.id,
            map.epoch,
            f.display(),
            map.epoch + loligo_mon::raft::RESTORE_EPOCH_JUMP
        );
        cfg.restore = Some(bytes);
    }
    // Beyond loopback, HTTP is served over TLS with the monitor's own
    // certificate (without one, the metrics alone, in the clear).
    let web_tls = web_tls(security.as_ref(), &a.http_addr)?;
    cfg.security = security;
    cfg.exclude_perf_counters = a.exclude_perf_counters;
    if let Some(dir) = &a.authority {
        let ca = loligo_proto::tls::Authority::load(dir).map_err(|e| CliError(e.to_string()))?;
        cfg.authority = Some(std::sync::Arc::new(ca));
    }
    check_fsid(&a.data, &a.fsid)?;
    let rt = crate::config::runtime()?;
    if a.http_addr != "off" {
        use std::net::ToSocketAddrs;
        if let Err(e) = a.http_addr.to_socket_addrs() {
            return Err(CliError(format!(
                "--http-addr {}: not an address to listen on (HOST:PORT, or off): {e}",
                a.http_addr
            )));
        }
    }
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| CliError(format!("cannot listen on {addr}: {e}")))?;
        let h = Monitor::start(cfg, l).await.map_err(CliError)?;
        tracing::info!("mon.{} serving on {}", a.id, h.addr);
        if a.http_addr != "off" {
            match tokio::net::TcpListener::bind(&a.http_addr).await {
                Ok(l) => {
                    tracing::info!("mon.{} serving HTTP (metrics) on {}", a.id, a.http_addr);
                    let mon = h.mon.clone();
                    tokio::spawn(async move {
                        if let Err(e) = loligo_mon::server::http::serve(mon, l, web_tls).await {
                            tracing::error!("HTTP server stopped: {e}");
                        }
                    });
                }
                Err(e) => tracing::warn!(
                    "mon.{}: no HTTP (metrics): cannot listen on {}: {e}",
                    a.id,
                    a.http_addr
                ),
            }
        }
        stop_signal().await;
        tracing::info!("mon.{} stopping", a.id);
        h.stop().await;
        Ok(())
    })
}

/// A daemon's transport security from its keyring, which must name it as
/// a server; none only with `--insecure` (clap requires one of the two).
fn security(
    keyring: Option<&std::path::Path>,
    insecure: bool,
    entity: &str,
) -> Result<Option<loligo_proto::net::Security>, CliError> {
    let Some(path) = keyring else {
        if !insecure {
            return Err(CliError(format!(
                "{entity}: no --keyring (give --insecure to serve plain text to anyone)"
            )));
        }
        tracing::warn!("{entity}: --insecure: its port is plain and open to anyone");
        return Ok(None);
    };
    let sec = loligo_proto::net::Security::load(path).map_err(|e| CliError(e.to_string()))?;
    if sec.entity() != entity {
        return Err(CliError(format!(
            "{}: the keyring is {}'s, not {entity}'s",
            path.display(),
            sec.entity()
        )));
    }
    if !sec.keyring().serves_as_itself() {
        return Err(CliError(format!(
            "{}: its certificate does not name {entity} and its key as a server (issued by an \
             older release, no dialler would reach it): get a new one with `loligo auth rotate \
             {entity} -o NEW_FILE` (the monitors record the new key; a monitor whose key no map \
             records yet may also take `loligo auth keyring {entity} --ca DIR -o NEW_FILE`) \
             and start with that (`loligo up` does so itself)",
            path.display()
        )));
    }
    Ok(Some(sec))
}

/// A daemon's HTTP TLS configuration: its own certificate when
/// `--http-addr` listens beyond loopback and it has a keyring; none on
/// loopback, or without a keyring (`--insecure`).
fn web_tls(
    security: Option<&loligo_proto::net::Security>,
    http_addr: &str,
) -> Result<Option<Arc<loligo_proto::http::ServerConfig>>, CliError> {
    match security.filter(|_| http_beyond_loopback(http_addr)) {
        Some(sec) => (sec.keyring().web_server_config())
            .map(Some)
            .map_err(|e| CliError(format!("HTTP TLS: {e}"))),
        None => Ok(None),
    }
}

/// Whether `--http-addr` listens beyond loopback (`off` does not).
fn http_beyond_loopback(addr: &str) -> bool {
    use std::net::ToSocketAddrs;
    addr != "off"
        && (addr.to_socket_addrs())
            .map(|mut it| it.any(|sa| !sa.ip().is_loopback()))
            .unwrap_or(false)
}

/// A data directory remembers the fsid it was made for.
fn check_fsid(dir: &std::path::Path, fsid: &str) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
    let f = dir.join("fsid");
    match std::fs::read_to_string(&f) {
        Ok(have) if have.trim() == fsid || fsid.is_empty() => Ok(()),
        Ok(have) => Err(CliError(format!(
            "{} belongs to cluster {} (not {fsid})",
            dir.display(),
            have.trim()
        ))),
        Err(_) => std::fs::write(&f, fsid).map_err(|e| CliError(format!("{}: {e}", f.display()))),
    }
}

/// The OSD's file store, made if DATA holds no store yet.
fn filestore(a: &OsdArgs) -> Result<Arc<dyn ObjectStore>, CliError> {
    if a.device.is_some() {
        return Err(CliError(
            "--device applies to --objectstore bluestore only (a filestore keeps files in DATA)"
                .into(),
        ));
    }
    if a.small_writes.is_some() || a.deferred_max.is_some() {
        return Err(CliError(
            "--small-writes and --deferred-max apply to --objectstore bluestore only (a filestore journals every write)"
                .into(),
        ));
    }
    if a.data.join("block").exists() {
        return Err(CliError(format!(
            "{} holds a bluestore: start it with --objectstore bluestore",
            a.data.display()
        )));
    }
    let fcfg = loligo_store::FileConfig {
        journal_size: a.journal_size,
        ..loligo_store::FileConfig::default()
    };
    if !loligo_store::FileStore::is_filestore(&a.data) {
        loligo_store::FileStore::mkfs(&a.data, &fcfg)?;
    }
    Ok(Arc::new(loligo_store::FileStore::mount(&a.data, &fcfg)?))
}

/// The class an OSD reports: "" where the kernel does not say.
fn class_name(c: Option<DeviceClass>) -> String {
    c.map_or_else(String::new, |c| c.name().to_string())
}

/// Mount the OSD's block store (made first if the directory holds no
/// store), its small writes tuned for the device class unless the flags
/// say otherwise; sets the device and class the OSD reports.
fn bluestore(a: &OsdArgs, cfg: &mut OsdConfig) -> Result<Arc<dyn ObjectStore>, CliError> {
    use loligo_store::media::{BLOCK_FILE, KV_DIR, LSM_DIR};
    if loligo_store::FileStore::is_filestore(&a.data) {
        return Err(CliError(format!(
            "{} holds a filestore: start it with --objectstore filestore",
            a.data.display()
        )));
    }
    let mut bcfg = BlockConfig {
        size: a.size,
        read_cache: a.read_cache,
        device_wait: DeviceWait(loligo_osd::device_wait),
        ..BlockConfig::default()
    };
    let block = a.data.join(BLOCK_FILE);
    if ![KV_DIR, LSM_DIR, BLOCK_FILE]
        .iter()
        .any(|f| a.data.join(f).exists())
    {
        BlockStore::mkfs_on(&a.data, &bcfg, a.device.as_deref())?;
    }
    cfg.device =
        std::fs::canonicalize(&block).map_or_else(|_| String::new(), |p| p.display().to_string());
    let known = a.device_class.resolve(&block);
    cfg.device_class = class_name(known);
    let class = known.unwrap_or_else(|| {
        tracing::info!(
            "the kernel does not say what disk {} is on: ssd defaults",
            block.display()
        );
        DeviceClass::Ssd
    });
    bcfg.deferred_max = a
        .deferred_max
        .unwrap_or_else(|| BlockConfig::deferred_max_for(class));
    bcfg.small_writes = a
        .small_writes
        .map_or_else(|| BlockConfig::small_writes_for(class), Into::into);
    tracing::info!(
        "device class {class}: small writes of at most {} bytes, {:?}",
        bcfg.deferred_max,
        bcfg.small_writes
    );
    Ok(Arc::new(BlockStore::mount(&a.data, &bcfg)?))
}

pub fn osd(a: OsdArgs) -> Result<(), CliError> {
    init_logging();
    raise_file_limit()?;
    // Before anything is made on disk.
    let security = security(a.keyring.as_deref(), a.insecure, &format!("osd.{}", a.id))?;
    let mons: Vec<String> = a.mon.split(',').map(|s| s.trim().to_string()).collect();
    let mut cfg = OsdConfig::new(a.id, &a.addr, mons);
    let base: Arc<dyn ObjectStore> = match a.objectstore {
        crate::store_cmd::ObjectStoreArg::Bluestore => bluestore(&a, &mut cfg)?,
        crate::store_cmd::ObjectStoreArg::Filestore => {
            let store = filestore(&a)?;
            cfg.device_class = class_name(a.device_class.resolve(&a.data));
            store
        }
    };
    let store: Arc<dyn ObjectStore> = if a.debug_inject_read_err {
        let faulty = Arc::new(loligo_store::FaultyStore::new(base));
        let rot = faulty.clone();
        cfg.read_error_injector = Some(loligo_osd::ReadErrorInjector(Arc::new(move |c, o| {
            rot.rot(c, o)
        })));
        faulty
    } else {
        base
    };
    cfg.security = security;
    cfg.host = a.host.unwrap_or_else(hostname);
    cfg.heartbeat_grace = secs(a.heartbeat_grace, "--heartbeat-grace")?;
    cfg.max_markdown_count = a.max_markdown_count;
    cfg.op_timeout = secs(a.op_timeout, "--op-timeout")?;
    cfg.op_complaint_time = secs(a.op_complaint_time, "--op-complaint-time")?;
    if cfg.op_complaint_time >= cfg.op_timeout * 5 / 6 {
        return Err(CliError(format!(
            "--op-complaint-time {} must be under five sixths of --op-timeout {} (when a stuck op is answered): no op would ever count as slow",
            a.op_complaint_time, a.op_timeout
        )));
    }
    if a.pg_log_entries == 0
        || a.backfill_chunk == 0
        || a.recovery_max_active == 0
        || a.recovery_max_incoming == 0
    {
        return Err(CliError(
            "--pg-log-entries, --backfill-chunk, --recovery-max-active and --recovery-max-incoming must be at least 1"
                .into(),
        ));
    }
    if a.recovery_sleep_ms > 60_000 {
        return Err(CliError(
            "--recovery-sleep-ms must be at most 60000 (a minute)".into(),
        ));
    }
    cfg.recovery_max_active = a.recovery_max_active;
    cfg.recovery_sleep = Duration::from_millis(a.recovery_sleep_ms);
    cfg.recovery_max_incoming = a.recovery_max_incoming;
    cfg.pg_log_entries = a.pg_log_entries;
    cfg.backfill_chunk_objects = a.backfill_chunk;
    if a.merkle_leaves != 0 {
        loligo_osd::pg::merkle::Tree::new(a.merkle_leaves)
            .map_err(|e| CliError(format!("--merkle-leaves: {e} (or 0 for none)")))?;
    }
    cfg.merkle_leaves = a.merkle_leaves;
    cfg.scrub_interval = if a.scrub_interval == 0.0 {
        Duration::ZERO
    } else {
        secs(a.scrub_interval, "--scrub-interval")?
    };
    let ms_or_never = |v: f64, name: &str| -> Result<u64, CliError> {
        if v == 0.0 {
            Ok(0)
        } else {
            Ok(secs(v, name)?.as_millis() as u64)
        }
    };
    cfg.scrub_schedule = loligo_osd::pg::scrub::ScrubSchedule {
        min_interval_ms: ms_or_never(a.scrub_min_interval, "--scrub-min-interval")?,
        max_interval_ms: ms_or_never(a.scrub_max_interval, "--scrub-max-interval")?,
        deep_interval_ms: ms_or_never(a.deep_scrub_interval, "--deep-scrub-interval")?,
    };
    if a.scrub_load_threshold.is_nan() || a.scrub_load_threshold <= 0.0 {
        return Err(CliError("--scrub-load-threshold must be above 0".into()));
    }
    cfg.scrub_load_threshold = a.scrub_load_threshold;
    cfg.scrub_auto_repair = a
        .scrub_auto_repair
        .then_some(a.scrub_auto_repair_num_errors);
    if a.osd_max_scrubs == 0 {
        return Err(CliError(
            "--osd-max-scrubs must be at least 1 (noscrub and nodeep-scrub hold scrubs back)"
                .into(),
        ));
    }
    cfg.max_scrubs = a.osd_max_scrubs;
    cfg.scrub_sleep = if a.scrub_sleep == 0.0 {
        Duration::ZERO
    } else {
        secs(a.scrub_sleep, "--scrub-sleep")?
    };
    cfg.scrub_busy_sleep = if a.scrub_busy_sleep == 0.0 {
        Duration::ZERO
    } else {
        secs(a.scrub_busy_sleep, "--scrub-busy-sleep")?
    };
    let web_tls = web_tls(cfg.security.as_ref(), &a.http_addr)?;
    let rt = crate::config::runtime()?;
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(&a.addr)
            .await
            .map_err(|e| CliError(format!("cannot listen on {}: {e}", a.addr)))?;
        let http = match a.http_addr.as_str() {
            "off" => None,
            at => {
                let hl = tokio::net::TcpListener::bind(at).await.map_err(|e| {
                    CliError(format!("--http-addr {at}: cannot listen: {e}"))
                })?;
                let mut bound = hl.local_addr().map_err(|e| CliError(e.to_string()))?;
                if bound.ip().is_unspecified() {
                    // Every address: name the one the OSD serves on.
                    if let Ok(sa) = a.addr.parse::<std::net::SocketAddr>() {
                        bound.set_ip(sa.ip());
                    }
                }
                cfg.metrics_addr = bound.to_string();
                Some(hl)
            }
        };
        let h = loligo_osd::start(cfg, store, l).await?;
        tracing::info!("osd.{} up on {}", a.id, h.addr);
        if let Some(hl) = http {
            let shared = h.shared.clone();
            tokio::spawn(async move {
                if let Err(e) = loligo_osd::serve_metrics(shared, hl, web_tls).await {
                    tracing::error!("HTTP server stopped: {e}");
                }
            });
        }
        tokio::select! {
            _ = stop_signal() => {
                tracing::info!("osd.{} stopping", a.id);
                h.stop(true).await;
                Ok(())
            }
            why = h.failed() => {
                h.stop(true).await;
                Err(CliError(format!(
                    "osd.{} stopped: {why} (restart it once the device is fixed; it resumes from what was committed)",
                    a.id
                )))
            }
        }
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
