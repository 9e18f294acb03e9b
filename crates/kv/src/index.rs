//! The layout of a store's index object: one omap entry per leaf node,
//! keyed by the node's highest key, and the store's settings in xattrs.
//! Pure encoding: nothing here does I/O.
//!
//! Index keys sort as the nodes do: `'1' + high` for a node whose keys
//! are all `<= high`, and the single key `'2'` for the last node (no upper
//! bound). The node for key `k` is the first index entry at or after
//! `'1' + k`.

use crate::KvError;
use serde::{Deserialize, Serialize};

/// Index key prefix of a node with an upper bound.
const BOUNDED: u8 = b'1';
/// Index key of the last node (no upper bound).
const LAST: u8 = b'2';

/// Index xattr holding the store's `k` (u64, little-endian): nodes hold
/// `k..=2k` entries, except a store's only node.
pub const K_XATTR: &str = "kv.k";
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
/// nodes it replaces so that any client can roll it forward or back once
/// it is older than the timeout ("A scalable, consistent key-value store on
/// RADOS": the prefix with a timestamp and the objects to create and
/// delete).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// When the client recorded it (milliseconds since the Unix epoch).
    pub started_ms: u64,
    /// The nodes it replaces: object name and the version it read.
    pub replaces: Vec<(String, loligo_types::ops::Version)>,
    /// The nodes it creates: upper bound (`None`: last) and object name.
    pub creates: Vec<(Option<Vec<u8>>, String)>,
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
                started_ms: 5,
                replaces: vec![("s.n.0".into(), Default::default())],
                creates: vec![
                    (Some(b"m".to_vec()), "s.n.1".into()),
                    (None, "s.n.2".into()),
                ],
            }),
        };
        assert_eq!(IndexEntry::decode(&e.encode()).unwrap(), e);
        assert!(IndexEntry::decode(&[0xff; 3]).is_err());
    }
}
