//! Object commands as `rados` has them (`put NAME FILE`, `get NAME FILE`,
//! `-` for stdin/stdout, `-p POOL`), plus `omap` and `xattr`, and
//! `loligo bench` in the way of `rados bench`.
//!
//! It must never write a partial output file: `get` writes to a temporary
//! name and renames it when the whole object arrived.

use crate::config::ConnArgs;
use crate::CliError;
use clap::{Args, Subcommand, ValueEnum};
use loligo_client::{Cluster, IoCtx};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum DataCmd {
    /// Store FILE (or - for stdin) as object NAME; with `offset`, write
    /// it into the object at that byte (the rest of the object stays).
    Put {
        name: String,
        file: PathBuf,
        #[arg(long)]
        offset: Option<u64>,
    },
    /// Write object NAME to FILE (or - for stdout).
    Get { name: String, file: PathBuf },
    /// Remove objects.
    Rm { names: Vec<String> },
    /// Size and version of an object.
    Stat { name: String },
    /// List the pool's objects.
    Ls,
}

/// `set-alloc-hint`'s arguments.
#[derive(Args)]
pub struct AllocHintArgs {
    name: String,
    /// Bytes the object is expected to grow to.
    expected_object_size: u64,
    /// Bytes each write is expected to carry.
    expected_write_size: u64,
    /// Flags separated by commas: sequential_write, random_write,
    /// sequential_read, random_read, append_only, immutable, shortlived,
    /// longlived, compressible, incompressible.
    #[arg(long, default_value = "")]
    flags: String,
}

/// Give an object an allocation hint (`rados set-alloc-hint`).
pub fn set_alloc_hint(conn: &ConnArgs, a: AllocHintArgs) -> Result<(), CliError> {
    // Bad flags are refused before connecting.
    let flags = loligo_types::ops::alloc_hint::parse(&a.flags).map_err(CliError)?;
    let (rt, io) = connect(conn)?;
    rt.block_on(io.set_alloc_hint(
        &a.name,
        a.expected_object_size,
        a.expected_write_size,
        flags,
    ))?;
    Ok(())
}

#[derive(Subcommand)]
pub enum OmapCmd {
    /// Set KEY to VALUE.
    Set {
        name: String,
        key: String,
        value: String,
    },
    /// Print the value of KEY.
    Get { name: String, key: String },
    /// List keys (and values) from START, at most LIMIT.
    Ls {
        name: String,
        #[arg(long, default_value = "")]
        start: String,
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
    /// Remove keys.
    Rm { name: String, keys: Vec<String> },
    /// Remove every key.
    Clear { name: String },
}

#[derive(Subcommand)]
pub enum XattrCmd {
    /// Set xattr KEY of object NAME to VALUE.
    Set {
        name: String,
        key: String,
        value: String,
    },
    /// Print the value of xattr KEY.
    Get { name: String, key: String },
    /// List an object's xattrs (and values).
    Ls { name: String },
    /// Remove xattr KEY.
    Rm { name: String, key: String },
}

pub fn connect(conn: &ConnArgs) -> Result<(tokio::runtime::Runtime, IoCtx), CliError> {
    let cfg = conn.config()?;
    let rt = crate::config::runtime()?;
    let pool = conn.pool.clone().unwrap_or(cfg.default_pool.clone());
    let sec = cfg.security()?;
    let io = rt.block_on(async {
        let c = Cluster::connect_secured(
            cfg.mon_addrs.clone(),
            std::time::Duration::from_secs(30),
            sec,
        )
        .await
        .map_err(|e| cfg.explain(e))?;
        c.pool(&pool).map_err(CliError::from)
    })?;
    Ok((rt, io))
}

pub fn data(conn: &ConnArgs, c: DataCmd) -> Result<(), CliError> {
    let (rt, io) = connect(conn)?;
    rt.block_on(async {
        match c {
            DataCmd::Put { name, file, offset } => {
                let mut data = Vec::new();
                if file.as_os_str() == "-" {
                    std::io::stdin().read_to_end(&mut data)?;
                } else {
                    data = std::fs::read(&file)
                        .map_err(|e| CliError(format!("{}: {e}", file.display())))?;
                }
                match offset {
                    Some(off) => io.write(&name, off, data).await?,
                    None => io.write_full(&name, data).await?,
                };
            }
            DataCmd::Get { name, file } => {
                let data = io.read(&name, 0, 0).await?;
                if file.as_os_str() == "-" {
                    std::io::stdout().write_all(&data)?;
                } else {
                    let tmp = file.with_extension("loligo-partial");
                    std::fs::write(&tmp, &data)?;
                    std::fs::rename(&tmp, &file)?;
                }
            }
            DataCmd::Rm { names } => {
                for n in names {
                    io.remove(&n).await?;
                }
            }
            DataCmd::Stat { name } => {
                let (size, v) = io.stat(&name).await?;
                println!("{}/{name} size {size} version {v}", io.pool_name());
            }
            DataCmd::Ls => {
                for n in io.list().await? {
                    println!("{n}");
                }
            }
        }
        Ok(())
    })
}

pub fn omap(conn: &ConnArgs, c: OmapCmd) -> Result<(), CliError> {
    let (rt, io) = connect(conn)?;
    rt.block_on(async {
        match c {
            OmapCmd::Set { name, key, value } => {
                io.omap_set(&name, vec![(key.into_bytes(), value.into_bytes())])
                    .await?
            }
            OmapCmd::Get { name, key } => {
                let v = io.omap_get(&name, vec![key.clone().into_bytes()]).await?;
                let val = v
                    .get(key.as_bytes())
                    .ok_or_else(|| CliError(format!("no key '{key}'")))?;
                println!("{}", String::from_utf8_lossy(val));
            }
            OmapCmd::Ls { name, start, limit } => {
                for (k, v) in io.omap_list(&name, start.as_bytes(), limit).await? {
                    println!(
                        "{}\t{}",
                        String::from_utf8_lossy(&k),
                        String::from_utf8_lossy(&v)
                    );
                }
            }
            OmapCmd::Rm { name, keys } => {
                io.omap_rm(&name, keys.into_iter().map(String::into_bytes).collect())
                    .await?
            }
            OmapCmd::Clear { name } => io.omap_clear(&name).await?,
        }
        Ok(())
    })
}

pub fn xattr(conn: &ConnArgs, c: XattrCmd) -> Result<(), CliError> {
    let (rt, io) = connect(conn)?;
    rt.block_on(async {
        match c {
            XattrCmd::Set { name, key, value } => {
                io.set_xattr(&name, &key, value.into_bytes()).await?
            }
            XattrCmd::Get { name, key } => println!(
                "{}",
                String::from_utf8_lossy(&io.get_xattr(&name, &key).await?)
            ),
            XattrCmd::Ls { name } => {
                for (k, v) in io.get_xattrs(&name).await? {
                    println!("{k}\t{}", String::from_utf8_lossy(&v));
                }
            }
            XattrCmd::Rm { name, key } => io.rm_xattr(&name, &key).await?,
        }
        Ok(())
    })
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchMode {
    Write,
    /// Read each object a `write --no-cleanup` run left once, in order
    /// (until SECONDS pass or all are read, as `rados bench seq`).
    Seq,
    /// Read objects a write run left at random until SECONDS pass.
    Rand,
    /// Overwrite --io-size bytes at random aligned offsets of the objects
    /// a `write --no-cleanup` run left (rbd bench's random writes).
    Randwrite,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Seconds to run.
    seconds: f64,
    #[arg(value_enum)]
    mode: BenchMode,
    /// Object size in bytes (write) — seq/rand read what write left.
    #[arg(short = 'b', long = "block-size", default_value_t = 4 << 20)]
    block_size: usize,
    /// Operations in flight.
    #[arg(short = 't', long = "concurrency", default_value_t = 16)]
    concurrency: usize,
    /// Keep the objects a write run made (for seq/rand runs after it).
    #[arg(long)]
    no_cleanup: bool,
    /// Print one JSON object at the end.
    #[arg(long)]
    json: bool,
    /// Write: stop after objects 0..N (each written once), even before
    /// SECONDS; with --sample-pct, only a sample of them.
    #[arg(long)]
    max_objects: Option<u64>,
    /// Write: overwrite this percentage of objects 0..--max-objects,
    /// picked with --seed (for recovery experiments).
    #[arg(long, requires = "max_objects")]
    sample_pct: Option<f64>,
    /// Seed of --sample-pct's pick.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Randwrite: bytes per write, at offsets that are multiples of it.
    #[arg(long, default_value_t = 4096)]
    io_size: usize,
    /// Write seeded random bytes (incompressible) instead of one byte
    /// repeated: a store that compresses, or defers what compresses,
    /// then does the work real data costs.
    #[arg(long)]
    random_data: bool,
    /// Write and randwrite: send an allocation hint with every write (as
    /// RBD does): the object size, the write's size and these flags
    /// (`set-alloc-hint`'s names, separated by commas; `none` for no
    /// flags), so a pool's compression mode and the stores' checksum
    /// units act on them.
    #[arg(long)]
    alloc_hint: Option<String>,
}

/// A write of `data` at `off` (`None`: the whole object) to `name`, with
/// the allocation hint `hint` (expected object size, flags) first if
/// there is one.
async fn bench_write(
    io: &IoCtx,
    name: &str,
    off: Option<u64>,
    data: bytes::Bytes,
    hint: Option<(u64, u32)>,
) -> Result<usize, loligo_client::ClientError> {
    use loligo_types::ops::SubOp;
    let len = data.len();
    let write = match off {
        Some(offset) => SubOp::Write { offset, data },
        None => SubOp::WriteFull(data),
    };
    let mut ops = Vec::with_capacity(2);
    if let Some((expected_object_size, flags)) = hint {
        ops.push(SubOp::SetAllocHint {
            expected_object_size,
            expected_write_size: len as u64,
            flags,
        });
    }
    ops.push(write);
    io.operate(name, ops).await.map(|_| len)
}

const BENCH_PREFIX: &str = "benchmark_data_";

/// The object numbers a write run writes when it samples: a seeded sample
/// of `pct` percent of 0..max, in order. `None`: every number in order,
/// up to `max` if there is one.
fn bench_names(max: Option<u64>, pct: Option<f64>, seed: u64) -> Option<Vec<u64>> {
    let (max, p) = (max?, pct?);
    let mut all: Vec<u64> = (0..max).collect();
    let mut rng = loligo_testkit::Rng::new(seed);
    // Fisher-Yates, then the first pct% in order.
    for i in (1..all.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        all.swap(i, j);
    }
    let n = ((max as f64) * p / 100.0).round() as usize;
    all.truncate(n.min(all.len()));
    all.sort_unstable();
    Some(all)
}

pub fn bench(conn: &ConnArgs, a: BenchArgs) -> Result<(), CliError> {
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        return Err(CliError("SECONDS must be in (0, 3600]".into()));
    }
    if a.concurrency == 0 || a.concurrency > 1024 || a.block_size == 0 || a.block_size > 128 << 20 {
        return Err(CliError(
            "-t must be in 1..=1024 and -b in 1..=128 MiB".into(),
        ));
    }
    if a.sample_pct.is_some_and(|p| !(0.0..=100.0).contains(&p)) {
        return Err(CliError("--sample-pct must be in 0..=100".into()));
    }
    if a.io_size == 0 || a.io_size > 128 << 20 {
        return Err(CliError("--io-size must be in 1..=128 MiB".into()));
    }
    if a.mode != BenchMode::Write && a.max_objects.is_some() {
        return Err(CliError("--max-objects is for write runs".into()));
    }
    let hint_flags = match a.alloc_hint.as_deref() {
        None => None,
        Some(_) if !matches!(a.mode, BenchMode::Write | BenchMode::Randwrite) => {
            return Err(CliError(
                "--alloc-hint is for write and randwrite runs".into(),
            ));
        }
        Some("none") => Some(0),
        Some(f) => Some(loligo_types::ops::alloc_hint::parse(f).map_err(CliError)?),
    };
    let names = std::sync::Arc::new(bench_names(a.max_objects, a.sample_pct, a.seed));
    let (rt, io) = connect(conn)?;
    rt.block_on(async move {
        let meta = format!("{BENCH_PREFIX}meta");
        // The meta object says how many objects a write run left, and
        // their size.
        let (existing, obj_size): (u64, u64) = if a.mode == BenchMode::Write {
            (0, 0)
        } else {
            let m = io.read(&meta, 0, 0).await.map_err(|_| {
                CliError("no benchmark objects: run `loligo bench N write --no-cleanup` first".into())
            })?;
            let m = String::from_utf8_lossy(&m);
            let mut it = m.split_whitespace().map(|w| w.parse::<u64>().unwrap_or(0));
            let n = it.next().unwrap_or(0);
            (n, it.next().unwrap_or(a.block_size as u64))
        };
        if a.mode == BenchMode::Randwrite && obj_size < a.io_size as u64 {
            return Err(CliError(format!(
                "--io-size {} is larger than the benchmark objects ({obj_size} bytes)",
                a.io_size
            )));
        }
        if a.mode != BenchMode::Write && existing == 0 {
            return Err(CliError("no benchmark objects to read".into()));
        }
        // One buffer shared by every op (as `rados bench` does): a write
        // takes a reference, not a copy.
        let len = if a.mode == BenchMode::Randwrite { a.io_size } else { a.block_size };
        let data = bytes::Bytes::from(if a.random_data {
            loligo_testkit::Rng::new(a.seed).bytes(len)
        } else {
            vec![0x5au8; len]
        });
        let slots = obj_size / a.io_size as u64;
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(a.seconds);
        let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let done_bytes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut workers = Vec::new();
        for w in 0..a.concurrency {
            let io = io.clone();
            let next = next.clone();
            let bytes = done_bytes.clone();
            let data = data.clone();
            let mode = a.mode;
            let names = names.clone();
            let max_objects = a.max_objects;
            let objects_of = if mode == BenchMode::Write { a.block_size as u64 } else { obj_size };
            let hint = hint_flags.map(|f| (objects_of, f));
            workers.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut rng = loligo_testkit::Rng::new(w as u64);
                while Instant::now() < deadline {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    // seq reads each object once, as `rados bench seq` does.
                    if mode == BenchMode::Seq && k >= existing {
                        break;
                    }
                    let i = match names.as_ref() {
                        None if max_objects.is_some_and(|m| k >= m) => break,
                        None => k,
                        Some(list) => match list.get(k as usize) {
                            Some(&i) => i,
                            None => break,
                        },
                    };
                    let t0 = Instant::now();
                    let n = match mode {
                        BenchMode::Write => bench_write(&io, &format!("{BENCH_PREFIX}{i}"), None, data.clone(), hint).await,
                        BenchMode::Seq => io.read(&format!("{BENCH_PREFIX}{i}"), 0, 0).await.map(|d| d.len()),
                        BenchMode::Rand => {
                            let i = rng.below(existing);
                            io.read(&format!("{BENCH_PREFIX}{i}"), 0, 0).await.map(|d| d.len())
                        }
                        BenchMode::Randwrite => {
                            let i = rng.below(existing);
                            let off = rng.below(slots) * data.len() as u64;
                            bench_write(&io, &format!("{BENCH_PREFIX}{i}"), Some(off), data.clone(), hint).await
                        }
                    };
                    match n {
                        Ok(n) => {
                            lat.push(t0.elapsed().as_secs_f64());
                            bytes.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) => return Err(CliError(format!("op {i} failed: {e}"))),
                    }
                }
                Ok(lat)
            }));
        }
        // Live progress, a line a second, as rados bench prints it.
        let progress = {
            let bytes = done_bytes.clone();
            let next = next.clone();
            let quiet = a.json;
            tokio::spawn(async move {
                if !quiet {
                    println!("  sec   ops started   MB/s");
                }
                let mut last = 0u64;
                let mut sec = 0;
                while Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    sec += 1;
                    let b = bytes.load(std::sync::atomic::Ordering::Relaxed);
                    if !quiet {
                        println!("{sec:>5} {:>13} {:>6.1}", next.load(std::sync::atomic::Ordering::Relaxed), (b - last) as f64 / 1e6);
                    }
                    last = b;
                }
            })
        };
        let mut lat = Vec::new();
        for w in workers {
            lat.extend(w.await.map_err(|e| CliError(e.to_string()))??);
        }
        progress.abort();
        let secs = start.elapsed().as_secs_f64();
        let ops = lat.len();
        let mut lat: Vec<f64> = lat.into_iter().map(|s| s * 1e3).collect();
        lat.sort_by(|a, b| a.total_cmp(b));
        let pct = |p: f64| crate::latency::percentile(&lat, p);
        let avg = if ops > 0 { lat.iter().sum::<f64>() / ops as f64 } else { 0.0 };
        let hist = crate::latency::histogram(&lat);
        let bytes = done_bytes.load(std::sync::atomic::Ordering::Relaxed);
        let report = serde_json::json!({
            "mode": match a.mode { BenchMode::Write => "write", BenchMode::Seq => "seq", BenchMode::Rand => "rand", BenchMode::Randwrite => "randwrite" },
            "seconds": secs,
            "block_size": if a.mode == BenchMode::Randwrite { a.io_size } else { a.block_size },
            "concurrency": a.concurrency,
            "ops": ops,
            "ops_per_s": ops as f64 / secs,
            "mb_per_s": bytes as f64 / secs / 1e6,
            "latency_ms": { "avg": avg, "p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "p999": pct(0.999), "max": lat.last().copied().unwrap_or(0.0) },
            "latency_histogram": hist,
        });
        if a.mode == BenchMode::Write {
            let started = next.load(std::sync::atomic::Ordering::Relaxed);
            // The object numbers this run wrote (objects 0..written exist).
            // Every number a worker took below the run's end was written
            // (a failed write ends the run with an error), so a run whose
            // time ended first wrote `started` of them. A sample
            // overwrites objects an earlier run left: 0..max exist.
            let written = match (names.is_some(), a.max_objects) {
                (true, Some(max)) => max,
                (_, Some(max)) => started.min(max),
                (_, None) => started,
            };
            if a.no_cleanup {
                io.write_full(&meta, format!("{written} {}", a.block_size).into_bytes()).await?;
            } else {
                for i in 0..written {
                    let _ = io.remove(&format!("{BENCH_PREFIX}{i}")).await;
                }
            }
        }
        if a.json {
            println!("{report}");
        } else {
            println!("Total time run:       {secs:.2} s");
            println!("Operations:           {ops}");
            println!("Bandwidth (MB/s):     {:.2}", report["mb_per_s"].as_f64().unwrap_or(0.0));
            println!("Average IOPS:         {:.0}", report["ops_per_s"].as_f64().unwrap_or(0.0));
            println!("Average latency (ms): {avg:.3}");
            println!(
                "p50 / p90 / p99 / p99.9 / max (ms): {:.3} / {:.3} / {:.3} / {:.3} / {:.3}",
                pct(0.5),
                pct(0.9),
                pct(0.99),
                pct(0.999),
                lat.last().copied().unwrap_or(0.0)
            );
            println!("Latency histogram:");
            for line in crate::latency::histogram_text(&hist) {
                println!("{line}");
            }
        }
        Ok(())
    })
}
