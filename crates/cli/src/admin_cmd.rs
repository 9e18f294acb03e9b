//! Cluster administration the way `ceph` has it: `status`, `osd ...`,
//! `pool ...`, `ec-profile ...`. Human output by default, `--json` for
//! scripts.
//!
//! It must never change the cluster except through the monitors' admin
//! commands.

use crate::config::ConnArgs;
use crate::CliError;
use clap::{Args, Subcommand, ValueEnum};
use loligo_monc::protocol::{Admin, MonReply, MonRequest};
use loligo_monc::MonClient;
use loligo_types::EcPlugin;
use serde_json::Value;

#[derive(Args)]
pub struct JsonFlag {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
pub enum OsdCmd {
    /// Run an OSD daemon in the foreground.
    Run(crate::daemon_cmd::OsdArgs),
    /// The CRUSH hierarchy with each OSD's state.
    Tree(JsonFlag),
    /// The OSD map (OSDs, pools, overrides) as JSON.
    Dump,
    /// Mark OSDs down (they re-assert themselves if alive).
    Down { ids: Vec<i32> },
    /// Mark OSDs out: CRUSH maps their PGs to other OSDs. The data is not
    /// copied there yet (no recovery or backfill): the new members stay
    /// degraded.
    Out { ids: Vec<i32> },
    /// Mark OSDs in.
    In { ids: Vec<i32> },
    /// Set an OSD's reweight (0..1).
    Reweight { id: i32, weight: f64 },
    /// Remove a down OSD from the map and CRUSH.
    Rm { id: i32 },
    /// Declare a down OSD's data lost, so that PGs waiting for it (state
    /// `down`) go on with what the other OSDs hold. Writes only it held are
    /// gone.
    Lost {
        id: i32,
        #[arg(long = "yes-i-really-mean-it")]
        confirm: bool,
    },
    /// Edit the cluster's CRUSH map: add, move, rm, tree.
    #[command(subcommand)]
    Crush(CrushLiveCmd),
}

#[derive(Subcommand)]
pub enum CrushLiveCmd {
    /// Place osd.ID under HOST (created under the root if missing) with WEIGHT.
    Add { id: i32, host: String, weight: f64 },
    /// Move bucket NAME under bucket PARENT.
    Move { name: String, parent: String },
    /// Remove a device or an empty bucket.
    Rm { name: String },
    /// The hierarchy (same as `osd tree`).
    Tree(JsonFlag),
}

#[derive(Subcommand)]
pub enum PoolCmd {
    /// Create a pool.
    Create {
        name: String,
        /// Number of PGs.
        #[arg(long, default_value_t = 32)]
        pg_num: u32,
        /// Replicas.
        #[arg(long, default_value_t = 3)]
        size: u32,
        /// Fewest replicas that accept writes (default size - size/2).
        #[arg(long)]
        min_size: Option<u32>,
        /// Make it erasure-coded with this profile. Not supported yet: the
        /// monitors refuse it until the OSDs store erasure-coded chunks.
        #[arg(long, value_name = "PROFILE")]
        erasure: Option<String>,
    },
    /// List pools.
    Ls(JsonFlag),
    /// Show a pool's settings (JSON).
    Get { name: String },
    /// Change a setting: size, min_size, pgp_num, crush_rule, object_size_max, name, pps_mode.
    /// Settings that remap PGs (size, pgp_num, crush_rule, pps_mode) move no data yet: new
    /// members stay degraded until recovery exists.
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
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PluginArg {
    Rs,
    Zigzag,
    Lrc,
}

#[derive(Subcommand)]
pub enum EcProfileCmd {
    /// Define (or redefine, if unused) a profile.
    Set {
        name: String,
        #[arg(long, value_enum)]
        plugin: PluginArg,
        #[arg(long)]
        k: u32,
        #[arg(long)]
        m: u32,
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
    },
    Get {
        name: String,
    },
    Ls,
    Rm {
        name: String,
    },
}

/// Send one admin request and return the reply.
pub fn call(conn: &ConnArgs, req: MonRequest) -> Result<MonReply, CliError> {
    let cfg = conn.config()?;
    let rt = crate::config::runtime()?;
    rt.block_on(async move {
        let mut mc = MonClient::new(cfg.mon_addrs)?;
        mc.deadline = std::time::Duration::from_secs(20);
        Ok(mc.call(req).await?)
    })
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn changed(r: &MonReply) {
    match r.value.get("message").and_then(Value::as_str) {
        Some(m) => println!("{m}"),
        None => println!("done (map epoch {})", r.epoch),
    }
}

pub fn status(conn: &ConnArgs, json: bool) -> Result<(), CliError> {
    let v = call(conn, MonRequest::Admin(Admin::Status))?.value;
    if json {
        print_json(&v);
        return Ok(());
    }
    let g = |p: &str| v.pointer(p).cloned().unwrap_or(Value::Null);
    println!("  cluster:");
    println!("    id:     {}", g("/fsid").as_str().unwrap_or("?"));
    println!(
        "    health: {}",
        g("/health/status").as_str().unwrap_or("?")
    );
    if let Some(checks) = g("/health/checks").as_array() {
        for c in checks {
            println!("            {}", c.as_str().unwrap_or(""));
        }
    }
    println!();
    println!("  services:");
    let members = g("/monitors/members");
    println!(
        "    mon: {} daemons, leader {}, members {}",
        members.as_array().map_or(0, |a| a.len()),
        g("/monitors/leader"),
        members
    );
    println!(
        "    osd: {} osds: {} up, {} in (map epoch {})",
        g("/osdmap/num_osds"),
        g("/osdmap/num_up_osds"),
        g("/osdmap/num_in_osds"),
        g("/osdmap/epoch")
    );
    println!();
    println!("  data:");
    println!(
        "    pools:   {} pools, {} pgs",
        g("/pools"),
        g("/pgs/total")
    );
    println!("    objects: {}", g("/usage/objects"));
    let gib = |p: &str| g(p).as_f64().unwrap_or(0.0) / (1u64 << 30) as f64;
    println!(
        "    usage:   {:.2} GiB used, {:.2} GiB / {:.2} GiB avail",
        gib("/usage/used_bytes"),
        gib("/usage/total_bytes") - gib("/usage/used_bytes"),
        gib("/usage/total_bytes")
    );
    if let Some(by) = g("/pgs/by_state").as_object() {
        let mut first = true;
        for (state, n) in by {
            let label = if first {
                "    pgs:     "
            } else {
                "             "
            };
            first = false;
            println!("{label}{n} {state}");
        }
    }
    let f = |p: &str| g(p).as_f64().unwrap_or(0.0);
    if f("/io/write_ops_s") + f("/io/read_ops_s") > 0.0 {
        println!();
        println!("  io:");
        println!(
            "    client: {:.1} MiB/s rd, {:.1} MiB/s wr, {:.0} op/s rd, {:.0} op/s wr",
            f("/io/read_bytes_s") / 1048576.0,
            f("/io/write_bytes_s") / 1048576.0,
            f("/io/read_ops_s"),
            f("/io/write_ops_s")
        );
    }
    Ok(())
}

pub fn osd(conn: &ConnArgs, c: OsdCmd) -> Result<(), CliError> {
    let req = |a| MonRequest::Admin(a);
    match c {
        OsdCmd::Run(a) => return crate::daemon_cmd::osd(a),
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
        OsdCmd::Dump => print_json(&call(conn, req(Admin::OsdDump))?.value),
        OsdCmd::Down { ids } => changed(&call(conn, req(Admin::OsdDown { ids }))?),
        OsdCmd::Out { ids } => changed(&call(conn, req(Admin::OsdOut { ids }))?),
        OsdCmd::In { ids } => changed(&call(conn, req(Admin::OsdIn { ids }))?),
        OsdCmd::Reweight { id, weight } => {
            changed(&call(conn, req(Admin::OsdReweight { id, weight }))?)
        }
        OsdCmd::Rm { id } => changed(&call(conn, req(Admin::OsdRm { id }))?),
        OsdCmd::Lost { id, confirm } => changed(&call(conn, req(Admin::OsdLost { id, confirm }))?),
        OsdCmd::Crush(c) => match c {
            CrushLiveCmd::Add { id, host, weight } => {
                changed(&call(conn, req(Admin::CrushAdd { id, host, weight }))?)
            }
            CrushLiveCmd::Move { name, parent } => {
                changed(&call(conn, req(Admin::CrushMove { name, parent }))?)
            }
            CrushLiveCmd::Rm { name } => changed(&call(conn, req(Admin::CrushRm { name }))?),
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
            pg_num,
            size,
            min_size,
            erasure,
        } => {
            let r = call(
                conn,
                req(Admin::PoolCreate {
                    name: name.clone(),
                    pg_num,
                    size,
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
    }
    Ok(())
}

pub fn ec_profile(conn: &ConnArgs, c: EcProfileCmd) -> Result<(), CliError> {
    let req = |a| MonRequest::Admin(a);
    match c {
        EcProfileCmd::Set {
            name,
            plugin,
            k,
            m,
            s,
            l,
            optimal,
            alignment,
        } => {
            let plugin = match plugin {
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
                    s,
                    l,
                    optimal,
                    alignment,
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
pub enum MonCmd {
    /// Run a monitor daemon in the foreground.
    Run(crate::daemon_cmd::MonArgs),
}
