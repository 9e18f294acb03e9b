//! `loligo crush map-pgs`: PGs per OSD for one pool under plain CRUSH, the
//! pps bijection, linear buckets with a (searched) balance parameter, and
//! the upmap balancer.

use crate::CliError;
use clap::{Args, ValueEnum};
use loligo_crush::balance::{
    adaptive_balance_param, distribution, pg_up_sets, upmap_balance, Eligible, UpmapItems,
};
use loligo_crush::mapper::BALANCE_ONE;
use loligo_crush::placement::{OsdStates, PoolPlacement, PpsMode};
use std::path::PathBuf;

#[derive(Clone, Copy, ValueEnum)]
pub enum PpsArg {
    /// Ceph's rjenkins placement seed.
    Rjenkins,
    /// Pool-seeded congruential bijection (Loligo extension).
    Bijection,
}

#[derive(Args)]
pub struct MapPgsArgs {
    /// CRUSH map (text or Loligo JSON); `alg linear` buckets are allowed.
    #[arg(short = 'i', long = "input", value_name = "MAP")]
    input: PathBuf,
    /// Pool id (it seeds the PGs' placement, as in Ceph).
    #[arg(long)]
    pool_id: u64,
    /// Number of PGs.
    #[arg(long)]
    pg_num: u32,
    /// Replicas.
    #[arg(long)]
    size: u32,
    /// CRUSH rule id.
    #[arg(long, default_value_t = 0)]
    rule: i32,
    /// How PG seeds become CRUSH inputs.
    #[arg(long, value_enum, default_value = "rjenkins")]
    pps: PpsArg,
    /// Balance parameter for linear buckets (>= 1.0).
    #[arg(long, conflicts_with = "adaptive")]
    balance_param: Option<f64>,
    /// Search the balance parameter that minimises the stdev.
    #[arg(long)]
    adaptive: bool,
    /// Balance parameters the adaptive search tries (1 + k/64).
    #[arg(long, default_value_t = 256)]
    trials: u32,
    /// Compute pg_upmap_items overrides on top of the placement.
    #[arg(long)]
    upmap: bool,
    /// Largest |PGs - target| the upmap balancer accepts.
    #[arg(long, default_value_t = 1.0, requires = "upmap")]
    max_deviation: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(a: MapPgsArgs) -> Result<(), CliError> {
    let crush = crate::crush_cmd::load_compiled(&a.input)?;
    let mut pool = PoolPlacement::replicated(a.pool_id, a.pg_num, a.size, a.rule);
    pool.pps_mode = match a.pps {
        PpsArg::Rjenkins => PpsMode::Rjenkins,
        PpsArg::Bijection => PpsMode::Bijection,
    };
    if let Some(bp) = a.balance_param {
        if !(1.0..=65_536.0).contains(&bp) {
            return Err(CliError(format!(
                "--balance-param {bp} must be in 1..=65536"
            )));
        }
        pool.balance_param = (bp * 65536.0) as u32;
    }
    pool.validate()?;
    if !crush.has_rule(a.rule) {
        return Err(CliError(format!("rule {} does not exist", a.rule)));
    }
    let osds = OsdStates::all_up_in(crush.max_devices());
    if a.adaptive {
        let (bp, _) = adaptive_balance_param(&crush, &pool, &osds, a.trials)?;
        pool.balance_param = bp;
    }
    let plain = PoolPlacement {
        pps_mode: PpsMode::Rjenkins,
        balance_param: BALANCE_ONE,
        ..pool
    };
    let baseline = pg_up_sets(&crush, &plain, &osds, &UpmapItems::new())?;
    let (upmaps, moves) = if a.upmap {
        let plan = upmap_balance(
            &crush,
            &pool,
            &osds,
            a.max_deviation,
            100 * a.pg_num as usize,
        )?;
        (plan.items, plan.moves)
    } else {
        (UpmapItems::new(), 0)
    };
    let sets = pg_up_sets(&crush, &pool, &osds, &upmaps)?;
    let eligible = Eligible::for_rule(&crush, a.rule, &osds)?;
    let d = distribution(&sets, &eligible);
    let moved_pgs = sets.iter().zip(&baseline).filter(|(a, b)| a != b).count();
    let bp = f64::from(pool.balance_param) / 65536.0;
    if a.json {
        let per: serde_json::Map<String, serde_json::Value> = d
            .per_osd
            .iter()
            .map(|(o, c)| (o.to_string(), (*c).into()))
            .collect();
        let v = serde_json::json!({
            "per_osd": per,
            "mean": d.mean,
            "stdev": d.stdev,
            "min": d.min,
            "max": d.max,
            "max_deviation": d.max_deviation,
            "moved_pgs": moved_pgs,
            "upmap_items": upmaps.values().map(Vec::len).sum::<usize>(),
            "upmap_moves": moves,
            "balance_param": bp,
            "pps": match pool.pps_mode { PpsMode::Rjenkins => "rjenkins", PpsMode::Bijection => "bijection" },
        });
        println!("{v}");
    } else {
        println!("{:>6}  {:>6}", "OSD", "PGS");
        for (o, c) in &d.per_osd {
            println!("{o:>6}  {c:>6}");
        }
        println!(
            "mean {:.2}  stdev {:.2}  min {}  max {}  max deviation {:.2}  moved PGs {}  balance param {:.4}",
            d.mean, d.stdev, d.min, d.max, d.max_deviation, moved_pgs, bp
        );
    }
    Ok(())
}
