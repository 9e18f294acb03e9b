//! `MemStore`: the `ObjectStore` contract in memory. It is the reference
//! the other stores are tested against and the CPU ceiling in benchmarks.
//! Durable only as long as the process lives.
//!
//! Atomicity: ops mutate in place and log how to undo each first change;
//! if an op fails, the log is replayed backwards and the error returned.
//!
//! It must never leave a failed transaction partly applied.

use crate::error::{Result, StoreError};
use crate::names::{
    CollectionId, Compression, Limits, ObjectId, ObjectRead, ObjectStat, StoreStats,
};
use crate::store::{Commit, ObjectStore};
use crate::txn::{Op, Transaction};
use std::collections::{BTreeMap, HashSet};
use std::ops::{Bound, Range};
use std::sync::RwLock;

#[derive(Clone, Debug, Default)]
struct Object {
    data: Vec<u8>,
    attrs: BTreeMap<String, Vec<u8>>,
    omap: BTreeMap<Vec<u8>, Vec<u8>>,
    header: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
struct Coll {
    objects: BTreeMap<ObjectId, Object>,
    records: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Recorded for parity with stores that compress; data is unchanged.
    compression: Compression,
}

enum Undo {
    Coll(CollectionId, Option<Coll>),
    Compression(CollectionId, Compression),
    Obj(CollectionId, ObjectId, Option<Object>),
    Rec(CollectionId, Vec<u8>, Option<Vec<u8>>),
}

/// The in-memory store.
pub struct MemStore {
    colls: RwLock<BTreeMap<CollectionId, Coll>>,
    limits: Limits,
    capacity: u64,
}

impl Default for MemStore {
    fn default() -> Self {
        MemStore::new()
    }
}

impl MemStore {
    /// An empty store with default limits and no capacity limit.
    pub fn new() -> MemStore {
        MemStore::with_limits(Limits::default(), u64::MAX)
    }

    /// An empty store with these limits and `capacity` bytes of data space.
    pub fn with_limits(limits: Limits, capacity: u64) -> MemStore {
        MemStore {
            colls: RwLock::new(BTreeMap::new()),
            limits,
            capacity,
        }
    }

    /// A copy of everything the store holds (for simulations that model
    /// transactions lost in a crash: see [`MemStore::restore`]).
    pub fn snapshot(&self) -> Result<MemStore> {
        let colls = self.colls.read().map_err(|_| StoreError::Closed)?.clone();
        Ok(MemStore {
            colls: RwLock::new(colls),
            limits: self.limits,
            capacity: self.capacity,
        })
    }

    /// Make the store hold exactly what `from` holds.
    pub fn restore(&self, from: &MemStore) -> Result<()> {
        let colls = from.colls.read().map_err(|_| StoreError::Closed)?.clone();
        *self.colls.write().map_err(|_| StoreError::Closed)? = colls;
        Ok(())
    }

    fn apply_txn(&self, t: &Transaction) -> Result<()> {
        t.validate(&self.limits)?;
        let mut colls = self.colls.write().map_err(|_| StoreError::Closed)?;
        let mut undo: Vec<Undo> = Vec::new();
        let mut saved: HashSet<(CollectionId, ObjectId)> = HashSet::new();
        let last = t.ops.len().saturating_sub(1);
        let unbounded = self.capacity == u64::MAX;
        let res = t
            .ops
            .iter()
            .enumerate()
            .try_for_each(|(i, op)| {
                // Every op fails before it mutates, so the last op needs no
                // undo record unless the capacity check can still fail
                // after it (this saves copying a 4 MiB object per 4 KiB
                // write).
                let log = !(i == last && unbounded);
                apply_op(&mut colls, op, &self.limits, &mut undo, &mut saved, log)
            })
            .and_then(|()| {
                if unbounded {
                    return Ok(());
                }
                let used = used_bytes(&colls);
                if used > self.capacity {
                    Err(StoreError::NoSpace {
                        needed: used,
                        free: self.capacity,
                    })
                } else {
                    Ok(())
                }
            });
        if res.is_err() {
            rollback(&mut colls, undo);
        }
        res
    }

    fn with_obj<T>(
        &self,
        c: CollectionId,
        o: &ObjectId,
        f: impl FnOnce(&Object) -> Result<T>,
    ) -> Result<T> {
        let colls = self.colls.read().map_err(|_| StoreError::Closed)?;
        let coll = colls.get(&c).ok_or(StoreError::NoCollection(c))?;
        let obj = coll.objects.get(o).ok_or_else(|| StoreError::NoObject {
            coll: c,
            oid: o.clone(),
        })?;
        f(obj)
    }
}

fn used_bytes(colls: &BTreeMap<CollectionId, Coll>) -> u64 {
    colls
        .values()
        .flat_map(|c| c.objects.values())
        .map(|o| o.data.len() as u64)
        .sum()
}

fn rollback(colls: &mut BTreeMap<CollectionId, Coll>, undo: Vec<Undo>) {
    for u in undo.into_iter().rev() {
        match u {
            Undo::Coll(c, prev) => match prev {
                Some(p) => {
                    colls.insert(c, p);
                }
                None => {
                    colls.remove(&c);
                }
            },
            Undo::Compression(c, prev) => {
                if let Some(coll) = colls.get_mut(&c) {
                    coll.compression = prev;
                }
            }
            Undo::Obj(c, o, prev) => {
                if let Some(coll) = colls.get_mut(&c) {
                    match prev {
                        Some(p) => {
                            coll.objects.insert(o, p);
                        }
                        None => {
                            coll.objects.remove(&o);
                        }
                    }
                }
            }
            Undo::Rec(c, k, prev) => {
                if let Some(coll) = colls.get_mut(&c) {
                    match prev {
                        Some(v) => {
                            coll.records.insert(k, v);
                        }
                        None => {
                            coll.records.remove(&k);
                        }
                    }
                }
            }
        }
    }
}

/// The object, for changing: logs its prior state once per transaction;
/// creates it when `create`.
fn obj_mut<'a>(
    colls: &'a mut BTreeMap<CollectionId, Coll>,
    c: CollectionId,
    o: &ObjectId,
    create: bool,
    undo: &mut Vec<Undo>,
    saved: &mut HashSet<(CollectionId, ObjectId)>,
    log: bool,
) -> Result<&'a mut Object> {
    let coll = colls.get_mut(&c).ok_or(StoreError::NoCollection(c))?;
    if !create && !coll.objects.contains_key(o) {
        return Err(StoreError::NoObject {
            coll: c,
            oid: o.clone(),
        });
    }
    if log && saved.insert((c, o.clone())) {
        undo.push(Undo::Obj(c, o.clone(), coll.objects.get(o).cloned()));
    }
    Ok(coll.objects.entry(o.clone()).or_default())
}

fn size_ok(l: &Limits, size: u64) -> Result<()> {
    if size > l.object_size_max {
        return Err(StoreError::TooLarge(format!(
            "object of {size} bytes (limit {})",
            l.object_size_max
        )));
    }
    Ok(())
}

fn apply_op(
    colls: &mut BTreeMap<CollectionId, Coll>,
    op: &Op,
    l: &Limits,
    undo: &mut Vec<Undo>,
    saved: &mut HashSet<(CollectionId, ObjectId)>,
    log: bool,
) -> Result<()> {
    match op {
        Op::CreateCollection(c) => {
            if colls.contains_key(c) {
                return Err(StoreError::CollectionExists(*c));
            }
            undo.push(Undo::Coll(*c, None));
            colls.insert(*c, Coll::default());
        }
        Op::RemoveCollection(c) => {
            let coll = colls.get(c).ok_or(StoreError::NoCollection(*c))?;
            if !coll.objects.is_empty() {
                return Err(StoreError::CollectionNotEmpty(*c));
            }
            let prev = colls.remove(c);
            undo.push(Undo::Coll(*c, prev));
            // Objects of a removed collection may be re-created later in
            // the same transaction: forget what was saved for it.
            saved.retain(|(sc, _)| sc != c);
        }
        Op::SetCompression(c, algo) => {
            let coll = colls.get_mut(c).ok_or(StoreError::NoCollection(*c))?;
            let prev = coll.compression;
            coll.compression = *algo;
            undo.push(Undo::Compression(*c, prev));
        }
        Op::Touch(c, o) => {
            obj_mut(colls, *c, o, true, undo, saved, log)?;
        }
        Op::Write {
            coll,
            oid,
            offset,
            data,
        } => {
            let obj = obj_mut(colls, *coll, oid, true, undo, saved, log)?;
            let end = *offset as usize + data.len();
            size_ok(l, end as u64)?;
            if obj.data.len() < end {
                obj.data.resize(end, 0);
            }
            obj.data[*offset as usize..end].copy_from_slice(data);
        }
        Op::WriteFull { coll, oid, data } => {
            obj_mut(colls, *coll, oid, true, undo, saved, log)?.data = data.to_vec();
        }
        Op::Zero {
            coll,
            oid,
            offset,
            len,
        } => {
            let obj = obj_mut(colls, *coll, oid, true, undo, saved, log)?;
            let end = (*offset + *len) as usize;
            size_ok(l, end as u64)?;
            if obj.data.len() < end {
                obj.data.resize(end, 0);
            }
            obj.data[*offset as usize..end].fill(0);
        }
        Op::Truncate { coll, oid, size } => {
            size_ok(l, *size)?;
            obj_mut(colls, *coll, oid, true, undo, saved, log)?
                .data
                .resize(*size as usize, 0);
        }
        Op::Remove(c, o) => {
            obj_mut(colls, *c, o, false, undo, saved, log)?;
            if let Some(coll) = colls.get_mut(c) {
                coll.objects.remove(o);
            }
        }
        Op::Clone { coll, src, dst } => {
            let copy = colls
                .get(coll)
                .ok_or(StoreError::NoCollection(*coll))?
                .objects
                .get(src)
                .cloned()
                .ok_or_else(|| StoreError::NoObject {
                    coll: *coll,
                    oid: src.clone(),
                })?;
            *obj_mut(colls, *coll, dst, true, undo, saved, log)? = copy;
        }
        Op::MoveObjects { from, to, oids } => {
            // (Checked whole first: an op fails before it mutates.)
            let (src, dst) = match (colls.get(from), colls.get(to)) {
                (Some(f), Some(t)) => (f, t),
                (None, _) => return Err(StoreError::NoCollection(*from)),
                (_, None) => return Err(StoreError::NoCollection(*to)),
            };
            let mut seen = HashSet::new();
            for o in oids {
                if !src.objects.contains_key(o) || !seen.insert(o) {
                    return Err(StoreError::NoObject {
                        coll: *from,
                        oid: o.clone(),
                    });
                }
                if dst.objects.contains_key(o) {
                    return Err(StoreError::Invalid(format!(
                        "object {o} moved into {to}, which holds it already"
                    )));
                }
            }
            for o in oids {
                let obj = std::mem::take(obj_mut(colls, *from, o, false, undo, saved, log)?);
                if let Some(c) = colls.get_mut(from) {
                    c.objects.remove(o);
                }
                *obj_mut(colls, *to, o, true, undo, saved, log)? = obj;
            }
        }
        Op::SetAttrs { coll, oid, attrs } => {
            let obj = obj_mut(colls, *coll, oid, true, undo, saved, log)?;
            for (k, v) in attrs {
                obj.attrs.insert(k.clone(), v.clone());
            }
        }
        Op::RmAttr { coll, oid, name } => {
            let obj = obj_mut(colls, *coll, oid, false, undo, saved, log)?;
            if obj.attrs.remove(name).is_none() {
                return Err(StoreError::NoAttr {
                    oid: oid.clone(),
                    name: name.clone(),
                });
            }
        }
        Op::OmapSetKeys { coll, oid, kvs } => {
            let obj = obj_mut(colls, *coll, oid, true, undo, saved, log)?;
            for (k, v) in kvs {
                obj.omap.insert(k.clone(), v.clone());
            }
        }
        Op::OmapRmKeys { coll, oid, keys } => {
            let obj = obj_mut(colls, *coll, oid, false, undo, saved, log)?;
            for k in keys {
                obj.omap.remove(k);
            }
        }
        Op::OmapRmRange {
            coll,
            oid,
            start,
            end,
        } => {
            let obj = obj_mut(colls, *coll, oid, false, undo, saved, log)?;
            let doomed: Vec<Vec<u8>> = obj
                .omap
                .range::<[u8], _>((Bound::Included(&start[..]), Bound::Excluded(&end[..])))
                .map(|(k, _)| k.clone())
                .collect();
            for k in doomed {
                obj.omap.remove(&k);
            }
        }
        Op::OmapClear(c, o) => {
            let obj = obj_mut(colls, *c, o, false, undo, saved, log)?;
            obj.omap.clear();
            obj.header.clear();
        }
        Op::OmapSetHeader { coll, oid, header } => {
            obj_mut(colls, *coll, oid, true, undo, saved, log)?.header = header.clone();
        }
        Op::SetRecord { coll, key, value } => {
            let c = colls.get_mut(coll).ok_or(StoreError::NoCollection(*coll))?;
            let prev = c.records.insert(key.clone(), value.clone());
            undo.push(Undo::Rec(*coll, key.clone(), prev));
        }
        Op::RmRecord { coll, key } => {
            let c = colls.get_mut(coll).ok_or(StoreError::NoCollection(*coll))?;
            let prev = c.records.remove(key);
            undo.push(Undo::Rec(*coll, key.clone(), prev));
        }
    }
    Ok(())
}

/// The bytes of `data` in each extent, clipped to its end.
fn slices(data: &[u8], extents: &[(u64, u64)]) -> Vec<Vec<u8>> {
    let size = data.len() as u64;
    extents
        .iter()
        .map(|&(off, len)| {
            let s = off.min(size);
            let e = off.saturating_add(len).min(size);
            data[s as usize..e as usize].to_vec()
        })
        .collect()
}

impl ObjectStore for MemStore {
    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn queue_transaction(&self, t: Transaction) -> Commit {
        Commit::ready(self.apply_txn(&t))
    }

    fn collections(&self) -> Result<Vec<CollectionId>> {
        Ok(self
            .colls
            .read()
            .map_err(|_| StoreError::Closed)?
            .keys()
            .copied()
            .collect())
    }

    fn collection_exists(&self, c: CollectionId) -> Result<bool> {
        Ok(self
            .colls
            .read()
            .map_err(|_| StoreError::Closed)?
            .contains_key(&c))
    }

    fn exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool> {
        let colls = self.colls.read().map_err(|_| StoreError::Closed)?;
        Ok(colls
            .get(&c)
            .ok_or(StoreError::NoCollection(c))?
            .objects
            .contains_key(o))
    }

    fn stat(&self, c: CollectionId, o: &ObjectId) -> Result<ObjectStat> {
        self.with_obj(c, o, |ob| {
            Ok(ObjectStat {
                size: ob.data.len() as u64,
            })
        })
    }

    fn read(&self, c: CollectionId, o: &ObjectId, extents: &[(u64, u64)]) -> Result<Vec<Vec<u8>>> {
        self.with_obj(c, o, |ob| Ok(slices(&ob.data, extents)))
    }

    fn read_with_attrs(
        &self,
        c: CollectionId,
        o: &ObjectId,
        extents: &[(u64, u64)],
    ) -> Result<Option<ObjectRead>> {
        let colls = self.colls.read().map_err(|_| StoreError::Closed)?;
        let coll = colls.get(&c).ok_or(StoreError::NoCollection(c))?;
        let Some(ob) = coll.objects.get(o) else {
            return Ok(None);
        };
        Ok(Some(ObjectRead {
            size: ob.data.len() as u64,
            attrs: ob.attrs.clone(),
            extents: (slices(&ob.data, extents).into_iter())
                .map(bytes::Bytes::from)
                .collect(),
        }))
    }

    fn getattr(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<Vec<u8>> {
        self.with_obj(c, o, |ob| {
            ob.attrs
                .get(name)
                .cloned()
                .ok_or_else(|| StoreError::NoAttr {
                    oid: o.clone(),
                    name: name.to_string(),
                })
        })
    }

    fn getattrs(&self, c: CollectionId, o: &ObjectId) -> Result<BTreeMap<String, Vec<u8>>> {
        self.with_obj(c, o, |ob| Ok(ob.attrs.clone()))
    }

    fn omap_header(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<u8>> {
        self.with_obj(c, o, |ob| Ok(ob.header.clone()))
    }

    fn omap_get(
        &self,
        c: CollectionId,
        o: &ObjectId,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        self.with_obj(c, o, |ob| {
            Ok(keys
                .iter()
                .filter_map(|k| ob.omap.get(k).map(|v| (k.clone(), v.clone())))
                .collect())
        })
    }

    fn omap_range(
        &self,
        c: CollectionId,
        o: &ObjectId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.with_obj(c, o, |ob| {
            let hi = end.map_or(Bound::Unbounded, Bound::Excluded);
            if end.is_some_and(|e| e < start) {
                return Ok(Vec::new());
            }
            Ok(ob
                .omap
                .range::<[u8], _>((Bound::Included(start), hi))
                .take(limit)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect())
        })
    }

    fn list_range(
        &self,
        c: CollectionId,
        hashes: Range<u64>,
        start: Option<&ObjectId>,
        limit: usize,
    ) -> Result<(Vec<ObjectId>, Option<ObjectId>)> {
        let colls = self.colls.read().map_err(|_| StoreError::Closed)?;
        let coll = colls.get(&c).ok_or(StoreError::NoCollection(c))?;
        let Some(from) = crate::store::list_from(&hashes, start) else {
            return Ok((Vec::new(), None));
        };
        let mut it = coll
            .objects
            .range(from..)
            .map(|(k, _)| k)
            .filter(|k| (k.hash as u64) >= hashes.start)
            .take_while(|k| (k.hash as u64) < hashes.end);
        let page: Vec<ObjectId> = it.by_ref().take(limit).cloned().collect();
        let next = it.next().cloned();
        Ok((page, next))
    }

    fn record(&self, c: CollectionId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let colls = self.colls.read().map_err(|_| StoreError::Closed)?;
        Ok(colls
            .get(&c)
            .ok_or(StoreError::NoCollection(c))?
            .records
            .get(key)
            .cloned())
    }

    fn records(
        &self,
        c: CollectionId,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let colls = self.colls.read().map_err(|_| StoreError::Closed)?;
        Ok(colls
            .get(&c)
            .ok_or(StoreError::NoCollection(c))?
            .records
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn statfs(&self) -> Result<StoreStats> {
        let colls = self.colls.read().map_err(|_| StoreError::Closed)?;
        let used = used_bytes(&colls);
        Ok(StoreStats {
            total: self.capacity,
            used,
            free: self.capacity.saturating_sub(used),
            ..StoreStats::default()
        })
    }
}
