//! One client op against one object: asserts checked, reads answered from
//! the object as it was before the op, writes turned into store ops. Pure
//! but for reads of the store.
//!
//! It must never apply anything: the PG decides the version and commits
//! the transaction it returns everywhere at once.

use crate::cls;
pub use crate::opstate::{need, store_err, user_xattr, ObjState};
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::{
    alloc_hint, OpError, SubOp, SubResult, Version, CLASS_NAME_MAX, NAME_LEN_MAX, SUBOPS_MAX,
};
use serde_bytes::ByteBuf;

/// The xattr holding an object's version (names starting with `_` are
/// the OSD's own).
pub const VERSION_ATTR: &str = "_v";
/// Largest omap listing per sub-op.
pub const OMAP_LIST_MAX: u32 = 10_000;
/// Omap entries an omap listing reads from the store at a time, so that
/// a listing is refused at the reply limit having read at most this many
/// entries past it (with the store's largest values and keys, 16 MiB and
/// 4 KiB, about 256 MiB).
const OMAP_PAGE_ENTRIES: usize = 16;
/// Most bytes of results one op may gather (data, xattrs, omap, object
/// class output): what one reply carries (the transport's 256 MiB message
/// limit, which the daemon checks this against), less room for its
/// framing.
pub const REPLY_BYTES_MAX: u64 = (256 << 20) - (1 << 20);

/// The object bytes `[offset, offset + len)` of an object of `size` bytes
/// (`len` 0: to the end), cut at its end.
pub fn read_range(size: u64, offset: u64, len: u64) -> std::ops::Range<u64> {
    let start = offset.min(size);
    let end = if len == 0 {
        size
    } else {
        offset.saturating_add(len).min(size)
    };
    start..end.max(start)
}

/// The most bytes the data reads and object class calls of `ops` return
/// from an object of `size` bytes as it was before the op: known before
/// anything is read.
pub fn reply_bound(ops: &[SubOp], size: u64) -> u64 {
    ops.iter()
        .map(|op| match op {
            SubOp::Read { offset, len } => {
                let r = read_range(size, *offset, *len);
                r.end - r.start
            }
            SubOp::Exec { .. } => cls::OUTPUT_MAX as u64,
            _ => 0,
        })
        .fold(0u64, u64::saturating_add)
}

/// `Invalid` if the data reads and object class calls of `ops` may return
/// more than one reply carries (see [`reply_bound`]): refused before
/// anything is read, so no op makes an OSD gather more than that.
pub fn check_reply_bound(ops: &[SubOp], size: u64) -> Result<(), OpError> {
    let bound = reply_bound(ops, size);
    if bound > REPLY_BYTES_MAX {
        return Err(OpError::Invalid(format!(
            "this op's reads may return {bound} bytes, more than one reply carries \
             ({REPLY_BYTES_MAX}): split them across ops"
        )));
    }
    Ok(())
}

/// The bytes of results an op has gathered so far, refused past
/// [`REPLY_BYTES_MAX`] (xattrs and omap, whose size no op states, are
/// counted as they come).
#[derive(Default)]
struct ReplyBudget(u64);

impl ReplyBudget {
    fn take(&mut self, bytes: u64) -> Result<(), OpError> {
        self.0 = self.0.saturating_add(bytes);
        if self.0 > REPLY_BYTES_MAX {
            return Err(OpError::Invalid(format!(
                "this op's results pass {REPLY_BYTES_MAX} bytes, more than one reply \
                 carries: ask for fewer keys or xattrs per op"
            )));
        }
        Ok(())
    }
}

/// Bytes a result carries (what the reply budget counts).
fn result_bytes(r: &SubResult) -> u64 {
    let pairs = |kv: &mut dyn Iterator<Item = (usize, usize)>| {
        kv.map(|(k, v)| (k + v) as u64)
            .fold(0u64, u64::saturating_add)
    };
    match r {
        SubResult::Data(d) => d.len() as u64,
        SubResult::Xattrs(x) => pairs(&mut x.iter().map(|(k, v)| (k.len(), v.len()))),
        SubResult::Omap(m) => pairs(&mut m.iter().map(|(k, v)| (k.len(), v.len()))),
        _ => 0,
    }
}

/// An omap key and its value.
type OmapEntry = (Vec<u8>, Vec<u8>);

/// Up to `limit` omap entries from `start` (inclusive, as the store's
/// `omap_range`), read a page at a time and counted against `budget` as
/// they come.
fn omap_list(
    s: &dyn ObjectStore,
    c: CollectionId,
    o: &ObjectId,
    start: &[u8],
    limit: usize,
    budget: &mut ReplyBudget,
) -> Result<Vec<OmapEntry>, OpError> {
    let mut got: Vec<OmapEntry> = Vec::new();
    let mut from = start.to_vec();
    while got.len() < limit {
        let want = (limit - got.len()).min(OMAP_PAGE_ENTRIES);
        let page = s.omap_range(c, o, &from, None, want).map_err(store_err)?;
        let last = page.len() < want;
        for (k, v) in page {
            budget.take((k.len() + v.len()) as u64)?;
            // The next page starts right after this key.
            from.clone_from(&k);
            from.push(0);
            got.push((k, v));
        }
        if last {
            break;
        }
    }
    Ok(got)
}

/// Read an object's size and version.
pub fn obj_state(s: &dyn ObjectStore, c: CollectionId, o: &ObjectId) -> Result<ObjState, OpError> {
    let Some((st, v)) = s.stat_attr(c, o, VERSION_ATTR).map_err(store_err)? else {
        return Ok(ObjState::default());
    };
    // No version attribute: an object no op of ours wrote (version 0). A
    // damaged one is an error, never a default: ops on the object fail
    // (EIO) rather than order its writes by a made-up version.
    let version = match v {
        None => Version::default(),
        Some(b) => postcard::from_bytes(&b)
            .map_err(|_| OpError::Io(format!("object '{}': corrupt version attribute", o.name)))?,
    };
    Ok(ObjState {
        exists: true,
        size: st.size,
        version,
    })
}

/// The store's form of a [`SubOp::SetAllocHint`] (`None` for other
/// sub-ops), for a store that keeps one of `k` equal parts of the object
/// (an EC shard: the sizes are divided by `k`, rounded up; 1 for a
/// replica).
pub fn store_hint(op: &SubOp, k: u64) -> Option<loligo_store::AllocHint> {
    let SubOp::SetAllocHint {
        expected_object_size,
        expected_write_size,
        flags,
    } = op
    else {
        return None;
    };
    let k = k.max(1);
    Some(loligo_store::AllocHint {
        expected_object_size: expected_object_size.div_ceil(k),
        expected_write_size: expected_write_size.div_ceil(k),
        flags: *flags,
    })
}

/// Check an op's shape before touching anything.
pub fn validate(name: &str, ops: &[SubOp]) -> Result<(), OpError> {
    if name.is_empty() || name.len() > NAME_LEN_MAX || name.contains('\0') {
        return Err(OpError::Invalid(format!(
            "object names are 1-{NAME_LEN_MAX} bytes without NUL"
        )));
    }
    if ops.is_empty() || ops.len() > SUBOPS_MAX {
        return Err(OpError::Invalid(format!(
            "an op has 1-{SUBOPS_MAX} sub-ops"
        )));
    }
    for op in ops {
        if let SubOp::Exec { class, method, .. } = op {
            let ok = |n: &str| {
                !n.is_empty()
                    && n.len() <= CLASS_NAME_MAX
                    && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            };
            if !ok(class) || !ok(method) {
                return Err(OpError::Invalid(format!(
                    "object class and method names are 1-{CLASS_NAME_MAX} letters, digits or '_'"
                )));
            }
        }
        if let SubOp::SetXattr { name, .. } | SubOp::RmXattr(name) = op {
            user_xattr(name)?;
        }
        if let SubOp::SetAllocHint { flags, .. } = op {
            if flags & !alloc_hint::ALL != 0 {
                return Err(OpError::Invalid(format!(
                    "allocation hint flags {flags:#x} include undefined bits (defined: {:#x})",
                    alloc_hint::ALL
                )));
            }
        }
    }
    Ok(())
}

/// Which xattrs an op has set or removed so far (so a removal knows
/// whether the name exists without the store seeing the op's own steps).
#[derive(Default)]
pub struct XattrsSeen {
    names: std::collections::BTreeMap<String, bool>,
    /// The object was removed earlier in the op: stored xattrs are gone.
    cleared: bool,
}

impl XattrsSeen {
    /// Whether xattr `name` exists at this step of the op.
    pub fn present(
        &self,
        s: &dyn ObjectStore,
        c: CollectionId,
        o: &ObjectId,
        existed: bool,
        name: &str,
    ) -> Result<bool, OpError> {
        if let Some(&p) = self.names.get(name) {
            return Ok(p);
        }
        if self.cleared || !existed {
            return Ok(false);
        }
        match s.getattr(c, o, name) {
            Ok(_) => Ok(true),
            Err(StoreError::NoAttr { .. }) => Ok(false),
            Err(e) => Err(store_err(e)),
        }
    }
    /// Record a set (`true`) or removal.
    pub fn set(&mut self, name: &str, present: bool) {
        self.names.insert(name.to_string(), present);
    }
    /// Record the object's removal.
    pub fn clear(&mut self) {
        self.names.clear();
        self.cleared = true;
    }
}

/// Whether sub-op `op` changes the object: [`SubOp::is_write`], or an
/// `Exec` of a method that writes.
pub fn writes(op: &SubOp) -> bool {
    match op {
        SubOp::Exec { class, method, .. } => cls::lookup(class, method).is_some_and(|m| m.writes),
        op => op.is_write(),
    }
}

/// Whether sub-op `op` can take more space: [`SubOp::takes_space`], or an
/// `Exec` of a method that writes.
pub fn takes_space(op: &SubOp) -> bool {
    writes(op) && (op.takes_space() || matches!(op, SubOp::Exec { .. }))
}

/// `TooLarge` if an object would end past the pool's limit.
pub fn fits(end: u64, size_max: u64) -> Result<(), OpError> {
    if end > size_max {
        Err(OpError::TooLarge {
            size: end,
            max: size_max,
        })
    } else {
        Ok(())
    }
}

/// Check sub-op `op` (at `index`) if it is one of the object-level
/// asserts replicated and erasure-coded pools share (exists, not exists,
/// version, xattr compare) against the object's state before the op.
/// `Ok(false)`: not such an assert.
pub fn check_assert(
    s: &dyn ObjectStore,
    c: CollectionId,
    o: &ObjectId,
    st: &ObjState,
    op: &SubOp,
    index: u32,
) -> Result<bool, OpError> {
    match op {
        SubOp::AssertExists if !st.exists => Err(OpError::NotFound),
        SubOp::AssertNotExists if st.exists => Err(OpError::Exists),
        SubOp::AssertVersion(v) if !st.exists || st.version != *v => {
            Err(OpError::AssertFailed { index })
        }
        SubOp::AssertExists | SubOp::AssertNotExists | SubOp::AssertVersion(_) => Ok(true),
        SubOp::CmpXattr { name, cmp, value } => {
            if !st.exists {
                return Err(OpError::NotFound);
            }
            let actual = match s.getattr(c, o, name) {
                Ok(v) => v,
                Err(StoreError::NoAttr { .. }) => Vec::new(),
                Err(e) => return Err(store_err(e)),
            };
            if cmp.holds(&actual, value) {
                Ok(true)
            } else {
                Err(OpError::AssertFailed { index })
            }
        }
        _ => Ok(false),
    }
}

/// What an op does: store ops (empty for a pure read), results, and
/// whether the object exists afterwards.
pub struct Outcome {
    pub txn: Transaction,
    pub results: Vec<SubResult>,
    pub exists_after: bool,
    pub size_after: u64,
    /// Bytes the object gained (negative: lost).
    pub bytes_delta: i64,
}

/// Run `ops` against object `o` in `c` (state `st`), with the pool's
/// object size limit.
pub fn execute(
    s: &dyn ObjectStore,
    c: CollectionId,
    o: &ObjectId,
    st: &ObjState,
    ops: &[SubOp],
    size_max: u64,
) -> Result<Outcome, OpError> {
    check_reply_bound(ops, if st.exists { st.size } else { 0 })?;
    let mut budget = ReplyBudget::default();
    let mut results = Vec::with_capacity(ops.len());
    let mut run = Running {
        s,
        c,
        o,
        st,
        size_max,
        t: Transaction::new(),
        exists: st.exists,
        size: st.size,
        xattrs: XattrsSeen::default(),
    };
    for (i, op) in ops.iter().enumerate() {
        let index = i as u32;
        let r = match op {
            SubOp::AssertExists
            | SubOp::AssertNotExists
            | SubOp::AssertVersion(_)
            | SubOp::CmpXattr { .. } => {
                check_assert(s, c, o, st, op, index)?;
                SubResult::None
            }
            SubOp::CmpOmap { key, cmp, value } => {
                need(st.exists)?;
                let got = s
                    .omap_get(c, o, std::slice::from_ref(key))
                    .map_err(store_err)?;
                let actual = got.get(key).cloned().unwrap_or_default();
                if !cmp.holds(&actual, value) {
                    return Err(OpError::AssertFailed { index });
                }
                SubResult::None
            }
            SubOp::Exec {
                class,
                method,
                input,
            } => run.exec(class, method, input, index)?,
            op if op.is_write() => {
                run.write(op)?;
                SubResult::None
            }
            op => run.read(op, &mut budget)?,
        };
        if !matches!(op, SubOp::OmapList { .. }) {
            // (A listing counted its entries as it read them.)
            budget.take(result_bytes(&r))?;
        }
        results.push(r);
    }
    Ok(Outcome {
        txn: run.t,
        results,
        exists_after: run.exists,
        size_after: run.size,
        bytes_delta: run.size as i64 - st.size as i64,
    })
}

/// An op list under way: the transaction so far and the object as it
/// leaves it.
struct Running<'a> {
    s: &'a dyn ObjectStore,
    c: CollectionId,
    o: &'a ObjectId,
    /// The object before the op list.
    st: &'a ObjState,
    size_max: u64,
    t: Transaction,
    exists: bool,
    size: u64,
    xattrs: XattrsSeen,
}

impl Running<'_> {
    /// A sub-op that changes the object ([`SubOp::is_write`]), added to
    /// the transaction.
    fn write(&mut self, op: &SubOp) -> Result<(), OpError> {
        let (c, o) = (self.c, self.o);
        let size_max = self.size_max;
        let fits = |end: u64| fits(end, size_max);
        let t = &mut self.t;
        match op {
            SubOp::Create => {
                t.touch(c, o);
                self.exists = true;
            }
            SubOp::WriteFull(d) => {
                fits(d.len() as u64)?;
                t.write_full(c, o, d.clone());
                self.exists = true;
                self.size = d.len() as u64;
            }
            SubOp::Write { offset, data } => {
                let end = offset
                    .checked_add(data.len() as u64)
                    .ok_or_else(|| OpError::Invalid("offset overflows".into()))?;
                fits(end)?;
                t.write(c, o, *offset, data.clone());
                self.exists = true;
                self.size = self.size.max(end);
            }
            SubOp::Append(d) => {
                let end = self.size + d.len() as u64;
                fits(end)?;
                t.write(c, o, self.size, d.clone());
                self.exists = true;
                self.size = end;
            }
            SubOp::Truncate(n) => {
                fits(*n)?;
                t.truncate(c, o, *n);
                self.exists = true;
                self.size = *n;
            }
            SubOp::Zero { offset, len } => {
                need(self.exists)?;
                let end = offset.saturating_add(*len).min(self.size);
                if end > *offset {
                    t.zero(c, o, *offset, end - offset);
                }
            }
            SubOp::Remove => {
                need(self.exists)?;
                t.remove(c, o);
                self.xattrs.clear();
                self.exists = false;
                self.size = 0;
            }
            SubOp::SetXattr { name, value } => {
                t.setattr(c, o, name, value.clone());
                self.xattrs.set(name, true);
                self.exists = true;
            }
            SubOp::RmXattr(name) => {
                need(self.exists)?;
                // A missing xattr is the client's error, not a failed
                // transaction (which would stop the OSD).
                if !self.xattrs.present(self.s, c, o, self.st.exists, name)? {
                    return Err(OpError::NoXattr(name.clone()));
                }
                self.xattrs.set(name, false);
                t.rmattr(c, o, name);
            }
            SubOp::OmapSet(kvs) => {
                t.omap_setkeys(
                    c,
                    o,
                    kvs.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
                );
                self.exists = true;
            }
            SubOp::OmapRm(keys) => {
                need(self.exists)?;
                t.omap_rmkeys(c, o, keys.iter().map(|k| k.to_vec()).collect());
            }
            SubOp::OmapClear => {
                need(self.exists)?;
                t.omap_clear(c, o);
            }
            SubOp::OmapSetHeader(h) => {
                t.omap_setheader(c, o, h.clone());
                self.exists = true;
            }
            SubOp::SetAllocHint { .. } => {
                let hint = store_hint(op, 1).unwrap_or_default();
                t.setattr(c, o, loligo_store::ALLOC_HINT_ATTR, hint.encode());
                self.exists = true;
            }
            other => {
                debug_assert!(
                    !other.is_write(),
                    "a write sub-op left unhandled: {other:?}"
                );
                return Err(OpError::Invalid(format!("{other:?} is not a write")));
            }
        }
        Ok(())
    }

    /// A sub-op that reads the object as it was before the op list.
    fn read(&self, op: &SubOp, budget: &mut ReplyBudget) -> Result<SubResult, OpError> {
        let (s, c, o, st) = (self.s, self.c, self.o, self.st);
        need(st.exists)?;
        let omap = |got: std::collections::BTreeMap<Vec<u8>, Vec<u8>>| {
            SubResult::Omap(
                got.into_iter()
                    .map(|(k, v)| (ByteBuf::from(k), ByteBuf::from(v)))
                    .collect(),
            )
        };
        Ok(match op {
            SubOp::Read { offset, len } => {
                let range = read_range(st.size, *offset, *len);
                let len = range.end - range.start;
                fits(len, self.size_max)?;
                SubResult::Data(s.read_bytes(c, o, range.start, len).map_err(store_err)?)
            }
            SubOp::Stat => SubResult::Stat {
                size: st.size,
                version: st.version,
            },
            SubOp::GetXattr(name) => {
                SubResult::Data(s.getattr(c, o, name).map_err(store_err)?.into())
            }
            SubOp::GetXattrs => {
                let all = s.getattrs(c, o).map_err(store_err)?;
                SubResult::Xattrs(
                    all.into_iter()
                        .filter(|(k, _)| !k.starts_with('_'))
                        .map(|(k, v)| (k, ByteBuf::from(v)))
                        .collect(),
                )
            }
            SubOp::OmapGetKeys(keys) => {
                let ks: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
                omap(s.omap_get(c, o, &ks).map_err(store_err)?)
            }
            SubOp::OmapList { start, limit } => {
                let lim = (*limit).clamp(1, OMAP_LIST_MAX) as usize;
                let got = omap_list(s, c, o, start, lim, budget)?;
                SubResult::Omap(
                    got.into_iter()
                        .map(|(k, v)| (ByteBuf::from(k), ByteBuf::from(v)))
                        .collect(),
                )
            }
            SubOp::OmapGetHeader => SubResult::Data(s.omap_header(c, o).map_err(store_err)?.into()),
            other => {
                debug_assert!(false, "a sub-op neither read nor write: {other:?}");
                return Err(OpError::Invalid(format!("{other:?} is not a read")));
            }
        })
    }

    /// An object class method: its own reads, and its writes added to the
    /// transaction.
    fn exec(
        &mut self,
        class: &str,
        method: &str,
        input: &[u8],
        index: u32,
    ) -> Result<SubResult, OpError> {
        let m = cls::lookup(class, method)
            .ok_or_else(|| OpError::NoMethod(format!("{class}.{method}")))?;
        let mut cx = cls::Ctx::new(self.s, self.c, self.o, self.st, self.exists, m.writes);
        let out = cls::call(m, &mut cx, input).map_err(|e| match e {
            cls::ClsError::Refused { code, message } => OpError::MethodRefused {
                index,
                code,
                message,
            },
            cls::ClsError::Op(e) => e,
        })?;
        self.exists = cx.exists;
        self.t.ops.extend(cx.txn.ops);
        Ok(SubResult::Data(out.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_store::{MemStore, Transaction};

    #[test]
    fn a_damaged_version_attribute_is_an_error_not_version_zero() {
        let s = MemStore::new();
        let c = CollectionId::pg(1, 0);
        let (good, bad, bare) = (
            ObjectId::new(1, "good"),
            ObjectId::new(1, "bad"),
            ObjectId::new(1, "bare"),
        );
        let v = Version { epoch: 3, v: 9 };
        let mut t = Transaction::new();
        t.create_collection(c);
        t.write(c, &good, 0, b"x".to_vec());
        t.setattr(c, &good, VERSION_ATTR, postcard::to_stdvec(&v).unwrap());
        t.write(c, &bad, 0, b"x".to_vec());
        t.setattr(c, &bad, VERSION_ATTR, vec![0xff; 12]);
        t.write(c, &bare, 0, b"x".to_vec());
        s.apply(t).unwrap();
        assert_eq!(obj_state(&s, c, &good).unwrap().version, v);
        let e = obj_state(&s, c, &bad).unwrap_err();
        assert!(
            matches!(&e, OpError::Io(m) if m.contains("corrupt version")),
            "{e:?}"
        );
        let st = obj_state(&s, c, &bare).unwrap();
        assert!(st.exists && st.version == Version::default());
        let none = obj_state(&s, c, &ObjectId::new(1, "none")).unwrap();
        assert!(!none.exists);
    }

    /// A store with object `o` of `size` bytes whose omap holds `entries`
    /// (key, value of `value_len` bytes).
    fn one_object(
        size: usize,
        entries: usize,
        value_len: usize,
    ) -> (MemStore, CollectionId, ObjectId) {
        let s = MemStore::new();
        let c = CollectionId::pg(1, 0);
        let o = ObjectId::new(1, "o");
        let mut t = Transaction::new();
        t.create_collection(c);
        t.write(c, &o, 0, vec![7u8; size]);
        let kvs = (0..entries)
            .map(|i| (format!("k{i:05}").into_bytes(), vec![i as u8; value_len]))
            .collect();
        t.omap_setkeys(c, &o, kvs);
        s.apply(t).unwrap();
        (s, c, o)
    }

    #[test]
    fn an_op_whose_reads_pass_one_reply_is_refused_before_reading() {
        let mib = 1u64 << 20;
        let read_all = SubOp::Read { offset: 0, len: 0 };
        // The bound is what the reads return from the object as it is.
        assert_eq!(
            reply_bound(std::slice::from_ref(&read_all), 2 * mib),
            2 * mib
        );
        let past = SubOp::Read {
            offset: 3 * mib,
            len: mib,
        };
        assert_eq!(reply_bound(&[past], 2 * mib), 0);
        let tail = SubOp::Read {
            offset: mib + 1,
            len: 10 * mib,
        };
        assert_eq!(reply_bound(&[tail], 2 * mib), mib - 1);
        // 256 whole reads of a 128 MiB object (what `validate` allows):
        // 32 GiB, refused; so is the same of a 2 MiB object here.
        let many = vec![read_all.clone(); 256];
        assert_eq!(reply_bound(&many, 128 * mib), 32 << 30);
        let (s, c, o) = one_object(2 << 20, 0, 0);
        let st = obj_state(&s, c, &o).unwrap();
        let e = execute(&s, c, &o, &st, &many, 128 * mib).err().unwrap();
        assert!(
            matches!(&e, OpError::Invalid(m) if m.contains("split them")),
            "{e:?}"
        );
        // What fits in one reply is read.
        let fits = vec![read_all; 100];
        let out = execute(&s, c, &o, &st, &fits, 128 * mib).unwrap();
        assert_eq!(out.results.len(), 100);
        assert!(matches!(&out.results[99], SubResult::Data(d) if d.len() == 2 << 20));
        // Object class calls count at their output limit.
        let call = SubOp::Exec {
            class: "omap".into(),
            method: "count".into(),
            input: Vec::new(),
        };
        assert_eq!(reply_bound(&[call], 0), cls::OUTPUT_MAX as u64);
    }

    #[test]
    fn omap_listings_page_through_the_store_and_stop_at_the_reply_limit() {
        // Pages of the listing join into one ordered answer, from any start.
        let (s, c, o) = one_object(1, 1000, 3);
        let st = obj_state(&s, c, &o).unwrap();
        let list = |start: &str, limit: u32| {
            let op = SubOp::OmapList {
                start: start.as_bytes().to_vec(),
                limit,
            };
            match execute(&s, c, &o, &st, &[op], 1 << 20)
                .unwrap()
                .results
                .pop()
            {
                Some(SubResult::Omap(m)) => {
                    m.into_iter().map(|(k, _)| k.to_vec()).collect::<Vec<_>>()
                }
                r => panic!("{r:?}"),
            }
        };
        let want = |from: usize, n: usize| -> Vec<Vec<u8>> {
            (from..from + n)
                .map(|i| format!("k{i:05}").into_bytes())
                .collect()
        };
        assert_eq!(list("", 600), want(0, 600));
        assert_eq!(list("k00100", 300), want(100, 300));
        assert_eq!(list("k00999", 10), want(999, 1));
        assert_eq!(list("", 10_000), want(0, 1000));
        assert!(list("l", 5).is_empty());
        // Values that pass one reply: refused, having read little past it.
        let (s, c, o) = one_object(1, 20, 15 << 20);
        let st = obj_state(&s, c, &o).unwrap();
        let op = SubOp::OmapList {
            start: Vec::new(),
            limit: 100,
        };
        let e = execute(&s, c, &o, &st, &[op], 1 << 20).err().unwrap();
        assert!(
            matches!(&e, OpError::Invalid(m) if m.contains("fewer keys")),
            "{e:?}"
        );
        // Across sub-ops too: ten values of 15 MiB fit, twenty do not.
        let get = SubOp::OmapGetKeys(
            (0..10)
                .map(|i| ByteBuf::from(format!("k{i:05}").into_bytes()))
                .collect(),
        );
        assert!(execute(&s, c, &o, &st, std::slice::from_ref(&get), 1 << 20).is_ok());
        let e = execute(&s, c, &o, &st, &[get.clone(), get], 1 << 20)
            .err()
            .unwrap();
        assert!(
            matches!(&e, OpError::Invalid(m) if m.contains("fewer keys")),
            "{e:?}"
        );
    }
}
