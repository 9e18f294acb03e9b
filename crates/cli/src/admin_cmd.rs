//! Cluster administration the way `ceph` has it: `status`, `osd ...`,
//! `pool ...`, `ec-profile ...`. Human output by default, `--json` for
//! scripts.
//!
//! It must never change the cluster except through the monitors' admin
//! commands.

use crate::config::ConnArgs;
use crate::CliError;
use clap::{Args, Subcommand, ValueEnum};
use loligo_monc::protocol::{Admin, Health, MonReply, MonRequest, PgRow, StatusReport};
use loligo_types::{EcPlugin, PgState};
use serde_json::Value;

#[derive(Args)]
pub struct JsonFlag {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum OsdCmd {
    /// Run an OSD daemon in the foreground.
    Run(Box<crate::daemon_cmd::OsdArgs>),
    /// The CRUSH hierarchy with each OSD's state.
    Tree(JsonFlag),
    /// Each OSD's weights, space, use and PG count (PGs on every OSD of
    /// their up sets in the live map), with the spread: min/max variance
    /// from the mean use, its standard deviation, and the PG counts'
    /// (Ceph's `osd df`; `tree` adds the CRUSH buckets, each with the
    /// sums of the OSDs under it).
    Df {
        #[arg(value_parser = ["tree"])]
        tree: Option<String>,
        /// Print JSON in Ceph's shape ({"nodes", "summary"}).
        #[arg(long)]
        json: bool,
    },
    /// Write the OSD map the answering monitor holds (its own, leader or
    /// not; Ceph's `osd getmap`) to FILE, in the encoding `loligo osdmap`
    /// reads. With `--mon ADDR` one monitor's map can be compared with
    /// another's.
    Getmap {
        #[arg(short = 'o', long = "out", value_name = "FILE")]
        out: std::path::PathBuf,
    },
    /// The OSD map as Ceph's `osd dump` prints it: epoch, flags, ratios,
    /// a line per pool and per OSD, the overrides (`--json`: everything,
    /// the monitor map and write-set records included).
    Dump(JsonFlag),
    /// Each up OSD's store commit and apply latency in ms, the mean over
    /// its last report's interval (Ceph's `osd perf`).
    Perf(JsonFlag),
    /// Where object NAME of POOL lives: its PG, CRUSH's (up) set and the
    /// acting set with their primaries (an erasure-coded pool's position
    /// i holds shard i; -1 is an empty position).
    Map {
        pool: String,
        name: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Mark OSDs down (they re-assert themselves if alive).
    Down { ids: Vec<i32> },
    /// Mark OSDs out: CRUSH maps their PGs to other OSDs, which receive
    /// the objects (from the PG log when it covers what they missed,
    /// otherwise by backfill); the old OSDs serve until they are done.
    Out { ids: Vec<i32> },
    /// Mark OSDs in: their PGs move back (recovered the same way).
    In { ids: Vec<i32> },
    /// Set an OSD's reweight (0..1).
    Reweight { id: i32, weight: f64 },
    /// Remove a down OSD from the map and CRUSH.
    Rm { id: i32 },
    /// Declare a down OSD's data lost, so that PGs waiting for it (state
    /// `down`) go on with what the other OSDs hold. Writes only it held are
    /// gone; on an erasure-coded pool, objects fewer than k up OSDs hold
    /// are removed.
    Lost {
        id: i32,
        #[arg(long = "yes-i-really-mean-it")]
        confirm: bool,
    },
    /// Set a cluster-wide flag (Ceph's): `noout` (down OSDs are not
    /// marked out: maintenance), `noin` (booting OSDs are not marked in),
    /// `noup` (boots wait), `nodown` (failure reports mark no OSD down),
    /// `nobackfill`, `norebalance` (no backfill of PGs that lack no
    /// copy), `norecover` (no background log recovery), `noscrub` (no
    /// scrub starts by the schedule; `pg scrub` still runs),
    /// `nodeep-scrub`. Health warns while one is set.
    Set { flag: String },
    /// Clear a flag `osd set` set.
    Unset { flag: String },
    /// Whether OSDs may stop now without any PG becoming unavailable
    /// (Ceph's `osd ok-to-stop`): each PG on them must be active and keep
    /// at least min_size up members. Fails (exit 2) naming the PGs if not.
    #[command(name = "ok-to-stop")]
    OkToStop {
        #[arg(required = true)]
        ids: Vec<i32>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Whether OSDs hold nothing the cluster still needs (Ceph's `osd
    /// safe-to-destroy`): no PG placed on them or recorded with them, and
    /// every PG reported. Fails naming why not.
    #[command(name = "safe-to-destroy")]
    SafeToDestroy {
        #[arg(required = true)]
        ids: Vec<i32>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Mark a down OSD destroyed: out, its key revoked, whatever it holds
    /// given up; its id and CRUSH place are kept for a replacement
    /// (`osd new ID`, then start a fresh store under the id). Refused
    /// unless it is safe to destroy, or --force.
    Destroy {
        id: i32,
        #[arg(long = "yes-i-really-mean-it")]
        confirm: bool,
        /// Destroy it even if PGs still need it (their data on it is lost).
        #[arg(long)]
        force: bool,
    },
    /// As destroy, then remove the OSD from the map and CRUSH for good.
    Purge {
        id: i32,
        #[arg(long = "yes-i-really-mean-it")]
        confirm: bool,
        /// Purge it even if PGs still need it (their data on it is lost).
        #[arg(long)]
        force: bool,
    },
    /// Make way for an OSD: a destroyed ID taken again by its replacement,
    /// or (no ID) the lowest unused id. Prints the id; the new keyring
    /// (none in an --insecure cluster, or with -i) goes to FILE, or is
    /// printed.
    New {
        id: Option<i32>,
        #[arg(short = 'o', long = "out", value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        /// Record the key of this keyring, made offline (`auth keyring
        /// osd.N --ca DIR`), instead of having the monitors make one (they
        /// make none without --authority).
        #[arg(
            short = 'i',
            long = "in",
            value_name = "KEYRING",
            conflicts_with = "out"
        )]
        given: Option<std::path::PathBuf>,
    },
    /// Share of a device in use at which writes to its PGs are refused
    /// (default 0.95; at least the backfillfull ratio, at most 1).
    #[command(name = "set-full-ratio")]
    SetFullRatio { ratio: f64 },
    /// Share of a device in use at which nothing is backfilled onto it
    /// (default 0.90; between the nearfull and full ratios).
    #[command(name = "set-backfillfull-ratio")]
    SetBackfillfullRatio { ratio: f64 },
    /// Share of a device in use at which health warns (default 0.85; at
    /// most the backfillfull ratio).
    #[command(name = "set-nearfull-ratio")]
    SetNearfullRatio { ratio: f64 },
    /// Edit the cluster's CRUSH map: add, move, rm, tree.
    #[command(subcommand)]
    Crush(CrushLiveCmd),
    /// Pools, as `loligo pool` (Ceph's `osd pool ...` spelling).
    #[command(subcommand)]
    Pool(PoolCmd),
}

#[derive(Subcommand)]
pub enum CrushLiveCmd {
    /// Place osd.ID under HOST (created under the root if missing) with WEIGHT.
    Add { id: i32, host: String, weight: f64 },
    /// Move bucket NAME, or osd.ID, under bucket PARENT.
    Move { name: String, parent: String },
    /// Place osd.ID at a location of TYPE=NAME pairs, lowest first or
    /// not (`host=h2`, `host=h2 rack=r1`): buckets missing are made, up
    /// to the first that exists; its weight stays. An OSD started with
    /// another --host moves to that host on its own (Ceph's
    /// osd_crush_update_on_start).
    #[command(name = "set-location")]
    SetLocation {
        /// osd.ID (or ID).
        osd: String,
        #[arg(required = true, value_name = "TYPE=NAME")]
        location: Vec<String>,
    },
    /// Set the CRUSH weight of osd.ID (its share of data: by custom its
    /// size in TiB).
    Reweight {
        /// osd.ID (or ID).
        osd: String,
        weight: f64,
    },
    /// Remove a device or an empty bucket.
    Rm { name: String },
    /// The hierarchy (same as `osd tree`).
    Tree(JsonFlag),
}

#[derive(Subcommand)]
pub enum PoolCmd {
    /// Create a pool.
    ///
    /// Ceph's form works too: `pool create NAME [PG_NUM [PGP_NUM]]
    /// [replicated|erasure [PROFILE]]`. PGP_NUM, if given, must equal
    /// PG_NUM (pgp_num follows pg_num); `erasure`
    /// without a profile is refused, as Loligo has no default profile.
    Create {
        name: String,
        /// Ceph's positional form: `[PG_NUM [PGP_NUM]] [replicated|erasure [PROFILE]]`.
        #[arg(value_name = "CEPH_FORM")]
        ceph_form: Vec<String>,
        /// Number of PGs (default 32).
        #[arg(long)]
        pg_num: Option<u32>,
        /// Replicas (default 3; an erasure-coded pool has k+m shards).
        #[arg(long)]
        size: Option<u32>,
        /// Fewest replicas (or shards) that accept writes (default
        /// size - size/2; erasure-coded: k+1, at least k).
        #[arg(long)]
        min_size: Option<u32>,
        /// Make it erasure-coded with this profile (see `ec-profile`):
        /// each object is striped into k data and m coding shards, one
        /// per OSD, by an indep CRUSH rule. Omap is refused on such pools.
        #[arg(long, value_name = "PROFILE")]
        erasure: Option<String>,
    },
    /// List pools.
    Ls(JsonFlag),
    /// Show a pool's settings (JSON).
    Get { name: String },
    /// Change a setting: size, min_size, pg_num, pgp_num, crush_rule, object_size_max, name,
    /// pps_mode, balance_param, compression_mode (none, passive, aggressive, force: as Ceph's;
    /// clients send no hints, so passive compresses nothing and aggressive all that force does),
    /// compression_algorithm (lz4 or none; compression reaches writes from then on),
    /// read_coalesce (erasure-coded pools: conservative or aggressive, how recovery and
    /// degraded reads group a shard's needed elements into reads). A larger pg_num splits every PG in place; the monitors then
    /// raise pgp_num to it in steps that keep misplaced objects under 5%, and the new PGs move.
    /// A smaller one merges PGs: the monitors lower pgp_num in such steps, then the PGs that
    /// merge hold writes for a few seconds and fold together (`pool get` shows pg_num_target
    /// meanwhile; setting the current count calls it off). Settings that remap PGs (size,
    /// crush_rule, pps_mode) move data by log-based recovery or backfill.
    Set {
        name: String,
        key: String,
        value: String,
    },
    /// Delete a pool and all its objects: give the name twice.
    Rm {
        name: String,
        /// The name again, to confirm.
        confirm: String,
    },
    /// Scrub every PG of the pool (like `ceph osd pool scrub`).
    Scrub { name: String },
    /// Deep-scrub every PG of the pool.
    DeepScrub { name: String },
    /// Deep-scrub every PG of the pool and repair what it finds.
    Repair { name: String },
    /// Each pool's (or NAME's) client and recovery I/O per second, over
    /// the OSDs' last two reports, and its degraded and misplaced copies
    /// (Ceph's `osd pool stats`).
    Stats {
        name: Option<String>,
        /// Print JSON in Ceph's shape ([{"pool_name", "pool_id",
        /// "recovery", "recovery_rate", "client_io_rate"}]).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PluginArg {
    /// Reed-Solomon (Cauchy matrix over GF(2^8)).
    Rs,
    /// Zigzag: MDS with element-level recovery reads.
    Zigzag,
    /// Basic Pyramid LRC: the data in `l` groups, each with a local
    /// parity, and `m - 1` global parities.
    Lrc,
}

#[derive(Subcommand)]
pub enum EcProfileCmd {
    /// Define (or redefine, if unused) a profile.
    ///
    /// Ceph's form works too: `ec-profile set NAME k=4 m=2 [plugin=rs]`
    /// (keys k, m, l, s, plugin, stripe_unit, alignment, optimal; plugin
    /// `jerasure` or `isa` is taken as `rs`, a Reed-Solomon code with
    /// Loligo's own Cauchy matrix). Any other key is refused.
    Set {
        name: String,
        /// Ceph-style settings, e.g. `k=4 m=2` (they override the flags).
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
        /// The code: Reed-Solomon, Zigzag or LRC [default: rs].
        #[arg(long, value_enum)]
        plugin: Option<PluginArg>,
        /// Data shards (here or as k=K).
        #[arg(long)]
        k: Option<u32>,
        /// Parity shards, the OSDs a PG may lose and still be read (here
        /// or as m=M).
        #[arg(long)]
        m: Option<u32>,
        /// Zigzag duplication.
        #[arg(long, default_value_t = 1)]
        s: u32,
        /// LRC local groups.
        #[arg(long, default_value_t = 2)]
        l: u32,
        /// Zigzag optimal row order.
        #[arg(long)]
        optimal: bool,
        /// Element alignment in bytes.
        #[arg(long, default_value_t = 4096)]
        alignment: u32,
        /// Chunk bytes per full stripe (Ceph's stripe_unit): a multiple of
        /// the code's rows x alignment. Default: 4 KiB for rs and lrc,
        /// about 1 MiB for zigzag (elements big enough for efficient
        /// element-level recovery reads).
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        stripe_unit: u32,
    },
    /// Print a profile.
    Get { name: String },
    /// List the profiles.
    Ls,
    /// Remove a profile no pool uses.
    Rm { name: String },
}

/// An `ec-profile set`'s settings, from its flags and then its Ceph-style
/// `KEY=VALUE` pairs.
#[derive(Debug, PartialEq)]
struct ProfileArgs {
    plugin: PluginArg,
    k: Option<u32>,
    m: Option<u32>,
    s: u32,
    l: u32,
    optimal: bool,
    alignment: u32,
    stripe_unit: u32,
}

impl ProfileArgs {
    /// Apply Ceph-style `KEY=VALUE` pairs; an unknown key, a value that is
    /// not a number where one is needed, or an unknown plugin is an error
    /// that names it.
    fn apply(&mut self, pairs: &[String]) -> Result<(), String> {
        for pair in pairs {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!("'{pair}' is not KEY=VALUE (e.g. k=4 m=2)"));
            };
            let num = || {
                value
                    .parse::<u32>()
                    .map_err(|_| format!("{key}={value}: {key} takes a whole number"))
            };
            match key {
                "k" => self.k = Some(num()?),
                "m" => self.m = Some(num()?),
                "l" => self.l = num()?,
                "s" => self.s = num()?,
                "alignment" => self.alignment = num()?,
                "stripe_unit" => self.stripe_unit = num()?,
                "optimal" => {
                    self.optimal = match value {
                        "true" | "1" | "yes" => true,
                        "false" | "0" | "no" => false,
                        _ => return Err(format!("optimal={value}: optimal takes true or false")),
                    }
                }
                "plugin" => {
                    self.plugin = match value {
                        "rs" | "jerasure" | "isa" => PluginArg::Rs,
                        "zigzag" => PluginArg::Zigzag,
                        "lrc" => PluginArg::Lrc,
                        _ => {
                            return Err(format!(
                                "plugin={value}: Loligo's codes are rs (also taken for \
                                 jerasure and isa), zigzag and lrc"
                            ));
                        }
                    }
                }
                _ => {
                    return Err(format!(
                        "'{key}' is not a profile key Loligo takes (k, m, l, s, plugin, \
                         stripe_unit, alignment, optimal)"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Read Ceph's positional `pool create` arguments
/// (`[PG_NUM [PGP_NUM]] [replicated|erasure [PROFILE]]`) beside the flags,
/// and return the PG count (default 32) and the erasure profile, if any. A
/// value given both ways, a PGP_NUM other than PG_NUM, `erasure` without a
/// profile and anything left over are errors that say so.
fn pool_create_ceph_form(
    args: &[String],
    pg_num_flag: Option<u32>,
    erasure_flag: Option<String>,
) -> Result<(u32, Option<String>), String> {
    let mut rest = args.iter().map(String::as_str).peekable();
    let mut numbers = Vec::new();
    while let Some(n) = rest.peek().and_then(|a| a.parse::<u32>().ok()) {
        numbers.push(n);
        rest.next();
    }
    let pg_num = match (numbers.first(), pg_num_flag) {
        (Some(_), Some(_)) => {
            return Err("PG_NUM is given twice: as an argument and as --pg-num".into())
        }
        (Some(&n), None) | (None, Some(n)) => n,
        (None, None) => 32,
    };
    if let Some(&pgp) = numbers.get(1) {
        if pgp != pg_num {
            return Err(format!(
                "PGP_NUM {pgp} differs from PG_NUM {pg_num}: pgp_num follows pg_num \
                 (give both equal, or PG_NUM alone)"
            ));
        }
    }
    if numbers.len() > 2 {
        return Err(format!(
            "'{}' is a third number: the form is [PG_NUM [PGP_NUM]]",
            numbers[2]
        ));
    }
    let erasure = match rest.next() {
        None => erasure_flag,
        Some("replicated") => {
            if erasure_flag.is_some() {
                return Err("'replicated' and --erasure contradict each other".into());
            }
            None
        }
        Some("erasure") => {
            let Some(profile) = rest.next() else {
                return Err(
                    "'erasure' needs a profile name: Loligo has no default profile \
                            (make one with `ec-profile set NAME k=4 m=2`)"
                        .into(),
                );
            };
            if erasure_flag.is_some() {
                return Err(
                    "the erasure profile is given twice: as an argument and as --erasure".into(),
                );
            }
            Some(profile.to_string())
        }
        Some(other) => {
            return Err(format!(
                "'{other}' is not a pool type: the form is [PG_NUM [PGP_NUM]] \
                 [replicated|erasure [PROFILE]]"
            ));
        }
    };
    if let Some(extra) = rest.next() {
        return Err(format!(
            "'{extra}' is left over: a CRUSH rule cannot be named at creation \
             (set it after with `pool set NAME crush_rule RULE_ID`)"
        ));
    }
    Ok((pg_num, erasure))
}

/// Send one admin request and return the reply.
pub fn call(conn: &ConnArgs, req: MonRequest) -> Result<MonReply, CliError> {
    let cfg = conn.config()?;
    let rt = crate::config::runtime()?;
    let mut mc = cfg.mon_client()?;
    rt.block_on(async move {
        mc.deadline = std::time::Duration::from_secs(20);
        mc.call(req).await.map_err(|e| cfg.explain(e))
    })
}

pub fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// `osd ok-to-stop ID...`: Ceph's answer, or an error naming the PGs.
fn ok_to_stop(conn: &ConnArgs, ids: Vec<i32>, json: bool) -> Result<(), CliError> {
    let shown: Vec<String> = ids.iter().map(i32::to_string).collect();
    let v = call(conn, MonRequest::Admin(Admin::OsdOkToStop { ids }))?.value;
    if json {
        print_json(&v);
    }
    let names = |k: &str| -> Vec<String> {
        (v[k].as_array().into_iter().flatten())
            .filter_map(|p| p.as_str().map(String::from))
            .collect()
    };
    if v["ok_to_stop"] != true {
        let bad = names("bad_become_inactive");
        return Err(CliError(format!(
            "unsafe to stop osd(s) at this time ({} PGs are or would become offline: {})",
            bad.len(),
            bad.join(" ")
        )));
    }
    if !json {
        println!(
            "OSD(s) {} are ok to stop without reducing availability, provided there are no \
             other concurrent failures or interventions. {} PGs are likely to be degraded (but \
             remain available) as a result.",
            shown.join(","),
            names("ok_become_degraded").len()
        );
    }
    Ok(())
}

/// An OSD named `osd.N` or `N`.
fn osd_id(name: &str) -> Result<i32, CliError> {
    (name.strip_prefix("osd.").unwrap_or(name).parse::<i32>())
        .ok()
        .filter(|id| *id >= 0)
        .ok_or_else(|| CliError(format!("'{name}' is not an OSD (osd.N)")))
}

/// `osd set-{which}-ratio RATIO`.
fn set_ratio(conn: &ConnArgs, which: &str, ratio: f64) -> Result<(), CliError> {
    let which = which.to_string();
    changed(&call(
        conn,
        MonRequest::Admin(Admin::OsdSetRatio { which, ratio }),
    )?);
    Ok(())
}

fn changed(r: &MonReply) {
    match r.value.get("message").and_then(Value::as_str) {
        Some(m) => println!("{m}"),
        None => println!("done (map epoch {})", r.epoch),
    }
}

pub fn status(conn: &ConnArgs, json: bool, watch: bool) -> Result<(), CliError> {
    if watch {
        return status_watch(conn, json);
    }
    let v = call(conn, MonRequest::Admin(Admin::Status))?.value;
    if json {
        print_json(&v);
        return Ok(());
    }
    let s: StatusReport = serde_json::from_value(v)
        .map_err(|e| CliError(format!("the monitor's status report does not parse: {e}")))?;
    print!("{}", status_text(&s));
    Ok(())
}

/// `health [detail]`: the status report's health, as `ceph health`.
pub fn health(conn: &ConnArgs, detail: bool, json: bool) -> Result<(), CliError> {
    let v = call(conn, MonRequest::Admin(Admin::Status))?.value;
    let s: StatusReport = serde_json::from_value(v)
        .map_err(|e| CliError(format!("the monitor's status report does not parse: {e}")))?;
    if json {
        let v = serde_json::to_value(&s.health)
            .map_err(|e| CliError(format!("cannot print the health: {e}")))?;
        print_json(&v);
        return Ok(());
    }
    print!("{}", health_text(&s.health, detail));
    Ok(())
}

/// Health as `ceph health` prints it: the status, then the checks'
/// summaries joined on the same line; with `detail`, each check on a line
/// of its own (`[WRN] CODE: summary`) followed by its detail lines.
fn health_text(h: &Health, detail: bool) -> String {
    let checks = h.ordered();
    let summaries: Vec<&str> = checks
        .iter()
        .map(|(_, c)| c.summary.message.as_str())
        .collect();
    let mut out = match summaries.is_empty() {
        true => format!("{}\n", h.status.name()),
        false => format!("{} {}\n", h.status.name(), summaries.join("; ")),
    };
    if detail {
        for (code, c) in checks {
            out += &format!("{} {code}: {}\n", c.severity.tag(), c.summary.message);
            for d in &c.detail {
                out += &format!("    {}\n", d.message);
            }
        }
    }
    out
}

/// `status --watch`: one line a second until interrupted.
fn status_watch(conn: &ConnArgs, json: bool) -> Result<(), CliError> {
    let mut most_left = 0u64;
    loop {
        let v = call(conn, MonRequest::Admin(Admin::Status))?.value;
        if json {
            println!("{v}");
        } else {
            let s: StatusReport = serde_json::from_value(v).map_err(|e| {
                CliError(format!("the monitor's status report does not parse: {e}"))
            })?;
            let u = &s.usage;
            most_left = most_left.max(u.degraded_objects + u.misplaced_objects);
            println!("{}", watch_line(&s, most_left, &clock()));
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// The wall clock as HH:MM:SS (UTC).
fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "{:02}:{:02}:{:02}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

/// One `status --watch` line: PG states, degraded and misplaced object
/// copies with a progress bar against the most seen in this watch
/// (`most_left`), unfound objects, recovery and client rates.
fn watch_line(s: &StatusReport, most_left: u64, at: &str) -> String {
    let mut states: Vec<_> = s.pgs.by_state.iter().collect();
    states.sort_by(|a, b| b.1.cmp(a.1).then(a.0.to_string().cmp(&b.0.to_string())));
    let pgs: Vec<String> = states.iter().map(|(st, n)| format!("{n} {st}")).collect();
    let health = s.health.status.name();
    let mut line = format!("{at}  {health}; {} pgs: {}", s.pgs.total, pgs.join(", "));
    let (d, m) = (s.usage.degraded_objects, s.usage.misplaced_objects);
    if most_left > 0 {
        let done = most_left.saturating_sub(d + m) as f64 / most_left as f64;
        let filled = (done * 20.0).round() as usize;
        line += &format!(
            "; degraded {d}, misplaced {m} [{}{}] {:.0}%",
            "#".repeat(filled),
            ".".repeat(20 - filled.min(20)),
            done * 100.0
        );
    }
    if s.usage.unfound_objects > 0 {
        line += &format!("; unfound {}", s.usage.unfound_objects);
    }
    let r = &s.recovery;
    if r.objects_s > 0.0 {
        line += &format!(
            "; recovery {:.1} MiB/s, {:.0} objects/s",
            r.bytes_s / 1048576.0,
            r.objects_s
        );
    }
    let io = &s.io;
    if io.read_ops_s + io.write_ops_s > 0.0 {
        line += &format!(
            "; client {:.0} op/s rd, {:.0} op/s wr",
            io.read_ops_s, io.write_ops_s
        );
    }
    line
}

/// `status` for people, in the shape of `ceph -s`.
fn status_text(s: &StatusReport) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "  cluster:");
    let _ = writeln!(o, "    id:     {}", s.fsid);
    let _ = writeln!(o, "    health: {}", s.health.status.name());
    for (_, c) in s.health.ordered() {
        let _ = writeln!(o, "            {}", c.summary.message);
    }
    let _ = writeln!(o, "\n  services:");
    let leader = s
        .monitors
        .leader
        .map_or("none".to_string(), |l| l.to_string());
    let quorum: Vec<String> = s.monitors.quorum.iter().map(u64::to_string).collect();
    let quorum = match quorum.is_empty() {
        true => String::new(),
        false => format!(", quorum {}", quorum.join(",")),
    };
    let _ = writeln!(
        o,
        "    mon: {} daemons, leader {leader}, members {:?}{quorum}",
        s.monitors.members.len(),
        s.monitors.members
    );
    let m = &s.osdmap;
    let _ = writeln!(
        o,
        "    osd: {} osds: {} up, {} in (map epoch {})",
        m.num_osds, m.num_up_osds, m.num_in_osds, m.epoch
    );
    if !m.flags.is_empty() {
        let _ = writeln!(o, "         flags {}", m.flags.join(","));
    }
    let _ = writeln!(o, "\n  data:");
    let _ = writeln!(o, "    pools:   {} pools, {} pgs", s.pools, s.pgs.total);
    let _ = writeln!(o, "    objects: {}", s.usage.objects);
    if s.usage.degraded_objects > 0 {
        // As `ceph -s` says it: copies missing out of all copies.
        let _ = writeln!(
            o,
            "    degraded: {} object copies missing (recovery pending)",
            s.usage.degraded_objects
        );
    }
    if s.usage.misplaced_objects > 0 {
        let _ = writeln!(
            o,
            "    misplaced: {} object copies to move (backfill pending)",
            s.usage.misplaced_objects
        );
    }
    if s.usage.unfound_objects > 0 {
        let _ = writeln!(
            o,
            "    unfound: {} objects in {} pgs (no up OSD holds them)",
            s.usage.unfound_objects, s.usage.unfound_pgs
        );
    }
    if s.usage.scrub_errors > 0 {
        let _ = writeln!(
            o,
            "    scrub errors: {} objects in {} pgs inconsistent",
            s.usage.scrub_errors, s.usage.inconsistent_pgs
        );
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let u = &s.usage;
    let _ = writeln!(
        o,
        "    usage:   {:.2} GiB used, {:.2} GiB / {:.2} GiB avail",
        gib(u.used_bytes),
        gib(u.total_bytes.saturating_sub(u.used_bytes)),
        gib(u.total_bytes)
    );
    // Most PGs first, as `ceph -s` lists them.
    let mut states: Vec<_> = s.pgs.by_state.iter().collect();
    states.sort_by(|a, b| b.1.cmp(a.1).then(a.0.to_string().cmp(&b.0.to_string())));
    for (i, (state, n)) in states.into_iter().enumerate() {
        let label = if i == 0 {
            "    pgs:     "
        } else {
            "             "
        };
        let _ = writeln!(o, "{label}{n} {state}");
    }
    let io = &s.io;
    let r = &s.recovery;
    if io.write_ops_s + io.read_ops_s > 0.0 || r.objects_s > 0.0 {
        let _ = writeln!(o, "\n  io:");
    }
    if r.objects_s > 0.0 {
        // As `ceph -s` says it.
        let _ = writeln!(
            o,
            "    recovery: {:.1} MiB/s, {:.0} objects/s",
            r.bytes_s / 1048576.0,
            r.objects_s
        );
    }
    if io.write_ops_s + io.read_ops_s > 0.0 {
        let _ = writeln!(
            o,
            "    client: {:.1} MiB/s rd, {:.1} MiB/s wr, {:.0} op/s rd, {:.0} op/s wr",
            io.read_bytes_s / 1048576.0,
            io.write_bytes_s / 1048576.0,
            io.read_ops_s,
            io.write_ops_s
        );
    }
    if !s.progress.is_empty() {
        let _ = writeln!(o, "\n  progress:");
        for p in &s.progress {
            let _ = writeln!(o, "    {p}");
        }
    }
    o
}

pub fn osd(conn: &ConnArgs, c: OsdCmd) -> Result<(), CliError> {
    let req = |a| MonRequest::Admin(a);
    match c {
        OsdCmd::Run(a) => return crate::daemon_cmd::osd(*a),
        OsdCmd::Tree(j) => {
            let v = call(conn, req(Admin::OsdTree))?.value;
            if j.json {
                print_json(&v);
                return Ok(());
            }
            println!(
                "{:>4}  {:>8}  {:<24} {:>7}  {:>8}",
                "ID", "WEIGHT", "TYPE NAME", "STATUS", "REWEIGHT"
            );
            for r in v.as_array().into_iter().flatten() {
                let depth = r["depth"].as_u64().unwrap_or(0) as usize;
                let name = format!(
                    "{}{} {}",
                    "    ".repeat(depth),
                    r["type"].as_str().unwrap_or(""),
                    r["name"].as_str().unwrap_or("")
                );
                let status = r["status"].as_str().unwrap_or("");
                let rw = r["reweight"]
                    .as_f64()
                    .map(|w| format!("{w:.5}"))
                    .unwrap_or_default();
                println!(
                    "{:>4}  {:>8.5}  {:<24} {:>7}  {:>8}",
                    r["id"].as_i64().unwrap_or(0),
                    r["crush_weight"].as_f64().unwrap_or(0.0),
                    name,
                    status,
                    rw
                );
            }
        }
        OsdCmd::Dump(j) => {
            let v = call(conn, req(Admin::OsdDump))?.value;
            match j.json {
                true => print_json(&v),
                false => print!("{}", crate::report_cmd::osd_dump_text(&v)?),
            }
        }
        OsdCmd::Perf(j) => crate::report_cmd::osd_perf(conn, j.json)?,
        OsdCmd::Pool(c) => return pool(conn, c),
        OsdCmd::Df { tree, json } => crate::osd_df::run(conn, tree.is_some(), json)?,
        OsdCmd::Getmap { out } => {
            let r = call(conn, MonRequest::GetMap)?;
            let map = r
                .map
                .ok_or_else(|| CliError("the monitor answered without a map".into()))?;
            std::fs::write(&out, &map).map_err(|e| CliError(format!("{}: {e}", out.display())))?;
            println!(
                "got osdmap epoch {} ({} bytes) into {}",
                r.epoch,
                map.len(),
                out.display()
            );
        }
        OsdCmd::Map { pool, name, json } => {
            let v = call(conn, req(Admin::OsdMapObject { pool, name }))?.value;
            if json.json {
                print_json(&v);
            } else {
                let s = |k: &str| v[k].to_string();
                println!(
                    "osdmap pool '{}' object '{}' -> pg {} -> up ({}, p{}) acting ({}, p{})",
                    v["pool"].as_str().unwrap_or_default(),
                    v["object"].as_str().unwrap_or_default(),
                    v["pgid"].as_str().unwrap_or_default(),
                    s("up"),
                    s("up_primary"),
                    s("acting"),
                    s("acting_primary")
                );
            }
        }
        OsdCmd::Down { ids } => changed(&call(conn, req(Admin::OsdDown { ids }))?),
        OsdCmd::Out { ids } => changed(&call(conn, req(Admin::OsdOut { ids }))?),
        OsdCmd::In { ids } => changed(&call(conn, req(Admin::OsdIn { ids }))?),
        OsdCmd::Reweight { id, weight } => {
            changed(&call(conn, req(Admin::OsdReweight { id, weight }))?)
        }
        OsdCmd::Rm { id } => changed(&call(conn, req(Admin::OsdRm { id }))?),
        OsdCmd::Lost { id, confirm } => changed(&call(conn, req(Admin::OsdLost { id, confirm }))?),
        OsdCmd::Set { flag } => changed(&call(conn, req(Admin::OsdFlag { flag, on: true }))?),
        OsdCmd::Unset { flag } => changed(&call(conn, req(Admin::OsdFlag { flag, on: false }))?),
        OsdCmd::OkToStop { ids, json } => ok_to_stop(conn, ids, json.json)?,
        OsdCmd::SafeToDestroy { ids, json } => {
            crate::osd_replace_cmd::safe_to_destroy(conn, ids, json.json)?
        }
        OsdCmd::Destroy { id, confirm, force } => {
            crate::osd_replace_cmd::destroy(conn, id, confirm, force, false)?
        }
        OsdCmd::Purge { id, confirm, force } => {
            crate::osd_replace_cmd::destroy(conn, id, confirm, force, true)?
        }
        OsdCmd::New { id, out, given } => crate::osd_replace_cmd::new(conn, id, out, given)?,
        OsdCmd::SetFullRatio { ratio } => set_ratio(conn, "full", ratio)?,
        OsdCmd::SetBackfillfullRatio { ratio } => set_ratio(conn, "backfillfull", ratio)?,
        OsdCmd::SetNearfullRatio { ratio } => set_ratio(conn, "nearfull", ratio)?,
        OsdCmd::Crush(c) => match c {
            CrushLiveCmd::Add { id, host, weight } => {
                changed(&call(conn, req(Admin::CrushAdd { id, host, weight }))?)
            }
            CrushLiveCmd::Move { name, parent } => {
                changed(&call(conn, req(Admin::CrushMove { name, parent }))?)
            }
            CrushLiveCmd::Rm { name } => changed(&call(conn, req(Admin::CrushRm { name }))?),
            CrushLiveCmd::SetLocation { osd, location } => {
                let id = osd_id(&osd)?;
                changed(&call(conn, req(Admin::CrushSetLocation { id, location }))?)
            }
            CrushLiveCmd::Reweight { osd, weight } => {
                let id = osd_id(&osd)?;
                changed(&call(conn, req(Admin::CrushReweight { id, weight }))?)
            }
            CrushLiveCmd::Tree(j) => return osd(conn, OsdCmd::Tree(j)),
        },
    }
    Ok(())
}

pub fn pool(conn: &ConnArgs, c: PoolCmd) -> Result<(), CliError> {
    let req = |a| MonRequest::Admin(a);
    match c {
        PoolCmd::Create {
            name,
            ceph_form,
            pg_num,
            size,
            min_size,
            erasure,
        } => {
            let (pg_num, erasure) =
                pool_create_ceph_form(&ceph_form, pg_num, erasure).map_err(CliError)?;
            if erasure.is_some() && size.is_some() {
                return Err(CliError(
                    "--size does not apply to an erasure-coded pool: its profile's k+m sets it"
                        .into(),
                ));
            }
            let r = call(
                conn,
                req(Admin::PoolCreate {
                    name: name.clone(),
                    pg_num,
                    size: size.unwrap_or(3),
                    min_size,
                    erasure_profile: erasure,
                }),
            )?;
            match r.value.get("message").and_then(Value::as_str) {
                Some(m) => println!("{m}"),
                None => println!("pool '{name}' created (map epoch {})", r.epoch),
            }
        }
        PoolCmd::Ls(j) => {
            let v = call(conn, req(Admin::PoolLs))?.value;
            if j.json {
                print_json(&v);
            } else {
                for n in v.as_array().into_iter().flatten() {
                    println!("{}", n.as_str().unwrap_or(""));
                }
            }
        }
        PoolCmd::Get { name } => print_json(&call(conn, req(Admin::PoolGet { name }))?.value),
        PoolCmd::Set { name, key, value } => {
            changed(&call(conn, req(Admin::PoolSet { name, key, value }))?)
        }
        PoolCmd::Rm { name, confirm } => {
            changed(&call(conn, req(Admin::PoolDelete { name, confirm }))?)
        }
        PoolCmd::Stats { name, json } => crate::report_cmd::pool_stats(conn, name, json)?,
        PoolCmd::Scrub { name } => crate::scrub_cmd::start(conn, &name, true, false, false)?,
        PoolCmd::DeepScrub { name } => crate::scrub_cmd::start(conn, &name, true, true, false)?,
        PoolCmd::Repair { name } => crate::scrub_cmd::start(conn, &name, true, true, true)?,
    }
    Ok(())
}

pub fn ec_profile(conn: &ConnArgs, c: EcProfileCmd) -> Result<(), CliError> {
    let req = |a| MonRequest::Admin(a);
    match c {
        EcProfileCmd::Set {
            name,
            pairs,
            plugin,
            k,
            m,
            s,
            l,
            optimal,
            alignment,
            stripe_unit,
        } => {
            let mut p = ProfileArgs {
                plugin: plugin.unwrap_or(PluginArg::Rs),
                k,
                m,
                s,
                l,
                optimal,
                alignment,
                stripe_unit,
            };
            p.apply(&pairs).map_err(CliError)?;
            let (Some(k), Some(m)) = (p.k, p.m) else {
                return Err(CliError(
                    "a profile needs k and m (--k 4 --m 2, or Ceph's k=4 m=2)".into(),
                ));
            };
            let plugin = match p.plugin {
                PluginArg::Rs => EcPlugin::ReedSolomon,
                PluginArg::Zigzag => EcPlugin::Zigzag,
                PluginArg::Lrc => EcPlugin::Lrc,
            };
            changed(&call(
                conn,
                req(Admin::EcProfileSet {
                    name,
                    plugin,
                    k,
                    m,
                    s: p.s,
                    l: p.l,
                    optimal: p.optimal,
                    alignment: p.alignment,
                    stripe_unit: p.stripe_unit,
                }),
            )?)
        }
        EcProfileCmd::Get { name } => {
            print_json(&call(conn, req(Admin::EcProfileGet { name }))?.value)
        }
        EcProfileCmd::Ls => print_json(&call(conn, req(Admin::EcProfileLs))?.value),
        EcProfileCmd::Rm { name } => changed(&call(conn, req(Admin::EcProfileRm { name }))?),
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum PgCmd {
    /// Every PG with its state, object counts, up and acting sets, from
    /// its primary's last report (like `ceph pg ls`). A `down` PG lists
    /// the OSDs it waits for: bring one back, or, if its disk is gone,
    /// `osd lost` it. UNFOUND counts objects of an erasure-coded PG that
    /// fewer than k up OSDs hold at their logged version (reads of them
    /// wait for the OSDs that hold the rest).
    Ls {
        /// Only this pool's PGs.
        pool: Option<String>,
        /// Only PGs with this state flag (e.g. `down`, `degraded`,
        /// `backfilling`); repeat for any of several.
        #[arg(long = "state", value_name = "FLAG")]
        states: Vec<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Give up a PG's unfound objects (like `ceph pg PG mark_unfound_lost
    /// delete`): until the PG is active again in a later interval, it goes
    /// on with what its up OSDs hold, and its primary removes each object
    /// written before the mark that they do not hold enough of to read
    /// (`pg ls` counts them as UNFOUND), logged as given up. Only when the
    /// OSDs that hold the rest will never return: what is removed stays
    /// removed even if they come back.
    MarkUnfoundLost {
        /// The PG, as `pg ls` prints it (POOL.SEED, e.g. 1.1f).
        pg: String,
        /// What becomes of them: `delete` (the only mode Loligo has; Ceph
        /// too only deletes erasure-coded objects).
        mode: String,
        /// Confirm that the objects are to be removed.
        #[arg(long = "yes-i-really-mean-it")]
        confirm: bool,
    },
    /// Scrub a PG once it is clean (like `ceph pg scrub`): its members'
    /// object sets, sizes, versions and xattrs are compared, chunk by
    /// chunk; `pg ls` shows `scrubbing`, then `inconsistent` if they
    /// differ (`list-inconsistent-obj` names what).
    Scrub {
        /// The PG, as `pg ls` prints it (POOL.SEED, e.g. 1.1f).
        pg: String,
    },
    /// As `scrub`, also reading every byte of every copy (data and omap)
    /// and comparing digests.
    DeepScrub { pg: String },
    /// A deep scrub, then the authoritative copy of each inconsistent
    /// object written over the bad ones.
    Repair { pg: String },
    /// PG states in a line, objects, space and client I/O (Ceph's `pg
    /// stat`).
    Stat(JsonFlag),
    /// Every PG (Ceph's `pg dump`): the `pg ls` table; `pgs_brief`: state,
    /// up and acting sets and their primaries only.
    Dump {
        #[arg(value_parser = ["pgs_brief"])]
        what: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

/// `loligo pg ...`.
pub fn pg(conn: &ConnArgs, c: PgCmd) -> Result<(), CliError> {
    let (pool, states, json) = match c {
        PgCmd::Ls { pool, states, json } => (pool, states, json),
        PgCmd::MarkUnfoundLost { pg, mode, confirm } => {
            return mark_unfound_lost(conn, &pg, &mode, confirm)
        }
        PgCmd::Scrub { pg } => return crate::scrub_cmd::start(conn, &pg, false, false, false),
        PgCmd::DeepScrub { pg } => return crate::scrub_cmd::start(conn, &pg, false, true, false),
        PgCmd::Repair { pg } => return crate::scrub_cmd::start(conn, &pg, false, true, true),
        PgCmd::Stat(j) => return crate::report_cmd::pg_stat(conn, j.json),
        PgCmd::Dump { what, json } => {
            return crate::report_cmd::pg_dump(conn, what.is_some(), json.json)
        }
    };
    let flags = states
        .iter()
        .map(|f| match f.parse::<PgState>() {
            Ok(s) if !s.is_unknown() || f == "unknown" => Ok(s),
            Ok(_) => Err(CliError(format!("--state {f}: not a PG state"))),
            Err(e) => Err(CliError(format!("--state {f}: {e}"))),
        })
        .collect::<Result<Vec<PgState>, CliError>>()?;
    let rows: Vec<PgRow> = pg_rows(conn, pool)?
        .into_iter()
        .filter(|r| {
            flags.is_empty()
                || flags.iter().any(|&f| {
                    if f.is_unknown() {
                        r.state.is_unknown()
                    } else {
                        r.state.contains(f)
                    }
                })
        })
        .collect();
    if json.json {
        let v = serde_json::to_value(&rows)
            .map_err(|e| CliError(format!("printing the PG list: {e}")))?;
        print_json(&v);
    } else {
        print!("{}", pg_table(&rows));
    }
    Ok(())
}

/// Every PG (of `pool`, if named) as the monitor lists it.
pub(crate) fn pg_rows(conn: &ConnArgs, pool: Option<String>) -> Result<Vec<PgRow>, CliError> {
    let v = call(conn, MonRequest::Admin(Admin::PgLs { pool }))?.value;
    serde_json::from_value(v)
        .map_err(|e| CliError(format!("the monitor's PG list does not parse: {e}")))
}

/// `pg mark-unfound-lost PG delete`: refused for a mode Loligo lacks and
/// for a PG that reports no unfound objects (as Ceph refuses it).
fn mark_unfound_lost(conn: &ConnArgs, pg: &str, mode: &str, confirm: bool) -> Result<(), CliError> {
    match mode {
        "delete" => {}
        "revert" => {
            return Err(CliError(
                "mark-unfound-lost revert is not built: Loligo's unfound objects are \
                 erasure-coded, which Ceph too can only delete"
                    .into(),
            ))
        }
        m => return Err(CliError(format!("mode '{m}': the mode is `delete`"))),
    }
    let id: loligo_types::PgId = pg.parse().map_err(CliError)?;
    let rows = pg_rows(conn, None)?;
    let Some(row) = rows.iter().find(|r| r.pg == id.to_string()) else {
        return Err(CliError(format!("pg {id} does not exist")));
    };
    if row.unfound == 0 {
        return Err(CliError(format!(
            "pg {id} has no unfound objects (its primary reports none; state {})",
            row.state
        )));
    }
    let r = call(
        conn,
        MonRequest::Admin(Admin::PgMarkUnfoundLost {
            pg: id.to_string(),
            confirm,
        }),
    )?;
    println!(
        "pg {id}: {} unfound objects marked lost (map epoch {}); its primary removes them",
        row.unfound, r.epoch
    );
    Ok(())
}

/// The columns of `pg ls`'s table.
const PG_LS_COLUMNS: [&str; 13] = [
    "PG",
    "OBJECTS",
    "DEGRADED",
    "MISPLACED",
    "UNFOUND",
    "BYTES",
    "STATE",
    "UP",
    "ACTING",
    "PRIMARY",
    "SCRUB_STAMP",
    "DEEP_SCRUB_STAMP",
    "WAITING_FOR",
];

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmm` (UTC; `-` for 0:
/// never).
pub(crate) fn utc_stamp(ms: u64) -> String {
    if ms == 0 {
        return "-".into();
    }
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `pg ls` as a table, one PG a line.
pub(crate) fn pg_table(rows: &[PgRow]) -> String {
    let set = |v: &[i32]| {
        let items: Vec<String> = v.iter().map(i32::to_string).collect();
        format!("[{}]", items.join(","))
    };
    let mut lines = vec![PG_LS_COLUMNS.map(String::from)];
    for r in rows {
        lines.push([
            r.pg.clone(),
            r.objects.to_string(),
            r.degraded.to_string(),
            r.misplaced.to_string(),
            r.unfound.to_string(),
            r.bytes.to_string(),
            r.state.to_string(),
            set(&r.up),
            set(&r.acting),
            r.primary.to_string(),
            utc_stamp(r.last_scrub_stamp),
            utc_stamp(r.last_deep_scrub_stamp),
            if r.waiting_for.is_empty() {
                String::new()
            } else {
                r.waiting_for
                    .iter()
                    .map(|o| format!("osd.{o}"))
                    .collect::<Vec<_>>()
                    .join(",")
            },
        ]);
    }
    let widths: Vec<usize> = (0..PG_LS_COLUMNS.len())
        .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for l in &lines {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[derive(Subcommand)]
pub enum MonCmd {
    /// Run a monitor daemon in the foreground.
    Run(crate::daemon_cmd::MonArgs),
    /// Make a new monitor's store in DATA and exit (what `mon run --mkfs`
    /// does first), for a daemon a service manager then starts without
    /// --mkfs. Refused if DATA holds a store.
    Mkfs {
        /// Where the monitor will keep its Raft log and snapshots.
        #[arg(long)]
        data: std::path::PathBuf,
    },
    /// Add monitor ID serving at ADDR (HOST:PORT) to the group (Ceph's
    /// `mon add`). Start it first with `mon run --id ID --members
    /// (the group's monitors and itself) --mkfs --join`: it catches up as a
    /// learner, then becomes a voter.
    Add { id: u64, addr: String },
    /// Remove monitor ID from the group (the leader too: another then
    /// leads). Refused if the monitors left would not reach a majority of
    /// themselves. Stop its daemon after.
    Rm { id: u64 },
    /// The monitor group in a line: members, leader, term, quorum.
    Stat {
        /// Print JSON in Ceph's shape ({"epoch", "num_mons", "leader",
        /// "quorum": [{"rank", "name"}]}).
        #[arg(long)]
        json: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_create_takes_cephs_positional_form_and_refuses_what_it_cannot_do() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let form = |v: &[&str], pg: Option<u32>, ec: Option<&str>| {
            pool_create_ceph_form(&args(v), pg, ec.map(str::to_string))
        };
        assert_eq!(form(&[], None, None), Ok((32, None)));
        assert_eq!(form(&[], Some(8), Some("p")), Ok((8, Some("p".into()))));
        assert_eq!(form(&["64"], None, None), Ok((64, None)));
        assert_eq!(
            form(&["64", "64", "replicated"], None, None),
            Ok((64, None))
        );
        assert_eq!(
            form(&["16", "erasure", "k4m2"], None, None),
            Ok((16, Some("k4m2".into())))
        );
        assert_eq!(
            form(&["erasure", "k4m2"], Some(8), None),
            Ok((8, Some("k4m2".into())))
        );
        let refused = |v: &[&str], pg: Option<u32>, ec: Option<&str>, says: &str| {
            let e = form(v, pg, ec).unwrap_err();
            assert!(e.contains(says), "{v:?}: '{e}' does not say '{says}'");
        };
        refused(&["64"], Some(64), None, "given twice");
        refused(&["64", "32"], None, None, "PGP_NUM 32 differs");
        refused(&["1", "1", "1"], None, None, "third number");
        refused(&["erasure"], None, None, "needs a profile");
        refused(&["erasure", "p"], None, Some("q"), "given twice");
        refused(&["replicated"], None, Some("q"), "contradict");
        refused(&["64", "mirrored"], None, None, "not a pool type");
        refused(&["64", "erasure", "p", "rule"], None, None, "left over");
        refused(&["64", "replicated", "rule"], None, None, "left over");
    }

    #[test]
    fn ec_profile_set_takes_cephs_key_value_form_and_refuses_what_it_cannot_do() {
        let flags = || ProfileArgs {
            plugin: PluginArg::Rs,
            k: None,
            m: Some(1),
            s: 1,
            l: 2,
            optimal: false,
            alignment: 4096,
            stripe_unit: 0,
        };
        let pairs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut p = flags();
        p.apply(&pairs(&[
            "k=4",
            "m=2",
            "plugin=zigzag",
            "s=2",
            "optimal=true",
        ]))
        .unwrap();
        assert_eq!(
            p,
            ProfileArgs {
                plugin: PluginArg::Zigzag,
                k: Some(4),
                m: Some(2),
                s: 2,
                optimal: true,
                ..flags()
            }
        );
        let mut p = flags();
        p.apply(&pairs(&["plugin=jerasure", "k=3", "stripe_unit=8192"]))
            .unwrap();
        assert_eq!(
            (p.plugin, p.k, p.m, p.stripe_unit),
            (PluginArg::Rs, Some(3), Some(1), 8192)
        );
        for (bad, says) in [
            ("technique=reed_sol_van", "'technique' is not a profile key"),
            (
                "crush-failure-domain=host",
                "'crush-failure-domain' is not a profile key",
            ),
            ("k=four", "k takes a whole number"),
            ("k", "'k' is not KEY=VALUE"),
            ("plugin=shec", "plugin=shec"),
            ("optimal=maybe", "optimal takes true or false"),
        ] {
            let err = flags().apply(&pairs(&[bad])).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
    use loligo_monc::protocol::{
        ClientIo, Health, HealthCheck, HealthStatus, MonStatus, OsdMapStatus, PgSummary,
        RecoveryIo, Usage,
    };
    use loligo_types::PgState;

    #[test]
    fn stamps_print_as_utc_dates() {
        assert_eq!(utc_stamp(0), "-");
        assert_eq!(utc_stamp(1_001), "1970-01-01T00:00:01.001");
        assert_eq!(utc_stamp(1_796_249_870_250), "2026-12-02T22:17:50.250");
        assert_eq!(utc_stamp(951_782_400_000), "2000-02-29T00:00:00.000");
    }

    #[test]
    fn pg_ls_prints_a_table_with_what_down_pgs_wait_for() {
        let row = |pg: &str, state: PgState, waiting_for: Vec<i32>| PgRow {
            pg: pg.into(),
            state,
            up: vec![0, 1, 2],
            acting: vec![0, -1, 2],
            primary: 0,
            objects: 12,
            bytes: 4096,
            degraded: 3,
            misplaced: 0,
            reported_epoch: Some(9),
            waiting_for,
            unfound: 0,
            scrub_errors: 0,
            last_scrub_stamp: 0,
            last_deep_scrub_stamp: 0,
        };
        let mut scrubbed = row("1.0", PgState::ACTIVE | PgState::CLEAN, vec![]);
        scrubbed.last_scrub_stamp = 1_796_249_870_250;
        let t = pg_table(&[scrubbed, row("1.1f", PgState::DOWN, vec![3, 4])]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        let cols: Vec<&str> = lines[0].split_whitespace().collect();
        assert_eq!(cols, PG_LS_COLUMNS);
        let clean: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            clean,
            [
                "1.0",
                "12",
                "3",
                "0",
                "0",
                "4096",
                "active+clean",
                "[0,1,2]",
                "[0,-1,2]",
                "0",
                "2026-12-02T22:17:50.250",
                "-"
            ]
        );
        assert!(lines[2].starts_with("1.1f "), "{t}");
        assert!(lines[2].contains(" down "), "{t}");
        assert!(lines[2].ends_with("osd.3,osd.4"), "{t}");
        // Columns line up: every STATE cell starts where the header's does.
        let at = lines[0].find("STATE").unwrap();
        assert_eq!(lines[1].find("active+clean"), Some(at));
        assert_eq!(lines[2].find("down"), Some(at));
    }

    #[test]
    fn health_prints_like_ceph_health() {
        let ok = Health {
            status: HealthStatus::Ok,
            checks: Default::default(),
        };
        assert_eq!(health_text(&ok, false), "HEALTH_OK\n");
        assert_eq!(health_text(&ok, true), "HEALTH_OK\n");
        let warn = Health {
            status: HealthStatus::Err,
            checks: [
                (
                    "OSDMAP_FLAGS".to_string(),
                    HealthCheck::new(HealthStatus::Warn, "noout flag(s) set".into(), 1, vec![]),
                ),
                (
                    "OSD_FULL".to_string(),
                    HealthCheck::new(
                        HealthStatus::Err,
                        "1 full osd(s)".into(),
                        1,
                        vec!["osd.2 is full".into()],
                    ),
                ),
            ]
            .into(),
        };
        // Worst first, as Ceph orders them.
        assert_eq!(
            health_text(&warn, false),
            "HEALTH_ERR 1 full osd(s); noout flag(s) set\n"
        );
        assert_eq!(
            health_text(&warn, true),
            "HEALTH_ERR 1 full osd(s); noout flag(s) set\n\
             [ERR] OSD_FULL: 1 full osd(s)\n    osd.2 is full\n\
             [WRN] OSDMAP_FLAGS: noout flag(s) set\n"
        );
    }

    #[test]
    fn status_prints_like_ceph_s() {
        let mut by_state = std::collections::BTreeMap::new();
        by_state.insert(PgState::ACTIVE | PgState::CLEAN, 60);
        by_state.insert(PgState::DOWN, 4);
        let s = StatusReport {
            fsid: "abc".into(),
            health: Health {
                status: HealthStatus::Warn,
                checks: [(
                    "PG_AVAILABILITY".to_string(),
                    HealthCheck::new(
                        HealthStatus::Warn,
                        "Reduced data availability: 4 pgs inactive".into(),
                        4,
                        vec![],
                    ),
                )]
                .into(),
            },
            monitors: MonStatus {
                members: vec![0, 1, 2],
                leader: Some(1),
                term: 3,
                quorum: vec![0, 1],
                addrs: Default::default(),
            },
            osdmap: OsdMapStatus {
                epoch: 40,
                num_osds: 4,
                num_up_osds: 3,
                num_in_osds: 4,
                flags: vec!["noscrub".into()],
            },
            pools: 1,
            pgs: PgSummary {
                total: 64,
                by_state,
            },
            usage: Usage {
                objects: 12,
                degraded_objects: 3,
                misplaced_objects: 2,
                unfound_objects: 0,
                unfound_pgs: 0,
                scrub_errors: 0,
                inconsistent_pgs: 0,
                stored_bytes: 300 << 20,
                used_bytes: 1 << 30,
                total_bytes: 4 << 30,
            },
            io: ClientIo::default(),
            recovery: RecoveryIo::default(),
            osd_counters: Vec::new(),
            progress: vec!["pool 'p': pgp_num 8 -> 9 of pg_num 32".into()],
        };
        let t = status_text(&s);
        assert!(t.contains("    health: HEALTH_WARN\n"), "{t}");
        assert!(
            t.contains("mon: 3 daemons, leader 1, members [0, 1, 2], quorum 0,1\n"),
            "{t}"
        );
        assert!(t.contains("osd: 4 osds: 3 up, 4 in (map epoch 40)"), "{t}");
        assert!(t.contains("         flags noscrub\n"), "{t}");
        assert!(t.contains("degraded: 3 object copies missing"), "{t}");
        assert!(t.contains("misplaced: 2 object copies to move"), "{t}");
        assert!(!t.contains("unfound"), "nothing unfound, no line: {t}");
        assert!(
            t.contains("1.00 GiB used, 3.00 GiB / 4.00 GiB avail"),
            "{t}"
        );
        let pgs = t.find("pgs:     60 active+clean\n").expect(&t);
        assert!(t[pgs..].contains("             4 down\n"), "{t}");
        assert!(!t.contains("io:"), "no I/O, no io section");
        let mut lost = s.clone();
        lost.usage.unfound_objects = 5;
        lost.usage.unfound_pgs = 2;
        let t = status_text(&lost);
        assert!(
            t.contains("    unfound: 5 objects in 2 pgs (no up OSD holds them)\n"),
            "{t}"
        );
        assert!(watch_line(&lost, 0, "10:00:00").ends_with("; unfound 5"));
        assert!(!watch_line(&s, 0, "10:00:00").contains("unfound"));
        // Recovery traffic shows as `ceph -s` shows it, and in the watch
        // line with a progress bar against the most degraded seen.
        let mut s = s;
        s.recovery = RecoveryIo {
            objects_s: 310.0,
            bytes_s: 2.5 * 1048576.0,
        };
        let t = status_text(&s);
        assert!(
            t.contains("\n  progress:\n    pool 'p': pgp_num 8 -> 9 of pg_num 32\n"),
            "{t}"
        );
        assert!(
            t.contains("    recovery: 2.5 MiB/s, 310 objects/s\n"),
            "{t}"
        );
        let w = watch_line(&s, 20, "10:00:00");
        assert!(
            w.starts_with("10:00:00  HEALTH_WARN; 64 pgs: 60 active+clean, 4 down"),
            "{w}"
        );
        assert!(
            w.contains("degraded 3, misplaced 2 [###############.....] 75%"),
            "{w}"
        );
        assert!(w.contains("recovery 2.5 MiB/s, 310 objects/s"), "{w}");
    }
}
