//! A key-value store on Loligo object maps, after "A scalable, consistent
//! key-value store on RADOS": a two-level B-tree whose index object maps
//! each leaf node's highest key to the node's object, and whose leaf
//! nodes keep their entries in their omaps (`k..=2k` of them, except a
//! store's only node). Every update of a node is one atomic op: the OSD's
//! `kv.write` object class method checks that the node is writable, the
//! keys' expectations and the size bounds, and applies the batch, or
//! refuses and changes nothing.
//!
//! Reads are linearizable: a node is marked unwritable before anything
//! replaces it, so a read that finds its node writable (checked in the
//! same op as the read) read the current copy of its keys; one that finds
//! it unwritable then checks that the index still names the node (no
//! replacement committed), else re-reads.
//!
//! A write that would take a node past `2k` entries splits it, and one
//! that would take it below `k` rebalances it with a neighbour; either way
//! the write itself is applied to the new nodes and commits with them
//! (see `reshape`). A node's range is fixed when it is made and checked
//! by the OSD on every write, so a stale cached index can never put a key
//! into the wrong node. Each client caches a bounded number of index
//! entries (`cache`).
//!
//! This crate is a client of `loligo-client` only: it must never rely on
//! anything but object ops and the OSDs' object class methods.

pub mod bench;
pub mod cache;
pub mod index;
pub mod plan;
mod reshape;
pub use reshape::Cleaned;

use index::{IndexEntry, FORMAT, FORMAT_XATTR, K_XATTR, VALUE_MAX_XATTR};
use loligo_types::cls::{
    Expect, KeyRange, KvChange, KvNodeStat, KvWrite, NodeRange, RangePage, KV_COUNT_XATTR,
    KV_EXPECT, KV_FULL, KV_RANGE, KV_RANGE_XATTR, KV_UNDER, KV_UNWRITABLE,
};
use loligo_types::ops::{OpError, SubOp, SubResult};
use serde_bytes::ByteBuf;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

/// Longest key, in bytes.
pub const KEY_MAX: usize = 1024;
/// Largest value, in bytes, unless a store is made with a smaller bound
/// ([`KvStore::create_with`]).
pub const VALUE_MAX: usize = 1 << 20;
/// Smallest and largest `k`.
pub const K_RANGE: std::ops::RangeInclusive<u64> = 2..=100_000;
/// How long a split or rebalance may take before any client may roll it
/// back (milliseconds), unless set with [`KvStore::with_timeout`].
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// First wait before retrying an op that met a node being replaced
/// (doubling up to 64x).
const RETRY_MS: u64 = 2;

/// Why a key-value call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KvError {
    #[error("no key-value store '{0}' in this pool")]
    NoStore(String),
    #[error("a key-value store '{0}' exists already")]
    Exists(String),
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("not supported: {0}")]
    NotSupported(String),
    #[error("the store's objects are corrupt: {0}")]
    Corrupt(String),
    #[error("gave up after {0} ms: the node stayed busy (being replaced)")]
    Busy(u64),
    #[error("{0}")]
    Op(OpError),
    #[error("client: {0}")]
    Client(String),
}

impl From<loligo_client::ClientError> for KvError {
    fn from(e: loligo_client::ClientError) -> Self {
        match e {
            loligo_client::ClientError::Op(e) => KvError::Op(e),
            e => KvError::Client(e.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, KvError>;

/// What the store needs of a pool: atomic ops on named objects, a clock
/// and a way to wait (both replaceable so tests run on simulated time).
pub trait Objects: Send + Sync {
    /// Apply `ops` to object `name` all or nothing; the results of its
    /// reads.
    fn operate(
        &self,
        name: &str,
        ops: Vec<SubOp>,
    ) -> impl Future<Output = Result<Vec<SubResult>>> + Send;

    /// Milliseconds since the Unix epoch: a client stamps its intents
    /// with it (a renewal changes the stamp) and measures how long it has
    /// seen another's stamp unchanged. Only one client's own readings
    /// are ever compared: clients' clocks need not agree.
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }

    /// Wait `ms` milliseconds.
    fn pause(&self, ms: u64) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(std::time::Duration::from_millis(ms))
    }
}

impl Objects for loligo_client::IoCtx {
    async fn operate(&self, name: &str, ops: Vec<SubOp>) -> Result<Vec<SubResult>> {
        Ok(loligo_client::IoCtx::operate(self, name, ops).await?.0)
    }
}

impl<O: Objects> Objects for &O {
    fn operate(
        &self,
        name: &str,
        ops: Vec<SubOp>,
    ) -> impl Future<Output = Result<Vec<SubResult>>> + Send {
        (**self).operate(name, ops)
    }

    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }

    fn pause(&self, ms: u64) -> impl Future<Output = ()> + Send {
        (**self).pause(ms)
    }
}

/// Counts of [`KvStore::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub nodes: u64,
    pub entries: u64,
    /// Levels of objects: the index and the leaf nodes.
    pub depth: u32,
}

/// One key-value store: the index object `NAME.index` and its nodes.
pub struct KvStore<O: Objects> {
    objs: O,
    name: String,
    k: u64,
    /// Largest value this store takes.
    value_max: usize,
    timeout_ms: u64,
    /// Index entries this client has read, by index key, bounded: a hint
    /// only. A node's range never changes and is checked on every read
    /// and write, so a stale or missing entry costs a retry, never a
    /// misplaced key.
    cache: Mutex<cache::IndexCache>,
    /// Other clients' intents and tombs this client has seen, by token:
    /// the stamp it saw and its own clock then (see `reshape::Seen`).
    seen: Mutex<reshape::Seen>,
    /// Write nodes with plain ops (a read, then a compare-and-write)
    /// instead of the `kv.write` method: only to measure what the method
    /// saves.
    plain_writes: bool,
}

/// What one try of an op on a node came to.
enum Attempt<T> {
    Done(T),
    /// The node is gone or does not hold the key: re-read the index.
    Stale,
    /// The node is being replaced: help or wait, then retry.
    Busy,
}

impl<T> Attempt<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Attempt<U> {
        match self {
            Attempt::Done(t) => Attempt::Done(f(t)),
            Attempt::Stale => Attempt::Stale,
            Attempt::Busy => Attempt::Busy,
        }
    }
}

fn exec<T: serde::Serialize>(class: &str, method: &str, input: &T) -> SubOp {
    SubOp::Exec {
        class: class.into(),
        method: method.into(),
        // Inputs are plain structs of bytes and integers: they encode.
        input: postcard::to_stdvec(input).unwrap_or_default(),
    }
}

fn data(r: Option<SubResult>) -> Result<Vec<u8>> {
    match r {
        Some(SubResult::Data(d)) => Ok(d.to_vec()),
        other => Err(KvError::Corrupt(format!("expected data, got {other:?}"))),
    }
}

fn decode<T: serde::de::DeserializeOwned>(b: &[u8], what: &str) -> Result<T> {
    postcard::from_bytes(b).map_err(|e| KvError::Corrupt(format!("{what}: {e}")))
}

fn omap(r: Option<SubResult>) -> Result<Vec<(ByteBuf, ByteBuf)>> {
    match r {
        Some(SubResult::Omap(v)) => Ok(v),
        other => Err(KvError::Corrupt(format!(
            "expected omap entries, got {other:?}"
        ))),
    }
}

/// A name unique across clients without coordination (nodes, tokens).
fn unique(store: &str, kind: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mix = nanos ^ (u64::from(std::process::id()) << 40) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!("{store}.{kind}.{mix:016x}.{n}")
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > KEY_MAX {
        return Err(KvError::Invalid(format!("keys are 1-{KEY_MAX} bytes")));
    }
    Ok(())
}

fn check_value(value: &[u8], max: usize) -> Result<()> {
    if value.len() > max {
        return Err(KvError::Invalid(format!(
            "values in this store are at most {max} bytes"
        )));
    }
    Ok(())
}

/// The ops that make a new node object with `range` and `entries` (which
/// must all be in it), in ops of a few MiB each: the first creates it.
fn node_ops(range: &NodeRange, entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<SubOp>> {
    const OP_BYTES: usize = 4 << 20;
    let mut chunks: Vec<Vec<(ByteBuf, ByteBuf)>> = vec![Vec::new()];
    let mut bytes = 0;
    for (k, v) in entries {
        if bytes > 0 && bytes + k.len() + v.len() > OP_BYTES {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += k.len() + v.len();
        if let Some(c) = chunks.last_mut() {
            c.push((ByteBuf::from(k.clone()), ByteBuf::from(v.clone())));
        }
    }
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| {
            let mut ops = if i == 0 {
                vec![
                    SubOp::AssertNotExists,
                    SubOp::SetXattr {
                        name: KV_COUNT_XATTR.into(),
                        value: (entries.len() as u64).to_le_bytes().to_vec(),
                    },
                    SubOp::SetXattr {
                        name: KV_RANGE_XATTR.into(),
                        value: postcard::to_stdvec(range).unwrap_or_default(),
                    },
                ]
            } else {
                vec![SubOp::AssertExists]
            };
            if !chunk.is_empty() {
                ops.push(SubOp::OmapSet(chunk));
            }
            ops
        })
        .collect()
}

impl<O: Objects> KvStore<O> {
    fn index(&self) -> String {
        format!("{}.index", self.name)
    }

    fn new(objs: O, name: &str, k: u64, value_max: usize) -> KvStore<O> {
        KvStore {
            objs,
            name: name.to_string(),
            k,
            value_max,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            cache: Mutex::new(cache::IndexCache::new(cache::DEFAULT_MAX)),
            seen: Mutex::new(reshape::Seen::default()),
            plain_writes: false,
        }
    }

    /// How long (milliseconds, by this client's [`Objects::now_ms`])
    /// this client must have seen another client's split or rebalance
    /// unrenewed before it rolls it back. Every client of a store should
    /// use the same (an owner renews every quarter of its own); their
    /// clocks need not agree, only run at about the same rate.
    pub fn with_timeout(mut self, ms: u64) -> Self {
        self.timeout_ms = ms.max(1);
        self
    }

    /// Cache at most `max` index entries (default [`cache::DEFAULT_MAX`];
    /// the paper's clients: [`cache::PAPER_MAX`]), each refresh reading a
    /// fifth of that, at most [`cache::MAX_WINDOW`].
    pub fn with_cache(self, max: usize) -> Self {
        *self.cache() = cache::IndexCache::new(max);
        self
    }

    /// Write nodes with plain object ops instead of the `kv.write` object
    /// class method: two round trips per write (read the node's count and
    /// the keys, then write guarded by compares) instead of one. Correct,
    /// but only there to measure what the method saves.
    pub fn with_plain_writes(mut self, on: bool) -> Self {
        self.plain_writes = on;
        self
    }

    /// Create store `name` with nodes of `k..=2k` entries: its index and
    /// one empty node.
    pub async fn create(objs: O, name: &str, k: u64) -> Result<KvStore<O>> {
        Self::create_with(objs, name, k, VALUE_MAX).await
    }

    /// As [`KvStore::create`], with values of at most `value_max` bytes
    /// (1..=[`VALUE_MAX`]): a node then holds at most `2k * value_max`
    /// bytes of values, which bounds what a split copies.
    pub async fn create_with(objs: O, name: &str, k: u64, value_max: usize) -> Result<KvStore<O>> {
        if value_max == 0 || value_max > VALUE_MAX {
            return Err(KvError::Invalid(format!(
                "the value size bound must be in 1..={VALUE_MAX}"
            )));
        }
        if !K_RANGE.contains(&k) {
            return Err(KvError::Invalid(format!(
                "k must be in {}..={}",
                K_RANGE.start(),
                K_RANGE.end()
            )));
        }
        if name.is_empty() || name.contains('\0') || name.len() > 200 {
            return Err(KvError::Invalid(
                "store names are 1-200 bytes without NUL".into(),
            ));
        }
        let s = KvStore::new(objs, name, k, value_max);
        let node = unique(name, "node");
        for ops in node_ops(&NodeRange::default(), &[]) {
            s.objs.operate(&node, ops).await?;
        }
        let entry = IndexEntry { node, intent: None };
        let made = s
            .objs
            .operate(
                &s.index(),
                vec![
                    SubOp::AssertNotExists,
                    SubOp::SetXattr {
                        name: K_XATTR.into(),
                        value: k.to_le_bytes().to_vec(),
                    },
                    SubOp::SetXattr {
                        name: FORMAT_XATTR.into(),
                        value: FORMAT.to_vec(),
                    },
                    SubOp::SetXattr {
                        name: VALUE_MAX_XATTR.into(),
                        value: (value_max as u64).to_le_bytes().to_vec(),
                    },
                    SubOp::OmapSet(vec![(
                        ByteBuf::from(index::index_key(None)),
                        ByteBuf::from(entry.encode()),
                    )]),
                ],
            )
            .await;
        match made {
            Ok(_) => Ok(s),
            Err(e) => {
                // The node nobody points at goes again (best effort).
                let _ = s.objs.operate(&entry.node, vec![SubOp::Remove]).await;
                Err(match e {
                    KvError::Op(OpError::Exists) => KvError::Exists(name.into()),
                    e => e,
                })
            }
        }
    }

    /// Open store `name`.
    pub async fn open(objs: O, name: &str) -> Result<KvStore<O>> {
        let index = format!("{name}.index");
        let r = objs.operate(&index, vec![SubOp::GetXattrs]).await;
        let xattrs = match r.map(|r| r.into_iter().next()) {
            Ok(Some(SubResult::Xattrs(x))) => x,
            Ok(other) => return Err(KvError::Corrupt(format!("index xattrs: {other:?}"))),
            Err(KvError::Op(OpError::NotFound)) => return Err(KvError::NoStore(name.into())),
            Err(e) => return Err(e),
        };
        let get = |n: &str| xattrs.iter().find(|(k, _)| k == n).map(|(_, v)| v.to_vec());
        let num = |n: &str| -> Result<Option<u64>> {
            get(n)
                .map(|v| {
                    v.as_slice()
                        .try_into()
                        .map(u64::from_le_bytes)
                        .map_err(|_| KvError::Corrupt(format!("the store's {n}")))
                })
                .transpose()
        };
        let (Some(k), Some(format)) = (num(K_XATTR)?, get(FORMAT_XATTR)) else {
            return Err(KvError::NoStore(name.into()));
        };
        if format != FORMAT {
            return Err(KvError::NotSupported(format!(
                "store '{name}' has another layout than version {}",
                String::from_utf8_lossy(FORMAT)
            )));
        }
        if !K_RANGE.contains(&k) {
            return Err(KvError::Corrupt(format!("the store's k is {k}")));
        }
        let value_max = num(VALUE_MAX_XATTR)?.unwrap_or(VALUE_MAX as u64);
        if value_max == 0 || value_max > VALUE_MAX as u64 {
            return Err(KvError::Corrupt(format!(
                "the store's value size bound is {value_max}"
            )));
        }
        Ok(KvStore::new(objs, name, k, value_max as usize))
    }

    /// Largest value this store takes, in bytes.
    pub fn value_max(&self) -> usize {
        self.value_max
    }

    /// Nodes hold `k..=2k` entries.
    pub fn k(&self) -> u64 {
        self.k
    }

    /// Whether this client has seen the intent or tomb `token` with stamp
    /// `stamp` unchanged for longer than the timeout (a first sighting,
    /// or a new stamp, starts the count).
    fn stale(&self, token: &str, stamp: u64) -> bool {
        let now = self.objs.now_ms();
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.stale(token, stamp, now, self.timeout_ms)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, cache::IndexCache> {
        // The cache is a hint: a panic elsewhere leaves it usable.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Index entries from `start` (an index key), at most `limit`.
    async fn list_index(&self, start: &[u8], limit: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let r = self
            .objs
            .operate(
                &self.index(),
                vec![SubOp::OmapList {
                    start: start.to_vec(),
                    limit,
                }],
            )
            .await
            .map_err(|e| match e {
                KvError::Op(OpError::NotFound) => KvError::NoStore(self.name.clone()),
                e => e,
            })?;
        Ok(omap(r.into_iter().next())?
            .into_iter()
            .map(|(k, v)| (k.into_vec(), v.into_vec()))
            .collect())
    }

    /// The index entry of the node that holds `key`: from the cache, or
    /// (`fresh`, or nothing cached) from the index, refreshing the cache's
    /// window from there.
    async fn locate(&self, key: &[u8], fresh: bool) -> Result<(Vec<u8>, IndexEntry)> {
        let start = index::lookup_start(key);
        if !fresh {
            if let Some(found) = self.cache().at_or_after(&start) {
                return Ok(found);
            }
        }
        let window = self.cache().window();
        let page = self.list_index(&start, window).await?;
        let mut got = Vec::with_capacity(page.len());
        for (k, v) in &page {
            index::decode_index_key(k)?;
            got.push((k.clone(), IndexEntry::decode(v)?));
        }
        let Some(first) = got.first().cloned() else {
            return Err(KvError::Corrupt("the index has no last node".into()));
        };
        // What the index has between `start` and the page's end (the end
        // of the index, for a short page) replaces what the cache had there.
        let end = match got.last() {
            Some((last, _)) if page.len() == window as usize => Some(last.clone()),
            _ => None,
        };
        self.cache().replace_range(&start, end.as_deref(), got);
        Ok(first)
    }

    /// Run `attempt` on the node that holds `key` until it finds the node
    /// current, helping or waiting out a split or rebalance that holds it
    /// (rolled back once seen unrenewed for the timeout). Gives up ([`KvError::Busy`])
    /// after three timeouts without progress.
    async fn on_node<T, F, Fut>(&self, key: &[u8], mut attempt: F) -> Result<T>
    where
        F: FnMut(Vec<u8>, IndexEntry) -> Fut,
        Fut: Future<Output = Result<Attempt<T>>>,
    {
        let mut begun = self.objs.now_ms();
        let give_up = 3 * self.timeout_ms + 1000;
        let mut fresh = false;
        let mut waits = 0u32;
        // The live replacement last seen holding the node: its owner
        // renewing it restarts the wait (a big node takes long to split).
        let mut holder: Option<(String, u64)> = None;
        loop {
            let (ik, entry) = self.locate(key, fresh).await?;
            let a = attempt(ik.clone(), entry.clone()).await?;
            match a {
                Attempt::Done(t) => return Ok(t),
                // A cached entry: read the index and try again at once.
                Attempt::Stale if !fresh => {
                    fresh = true;
                    continue;
                }
                Attempt::Stale => {}
                Attempt::Busy => {
                    let (_, live) = self.unblock(&ik, &entry.node).await?;
                    if let (Some((t, at)), Some((t0, at0))) = (&live, &holder) {
                        if t == t0 && at > at0 {
                            begun = self.objs.now_ms();
                        }
                    }
                    if live.is_some() {
                        holder = live;
                    }
                }
            }
            fresh = true;
            let waited = self.objs.now_ms().saturating_sub(begun);
            if waited > give_up {
                return Err(KvError::Busy(waited));
            }
            self.objs.pause(RETRY_MS << waits.min(6)).await;
            waits += 1;
        }
    }

    /// Whether the index entry at `ik` still names `node`.
    async fn names(&self, ik: &[u8], node: &str) -> Result<bool> {
        let r = self
            .objs
            .operate(
                &self.index(),
                vec![SubOp::OmapGetKeys(vec![ByteBuf::from(ik.to_vec())])],
            )
            .await?;
        Ok(match omap(r.into_iter().next())?.into_iter().next() {
            Some((_, v)) => IndexEntry::decode(&v)?.node == node,
            None => false,
        })
    }

    /// Read sub-op `read` for keys from `key` on the node of index entry
    /// (`ik`, `node`), with the node's stat in the same op: the stat and
    /// the read's result if the node holds `key` and is current (writable,
    /// or unwritable but still named by the index: nothing has replaced
    /// it yet, so its frozen keys are the current ones).
    async fn read_node(
        &self,
        ik: &[u8],
        node: &str,
        key: &[u8],
        read: SubOp,
    ) -> Result<Attempt<(KvNodeStat, SubResult)>> {
        let r = self
            .objs
            .operate(node, vec![exec("kv", "stat", &()), read])
            .await;
        let mut r = match r {
            Ok(r) => r.into_iter(),
            Err(KvError::Op(OpError::NotFound)) => return Ok(Attempt::Stale),
            Err(e) => return Err(e),
        };
        let st: KvNodeStat = decode(&data(r.next())?, "node stat")?;
        if !st.range.holds(key) {
            return Ok(Attempt::Stale);
        }
        let res = r
            .next()
            .ok_or_else(|| KvError::Corrupt("a node read answered without its result".into()))?;
        if st.unwritable && !self.names(ik, node).await? {
            return Ok(Attempt::Stale);
        }
        Ok(Attempt::Done((st, res)))
    }

    /// `key`'s value, if it has one.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        self.on_node(key, |ik, entry| async move {
            let read = SubOp::OmapGetKeys(vec![ByteBuf::from(key.to_vec())]);
            Ok(match self.read_node(&ik, &entry.node, key, read).await? {
                Attempt::Done((_, r)) => {
                    Attempt::Done(omap(Some(r))?.into_iter().next().map(|(_, v)| v.into_vec()))
                }
                other => other.map(|_| None),
            })
        })
        .await
    }

    /// The first changes of `changes` (sorted by key, at least one) that
    /// go to one node, applied there in one op (or with the split or
    /// rebalance they need): `(true, n)` the first `n` applied, `(false,
    /// n)` refused for an expectation (none applied).
    async fn write_batch(&self, changes: &[KvChange]) -> Result<(bool, usize)> {
        let Some(first) = changes.first() else {
            return Ok((true, 0));
        };
        self.on_node(&first.key, |ik, entry| {
            // Keys from the first up to the node's bound all route to it
            // (the OSD refuses the batch if the cached bound is stale).
            let n = match index::decode_index_key(&ik) {
                Ok(high) => changes.partition_point(|c| high.as_ref().is_none_or(|h| c.key <= *h)),
                Err(_) => 1,
            };
            let w = KvWrite {
                changes: changes[..n].to_vec(),
                max: 2 * self.k,
                min: self.k,
            };
            async move {
                let sent = match self.plain_writes {
                    true => self.plain_write(&entry.node, &w).await,
                    false => self
                        .objs
                        .operate(&entry.node, vec![exec("kv", "write", &w)])
                        .await
                        .map(|_| ()),
                };
                let refusal = match sent {
                    Ok(_) => return Ok(Attempt::Done((true, n))),
                    Err(KvError::Op(OpError::NotFound)) => return Ok(Attempt::Stale),
                    Err(KvError::Op(OpError::MethodRefused { code, message, .. })) => {
                        (code, message)
                    }
                    Err(e) => return Err(e),
                };
                match refusal {
                    (KV_UNWRITABLE, _) => Ok(Attempt::Busy),
                    (KV_RANGE, _) => Ok(Attempt::Stale),
                    (KV_EXPECT, _) => Ok(Attempt::Done((false, n))),
                    (code @ (KV_FULL | KV_UNDER), _) => Ok(self
                        .reshape(&ik, &entry, &w.changes, code == KV_UNDER)
                        .await?
                        .map(|applied| (applied, n))),
                    (code, message) => Err(KvError::Corrupt(format!(
                        "unknown refusal {code}: {message}"
                    ))),
                }
            }
        })
        .await
    }

    /// What `kv.write` does, done by the client with plain ops: read the
    /// node's xattrs and the keys, decide, then write guarded by compares
    /// of what it read (the mark, the count, each key's value). Errors as
    /// the method's refusals; a lost race is `NotFound` (re-read).
    async fn plain_write(&self, node: &str, w: &KvWrite) -> Result<()> {
        use loligo_types::ops::Cmp;
        let keys: Vec<ByteBuf> = w.keys().into_iter().map(ByteBuf::from).collect();
        let r = self
            .objs
            .operate(node, vec![SubOp::GetXattrs, SubOp::OmapGetKeys(keys)])
            .await?;
        let mut r = r.into_iter();
        let xattrs = match r.next() {
            Some(SubResult::Xattrs(x)) => x,
            other => return Err(KvError::Corrupt(format!("node xattrs: {other:?}"))),
        };
        let have: BTreeMap<Vec<u8>, Vec<u8>> = omap(r.next())?
            .into_iter()
            .map(|(k, v)| (k.into_vec(), v.into_vec()))
            .collect();
        let get = |n: &str| xattrs.iter().find(|(k, _)| k == n).map(|(_, v)| v.to_vec());
        let count_raw = get(KV_COUNT_XATTR).unwrap_or_default();
        let count = u64::from_le_bytes(
            count_raw
                .as_slice()
                .try_into()
                .map_err(|_| KvError::Corrupt(format!("node {node}: its count")))?,
        );
        let range: NodeRange = decode(&get(KV_RANGE_XATTR).unwrap_or_default(), "node range")?;
        let node_stat = KvNodeStat {
            entries: count,
            unwritable: get(loligo_types::cls::KV_UNWRITABLE_XATTR).is_some_and(|v| !v.is_empty()),
            range,
        };
        let plan = w.plan(&node_stat, &have).map_err(|(code, message)| {
            KvError::Op(OpError::MethodRefused {
                index: 0,
                code,
                message,
            })
        })?;
        // Guarded by what was read: no mark, the count, each key's value.
        let mut ops = vec![
            SubOp::CmpXattr {
                name: loligo_types::cls::KV_UNWRITABLE_XATTR.into(),
                cmp: Cmp::Eq,
                value: Vec::new(),
            },
            SubOp::CmpXattr {
                name: KV_COUNT_XATTR.into(),
                cmp: Cmp::Eq,
                value: count_raw,
            },
        ];
        for k in w.keys() {
            let value = have.get(&k).cloned().unwrap_or_default();
            ops.push(SubOp::CmpOmap {
                key: k,
                cmp: Cmp::Eq,
                value,
            });
        }
        let entries = plan.entries;
        let rms: Vec<ByteBuf> = plan.rms.into_iter().map(ByteBuf::from).collect();
        let sets: Vec<(ByteBuf, ByteBuf)> = plan
            .sets
            .into_iter()
            .map(|(k, v)| (ByteBuf::from(k), ByteBuf::from(v)))
            .collect();
        if !rms.is_empty() {
            ops.push(SubOp::OmapRm(rms));
        }
        if !sets.is_empty() {
            ops.push(SubOp::OmapSet(sets));
        }
        ops.push(SubOp::SetXattr {
            name: KV_COUNT_XATTR.into(),
            value: entries.to_le_bytes().to_vec(),
        });
        match self.objs.operate(node, ops).await {
            Ok(_) => Ok(()),
            Err(KvError::Op(OpError::AssertFailed { .. })) => Err(KvError::Op(OpError::NotFound)),
            Err(e) => Err(e),
        }
    }

    /// One change: `Ok(true)` applied, `Ok(false)` its expectation failed.
    async fn write(&self, change: KvChange) -> Result<bool> {
        Ok(self.write_batch(&[change]).await?.0)
    }

    /// Set every key of `entries` (the last value of a key repeated wins).
    /// The keys that share a node are written in one op, all or none;
    /// keys of different nodes are not atomic together.
    pub async fn put_many(&self, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        for (k, v) in &entries {
            check_key(k)?;
            check_value(v, self.value_max)?;
        }
        let last: BTreeMap<Vec<u8>, Vec<u8>> = entries.into_iter().collect();
        let changes: Vec<KvChange> = last
            .into_iter()
            .map(|(key, value)| KvChange {
                key,
                value: Some(value),
                expect: Expect::Any,
            })
            .collect();
        let mut at = 0;
        while at < changes.len() {
            let (_, n) = self.write_batch(&changes[at..]).await?;
            at += n.max(1);
        }
        Ok(())
    }

    /// Set `key` to `value`.
    pub async fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(value, self.value_max)?;
        self.write(KvChange {
            key: key.to_vec(),
            value: Some(value.to_vec()),
            expect: Expect::Any,
        })
        .await
        .map(|_| ())
    }

    /// Set `key` to `value` only if it has no value: whether it was set.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        check_key(key)?;
        check_value(value, self.value_max)?;
        self.write(KvChange {
            key: key.to_vec(),
            value: Some(value.to_vec()),
            expect: Expect::Absent,
        })
        .await
    }

    /// Remove `key`: whether it was there.
    pub async fn remove(&self, key: &[u8]) -> Result<bool> {
        check_key(key)?;
        self.write(KvChange {
            key: key.to_vec(),
            value: None,
            expect: Expect::Present,
        })
        .await
    }

    /// Entries with `start <= key < end` (`end: None`: to the last), in key
    /// order, at most `limit`. Each node's part is read atomically; the
    /// scan as a whole is not a snapshot of the store.
    pub async fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut from = start.to_vec();
        while out.len() < limit && end.is_none_or(|e| from.as_slice() < e) {
            let want = (limit - out.len()).min(10_000) as u64;
            let from_now = from.clone();
            let (high, page) = self
                .on_node(&from_now, |ik, entry| {
                    let range = KeyRange {
                        start: from_now.clone(),
                        end: end.map(<[u8]>::to_vec),
                        limit: want,
                    };
                    let from_now = &from_now;
                    async move {
                        let read = exec("omap", "range", &range);
                        Ok(
                            match self.read_node(&ik, &entry.node, from_now, read).await? {
                                Attempt::Done((st, r)) => {
                                    let page: RangePage = decode(&data(Some(r))?, "node range")?;
                                    Attempt::Done((st.range.high, page))
                                }
                                Attempt::Stale => Attempt::Stale,
                                Attempt::Busy => Attempt::Busy,
                            },
                        )
                    }
                })
                .await?;
            let last = page.entries.last().map(|(k, _)| k.clone());
            out.extend(page.entries);
            from = match (page.more, last, high) {
                // More in this node: after its last key returned.
                (true, Some(mut k), _) => {
                    k.push(0);
                    k
                }
                // This node is done: the next one starts after its bound.
                (false, _, Some(mut h)) => {
                    h.push(0);
                    h
                }
                (false, _, None) => break,
                (true, None, _) => {
                    return Err(KvError::Corrupt(
                        "a node said it had more entries and returned none".into(),
                    ))
                }
            };
        }
        Ok(out)
    }

    /// Every node entry of the index in key order: index key and entry.
    async fn index_entries(&self) -> Result<Vec<(Vec<u8>, IndexEntry)>> {
        let mut out = Vec::new();
        let mut start = index::NODES_START.to_vec();
        loop {
            let page = self.list_index(&start, 1000).await?;
            for (k, v) in &page {
                index::decode_index_key(k)?;
                out.push((k.clone(), IndexEntry::decode(v)?));
            }
            match page.last() {
                Some((k, _)) if page.len() == 1000 => {
                    start = k.clone();
                    start.push(0);
                }
                _ => return Ok(out),
            }
        }
    }

    /// Remove the store: every node, the nodes tombs and intents name, and
    /// the index (last, so a destroy cut short can be run again). No one
    /// may use the store meanwhile.
    pub async fn destroy(self) -> Result<()> {
        let mut doomed: Vec<String> = Vec::new();
        for (_, e) in self.index_entries().await? {
            if let Some(i) = &e.intent {
                doomed.extend(i.creates.iter().cloned());
            }
            doomed.push(e.node);
        }
        loop {
            let page = self.list_index(b"", 1000).await?;
            let tombs: Vec<_> = page
                .into_iter()
                .take_while(|(k, _)| k.as_slice() < index::TOMBS_END)
                .collect();
            // (A tomb that does not decode names nothing to delete: the
            // store goes anyway.)
            for (_, v) in &tombs {
                doomed.extend(index::Tomb::decode(v).map(|t| t.nodes).unwrap_or_default());
            }
            if tombs.len() < 1000 {
                break;
            }
            // Tombs are only read here: drop them to page on.
            let keys = tombs.into_iter().map(|(k, _)| ByteBuf::from(k)).collect();
            self.objs
                .operate(&self.index(), vec![SubOp::OmapRm(keys)])
                .await?;
        }
        for node in doomed {
            match self.objs.operate(&node, vec![SubOp::Remove]).await {
                Ok(_) | Err(KvError::Op(OpError::NotFound)) => {}
                Err(e) => return Err(e),
            }
        }
        self.objs
            .operate(&self.index(), vec![SubOp::Remove])
            .await
            .map(|_| ())
    }

    /// Nodes the index names (reads the index only).
    pub async fn node_count(&self) -> Result<u64> {
        Ok(self.index_entries().await?.len() as u64)
    }

    /// Nodes and entries (reads every node's count).
    pub async fn stats(&self) -> Result<Stats> {
        let mut st = Stats {
            depth: 2,
            ..Stats::default()
        };
        for (_, e) in self.index_entries().await? {
            let r = self
                .objs
                .operate(&e.node, vec![exec("kv", "stat", &())])
                .await?;
            let n: KvNodeStat = decode(&data(r.into_iter().next())?, "node stat")?;
            st.nodes += 1;
            st.entries += n.entries;
        }
        Ok(st)
    }

    /// All entries of `node` and its stat, read page by page (`None`: the
    /// node is gone, or `renewing`'s replacement was rolled back). Consistent only while the node cannot change: marked
    /// unwritable, or no one writing.
    async fn read_all(
        &self,
        node: &str,
        mut renewing: Option<&mut index::Intent>,
    ) -> Result<Option<(KvNodeStat, plan::Entries)>> {
        let mut entries = Vec::new();
        let mut from = Vec::new();
        loop {
            // A big node takes many pages: keep its replacement alive.
            if let Some(i) = renewing.as_deref_mut() {
                if !self.renew(i).await? {
                    return Ok(None);
                }
            }
            let range = KeyRange {
                start: from.clone(),
                end: None,
                limit: 10_000,
            };
            let r = self
                .objs
                .operate(
                    node,
                    vec![exec("kv", "stat", &()), exec("omap", "range", &range)],
                )
                .await;
            let mut r = match r {
                Ok(r) => r.into_iter(),
                Err(KvError::Op(OpError::NotFound)) => return Ok(None),
                Err(e) => return Err(e),
            };
            let st: KvNodeStat = decode(&data(r.next())?, "node stat")?;
            let page: RangePage = decode(&data(r.next())?, "node range")?;
            if let Some((k, _)) = page.entries.last() {
                from = k.clone();
                from.push(0);
            }
            let more = page.more && !page.entries.is_empty();
            entries.extend(page.entries);
            if !more {
                return Ok(Some((st, entries)));
            }
        }
    }

    /// Check the tree's invariants while no one writes to the store: every
    /// index entry's node exists, is writable and has no intent on it, its
    /// range is the one the index gives it, its count equals its entries,
    /// all its keys lie in its range, it holds at most `2k` and (unless it
    /// is the only node) at least `k`; the last entry is the unbounded
    /// node; no tombs are left.
    pub async fn check(&self) -> Result<Check> {
        let mut c = Check::default();
        let entries = self.index_entries().await?;
        if entries
            .last()
            .is_none_or(|(ik, _)| *ik != index::index_key(None))
        {
            c.problems
                .push("the index has no last (unbounded) node".into());
        }
        let page = self.list_index(b"", 1000).await?;
        let tombs: Vec<&[u8]> = (page.iter())
            .filter(|(k, _)| k.as_slice() < index::TOMBS_END)
            .map(|(_, v)| v.as_slice())
            .collect();
        let corrupt = tombs
            .iter()
            .filter(|v| index::Tomb::decode(v).is_err())
            .count();
        if !tombs.is_empty() {
            let of_them = match corrupt {
                0 => String::new(),
                1 => " (1 of them does not decode)".into(),
                n => format!(" ({n} of them do not decode)"),
            };
            c.problems.push(format!(
                "{} tomb(s) of replaced nodes are left to delete{of_them}",
                tombs.len()
            ));
        }
        let only = entries.len() == 1;
        let mut prev: Option<Vec<u8>> = None;
        for (ik, e) in &entries {
            c.nodes += 1;
            let high = index::decode_index_key(ik)?;
            if e.intent.is_some() {
                c.problems
                    .push(format!("node {}: an intent is still on its entry", e.node));
            }
            let Some((st, kvs)) = self.read_all(&e.node, None).await? else {
                c.problems.push(format!("node {} is missing", e.node));
                continue;
            };
            let want = NodeRange {
                low: prev.clone(),
                high: high.clone(),
            };
            if st.range != want {
                c.problems.push(format!(
                    "node {}: its range {:?} is not the index's {:?}",
                    e.node, st.range, want
                ));
            }
            for (k, _) in &kvs {
                if !want.holds(k) {
                    c.problems.push(format!(
                        "node {}: key {} is outside its range",
                        e.node,
                        String::from_utf8_lossy(k)
                    ));
                }
            }
            let keys = kvs.len() as u64;
            if st.unwritable {
                c.problems
                    .push(format!("node {} is marked unwritable", e.node));
            }
            if st.entries != keys {
                c.problems.push(format!(
                    "node {}: its count says {} entries, it holds {keys}",
                    e.node, st.entries
                ));
            }
            if keys > 2 * self.k {
                c.problems
                    .push(format!("node {}: {keys} entries, more than 2k", e.node));
            }
            if !only && keys < self.k {
                c.problems
                    .push(format!("node {}: {keys} entries, fewer than k", e.node));
            }
            c.entries += keys;
            prev = high;
        }
        Ok(c)
    }
}

/// What [`KvStore::check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Check {
    pub nodes: u64,
    pub entries: u64,
    /// Broken invariants: empty for a sound store.
    pub problems: Vec<String>,
}
