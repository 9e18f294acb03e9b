//! Where the file store keeps things: the metadata keys in its KV and the
//! object files' names.
//!
//! Keys (each collection and object encoded so byte order is listing
//! order, as the block store encodes them):
//!
//! | key | value |
//! | --- | --- |
//! | `C` coll | the collection's compression code |
//! | `M` coll obj | the object's [`Meta`]: its file and replay guard |
//! | `A` coll obj name | an xattr's value |
//! | `H` coll obj | the omap header |
//! | `O` coll obj key | an omap value |
//! | `R` coll key | a collection record |
//! | `D` fid | (empty) a file unlinked since the last checkpoint |
//! | [`COMMIT_KEY`] | the checkpoint: where replay starts (record, op, ring position) |
//!
//! An object's data lives in its own file, named by a file id taken from
//! the position (sequence number and op index) of the op that made it, so
//! an op replayed after a crash makes the same file again.
//!
//! Must never: give two live objects one file id; decode a value it did
//! not check the length of.

use crate::block::codec::{coll_prefix, push_object};
use crate::error::{Result, StoreError};
use crate::names::{CollectionId, ObjectId};
use std::path::{Path, PathBuf};

pub const T_COLL: u8 = b'C';
pub const T_META: u8 = b'M';
pub const T_ATTR: u8 = b'A';
pub const T_HEAD: u8 = b'H';
pub const T_OMAP: u8 = b'O';
pub const T_REC: u8 = b'R';
pub const T_DOOMED: u8 = b'D';
/// An I/O error on `what`.
pub fn io(what: impl std::fmt::Display, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(format!("{what}: {e}"))
}

/// The checkpoint's key.
pub const COMMIT_KEY: &[u8] = b"\x00commit";
/// Ops a transaction may hold (the op index is 16 bits of a file id).
pub const OPS_MAX: usize = 1 << 16;
/// The directory of object files, fanned out by a file id's low byte.
pub const OBJECTS_DIR: &str = "objects";
/// The journal file.
pub const JOURNAL_FILE: &str = "journal";
/// The KV's directory.
pub const KV_DIR: &str = "kv";
/// The file naming the store's kind, written last by mkfs.
pub const TYPE_FILE: &str = "type";
/// Its content.
pub const TYPE: &str = "filestore";

/// Where an op sits in the journal: its transaction's sequence number and
/// its index there. Orders ops as they were applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub seq: u64,
    pub op: u32,
}

impl Pos {
    /// The id of a file made by the op at this position.
    pub fn fid(self) -> u64 {
        debug_assert!((self.op as usize) < OPS_MAX);
        self.seq << 16 | u64::from(self.op)
    }
}

/// What the store keeps of an object besides its data and attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The object's data file.
    pub fid: u64,
    /// The object is durable as of this op: a replay skips the ops on it
    /// up to here (zero: none).
    pub guard: Pos,
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(20);
        v.extend_from_slice(&self.fid.to_le_bytes());
        v.extend_from_slice(&self.guard.seq.to_le_bytes());
        v.extend_from_slice(&self.guard.op.to_le_bytes());
        v
    }

    pub fn decode(v: &[u8]) -> Result<Meta> {
        if v.len() != 20 {
            return Err(StoreError::Corrupt(format!(
                "object record of {} bytes",
                v.len()
            )));
        }
        let u = |a: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v[a..a + 8]);
            u64::from_le_bytes(b)
        };
        Ok(Meta {
            fid: u(0),
            guard: Pos {
                seq: u(8),
                op: u32::from_le_bytes([v[16], v[17], v[18], v[19]]),
            },
        })
    }
}

/// The checkpoint: replay starts at op `at.op` of the record with
/// sequence `at.seq`, which starts at virtual ring position `pos`.
pub fn encode_commit(at: Pos, pos: u64) -> Vec<u8> {
    let mut v = at.seq.to_le_bytes().to_vec();
    v.extend_from_slice(&pos.to_le_bytes());
    v.extend_from_slice(&at.op.to_le_bytes());
    v
}

pub fn decode_commit(v: &[u8]) -> Result<(Pos, u64)> {
    if v.len() != 20 {
        return Err(StoreError::Corrupt("checkpoint record".into()));
    }
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&v[..8]);
    b.copy_from_slice(&v[8..16]);
    let op = u32::from_le_bytes([v[16], v[17], v[18], v[19]]);
    Ok((
        Pos {
            seq: u64::from_le_bytes(a),
            op,
        },
        u64::from_le_bytes(b),
    ))
}

/// A key under `tag` for one object; attribute names and omap keys follow
/// it.
pub fn obj_key(tag: u8, c: CollectionId, o: &ObjectId) -> Vec<u8> {
    let mut k = coll_prefix(tag, c);
    push_object(&mut k, o);
    k
}

/// `obj_key(tag, ..)` followed by `tail`.
pub fn obj_sub_key(tag: u8, c: CollectionId, o: &ObjectId, tail: &[u8]) -> Vec<u8> {
    let mut k = obj_key(tag, c, o);
    k.extend_from_slice(tail);
    k
}

pub fn doomed_key(fid: u64) -> Vec<u8> {
    let mut k = vec![T_DOOMED];
    k.extend_from_slice(&fid.to_be_bytes());
    k
}

/// The file of a file id under the store's directory.
pub fn file_path(dir: &Path, fid: u64) -> PathBuf {
    dir.join(OBJECTS_DIR)
        .join(format!("{:02x}", fid & 0xff))
        .join(format!("{fid:016x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_and_commit_round_trip_and_short_values_are_refused() {
        let m = Meta {
            fid: 0x1234_5678_9abc,
            guard: Pos { seq: 77, op: 3 },
        };
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        assert!(Meta::decode(&m.encode()[..19]).is_err());
        let at = Pos { seq: 5, op: 2 };
        assert_eq!(decode_commit(&encode_commit(at, 8192)).unwrap(), (at, 8192));
        assert!(decode_commit(&[0; 19]).is_err());
    }

    #[test]
    fn positions_order_as_applied_and_name_distinct_files() {
        let a = Pos { seq: 1, op: 65535 };
        let b = Pos { seq: 2, op: 0 };
        assert!(a < b);
        assert_ne!(a.fid(), b.fid());
        assert_eq!(b.fid(), 1 << 17);
    }
}
