//! `loligo up` and `loligo down`: a whole local cluster (one monitor, N
//! OSDs, each its own process with a BlockStore) under one directory,
//! with a config file every other command finds, a pid file and a log per
//! daemon. Starting `up` again on the same directory brings the same
//! cluster back with its data.
//!
//! It must never start a second copy of a running cluster, nor stop
//! processes it did not start (pids are checked against the daemons'
//! command lines).

use crate::config::{Config, CONF_NAME, DEFAULT_DATA_DIR, DEFAULT_POOL};
use crate::CliError;
use clap::Args;
use loligo_monc::protocol::{Admin, MonError, MonRequest, StatusReport};
use loligo_types::osdmap::OsdFlag;
use loligo_types::pg_state::PgState;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct UpArgs {
    /// Number of OSDs (first start only, default 4; later starts keep
    /// the cluster's).
    #[arg(long)]
    osds: Option<u32>,
    /// Number of monitors: 1, 3 or 5 (first start only). A group of 3
    /// goes on with one down, of 5 with two. Default 1.
    #[arg(long)]
    mons: Option<u32>,
    /// Directory holding the cluster's data, config, logs and pid files.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// Start in the background and return (stop with `loligo down`).
    #[arg(long)]
    detach: bool,
    /// Block-file size of each OSD's store in bytes (first start only;
    /// default: 8 GiB, less if the disk has not room for all OSDs, at
    /// least 1 GiB).
    #[arg(long)]
    osd_size: Option<u64>,
    /// The store every OSD runs on (first start only): bluestore (the
    /// default) or filestore (the FileStore-like baseline, for
    /// comparisons).
    #[arg(long, value_enum)]
    osd_objectstore: Option<crate::store_cmd::ObjectStoreArg>,
    /// `osd run --device-class` for every OSD (first start only; default
    /// auto: the kernel's word for the disk under --data-dir). It picks
    /// the small-write defaults.
    #[arg(long, value_enum)]
    osd_device_class: Option<crate::daemon_cmd::DeviceClassArg>,
    /// PGs of the default pool (first start only, default 32).
    #[arg(long)]
    pg_num: Option<u32>,
    /// PG log entries each OSD keeps (first start only; default 1,000).
    /// A short log makes an OSD that was away backfill instead of
    /// recovering from the log.
    #[arg(long)]
    pg_log_entries: Option<u64>,
    /// Leaves of each replicated PG's Merkle tree on every OSD (first
    /// start only; default 16,384; 0: no trees, backfill scans every
    /// object).
    #[arg(long)]
    merkle_leaves: Option<u32>,
    /// No keys and no TLS (first start only): every port plain and open
    /// to anyone who can reach it. For benchmarks on a trusted machine
    /// only; by default every daemon and the admin get a keyring (in
    /// DATA_DIR/keys) and every connection is mutual TLS.
    #[arg(long)]
    insecure: bool,
    /// Start every OSD with `--debug-inject-read-err` (first start only):
    /// `loligo tell osd.N injectdataerr` then works, for testing scrub.
    #[arg(long)]
    debug_inject_read_err: bool,
    /// Seconds an OSD may stay down before the monitor marks it out
    /// (first start only; default 600, Ceph's `mon_osd_down_out_interval`).
    #[arg(long)]
    down_out_interval: Option<u32>,
    /// Seconds after which an OSD counts a client op still in flight as
    /// slow (first start only; default 10: under the 25 s after which a
    /// stuck op is answered; Ceph's `osd_op_complaint_time` is 30).
    #[arg(long)]
    op_complaint_time: Option<f64>,
    /// Where the S3 gateway (rgw.0) serves (first start only): an
    /// address, `auto` (127.0.0.1:7480, or a free port if that is
    /// taken) or `off`.
    #[arg(long, default_value = "auto", overrides_with = "s3")]
    s3: String,
}

#[derive(Args)]
pub struct DownArgs {
    /// The cluster's directory.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
}

/// What `up` remembers about a cluster between starts.
#[derive(Serialize, Deserialize)]
struct State {
    fsid: String,
    /// mon.0's address.
    mon_addr: String,
    /// The addresses of mon.1 and up, if the cluster has more monitors.
    #[serde(default)]
    more_mons: Vec<String>,
    osd_addrs: Vec<String>,
    osd_size: u64,
    /// `osd run --objectstore` for every OSD (unset: the default).
    #[serde(default)]
    objectstore: Option<String>,
    /// `osd run --device-class` for every OSD (unset: the default).
    #[serde(default)]
    device_class: Option<String>,
    /// `osd run --pg-log-entries` for every OSD (unset: the default).
    #[serde(default)]
    pg_log_entries: Option<u64>,
    /// `osd run --merkle-leaves` for every OSD (unset: the default).
    #[serde(default)]
    merkle_leaves: Option<u32>,
    /// Plain connections, no keys (`--insecure` at the first start).
    #[serde(default)]
    insecure: bool,
    /// `osd run --debug-inject-read-err` for every OSD.
    #[serde(default)]
    debug_inject_read_err: bool,
    /// `mon run --down-out-interval` (unset: the default).
    #[serde(default)]
    down_out_interval: Option<u32>,
    /// `osd run --op-complaint-time` for every OSD (unset: the default).
    #[serde(default)]
    op_complaint_time: Option<f64>,
    /// Each monitor's HTTP address (metrics), mon.0 first; a cluster made
    /// before monitors served HTTP gets them at its next start.
    #[serde(default)]
    http_addrs: Vec<String>,
    /// Where the S3 gateway serves (`None`: no gateway).
    #[serde(default)]
    s3_addr: Option<String>,
}

const STATE_NAME: &str = "cluster.toml";
/// The folder of a cluster's keys: the authority's certificate and key,
/// and a keyring per daemon and for the admin.
const KEYS_DIR: &str = "keys";
/// The admin's entity (every permission).
const ADMIN: &str = "client.admin";

fn keyring_path(dir: &Path, entity: &str) -> PathBuf {
    dir.join(KEYS_DIR).join(format!("{entity}.keyring"))
}

/// The cluster's authority (made on the first start) and a keyring for
/// each of `entities` that has none yet, or (a monitor's) one whose
/// certificate does not name it and its key as a server: issued before
/// servers had to prove which daemon and key they are, no dialler would
/// reach it. Returns the OSDs whose keyrings are outdated so: the map
/// records their keys, so a new one must be recorded too, by the
/// monitors ([`rotate_keys`]).
fn make_keys(dir: &Path, fsid: &str, entities: &[String]) -> Result<Vec<String>, CliError> {
    use loligo_proto::tls::{Authority, Keyring};
    let keys = dir.join(KEYS_DIR);
    let ca = if Authority::exists_in(&keys) {
        Authority::load(&keys)
    } else {
        Authority::generate(fsid).and_then(|ca| ca.save(&keys).map(|()| ca))
    }
    .map_err(|e| CliError(e.to_string()))?;
    let mut rotate = Vec::new();
    for e in entities {
        let p = keyring_path(dir, e);
        let outdated = || {
            loligo_proto::tls::is_daemon(e)
                && Keyring::load(&p).is_ok_and(|k| !k.serves_as_itself())
        };
        if p.exists() && outdated() && loligo_proto::tls::osd_of(e).is_some() {
            rotate.push(e.clone());
        } else if !p.exists() || outdated() {
            ca.issue(e)
                .and_then(|k| k.save(&p))
                .map_err(|e| CliError(e.to_string()))?;
        }
    }
    Ok(rotate)
}

/// New keyrings for `osds` from the monitors (`auth rotate`), which
/// record each new key, saved over the old ones.
async fn rotate_keys(
    mc: &mut loligo_monc::MonClient,
    dir: &Path,
    osds: &[String],
) -> Result<(), MonError> {
    for e in osds {
        let r = mc
            .call(MonRequest::Admin(Admin::AuthRotate { entity: e.clone() }))
            .await?;
        let text = r.value["keyring"]
            .as_str()
            .ok_or_else(|| MonError::Invalid(format!("auth rotate {e}: no keyring")))?;
        loligo_proto::tls::Keyring::from_text(text)
            .and_then(|k| k.save(&keyring_path(dir, e)))
            .map_err(|err| MonError::Invalid(format!("{e}'s new keyring: {err}")))?;
        eprintln!(
            "{e}: its keyring was issued before servers named their keys: a new one is in place"
        );
    }
    Ok(())
}

/// A port free now, below the kernel's ephemeral range, held by the
/// listener returned until the daemon that takes it is about to start:
/// another `loligo up` looking for a port meanwhile finds it taken (two
/// clusters started side by side picked the same port, and one's OSD
/// found it in use). A port from the ephemeral range may by then be the
/// local end of some outgoing connection (a cluster's OSD failed to start
/// with "address already in use" that way).
fn free_port() -> Result<(u16, std::net::TcpListener), CliError> {
    let lo = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    if lo > 12_000 {
        let mut seed = [0u8; 8];
        if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
            use std::io::Read;
            let _ = f.read_exact(&mut seed);
        }
        let mut x = u64::from_le_bytes(seed) | 1;
        for _ in 0..64 {
            // xorshift: a different port each try.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let port = 10_000 + (x % u64::from(lo - 10_000)) as u16;
            if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
                return Ok((port, l));
            }
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok((l.local_addr()?.port(), l))
}

fn new_fsid() -> String {
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn load_state(dir: &Path) -> Result<Option<State>, CliError> {
    let p = dir.join(STATE_NAME);
    match std::fs::read_to_string(&p) {
        Ok(t) => Ok(Some(
            toml::from_str(&t).map_err(|e| CliError(format!("{}: {e}", p.display())))?,
        )),
        Err(_) => Ok(None),
    }
}

fn pid_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.pid"))
}

/// The pid in `name`'s pid file if that process is alive and is a loligo
/// daemon of this directory.
fn running(dir: &Path, name: &str) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pid_path(dir, name))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
    let data = dir.join(name);
    (cmd.contains("loligo") && cmd.contains(&*data.to_string_lossy())).then_some(pid)
}

fn spawn(dir: &Path, name: &str, args: &[String], detach: bool) -> Result<Child, CliError> {
    let exe = std::env::current_exe()?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if detach {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let child = cmd.spawn()?;
    std::fs::write(pid_path(dir, name), child.id().to_string())?;
    Ok(child)
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')))
            .unwrap_or(true)
}

/// Stop the daemons named (the gateway, then OSDs, then monitors),
/// politely then firmly.
fn stop_all(dir: &Path, names: &[String]) -> usize {
    let mut stopped = 0;
    for group in [
        names
            .iter()
            .filter(|n| n.starts_with("rgw"))
            .collect::<Vec<_>>(),
        names.iter().filter(|n| n.starts_with("osd")).collect(),
        names.iter().filter(|n| n.starts_with("mon")).collect(),
    ] {
        let pids: Vec<(String, i32)> = group
            .iter()
            .filter_map(|n| running(dir, n).map(|p| (n.to_string(), p)))
            .collect();
        for (_, p) in &pids {
            signal(*p, nix::sys::signal::Signal::SIGTERM);
        }
        let t0 = Instant::now();
        while pids.iter().any(|(_, p)| alive(*p)) && t0.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(100));
        }
        for (n, p) in &pids {
            if alive(*p) {
                signal(*p, nix::sys::signal::Signal::SIGKILL);
            }
            let _ = std::fs::remove_file(pid_path(dir, n));
            stopped += 1;
        }
    }
    stopped
}

/// The command line of daemon `name` (`mon.N`, `osd.N`) of the cluster.
fn daemon_args(st: &State, dir: &Path, name: &str) -> Result<Vec<String>, CliError> {
    if let (crate::up_s3::GATEWAY, Some(addr)) = (name, &st.s3_addr) {
        return Ok(crate::up_s3::args(dir, addr));
    }
    let data = dir.join(name).to_string_lossy().into_owned();
    let mons = mon_addrs(st);
    let mon = name
        .strip_prefix("mon.")
        .and_then(|i| i.parse::<usize>().ok())
        .filter(|&i| i < mons.len());
    if let Some(id) = mon {
        let reporters = if st.osd_addrs.len() >= 3 { 2 } else { 1 };
        let members: Vec<String> = (mons.iter().enumerate())
            .map(|(i, a)| format!("{i}={a}"))
            .collect();
        return Ok(vec![
            "mon".into(),
            "run".into(),
            "--id".into(),
            id.to_string(),
            "--members".into(),
            members.join(","),
            "--data".into(),
            data,
            "--fsid".into(),
            st.fsid.clone(),
            "--failure-domain".into(),
            "osd".into(),
            "--min-down-reporters".into(),
            reporters.to_string(),
            "--report-timeout".into(),
            "30".into(),
            "--http-addr".into(),
            st.http_addrs
                .get(id)
                .cloned()
                .unwrap_or_else(|| "off".into()),
        ]
        .into_iter()
        .chain(
            (st.down_out_interval)
                .into_iter()
                .flat_map(|s| ["--down-out-interval".to_string(), s.to_string()]),
        )
        .chain(keyring_args(st, dir, name))
        .chain(authority_args(st, dir))
        .collect());
    }
    let addr = name
        .strip_prefix("osd.")
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| st.osd_addrs.get(i).map(|a| (i, a)));
    let Some((i, addr)) = addr else {
        return Err(CliError(format!(
            "no daemon '{name}' in this cluster (mon.0 .. mon.{}, osd.0 .. osd.{})",
            mons.len() - 1,
            st.osd_addrs.len().saturating_sub(1)
        )));
    };
    let mut args: Vec<String> = vec![
        "osd".into(),
        "run".into(),
        "--id".into(),
        i.to_string(),
        "--addr".into(),
        addr.clone(),
        "--mon".into(),
        mons.join(","),
        "--data".into(),
        data,
        "--size".into(),
        st.osd_size.to_string(),
        "--host".into(),
        "localhost".into(),
    ];
    if let Some(o) = &st.objectstore {
        args.extend(["--objectstore".into(), o.clone()]);
    }
    if let Some(c) = &st.device_class {
        args.extend(["--device-class".into(), c.clone()]);
    }
    if let Some(n) = st.pg_log_entries {
        args.extend(["--pg-log-entries".into(), n.to_string()]);
    }
    if let Some(n) = st.merkle_leaves {
        args.extend(["--merkle-leaves".into(), n.to_string()]);
    }
    if st.debug_inject_read_err {
        args.push("--debug-inject-read-err".into());
    }
    if let Some(t) = st.op_complaint_time {
        args.extend(["--op-complaint-time".into(), t.to_string()]);
    }
    // Each OSD's own metrics, on a free port it names in its reports.
    args.extend(["--http-addr".into(), "127.0.0.1:0".into()]);
    args.extend(keyring_args(st, dir, name));
    Ok(args)
}

/// `--keyring FILE` for daemon `name`, or `--insecure` if the cluster is.
fn keyring_args(st: &State, dir: &Path, name: &str) -> Vec<String> {
    if st.insecure {
        return vec!["--insecure".into()];
    }
    vec![
        "--keyring".into(),
        keyring_path(dir, name).to_string_lossy().into_owned(),
    ]
}

/// `--authority DIR` for the monitor (it makes users' keys), unless the
/// cluster is insecure.
fn authority_args(st: &State, dir: &Path) -> Vec<String> {
    if st.insecure {
        return Vec::new();
    }
    vec![
        "--authority".into(),
        dir.join(KEYS_DIR).to_string_lossy().into_owned(),
    ]
}

/// Say which first-start-only options `a` gives that an existing
/// cluster `st` does not follow (they would otherwise pass unnoticed).
fn warn_first_start_only(a: &UpArgs, st: &State) {
    let n_mons = 1 + st.more_mons.len() as u32;
    let n_osds = st.osd_addrs.len() as u32;
    let mut ignored = Vec::new();
    let mut differs = |given: bool, name: &str| {
        if given {
            ignored.push(name.to_string());
        }
    };
    differs(a.mons.is_some_and(|m| m != n_mons), "--mons");
    differs(a.osds.is_some_and(|n| n != n_osds), "--osds");
    differs(a.osd_size.is_some_and(|z| z != st.osd_size), "--osd-size");
    differs(
        a.osd_objectstore
            .is_some_and(|o| o.name() != st.objectstore.as_deref().unwrap_or("bluestore")),
        "--osd-objectstore",
    );
    differs(
        a.osd_device_class
            .is_some_and(|c| Some(c.name()) != st.device_class.as_deref().or(Some("auto"))),
        "--osd-device-class",
    );
    differs(a.pg_num.is_some(), "--pg-num");
    differs(
        a.pg_log_entries.is_some() && a.pg_log_entries != st.pg_log_entries,
        "--pg-log-entries",
    );
    differs(
        a.merkle_leaves.is_some() && a.merkle_leaves != st.merkle_leaves,
        "--merkle-leaves",
    );
    differs(a.insecure && !st.insecure, "--insecure");
    differs(
        a.debug_inject_read_err && !st.debug_inject_read_err,
        "--debug-inject-read-err",
    );
    differs(
        a.down_out_interval.is_some() && a.down_out_interval != st.down_out_interval,
        "--down-out-interval",
    );
    differs(
        a.op_complaint_time.is_some() && a.op_complaint_time != st.op_complaint_time,
        "--op-complaint-time",
    );
    if !ignored.is_empty() {
        eprintln!(
            "warning: {} ignored: they apply to a cluster's first start only, and this one keeps its {n_mons} monitor(s), {n_osds} OSDs and settings",
            ignored.join(", ")
        );
    }
}

/// Every monitor's address, mon.0 first.
fn mon_addrs(st: &State) -> Vec<String> {
    std::iter::once(st.mon_addr.clone())
        .chain(st.more_mons.iter().cloned())
        .collect()
}

/// The daemons: monitors, OSDs, then the S3 gateway if there is one.
fn names(st: &State) -> Vec<String> {
    let mons = 1 + st.more_mons.len();
    let mut v: Vec<String> = (0..mons).map(|i| format!("mon.{i}")).collect();
    v.extend((0..st.osd_addrs.len()).map(|i| format!("osd.{i}")));
    if st.s3_addr.is_some() {
        v.push(crate::up_s3::GATEWAY.into());
    }
    v
}

pub fn up(a: UpArgs) -> Result<(), CliError> {
    let (osds, mons) = (a.osds.unwrap_or(4), a.mons.unwrap_or(1));
    if osds == 0 || osds > 64 {
        return Err(CliError("--osds must be in 1..=64".into()));
    }
    if ![1, 3, 5].contains(&mons) {
        return Err(CliError(format!(
            "--mons must be 1, 3 or 5, not {mons} (a group of 2 or 4 survives no more losses than one of 1 or 3)"
        )));
    }
    if a.pg_log_entries == Some(0) {
        return Err(CliError("--pg-log-entries must be at least 1".into()));
    }
    if let Some(n) = a.merkle_leaves.filter(|&n| n != 0) {
        loligo_osd::pg::merkle::Tree::new(n)
            .map_err(|e| CliError(format!("--merkle-leaves: {e} (or 0 for none)")))?;
    }
    std::fs::create_dir_all(&a.data_dir)?;
    let dir = std::fs::canonicalize(&a.data_dir)?;
    let first = load_state(&dir)?.is_none();
    // A first start's ports, held until their daemons start; and the
    // monitors' HTTP ports, held until each monitor starts.
    let mut held: Vec<Option<std::net::TcpListener>> = Vec::new();
    let mut held_http: Vec<Option<std::net::TcpListener>> = Vec::new();
    let mut st = match load_state(&dir)? {
        Some(s) => {
            warn_first_start_only(&a, &s);
            s
        }
        None => {
            let mut addr = || -> Result<String, CliError> {
                let (port, l) = free_port()?;
                held.push(Some(l));
                Ok(format!("127.0.0.1:{port}"))
            };
            State {
                fsid: new_fsid(),
                mon_addr: addr()?,
                more_mons: (1..mons).map(|_| addr()).collect::<Result<_, _>>()?,
                osd_addrs: (0..osds).map(|_| addr()).collect::<Result<_, _>>()?,
                osd_size: osd_size(&dir, osds, a.osd_size)?,
                objectstore: a.osd_objectstore.map(|o| o.name().to_string()),
                device_class: a.osd_device_class.map(|c| c.name().to_string()),
                pg_log_entries: a.pg_log_entries,
                merkle_leaves: a.merkle_leaves,
                insecure: a.insecure,
                debug_inject_read_err: a.debug_inject_read_err,
                down_out_interval: a.down_out_interval,
                op_complaint_time: a.op_complaint_time,
                http_addrs: Vec::new(),
                s3_addr: crate::up_s3::pick_addr(&a.s3)?,
            }
        }
    };
    if st.http_addrs.len() != mon_addrs(&st).len() {
        st.http_addrs = (0..mon_addrs(&st).len())
            .map(|_| {
                let (port, l) = free_port()?;
                held_http.push(Some(l));
                Ok(format!("127.0.0.1:{port}"))
            })
            .collect::<Result<_, CliError>>()?;
    }
    std::fs::write(
        dir.join(STATE_NAME),
        toml::to_string(&st).map_err(|e| CliError(e.to_string()))?,
    )?;
    let st = st;
    let all = names(&st);
    let live: Vec<&String> = all.iter().filter(|n| running(&dir, n).is_some()).collect();
    if !live.is_empty() {
        return Err(CliError(format!(
            "the cluster in {} is already running ({} daemons); stop it with `loligo down --data-dir {}`",
            dir.display(),
            live.len(),
            a.data_dir.display()
        )));
    }
    let mut rotate = Vec::new();
    if !st.insecure {
        // The daemons' and the admin's (the gateway's is a client's,
        // made by the monitors with its caps).
        let mut entities = all.clone();
        entities.retain(|n| n != crate::up_s3::GATEWAY);
        entities.push(ADMIN.into());
        rotate = make_keys(&dir, &st.fsid, &entities)?;
    }
    let conf = Config {
        fsid: st.fsid.clone(),
        mon_addrs: mon_addrs(&st),
        default_pool: DEFAULT_POOL.into(),
        keyring: (!st.insecure).then(|| PathBuf::from(KEYS_DIR).join(format!("{ADMIN}.keyring"))),
    };
    let conf_path = dir.join(CONF_NAME);
    conf.save(&conf_path)?;
    let n = st.osd_addrs.len();
    let mons = mon_addrs(&st).len();
    let mut children = Vec::new();
    // (Held ports: the monitors' first, then each OSD's in order.)
    let mut release = |i: usize| {
        if let Some(l) = held.get_mut(i) {
            l.take();
        }
    };
    for (i, name) in all.iter().take(mons).enumerate() {
        // A monitor's first start makes its store; restarts never do.
        let mut mon_args = daemon_args(&st, &dir, name)?;
        if first {
            mon_args.push("--mkfs".into());
        }
        release(i);
        if let Some(l) = held_http.get_mut(i) {
            l.take();
        }
        children.push(spawn(&dir, name, &mon_args, a.detach)?);
    }
    let rt = crate::config::runtime()?;
    let admin = Config::load(&conf_path)?;
    let started = rt.block_on(async {
        let mut mc = admin.mon_client().map_err(|e| MonError::Invalid(e.0))?;
        mc.deadline = Duration::from_secs(30);
        mc.get_map().await?;
        rotate_keys(&mut mc, &dir, &rotate).await?;
        Ok::<_, MonError>(())
    });
    if let Err(e) = started {
        stop_all(&dir, &all);
        return Err(CliError(format!(
            "the monitors did not start ({e}); see {}",
            dir.join("mon.0.log").display()
        )));
    }
    for i in 0..n {
        let name = format!("osd.{i}");
        release(mons + i);
        children.push(spawn(
            &dir,
            &name,
            &daemon_args(&st, &dir, &name)?,
            a.detach,
        )?);
    }
    let ready = rt.block_on(async {
        let mut mc = admin.mon_client().map_err(|e| MonError::Invalid(e.0))?;
        let t0 = Instant::now();
        loop {
            let m = mc.get_map().await?;
            if m.up_in().0 == n {
                break;
            }
            if m.flags.contains(&OsdFlag::NoUp) {
                // Started, but held down on purpose: no use waiting.
                eprintln!(
                    "warning: the cluster's noup flag is set: its OSDs stay down until `loligo osd unset noup`"
                );
                return Ok(());
            }
            // A daemon that exited (its port taken, its store refused)
            // will not come up: say which at once.
            for (c, name) in children.iter_mut().zip(&all) {
                if let Ok(Some(status)) = c.try_wait() {
                    return Err(MonError::Invalid(format!(
                        "{name} exited ({status}); see {}",
                        dir.join(format!("{name}.log")).display()
                    )));
                }
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(MonError::Timeout(format!(
                    "{} of {n} OSDs up after 60 s",
                    m.up_in().0
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if first || mc.get_map().await?.pool_by_name(DEFAULT_POOL).is_none() {
            let size = (n as u32).min(3);
            mc.call(MonRequest::Admin(Admin::PoolCreate {
                name: DEFAULT_POOL.into(),
                pg_num: a.pg_num.unwrap_or(32),
                size,
                min_size: None,
                erasure_profile: None,
            }))
            .await?;
        }
        // Until every PG is active and none waits out an earlier
        // primary's read lease (or 30 s): commands work right away.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            let v = mc.call(MonRequest::Admin(Admin::Status)).await?.value;
            let s: StatusReport = serde_json::from_value(v)
                .map_err(|e| MonError::Invalid(format!("status report: {e}")))?;
            let by = &s.pgs.by_state;
            let serving = |k: &PgState| k.is_active() && !k.contains(PgState::WAIT);
            if !by.is_empty() && by.keys().all(serving) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok::<_, MonError>(())
    });
    if let Err(e) = ready {
        stop_all(&dir, &all);
        return Err(CliError(format!(
            "the cluster did not come up: {e} (logs in {})",
            dir.display()
        )));
    }
    let s3_keys = match &st.s3_addr {
        Some(addr) => match start_gateway(&rt, &admin, &st, &dir, addr, a.detach) {
            Ok((child, keys)) => {
                children.push(child);
                Some(keys)
            }
            Err(e) => {
                stop_all(&dir, &all);
                return Err(e);
            }
        },
        None => None,
    };
    let here = std::env::current_dir().ok();
    let conf_hint = if here.as_deref().map(|h| h.join(DEFAULT_DATA_DIR)) == Some(dir.clone()) {
        String::new()
    } else {
        format!(" -c {}", conf_path.display())
    };
    println!(
        "Loligo cluster {} is up: {} ({}), {n} OSDs, data in {}",
        st.fsid,
        if mons == 1 {
            "1 monitor".to_string()
        } else {
            format!("{mons} monitors")
        },
        mon_addrs(&st).join(", "),
        dir.display()
    );
    let metrics: Vec<String> = (st.http_addrs.iter())
        .map(|h| format!("http://{h}/metrics"))
        .collect();
    println!(
        "  metrics (Prometheus, Ceph's names; served by the leading monitor): {}",
        metrics.join(", ")
    );
    println!("  loligo{conf_hint} status");
    println!("  loligo{conf_hint} put NAME FILE        (pool '{DEFAULT_POOL}' unless -p POOL)");
    println!("  loligo{conf_hint} get NAME FILE");
    println!("  loligo{conf_hint} bench 10 write");
    if let (Some(addr), Some((access, secret))) = (&st.s3_addr, &s3_keys) {
        println!("  S3: http://{addr}  access key {access}  secret key {secret}");
        println!(
            "    aws --endpoint-url http://{addr} s3 ls   (with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set to those)"
        );
    }
    if a.detach {
        println!(
            "Running in the background; stop it with: loligo down --data-dir {}",
            a.data_dir.display()
        );
        return Ok(());
    }
    println!("Press Ctrl-C to stop it.");
    rt.block_on(async {
        use tokio::signal::unix::{signal as sig, SignalKind};
        let mut term = sig(SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
        }
    });
    eprintln!("stopping...");
    stop_all(&dir, &all);
    for mut c in children {
        let _ = c.wait();
    }
    eprintln!(
        "stopped; `loligo up --data-dir {}` brings it back",
        a.data_dir.display()
    );
    Ok(())
}

/// Start the S3 gateway of `st` on `addr` once its folder is ready: the
/// gateway and the admin's S3 keys.
fn start_gateway(
    rt: &tokio::runtime::Runtime,
    admin: &Config,
    st: &State,
    dir: &Path,
    addr: &str,
    detach: bool,
) -> Result<(Child, (String, String)), CliError> {
    let keys = rt
        .block_on(async {
            let mut mc = admin.mon_client().map_err(|e| MonError::Invalid(e.0))?;
            mc.deadline = Duration::from_secs(30);
            crate::up_s3::prepare(&mut mc, dir, &st.fsid, mon_addrs(st), st.insecure).await?;
            crate::up_s3::admin_keys(&mut mc).await
        })
        .map_err(|e| CliError(format!("the S3 gateway's keys: {e}")))?;
    let name = crate::up_s3::GATEWAY;
    let mut child = spawn(dir, name, &daemon_args(st, dir, name)?, detach)?;
    let log = dir.join(format!("{name}.log"));
    crate::up_s3::wait_serving(addr, &mut child, &log)?;
    Ok((child, keys))
}

pub fn down(a: DownArgs) -> Result<(), CliError> {
    let dir = std::fs::canonicalize(&a.data_dir)
        .map_err(|e| CliError(format!("{}: {e}", a.data_dir.display())))?;
    let st =
        load_state(&dir)?.ok_or_else(|| CliError(format!("{} holds no cluster", dir.display())))?;
    let n = stop_all(&dir, &names(&st));
    if n == 0 {
        println!("nothing was running in {}", dir.display());
    } else {
        println!("stopped {n} daemons");
    }
    Ok(())
}

/// `loligo start` / `loligo stop`: one daemon of a cluster `up` made.
#[derive(Args)]
pub struct DaemonArgs {
    /// The daemon: `mon.N`, `osd.N` or `rgw.0` (the S3 gateway).
    name: String,
    /// The cluster's directory.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// (stop) Kill it at once with SIGKILL, like a crash, instead of a
    /// clean stop that first tells the monitors.
    #[arg(long)]
    kill: bool,
}

fn cluster_of(a: &DaemonArgs) -> Result<(PathBuf, State), CliError> {
    let dir = std::fs::canonicalize(&a.data_dir)
        .map_err(|e| CliError(format!("{}: {e}", a.data_dir.display())))?;
    let st =
        load_state(&dir)?.ok_or_else(|| CliError(format!("{} holds no cluster", dir.display())))?;
    daemon_args(&st, &dir, &a.name)?;
    Ok((dir, st))
}

/// Start one daemon of a cluster in the background (after `stop`, or a
/// crash).
pub fn start(a: DaemonArgs) -> Result<(), CliError> {
    if a.kill {
        return Err(CliError("--kill is for stop".into()));
    }
    let (dir, st) = cluster_of(&a)?;
    if let Some(pid) = running(&dir, &a.name) {
        return Err(CliError(format!(
            "{} is already running (pid {pid})",
            a.name
        )));
    }
    let mut args = daemon_args(&st, &dir, &a.name)?;
    let joins = a.name.starts_with("mon.") && !dir.join(&a.name).exists();
    if joins {
        args.extend(rejoin_args(&dir, &a.name)?);
    }
    let child = spawn(&dir, &a.name, &args, true)?;
    if joins {
        let addr = (mon_addrs(&st).into_iter())
            .nth(a.name[4..].parse::<usize>().unwrap_or(usize::MAX))
            .unwrap_or_default();
        println!(
            "{} has no store: started it to join the group; add it with `loligo mon add {} {addr}`",
            a.name,
            &a.name[4..]
        );
    }
    println!(
        "started {} (pid {}); log in {}",
        a.name,
        child.id(),
        dir.join(format!("{}.log", a.name)).display()
    );
    Ok(())
}

/// The arguments that start monitor `name`, whose store is gone, as a new
/// member joining the group (`--mkfs --join`): only once the group no
/// longer counts it (`mon rm`), as a wiped member must never rejoin
/// under its old id.
fn rejoin_args(dir: &Path, name: &str) -> Result<Vec<String>, CliError> {
    let id: u64 = name[4..]
        .parse()
        .map_err(|_| CliError(format!("no monitor '{name}'")))?;
    let admin = Config::load(&dir.join(CONF_NAME))?;
    let rt = crate::config::runtime()?;
    // The leader's group, which the map's monitor map follows a moment
    // later.
    let group = rt
        .block_on(async {
            let mut mc = admin.mon_client().map_err(|e| MonError::Invalid(e.0))?;
            mc.deadline = Duration::from_secs(10);
            mc.call(MonRequest::Admin(Admin::QuorumStatus)).await
        })
        .map_err(|e| {
            CliError(format!(
                "asking the monitors whether {name} is a member: {e}"
            ))
        })?
        .value;
    let member = (group["monmap"]["mons"].as_array().into_iter().flatten())
        .any(|m| m["rank"].as_u64() == Some(id));
    if member {
        return Err(CliError(format!(
            "{name} has no store but is still a member of the monitor group: remove it first \
             (`loligo mon rm {id}`), then start it again to join anew"
        )));
    }
    Ok(vec!["--mkfs".into(), "--join".into()])
}

/// Stop one daemon: cleanly (it tells the monitors first), or with
/// `--kill` at once, as a crash would.
pub fn stop(a: DaemonArgs) -> Result<(), CliError> {
    let (dir, _) = cluster_of(&a)?;
    let Some(pid) = running(&dir, &a.name) else {
        println!("{} is not running", a.name);
        return Ok(());
    };
    if a.kill {
        signal(pid, nix::sys::signal::Signal::SIGKILL);
        let t0 = Instant::now();
        while alive(pid) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(pid_path(&dir, &a.name));
    } else {
        stop_all(&dir, std::slice::from_ref(&a.name));
    }
    println!("stopped {}", a.name);
    Ok(())
}

/// The block-file size for each of `osds` new OSDs in `dir`: `asked`, or
/// 8 GiB shrunk to half the free space shared out (at least 1 GiB). The
/// block files are allocated in full, so refuse what the disk cannot hold.
fn osd_size(dir: &Path, osds: u32, asked: Option<u64>) -> Result<u64, CliError> {
    const GIB: u64 = 1 << 30;
    let free = loligo_store::free_bytes(dir)?;
    let n = u64::from(osds.max(1));
    let size =
        asked.unwrap_or_else(|| (free / 2 / n).clamp(GIB, 8 * GIB) / (256 << 20) * (256 << 20));
    // Each store also keeps a KV beside its block file.
    let needed = n * (size + (512 << 20));
    if needed > free {
        return Err(CliError(format!(
            "{osds} OSDs of {:.1} GiB need {:.1} GiB on {}, which has {:.1} GiB free: \
             use --osd-size (bytes) or fewer --osds",
            size as f64 / GIB as f64,
            needed as f64 / GIB as f64,
            dir.display(),
            free as f64 / GIB as f64
        )));
    }
    Ok(size)
}
