//! `loligo crush bench`: CRUSH mapping throughput on a 1000-OSD straw2 map
//! (100 hosts of 10 OSDs), measured beside Ceph's crushtool in the same run
//! when crushtool is on PATH, so the printed ratio compares like with like.

use crate::CliError;
use clap::Args;
use loligo_crush::map::Tunables;
use loligo_crush::placement::{map_pg, OsdStates, PoolPlacement};
use loligo_crush::tester::{run as run_test, TestSpec};
use loligo_crush::{text, CompiledMap, Workspace};
use std::process::Command;
use std::time::Instant;

#[derive(Args)]
pub struct BenchArgs {
    /// Inputs for the single-thread mapping run.
    #[arg(long, default_value_t = 1_000_000)]
    inputs: u32,
    /// PGs in the pool mapped with all threads.
    #[arg(long, default_value_t = 1_000_000)]
    pgs: u32,
    /// Threads for the whole-pool run.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Hosts (of 10 OSDs each).
    #[arg(long, default_value_t = 100)]
    hosts: u32,
    /// Skip crushtool even if it is on PATH.
    #[arg(long)]
    no_crushtool: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Root (straw2) -> `hosts` hosts (straw2) -> 10 OSDs each, jewel tunables,
/// rule 0 = chooseleaf firstn 0 type host. Built as text, so that Loligo and
/// crushtool compile the very same weights (text weights have 3 decimals).
pub fn bench_map_text(hosts: u32) -> String {
    use std::fmt::Write as _;
    let per_host = 10u32;
    let mut s = String::from("# begin crush map\n");
    for (name, v) in Tunables::OPTIMAL.named() {
        let _ = writeln!(s, "tunable {name} {v}");
    }
    s.push_str("\n# devices\n");
    for id in 0..hosts * per_host {
        let _ = writeln!(s, "device {id} osd.{id}");
    }
    s.push_str("\n# types\ntype 0 osd\ntype 1 host\ntype 10 root\n\n# buckets\n");
    let mut host_weights = Vec::new();
    for h in 0..hosts {
        let _ = writeln!(
            s,
            "host host{h} {{\n\tid -{}\n\talg straw2\n\thash 0",
            h + 2
        );
        let mut total = 0u32;
        for i in 0..per_host {
            let id = h * per_host + i;
            // Slightly uneven weights, as real disks are: 1.000 .. 1.249.
            let w = 1000 + (id * 7919) % 250;
            total += w;
            let _ = writeln!(s, "\titem osd.{id} weight {}.{:03}", w / 1000, w % 1000);
        }
        s.push_str("}\n");
        host_weights.push(total);
    }
    s.push_str("root default {\n\tid -1\n\talg straw2\n\thash 0\n");
    for (h, w) in host_weights.iter().enumerate() {
        let _ = writeln!(s, "\titem host{h} weight {}.{:03}", w / 1000, w % 1000);
    }
    s.push_str("}\n\n# rules\nrule replicated_rule {\n\tid 0\n\ttype replicated\n\tmin_size 1\n\tmax_size 10\n");
    s.push_str("\tstep take default\n\tstep chooseleaf firstn 0 type host\n\tstep emit\n}\n\n# end crush map\n");
    s
}

struct CrushtoolResult {
    seconds: f64,
    rate: f64,
    agrees: bool,
}

fn time_crushtool(
    map_txt: &str,
    inputs: u32,
    ours: &CompiledMap,
) -> Result<Option<CrushtoolResult>, CliError> {
    if Command::new("crushtool").arg("--help").output().is_err() {
        return Ok(None);
    }
    let dir = std::env::temp_dir().join(format!("loligo-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let txt = dir.join("map.txt");
    let bin = dir.join("map.bin");
    std::fs::write(&txt, map_txt)?;
    let st = Command::new("crushtool")
        .arg("-c")
        .arg(&txt)
        .arg("-o")
        .arg(&bin)
        .status()?;
    if !st.success() {
        return Err(CliError("crushtool could not compile the bench map".into()));
    }
    let run = |max_x: u32, show: bool| -> Result<(f64, Vec<u8>), CliError> {
        let mut c = Command::new("crushtool");
        c.arg("-i")
            .arg(&bin)
            .args(["--test", "--rule", "0", "--num-rep", "3", "--min-x", "0"]);
        c.args(["--max-x", &max_x.to_string()]);
        if show {
            c.arg("--show-mappings");
        }
        let t = Instant::now();
        let out = c.output()?;
        if !out.status.success() {
            return Err(CliError("crushtool --test failed".into()));
        }
        Ok((t.elapsed().as_secs_f64(), out.stdout))
    };
    // Same answers first: compare 10,000 mappings line by line.
    let (_, shown) = run(9_999, true)?;
    let spec = TestSpec {
        rule: Some(0),
        num_rep: Some((3, 3)),
        max_x: 9_999,
        show_mappings: true,
        ..TestSpec::default()
    };
    let agrees = shown == run_test(ours, &spec)?.stdout.into_bytes();
    let (startup, _) = run(0, false)?;
    let (total, _) = run(inputs - 1, false)?;
    let seconds = (total - startup).max(1e-9);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Some(CrushtoolResult {
        seconds,
        rate: f64::from(inputs) / seconds,
        agrees,
    }))
}

pub fn run(a: BenchArgs) -> Result<(), CliError> {
    if a.inputs == 0 || a.pgs == 0 || a.threads == 0 || a.hosts == 0 || a.hosts > 10_000 {
        return Err(CliError(
            "--inputs, --pgs, --threads and --hosts (<= 10000) must be positive".into(),
        ));
    }
    let map_txt = bench_map_text(a.hosts);
    let compiled = CompiledMap::compile(&text::parse(&map_txt)?)?;
    let weights = vec![0x10000u32; compiled.max_devices() as usize];

    // 1. Single thread, x = 0..inputs, num-rep 3 (what crushtool --test does).
    let mut ws = Workspace::new(&compiled);
    let mut out = Vec::with_capacity(3);
    let mut checksum = 0u64;
    let t = Instant::now();
    for x in 0..a.inputs {
        compiled.do_rule(0, x, 3, &weights, None, &mut ws, &mut out)?;
        checksum = checksum.wrapping_add(out.iter().map(|&o| o as u64).sum::<u64>());
    }
    let single_s = t.elapsed().as_secs_f64();
    let single_rate = f64::from(a.inputs) / single_s;

    // 2. Every PG of a pool, split across threads.
    let pool = PoolPlacement::replicated(1, a.pgs, 3, 0);
    pool.validate()?;
    let osds = OsdStates::all_up_in(compiled.max_devices());
    let t = Instant::now();
    let chunk = a.pgs.div_ceil(a.threads as u32);
    let mapped: Result<u64, CliError> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.threads as u32)
            .map(|i| {
                let (compiled, pool, osds) = (&compiled, &pool, &osds);
                s.spawn(move || -> Result<u64, CliError> {
                    let mut ws = Workspace::new(compiled);
                    let mut n = 0u64;
                    let lo = i * chunk;
                    let hi = (lo.saturating_add(chunk)).min(pool.pg_num);
                    for ps in lo..hi {
                        let m = map_pg(compiled, pool, osds, ps, &mut ws)?;
                        n += m.up.len() as u64;
                    }
                    Ok(n)
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h
                .join()
                .map_err(|_| CliError("bench thread panicked".into()))??;
        }
        Ok(total)
    });
    let mapped = mapped?;
    let pool_s = t.elapsed().as_secs_f64();

    let ct = if a.no_crushtool {
        None
    } else {
        time_crushtool(&map_txt, a.inputs, &compiled)?
    };
    let osd_count = a.hosts * 10;
    if a.json {
        let mut v = serde_json::json!({
            "osds": osd_count,
            "inputs": a.inputs,
            "single_thread_seconds": single_s,
            "mappings_per_s": single_rate,
            "pool_pgs": a.pgs,
            "pool_threads": a.threads,
            "pool_seconds": pool_s,
            "pool_pgs_per_s": f64::from(a.pgs) / pool_s,
            "osd_slots_mapped": mapped,
            "checksum": checksum,
        });
        if let Some(c) = &ct {
            v["crushtool_seconds"] = c.seconds.into();
            v["crushtool_mappings_per_s"] = c.rate.into();
            v["ratio_vs_crushtool"] = (single_rate / c.rate).into();
            v["crushtool_agrees"] = c.agrees.into();
        }
        println!("{v}");
    } else {
        println!("CRUSH bench: {osd_count} OSDs ({} hosts x 10, straw2), chooseleaf firstn 0 type host, num-rep 3", a.hosts);
        println!(
            "  loligo    1 thread : {} mappings in {single_s:.3} s = {:.3} M mappings/s",
            a.inputs,
            single_rate / 1e6
        );
        match &ct {
            Some(c) => {
                println!("  crushtool 1 thread : {} mappings in {:.3} s = {:.3} M mappings/s (startup subtracted)", a.inputs, c.seconds, c.rate / 1e6);
                println!(
                    "  same mappings as crushtool (first 10,000): {}",
                    if c.agrees { "yes" } else { "NO" }
                );
                println!("  ratio loligo/crushtool: {:.2}", single_rate / c.rate);
            }
            None => println!(
                "  crushtool: not on PATH (apt-get install ceph-base) or --no-crushtool: no ratio"
            ),
        }
        println!(
            "  whole pool: {} PGs on {} threads in {pool_s:.3} s = {:.3} M PGs/s",
            a.pgs,
            a.threads,
            f64::from(a.pgs) / pool_s / 1e6
        );
    }
    if let Some(c) = ct {
        if !c.agrees {
            return Err(CliError(
                "loligo and crushtool disagree on the bench map".into(),
            ));
        }
    }
    Ok(())
}
