//! `loligo store bench`: the store's workloads, each next to a baseline in
//! the same run: (a) 4 MiB sequential object writes vs the same bytes
//! written to a plain file with O_DIRECT + fdatasync; (b) 4 KiB random
//! overwrites from 16 writers, with the bytes the process wrote to the
//! device per user byte (from /proc/self/io); (c) 4 KiB object creates and
//! 100-byte omap inserts per second; (d) the same against `MemStore` as
//! the CPU ceiling.
//!
//! It must never run against a store holding data someone needs: the CLI
//! creates a fresh store and removes it.

use crate::error::{Result, StoreError};
use crate::names::{CollectionId, ObjectId};
use crate::store::ObjectStore;
use crate::txn::Transaction;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Linux's O_DIRECT open flag (x86_64 and aarch64 value).
const O_DIRECT: i32 = 0o40000;
const MIB4: usize = 4 << 20;
/// Writer threads (so 4 MiB writes in flight) in workload (a).
pub const SEQ_WINDOW: usize = 4;

/// One store's results.
#[derive(Clone, Copy, Debug, Default)]
pub struct Results {
    /// MB/s of 4 MiB object writes, each durable before the next.
    pub seq_write_mbps: f64,
    pub rand_write_iops: f64,
    /// Device bytes written per user byte during the random writes (0 if
    /// /proc/self/io is unavailable or the store is in memory).
    pub write_amplification_4k: f64,
    /// MB/s of whole reads of the 16 objects of (b), cold, before and
    /// after their random overwrites (blocks that moved are read apart).
    pub fresh_read_mbps: f64,
    pub overwritten_read_mbps: f64,
    pub creates_per_s: f64,
    pub omap_inserts_per_s: f64,
}

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

/// Bytes this process has caused to be written to storage.
pub fn proc_write_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/io").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

fn filler(len: usize, seed: u64) -> Vec<u8> {
    loligo_testkit::Rng::new(seed).bytes(len)
}

/// The baseline for (a): 4 MiB writes with O_DIRECT, each followed by
/// fdatasync, into a plain file in `dir`. MB/s.
pub fn raw_direct_mbps(dir: &Path, seconds: f64) -> Result<f64> {
    let path = dir.join("raw-baseline");
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .custom_flags(O_DIRECT)
        .open(&path)
        .map_err(io)?;
    // O_DIRECT needs an aligned buffer.
    let mut raw = vec![0u8; MIB4 + 4096];
    let off = (4096 - raw.as_ptr() as usize % 4096) % 4096;
    raw[off..off + MIB4].copy_from_slice(&filler(MIB4, 3));
    let buf = &raw[off..off + MIB4];
    let start = Instant::now();
    let mut n = 0u64;
    while n < 2 || start.elapsed().as_secs_f64() < seconds {
        f.write_all_at(buf, (n % 64) * MIB4 as u64).map_err(io)?;
        f.sync_data().map_err(io)?;
        n += 1;
    }
    let mbps = (n as f64 * MIB4 as f64) / start.elapsed().as_secs_f64() / 1e6;
    drop(f);
    let _ = std::fs::remove_file(&path);
    Ok(mbps)
}

/// Workload (a): 4 MiB `write_full`s for `seconds` from [`SEQ_WINDOW`]
/// writer threads (as an OSD has several client writes outstanding), each
/// rewriting its own 8 objects in turn and waiting for each commit. MB/s.
pub fn seq_writes(s: &dyn ObjectStore, seconds: f64) -> Result<f64> {
    let c = coll();
    if !s.collection_exists(c)? {
        let mut t = Transaction::new();
        t.create_collection(c);
        s.apply(t)?;
    }
    let budget = Duration::from_secs_f64(seconds);
    // As an OSD receives object data: into an aligned buffer, shared (not
    // copied) by every write of it.
    let data = crate::block::aligned_bytes(&filler(MIB4, 1));
    let start = Instant::now();
    let n = writers(SEQ_WINDOW as u64, start, budget, &|w, k| {
        let i = w * 8 + k % 8;
        let mut t = Transaction::new();
        t.write_full(
            c,
            &ObjectId::new(i as u32, format!("seq-{i}")),
            data.clone(),
        );
        s.apply(t)
    })?;
    Ok((n as f64 * MIB4 as f64) / start.elapsed().as_secs_f64() / 1e6)
}

/// Run `f(writer, i)` for i = 0, 1, ... in `writers` threads until
/// `budget` has passed (each at least twice); total calls.
fn writers(
    n: u64,
    start: Instant,
    budget: Duration,
    f: &(dyn Fn(u64, u64) -> Result<()> + Sync),
) -> Result<u64> {
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..n)
            .map(|w| {
                sc.spawn(move || -> Result<u64> {
                    let mut k = 0u64;
                    while k < 2 || start.elapsed() < budget {
                        f(w, k)?;
                        k += 1;
                    }
                    Ok(k)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(StoreError::Io("writer panicked".into())))
            })
            .sum::<Result<u64>>()
    })
}

fn coll() -> CollectionId {
    CollectionId::pg(1000, 0)
}

/// What the 4 KiB overwrites of (b) carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Payload {
    /// One byte repeated (which the KV's journal compresses: a deferred
    /// write's record then costs little).
    #[default]
    Repeated,
    /// Random bytes, as encrypted or compressed data would be.
    Random,
}

/// Read objects `rand-0..16` whole once each, after `cold()`; MB/s.
fn read_all(s: &dyn ObjectStore, n: u64, cold: &dyn Fn()) -> Result<f64> {
    cold();
    let c = coll();
    let start = Instant::now();
    let mut bytes = 0;
    for w in 0..n {
        let o = ObjectId::new(w as u32, format!("rand-{w}"));
        bytes += s.read_bytes(c, &o, 0, MIB4 as u64)?.len();
    }
    Ok(bytes as f64 / start.elapsed().as_secs_f64() / 1e6)
}

/// Run (a)-(c) against a store. `disk`: measure write amplification.
/// `cold`: drop what the operating system caches of the store's data.
pub fn run(
    s: &dyn ObjectStore,
    seconds: f64,
    disk: bool,
    payload: Payload,
    cold: &dyn Fn(),
) -> Result<Results> {
    let c = coll();
    if !s.collection_exists(c)? {
        let mut t = Transaction::new();
        t.create_collection(c);
        s.apply(t)?;
    }
    let mut r = Results::default();
    let budget = Duration::from_secs_f64(seconds);
    r.seq_write_mbps = seq_writes(s, seconds)?;
    // (b) 4 KiB random overwrites, 16 writers, each in its own 4 MiB object.
    let nw = 16u64;
    for w in 0..nw {
        let mut t = Transaction::new();
        t.write_full(
            c,
            &ObjectId::new(w as u32, format!("rand-{w}")),
            filler(MIB4, w + 10),
        );
        s.apply(t)?;
    }
    r.fresh_read_mbps = read_all(s, nw, cold)?;
    let before = if disk { proc_write_bytes() } else { None };
    let start = Instant::now();
    let ops = writers(nw, start, budget, &|w, k| {
        // A different random 4 KiB block of the writer's object each time.
        let x = loligo_testkit::Rng::new((w << 32) ^ k).next_u64();
        let off = (x % (MIB4 as u64 / 4096)) * 4096;
        let mut t = Transaction::new();
        t.write(
            c,
            &ObjectId::new(w as u32, format!("rand-{w}")),
            off,
            match payload {
                Payload::Repeated => vec![x as u8; 4096],
                Payload::Random => filler(4096, x),
            },
        );
        s.apply(t)
    })?;
    let secs = start.elapsed().as_secs_f64();
    r.rand_write_iops = ops as f64 / secs;
    if std::env::var_os("LOLIGO_BENCH_TRACE").is_some() {
        eprintln!("after (b): {:?}", s.statfs()?);
    }
    if let (Some(b), Some(a)) = (before, if disk { proc_write_bytes() } else { None }) {
        r.write_amplification_4k = (a.saturating_sub(b)) as f64 / (ops * 4096) as f64;
    }
    r.overwritten_read_mbps = read_all(s, nw, cold)?;
    // (c) creates of 4 KiB objects and omap inserts, 16 writers.
    let small = filler(4096, 7);
    let count = |f: &(dyn Fn(u64, u64) -> Transaction + Sync)| -> Result<f64> {
        let start = Instant::now();
        let total = writers(nw, start, budget, &|w, k| s.apply(f(w, k)))?;
        Ok(total as f64 / start.elapsed().as_secs_f64())
    };
    r.creates_per_s = count(&|w, k| {
        let mut t = Transaction::new();
        t.write_full(
            c,
            &ObjectId::new((w << 24 | k) as u32, format!("small-{w}-{k}")),
            small.clone(),
        );
        t
    })?;
    r.omap_inserts_per_s = count(&|w, k| {
        let mut t = Transaction::new();
        let key = format!("key-{k:012}").into_bytes();
        t.omap_setkeys(
            c,
            &ObjectId::new(w as u32, format!("omap-{w}")),
            vec![(key, vec![b'v'; 100])],
        );
        t
    })?;
    Ok(r)
}
