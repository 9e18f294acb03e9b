//! `loligo kv`: the key-value store on object maps (`loligo-kv`) in the
//! pool given by `-p`: create a store, put, get, remove, scan, check, stats.
//!
//! Only parses arguments and prints; the store's logic lives in
//! `loligo-kv`. A missing key is exit code 1 with a message, as `grep`
//! does for no match; errors are exit code 2.

use crate::config::ConnArgs;
use crate::CliError;
use clap::Subcommand;
use loligo_kv::{bench, KvStore};
use std::io::{Read, Write};

#[derive(Subcommand)]
pub enum KvCmd {
    /// Create store STORE: an index object and one node.
    Create {
        store: String,
        /// Nodes hold K..=2K entries (the paper's best: 800).
        #[arg(long, default_value_t = 800)]
        k: u64,
        /// Largest value in bytes (at most 1 MiB): bounds a node's size,
        /// and so what a split copies.
        #[arg(long, default_value_t = loligo_kv::VALUE_MAX)]
        value_max: usize,
    },
    /// Set KEY to VALUE (`-`: read the value from stdin).
    Put {
        store: String,
        key: String,
        value: String,
    },
    /// Print KEY's value to stdout (exit 1 if the key has none).
    Get { store: String, key: String },
    /// Remove KEY (exit 1 if the key has none).
    Rm { store: String, key: String },
    /// Print `KEY<TAB>VALUE` lines in key order (bytes that are not UTF-8
    /// print as U+FFFD).
    Scan {
        store: String,
        /// First key (inclusive).
        #[arg(long, default_value = "")]
        start: String,
        /// Last key (exclusive); none: to the end.
        #[arg(long)]
        end: Option<String>,
        /// At most this many entries.
        #[arg(long, default_value_t = 1_000_000)]
        limit: usize,
    },
    /// Check the tree's invariants (nodes exist and are writable, counts,
    /// key ranges, k..=2k entries per node, no intents or tombs left);
    /// exit 2 if any is broken. Run it while no one writes to the store.
    Check { store: String },
    /// Repair what clients that died left behind: roll back splits and
    /// rebalances not renewed for the timeout (waiting one timeout for
    /// those seen for the first time), delete the nodes finished ones
    /// replaced, clear stale unwritable marks. Safe while others use the
    /// store.
    Clean {
        store: String,
        /// Roll back only what is older than this (ms); every client of
        /// the store should use the same.
        #[arg(long, default_value_t = loligo_kv::DEFAULT_TIMEOUT_MS)]
        timeout_ms: u64,
    },
    /// The workload of "A scalable, consistent key-value store on RADOS":
    /// CLIENTS clients (each its own index cache) with IN_FLIGHT ops each
    /// do a mix of reads, inserts, removes and updates of random keys for
    /// SECONDS, after PREFILL keys are written. Creates store STORE first
    /// and removes it after (unless --keep); --baseline runs the same ops
    /// on one object per key instead (the cost of the tree).
    Bench {
        #[arg(default_value = "kvbench")]
        store: String,
        #[arg(long, default_value_t = 5)]
        clients: usize,
        #[arg(long, default_value_t = 1)]
        in_flight: usize,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Weights of read,insert,remove,update.
        #[arg(long, default_value = "25,25,25,25")]
        mix: String,
        /// Bytes per value.
        #[arg(long, default_value_t = 1024)]
        entry_size: usize,
        /// Nodes hold K..=2K entries.
        #[arg(long, default_value_t = 800)]
        k: u64,
        #[arg(long, default_value_t = 5000)]
        prefill: u64,
        /// One object per key (omap) instead of the tree.
        #[arg(long)]
        baseline: bool,
        /// Write the tree's nodes with plain ops (read, then compare and
        /// write: two round trips) instead of the `kv.write` object class
        /// method (one), to measure what the method saves.
        #[arg(long, conflicts_with = "baseline")]
        plain_writes: bool,
        /// Index entries each client caches, oldest dropped first; each
        /// refresh from the index reads a fifth of this, at most 200 (the
        /// paper: 1,000 and 20%).
        #[arg(long, default_value_t = loligo_kv::cache::DEFAULT_MAX)]
        cache_entries: usize,
        /// Leave the store (or the baseline's objects) in place.
        #[arg(long)]
        keep: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Nodes, entries and depth.
    Stats {
        store: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A missing key: message, exit code 1.
fn missing(key: &str) -> ! {
    eprintln!("loligo: no key '{key}'");
    std::process::exit(1)
}

pub fn run(conn: &ConnArgs, c: KvCmd) -> Result<(), CliError> {
    let (rt, io) = crate::data_cmd::connect(conn)?;
    rt.block_on(async {
        match c {
            KvCmd::Create {
                store,
                k,
                value_max,
            } => {
                KvStore::create_with(io, &store, k, value_max).await?;
            }
            KvCmd::Put { store, key, value } => {
                let value = if value == "-" {
                    let mut v = Vec::new();
                    std::io::stdin().read_to_end(&mut v)?;
                    v
                } else {
                    value.into_bytes()
                };
                KvStore::open(io, &store)
                    .await?
                    .put(key.as_bytes(), &value)
                    .await?;
            }
            KvCmd::Get { store, key } => {
                match KvStore::open(io, &store).await?.get(key.as_bytes()).await? {
                    Some(v) => std::io::stdout().write_all(&v)?,
                    None => missing(&key),
                }
            }
            KvCmd::Rm { store, key } => {
                if !KvStore::open(io, &store)
                    .await?
                    .remove(key.as_bytes())
                    .await?
                {
                    missing(&key);
                }
            }
            KvCmd::Scan {
                store,
                start,
                end,
                limit,
            } => {
                let kv = KvStore::open(io, &store).await?;
                let rows = kv
                    .scan(start.as_bytes(), end.as_deref().map(str::as_bytes), limit)
                    .await?;
                let mut out = std::io::stdout().lock();
                for (k, v) in rows {
                    writeln!(
                        out,
                        "{}\t{}",
                        String::from_utf8_lossy(&k),
                        String::from_utf8_lossy(&v)
                    )?;
                }
            }
            KvCmd::Check { store } => {
                let c = KvStore::open(io, &store).await?.check().await?;
                for p in &c.problems {
                    println!("{p}");
                }
                println!(
                    "store {store}: {} nodes, {} entries; {} problems",
                    c.nodes,
                    c.entries,
                    c.problems.len()
                );
                if !c.problems.is_empty() {
                    return Err(CliError(format!(
                        "store {store} has {} problems",
                        c.problems.len()
                    )));
                }
            }
            KvCmd::Bench {
                store,
                clients,
                in_flight,
                seconds,
                mix,
                entry_size,
                k,
                prefill,
                baseline,
                plain_writes,
                cache_entries,
                keep,
                json,
            } => {
                let parts: Vec<u32> = mix
                    .split(',')
                    .map(|p| p.trim().parse::<u32>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| CliError(format!("--mix {mix}: four whole numbers, a,b,c,d")))?;
                let mix: [u32; 4] = parts
                    .try_into()
                    .map_err(|_| CliError(format!("--mix {mix}: four whole numbers, a,b,c,d")))?;
                if !(seconds > 0.0 && seconds.is_finite()) {
                    return Err(CliError("--seconds must be above 0".into()));
                }
                let o = bench::BenchOpts {
                    clients,
                    in_flight,
                    seconds,
                    mix,
                    entry_size,
                    prefill,
                    baseline,
                    plain_writes,
                    cache_entries,
                };
                if !baseline {
                    KvStore::create(io.clone(), &store, k).await?;
                }
                let r = bench::run(io.clone(), &store, &o).await;
                if !keep {
                    if baseline {
                        let upto = r.as_ref().map_or(prefill, |r| r.keys_made);
                        bench::cleanup_baseline(&io, &store, upto).await?;
                    } else {
                        KvStore::open(io.clone(), &store).await?.destroy().await?;
                    }
                }
                let r = r?;
                if json {
                    println!(
                        "{}",
                        serde_json::json!({
                            "baseline": baseline,
                            "plain_writes": plain_writes,
                            "cache_entries": cache_entries,
                            "clients": clients,
                            "in_flight": in_flight,
                            "entry_size": entry_size,
                            "k": k,
                            "prefill": prefill,
                            "mix": mix,
                            "report": r,
                        })
                    );
                } else {
                    println!(
                        "{} {} ops in {:.1} s: {:.0} ops/s (prefill of {prefill} keys {:.1} s)",
                        if baseline {
                            "baseline (object per key):".to_string()
                        } else {
                            format!("tree of {} nodes:", r.nodes.unwrap_or_default())
                        },
                        r.ops,
                        r.seconds,
                        r.ops_per_s,
                        r.prefill_seconds
                    );
                    for (name, s) in bench::KINDS.iter().zip(&r.kinds) {
                        println!(
                            "  {name:<6} {:>8} ops  p50 {:>8.3} ms  mean {:>8.3} ms  p99 {:>8.3} ms",
                            s.ops, s.p50_ms, s.mean_ms, s.p99_ms
                        );
                    }
                    let t = &r.trips;
                    println!(
                        "  round trips per op {:.3} ({:.3} to the index); {} writes refused for a full or too small node, {} for one being replaced",
                        t.per_op, t.index_per_op, t.reshapes, t.unwritable
                    );
                }
            }
            KvCmd::Clean { store, timeout_ms } => {
                let kv = KvStore::open(io, &store).await?.with_timeout(timeout_ms);
                let d = kv.clean().await?;
                println!(
                    "store {store}: {} rolled back, {} tombs finished, {} marks cleared",
                    d.rolled_back, d.tombs, d.marks
                );
            }
            KvCmd::Stats { store, json } => {
                let kv = KvStore::open(io, &store).await?;
                let s = kv.stats().await?;
                if json {
                    println!(
                        "{}",
                        serde_json::json!({
                            "store": store,
                            "k": kv.k(),
                            "value_max": kv.value_max(),
                            "nodes": s.nodes,
                            "entries": s.entries,
                            "depth": s.depth,
                        })
                    );
                } else {
                    println!(
                        "store {store}: {} entries in {} nodes (k {}), depth {}",
                        s.entries,
                        s.nodes,
                        kv.k(),
                        s.depth
                    );
                }
            }
        }
        Ok(())
    })
}
