//! `loligo`: the one command users run: a local cluster (`up`, `down`),
//! the daemons (`mon run`, `osd run`), administration (`status`, `osd`,
//! `pool`, `ec-profile`), objects (`put`, `get`, `omap`, `xattr`,
//! `bench`), the key-value store (`kv`), and the offline tools (CRUSH, placement, erasure codes, the
//! store).
//!
//! Every subcommand has `--help`; bad input prints one `loligo: error: ...`
//! line and exits with code 2. This file only parses arguments and
//! dispatches; the work lives in the library crates.

mod admin_cmd;
mod auth_cmd;
mod config;
mod crush_bench;
mod crush_cmd;
mod daemon_cmd;
mod dashboard_cmd;
mod data_cmd;
mod ec_cmd;
mod kv_cmd;
mod lab_cmd;
mod latency;
mod malloc;
mod map_pgs_cmd;
mod mon_cmd;
mod osd_df;
mod osd_replace_cmd;
mod osdmap_cmd;
mod report_cmd;
mod s3_cmd;
mod scale_cmd;
mod scale_peering;
mod scrub_cmd;
mod store_cmd;
mod store_edit;
mod up_cmd;
mod up_s3;

/// jemalloc for small blocks, the C library's for large ones (`malloc`).
#[global_allocator]
static ALLOC: malloc::Split = malloc::Split;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Loligo: a distributed object store in the design of Ceph's RADOS.
#[derive(Parser)]
#[command(name = "loligo", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    conn: config::ConnArgs,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start a local cluster (1 monitor, N OSDs) in DIR; Ctrl-C stops it.
    Up(up_cmd::UpArgs),
    /// Stop a cluster started with `up --detach`.
    Down(up_cmd::DownArgs),
    /// Start one daemon (`osd.N`, `mon.0`) of a cluster `up` made, e.g.
    /// after `stop` or a crash.
    Start(up_cmd::DaemonArgs),
    /// Stop one daemon of a cluster `up` made (`--kill`: SIGKILL, like a
    /// crash).
    Stop(up_cmd::DaemonArgs),
    /// Cluster health, daemons, PG states, usage, client and recovery I/O.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Print one line a second (PG states, degraded and misplaced
        /// object copies with a progress bar, recovery and client rates)
        /// until Ctrl-C.
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// The status, then the cluster log as it happens, until Ctrl-C
    /// (Ceph's `ceph -w`).
    #[command(short_flag = 'w', long_flag = "watch")]
    Watch {
        /// The least level shown: debug, info, warn or error.
        #[arg(long, value_enum, default_value = "info")]
        level: report_cmd::Level,
    },
    /// The cluster log (Ceph's `log last`): OSDs booting, down, out and
    /// in, pools made and changed, flags, health checks raised, updated
    /// and cleared.
    Log {
        #[arg(value_parser = ["last"])]
        what: String,
        /// How many entries, the newest.
        #[arg(default_value_t = 20)]
        n: u32,
        /// The least level shown: debug, info, warn or error.
        #[arg(value_enum, default_value = "info")]
        level: report_cmd::Level,
        /// Print JSON in Ceph's shape (an array of {"name", "stamp",
        /// "seq", "channel", "priority", "message"}).
        #[arg(long)]
        json: bool,
    },
    /// Cluster health as Ceph's `ceph health` prints it: the status and
    /// its checks' summaries on one line (`detail`: each check with its
    /// code, `[WRN] OSD_DOWN: 1 osds down`, and a line per OSD or PG).
    Health {
        /// `detail`: every check on a line of its own, with its details.
        #[arg(value_parser = ["detail"])]
        detail: Option<String>,
        /// Print JSON in Ceph's shape ({"status", "checks": {CODE:
        /// {"severity", "summary", "detail"}}}).
        #[arg(long)]
        json: bool,
    },
    /// The cluster's space and each pool's: stored, objects, raw use, and
    /// how much more it can take before the first OSD is full (Ceph's
    /// `df`; `detail` adds the quota and compression columns, `N/A` and
    /// `0 B`: Loligo has neither).
    Df {
        #[arg(value_parser = ["detail"])]
        detail: Option<String>,
        /// Print JSON in Ceph's shape ({"stats", "pools"}).
        #[arg(long)]
        json: bool,
    },
    /// The dashboard's access tokens: `create-token`, `ls-tokens`,
    /// `revoke-tokens` (the page is served with the metrics: `mgr
    /// services` names it).
    #[command(subcommand)]
    Dashboard(dashboard_cmd::DashboardCmd),
    /// The S3 gateway (`s3 run`) and its users and keys (`s3 user
    /// create | rm | info | ls`, `s3 key create | rm`), which the
    /// monitors keep apart from the cluster map.
    #[command(subcommand)]
    S3(s3_cmd::S3Cmd),
    /// The leading monitor's HTTP services (`services`), as Ceph's `mgr
    /// services` prints them: {"dashboard": URL, "prometheus": URL}. Loligo has no manager:
    /// the monitors serve what Ceph's manager would.
    Mgr {
        #[arg(value_parser = ["services"])]
        what: String,
        /// Accepted for Ceph's habit; the answer is JSON either way.
        #[arg(long)]
        json: bool,
    },
    /// Monitors: run a daemon; add, rm, stat.
    #[command(subcommand)]
    Mon(admin_cmd::MonCmd),
    /// The upmap balancer (Ceph's, in upmap mode): `on`, `off`, `status`.
    /// While on and every PG is active+clean, the monitors add
    /// pg_upmap_items that bring each OSD within one PG of its weighted
    /// target, moving at most 5% of the PG copies at a time.
    Balancer {
        #[arg(value_parser = ["on", "off", "status"])]
        what: String,
    },
    /// The monitor group as JSON: members, leader, term and the quorum
    /// (the members the leader hears), as Ceph's `quorum_status`.
    #[command(name = "quorum_status", alias = "quorum-status")]
    QuorumStatus {
        /// Accepted for Ceph's habit; the answer is JSON either way.
        #[arg(long)]
        json: bool,
    },
    /// OSDs: tree, dump, down/out/in, reweight, rm; `osd run` starts a daemon.
    #[command(subcommand)]
    Osd(admin_cmd::OsdCmd),
    /// Pools: create, ls, get, set, rm.
    #[command(subcommand)]
    Pool(admin_cmd::PoolCmd),
    /// Placement groups: ls (each PG's state, sets, unfound objects, scrub
    /// stamps, and what a down one waits for), mark-unfound-lost, scrub,
    /// deep-scrub, repair.
    #[command(subcommand)]
    Pg(admin_cmd::PgCmd),
    /// The objects a PG's last scrub found inconsistent, each with the
    /// OSDs whose copy is wrong and how (like `rados
    /// list-inconsistent-obj`).
    #[command(name = "list-inconsistent-obj")]
    ListInconsistentObj {
        /// The PG, as `pg ls` prints it (POOL.SEED).
        pg: String,
        #[command(flatten)]
        json: admin_cmd::JsonFlag,
    },
    /// A command to one OSD (like `ceph tell osd.N ...`): `injectdataerr
    /// POOL OBJ` makes its reads of OBJ's copy fail until the copy is
    /// rewritten (OSDs started with `--debug-inject-read-err` only).
    Tell {
        /// The OSD (`osd.N`).
        target: String,
        #[command(subcommand)]
        cmd: scrub_cmd::TellCmd,
    },
    /// Erasure-code profiles: set, get, ls, rm (a pool made with `pool create --erasure PROFILE` uses one).
    #[command(subcommand, name = "ec-profile")]
    EcProfile(admin_cmd::EcProfileCmd),
    /// Store FILE (- for stdin) as object NAME.
    Put {
        name: String,
        file: std::path::PathBuf,
        /// Write FILE into the object at this byte offset, keeping the
        /// rest of it (as `rados put --offset`), instead of replacing it.
        #[arg(long)]
        offset: Option<u64>,
    },
    /// Write object NAME to FILE (- for stdout).
    Get {
        name: String,
        file: std::path::PathBuf,
    },
    /// Remove objects.
    Rm { names: Vec<String> },
    /// Size and version of an object.
    Stat { name: String },
    /// List a pool's objects.
    Ls,
    /// Tell the OSDs how an object will be used (as `rados
    /// set-alloc-hint`): its expected size, the expected size of each
    /// write, and flags. Creates the object if it is missing. A pool in
    /// `passive` compression mode compresses only objects hinted
    /// `compressible`, one in `aggressive` mode all but those hinted
    /// `incompressible`.
    SetAllocHint(data_cmd::AllocHintArgs),
    /// An object's omap: set, get, ls, rm, clear.
    Omap {
        #[command(subcommand)]
        cmd: data_cmd::OmapCmd,
    },
    /// An object's xattrs: set, get, ls, rm.
    Xattr {
        #[command(subcommand)]
        cmd: data_cmd::XattrCmd,
    },
    /// A key-value store on object maps in the pool: create, put, get, rm,
    /// scan, check, clean, bench, stats.
    #[command(subcommand)]
    Kv(kv_cmd::KvCmd),
    /// Benchmark the cluster like `rados bench`: SECONDS write|seq|rand,
    /// or randwrite (--io-size overwrites of what a write run left, as
    /// `rbd bench --io-pattern rand` does).
    Bench(data_cmd::BenchArgs),
    /// Tools for fault experiments: `lab client`, a long-lived client
    /// session driven from stdin (it keeps its map when cut off from the
    /// monitors). The hosts harness is `tools/hosts.sh`.
    #[command(subcommand)]
    Lab(lab_cmd::LabCmd),
    /// CRUSH map tools (crushtool-compatible test, compile, decompile, tree, bench),
    /// and the running cluster's map (set, get).
    #[command(subcommand)]
    Crush(crush_cmd::CrushCmd),
    /// Placement queries in the way of osdmaptool.
    #[command(subcommand)]
    Osdmap(osdmap_cmd::OsdmapCmd),
    /// Erasure codes (RS, Zigzag, LRC): recovery read plans and speed.
    #[command(subcommand)]
    Ec(ec_cmd::EcCmd),
    /// The BlueStore-style object store: mkfs, fsck, crash-test workload.
    #[command(subcommand)]
    Store(store_cmd::StoreCmd),
    /// Users and keys: add, get, ls, rm, caps, rotate (kept by the
    /// monitors); ca, keyring (made offline from the cluster's authority).
    #[command(subcommand)]
    Auth(auth_cmd::AuthCmd),
}

/// A user-facing failure: printed as one line, exit code 2.
#[derive(Debug)]
pub struct CliError(pub String);

impl<E: std::fmt::Display> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

/// Parse arguments; usage errors become one `loligo: error:` line (exit 2),
/// `--help` and `--version` print normally.
fn parse_args() -> Result<Cli, ExitCode> {
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            let text = e.render().to_string();
            let msg: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:"))
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with("For more information")
                        && !l.starts_with("tip:")
                })
                .collect();
            let msg = msg.join(" ");
            let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
            eprintln!("loligo: error: {msg} (see --help)");
            Err(ExitCode::from(2))
        }
    }
}

/// `loligo ... | head` closes our stdout early: end quietly, with the
/// status a process killed by SIGPIPE would have, instead of a panic
/// message (Rust ignores SIGPIPE, so the write fails and `println!`
/// panics).
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    malloc::tune();
    quiet_broken_pipe();
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match loligo_proto::inject::install_from_env() {
        Ok(Some(f)) => eprintln!("loligo: injecting message faults ({f:?})"),
        Ok(None) => {}
        Err(e) => {
            eprintln!("loligo: error: {e}");
            return ExitCode::from(2);
        }
    }
    let conn = &cli.conn;
    let res = match cli.cmd {
        Cmd::Up(a) => up_cmd::up(a),
        Cmd::Down(a) => up_cmd::down(a),
        Cmd::Start(a) => up_cmd::start(a),
        Cmd::Stop(a) => up_cmd::stop(a),
        Cmd::Status { json, watch } => admin_cmd::status(conn, json, watch),
        Cmd::Watch { level } => report_cmd::watch(conn, level),
        Cmd::Log {
            what: _,
            n,
            level,
            json,
        } => report_cmd::log_last(conn, n, level, json),
        Cmd::Health { detail, json } => admin_cmd::health(conn, detail.is_some(), json),
        Cmd::Mon(admin_cmd::MonCmd::Run(a)) => daemon_cmd::mon(a),
        Cmd::Mon(c) => mon_cmd::mon(conn, c),
        Cmd::QuorumStatus { json: _ } => mon_cmd::quorum_status(conn),
        Cmd::Mgr { what: _, json: _ } => mon_cmd::mgr_services(conn),
        Cmd::Dashboard(c) => dashboard_cmd::dashboard(conn, c),
        Cmd::S3(c) => s3_cmd::s3(conn, c),
        Cmd::Df { detail, json } => report_cmd::df(conn, detail.is_some(), json),
        Cmd::Balancer { what } => mon_cmd::balancer(conn, &what),
        Cmd::Osd(c) => admin_cmd::osd(conn, c),
        Cmd::Pool(c) => admin_cmd::pool(conn, c),
        Cmd::Pg(c) => admin_cmd::pg(conn, c),
        Cmd::ListInconsistentObj { pg, json } => scrub_cmd::list_inconsistent(conn, &pg, json.json),
        Cmd::Tell { target, cmd } => scrub_cmd::tell(conn, &target, cmd),
        Cmd::EcProfile(c) => admin_cmd::ec_profile(conn, c),
        Cmd::Put { name, file, offset } => {
            data_cmd::data(conn, data_cmd::DataCmd::Put { name, file, offset })
        }
        Cmd::Get { name, file } => data_cmd::data(conn, data_cmd::DataCmd::Get { name, file }),
        Cmd::Rm { names } => data_cmd::data(conn, data_cmd::DataCmd::Rm { names }),
        Cmd::Stat { name } => data_cmd::data(conn, data_cmd::DataCmd::Stat { name }),
        Cmd::Ls => data_cmd::data(conn, data_cmd::DataCmd::Ls),
        Cmd::SetAllocHint(a) => data_cmd::set_alloc_hint(conn, a),
        Cmd::Omap { cmd } => data_cmd::omap(conn, cmd),
        Cmd::Xattr { cmd } => data_cmd::xattr(conn, cmd),
        Cmd::Kv(c) => kv_cmd::run(conn, c),
        Cmd::Bench(a) => data_cmd::bench(conn, a),
        Cmd::Lab(c) => lab_cmd::lab(conn, c),
        Cmd::Crush(c @ (crush_cmd::CrushCmd::Set(_) | crush_cmd::CrushCmd::Get(_))) => {
            crush_cmd::live(conn, c)
        }
        Cmd::Crush(c) => crush_cmd::run(c),
        Cmd::Osdmap(c) => osdmap_cmd::run(c),
        Cmd::Ec(c) => ec_cmd::run(c),
        Cmd::Store(c) => store_cmd::run(c),
        Cmd::Auth(c) => auth_cmd::run(conn, c),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg)) if msg.contains("Broken pipe") => ExitCode::from(141),
        Err(CliError(msg)) => {
            eprintln!("loligo: error: {msg}");
            ExitCode::from(2)
        }
    }
}
