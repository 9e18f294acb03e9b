//! The layout of a store's index object: one omap entry per leaf node,
//! keyed by the node's highest key, and the store's settings in xattrs.
//! Pure encoding: nothing here does I/O.
//!
//! Index keys sort as the nodes do: `'1' + high` for a node whose keys
//! are all `<= high`, and the single key `'2'` for the last node (no upper
//! bound). The node for key `k` is the first index entry at or after
//! `'1' + k`. Keys `'0' + token` are tombs: the nodes a finished split or
//! rebalance replaced, to delete (they sort before every node entry, so
//! lookups never meet them).

use crate::KvError;
use serde::{Deserialize, Serialize};

/// Index key prefix of a tomb.
const TOMB: u8 = b'0';
/// Index key prefix of a node with an upper bound.
const BOUNDED: u8 = b'1';
/// Index key of the last node (no upper bound).
const LAST: u8 = b'2';

/// Index xattr holding the store's `k` (u64, little-endian): nodes hold
/// `k..=2k` entries, except a store's only node.
pub const K_XATTR: &str = "kv.k";
/// Index xattr holding the largest value the store takes (u64,
/// little-endian; absent: [`crate::VALUE_MAX`]).
pub const VALUE_MAX_XATTR: &str = "kv.value_max";
/// Index xattr holding the layout version.
pub const FORMAT_XATTR: &str = "kv.format";
/// This layout's version.
pub const FORMAT: &[u8] = b"1";

/// The index key of a node whose highest key is `high` (`None`: the last
/// node).
pub fn index_key(high: Option<&[u8]>) -> Vec<u8> {
    match high {
        Some(h) => {
            let mut k = Vec::with_capacity(h.len() + 1);
            k.push(BOUNDED);
            k.extend_from_slice(h);
            k
        }
        None => vec![LAST],
    }
}

/// Where a lookup of `key` starts in the index.
pub fn lookup_start(key: &[u8]) -> Vec<u8> {
    index_key(Some(key))
}

/// Where node entries start in the index (after the tombs).
pub const NODES_START: &[u8] = &[BOUNDED];

/// The index key of the tomb of replacement `token`.
pub fn tomb_key(token: &str) -> Vec<u8> {
    let mut k = vec![TOMB];
    k.extend_from_slice(token.as_bytes());
    k
}

/// Index keys of tombs are below this.
pub const TOMBS_END: &[u8] = &[TOMB + 1];

/// A node's upper bound from its index key (`None`: the last node).
pub fn decode_index_key(k: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
    match k.split_first() {
        Some((&BOUNDED, high)) => Ok(Some(high.to_vec())),
        Some((&LAST, [])) => Ok(None),
        _ => Err(KvError::Corrupt(format!(
            "index key {:?} is neither a bound nor the last node",
            String::from_utf8_lossy(k)
        ))),
    }
}

/// An index entry's value: the node object, and the intent of a split or
/// rebalance replacing it, if one is under way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub node: String,
    pub intent: Option<Intent>,
}

/// A split or rebalance under way, recorded on the index entries of the
/// nodes it replaces so that any client can roll it back once it is older
/// than the timeout ("A scalable, consistent key-value store on RADOS":
/// the prefix with a timestamp and the objects to create and delete).
/// Its token also marks the nodes it replaces unwritable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Unique to this replacement.
    pub token: String,
    /// When the client recorded it (milliseconds since the Unix epoch).
    pub started_ms: u64,
    /// The nodes it replaces: index key and object name, in key order.
    pub replaces: Vec<(Vec<u8>, String)>,
    /// Names of the nodes it may create.
    pub creates: Vec<String>,
}

impl Intent {
    /// The index entries that carry this intent: key, and the entry's
    /// encoding with and without it.
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        self.replaces
            .iter()
            .map(|(key, node)| {
                let with = IndexEntry {
                    node: node.clone(),
                    intent: Some(self.clone()),
                };
                let without = IndexEntry {
                    node: node.clone(),
                    intent: None,
                };
                (key.clone(), with.encode(), without.encode())
            })
            .collect()
    }
}

impl IndexEntry {
    pub fn encode(&self) -> Vec<u8> {
        // A struct of strings, integers and byte vectors always encodes.
        postcard::to_stdvec(self).unwrap_or_default()
    }

    pub fn decode(b: &[u8]) -> Result<IndexEntry, KvError> {
        postcard::from_bytes(b).map_err(|e| KvError::Corrupt(format!("index entry: {e}")))
    }
}

/// What a finished split or rebalance leaves to delete: the nodes it
/// replaced (already out of the index and marked unwritable).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tomb {
    pub started_ms: u64,
    pub nodes: Vec<String>,
}

impl Tomb {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).unwrap_or_default()
    }

    pub fn decode(b: &[u8]) -> Result<Tomb, KvError> {
        postcard::from_bytes(b).map_err(|e| KvError::Corrupt(format!("tomb: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_sort_as_nodes_and_round_trip() {
        let keys: Vec<Option<&[u8]>> = vec![
            Some(b""),
            Some(b"a"),
            Some(b"a\0"),
            Some(b"b"),
            Some(&[0xff, 0xff]),
            None,
        ];
        let enc: Vec<Vec<u8>> = keys.iter().map(|k| index_key(*k)).collect();
        let mut sorted = enc.clone();
        sorted.sort();
        assert_eq!(
            sorted, enc,
            "index keys sort as their bounds, the last node last"
        );
        for (k, e) in keys.iter().zip(&enc) {
            assert_eq!(decode_index_key(e).unwrap().as_deref(), *k);
        }
        // A lookup of `k` starts at or before the entry of the node that
        // holds it: bound >= k.
        assert!(lookup_start(b"a") <= index_key(Some(b"a")));
        assert!(lookup_start(b"a\0") > index_key(Some(b"a")));
        assert!(lookup_start(&[0xff; 8]) < index_key(None));
        for bad in [&b""[..], b"3x", b"2x", b"0"] {
            assert!(decode_index_key(bad).is_err());
        }
        let e = IndexEntry {
            node: "s.n.1".into(),
            intent: Some(Intent {
                token: "t".into(),
                started_ms: 5,
                replaces: vec![(index_key(None), "s.n.0".into())],
                creates: vec!["s.n.1".into(), "s.n.2".into()],
            }),
        };
        assert_eq!(IndexEntry::decode(&e.encode()).unwrap(), e);
        assert!(IndexEntry::decode(&[0xff; 3]).is_err());
        // Tombs sort before every node entry.
        assert!(tomb_key("\u{10ffff}") < TOMBS_END.to_vec());
        assert!(TOMBS_END <= NODES_START && NODES_START <= index_key(Some(b"")).as_slice());
        let t = Tomb {
            started_ms: 1,
            nodes: vec!["a".into()],
        };
        assert_eq!(Tomb::decode(&t.encode()).unwrap(), t);
    }
}
