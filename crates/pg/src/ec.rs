//! The erasure-coded data path's pure core: a client op on an EC pool's
//! object, run against the object as the shards hold it.
//!
//! An op runs in two steps. [`plan`] checks the op against the object's
//! state and xattrs (kept whole on every shard, so the primary's own
//! shard answers) and names the object bytes it needs: the bytes its
//! reads return and the old bytes a partial write keeps in the stripes it
//! re-encodes. The caller fetches those from the shards (degraded or not;
//! `loligo_ec::stripe` plans that), then [`finish`] computes the read
//! results and one transaction per shard.
//!
//! Each shard holds its chunk of every stripe under the object's own
//! name, with the object's logical size in the `_s` xattr and the user's
//! xattrs. A write that changes an existing object first clones it to a
//! *rollback* object on every shard (the store shares the unchanged
//! extents), and a write that creates one removes any old rollback
//! object: so a write that reached only some shards when its primary
//! died can be undone on those shards, and no stripe ever decodes to a
//! mix of old and new.
//!
//! It must never do I/O beyond reading the primary's own shard (state and
//! xattrs), and never produce a shard transaction that differs between
//! shards except in chunk bytes.

use crate::exec::{
    check_assert, check_reply_bound, fits, need, read_range, store_err, ObjState, XattrsSeen,
    VERSION_ATTR,
};
use bytes::Bytes;
use loligo_ec::stripe::{Rmw, Striper};
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::{OpError, SubOp, SubResult, Version};
use serde_bytes::ByteBuf;
use std::collections::BTreeMap;
use std::ops::Range;

/// The xattr holding an EC object's logical size on every shard.
pub const SIZE_ATTR: &str = "_s";
/// The xattr naming which shard (chunk position) a shard object holds: a
/// copy that moved to another position must never pass off its old
/// shard's bytes as its new one's (scans and shard reads check it).
pub const SHARD_ATTR: &str = "_i";

/// The xattr keeping, on every shard alike, the hash of each shard's
/// data as the object was last written whole (Ceph's `hinfo`): one
/// `u64le` xxh3-64 per shard, in position order. Empty once a partial
/// write changed the data (no hash is known then). A deep scrub checks a
/// shard's data against its hash; shards rebuilt or copied carry it
/// along with the other xattrs.
pub const HASH_ATTR: &str = "_h";

/// The value of [`HASH_ATTR`] for `shards` (each shard's whole data).
pub fn shard_hashes_attr<B: AsRef<[u8]>>(shards: &[B]) -> Vec<u8> {
    let mut v = Vec::with_capacity(shards.len() * 8);
    for b in shards {
        v.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(b.as_ref()).to_le_bytes());
    }
    v
}

/// The hash [`HASH_ATTR`]'s value `v` keeps for `shard` (`None`: none
/// kept, or a value that does not parse).
pub fn shard_hash(v: &[u8], shard: usize) -> Option<u64> {
    let b = v.get(shard * 8..shard * 8 + 8)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// `attrs` with the shard attribute set to `shard`.
pub fn with_shard(mut attrs: Vec<(String, Vec<u8>)>, shard: usize) -> Vec<(String, Vec<u8>)> {
    attrs.retain(|(k, _)| k != SHARD_ATTR);
    attrs.push((SHARD_ATTR.to_string(), vec![shard as u8]));
    attrs
}

/// Whether the shard object `o` holds shard `shard`.
pub fn holds_shard(
    s: &dyn ObjectStore,
    c: CollectionId,
    o: &ObjectId,
    shard: usize,
) -> Result<bool, StoreError> {
    match s.getattr(c, o, SHARD_ATTR) {
        Ok(v) => Ok(v == [shard as u8]),
        Err(StoreError::NoAttr { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The rollback object of `o` on a shard: same hash (so it stays in the
/// PG and next to its object), a name no client can use (NUL).
pub fn rollback_oid(o: &ObjectId) -> ObjectId {
    ObjectId::new(o.hash, format!("{}\0rb", o.name))
}

/// Whether a stored name is the OSD's own (rollback objects): listings,
/// scans and counts skip them.
pub fn is_internal(name: &str) -> bool {
    name.contains('\0')
}

/// An EC object's state from a shard: exists, logical size, version.
pub fn obj_state(s: &dyn ObjectStore, c: CollectionId, o: &ObjectId) -> Result<ObjState, OpError> {
    let attrs = match s.getattrs(c, o) {
        Ok(a) => a,
        Err(StoreError::NoObject { .. }) => return Ok(ObjState::default()),
        Err(e) => return Err(store_err(e)),
    };
    state_of_attrs(&o.name, &attrs)
}

/// A shard object's state from its xattrs (`obj_state`; no version: not
/// there). `name` is the object's, for errors.
pub fn state_of_attrs(name: &str, attrs: &BTreeMap<String, Vec<u8>>) -> Result<ObjState, OpError> {
    let Some(v) = attrs.get(VERSION_ATTR) else {
        return Ok(ObjState::default());
    };
    let corrupt = |what: &str| {
        OpError::Io(format!(
            "object '{name}': corrupt {what} attribute on its shard"
        ))
    };
    let version: Version = postcard::from_bytes(v).map_err(|_| corrupt("version"))?;
    let size: u64 = match attrs.get(SIZE_ATTR) {
        Some(b) => postcard::from_bytes(b).map_err(|_| corrupt("size"))?,
        None => return Err(corrupt("size")),
    };
    Ok(ObjState {
        exists: true,
        size,
        version,
    })
}

/// What an op needs before it can run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Object bytes (of the object as it is) to fetch, sorted, disjoint.
    pub fetch: Vec<Range<u64>>,
    /// Stripes the op re-encodes (none for pure reads and xattr changes).
    pub rmw: Rmw,
    /// Whether the op changes anything.
    pub writes: bool,
    /// Whether the op changes object bytes or size.
    pub data: bool,
    /// Old bytes at or past this offset do not survive the op (truncated
    /// or removed on the way).
    pub keep: u64,
    pub exists_after: bool,
    pub size_after: u64,
}

/// Check `ops` against the object (state `st`, xattrs from the primary's
/// shard) and name the bytes they need. Omap ops are refused: EC shards
/// keep no omap (as in Ceph).
pub fn plan(
    striper: &Striper,
    s: &dyn ObjectStore,
    c: CollectionId,
    o: &ObjectId,
    st: &ObjState,
    ops: &[SubOp],
    size_max: u64,
) -> Result<Plan, OpError> {
    check_reply_bound(ops, if st.exists { st.size } else { 0 })?;
    let fits = |end: u64| fits(end, size_max);
    let (mut exists, mut size) = (st.exists, st.size);
    // Old bytes survive below `keep` unless a write covers them.
    let mut keep = st.size;
    let mut written: Vec<Range<u64>> = Vec::new();
    let mut reads: Vec<Range<u64>> = Vec::new();
    let mut xattrs = XattrsSeen::default();
    let (mut writes, mut data) = (false, false);
    for (i, op) in ops.iter().enumerate() {
        let index = i as u32;
        // A zero past the end changes nothing (as on replicated pools).
        writes |= crate::exec::writes(op) && !matches!(op, SubOp::Zero { .. });
        match op {
            SubOp::AssertExists
            | SubOp::AssertNotExists
            | SubOp::AssertVersion(_)
            | SubOp::CmpXattr { .. } => {
                check_assert(s, c, o, st, op, index)?;
            }
            SubOp::CmpOmap { .. }
            | SubOp::OmapSet(_)
            | SubOp::OmapRm(_)
            | SubOp::OmapClear
            | SubOp::OmapSetHeader(_)
            | SubOp::OmapGetKeys(_)
            | SubOp::OmapList { .. }
            | SubOp::OmapGetHeader => {
                return Err(OpError::NotSupported(
                    "omap on an erasure-coded pool (use a replicated pool for omap data)".into(),
                ))
            }
            SubOp::Exec { .. } => {
                return Err(OpError::NotSupported(
                    "object class methods on an erasure-coded pool (use a replicated pool)".into(),
                ))
            }
            SubOp::Create => exists = true,
            SubOp::WriteFull(d) => {
                fits(d.len() as u64)?;
                keep = 0;
                size = d.len() as u64;
                written.push(0..size);
                exists = true;
                data = true;
            }
            SubOp::Write { offset, data: d } => {
                let end = offset
                    .checked_add(d.len() as u64)
                    .ok_or_else(|| OpError::Invalid("offset overflows".into()))?;
                fits(end)?;
                written.push(*offset..end);
                size = size.max(end);
                exists = true;
                data = true;
            }
            SubOp::Append(d) => {
                let end = size + d.len() as u64;
                fits(end)?;
                written.push(size..end);
                size = end;
                exists = true;
                data = true;
            }
            SubOp::Truncate(n) => {
                fits(*n)?;
                keep = keep.min(*n);
                size = *n;
                exists = true;
                data = true;
            }
            SubOp::Zero { offset, len } => {
                need(exists)?;
                let end = offset.saturating_add(*len).min(size);
                if end > *offset {
                    written.push(*offset..end);
                    data = true;
                    writes = true;
                }
            }
            SubOp::Remove => {
                need(exists)?;
                xattrs.clear();
                exists = false;
                keep = 0;
                size = 0;
                data = true;
            }
            SubOp::SetXattr { name, .. } => {
                xattrs.set(name, true);
                exists = true;
            }
            SubOp::SetAllocHint { .. } => exists = true,
            SubOp::RmXattr(name) => {
                need(exists)?;
                if !xattrs.present(s, c, o, st.exists, name)? {
                    return Err(OpError::NoXattr(name.clone()));
                }
                xattrs.set(name, false);
            }
            SubOp::Read { offset, len } => {
                need(st.exists)?;
                let r = read_range(st.size, *offset, *len);
                fits(r.end - r.start)?;
                reads.push(r);
            }
            SubOp::Stat | SubOp::GetXattr(_) | SubOp::GetXattrs => need(st.exists)?,
        }
    }
    let size_after = if exists { size } else { 0 };
    let old = if st.exists { st.size } else { 0 };
    // Stripes whose old bytes a truncation dropped are re-encoded too
    // (they are zeros now where nothing was written).
    let mut touched = written.clone();
    if keep < old {
        touched.push(keep..size_after.max(keep));
    }
    let rmw = if data && exists {
        striper
            .rmw(old, size_after, &touched)
            .map_err(|e| OpError::Invalid(e.to_string()))?
    } else {
        striper
            .rmw(0, 0, &[])
            .map_err(|e| OpError::Invalid(e.to_string()))?
    };
    // Old bytes a re-encoded stripe keeps: below `keep`, not overwritten.
    let mut fetch = reads;
    for run in &rmw.runs {
        let r = run.read.start..run.read.end.min(keep);
        fetch.extend(subtract(r, &written));
    }
    Ok(Plan {
        fetch: merge(fetch),
        rmw,
        writes,
        data,
        keep,
        exists_after: exists,
        size_after,
    })
}

/// What an op does on an EC pool: one transaction per shard (index =
/// shard), the results, and how the object changes.
pub struct Outcome {
    pub shards: Vec<Transaction>,
    pub results: Vec<SubResult>,
    pub exists_after: bool,
    pub size_after: u64,
    pub bytes_delta: i64,
}

/// Old object bytes fetched for a [`Plan`]: each range of `plan.fetch`
/// by its start.
pub type OldBytes = BTreeMap<u64, Vec<u8>>;

/// Run `ops` with the bytes `plan` asked for. The shard transactions do
/// not set the version (`_v`): the PG adds it with its records.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    striper: &Striper,
    s: &dyn ObjectStore,
    c: CollectionId,
    o: &ObjectId,
    st: &ObjState,
    ops: &[SubOp],
    plan: &Plan,
    mut old: OldBytes,
) -> Result<Outcome, OpError> {
    let results = read_results(s, c, o, st, ops, plan, &mut old)?;
    let n = striper.shards();
    let mut shards: Vec<Transaction> = vec![Transaction::new(); n];
    if !plan.writes {
        return Ok(Outcome {
            shards,
            results,
            exists_after: st.exists,
            size_after: st.size,
            bytes_delta: 0,
        });
    }
    // Keep what the object was, so a write that reaches only some
    // shards can be rolled back there.
    let rb = rollback_oid(o);
    for t in &mut shards {
        if st.exists {
            t.clone_object(c, o, &rb);
        } else {
            t.touch(c, &rb).remove(c, &rb);
        }
    }
    if !plan.exists_after {
        for t in &mut shards {
            if st.exists {
                t.remove(c, o);
            }
        }
        return Ok(Outcome {
            shards,
            results,
            exists_after: false,
            size_after: 0,
            bytes_delta: -(st.size as i64),
        });
    }
    let removed = st.exists && ops.iter().any(|op| matches!(op, SubOp::Remove));
    if removed {
        // Removed and made again in one op: nothing of the old object
        // (data or xattrs) survives.
        for t in &mut shards {
            t.remove(c, o);
        }
    }
    set_hint(striper, c, o, ops, &mut shards);
    let hashes = encode_runs(striper, c, o, st, ops, plan, &old, &mut shards)?;
    let recreated = (!st.exists || removed) && hashes.is_none();
    set_shard_attrs(striper, c, o, ops, plan, recreated, &mut shards)?;
    if plan.data {
        // (Emptied, not removed: removing a missing xattr fails.)
        let value = hashes.unwrap_or_default();
        for t in &mut shards {
            t.setattrs(c, o, vec![(HASH_ATTR.to_string(), value.clone())]);
        }
    }
    Ok(Outcome {
        shards,
        results,
        exists_after: true,
        size_after: plan.size_after,
        bytes_delta: plan.size_after as i64 - if st.exists { st.size as i64 } else { 0 },
    })
}

/// The op's results, from the object as it was (`old`: its bytes the plan
/// fetched). A lone read in an op that writes nothing takes its decoded
/// bytes as they are (megabytes not copied again).
fn read_results(
    s: &dyn ObjectStore,
    c: CollectionId,
    o: &ObjectId,
    st: &ObjState,
    ops: &[SubOp],
    plan: &Plan,
    old: &mut OldBytes,
) -> Result<Vec<SubResult>, OpError> {
    let mut reads = ops.iter().filter_map(|op| match op {
        SubOp::Read { offset, len } => Some(read_range(st.size, *offset, *len)),
        _ => None,
    });
    let mut moved = None;
    if let (false, Some(r), None) = (plan.writes, reads.next(), reads.next()) {
        if old
            .get(&r.start)
            .is_some_and(|b| b.len() as u64 == r.end - r.start)
        {
            moved = old.remove(&r.start);
        }
    }
    let old = &*old;
    let get = |r: Range<u64>| -> Result<&[u8], OpError> {
        lookup(old, r.clone()).ok_or_else(|| {
            OpError::Io(format!(
                "object '{}': bytes {}..{} were not fetched",
                o.name, r.start, r.end
            ))
        })
    };
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        results.push(match op {
            SubOp::Read { offset, len } => match moved.take() {
                Some(b) => SubResult::Data(b.into()),
                None => SubResult::Data(get(read_range(st.size, *offset, *len))?.to_vec().into()),
            },
            SubOp::Stat => SubResult::Stat {
                size: st.size,
                version: st.version,
            },
            SubOp::GetXattr(name) => {
                SubResult::Data(s.getattr(c, o, name).map_err(store_err)?.into())
            }
            SubOp::GetXattrs => SubResult::Xattrs(
                s.getattrs(c, o)
                    .map_err(store_err)?
                    .into_iter()
                    .filter(|(k, _)| !k.starts_with('_'))
                    .map(|(k, v)| (k, ByteBuf::from(v)))
                    .collect(),
            ),
            _ => SubResult::None,
        });
    }
    Ok(results)
}

/// Encode every re-encoded stripe run's new bytes (old bytes kept, then
/// the op's data changes replayed in order, clipped to the run) into the
/// shard transactions. When a run rewrote each shard whole, the
/// [`HASH_ATTR`] value of what it wrote.
#[allow(clippy::too_many_arguments)]
fn encode_runs(
    striper: &Striper,
    c: CollectionId,
    o: &ObjectId,
    st: &ObjState,
    ops: &[SubOp],
    plan: &Plan,
    old: &OldBytes,
    shards: &mut [Transaction],
) -> Result<Option<Vec<u8>>, OpError> {
    let err = |e: loligo_ec::error::EcError| OpError::Io(e.to_string());
    // An op whose only data change is one full write encodes the client's
    // bytes as they are, without assembling a copy of them first.
    let mut data_ops = ops.iter().filter(|op| {
        matches!(
            op,
            SubOp::WriteFull(_)
                | SubOp::Write { .. }
                | SubOp::Append(_)
                | SubOp::Truncate(_)
                | SubOp::Zero { .. }
                | SubOp::Remove
        )
    });
    let whole_write = match (data_ops.next(), data_ops.next()) {
        (Some(SubOp::WriteFull(d)), None) => Some(d),
        _ => None,
    };
    let mut hashes = None;
    for run in &plan.rmw.runs {
        let whole_run =
            |d: &&Bytes| run.bytes == (0..d.len() as u64) && plan.size_after == d.len() as u64;
        let fresh: std::borrow::Cow<[u8]> = match whole_write.filter(whole_run) {
            Some(d) => std::borrow::Cow::Borrowed(d),
            None => std::borrow::Cow::Owned(replay(old, run, plan.keep, st.size, ops)),
        };
        let enc = striper
            .encode_range(plan.size_after, run.stripes.start, &fresh)
            .map_err(err)?;
        let whole = run.stripes.start == 0 && run.bytes.end == plan.size_after;
        if whole {
            hashes = Some(shard_hashes_attr(&enc));
        }
        for (i, bytes) in enc.into_iter().enumerate() {
            if whole {
                shards[i].write_full(c, o, bytes);
            } else if !bytes.is_empty() {
                shards[i].write(c, o, run.stripes.start * striper.unit(), bytes);
            }
        }
    }
    Ok(hashes)
}

/// Where the sub-ops whose xattrs the object keeps start: after the
/// op's last removal, whether that removed the object as it was or what
/// the op made of it first (as a replica applies them in order).
fn after_removal(ops: &[SubOp]) -> usize {
    (ops.iter().rposition(|op| matches!(op, SubOp::Remove))).map_or(0, |i| i + 1)
}

/// The op's last allocation hint (after its last removal, if any), set
/// on every shard ahead of the data so that the stores write the data by
/// it, even data an earlier sub-op of the op wrote (a replica applies a
/// hint from its place in the op: what is kept is the same, the advice
/// may differ for that op's data). Each shard holds a k-th of the
/// object: the sizes are divided by k (Ceph scales them to the chunk
/// too).
fn set_hint(
    striper: &Striper,
    c: CollectionId,
    o: &ObjectId,
    ops: &[SubOp],
    shards: &mut [Transaction],
) {
    let from = after_removal(ops);
    let k = striper.k() as u64;
    let Some(hint) = ops[from..]
        .iter()
        .rev()
        .find_map(|op| crate::exec::store_hint(op, k))
    else {
        return;
    };
    for t in shards {
        t.setattrs(
            c,
            o,
            vec![(loligo_store::ALLOC_HINT_ATTR.to_string(), hint.encode())],
        );
    }
}

/// Each shard's size, the user's xattr changes in order (with a removal
/// in the op only those after it count: the shard object was removed),
/// and the shard's own attributes (object size, shard number).
fn set_shard_attrs(
    striper: &Striper,
    c: CollectionId,
    o: &ObjectId,
    ops: &[SubOp],
    plan: &Plan,
    recreated: bool,
    shards: &mut [Transaction],
) -> Result<(), OpError> {
    let size_attr =
        postcard::to_stdvec(&plan.size_after).map_err(|e| OpError::Io(e.to_string()))?;
    let from = after_removal(ops);
    for (i, t) in shards.iter_mut().enumerate() {
        if recreated {
            t.touch(c, o);
        }
        if plan.data {
            let len = striper
                .shard_len(plan.size_after, i)
                .map_err(|e| OpError::Io(e.to_string()))?;
            t.truncate(c, o, len);
        }
        let mut attrs: Vec<(String, Vec<u8>)> = Vec::new();
        for op in &ops[from..] {
            match op {
                SubOp::SetXattr { name, value } => attrs.push((name.clone(), value.clone())),
                SubOp::RmXattr(name) => {
                    flush(t, c, o, &mut attrs);
                    t.rmattr(c, o, name);
                }
                _ => {}
            }
        }
        attrs.push((SIZE_ATTR.to_string(), size_attr.clone()));
        attrs.push((SHARD_ATTR.to_string(), vec![i as u8]));
        flush(t, c, o, &mut attrs);
    }
    Ok(())
}

/// Set the xattrs gathered so far.
fn flush(t: &mut Transaction, c: CollectionId, o: &ObjectId, attrs: &mut Vec<(String, Vec<u8>)>) {
    if !attrs.is_empty() {
        t.setattrs(c, o, std::mem::take(attrs));
    }
}

/// The new bytes of stripe run `run`: the old bytes kept (up to `keep`),
/// then the op's data changes replayed in order, clipped to the run.
fn replay(
    old: &OldBytes,
    run: &loligo_ec::stripe::StripeRun,
    keep: u64,
    size: u64,
    ops: &[SubOp],
) -> Vec<u8> {
    let base = run.bytes.start;
    let mut fresh = vec![0u8; (run.bytes.end - base) as usize];
    for (at, bytes) in pieces(old, run.read.start..run.read.end.min(keep)) {
        let s0 = (at - base) as usize;
        fresh[s0..s0 + bytes.len()].copy_from_slice(bytes);
    }
    let mut size = size;
    for op in ops {
        match op {
            SubOp::WriteFull(d) => {
                fresh.fill(0);
                put(&mut fresh, base, 0, d);
                size = d.len() as u64;
            }
            SubOp::Write { offset, data } => {
                put(&mut fresh, base, *offset, data);
                size = size.max(offset + data.len() as u64);
            }
            SubOp::Append(d) => {
                put(&mut fresh, base, size, d);
                size += d.len() as u64;
            }
            SubOp::Truncate(n) => {
                clear(&mut fresh, base, *n..u64::MAX);
                size = *n;
            }
            SubOp::Zero { offset, len } => {
                clear(
                    &mut fresh,
                    base,
                    *offset..offset.saturating_add(*len).min(size),
                );
            }
            SubOp::Remove => {
                fresh.fill(0);
                size = 0;
            }
            _ => {}
        }
    }
    fresh
}

/// Copy `data`, written at object offset `at`, into `buf` (object bytes
/// from `base`), clipped.
fn put(buf: &mut [u8], base: u64, at: u64, data: &[u8]) {
    let end = at + data.len() as u64;
    let (s, e) = (at.max(base), end.min(base + buf.len() as u64));
    if s < e {
        buf[(s - base) as usize..(e - base) as usize]
            .copy_from_slice(&data[(s - at) as usize..(e - at) as usize]);
    }
}

/// `r` minus the union of `cut`.
fn subtract(r: Range<u64>, cut: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut out = vec![r];
    for c in cut {
        out = out
            .into_iter()
            .flat_map(|x| {
                let mut v = Vec::new();
                if c.end <= x.start || c.start >= x.end || c.start >= c.end {
                    v.push(x);
                } else {
                    if x.start < c.start {
                        v.push(x.start..c.start);
                    }
                    if c.end < x.end {
                        v.push(c.end..x.end);
                    }
                }
                v
            })
            .collect();
    }
    out.retain(|x| x.start < x.end);
    out
}

/// Sorted, disjoint, touching ranges joined.
fn merge(mut v: Vec<Range<u64>>) -> Vec<Range<u64>> {
    v.retain(|r| r.start < r.end);
    v.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(l) if r.start <= l.end => l.end = l.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The bytes `r` if one fetched range holds them (empty ranges always).
fn lookup(old: &OldBytes, r: Range<u64>) -> Option<&[u8]> {
    if r.start >= r.end {
        return Some(&[]);
    }
    let (&at, b) = old.range(..=r.start).next_back()?;
    b.get((r.start - at) as usize..(r.end - at) as usize)
}

/// The fetched pieces that fall inside `r`, with their object offsets.
fn pieces(old: &OldBytes, r: Range<u64>) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    for (&at, b) in old {
        let end = at + b.len() as u64;
        let (s, e) = (at.max(r.start), end.min(r.end));
        if s < e {
            out.push((s, &b[(s - at) as usize..(e - at) as usize]));
        }
    }
    out
}

/// Zero object bytes `r` within `buf` (object bytes from `base`).
fn clear(buf: &mut [u8], base: u64, r: Range<u64>) {
    let len = buf.len() as u64;
    let (s, e) = (
        r.start.saturating_sub(base).min(len),
        r.end.saturating_sub(base).min(len),
    );
    if s < e {
        buf[s as usize..e as usize].fill(0);
    }
}
