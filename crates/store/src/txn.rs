//! Transactions: an ordered list of operations a store applies all or
//! nothing. Builders take owned data so a transaction can cross threads
//! (to the committer) without borrowing the caller.
//!
//! Stores must never apply a transaction that fails `validate`.

use crate::error::{Result, StoreError};
use crate::names::{CollectionId, Compression, Limits, ObjectId};
use bytes::Bytes;

/// One operation. Ops that name an object create it if missing (touch,
/// write, write_full, zero, truncate, setattrs, omap_setkeys,
/// omap_setheader, and clone's destination); the others fail the whole
/// transaction with `NoObject` when it is missing.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Op {
    CreateCollection(CollectionId),
    /// Remove an empty collection (and its records).
    RemoveCollection(CollectionId),
    /// Compress data written to the collection from now on.
    SetCompression(CollectionId, Compression),
    Touch(CollectionId, ObjectId),
    /// Write bytes at an offset, extending the object (with zeros) as needed.
    Write {
        coll: CollectionId,
        oid: ObjectId,
        offset: u64,
        #[serde(with = "loligo_bulk::serde")]
        data: Bytes,
    },
    /// Replace the object's data.
    WriteFull {
        coll: CollectionId,
        oid: ObjectId,
        #[serde(with = "loligo_bulk::serde")]
        data: Bytes,
    },
    /// Zero a range (extends the object if the range ends past it).
    Zero {
        coll: CollectionId,
        oid: ObjectId,
        offset: u64,
        len: u64,
    },
    /// Set the size: shrink, or extend with zeros.
    Truncate {
        coll: CollectionId,
        oid: ObjectId,
        size: u64,
    },
    Remove(CollectionId, ObjectId),
    /// Make `dst` a copy of `src` (data, xattrs, omap, header); `dst` is
    /// replaced if it exists.
    Clone {
        coll: CollectionId,
        src: ObjectId,
        dst: ObjectId,
    },
    SetAttrs {
        coll: CollectionId,
        oid: ObjectId,
        attrs: Vec<(String, Vec<u8>)>,
    },
    /// Remove one xattr (missing: `NoAttr`).
    RmAttr {
        coll: CollectionId,
        oid: ObjectId,
        name: String,
    },
    OmapSetKeys {
        coll: CollectionId,
        oid: ObjectId,
        kvs: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Remove keys (missing keys are ignored).
    OmapRmKeys {
        coll: CollectionId,
        oid: ObjectId,
        keys: Vec<Vec<u8>>,
    },
    /// Remove keys in `[start, end)`.
    OmapRmRange {
        coll: CollectionId,
        oid: ObjectId,
        start: Vec<u8>,
        end: Vec<u8>,
    },
    OmapClear(CollectionId, ObjectId),
    OmapSetHeader {
        coll: CollectionId,
        oid: ObjectId,
        header: Vec<u8>,
    },
    /// An opaque record kept with the collection, committed atomically with
    /// the rest (PG log entries, PG info, Merkle leaves).
    SetRecord {
        coll: CollectionId,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    RmRecord {
        coll: CollectionId,
        key: Vec<u8>,
    },
    /// Move objects, each whole (data, xattrs, omap, header) and under the
    /// same id, from collection `from` to collection `to` (a PG split).
    /// Each must exist in `from` and not in `to`; no data is copied.
    MoveObjects {
        from: CollectionId,
        to: CollectionId,
        oids: Vec<ObjectId>,
    },
}

impl Op {
    /// The collection the op works on.
    pub fn collection(&self) -> CollectionId {
        match self {
            Op::CreateCollection(c)
            | Op::RemoveCollection(c)
            | Op::SetCompression(c, _)
            | Op::Touch(c, _)
            | Op::Remove(c, _)
            | Op::OmapClear(c, _) => *c,
            Op::Write { coll, .. }
            | Op::WriteFull { coll, .. }
            | Op::Zero { coll, .. }
            | Op::Truncate { coll, .. }
            | Op::Clone { coll, .. }
            | Op::SetAttrs { coll, .. }
            | Op::RmAttr { coll, .. }
            | Op::OmapSetKeys { coll, .. }
            | Op::OmapRmKeys { coll, .. }
            | Op::OmapRmRange { coll, .. }
            | Op::OmapSetHeader { coll, .. }
            | Op::SetRecord { coll, .. }
            | Op::RmRecord { coll, .. } => *coll,
            Op::MoveObjects { to, .. } => *to,
        }
    }
}

/// An ordered list of [`Op`]s, applied atomically.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Transaction {
    pub ops: Vec<Op>,
}

impl Transaction {
    pub fn new() -> Transaction {
        Transaction::default()
    }
    /// Whether the transaction has no ops.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    pub fn create_collection(&mut self, c: CollectionId) -> &mut Self {
        self.push(Op::CreateCollection(c))
    }
    pub fn remove_collection(&mut self, c: CollectionId) -> &mut Self {
        self.push(Op::RemoveCollection(c))
    }
    pub fn set_compression(&mut self, c: CollectionId, algo: Compression) -> &mut Self {
        self.push(Op::SetCompression(c, algo))
    }
    pub fn touch(&mut self, c: CollectionId, o: &ObjectId) -> &mut Self {
        self.push(Op::Touch(c, o.clone()))
    }
    pub fn write(
        &mut self,
        c: CollectionId,
        o: &ObjectId,
        offset: u64,
        data: impl Into<Bytes>,
    ) -> &mut Self {
        self.push(Op::Write {
            coll: c,
            oid: o.clone(),
            offset,
            data: data.into(),
        })
    }
    pub fn write_full(
        &mut self,
        c: CollectionId,
        o: &ObjectId,
        data: impl Into<Bytes>,
    ) -> &mut Self {
        self.push(Op::WriteFull {
            coll: c,
            oid: o.clone(),
            data: data.into(),
        })
    }
    pub fn zero(&mut self, c: CollectionId, o: &ObjectId, offset: u64, len: u64) -> &mut Self {
        self.push(Op::Zero {
            coll: c,
            oid: o.clone(),
            offset,
            len,
        })
    }
    pub fn truncate(&mut self, c: CollectionId, o: &ObjectId, size: u64) -> &mut Self {
        self.push(Op::Truncate {
            coll: c,
            oid: o.clone(),
            size,
        })
    }
    pub fn remove(&mut self, c: CollectionId, o: &ObjectId) -> &mut Self {
        self.push(Op::Remove(c, o.clone()))
    }
    pub fn clone_object(&mut self, c: CollectionId, src: &ObjectId, dst: &ObjectId) -> &mut Self {
        self.push(Op::Clone {
            coll: c,
            src: src.clone(),
            dst: dst.clone(),
        })
    }
    pub fn setattr(
        &mut self,
        c: CollectionId,
        o: &ObjectId,
        name: &str,
        value: impl Into<Vec<u8>>,
    ) -> &mut Self {
        self.push(Op::SetAttrs {
            coll: c,
            oid: o.clone(),
            attrs: vec![(name.to_string(), value.into())],
        })
    }
    pub fn setattrs(
        &mut self,
        c: CollectionId,
        o: &ObjectId,
        attrs: Vec<(String, Vec<u8>)>,
    ) -> &mut Self {
        self.push(Op::SetAttrs {
            coll: c,
            oid: o.clone(),
            attrs,
        })
    }
    pub fn rmattr(&mut self, c: CollectionId, o: &ObjectId, name: &str) -> &mut Self {
        self.push(Op::RmAttr {
            coll: c,
            oid: o.clone(),
            name: name.to_string(),
        })
    }
    pub fn omap_setkeys(
        &mut self,
        c: CollectionId,
        o: &ObjectId,
        kvs: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> &mut Self {
        self.push(Op::OmapSetKeys {
            coll: c,
            oid: o.clone(),
            kvs,
        })
    }
    pub fn omap_rmkeys(&mut self, c: CollectionId, o: &ObjectId, keys: Vec<Vec<u8>>) -> &mut Self {
        self.push(Op::OmapRmKeys {
            coll: c,
            oid: o.clone(),
            keys,
        })
    }
    pub fn omap_rmrange(
        &mut self,
        c: CollectionId,
        o: &ObjectId,
        start: &[u8],
        end: &[u8],
    ) -> &mut Self {
        self.push(Op::OmapRmRange {
            coll: c,
            oid: o.clone(),
            start: start.to_vec(),
            end: end.to_vec(),
        })
    }
    pub fn omap_clear(&mut self, c: CollectionId, o: &ObjectId) -> &mut Self {
        self.push(Op::OmapClear(c, o.clone()))
    }
    pub fn omap_setheader(
        &mut self,
        c: CollectionId,
        o: &ObjectId,
        header: impl Into<Vec<u8>>,
    ) -> &mut Self {
        self.push(Op::OmapSetHeader {
            coll: c,
            oid: o.clone(),
            header: header.into(),
        })
    }
    pub fn set_record(
        &mut self,
        c: CollectionId,
        key: &[u8],
        value: impl Into<Vec<u8>>,
    ) -> &mut Self {
        self.push(Op::SetRecord {
            coll: c,
            key: key.to_vec(),
            value: value.into(),
        })
    }
    /// Move `oids` whole from collection `from` to `to` (see
    /// [`Op::MoveObjects`]).
    pub fn move_objects(
        &mut self,
        from: CollectionId,
        to: CollectionId,
        oids: Vec<ObjectId>,
    ) -> &mut Self {
        self.push(Op::MoveObjects { from, to, oids })
    }

    pub fn rm_record(&mut self, c: CollectionId, key: &[u8]) -> &mut Self {
        self.push(Op::RmRecord {
            coll: c,
            key: key.to_vec(),
        })
    }

    fn push(&mut self, op: Op) -> &mut Self {
        self.ops.push(op);
        self
    }

    /// Check every op against the limits (sizes, names, ranges) before
    /// anything is applied. Object-size limits that depend on the current
    /// size are checked while applying.
    pub fn validate(&self, l: &Limits) -> Result<()> {
        if self.ops.len() > l.ops_per_txn_max {
            return Err(StoreError::TooLarge(format!(
                "transaction of {} ops (limit {})",
                self.ops.len(),
                l.ops_per_txn_max
            )));
        }
        let too = |what: &str, n: usize, max: usize| -> Result<()> {
            if n > max {
                Err(StoreError::TooLarge(format!(
                    "{what} of {n} bytes (limit {max})"
                )))
            } else {
                Ok(())
            }
        };
        let end = |off: u64, len: u64| -> Result<()> {
            match off.checked_add(len) {
                Some(e) if e <= l.object_size_max => Ok(()),
                _ => Err(StoreError::TooLarge(format!(
                    "write ending at {off}+{len} bytes passes the object size limit {}",
                    l.object_size_max
                ))),
            }
        };
        for op in &self.ops {
            if let Some(oid) = op_object(op) {
                if oid.name.is_empty() {
                    return Err(StoreError::Invalid("empty object name".into()));
                }
                too("object name", oid.name.len(), l.name_len_max)?;
            }
            match op {
                Op::Write { offset, data, .. } => end(*offset, data.len() as u64)?,
                Op::WriteFull { data, .. } => end(0, data.len() as u64)?,
                Op::Zero { offset, len, .. } => end(*offset, *len)?,
                Op::Truncate { size, .. } => end(*size, 0)?,
                Op::Clone { dst, .. } => {
                    if dst.name.is_empty() {
                        return Err(StoreError::Invalid("empty object name".into()));
                    }
                    too("object name", dst.name.len(), l.name_len_max)?;
                }
                Op::SetAttrs { attrs, .. } => {
                    for (k, v) in attrs {
                        if k.is_empty() {
                            return Err(StoreError::Invalid("empty xattr name".into()));
                        }
                        too("xattr name", k.len(), l.attr_name_len_max)?;
                        too("xattr value", v.len(), l.attr_value_len_max)?;
                    }
                }
                Op::RmAttr { name, .. } => too("xattr name", name.len(), l.attr_name_len_max)?,
                Op::OmapSetKeys { kvs, .. } => {
                    for (k, v) in kvs {
                        too("omap key", k.len(), l.key_len_max)?;
                        too("omap value", v.len(), l.value_len_max)?;
                    }
                }
                Op::OmapRmKeys { keys, .. } => {
                    for k in keys {
                        too("omap key", k.len(), l.key_len_max)?;
                    }
                }
                Op::OmapRmRange { start, end: e, .. } => {
                    too("omap key", start.len().max(e.len()), l.key_len_max)?;
                    if start > e {
                        return Err(StoreError::Invalid("omap range start after end".into()));
                    }
                }
                Op::OmapSetHeader { header, .. } => {
                    too("omap header", header.len(), l.value_len_max)?
                }
                Op::SetRecord { key, value, .. } => {
                    too("record key", key.len(), l.key_len_max)?;
                    too("record value", value.len(), l.value_len_max)?;
                }
                Op::RmRecord { key, .. } => too("record key", key.len(), l.key_len_max)?,
                Op::MoveObjects { from, to, oids } => {
                    if from == to {
                        return Err(StoreError::Invalid(
                            "objects moved to the collection they are in".into(),
                        ));
                    }
                    for o in oids {
                        if o.name.is_empty() {
                            return Err(StoreError::Invalid("empty object name".into()));
                        }
                        too("object name", o.name.len(), l.name_len_max)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The object an op names (the source, for clone).
pub fn op_object(op: &Op) -> Option<&ObjectId> {
    match op {
        Op::CreateCollection(_)
        | Op::RemoveCollection(_)
        | Op::SetCompression(..)
        | Op::SetRecord { .. }
        | Op::RmRecord { .. }
        | Op::MoveObjects { .. } => None,
        Op::Touch(_, o) | Op::Remove(_, o) | Op::OmapClear(_, o) => Some(o),
        Op::Write { oid, .. }
        | Op::WriteFull { oid, .. }
        | Op::Zero { oid, .. }
        | Op::Truncate { oid, .. }
        | Op::SetAttrs { oid, .. }
        | Op::RmAttr { oid, .. }
        | Op::OmapSetKeys { oid, .. }
        | Op::OmapRmKeys { oid, .. }
        | Op::OmapRmRange { oid, .. }
        | Op::OmapSetHeader { oid, .. } => Some(oid),
        Op::Clone { src, .. } => Some(src),
    }
}
