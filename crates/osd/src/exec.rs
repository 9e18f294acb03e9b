//! One client op against one object: asserts checked, reads answered from
//! the object as it was before the op, writes turned into store ops. Pure
//! but for reads of the store.
//!
//! It must never apply anything: the PG decides the version and commits
//! the transaction it returns everywhere at once.

use crate::cls;
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::{
    OpError, SubOp, SubResult, Version, CLASS_NAME_MAX, NAME_LEN_MAX, SUBOPS_MAX,
};
use serde_bytes::ByteBuf;

/// The xattr holding an object's version (names starting with `_` are
/// the OSD's own).
pub const VERSION_ATTR: &str = "_v";
/// Largest omap listing per sub-op.
pub const OMAP_LIST_MAX: u32 = 10_000;

/// Store errors as op errors.
pub fn store_err(e: StoreError) -> OpError {
    match e {
        StoreError::NoObject { .. } => OpError::NotFound,
        StoreError::NoAttr { name, .. } => OpError::NoXattr(name),
        StoreError::NoSpace { .. } => OpError::NoSpace,
        StoreError::TooLarge(m) | StoreError::Invalid(m) => OpError::Invalid(m),
        e => OpError::Io(e.to_string()),
    }
}

/// An object's state before an op.
#[derive(Clone, Debug, Default)]
pub struct ObjState {
    pub exists: bool,
    pub size: u64,
    pub version: Version,
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
    }
    Ok(())
}

/// `Invalid` unless `name` is a client's xattr name: not empty, not one
/// of the OSD's own (they start with `_`).
pub fn user_xattr(name: &str) -> Result<(), OpError> {
    if name.starts_with('_') || name.is_empty() {
        return Err(OpError::Invalid(format!(
            "xattr name '{name}' is reserved or empty"
        )));
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

/// `NotFound` unless the object exists.
pub fn need(exists: bool) -> Result<(), OpError> {
    if exists {
        Ok(())
    } else {
        Err(OpError::NotFound)
    }
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
    let mut t = Transaction::new();
    let mut results = Vec::with_capacity(ops.len());
    let (mut exists, mut size) = (st.exists, st.size);
    let mut xattrs = XattrsSeen::default();
    let fits = |end: u64| fits(end, size_max);
    for (i, op) in ops.iter().enumerate() {
        let index = i as u32;
        let mut r = SubResult::None;
        match op {
            SubOp::AssertExists
            | SubOp::AssertNotExists
            | SubOp::AssertVersion(_)
            | SubOp::CmpXattr { .. } => {
                check_assert(s, c, o, st, op, index)?;
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
            }
            SubOp::Create => {
                t.touch(c, o);
                exists = true;
            }
            SubOp::WriteFull(d) => {
                fits(d.len() as u64)?;
                t.write_full(c, o, d.clone());
                exists = true;
                size = d.len() as u64;
            }
            SubOp::Write { offset, data } => {
                let end = offset
                    .checked_add(data.len() as u64)
                    .ok_or_else(|| OpError::Invalid("offset overflows".into()))?;
                fits(end)?;
                t.write(c, o, *offset, data.clone());
                exists = true;
                size = size.max(end);
            }
            SubOp::Append(d) => {
                let end = size + d.len() as u64;
                fits(end)?;
                t.write(c, o, size, d.clone());
                exists = true;
                size = end;
            }
            SubOp::Truncate(n) => {
                fits(*n)?;
                t.truncate(c, o, *n);
                exists = true;
                size = *n;
            }
            SubOp::Zero { offset, len } => {
                need(exists)?;
                let end = offset.saturating_add(*len).min(size);
                if end > *offset {
                    t.zero(c, o, *offset, end - offset);
                }
            }
            SubOp::Remove => {
                need(exists)?;
                t.remove(c, o);
                xattrs.clear();
                exists = false;
                size = 0;
            }
            SubOp::SetXattr { name, value } => {
                t.setattr(c, o, name, value.clone());
                xattrs.set(name, true);
                exists = true;
            }
            SubOp::RmXattr(name) => {
                need(exists)?;
                // A missing xattr is the client's error, not a failed
                // transaction (which would stop the OSD).
                if !xattrs.present(s, c, o, st.exists, name)? {
                    return Err(OpError::NoXattr(name.clone()));
                }
                xattrs.set(name, false);
                t.rmattr(c, o, name);
            }
            SubOp::OmapSet(kvs) => {
                t.omap_setkeys(
                    c,
                    o,
                    kvs.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
                );
                exists = true;
            }
            SubOp::OmapRm(keys) => {
                need(exists)?;
                t.omap_rmkeys(c, o, keys.iter().map(|k| k.to_vec()).collect());
            }
            SubOp::OmapClear => {
                need(exists)?;
                t.omap_clear(c, o);
            }
            SubOp::OmapSetHeader(h) => {
                t.omap_setheader(c, o, h.clone());
                exists = true;
            }
            SubOp::Read { offset, len } => {
                need(st.exists)?;
                let len = if *len == 0 {
                    st.size.saturating_sub(*offset)
                } else {
                    *len
                };
                fits(len.min(st.size))?;
                r = SubResult::Data(s.read_bytes(c, o, *offset, len).map_err(store_err)?);
            }
            SubOp::Stat => {
                need(st.exists)?;
                r = SubResult::Stat {
                    size: st.size,
                    version: st.version,
                };
            }
            SubOp::GetXattr(name) => {
                need(st.exists)?;
                let v = s.getattr(c, o, name).map_err(store_err)?;
                r = SubResult::Data(v.into());
            }
            SubOp::GetXattrs => {
                need(st.exists)?;
                let all = s.getattrs(c, o).map_err(store_err)?;
                r = SubResult::Xattrs(
                    all.into_iter()
                        .filter(|(k, _)| !k.starts_with('_'))
                        .map(|(k, v)| (k, ByteBuf::from(v)))
                        .collect(),
                );
            }
            SubOp::OmapGetKeys(keys) => {
                need(st.exists)?;
                let ks: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
                let got = s.omap_get(c, o, &ks).map_err(store_err)?;
                r = SubResult::Omap(
                    got.into_iter()
                        .map(|(k, v)| (ByteBuf::from(k), ByteBuf::from(v)))
                        .collect(),
                );
            }
            SubOp::OmapList { start, limit } => {
                need(st.exists)?;
                let lim = (*limit).clamp(1, OMAP_LIST_MAX) as usize;
                let got = s.omap_range(c, o, start, None, lim).map_err(store_err)?;
                r = SubResult::Omap(
                    got.into_iter()
                        .map(|(k, v)| (ByteBuf::from(k), ByteBuf::from(v)))
                        .collect(),
                );
            }
            SubOp::OmapGetHeader => {
                need(st.exists)?;
                r = SubResult::Data(s.omap_header(c, o).map_err(store_err)?.into());
            }
            SubOp::Exec {
                class,
                method,
                input,
            } => {
                let m = cls::lookup(class, method)
                    .ok_or_else(|| OpError::NoMethod(format!("{class}.{method}")))?;
                let mut cx = cls::Ctx::new(s, c, o, st, exists, m.writes);
                let out = cls::call(m, &mut cx, input).map_err(|e| match e {
                    cls::ClsError::Refused { code, message } => OpError::MethodRefused {
                        index,
                        code,
                        message,
                    },
                    cls::ClsError::Op(e) => e,
                })?;
                exists = cx.exists;
                t.ops.extend(cx.txn.ops);
                r = SubResult::Data(out.into());
            }
        }
        results.push(r);
    }
    Ok(Outcome {
        txn: t,
        results,
        exists_after: exists,
        size_after: size,
        bytes_delta: size as i64 - st.size as i64,
    })
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
}
