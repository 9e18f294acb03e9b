//! Names of things in the store and the limits on them.
//!
//! Objects are ordered by (hash, name) inside a collection: listing in that
//! order lets an OSD split a PG by hash range and walk it for backfill and
//! scrub. Key encodings that preserve this order live with the stores that
//! need them.
//!
//! Nothing here may panic on any value a caller can construct.

use crate::hint::AllocHint;
use std::fmt;

/// A collection: one PG shard (or the OSD's own metadata collection).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct CollectionId {
    pub pool: u64,
    /// The PG's placement seed.
    pub pg: u32,
    /// EC shard, or [`CollectionId::NO_SHARD`] for replicated pools.
    pub shard: u8,
}

impl CollectionId {
    /// Shard value of replicated PGs.
    pub const NO_SHARD: u8 = u8::MAX;

    /// A replicated PG's collection.
    pub fn pg(pool: u64, pg: u32) -> CollectionId {
        CollectionId {
            pool,
            pg,
            shard: Self::NO_SHARD,
        }
    }

    /// The OSD's metadata collection (maps, superblock).
    pub fn meta() -> CollectionId {
        CollectionId {
            pool: u64::MAX,
            pg: 0,
            shard: Self::NO_SHARD,
        }
    }
}

impl fmt::Display for CollectionId {
    /// Ceph's spelling: `1.1f_head`, `2.3s1_head`, `meta`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == CollectionId::meta() {
            return write!(f, "meta");
        }
        write!(f, "{}.{:x}", self.pool, self.pg)?;
        if self.shard != Self::NO_SHARD {
            write!(f, "s{}", self.shard)?;
        }
        write!(f, "_head")
    }
}

/// An object: its placement hash and name. Ordered by hash, then name.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ObjectId {
    pub hash: u32,
    pub name: String,
}

impl ObjectId {
    /// An object id from the caller's hash (an OSD uses the object's
    /// placement hash) and name.
    pub fn new(hash: u32, name: impl Into<String>) -> ObjectId {
        ObjectId {
            hash,
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}:{}", self.hash, self.name)
    }
}

/// Bounds on everything a transaction carries. Exceeding one is a
/// [`crate::StoreError::TooLarge`] and applies nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest object (bytes of data).
    pub object_size_max: u64,
    /// Longest object name (bytes).
    pub name_len_max: usize,
    /// Longest xattr name (bytes).
    pub attr_name_len_max: usize,
    /// Largest xattr value (bytes).
    pub attr_value_len_max: usize,
    /// Longest omap or record key (bytes).
    pub key_len_max: usize,
    /// Largest omap value, omap header or record value (bytes).
    pub value_len_max: usize,
    /// Most operations in one transaction.
    pub ops_per_txn_max: usize,
}

impl Default for Limits {
    /// Ceph-like defaults: 128 MiB objects, 2 KiB names.
    fn default() -> Limits {
        Limits {
            object_size_max: 128 << 20,
            name_len_max: 2048,
            attr_name_len_max: 256,
            attr_value_len_max: 64 << 10,
            key_len_max: 4096,
            value_len_max: 16 << 20,
            ops_per_txn_max: 1 << 16,
        }
    }
}

/// What `stat` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectStat {
    /// Logical size in bytes.
    pub size: u64,
}

/// Extents of an object read together with its size and attributes, all
/// as of one moment (see [`crate::ObjectStore::read_with_attrs`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectRead {
    /// Logical size in bytes.
    pub size: u64,
    pub attrs: std::collections::BTreeMap<String, Vec<u8>>,
    /// The bytes of each extent asked for, clipped to the size (shared:
    /// a large extent may be a pooled O_DIRECT buffer, handed on without
    /// a copy).
    pub extents: Vec<bytes::Bytes>,
}

/// An object read whole but for its omap (what a copy of it to another
/// store needs first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WholeObject {
    /// Logical size in bytes.
    pub size: u64,
    /// Its data (empty when not asked for).
    pub data: Vec<u8>,
    pub attrs: std::collections::BTreeMap<String, Vec<u8>>,
    pub omap_header: Vec<u8>,
    /// Whether it may have omap keys (`false`: it has none, and a caller
    /// copying it need not list them).
    pub omap: bool,
}

/// Space on the device, and what the metadata takes beside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Bytes the store may use for data.
    pub total: u64,
    /// Bytes allocated to data.
    pub used: u64,
    /// Bytes free for data.
    pub free: u64,
    /// Bytes the metadata (the KV's files and the journal: omap, small
    /// objects kept inline, xattrs, PG logs) takes on its file system.
    pub meta: u64,
    /// Space of the file system the metadata is on as its unprivileged
    /// users see it (used plus available; blocks kept for root count as
    /// neither), less the block file if that is on it too (0: none, as
    /// in memory).
    pub host_total: u64,
    /// Bytes free on it for the store's user.
    pub host_free: u64,
}

/// Space on the metadata's file system counted as used beyond what is: a
/// flush writes what the engine held in memory (memtables of up to
/// `lsm::MEMTABLE_BYTES`; fjall's journal grew by up to
/// `kv::JOURNAL_BYTES_MAX`), and a flush or a compaction writes its new
/// files before it removes the old ones. So a full ratio reached on that
/// file system leaves this much free, and writes are refused before a
/// commit could fail for want of space (the OSD would stop itself).
pub const META_RESERVE_BYTES: u64 = 128 << 20;

impl StoreStats {
    /// What the store holds: data allocated and metadata.
    pub fn stored(&self) -> u64 {
        self.used.saturating_add(self.meta)
    }

    /// The fuller of the two spaces the store fills, as (used, total) for
    /// a fullness ratio: its data space with the metadata counted in, and
    /// the file system the metadata grows on (which others may fill too;
    /// when it is full, a commit fails), with [`META_RESERVE_BYTES`] of it
    /// counted as used.
    pub fn fill(&self) -> (u64, u64) {
        let data = (self.stored(), self.total.saturating_add(self.meta));
        if self.host_total == 0 {
            return data;
        }
        let used = self.host_total.saturating_sub(self.host_free);
        let host = (
            used.saturating_add(META_RESERVE_BYTES).min(self.host_total),
            self.host_total,
        );
        // a/b >= c/d, in integers.
        let fuller = (host.0 as u128) * (data.1 as u128) >= (data.0 as u128) * (host.1 as u128);
        if data.1 == 0 || fuller {
            host
        } else {
            data
        }
    }
}

/// Per-collection data compression: the algorithm (LZ4 block format, by
/// lz4_flex) and which objects' writes it applies to, by their
/// [`AllocHint`] (Ceph's `compression_mode`). A compressed blob is kept
/// only when it saves at least an eighth of the space; otherwise the data
/// is stored as is. New settings go at the end: transactions number them
/// in this order, and [`Compression::code`] is on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Compression {
    #[default]
    None,
    /// Every write (Ceph's `force`).
    Lz4,
    /// Writes to objects hinted compressible only (Ceph's `passive`).
    Lz4Passive,
    /// Writes to all objects but those hinted incompressible (Ceph's
    /// `aggressive`).
    Lz4Aggressive,
}

impl Compression {
    /// The byte stored on disk.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Lz4Passive => 2,
            Compression::Lz4Aggressive => 3,
        }
    }
    /// From the stored byte; `None` for unknown values.
    pub fn from_code(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Lz4Passive),
            3 => Some(Compression::Lz4Aggressive),
            _ => None,
        }
    }

    /// Whether writes to an object with hint `hint` are compressed.
    pub fn applies(self, hint: Option<&AllocHint>) -> bool {
        match self {
            Compression::None => false,
            Compression::Lz4 => true,
            Compression::Lz4Passive => hint.is_some_and(AllocHint::compressible),
            Compression::Lz4Aggressive => !hint.is_some_and(AllocHint::incompressible),
        }
    }
}
