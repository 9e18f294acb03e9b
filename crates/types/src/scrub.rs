//! What a scrub reports, as it travels between OSDs and to the operator:
//! one member's view of an object, what is wrong with a copy (Ceph's
//! error names), how the authoritative copy was chosen, and the operator's
//! commands to a PG's primary. Vocabulary only: the comparison lives with
//! the PG (`loligo-pg`'s `scrub_map`).

use crate::ops::Version;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One object as one member holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubObject {
    pub name: String,
    pub size: u64,
    pub version: Version,
    /// xxh3-64 of the xattrs (names and values, in name order).
    pub attrs: u64,
    /// Deep scrubs: xxh3-64 of the omap header and entries.
    pub omap: Option<u64>,
    /// Deep scrubs: xxh3-64 of the data.
    pub data: Option<u64>,
    /// The data digest the object's metadata keeps, with the size then.
    pub recorded: Option<(u64, u64)>,
    /// Reading the object here failed (why).
    pub read_error: Option<String>,
    /// What the holder found wrong with its own copy by itself: an
    /// erasure-coded shard of the wrong length for its object
    /// (`EcSizeError`), whose data differs from the hash its xattrs keep
    /// (`EcHashError`), or that holds another position's shard
    /// (`Missing`).
    pub own_error: Option<ShardError>,
}

/// What is wrong with one copy (Ceph's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ShardError {
    Missing,
    ReadError,
    SizeMismatch,
    DataDigestMismatch,
    /// Its data differs from the digest its own metadata keeps.
    DataDigestMismatchInfo,
    OmapDigestMismatch,
    AttrValueMismatch,
    /// Its version differs from the authoritative copy's.
    ObjectInfoInconsistency,
    /// An erasure-coded shard's data differs from the hash kept for it.
    EcHashError,
    /// An erasure-coded shard's length is not its object's shard length.
    EcSizeError,
}

impl ShardError {
    /// The name `list-inconsistent-obj` prints.
    pub fn name(self) -> &'static str {
        match self {
            ShardError::Missing => "missing",
            ShardError::ReadError => "read_error",
            ShardError::SizeMismatch => "size_mismatch",
            ShardError::DataDigestMismatch => "data_digest_mismatch",
            ShardError::DataDigestMismatchInfo => "data_digest_mismatch_info",
            ShardError::OmapDigestMismatch => "omap_digest_mismatch",
            ShardError::AttrValueMismatch => "attr_value_mismatch",
            ShardError::ObjectInfoInconsistency => "object_info_inconsistency",
            ShardError::EcHashError => "ec_hash_error",
            ShardError::EcSizeError => "ec_size_error",
        }
    }
}

/// How the authoritative copy was chosen (see the module's comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthRule {
    DataDigest,
    Majority,
    Primary,
    /// The primary's log removed the object: no copy is authoritative.
    Removed,
    /// No copy at the version due could be read.
    None,
    /// Erasure-coded shards whose parity disagrees with their data: the
    /// one shard whose rebuild from the others makes them all agree is
    /// bad, the others good.
    Parity,
}

impl AuthRule {
    /// The name reports print.
    pub fn name(self) -> &'static str {
        match self {
            AuthRule::DataDigest => "data_digest",
            AuthRule::Majority => "majority",
            AuthRule::Primary => "primary",
            AuthRule::Removed => "removed",
            AuthRule::None => "none",
            AuthRule::Parity => "parity",
        }
    }
}

/// One object the members disagree on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inconsistent {
    pub name: String,
    /// The authoritative copy's version.
    pub version: Version,
    /// The OSDs holding an authoritative copy (empty: none).
    pub auth: Vec<i32>,
    pub rule: AuthRule,
    /// The copies that are wrong, each with what is wrong with it.
    pub bad: BTreeMap<i32, Vec<ShardError>>,
    /// Every copy's entry (`None`: missing there).
    pub copies: BTreeMap<i32, Option<ScrubObject>>,
}

impl Inconsistent {
    /// The kinds of error found on any copy, in order, without repeats.
    pub fn errors(&self) -> Vec<ShardError> {
        let mut e: Vec<ShardError> = self.bad.values().flatten().copied().collect();
        e.sort();
        e.dedup();
        e
    }
}

/// An operator's command to one PG's primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PgCommand {
    /// Start a scrub once the PG is clean (`deep`: read every byte;
    /// `repair`: write good copies over bad ones afterwards).
    Scrub { deep: bool, repair: bool },
    /// What the last scrub found inconsistent.
    ListInconsistent,
}

/// An operator's command to one OSD (`loligo tell osd.N ...`, as Ceph's
/// `ceph tell osd.N ...`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OsdCommand {
    /// Make this OSD's reads of its copy (or shard) of object `name` of
    /// pool `pool` fail as a checksum error would, until the copy is
    /// written or removed (Ceph's `injectdataerr`): a read error for
    /// scrub and read repair to meet. Only an OSD started with
    /// `--debug-inject-read-err` takes it.
    InjectDataErr { pool: u64, name: String },
    /// The client ops this OSD serves now, with their ages, as JSON
    /// (Ceph's `dump_ops_in_flight`; the ops of pools the caller may
    /// read).
    DumpOpsInFlight,
}

/// The primary's answer to a [`PgCommand`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PgCommandReply {
    /// The scrub is asked for.
    Queued,
    Inconsistent(Vec<Inconsistent>),
}
