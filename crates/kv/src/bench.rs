//! The workload of "A scalable, consistent key-value store on RADOS" as a
//! benchmark: clients, each with its own index cache and some ops in
//! flight, doing a mix of reads, inserts, removes and updates of random
//! keys with values of one size, for a while; ops/s and latency per kind.
//! With `baseline`, the same ops go to one object per key (its omap holds
//! the value): no tree, so the difference is the tree's cost.
//!
//! This module only drives a store through its public API; it must never
//! reach into a node or the index itself.

use crate::{KvError, KvStore, Objects, Result};
use loligo_types::cls::{KV_FULL, KV_UNDER, KV_UNWRITABLE};
use loligo_types::ops::{OpError, SubOp, SubResult};
use serde_bytes::ByteBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Kinds of op, in the order of [`BenchOpts::mix`].
pub const KINDS: [&str; 4] = ["read", "insert", "remove", "update"];

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    pub clients: usize,
    /// Ops in flight per client.
    pub in_flight: usize,
    pub seconds: f64,
    /// Weights of read, insert, remove, update.
    pub mix: [u32; 4],
    /// Bytes per value.
    pub entry_size: usize,
    /// Keys written before the timed run.
    pub prefill: u64,
    /// One object per key instead of the tree.
    pub baseline: bool,
    /// Write nodes with plain ops instead of the `kv.write` method.
    pub plain_writes: bool,
    /// Index entries each client caches (its refresh reads a fifth).
    pub cache_entries: usize,
}

/// Count and latency of one kind of op.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct KindStats {
    pub ops: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The mean: above the median by what the rare slow ops (splits,
    /// rebalances, index re-reads) cost.
    pub mean_ms: f64,
}

/// What a run measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Report {
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    /// Per kind, in the order of [`KINDS`].
    pub kinds: Vec<KindStats>,
    pub prefill_seconds: f64,
    /// Keys numbered below this may exist after the run.
    pub keys_made: u64,
    /// Nodes the tree's index named after the run (`None`: the baseline).
    pub nodes: Option<u64>,
    /// What the timed run's ops sent: where the tree's extra cost goes.
    pub trips: Trips,
}

/// Round trips of the timed run, counted by the benchmark's [`Objects`].
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Trips {
    /// Ops sent, per op of the workload (1 for the baseline).
    pub per_op: f64,
    /// Of those, ops on the tree's index object: cache refreshes, reads
    /// after a stale entry, and the steps of splits and rebalances.
    pub index_per_op: f64,
    /// Writes refused for a node too full or too small, each followed by
    /// a split or rebalance unless another client's holds the node (then
    /// it waits and retries, and a retry refused again counts again).
    /// Counted from the `kv.write` method's refusals: 0 with
    /// `plain_writes`, whose refusals the client makes itself.
    pub reshapes: u64,
    /// Writes refused for a node being replaced (the writer waits); 0
    /// with `plain_writes`, as above.
    pub unwritable: u64,
}

/// Counts of what the benchmark's clients send.
#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    index: AtomicU64,
    reshapes: AtomicU64,
    unwritable: AtomicU64,
}

impl Counts {
    fn snapshot(&self) -> [u64; 4] {
        [&self.sent, &self.index, &self.reshapes, &self.unwritable]
            .map(|c| c.load(Ordering::Relaxed))
    }
}

/// The pool's objects, counting what is sent to them.
#[derive(Clone)]
struct Counted<O> {
    inner: O,
    counts: Arc<Counts>,
}

impl<O: Objects> Objects for Counted<O> {
    async fn operate(&self, name: &str, ops: Vec<SubOp>) -> Result<Vec<SubResult>> {
        self.counts.sent.fetch_add(1, Ordering::Relaxed);
        if name.ends_with(".index") {
            self.counts.index.fetch_add(1, Ordering::Relaxed);
        }
        let r = self.inner.operate(name, ops).await;
        if let Err(KvError::Op(OpError::MethodRefused { code, .. })) = &r {
            match *code {
                KV_FULL | KV_UNDER => self.counts.reshapes.fetch_add(1, Ordering::Relaxed),
                KV_UNWRITABLE => self.counts.unwritable.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
        }
        r
    }

    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }

    fn pause(&self, ms: u64) -> impl std::future::Future<Output = ()> + Send {
        self.inner.pause(ms)
    }
}

/// Keys by number, spread over the key space.
fn key(id: u64) -> Vec<u8> {
    // splitmix64: ids in order land all over the tree.
    let mut z = id.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("{:016x}", z ^ (z >> 31)).into_bytes()
}

/// Keys that exist (as far as the run knows) and the next new one.
struct Keys {
    live: Vec<u64>,
    next: u64,
    rng: u64,
}

impl Keys {
    fn below(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n.max(1)
    }
}

/// Where the ops go: the tree, or one object per key.
enum Target<O: Objects> {
    Tree(KvStore<O>),
    Objects(O, String),
}

impl<O: Objects> Target<O> {
    fn object(store: &str, key: &[u8]) -> String {
        format!("{store}.b.{}", String::from_utf8_lossy(key))
    }

    async fn read(&self, key: &[u8]) -> Result<()> {
        match self {
            Target::Tree(kv) => kv.get(key).await.map(|_| ()),
            Target::Objects(o, s) => {
                let ops = vec![SubOp::OmapGetKeys(vec![ByteBuf::from(b"v".to_vec())])];
                match o.operate(&Self::object(s, key), ops).await {
                    Ok(_) | Err(KvError::Op(OpError::NotFound)) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        }
    }

    async fn write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        match self {
            Target::Tree(kv) => kv.put(key, value).await,
            Target::Objects(o, s) => {
                let ops = vec![SubOp::OmapSet(vec![(
                    ByteBuf::from(b"v".to_vec()),
                    ByteBuf::from(value.to_vec()),
                )])];
                o.operate(&Self::object(s, key), ops).await.map(|_| ())
            }
        }
    }

    async fn remove(&self, key: &[u8]) -> Result<()> {
        match self {
            Target::Tree(kv) => kv.remove(key).await.map(|_| ()),
            Target::Objects(o, s) => {
                match o.operate(&Self::object(s, key), vec![SubOp::Remove]).await {
                    Ok(_) | Err(KvError::Op(OpError::NotFound)) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

fn stats(mut lat: Vec<f64>) -> KindStats {
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    let mean_ms = match lat.len() {
        0 => 0.0,
        n => lat.iter().sum::<f64>() / n as f64,
    };
    KindStats {
        ops: lat.len() as u64,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        mean_ms,
    }
}

/// Run the workload on store `store` (which must exist, unless
/// `baseline`): prefill, then the timed mix. Leaves the keys in place:
/// [`KvStore::destroy`] or [`cleanup_baseline`] removes them.
pub async fn run<O>(objs: O, store: &str, o: &BenchOpts) -> Result<Report>
where
    O: Objects + Clone + 'static,
{
    if o.clients == 0 || o.in_flight == 0 || o.mix.iter().sum::<u32>() == 0 {
        return Err(KvError::Invalid(
            "clients, ops in flight and the mix's total must be above 0".into(),
        ));
    }
    crate::check_value(&vec![0; o.entry_size], crate::VALUE_MAX)?;
    let counts = Arc::new(Counts::default());
    let objs = Counted {
        inner: objs,
        counts: counts.clone(),
    };
    let value: Arc<Vec<u8>> = Arc::new((0..o.entry_size).map(|i| (i * 31 + 7) as u8).collect());
    let mut targets = Vec::new();
    for _ in 0..o.clients {
        targets.push(Arc::new(if o.baseline {
            Target::Objects(objs.clone(), store.to_string())
        } else {
            Target::Tree(
                KvStore::open(objs.clone(), store)
                    .await?
                    .with_plain_writes(o.plain_writes)
                    .with_cache(o.cache_entries),
            )
        }));
    }
    let keys = Arc::new(Mutex::new(Keys {
        live: Vec::new(),
        next: 0,
        rng: 0x2545_f491_4f6c_dd1d,
    }));
    // Prefill: batches into the tree (or one op per key), `in_flight *
    // clients` at a time.
    let t0 = Instant::now();
    let per = 64u64;
    let mut set = tokio::task::JoinSet::new();
    let mut next = 0u64;
    while next < o.prefill || !set.is_empty() {
        while next < o.prefill && set.len() < o.clients * o.in_flight {
            let (from, to) = (next, (next + per).min(o.prefill));
            next = to;
            let t = targets[(from / per) as usize % targets.len()].clone();
            let v = value.clone();
            set.spawn(async move {
                match &*t {
                    Target::Tree(kv) => {
                        kv.put_many((from..to).map(|i| (key(i), v.to_vec())).collect())
                            .await
                    }
                    Target::Objects(..) => {
                        for i in from..to {
                            t.write(&key(i), &v).await?;
                        }
                        Ok(())
                    }
                }
            });
        }
        if let Some(r) = set.join_next().await {
            r.map_err(|e| KvError::Client(e.to_string()))??;
        }
    }
    {
        let mut k = keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        k.live = (0..o.prefill).collect();
        k.next = o.prefill;
    }
    let prefill_seconds = t0.elapsed().as_secs_f64();
    let before = counts.snapshot();
    // The timed mix.
    let total: u32 = o.mix.iter().sum();
    let deadline = Instant::now() + Duration::from_secs_f64(o.seconds);
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for t in &targets {
        for _ in 0..o.in_flight {
            let (t, keys, value, mix) = (t.clone(), keys.clone(), value.clone(), o.mix);
            set.spawn(async move {
                let mut lat: [Vec<f64>; 4] = Default::default();
                while Instant::now() < deadline {
                    let (kind, id) = {
                        let mut k = keys
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let mut pick = k.below(u64::from(total)) as u32;
                        let mut kind = 0;
                        while pick >= mix[kind] {
                            pick -= mix[kind];
                            kind += 1;
                        }
                        // With no keys left, insert.
                        if k.live.is_empty() {
                            kind = 1;
                        }
                        let id = match kind {
                            1 => {
                                k.next += 1;
                                k.next - 1
                            }
                            2 => {
                                let n = k.live.len() as u64;
                                let i = k.below(n) as usize;
                                k.live.swap_remove(i)
                            }
                            _ => {
                                let n = k.live.len() as u64;
                                let i = k.below(n) as usize;
                                k.live[i]
                            }
                        };
                        (kind, id)
                    };
                    let key = key(id);
                    let t0 = Instant::now();
                    match kind {
                        0 => t.read(&key).await?,
                        2 => t.remove(&key).await?,
                        _ => t.write(&key, &value).await?,
                    }
                    lat[kind].push(t0.elapsed().as_secs_f64() * 1e3);
                    if kind == 1 {
                        keys.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .live
                            .push(id);
                    }
                }
                Ok::<_, KvError>(lat)
            });
        }
    }
    let mut all: [Vec<f64>; 4] = Default::default();
    while let Some(r) = set.join_next().await {
        let lat = r.map_err(|e| KvError::Client(e.to_string()))??;
        for (a, l) in all.iter_mut().zip(lat) {
            a.extend(l);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let after = counts.snapshot();
    let keys_made = keys
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .next;
    let kinds: Vec<KindStats> = all.into_iter().map(stats).collect();
    let ops: u64 = kinds.iter().map(|k| k.ops).sum();
    let per = |i: usize| (after[i] - before[i]) as f64 / ops.max(1) as f64;
    let trips = Trips {
        per_op: per(0),
        index_per_op: per(1),
        reshapes: after[2] - before[2],
        unwritable: after[3] - before[3],
    };
    let nodes = match targets.first().map(|t| &**t) {
        Some(Target::Tree(kv)) => Some(kv.node_count().await?),
        _ => None,
    };
    Ok(Report {
        ops,
        seconds,
        ops_per_s: ops as f64 / seconds,
        kinds,
        prefill_seconds,
        keys_made,
        nodes,
        trips,
    })
}

/// Remove a baseline run's objects: every key it may have written.
pub async fn cleanup_baseline<O: Objects>(objs: &O, store: &str, upto: u64) -> Result<()> {
    for i in 0..upto {
        let name = Target::<O>::object(store, &key(i));
        match objs.operate(&name, vec![SubOp::Remove]).await {
            Ok(_) | Err(KvError::Op(OpError::NotFound)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
