//! `FaultyStore`: a store wrapper that makes chosen operations fail, for
//! tests of what runs above a store (an OSD's fail-stop, its answer to a
//! read error). It counts object reads and queued transactions down to
//! the one that fails with an I/O error; everything else goes to the
//! store it wraps unchanged. It can also commit a given transaction just
//! before a chosen read, as a store that commits in its own thread may
//! between two reads of one caller. And it can rot an object: its data
//! then fails its checksum on every read until a transaction writes to
//! or removes the object (a bad sector under it; any write counts as a
//! rewrite of the whole object, as a copy-on-write store's would be of
//! the blocks it covers).
//!
//! It must never change what the wrapped store holds but by that chosen
//! transaction: a failed transaction applies nothing, a failed read
//! returns nothing.

use crate::error::{Result, StoreError};
use crate::names::{CollectionId, Limits, ObjectId, ObjectRead, ObjectStat, StoreStats};
use crate::store::{Commit, ObjectStore};
use crate::txn::Op;
use crate::txn::Transaction;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// A store whose `n`th object read or transaction from a given point
/// fails.
pub struct FaultyStore<S> {
    inner: S,
    read_in: AtomicU64,
    commit_in: AtomicU64,
    read_faults: AtomicU64,
    commit_faults: AtomicU64,
    /// Reads left before `interleaved` is committed.
    interleave_in: AtomicU64,
    interleaved: std::sync::Mutex<Option<Transaction>>,
    rotten: std::sync::Mutex<BTreeSet<(CollectionId, ObjectId)>>,
}

impl<S: ObjectStore> FaultyStore<S> {
    /// `inner`, with no fault armed.
    pub fn new(inner: S) -> FaultyStore<S> {
        FaultyStore {
            inner,
            read_in: AtomicU64::new(0),
            commit_in: AtomicU64::new(0),
            read_faults: AtomicU64::new(0),
            commit_faults: AtomicU64::new(0),
            interleave_in: AtomicU64::new(0),
            interleaved: std::sync::Mutex::new(None),
            rotten: std::sync::Mutex::new(BTreeSet::new()),
        }
    }

    /// Rot object `o` of `c`: reads of its data fail with a checksum
    /// error until a transaction writes or removes it.
    pub fn rot(&self, c: CollectionId, o: &ObjectId) {
        if let Ok(mut r) = self.rotten.lock() {
            r.insert((c, o.clone()));
        }
    }

    /// The objects rotten now.
    pub fn rotten(&self) -> Vec<(CollectionId, ObjectId)> {
        self.rotten
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A checksum error if `o`'s data is rotten and the read takes any.
    fn check_rot(&self, c: CollectionId, o: &ObjectId, reads_data: bool) -> Result<()> {
        let rotten = reads_data
            && self
                .rotten
                .lock()
                .is_ok_and(|r| r.contains(&(c, o.clone())));
        if rotten {
            self.read_faults.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Checksum {
                oid: o.clone(),
                offset: 0,
            });
        }
        Ok(())
    }

    /// Objects `t` writes or removes are whole again (called for every
    /// transaction queued here; a caller that commits to the wrapped
    /// store directly calls it itself).
    pub fn heal(&self, t: &Transaction) {
        let Ok(mut r) = self.rotten.lock() else {
            return;
        };
        if r.is_empty() {
            return;
        }
        for op in &t.ops {
            match op {
                // (Any data write counts as rewriting the object.)
                Op::WriteFull { coll, oid, .. }
                | Op::Write { coll, oid, .. }
                | Op::Zero { coll, oid, .. }
                | Op::Truncate { coll, oid, .. }
                | Op::Remove(coll, oid) => {
                    r.remove(&(*coll, oid.clone()));
                }
                Op::Clone { coll, dst, .. } => {
                    r.remove(&(*coll, dst.clone()));
                }
                // (A moved object keeps its rot, under its new collection.)
                Op::MoveObjects { from, to, oids } => {
                    for o in oids {
                        if r.remove(&(*from, o.clone())) {
                            r.insert((*to, o.clone()));
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Commit `t` to the wrapped store just before the `n`th object read
    /// (data, xattr or omap) from now: a commit landing between two reads
    /// of one caller.
    pub fn commit_before_read(&self, n: u64, t: Transaction) {
        if let Ok(mut x) = self.interleaved.lock() {
            *x = Some(t);
        }
        self.interleave_in.store(n, Ordering::Relaxed);
    }

    /// The wrapped store (reads and writes through it see no faults).
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Make the `n`th object read (data, xattr or omap) from now fail
    /// with an I/O error; 0 disarms.
    pub fn fail_read_in(&self, n: u64) {
        self.read_in.store(n, Ordering::Relaxed);
    }

    /// Make the `n`th transaction queued from now fail with an I/O error
    /// (applying nothing); 0 disarms.
    pub fn fail_commit_in(&self, n: u64) {
        self.commit_in.store(n, Ordering::Relaxed);
    }

    /// Reads that failed so far.
    pub fn read_faults(&self) -> u64 {
        self.read_faults.load(Ordering::Relaxed)
    }

    /// Transactions that failed so far.
    pub fn commit_faults(&self) -> u64 {
        self.commit_faults.load(Ordering::Relaxed)
    }

    fn read_trips(&self) -> Result<()> {
        if trips(&self.interleave_in) {
            let t = self.interleaved.lock().ok().and_then(|mut x| x.take());
            if let Some(t) = t {
                self.inner.apply(t)?;
            }
        }
        if trips(&self.read_in) {
            self.read_faults.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Io("injected read error".into()));
        }
        Ok(())
    }
}

/// Count `left` down; true for the call that takes it from 1 to 0.
fn trips(left: &AtomicU64) -> bool {
    left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok_and(|n| n == 1)
}

impl<S: ObjectStore> ObjectStore for FaultyStore<S> {
    fn limits(&self) -> &Limits {
        self.inner.limits()
    }
    fn queue_transaction(&self, t: Transaction) -> Commit {
        if trips(&self.commit_in) {
            self.commit_faults.fetch_add(1, Ordering::Relaxed);
            return Commit::ready(Err(StoreError::Io("injected commit error".into())));
        }
        self.heal(&t);
        self.inner.queue_transaction(t)
    }
    fn collections(&self) -> Result<Vec<CollectionId>> {
        self.inner.collections()
    }
    fn collection_exists(&self, c: CollectionId) -> Result<bool> {
        self.inner.collection_exists(c)
    }
    fn exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool> {
        self.inner.exists(c, o)
    }
    fn stat(&self, c: CollectionId, o: &ObjectId) -> Result<ObjectStat> {
        self.inner.stat(c, o)
    }
    fn read(&self, c: CollectionId, o: &ObjectId, extents: &[(u64, u64)]) -> Result<Vec<Vec<u8>>> {
        self.read_trips()?;
        self.check_rot(c, o, extents.iter().any(|e| e.1 > 0))?;
        self.inner.read(c, o, extents)
    }
    fn read_bytes(&self, c: CollectionId, o: &ObjectId, off: u64, len: u64) -> Result<Bytes> {
        self.read_trips()?;
        self.check_rot(c, o, len > 0)?;
        self.inner.read_bytes(c, o, off, len)
    }
    fn read_with_attrs(
        &self,
        c: CollectionId,
        o: &ObjectId,
        extents: &[(u64, u64)],
    ) -> Result<Option<ObjectRead>> {
        self.read_trips()?;
        self.check_rot(c, o, extents.iter().any(|e| e.1 > 0))?;
        self.inner.read_with_attrs(c, o, extents)
    }
    fn getattr(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<Vec<u8>> {
        self.read_trips()?;
        self.inner.getattr(c, o, name)
    }
    fn getattrs(&self, c: CollectionId, o: &ObjectId) -> Result<BTreeMap<String, Vec<u8>>> {
        self.read_trips()?;
        self.inner.getattrs(c, o)
    }
    fn stat_attr(
        &self,
        c: CollectionId,
        o: &ObjectId,
        name: &str,
    ) -> Result<Option<(ObjectStat, Option<Vec<u8>>)>> {
        self.read_trips()?;
        self.inner.stat_attr(c, o, name)
    }
    fn omap_header(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<u8>> {
        self.read_trips()?;
        self.inner.omap_header(c, o)
    }
    fn omap_get(
        &self,
        c: CollectionId,
        o: &ObjectId,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        self.read_trips()?;
        self.inner.omap_get(c, o, keys)
    }
    fn omap_range(
        &self,
        c: CollectionId,
        o: &ObjectId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.read_trips()?;
        self.inner.omap_range(c, o, start, end, limit)
    }
    fn list_range(
        &self,
        c: CollectionId,
        hashes: Range<u64>,
        start: Option<&ObjectId>,
        limit: usize,
    ) -> Result<(Vec<ObjectId>, Option<ObjectId>)> {
        self.inner.list_range(c, hashes, start, limit)
    }
    fn record(&self, c: CollectionId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.record(c, key)
    }
    fn records(
        &self,
        c: CollectionId,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.records(c, start, limit)
    }
    fn statfs(&self) -> Result<StoreStats> {
        self.inner.statfs()
    }
    fn device_reads(&self) -> (u64, u64) {
        self.inner.device_reads()
    }
    fn commit_latency(&self) -> (u64, u64) {
        self.inner.commit_latency()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemStore;

    #[test]
    fn the_nth_read_and_the_nth_commit_fail_and_nothing_else_changes() {
        let s = FaultyStore::new(MemStore::new());
        let c = CollectionId::pg(1, 0);
        let o = ObjectId::new(7, "a");
        let mut t = Transaction::new();
        t.create_collection(c);
        t.write_full(c, &o, b"one".to_vec());
        s.apply(t).unwrap();
        s.fail_read_in(2);
        assert_eq!(s.read(c, &o, &[(0, 3)]).unwrap(), vec![b"one".to_vec()]);
        assert!(matches!(s.read(c, &o, &[(0, 3)]), Err(StoreError::Io(_))));
        assert_eq!(s.read(c, &o, &[(0, 3)]).unwrap(), vec![b"one".to_vec()]);
        assert_eq!(s.read_faults(), 1);
        s.fail_commit_in(1);
        let mut t = Transaction::new();
        t.write_full(c, &o, b"two".to_vec());
        assert!(matches!(s.apply(t.clone()), Err(StoreError::Io(_))));
        assert_eq!(s.read(c, &o, &[(0, 3)]).unwrap(), vec![b"one".to_vec()]);
        s.apply(t).unwrap();
        assert_eq!(s.read(c, &o, &[(0, 3)]).unwrap(), vec![b"two".to_vec()]);
        assert_eq!(s.commit_faults(), 1);
    }

    #[test]
    fn a_rotten_object_fails_data_reads_until_it_is_rewritten() {
        let s = FaultyStore::new(MemStore::new());
        let c = CollectionId::pg(1, 0);
        let (o, other) = (ObjectId::new(7, "a"), ObjectId::new(8, "b"));
        let mut t = Transaction::new();
        t.create_collection(c);
        t.write_full(c, &o, b"one".to_vec());
        t.write_full(c, &other, b"two".to_vec());
        s.apply(t).unwrap();
        s.rot(c, &o);
        assert!(matches!(
            s.read(c, &o, &[(0, 3)]),
            Err(StoreError::Checksum { .. })
        ));
        assert!(s.read_whole(c, &o, true).is_err());
        assert!(
            s.read_whole(c, &o, false).is_ok(),
            "metadata reads still work"
        );
        assert_eq!(s.read(c, &other, &[(0, 3)]).unwrap(), vec![b"two".to_vec()]);
        let mut t = Transaction::new();
        t.write_full(c, &o, b"new".to_vec());
        s.apply(t).unwrap();
        assert_eq!(s.read(c, &o, &[(0, 3)]).unwrap(), vec![b"new".to_vec()]);
        assert!(s.rotten().is_empty());
    }
}
