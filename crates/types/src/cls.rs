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

/// Output of `omap.range`: entries in key order, and whether the range
/// has more than these (the page stopped at its limit or at the method's
/// output bound).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangePage {
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    pub more: bool,
}

/// The keys a key-value node holds: those above `low` (exclusive; `None`:
/// no lower bound) and at most `high` (inclusive; `None`: no upper bound).
/// Set when the node is made and never changed: a node's range changes
/// only by replacing the node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRange {
    pub low: Option<Vec<u8>>,
    pub high: Option<Vec<u8>>,
}

impl NodeRange {
    /// Whether `key` belongs to the node.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.low.as_deref().is_none_or(|l| key > l) && self.high.as_deref().is_none_or(|h| key <= h)
    }
}

/// Xattr of a key-value node holding its [`NodeRange`] (postcard).
pub const KV_RANGE_XATTR: &str = "kv.range";
/// Xattr of a key-value node holding its entry count (u64, little-endian).
pub const KV_COUNT_XATTR: &str = "kv.n";
/// Xattr that marks a key-value node unwritable (a split or rebalance is
/// replacing it): present and non-empty means set; its value is the
/// token of the replacement that set it.
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

/// `kv.write` refusal: a change's key is outside the node's range (the
/// client's view of the index is stale: re-read it).
pub const KV_RANGE: u32 = 5;

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

impl Expect {
    /// Whether the expectation holds for a key that is `present` or not.
    pub fn holds(self, present: bool) -> bool {
        match self {
            Expect::Any => true,
            Expect::Absent => !present,
            Expect::Present => present,
        }
    }
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
/// for its size; a node whose range is every key, a store's only node, has
/// no minimum), or a key is outside the node's range. The node must
/// exist (`NotFound` otherwise: it was replaced; re-read the index).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvWrite {
    pub changes: Vec<KvChange>,
    pub max: u64,
    pub min: u64,
}

/// What a [`KvWrite`] does to a node: the entries to set and remove, and
/// the node's entry count after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WritePlan {
    pub sets: Vec<(Vec<u8>, Vec<u8>)>,
    pub rms: Vec<Vec<u8>>,
    pub entries: u64,
}

impl KvWrite {
    /// The distinct keys the write touches.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        let keys: std::collections::BTreeSet<&[u8]> =
            self.changes.iter().map(|c| c.key.as_slice()).collect();
        keys.into_iter().map(<[u8]>::to_vec).collect()
    }

    /// The write's effect on `node`, whose present values of the write's
    /// keys are `have`; or its refusal (a `KV_*` code and a message). The
    /// last change of a key wins; expectations hold against the node
    /// before the write. The one rule for the OSD's `kv.write` and for a
    /// client writing a node with plain ops.
    pub fn plan(
        &self,
        node: &KvNodeStat,
        have: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    ) -> Result<WritePlan, (u32, String)> {
        if node.unwritable {
            return Err((
                KV_UNWRITABLE,
                "the node is being replaced (split or rebalance)".into(),
            ));
        }
        if let Some(c) = self.changes.iter().find(|c| !node.range.holds(&c.key)) {
            return Err((
                KV_RANGE,
                format!(
                    "key {} is outside the node's range",
                    String::from_utf8_lossy(&c.key)
                ),
            ));
        }
        let mut last: std::collections::BTreeMap<&[u8], &Option<Vec<u8>>> = Default::default();
        for c in &self.changes {
            let present = have.contains_key(&c.key);
            if !c.expect.holds(present) {
                return Err((
                    KV_EXPECT,
                    format!(
                        "key {} is {}",
                        String::from_utf8_lossy(&c.key),
                        if present { "present" } else { "absent" }
                    ),
                ));
            }
            last.insert(&c.key, &c.value);
        }
        let mut p = WritePlan {
            entries: node.entries,
            ..WritePlan::default()
        };
        for (k, v) in last {
            let present = have.contains_key(k);
            match v {
                Some(v) => {
                    p.entries += u64::from(!present);
                    p.sets.push((k.to_vec(), v.clone()));
                }
                None if present => {
                    p.entries = p.entries.saturating_sub(1);
                    p.rms.push(k.to_vec());
                }
                None => {}
            }
        }
        if p.entries > node.entries && p.entries > self.max {
            return Err((
                KV_FULL,
                format!(
                    "the node would hold {} entries (at most {})",
                    p.entries, self.max
                ),
            ));
        }
        // A store's only node (its range is every key) has no minimum.
        let only = node.range.low.is_none() && node.range.high.is_none();
        if p.entries < node.entries && p.entries < self.min && !only {
            return Err((
                KV_UNDER,
                format!(
                    "the node would hold {} entries (at least {})",
                    p.entries, self.min
                ),
            ));
        }
        Ok(p)
    }
}

/// Output of `kv.write` and `kv.stat`: the node's entries (after the
/// write), whether it is marked unwritable, and its range.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvNodeStat {
    pub entries: u64,
    pub unwritable: bool,
    pub range: NodeRange,
}
