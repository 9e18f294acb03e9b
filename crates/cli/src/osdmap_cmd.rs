//! `loligo osdmap ...`: placement queries in the way of osdmaptool, over a
//! CRUSH map and a pool's parameters (no cluster needed).

use crate::CliError;
use clap::{Args, Subcommand};
use loligo_crush::placement::{map_pg, object_line, pg_dump_line, OsdStates, PgId, PoolPlacement};
use loligo_crush::{CompiledMap, Workspace};
use std::io::Write;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum OsdmapCmd {
    /// Print ` object 'NAME' -> POOL.PS -> [osds]` for one object.
    TestMapObject {
        /// The object name.
        name: String,
        #[command(flatten)]
        pool: PoolArgs,
    },
    /// Print `POOL.PS raw (...) up (...) acting (...)` for every PG.
    TestMapPgsDumpAll {
        #[command(flatten)]
        pool: PoolArgs,
    },
    /// How the map's costs grow with the cluster: maps of 10 to 10,000
    /// OSDs built in memory, and what applying an incremental that marks
    /// one OSD down costs each holder (map size, apply, CRUSH compile,
    /// mapping every PG, carried mappings).
    Scale(crate::scale_cmd::ScaleArgs),
}

#[derive(Args)]
pub struct PoolArgs {
    /// CRUSH map (text or Loligo JSON).
    #[arg(long, value_name = "CRUSH")]
    crush: PathBuf,
    /// Pool id.
    #[arg(long)]
    pool_id: u64,
    /// Number of PGs.
    #[arg(long)]
    pg_num: u32,
    /// Number of placement seeds (default: pg_num).
    #[arg(long)]
    pgp_num: Option<u32>,
    /// Replicas (pool size).
    #[arg(long)]
    size: u32,
    /// CRUSH rule id.
    #[arg(long, default_value_t = 0)]
    rule: i32,
    /// OSD slots 0..N, all existing, up and in (default: the CRUSH map's
    /// max device id + 1).
    #[arg(long)]
    max_osd: Option<i32>,
    /// Mark this OSD out (reweight 0); repeatable.
    #[arg(long, value_name = "OSD")]
    mark_out: Vec<i32>,
    /// Mark this OSD down; repeatable.
    #[arg(long, value_name = "OSD")]
    mark_down: Vec<i32>,
    /// Pool without the hashpspool flag (pre-Firefly placement seeds).
    #[arg(long)]
    no_hashpspool: bool,
}

struct Setup {
    crush: CompiledMap,
    pool: PoolPlacement,
    osds: OsdStates,
}

fn setup(a: &PoolArgs) -> Result<Setup, CliError> {
    let crush = crate::crush_cmd::load_compiled(&a.crush)?;
    if !crush.has_rule(a.rule) {
        return Err(CliError(format!(
            "rule {} does not exist in {}",
            a.rule,
            a.crush.display()
        )));
    }
    let pool = PoolPlacement {
        pgp_num: a.pgp_num.unwrap_or(a.pg_num),
        hashpspool: !a.no_hashpspool,
        ..PoolPlacement::replicated(a.pool_id, a.pg_num, a.size, a.rule)
    };
    pool.validate()?;
    let max_osd = a.max_osd.unwrap_or(crush.max_devices());
    if !(0..=loligo_crush::compiled::MAX_DEVICES).contains(&max_osd) {
        return Err(CliError(format!("--max-osd {max_osd} out of range")));
    }
    let mut osds = OsdStates::all_up_in(max_osd);
    for &o in &a.mark_out {
        osds.mark_out(o)?;
    }
    for &o in &a.mark_down {
        osds.mark_down(o)?;
    }
    Ok(Setup { crush, pool, osds })
}

pub fn run(cmd: OsdmapCmd) -> Result<(), CliError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match cmd {
        OsdmapCmd::Scale(a) => return crate::scale_cmd::run(a),
        OsdmapCmd::TestMapObject { name, pool } => {
            let s = setup(&pool)?;
            let mut ws = Workspace::new(&s.crush);
            let ps = s.pool.object_ps(name.as_bytes());
            let m = map_pg(&s.crush, &s.pool, &s.osds, ps, &mut ws)?;
            let pg = PgId {
                pool: s.pool.pool_id,
                ps,
            };
            writeln!(out, "{}", object_line(&name, pg, &m.acting))?;
        }
        OsdmapCmd::TestMapPgsDumpAll { pool } => {
            let s = setup(&pool)?;
            let mut ws = Workspace::new(&s.crush);
            for ps in 0..s.pool.pg_num {
                let m = map_pg(&s.crush, &s.pool, &s.osds, ps, &mut ws)?;
                let pg = PgId {
                    pool: s.pool.pool_id,
                    ps,
                };
                writeln!(out, "{}", pg_dump_line(pg, &m))?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
