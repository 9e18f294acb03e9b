//! A copy's kept Merkle tree: the leaves persisted as records of the PG's
//! collection (`merkle` holds the shape, `merkle/` + leaf index each
//! non-zero leaf), changed in the same transaction as the object change
//! they follow, so after any crash the persisted tree is the one a
//! rebuild from the objects computes.
//!
//! Every path that changes an object's version on a copy goes through
//! [`Kept::change`]: a client write (the primary's own and each
//! replica's), a push, a backfill chunk, the removal of a stray copy. A
//! change needs the object's state before it. Transactions are queued
//! before they are durable and reads see only durable ones, so the state
//! a queued transaction leaves is remembered here until it is durable;
//! otherwise the caller says (a primary knows it from its read, a
//! replica from the primary) or the store is read — for every object of
//! a transaction before any of its changes is made, so a read error
//! leaves the tree as it was.
//!
//! It must never update the in-memory tree without putting the changed
//! leaf in the transaction that makes the change.

use super::merkle::{object_digest, Tree};
use super::record;
use crate::exec::VERSION_ATTR;
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::Version;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Record key of the tree's shape (absent: the copy keeps no tree yet).
pub const TREE_KEY: &[u8] = b"merkle";
/// Prefix of the leaf records (+ the leaf index, 4 bytes big-endian).
pub const LEAF_PREFIX: &[u8] = b"merkle/";

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

/// Record key of leaf `i`.
pub fn leaf_key(i: u32) -> Vec<u8> {
    let mut k = LEAF_PREFIX.to_vec();
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
    Ok(s.stat_attr(coll, o, VERSION_ATTR)?.map(|(_, v)| {
        v.and_then(|b| postcard::from_bytes(&b).ok())
            .unwrap_or_default()
    }))
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
}

impl Kept {
    /// The copy's tree as persisted; rebuilt from its objects when none
    /// was kept or it has another shape than `leaves` (the returned
    /// transaction then persists it and must be queued first).
    pub fn load(
        s: &dyn ObjectStore,
        coll: CollectionId,
        leaves: u32,
    ) -> Result<(Kept, Option<Transaction>), String> {
        let empty = Tree::new(leaves).map_err(|e| e.to_string())?;
        if !s.collection_exists(coll).map_err(|e| e.to_string())? {
            return Ok((Kept::new(empty, false), None));
        }
        let old_leaves = super::recovery::records_with(s, coll, LEAF_PREFIX, None)?;
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
        if shape == Some(leaves) {
            match read_leaves(leaves, &old_leaves) {
                Ok(tree) => return Ok((Kept::new(tree, true), None)),
                Err(e) => tracing::warn!("{coll}: {e}; rebuilding the Merkle tree"),
            }
        }
        // No tree kept (a copy from before trees, or a new one), or one of
        // another shape: rebuilt from the objects.
        let tree =
            super::backfill::rebuild_tree(s, coll, &empty, None).map_err(|e| e.to_string())?;
        if shape.is_none() && old_leaves.is_empty() && tree.root() == 0 {
            return Ok((Kept::new(tree, false), None));
        }
        let mut t = Transaction::new();
        for (k, _) in &old_leaves {
            t.rm_record(coll, k);
        }
        t.set_record(coll, TREE_KEY, record::encode_tree(leaves));
        for (i, &v) in tree.leaves().iter().enumerate() {
            if v != 0 {
                t.set_record(coll, &leaf_key(i as u32), v.to_be_bytes().to_vec());
            }
        }
        Ok((Kept::new(tree, true), Some(t)))
    }

    fn new(tree: Tree, shaped: bool) -> Kept {
        Kept {
            tree,
            queued: HashMap::new(),
            shaped,
        }
    }

    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Object `o` goes to state `new` in transaction `t` (queued as
    /// `tid`); its state before is what a queued transaction left, else
    /// `before` (the caller's knowledge of the durable state). The changed
    /// leaf goes into `t`.
    pub fn change_from(
        &mut self,
        coll: CollectionId,
        o: &ObjectId,
        before: ObjVersion,
        new: ObjVersion,
        tid: u64,
        t: &mut Transaction,
    ) {
        let old = self.queued.get(&o.name).map_or(before, |(v, _)| *v);
        self.queued.insert(o.name.clone(), (new, tid));
        if old == new {
            return;
        }
        let (i, v) = self
            .tree
            .update(o.hash, digest(&o.name, old), digest(&o.name, new));
        if !self.shaped {
            t.set_record(coll, TREE_KEY, record::encode_tree(self.tree.leaf_count()));
            self.shaped = true;
        }
        if v == 0 {
            t.rm_record(coll, &leaf_key(i));
        } else {
            t.set_record(coll, &leaf_key(i), v.to_be_bytes().to_vec());
        }
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

    /// The copy's records go (its last object went with a durable
    /// transaction before): the next change writes the shape again.
    pub fn unshape(&mut self) {
        self.shaped = false;
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
        out.checked += 1;
        let leaves = match record::decode_tree(&b) {
            Ok(n) => n,
            Err(e) => {
                out.errors.push(format!("{c}: {e}"));
                continue;
            }
        };
        let rows = super::recovery::records_with(s, c, LEAF_PREFIX, None)
            .map_err(|e| StoreError::Corrupt(format!("{c}: {e}")))?;
        let kept = match read_leaves(leaves, &rows) {
            Ok(t) => t,
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

/// A tree of `leaves` leaves from its persisted leaf records.
fn read_leaves(leaves: u32, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<Tree, String> {
    let mut v = vec![0u64; leaves as usize];
    for (k, b) in rows {
        let i = leaf_index(k)?;
        let slot = v
            .get_mut(i as usize)
            .ok_or_else(|| format!("Merkle leaf record {i} is past the tree's {leaves}"))?;
        *slot = decode_leaf(b)?;
    }
    Tree::from_leaves(&v).map_err(|e| e.to_string())
}

fn leaf_index(k: &[u8]) -> Result<u32, String> {
    k.strip_prefix(LEAF_PREFIX)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| format!("a Merkle leaf record has a malformed key {k:?}"))
}

fn decode_leaf(b: &[u8]) -> Result<u64, String> {
    <[u8; 8]>::try_from(b)
        .map(u64::from_be_bytes)
        .map_err(|_| format!("a Merkle leaf record holds {} bytes, not 8", b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::backfill::rebuild_tree;
    use crate::pg::backfill::tests::{coll, store};
    use crate::pg::recovery;
    use loligo_store::MemStore;

    fn ver(v: u64) -> Version {
        Version { epoch: 1, v }
    }

    /// Write `name` at `v` (None: remove) through `k`, queued as `tid`,
    /// applied only if `apply`.
    fn put(s: &MemStore, k: &mut Kept, name: &str, v: ObjVersion, tid: u64) -> Transaction {
        let o = recovery::oid(name);
        let mut t = Transaction::new();
        match v {
            Some(v) => {
                t.touch(coll(), &o).setattr(
                    coll(),
                    &o,
                    VERSION_ATTR,
                    postcard::to_stdvec(&v).unwrap(),
                );
            }
            None => {
                t.touch(coll(), &o).remove(coll(), &o);
            }
        }
        let before = k.before(s, coll(), &o).unwrap();
        k.change_from(coll(), &o, before, v, tid, &mut t);
        t
    }

    #[test]
    fn a_kept_tree_is_persisted_with_each_change_and_loads_as_rebuilt() {
        let s = store();
        let (mut k, t) = Kept::load(&s, coll(), 1024).unwrap();
        assert!(t.is_none(), "an empty copy needs no rebuild");
        // Queue several changes before any is durable: the same object
        // twice, a removal of a queued creation, then apply in order.
        let mut txns = Vec::new();
        for (i, (name, v)) in [
            ("a", Some(ver(1))),
            ("b", Some(ver(2))),
            ("a", Some(ver(3))),
            ("c", Some(ver(4))),
            ("c", None),
            ("d", Some(ver(6))),
        ]
        .into_iter()
        .enumerate()
        {
            txns.push((i as u64 + 1, put(&s, &mut k, name, v, i as u64 + 1)));
        }
        for (tid, t) in txns {
            s.apply(t).unwrap();
            k.durable(tid);
        }
        let rebuilt = rebuild_tree(&s, coll(), k.tree(), None).unwrap();
        assert_eq!(k.tree(), &rebuilt);
        let (loaded, t) = Kept::load(&s, coll(), 1024).unwrap();
        assert!(t.is_none());
        assert_eq!(loaded.tree(), &rebuilt);
        // A removal read from the store, and one of a missing object.
        let t = put(&s, &mut k, "b", None, 10);
        s.apply(t).unwrap();
        k.durable(10);
        let t = put(&s, &mut k, "never", None, 11);
        s.apply(t).unwrap();
        k.durable(11);
        assert_eq!(k.tree(), &rebuild_tree(&s, coll(), k.tree(), None).unwrap());
        assert_eq!(Kept::load(&s, coll(), 1024).unwrap().0.tree(), k.tree());
    }

    #[test]
    fn a_copy_without_a_tree_or_of_another_shape_is_rebuilt_and_persisted() {
        let s = store();
        for (i, n) in ["x", "y", "z"].iter().enumerate() {
            let o = recovery::oid(n);
            let mut t = Transaction::new();
            t.touch(coll(), &o).setattr(
                coll(),
                &o,
                VERSION_ATTR,
                postcard::to_stdvec(&ver(i as u64 + 1)).unwrap(),
            );
            s.apply(t).unwrap();
        }
        let (k, t) = Kept::load(&s, coll(), 1024).unwrap();
        s.apply(t.expect("a rebuild is persisted")).unwrap();
        let (k2, t) = Kept::load(&s, coll(), 1024).unwrap();
        assert!(t.is_none());
        assert_eq!(k.tree(), k2.tree());
        // Another shape: rebuilt, the old leaves replaced.
        let (k4, t) = Kept::load(&s, coll(), 4096).unwrap();
        s.apply(t.expect("a reshape is persisted")).unwrap();
        assert_eq!(k4.tree().leaf_count(), 4096);
        let (k4b, t) = Kept::load(&s, coll(), 4096).unwrap();
        assert!(t.is_none());
        assert_eq!(k4.tree(), k4b.tree());
        // A damaged leaf is never taken as some value: the tree is
        // rebuilt from the objects, and the damage replaced.
        let mut t = Transaction::new();
        t.set_record(coll(), &leaf_key(3), vec![1, 2, 3]);
        s.apply(t).unwrap();
        let (k5, t) = Kept::load(&s, coll(), 4096).unwrap();
        assert_eq!(k5.tree(), k4.tree());
        s.apply(t.expect("a repair is persisted")).unwrap();
        assert!(Kept::load(&s, coll(), 4096).unwrap().1.is_none());
    }
}
