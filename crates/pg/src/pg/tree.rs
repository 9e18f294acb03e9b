//! A copy's kept Merkle tree, persisted so that after any crash it is the
//! tree a rebuild from the objects computes, without a record write of its
//! own on a client write.
//!
//! Layout (records of the PG's collection): `merkle` holds the shape (leaf
//! count, leaves per page); `merkle.page/` + page index holds a page of
//! leaves and its `as_of`. A client write's changed leaf goes into the
//! log entry the write persists anyway, as a [`LeafStamp`] with the
//! copy's next sequence number; every other change (a push, a backfill
//! chunk, the removal of a stray copy) writes the pages it touches. A page
//! written when `n` stamps had been issued has `as_of` n: at load, a leaf
//! takes its newest stamp whose page's `as_of` is not past it. Before a
//! transaction removes or rewrites a log entry whose stamp no page covers,
//! the pages such stamps changed go into that transaction (a flush); so a
//! write trimming the log writes its pages about once per log length.
//!
//! Every path that changes an object's version on a copy goes through
//! [`Kept::change_logged`] or [`Kept::change_many`]; every other
//! transaction that removes or rewrites log entries goes through
//! [`Kept::guard`]. A change needs the object's state before it.
//! Transactions are queued before they are durable and reads see only
//! durable ones, so the state a queued transaction leaves is remembered
//! here until it is durable; otherwise the caller says (a primary knows it
//! from its read, a replica from the primary) or the store is read — for
//! every object of a transaction before any of its changes is made, so a
//! read error leaves the tree as it was.
//!
//! It must never change the in-memory tree without putting the changed
//! leaf (a stamp or its page) in the transaction that makes the change,
//! nor write a page with values of a transaction queued after the one
//! it goes in.

use super::merkle::{object_digest, Tree};
use super::record::{self, LeafStamp};
use super::{log_counter, log_key, recovery};
use loligo_store::txn::Op;
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::Version;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};

/// Record key of the tree's shape (absent: the copy keeps no tree yet).
/// Every record of the tree has it as prefix.
pub const TREE_KEY: &[u8] = b"merkle";
/// Prefix of the page records (+ the page index, 4 bytes big-endian).
pub const PAGE_PREFIX: &[u8] = b"merkle.page/";
/// Prefix of the first layout's leaf records (any record under
/// [`TREE_KEY`] is removed when a tree is rebuilt).
#[cfg(test)]
const OLD_LEAF_PREFIX: &[u8] = b"merkle/";
/// Pages per tree at most (the leaves per page grow past it).
pub const PAGES_MAX: u32 = 256;
/// Leaves per page at least.
pub const PAGE_LEAVES_MIN: u32 = 64;

/// Leaves per page of a tree of `leaves` leaves: at most 256 pages (so a
/// flush writes at most 256 records), at least 64 leaves (512 bytes) each.
pub fn page_leaves(leaves: u32) -> u32 {
    (leaves / PAGES_MAX).max(PAGE_LEAVES_MIN).min(leaves.max(1))
}

/// An object's state as far as the tree is concerned: its version, or
/// `None` when it does not exist.
pub type ObjVersion = Option<Version>;

/// What a write does to the object it changes, as a replica needs it to
/// keep its tree (the primary read the state before; the replica's is the
/// same, since writes to an object a member lacks wait for its recovery).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjChange {
    pub name: String,
    pub old: ObjVersion,
    pub new: ObjVersion,
}

/// Record key of page `i`.
pub fn page_key(i: u32) -> Vec<u8> {
    let mut k = PAGE_PREFIX.to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

fn digest(name: &str, v: ObjVersion) -> u64 {
    v.map_or(0, |v| object_digest(name, v))
}

/// The version object `o` has in the store (durable state).
pub fn stored_version(
    s: &dyn ObjectStore,
    coll: CollectionId,
    o: &ObjectId,
) -> Result<ObjVersion, StoreError> {
    Ok(recovery::stored_version(s, coll, o)?.map(Option::unwrap_or_default))
}

/// The stamps in a copy's log: (entry counter, stamp). `Err` names a log
/// record that cannot be read.
fn read_stamps(s: &dyn ObjectStore, coll: CollectionId) -> Result<Vec<(u64, LeafStamp)>, String> {
    let mut out = Vec::new();
    for (k, b) in recovery::records_with(s, coll, b"log/", None)? {
        let v = log_counter(&k).ok_or_else(|| format!("a log record has a malformed key {k:?}"))?;
        if let (_, Some(st)) = record::decode_log_stamped(&b).map_err(|e| e.to_string())? {
            out.push((v, st));
        }
    }
    Ok(out)
}

/// The log counters holding stamps no page covers, kept as the range
/// spanning them: a superset, so a rewrite inside it may flush early,
/// never late (a set cost a B-tree insert per write).
#[derive(Clone, Copy, Debug, Default)]
struct Span(Option<(u64, u64)>);

impl Span {
    fn add(&mut self, v: u64) {
        self.0 = Some(self.0.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
    }

    fn contains(&self, v: u64) -> bool {
        self.0.is_some_and(|(lo, hi)| (lo..=hi).contains(&v))
    }

    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// Pages, as bits.
#[derive(Clone, Debug, Default)]
struct PageSet(Vec<u64>);

impl PageSet {
    fn insert(&mut self, p: u32) {
        let (w, b) = (p as usize / 64, p % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << b;
    }

    fn remove(&mut self, p: u32) {
        if let Some(w) = self.0.get_mut(p as usize / 64) {
            *w &= !(1 << (p % 64));
        }
    }

    /// The pages in the set, ascending; the set is left empty.
    fn take(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        for (i, w) in self.0.iter_mut().enumerate() {
            while *w != 0 {
                let b = w.trailing_zeros();
                out.push(i as u32 * 64 + b);
                *w &= *w - 1;
            }
        }
        out
    }
}

/// A persisted tree: its leaves from the pages and the stamps no page
/// covers.
struct Persisted {
    tree: Tree,
    /// The largest `as_of` of a page (0: none).
    as_of: u64,
    dirty: PageSet,
    stamped: Span,
}

/// The tree of `leaves` leaves, `pl` per page, persisted in page records
/// `rows` and log stamps `stamps`.
fn read_persisted(
    leaves: u32,
    pl: u32,
    rows: &[(Vec<u8>, Vec<u8>)],
    stamps: &[(u64, LeafStamp)],
) -> Result<Persisted, String> {
    if pl == 0 || !leaves.is_multiple_of(pl) {
        return Err(format!("{pl} leaves per page do not divide {leaves}"));
    }
    let pages = leaves / pl;
    let mut v = vec![0u64; leaves as usize];
    let mut as_of = vec![0u64; pages as usize];
    for (k, b) in rows {
        let i = k
            .strip_prefix(PAGE_PREFIX)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes)
            .ok_or_else(|| format!("a Merkle page record has a malformed key {k:?}"))?;
        if i >= pages {
            return Err(format!("Merkle page record {i} is past the tree's {pages}"));
        }
        let (a, vals) = record::decode_page(b, pl).map_err(|e| e.to_string())?;
        as_of[i as usize] = a;
        let at = (i * pl) as usize;
        v[at..at + pl as usize].copy_from_slice(&vals);
    }
    let mut newest: HashMap<u32, u64> = HashMap::new();
    let mut dirty = PageSet::default();
    let mut stamped = Span::default();
    for (n, st) in stamps {
        if st.leaf >= leaves {
            return Err(format!(
                "log entry {n} stamps leaf {}, past the tree's {leaves}",
                st.leaf
            ));
        }
        let page = st.leaf / pl;
        if st.seq < as_of[page as usize] {
            // Its page was written after it.
            continue;
        }
        dirty.insert(page);
        stamped.add(*n);
        if newest.get(&st.leaf).is_none_or(|&q| q < st.seq) {
            newest.insert(st.leaf, st.seq);
            v[st.leaf as usize] = st.value;
        }
    }
    Ok(Persisted {
        tree: Tree::from_leaves(&v).map_err(|e| e.to_string())?,
        as_of: as_of.iter().copied().max().unwrap_or(0),
        dirty,
        stamped,
    })
}

/// A copy's tree and what its queued transactions do to it.
#[derive(Debug)]
pub struct Kept {
    tree: Tree,
    /// Objects a queued, not yet durable transaction changes: the state
    /// it leaves, and its tid.
    queued: HashMap<String, (ObjVersion, u64)>,
    /// The shape record is on disk or in a queued transaction.
    shaped: bool,
    page_leaves: u32,
    /// Stamps issued so far: the next stamp's sequence number, and the
    /// `as_of` of a page written now.
    seq: u64,
    /// Pages whose record lags the tree (their newer leaves are stamps).
    dirty: PageSet,
    /// Counters of the log entries holding stamps no page covers.
    stamped: Span,
}

impl Kept {
    /// The copy's tree as persisted; rebuilt from its objects when none
    /// was kept, it is unreadable, or it has another shape than `leaves`
    /// (the returned transaction then persists it and must be queued
    /// first).
    pub fn load(
        s: &dyn ObjectStore,
        coll: CollectionId,
        leaves: u32,
    ) -> Result<(Kept, Option<Transaction>), String> {
        let empty = Tree::new(leaves).map_err(|e| e.to_string())?;
        let pl = page_leaves(leaves);
        if !s.collection_exists(coll).map_err(|e| e.to_string())? {
            return Ok((Kept::new(empty, false, 0), None));
        }
        let stamps = read_stamps(s, coll);
        // Past every stamp that can be read: a page written from here on
        // covers them all.
        let seq = stamps
            .as_ref()
            .map_or(0, |v| v.iter().map(|(_, st)| st.seq + 1).max().unwrap_or(0));
        let shape = match s.record(coll, TREE_KEY).map_err(|e| e.to_string())? {
            Some(b) => match record::decode_tree(&b) {
                Ok(n) => Some(n),
                Err(e) => {
                    tracing::warn!("{coll}: {e}; rebuilding the Merkle tree");
                    None
                }
            },
            None => None,
        };
        match (shape, &stamps) {
            (Some((n, Some(p))), Ok(stamps)) if n == leaves && p == pl => {
                let rows = recovery::records_with(s, coll, PAGE_PREFIX, None)?;
                match read_persisted(leaves, pl, &rows, stamps) {
                    Ok(p) => {
                        let mut k = Kept::new(p.tree, true, seq.max(p.as_of));
                        k.dirty = p.dirty;
                        k.stamped = p.stamped;
                        return Ok((k, None));
                    }
                    Err(e) => tracing::warn!("{coll}: {e}; rebuilding the Merkle tree"),
                }
            }
            (Some((_, None)), _) => {
                tracing::info!("{coll}: a Merkle tree of the first layout; rebuilding it")
            }
            (_, Err(e)) if shape.is_some() => {
                tracing::warn!("{coll}: {e}; rebuilding the Merkle tree")
            }
            _ => {}
        }
        // No tree kept (a copy from before trees, or a new one), one of
        // another shape or layout, or one that cannot be read: rebuilt
        // from the objects.
        let tree =
            super::backfill::rebuild_tree(s, coll, &empty, None).map_err(|e| e.to_string())?;
        let old = recovery::records_with(s, coll, TREE_KEY, None)?;
        // An empty tree need not be written, unless the log holds stamps
        // (`seq` past 0): a split copies its parent's log, stamps and all,
        // into each child, and once a write persists the shape, pages not
        // written would leave those stamps newer than every page.
        if shape.is_none() && old.is_empty() && tree.root() == 0 && seq == 0 {
            return Ok((Kept::new(tree, false, seq), None));
        }
        Ok(Kept::persist_rebuilt(coll, tree, &old, seq))
    }

    /// The copy's tree rebuilt from its objects whatever it persisted
    /// (a copy whose tree could not be loaded, then wrote unstamped: its
    /// pages and stamps no longer tell its objects), with the transaction
    /// that replaces every tree record (queued first).
    pub fn rebuild(
        s: &dyn ObjectStore,
        coll: CollectionId,
        leaves: u32,
    ) -> Result<(Kept, Transaction), String> {
        let empty = Tree::new(leaves).map_err(|e| e.to_string())?;
        // Past every stamp in the log: none is newer than the pages. (A
        // log that cannot be read for stamps makes every load rebuild
        // anyway: its pages are never trusted.)
        let seq = (read_stamps(s, coll).unwrap_or_default().iter())
            .map(|(_, st)| st.seq + 1)
            .max()
            .unwrap_or(0);
        let tree =
            super::backfill::rebuild_tree(s, coll, &empty, None).map_err(|e| e.to_string())?;
        let old = recovery::records_with(s, coll, TREE_KEY, None)?;
        let (k, t) = Kept::persist_rebuilt(coll, tree, &old, seq);
        Ok((k, t.unwrap_or_default()))
    }

    /// A rebuilt `tree` kept from stamp `seq` on, and the transaction that
    /// replaces the `old` tree records with its shape and every page.
    fn persist_rebuilt(
        coll: CollectionId,
        tree: Tree,
        old: &[(Vec<u8>, Vec<u8>)],
        seq: u64,
    ) -> (Kept, Option<Transaction>) {
        let pl = page_leaves(tree.leaf_count());
        let mut t = Transaction::new();
        for (k, _) in old {
            t.rm_record(coll, k);
        }
        let pages = tree.leaf_count() / pl;
        let mut k = Kept::new(tree, false, seq);
        k.shape_into(coll, &mut t);
        for p in 0..pages {
            k.write_page(coll, p, &mut t);
        }
        (k, Some(t))
    }

    fn new(tree: Tree, shaped: bool, seq: u64) -> Kept {
        let page_leaves = page_leaves(tree.leaf_count());
        Kept {
            tree,
            queued: HashMap::new(),
            shaped,
            page_leaves,
            seq,
            dirty: PageSet::default(),
            stamped: Span::default(),
        }
    }

    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Object `o` goes to state `new` in a transaction queued as `tid`;
    /// its state before is what a queued transaction left, else `before`
    /// (the caller's knowledge of the durable state). The in-memory tree
    /// follows; returns the changed leaf.
    fn apply(
        &mut self,
        o: &ObjectId,
        before: ObjVersion,
        new: ObjVersion,
        tid: u64,
    ) -> Option<u32> {
        let old = match self.queued.get_mut(&o.name) {
            Some(q) => std::mem::replace(q, (new, tid)).0,
            None => {
                self.queued.insert(o.name.clone(), (new, tid));
                before
            }
        };
        (old != new).then(|| {
            self.tree
                .update(o.hash, digest(&o.name, old), digest(&o.name, new))
                .0
        })
    }

    fn shape_into(&mut self, coll: CollectionId, t: &mut Transaction) {
        if !self.shaped {
            t.set_record(
                coll,
                TREE_KEY,
                record::encode_tree(self.tree.leaf_count(), self.page_leaves),
            );
            self.shaped = true;
        }
    }

    /// Page `p` as the tree has it now, covering every stamp issued.
    fn write_page(&mut self, coll: CollectionId, p: u32, t: &mut Transaction) {
        let at = (p * self.page_leaves) as usize;
        let leaves = &self.tree.leaves()[at..at + self.page_leaves as usize];
        t.set_record(coll, &page_key(p), record::encode_page(self.seq, leaves));
        self.dirty.remove(p);
    }

    /// Objects go to new states (`(object, state before, state after)`)
    /// in `t`, queued as `tid`, outside the log (pushes, backfill chunks,
    /// removals): the pages they change go into `t`.
    pub fn change_many(
        &mut self,
        coll: CollectionId,
        changes: &[(ObjectId, ObjVersion, ObjVersion)],
        tid: u64,
        t: &mut Transaction,
    ) {
        let pl = self.page_leaves;
        let pages: BTreeSet<u32> = changes
            .iter()
            .filter_map(|(o, before, new)| self.apply(o, *before, *new, tid))
            .map(|leaf| leaf / pl)
            .collect();
        if pages.is_empty() {
            return;
        }
        self.shape_into(coll, t);
        for p in pages {
            self.write_page(coll, p, t);
        }
    }

    /// A client write: object `o` goes from `before` to `new` in the
    /// write's transaction `shared`, queued as `tid`, which persists log
    /// entry `log_v`. Returns the ops this copy adds to `shared`: the
    /// entry again with the changed leaf stamped in it, and the pages
    /// [`Kept::guard`] flushes (the write may trim a stamped entry).
    #[allow(clippy::too_many_arguments)]
    pub fn change_logged(
        &mut self,
        coll: CollectionId,
        o: &ObjectId,
        before: ObjVersion,
        new: ObjVersion,
        tid: u64,
        log_v: u64,
        shared: &Transaction,
    ) -> Transaction {
        let mut out = Transaction::new();
        let flush = self.rewrites_stamped(coll, shared);
        if let Some(leaf) = self.apply(o, before, new, tid) {
            let key = log_key(log_v);
            let entry = shared.ops.iter().rev().find_map(|op| match op {
                Op::SetRecord {
                    coll: c,
                    key: k,
                    value,
                } if *c == coll && *k == key => Some(value),
                _ => None,
            });
            let stamp = LeafStamp {
                seq: self.seq,
                leaf,
                value: self.tree.leaves()[leaf as usize],
            };
            self.shape_into(coll, &mut out);
            match entry.map(|b| record::stamp_log(b, &stamp)) {
                Some(Ok(b)) => {
                    self.seq += 1;
                    out.set_record(coll, &key, b);
                    self.dirty.insert(leaf / self.page_leaves);
                    self.stamped.add(log_v);
                }
                // No entry to carry the stamp (never so on the write
                // path): the page itself.
                _ => self.write_page(coll, leaf / self.page_leaves, &mut out),
            }
        }
        if flush {
            self.flush(coll, &mut out);
        }
        out
    }

    /// A transaction built outside the write path: if it removes or
    /// rewrites a log entry holding a stamp no page covers, the pages go
    /// into it first (their values as the tree is now, so call it when
    /// `t` is the newest transaction built).
    pub fn guard(&mut self, coll: CollectionId, t: &mut Transaction) {
        if self.rewrites_stamped(coll, t) {
            self.flush(coll, t);
        }
    }

    /// `t` removes or rewrites a log entry holding an uncovered stamp.
    fn rewrites_stamped(&self, coll: CollectionId, t: &Transaction) -> bool {
        !self.stamped.is_empty()
            && t.ops.iter().any(|op| match op {
                Op::SetRecord { coll: c, key, .. } | Op::RmRecord { coll: c, key } => {
                    *c == coll && log_counter(key).is_some_and(|v| self.stamped.contains(v))
                }
                _ => false,
            })
    }

    /// Every page that lags the tree goes into `t`: no stamp is needed
    /// any more.
    fn flush(&mut self, coll: CollectionId, t: &mut Transaction) {
        self.shape_into(coll, t);
        for p in self.dirty.take() {
            self.write_page(coll, p, t);
        }
        self.stamped = Span::default();
    }

    /// Object `o`'s state before the next change: what a queued
    /// transaction leaves, else what the store holds. Read before any
    /// change of a transaction is made, so a read error changes nothing.
    pub fn before(
        &self,
        s: &dyn ObjectStore,
        coll: CollectionId,
        o: &ObjectId,
    ) -> Result<ObjVersion, StoreError> {
        match self.queued.get(&o.name) {
            Some((v, _)) => Ok(*v),
            None => stored_version(s, coll, o),
        }
    }

    /// The copy's records go (its last object and its log went with the
    /// transaction this follows): the next change writes the shape again.
    pub fn unshape(&mut self) {
        self.shaped = false;
        self.dirty = PageSet::default();
        self.stamped = Span::default();
    }

    /// Transaction `tid` is durable: the store now shows what it did.
    pub fn durable(&mut self, tid: u64) {
        if !self.queued.is_empty() {
            self.queued.retain(|_, (_, t)| *t != tid);
        }
    }
}

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct TreeCheck {
    /// PG copies that keep a tree.
    pub checked: usize,
    /// Copies whose persisted tree is not the one their objects make.
    pub errors: Vec<String>,
}

/// The fsck of the kept trees: every PG copy's persisted tree (where one
/// is kept) against a rebuild from its objects. The store must not be in
/// use (a queued transaction would show as a difference).
pub fn check(s: &dyn ObjectStore) -> Result<TreeCheck, StoreError> {
    let mut out = TreeCheck::default();
    for c in s.collections()? {
        let Some(b) = s.record(c, TREE_KEY)? else {
            continue;
        };
        let (leaves, pl) = match record::decode_tree(&b) {
            // The first layout: the OSD rebuilds it at its next start.
            Ok((_, None)) => continue,
            Ok((n, Some(p))) => (n, p),
            Err(e) => {
                out.checked += 1;
                out.errors.push(format!("{c}: {e}"));
                continue;
            }
        };
        out.checked += 1;
        let read = read_stamps(s, c).and_then(|stamps| {
            let rows = recovery::records_with(s, c, PAGE_PREFIX, None)?;
            read_persisted(leaves, pl, &rows, &stamps)
        });
        let kept = match read {
            Ok(p) => p.tree,
            Err(e) => {
                out.errors.push(format!("{c}: {e}"));
                continue;
            }
        };
        let rebuilt = super::backfill::rebuild_tree(s, c, &kept, None)?;
        if rebuilt != kept {
            let differ: Vec<_> = kept.diff(&rebuilt);
            out.errors.push(format!(
                "{c}: the Merkle tree differs from its objects' in leaves {differ:?}"
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::VERSION_ATTR;
    use crate::pg::backfill::rebuild_tree;
    use crate::pg::backfill::tests::{coll, store};
    use crate::pg::{recovery, LogEntry};
    use loligo_store::MemStore;

    fn ver(v: u64) -> Version {
        Version { epoch: 1, v }
    }

    /// The ops that put object `o` in state `v` (None: removed).
    fn object_ops(t: &mut Transaction, o: &ObjectId, v: ObjVersion) {
        match v {
            Some(v) => {
                t.touch(coll(), o).setattr(
                    coll(),
                    o,
                    VERSION_ATTR,
                    postcard::to_stdvec(&v).unwrap(),
                );
            }
            None => {
                t.touch(coll(), o).remove(coll(), o);
            }
        }
    }

    /// A copy as a PG drives it, over a store that applies queued
    /// transactions in order and may lose the ones not applied yet.
    struct Copy {
        s: MemStore,
        k: Kept,
        queued: Vec<(u64, Transaction)>,
        tid: u64,
        /// The next log counter.
        next: u64,
        log_max: u64,
        leaves: u32,
        /// Page records written by client writes (flushes).
        page_writes: usize,
    }

    impl Copy {
        fn new(leaves: u32, log_max: u64) -> Copy {
            let s = store();
            let (k, t) = Kept::load(&s, coll(), leaves).unwrap();
            assert!(t.is_none(), "an empty copy needs no rebuild");
            Copy {
                s,
                k,
                queued: Vec::new(),
                tid: 0,
                next: 1,
                log_max,
                leaves,
                page_writes: 0,
            }
        }

        fn queue(&mut self, t: Transaction) {
            self.tid += 1;
            self.queued.push((self.tid, t));
        }

        /// A client write of `name` to state `v` at the next log counter,
        /// trimming the log to `log_max` entries.
        fn write(&mut self, name: &str, new: bool) {
            let o = recovery::oid(name);
            let v = self.next;
            self.next += 1;
            let state = new.then_some(ver(v));
            let mut t = Transaction::new();
            object_ops(&mut t, &o, state);
            let entry = LogEntry {
                version: ver(v),
                name: name.into(),
                removed: !new,
                reqid: None,
                gave_up: None,
                before: crate::pg::Before::Unknown,
                prev: (v > 1).then(|| ver(v - 1)),
            };
            t.set_record(coll(), &log_key(v), record::encode_log(&entry));
            if v > self.log_max {
                t.rm_record(coll(), &log_key(v - self.log_max));
            }
            let before = self.k.before(&self.s, coll(), &o).unwrap();
            let own = self
                .k
                .change_logged(coll(), &o, before, state, self.tid + 1, v, &t);
            self.page_writes += own
                .ops
                .iter()
                .filter(
                    |op| matches!(op, Op::SetRecord { key, .. } if key.starts_with(PAGE_PREFIX)),
                )
                .count();
            t.ops.extend(own.ops);
            self.queue(t);
        }

        /// Objects replaced outside the log (a push or a backfill chunk).
        fn push(&mut self, names: &[String], gone: bool) {
            let mut t = Transaction::new();
            let mut changes = Vec::new();
            for n in names {
                let o = recovery::oid(n);
                let state = (!gone).then_some(ver(self.next));
                self.next += 1;
                object_ops(&mut t, &o, state);
                changes.push((o, state));
            }
            let before: Vec<_> = changes
                .iter()
                .map(|(o, _)| self.k.before(&self.s, coll(), o).unwrap())
                .collect();
            let changes: Vec<_> = changes
                .into_iter()
                .zip(before)
                .map(|((o, new), b)| (o, b, new))
                .collect();
            self.k.change_many(coll(), &changes, self.tid + 1, &mut t);
            self.queue(t);
        }

        /// A log merge: the entries past counter `head` go (rolled back),
        /// the ones from `from` are rewritten as an authority has them
        /// (without this copy's stamps).
        fn merge(&mut self, from: u64, head: u64) {
            let mut t = Transaction::new();
            for (k, b) in recovery::records_with(&self.s, coll(), b"log/", None).unwrap() {
                let v = log_counter(&k).unwrap();
                if v > head {
                    t.rm_record(coll(), &k);
                } else if v >= from {
                    let e = record::decode_log(&b).unwrap();
                    t.set_record(coll(), &k, record::encode_log(&e));
                }
            }
            // Queued entries count too: drain them first (a merge runs on
            // a settled copy).
            self.settle();
            self.k.guard(coll(), &mut t);
            self.next = self.next.min(head + 1).max(1);
            self.queue(t);
        }

        /// Apply the oldest queued transaction.
        fn apply_one(&mut self) {
            if self.queued.is_empty() {
                return;
            }
            let (tid, t) = self.queued.remove(0);
            self.s.apply(t).unwrap();
            self.k.durable(tid);
        }

        fn settle(&mut self) {
            while !self.queued.is_empty() {
                self.apply_one();
            }
        }

        /// A crash after `keep` more of the queued transactions: the rest
        /// are lost, the tree is loaded again and must equal a rebuild.
        fn crash(&mut self, keep: usize) {
            for _ in 0..keep {
                self.apply_one();
            }
            self.queued.clear();
            let (k, t) = Kept::load(&self.s, coll(), self.leaves).unwrap();
            let rebuilt = rebuild_tree(&self.s, coll(), k.tree(), None).unwrap();
            assert_eq!(k.tree(), &rebuilt, "loaded tree differs from a rebuild");
            assert!(t.is_none(), "a kept tree needs no rebuild after a crash");
            self.k = k;
            // The PG reloads its head from the log.
            self.next = recovery::records_with(&self.s, coll(), b"log/", None)
                .unwrap()
                .last()
                .map_or(1, |(k, _)| log_counter(k).unwrap() + 1);
        }

        fn check(&mut self) {
            self.settle();
            assert_eq!(
                self.k.tree(),
                &rebuild_tree(&self.s, coll(), self.k.tree(), None).unwrap()
            );
            self.crash(0);
            let c = check(&self.s).unwrap();
            assert_eq!(c.checked, 1);
            assert!(c.errors.is_empty(), "{:?}", c.errors);
        }
    }

    /// xorshift64*: the tests' seeded randomness.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
        }
    }

    #[test]
    fn stamps_pages_and_flushes_load_as_a_rebuild_after_any_crash() {
        let seeds: u64 = std::env::var("LOLIGO_TREE_SEEDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(150);
        for seed in 1..=seeds {
            let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let log_max = [2, 5, 40][r.below(3) as usize];
            let mut c = Copy::new(1024, log_max);
            for _ in 0..250 {
                let name = format!("o{}", r.below(60));
                match r.below(20) {
                    0..=11 => c.write(&name, r.below(6) != 0),
                    12..=14 => {
                        let names: Vec<String> = (0..1 + r.below(6))
                            .map(|_| format!("o{}", r.below(60)))
                            .collect();
                        c.push(&names, r.below(4) == 0);
                    }
                    15 => {
                        let head = c.next.saturating_sub(1 + r.below(4));
                        let from = head.saturating_sub(r.below(6));
                        c.merge(from, head);
                    }
                    16..=18 => c.apply_one(),
                    _ => {
                        let keep = r.below(c.queued.len() as u64 + 1) as usize;
                        c.crash(keep);
                    }
                }
            }
            c.check();
        }
    }

    #[test]
    fn client_writes_write_no_page_but_about_once_per_log_length() {
        let mut c = Copy::new(16_384, 1000);
        for i in 0..999 {
            c.write(&format!("o{i}"), true);
        }
        assert_eq!(c.page_writes, 0, "no page written before the log trims");
        for i in 0..3000 {
            c.write(&format!("p{i}"), true);
        }
        // A flush per 1,000 writes, each of at most every page.
        let pages = (16_384 / page_leaves(16_384)) as usize;
        assert!(c.page_writes > 0);
        assert!(
            c.page_writes <= 4 * pages,
            "{} page writes in 3,999 writes",
            c.page_writes
        );
        c.check();
    }

    /// A copy with no tree records and no objects whose log holds
    /// another tree's stamps (a split copies its parent's log, stamps and
    /// all, into each child, and drops every tree record): the rebuild is
    /// persisted, pages `as_of` past those stamps, so that once a write
    /// has persisted the tree's shape, a load never takes an old stamp
    /// for one of this tree's leaves (a child that restarted kept a leaf
    /// of its parent's object).
    #[test]
    fn an_empty_copy_whose_log_holds_foreign_stamps_persists_its_rebuild() {
        let s = store();
        let entry = |v: u64, name: &str| LogEntry {
            version: ver(v),
            name: name.into(),
            removed: false,
            reqid: None,
            gave_up: None,
            before: crate::pg::Before::Absent,
            prev: (v > 1).then(|| ver(v - 1)),
        };
        let foreign = LeafStamp {
            seq: 0,
            leaf: 915,
            value: 0x5eed,
        };
        let b = record::stamp_log(&record::encode_log(&entry(1, "theirs")), &foreign).unwrap();
        let mut t = Transaction::new();
        t.set_record(coll(), &log_key(1), b);
        s.apply(t).unwrap();
        let (mut k, t) = Kept::load(&s, coll(), 1024).unwrap();
        s.apply(t.expect("the rebuild is persisted past the log's stamps"))
            .unwrap();
        // A write of this copy's own object, stamped and shaped.
        let o = recovery::oid("mine");
        let mut t = Transaction::new();
        object_ops(&mut t, &o, Some(ver(2)));
        t.set_record(coll(), &log_key(2), record::encode_log(&entry(2, "mine")));
        let before = k.before(&s, coll(), &o).unwrap();
        let own = k.change_logged(coll(), &o, before, Some(ver(2)), 1, 2, &t);
        t.ops.extend(own.ops);
        s.apply(t).unwrap();
        k.durable(1);
        let (loaded, t) = Kept::load(&s, coll(), 1024).unwrap();
        assert!(t.is_none());
        let rebuilt = rebuild_tree(&s, coll(), loaded.tree(), None).unwrap();
        assert_eq!(
            loaded.tree(),
            &rebuilt,
            "{:?}",
            loaded.tree().diff(&rebuilt)
        );
    }

    /// A copy whose tree could not be loaded wrote without stamps, so its
    /// persisted pages no longer tell its objects: `Kept::rebuild` goes
    /// by the objects alone and replaces every tree record, so a later
    /// load is right again (a load would have trusted the stale pages).
    #[test]
    fn a_rebuild_replaces_pages_that_missed_unstamped_writes() {
        let s = store();
        let mut t = Transaction::new();
        object_ops(&mut t, &recovery::oid("x"), Some(ver(1)));
        s.apply(t).unwrap();
        let (_, t) = Kept::load(&s, coll(), 1024).unwrap();
        s.apply(t.expect("persisted")).unwrap();
        // Written while the copy kept no tree: no stamp, no page.
        let mut t = Transaction::new();
        object_ops(&mut t, &recovery::oid("y"), Some(ver(2)));
        s.apply(t).unwrap();
        let (stale, _) = Kept::load(&s, coll(), 1024).unwrap();
        let truth = rebuild_tree(&s, coll(), stale.tree(), None).unwrap();
        assert_ne!(stale.tree(), &truth, "the pages missed the write");
        let (k, t) = Kept::rebuild(&s, coll(), 1024).unwrap();
        assert_eq!(k.tree(), &truth);
        s.apply(t).unwrap();
        let (loaded, fix) = Kept::load(&s, coll(), 1024).unwrap();
        assert!(fix.is_none());
        assert_eq!(loaded.tree(), &truth);
    }

    #[test]
    fn a_copy_without_a_tree_or_of_another_shape_is_rebuilt_and_persisted() {
        let s = store();
        for (i, n) in ["x", "y", "z"].iter().enumerate() {
            let mut t = Transaction::new();
            object_ops(&mut t, &recovery::oid(n), Some(ver(i as u64 + 1)));
            s.apply(t).unwrap();
        }
        let (k, t) = Kept::load(&s, coll(), 1024).unwrap();
        s.apply(t.expect("a rebuild is persisted")).unwrap();
        let (k2, t) = Kept::load(&s, coll(), 1024).unwrap();
        assert!(t.is_none());
        assert_eq!(k.tree(), k2.tree());
        // Another shape: rebuilt, the old pages replaced.
        let (k4, t) = Kept::load(&s, coll(), 4096).unwrap();
        s.apply(t.expect("a reshape is persisted")).unwrap();
        assert_eq!(k4.tree().leaf_count(), 4096);
        let (k4b, t) = Kept::load(&s, coll(), 4096).unwrap();
        assert!(t.is_none());
        assert_eq!(k4.tree(), k4b.tree());
        // A damaged page is never taken as some value: the tree is
        // rebuilt from the objects, and the damage replaced.
        let mut t = Transaction::new();
        t.set_record(coll(), &page_key(3), vec![1, 2, 3]);
        s.apply(t).unwrap();
        let (k5, t) = Kept::load(&s, coll(), 4096).unwrap();
        assert_eq!(k5.tree(), k4.tree());
        s.apply(t.expect("a repair is persisted")).unwrap();
        assert!(Kept::load(&s, coll(), 4096).unwrap().1.is_none());
        // The first layout (a record per leaf) is replaced by pages.
        let mut t = Transaction::new();
        for (k, _) in recovery::records_with(&s, coll(), TREE_KEY, None).unwrap() {
            t.rm_record(coll(), &k);
        }
        t.set_record(coll(), TREE_KEY, {
            let mut b = record::TREE_V1.to_vec();
            b.extend(postcard::to_stdvec(&4096u32).unwrap());
            b
        });
        let mut old_leaf = OLD_LEAF_PREFIX.to_vec();
        old_leaf.extend_from_slice(&7u32.to_be_bytes());
        t.set_record(coll(), &old_leaf, 5u64.to_be_bytes().to_vec());
        s.apply(t).unwrap();
        let (k6, t) = Kept::load(&s, coll(), 4096).unwrap();
        assert_eq!(k6.tree(), k4.tree());
        s.apply(t.expect("an upgrade is persisted")).unwrap();
        assert!(s.record(coll(), &old_leaf).unwrap().is_none());
        assert!(Kept::load(&s, coll(), 4096).unwrap().1.is_none());
    }
}
