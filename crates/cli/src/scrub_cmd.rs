//! `loligo pg scrub|deep-scrub|repair PG`, their pool-wide forms, and
//! `loligo list-inconsistent-obj PG`: commands sent to a PG's primary, as
//! Ceph's `ceph pg scrub` and `rados list-inconsistent-obj` are; and
//! `loligo tell osd.N injectdataerr`, sent to one OSD, to test them.
//! Argument handling and printing only; the scrub itself runs in the PG.

use crate::CliError;
use loligo_client::Cluster;
use loligo_types::scrub::{Inconsistent, OsdCommand, PgCommand, PgCommandReply};
use loligo_types::PgId;
use serde_json::{json, Value};

/// Connect to the cluster (the CLI's configuration and keys).
fn cluster(conn: &crate::config::ConnArgs) -> Result<(tokio::runtime::Runtime, Cluster), CliError> {
    let cfg = conn.config()?;
    let rt = crate::config::runtime()?;
    let sec = cfg.security()?;
    let c = rt.block_on(async {
        Cluster::connect_secured(
            cfg.mon_addrs.clone(),
            std::time::Duration::from_secs(30),
            sec,
        )
        .await
        .map_err(|e| cfg.explain(e))
    })?;
    Ok((rt, c))
}

/// The PGs a command names: one PG (`POOL.SEED`), or with `pool` every PG
/// of that pool.
fn pgs_of(c: &Cluster, pg: &str, pool: bool) -> Result<Vec<PgId>, CliError> {
    let map = c.map();
    if pool {
        let p = map
            .pools
            .values()
            .find(|p| p.name == pg)
            .ok_or_else(|| CliError(format!("pool '{pg}' does not exist")))?;
        return Ok((0..p.pg_num).map(|ps| PgId { pool: p.id, ps }).collect());
    }
    let id: PgId = pg.parse().map_err(CliError)?;
    match map.pools.get(&id.pool) {
        Some(p) if id.ps < p.pg_num => Ok(vec![id]),
        Some(_) => Err(CliError(format!("pg {id} does not exist"))),
        None => Err(CliError(format!("pool {} does not exist", id.pool))),
    }
}

/// Ask PG `pg`'s primary (or every PG of pool `pg` with `pool`) to
/// scrub: it starts once the PG is clean.
pub fn start(
    conn: &crate::config::ConnArgs,
    pg: &str,
    pool: bool,
    deep: bool,
    repair: bool,
) -> Result<(), CliError> {
    let (rt, c) = cluster(conn)?;
    let what = match (deep, repair) {
        (_, true) => "repair",
        (true, false) => "deep-scrub",
        (false, false) => "scrub",
    };
    for id in pgs_of(&c, pg, pool)? {
        rt.block_on(c.pg_command(id, PgCommand::Scrub { deep, repair }))?;
        println!("instructing pg {id} to {what}");
    }
    Ok(())
}

/// `tell osd.N ...`: what one OSD is told to do.
#[derive(clap::Subcommand)]
pub enum TellCmd {
    /// Make the OSD's reads of its copy of object OBJ in pool POOL fail as
    /// a bad checksum would, until the copy is written or removed (Ceph's
    /// `injectdataerr`): a read error for a scrub or a read to meet.
    Injectdataerr { pool: String, obj: String },
    /// The client ops the OSD serves now, oldest first, each with its
    /// description and age in seconds, as JSON (Ceph's
    /// `dump_ops_in_flight`; ops of pools the caller may read).
    #[command(name = "dump_ops_in_flight")]
    DumpOpsInFlight,
}

/// `tell osd.N CMD`.
pub fn tell(conn: &crate::config::ConnArgs, target: &str, cmd: TellCmd) -> Result<(), CliError> {
    let osd: i32 = (target.strip_prefix("osd."))
        .and_then(|n| n.parse().ok())
        .filter(|n| *n >= 0)
        .ok_or_else(|| CliError(format!("'{target}' is not an OSD: name one as osd.N")))?;
    let (rt, c) = cluster(conn)?;
    let map = c.map();
    if !map.osds.contains_key(&osd) {
        return Err(CliError(format!("osd.{osd} does not exist")));
    }
    let cmd = match cmd {
        TellCmd::DumpOpsInFlight => OsdCommand::DumpOpsInFlight,
        TellCmd::Injectdataerr { pool, obj } => {
            let p = (map.pools.values().find(|p| p.name == pool))
                .ok_or_else(|| CliError(format!("pool '{pool}' does not exist")))?;
            OsdCommand::InjectDataErr {
                pool: p.id,
                name: obj,
            }
        }
    };
    println!("{}", rt.block_on(c.tell(osd, cmd))?);
    Ok(())
}

/// `list-inconsistent-obj PG`: what the PG's last scrub found.
pub fn list_inconsistent(
    conn: &crate::config::ConnArgs,
    pg: &str,
    json: bool,
) -> Result<(), CliError> {
    let (rt, c) = cluster(conn)?;
    let id = pgs_of(&c, pg, false)?[0];
    let found = match rt.block_on(c.pg_command(id, PgCommand::ListInconsistent))? {
        PgCommandReply::Inconsistent(f) => f,
        other => return Err(CliError(format!("unexpected answer: {other:?}"))),
    };
    let primary = c
        .map()
        .placer()
        .ok()
        .and_then(|mut p| p.map_pg(id).ok())
        .map(|m| m.acting_primary);
    if json {
        let v = json!({
            "epoch": c.map().epoch,
            "inconsistents": found.iter().map(|i| report(i, primary)).collect::<Vec<_>>(),
        });
        crate::admin_cmd::print_json(&v);
        return Ok(());
    }
    if found.is_empty() {
        println!("pg {id}: no inconsistent objects found by its last scrub");
    }
    for i in &found {
        let errs: Vec<&str> = i.errors().iter().map(|e| e.name()).collect();
        println!(
            "{} (version {}'{}): {}",
            i.name,
            i.version.epoch,
            i.version.v,
            errs.join(", ")
        );
        for (osd, e) in &i.bad {
            let names: Vec<&str> = e.iter().map(|e| e.name()).collect();
            println!("  osd.{osd}: {}", names.join(", "));
        }
        let auth: Vec<String> = i.auth.iter().map(|o| format!("osd.{o}")).collect();
        println!(
            "  authoritative: {} (by {})",
            auth.join(", "),
            i.rule.name()
        );
    }
    Ok(())
}

/// One object in the shape of `rados list-inconsistent-obj --format=json`.
fn report(i: &Inconsistent, primary: Option<i32>) -> Value {
    let names = |e: &[loligo_types::scrub::ShardError]| -> Vec<&str> {
        e.iter().map(|e| e.name()).collect()
    };
    let shards: Vec<Value> = i
        .copies
        .iter()
        .map(|(osd, c)| {
            let errors = i.bad.get(osd).map(|e| names(e)).unwrap_or_default();
            let mut v = json!({
                "osd": osd,
                "primary": Some(*osd) == primary,
                "errors": errors,
            });
            if let Some(c) = c {
                v["size"] = json!(c.size);
                if let Some(d) = c.data {
                    v["data_digest"] = json!(format!("0x{d:016x}"));
                }
                if let Some(d) = c.omap {
                    v["omap_digest"] = json!(format!("0x{d:016x}"));
                }
            }
            v
        })
        .collect();
    json!({
        "object": {"name": i.name, "version": i.version.v, "epoch": i.version.epoch},
        "errors": names(&i.errors()),
        "union_shard_errors": names(&i.errors()),
        "selected_object_info": {"osds": i.auth, "rule": i.rule.name()},
        "shards": shards,
    })
}
