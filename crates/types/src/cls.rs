//! What clients and OSDs exchange with object class methods
//! (`SubOp::Exec`): the methods' inputs, outputs and refusal codes, in
//! postcard. The methods themselves run in the OSD (`loligo_osd::cls`);
//! clients such as the key-value store build their inputs from here.

use serde::{Deserialize, Serialize};

/// Input of `omap.count` and `omap.range`: keys in `[start, end)`
/// (`end: None`: no bound), at most `limit` of them (0: the method's
/// default).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
    pub limit: u64,
}

/// Xattr of a key-value node holding its entry count (u64, little-endian).
pub const KV_COUNT_XATTR: &str = "kv.n";
/// Xattr that marks a key-value node unwritable (a split or rebalance is
/// replacing it): present and non-empty means set.
pub const KV_UNWRITABLE_XATTR: &str = "kv.unwritable";

/// `kv.write` refusal: the node is marked unwritable. Re-read the index
/// and retry.
pub const KV_UNWRITABLE: u32 = 1;
/// `kv.write` refusal: the node would hold more than `max` entries. Split
/// it, then retry.
pub const KV_FULL: u32 = 2;
/// `kv.write` refusal: the node would hold fewer than `min` entries.
/// Rebalance it, then retry.
pub const KV_UNDER: u32 = 3;
/// `kv.write` refusal: a change's expectation on its key failed (the
/// message names the key).
pub const KV_EXPECT: u32 = 4;

/// What a change expects of its key before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expect {
    /// Anything (an upsert, or a removal of a key that may be absent).
    #[default]
    Any,
    /// The key is absent (an insert).
    Absent,
    /// The key is present (an update, or a removal that must remove).
    Present,
}

/// One key's change in a `kv.write`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvChange {
    pub key: Vec<u8>,
    /// The new value; `None` removes the key.
    pub value: Option<Vec<u8>>,
    pub expect: Expect,
}

/// Input of `kv.write`: changes to one key-value node, applied all or
/// none. Refused (nothing changed) if the node is unwritable, a change's
/// expectation fails, or the node would end with more than `max` or fewer
/// than `min` entries (a node that would not change size is never refused
/// for its size). The node must exist (`NotFound` otherwise: it was
/// replaced; re-read the index).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvWrite {
    pub changes: Vec<KvChange>,
    pub max: u64,
    pub min: u64,
}

/// Output of `kv.write` and `kv.stat`: the node's entries (after the
/// write) and whether it is marked unwritable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvNodeStat {
    pub entries: u64,
    pub unwritable: bool,
}
