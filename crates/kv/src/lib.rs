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
//! same op as the read) read the current copy of its keys; one that does
//! not re-reads the index.
//!
//! State of this crate: stores of one or more nodes serve get, put,
//! remove and scan; splitting a full node and rebalancing an underfull
//! one (the multi-step protocols with intents in the index, rolled
//! forward or back by any client after a timeout) are not built yet, so a
//! put into a full node is refused with [`KvError::NotSupported`] rather
//! than pretending.
//!
//! This crate is a client of `loligo-client` only: it must never rely on
//! anything but object ops and the OSDs' object class methods.

pub mod index;
pub mod plan;

use index::{IndexEntry, FORMAT, FORMAT_XATTR, K_XATTR};
use loligo_types::cls::{
    Expect, KeyRange, KvChange, KvNodeStat, KvWrite, KV_COUNT_XATTR, KV_EXPECT, KV_FULL, KV_UNDER,
    KV_UNWRITABLE,
};
use loligo_types::ops::{OpError, SubOp, SubResult};
use serde_bytes::ByteBuf;
use std::future::Future;
use std::time::Duration;

/// Longest key, in bytes.
pub const KEY_MAX: usize = 1024;
/// Largest value, in bytes.
pub const VALUE_MAX: usize = 1 << 20;
/// Smallest and largest `k`.
pub const K_RANGE: std::ops::RangeInclusive<u64> = 2..=100_000;
/// How often an op is retried after finding its node replaced.
const RETRIES: u32 = 100;
/// Wait before a retry (doubling up to 64x).
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
    #[error("not supported yet: {0}")]
    NotSupported(String),
    #[error("the store's objects are corrupt: {0}")]
    Corrupt(String),
    #[error("gave up after {0} retries: the node kept being replaced")]
    Busy(u32),
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

/// What the store needs of a pool: atomic ops on named objects.
pub trait Objects: Send + Sync {
    /// Apply `ops` to object `name` all or nothing; the results of its
    /// reads.
    fn operate(
        &self,
        name: &str,
        ops: Vec<SubOp>,
    ) -> impl Future<Output = Result<Vec<SubResult>>> + Send;
}

impl Objects for loligo_client::IoCtx {
    async fn operate(&self, name: &str, ops: Vec<SubOp>) -> Result<Vec<SubResult>> {
        Ok(loligo_client::IoCtx::operate(self, name, ops).await?.0)
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

/// A name for a new node: unique across clients without coordination.
fn node_name(store: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mix = nanos ^ (u64::from(std::process::id()) << 40) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!("{store}.node.{mix:016x}.{n}")
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > KEY_MAX {
        return Err(KvError::Invalid(format!("keys are 1-{KEY_MAX} bytes")));
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > VALUE_MAX {
        return Err(KvError::Invalid(format!(
            "values are at most {VALUE_MAX} bytes"
        )));
    }
    Ok(())
}

impl<O: Objects> KvStore<O> {
    fn index(&self) -> String {
        format!("{}.index", self.name)
    }

    /// Create store `name` with nodes of `k..=2k` entries: its index and
    /// one empty node.
    pub async fn create(objs: O, name: &str, k: u64) -> Result<KvStore<O>> {
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
        let s = KvStore {
            objs,
            name: name.to_string(),
            k,
        };
        let node = node_name(name);
        s.objs
            .operate(
                &node,
                vec![
                    SubOp::AssertNotExists,
                    SubOp::SetXattr {
                        name: KV_COUNT_XATTR.into(),
                        value: 0u64.to_le_bytes().to_vec(),
                    },
                ],
            )
            .await?;
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
        let r = objs
            .operate(
                &index,
                vec![
                    SubOp::GetXattr(K_XATTR.into()),
                    SubOp::GetXattr(FORMAT_XATTR.into()),
                ],
            )
            .await;
        let mut r = match r {
            Ok(r) => r.into_iter(),
            Err(KvError::Op(OpError::NotFound | OpError::NoXattr(_))) => {
                return Err(KvError::NoStore(name.into()))
            }
            Err(e) => return Err(e),
        };
        let k = data(r.next())?;
        if data(r.next())? != FORMAT {
            return Err(KvError::NotSupported(format!(
                "store '{name}' has another layout than version {}",
                String::from_utf8_lossy(FORMAT)
            )));
        }
        let k = u64::from_le_bytes(
            k.as_slice()
                .try_into()
                .map_err(|_| KvError::Corrupt("the store's k".into()))?,
        );
        Ok(KvStore {
            objs,
            name: name.to_string(),
            k,
        })
    }

    /// Nodes hold `k..=2k` entries.
    pub fn k(&self) -> u64 {
        self.k
    }

    /// The index entry of the node that holds `key`, and its upper bound.
    async fn locate(&self, key: &[u8]) -> Result<(Option<Vec<u8>>, IndexEntry)> {
        let r = self
            .objs
            .operate(
                &self.index(),
                vec![SubOp::OmapList {
                    start: index::lookup_start(key),
                    limit: 1,
                }],
            )
            .await
            .map_err(|e| match e {
                KvError::Op(OpError::NotFound) => KvError::NoStore(self.name.clone()),
                e => e,
            })?;
        match r.into_iter().next() {
            Some(SubResult::Omap(v)) => match v.into_iter().next() {
                Some((k, v)) => Ok((index::decode_index_key(&k)?, IndexEntry::decode(&v)?)),
                None => Err(KvError::Corrupt("the index has no last node".into())),
            },
            other => Err(KvError::Corrupt(format!("index listing: {other:?}"))),
        }
    }

    /// Run `attempt` on the node that holds `key` until it finds the node
    /// current: `Ok(None)` from `attempt` means the node was being
    /// replaced (retry after a pause, from the index).
    async fn on_node<T, F, Fut>(&self, key: &[u8], mut attempt: F) -> Result<T>
    where
        F: FnMut(Option<Vec<u8>>, IndexEntry) -> Fut,
        Fut: Future<Output = Result<Option<T>>>,
    {
        for i in 0..RETRIES {
            let (high, entry) = self.locate(key).await?;
            if let Some(t) = attempt(high, entry).await? {
                return Ok(t);
            }
            let ms = RETRY_MS << i.min(6);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Err(KvError::Busy(RETRIES))
    }

    /// `key`'s value, if it has one.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        self.on_node(key, |_, entry| async move {
            let read = SubOp::OmapGetKeys(vec![ByteBuf::from(key.to_vec())]);
            match self.read_node(&entry.node, read).await? {
                None => Ok(None),
                Some(SubResult::Omap(v)) => {
                    Ok(Some(v.into_iter().next().map(|(_, v)| v.into_vec())))
                }
                Some(other) => Err(KvError::Corrupt(format!("node read: {other:?}"))),
            }
        })
        .await
    }

    /// Read sub-op `read` on `node` with the node's stat in the same op:
    /// its result, or `None` if the node is gone or marked unwritable
    /// (being replaced: the caller re-reads the index).
    async fn read_node(&self, node: &str, read: SubOp) -> Result<Option<SubResult>> {
        let r = self
            .objs
            .operate(node, vec![exec("kv", "stat", &()), read])
            .await;
        let mut r = match r {
            Ok(r) => r.into_iter(),
            Err(KvError::Op(OpError::NotFound)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let st: KvNodeStat = decode(&data(r.next())?, "node stat")?;
        if st.unwritable {
            return Ok(None);
        }
        Ok(Some(r.next().ok_or_else(|| {
            KvError::Corrupt("a node read answered without its result".into())
        })?))
    }

    /// The first changes of `changes` (sorted by key, at least one) that
    /// go to one node, applied there in one op: `(true, n)` the first `n`
    /// applied, `(false, n)` refused for an expectation (none applied).
    async fn write_batch(&self, changes: &[KvChange]) -> Result<(bool, usize)> {
        let Some(first) = changes.first() else {
            return Ok((true, 0));
        };
        let max = 2 * self.k;
        self.on_node(&first.key, |high, entry| {
            // Keys from the first up to the node's bound all route to it.
            let n = changes.partition_point(|c| high.as_ref().is_none_or(|h| c.key <= *h));
            let w = KvWrite {
                changes: changes[..n].to_vec(),
                max,
                // Rebalancing is not built yet: nodes may shrink below k.
                min: 0,
            };
            async move {
                match self
                    .objs
                    .operate(&entry.node, vec![exec("kv", "write", &w)])
                    .await
                {
                    Ok(_) => Ok(Some((true, n))),
                    Err(KvError::Op(OpError::NotFound)) => Ok(None),
                    Err(KvError::Op(OpError::MethodRefused { code, message, .. })) => match code {
                        KV_UNWRITABLE => Ok(None),
                        KV_EXPECT => Ok(Some((false, n))),
                        KV_FULL => Err(KvError::NotSupported(format!(
                            "node {} is full ({message}); splitting nodes is not built yet",
                            entry.node
                        ))),
                        KV_UNDER => Err(KvError::Corrupt(format!(
                            "a node refused a write below its minimum with none asked: {message}"
                        ))),
                        _ => Err(KvError::Corrupt(format!(
                            "unknown refusal {code}: {message}"
                        ))),
                    },
                    Err(e) => Err(e),
                }
            }
        })
        .await
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
            check_value(v)?;
        }
        let last: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = entries.into_iter().collect();
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
        check_value(value)?;
        self.write(KvChange {
            key: key.to_vec(),
            value: Some(value.to_vec()),
            expect: Expect::Any,
        })
        .await
        .map(|_| ())
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
    /// order, at most `limit`.
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
                .on_node(&from_now, |high, entry| {
                    let range = KeyRange {
                        start: from_now.clone(),
                        end: end.map(<[u8]>::to_vec),
                        limit: want,
                    };
                    async move {
                        let read = exec("omap", "range", &range);
                        let Some(r) = self.read_node(&entry.node, read).await? else {
                            return Ok(None);
                        };
                        let page: Vec<(Vec<u8>, Vec<u8>)> = decode(&data(Some(r))?, "node range")?;
                        Ok(Some((high, page)))
                    }
                })
                .await?;
            let full = page.len() as u64 == want;
            let last = page.last().map(|(k, _)| k.clone());
            out.extend(page);
            from = match (full, last, high) {
                // More in this node: after its last key returned.
                (true, Some(mut k), _) => {
                    k.push(0);
                    k
                }
                // This node is done: the next one starts after its bound.
                (_, _, Some(mut h)) => {
                    h.push(0);
                    h
                }
                (_, _, None) => break,
            };
        }
        Ok(out)
    }

    /// Every index entry in key order: each node's bound and entry.
    async fn index_entries(&self) -> Result<Vec<(Option<Vec<u8>>, IndexEntry)>> {
        let mut out = Vec::new();
        let mut start = Vec::new();
        loop {
            let r = self
                .objs
                .operate(
                    &self.index(),
                    vec![SubOp::OmapList {
                        start: start.clone(),
                        limit: 1000,
                    }],
                )
                .await?;
            let page = match r.into_iter().next() {
                Some(SubResult::Omap(v)) => v,
                other => return Err(KvError::Corrupt(format!("index listing: {other:?}"))),
            };
            for (k, v) in &page {
                out.push((index::decode_index_key(k)?, IndexEntry::decode(v)?));
            }
            match page.last() {
                Some((k, _)) if page.len() == 1000 => {
                    start = k.to_vec();
                    start.push(0);
                }
                _ => return Ok(out),
            }
        }
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

    /// Check the tree's invariants while no one writes to the store: every
    /// index entry's node exists, is writable and has no intent on it, its
    /// count equals its entries, it holds at most `2k`, and all its keys lie
    /// above the previous node's bound and at most its own; the last entry
    /// is the unbounded node. Nodes below `k` (other than an only node) are
    /// counted apart: rebalancing is not built yet, so removals leave them.
    pub async fn check(&self) -> Result<Check> {
        let mut c = Check::default();
        let entries = self.index_entries().await?;
        if entries.last().is_none_or(|(high, _)| high.is_some()) {
            c.problems
                .push("the index has no last (unbounded) node".into());
        }
        let only = entries.len() == 1;
        let mut prev: Option<Vec<u8>> = None;
        for (high, e) in &entries {
            c.nodes += 1;
            if e.intent.is_some() {
                c.problems
                    .push(format!("node {}: an intent is still on its entry", e.node));
            }
            let mut keys: u64 = 0;
            let mut from = Vec::new();
            let stat = loop {
                let range = KeyRange {
                    start: from.clone(),
                    end: None,
                    limit: 10_000,
                };
                let r = self
                    .objs
                    .operate(
                        &e.node,
                        vec![exec("kv", "stat", &()), exec("omap", "range", &range)],
                    )
                    .await;
                let mut r = match r {
                    Ok(r) => r.into_iter(),
                    Err(KvError::Op(OpError::NotFound)) => break None,
                    Err(e) => return Err(e),
                };
                let st: KvNodeStat = decode(&data(r.next())?, "node stat")?;
                let page: Vec<(Vec<u8>, Vec<u8>)> = decode(&data(r.next())?, "node range")?;
                for (k, _) in &page {
                    let above = prev.as_ref().is_none_or(|p| k > p);
                    let within = high.as_ref().is_none_or(|h| k <= h);
                    if !above || !within {
                        c.problems.push(format!(
                            "node {}: key {} is outside its range",
                            e.node,
                            String::from_utf8_lossy(k)
                        ));
                    }
                }
                keys += page.len() as u64;
                match page.last() {
                    Some((k, _)) if page.len() == 10_000 => {
                        from = k.clone();
                        from.push(0);
                    }
                    _ => break Some(st),
                }
            };
            let Some(st) = stat else {
                c.problems.push(format!("node {} is missing", e.node));
                continue;
            };
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
                c.underfull += 1;
            }
            c.entries += keys;
            prev.clone_from(high);
        }
        Ok(c)
    }
}

/// What [`KvStore::check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Check {
    pub nodes: u64,
    pub entries: u64,
    /// Nodes below `k` entries (not the only node).
    pub underfull: u64,
    /// Broken invariants: empty for a sound store.
    pub problems: Vec<String>,
}

impl<O: Objects> Objects for &O {
    fn operate(
        &self,
        name: &str,
        ops: Vec<SubOp>,
    ) -> impl Future<Output = Result<Vec<SubResult>>> + Send {
        (**self).operate(name, ops)
    }
}
