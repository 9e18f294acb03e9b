//! What a split or rebalance turns nodes into: pure planning over the
//! entries of the nodes it replaces, with the write that needed it already
//! applied. Nothing here does I/O; the protocol that carries a plan out
//! (intent in the index, unwritable marks, new nodes, the index swap,
//! cleanup) lives in `reshape`.

use loligo_types::cls::NodeRange;

/// Entries of a node, in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// One node of a plan: its entries and its range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewNode {
    pub entries: Entries,
    pub range: NodeRange,
}

/// `entries` (all in `range`, sorted) laid out as the fewest nodes of at
/// most `2k` entries each, shared evenly (the first nodes get one more of
/// an uneven share). Each node but the last is bounded by its last key, so
/// every key between two nodes' entries (not there yet) routes to the
/// earlier one; the first keeps `range`'s low bound, the last its high.
///
/// With two or more nodes each holds more than `k` entries' worth:
/// `n > 2k(m-1)` entries over `m` nodes gives each at least `k`.
pub fn layout(entries: Entries, range: NodeRange, k: u64) -> Vec<NewNode> {
    let max = (2 * k).max(1) as usize;
    let n = entries.len();
    let m = n.div_ceil(max).max(1);
    let (base, extra) = (n / m, n % m);
    let mut out = Vec::with_capacity(m);
    let mut low = range.low;
    let mut rest = entries.into_iter();
    for i in 0..m {
        let take = base + usize::from(i < extra);
        let mine: Entries = rest.by_ref().take(take).collect();
        let high = if i + 1 == m {
            range.high.clone()
        } else {
            mine.last().map(|(k, _)| k.clone())
        };
        out.push(NewNode {
            entries: mine,
            range: NodeRange {
                low: low.take(),
                high: high.clone(),
            },
        });
        low = high;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(keys: std::ops::Range<u32>) -> Entries {
        keys.map(|i| (format!("k{i:04}").into_bytes(), i.to_le_bytes().to_vec()))
            .collect()
    }

    /// Every key of `nodes` is in its node's range, neighbouring ranges
    /// meet, together they cover `range` and hold `want` in order.
    fn covers(nodes: &[NewNode], want: &Entries, range: &NodeRange) {
        let all: Entries = nodes.iter().flat_map(|n| n.entries.clone()).collect();
        assert_eq!(&all, want);
        assert_eq!(nodes[0].range.low, range.low);
        assert_eq!(nodes.last().unwrap().range.high, range.high);
        for w in nodes.windows(2) {
            assert_eq!(w[0].range.high, w[1].range.low);
            assert!(w[0].range.high.is_some());
        }
        for n in nodes {
            for (k, _) in &n.entries {
                assert!(n.range.holds(k), "{k:?} outside {:?}", n.range);
            }
        }
    }

    #[test]
    fn a_layout_shares_entries_evenly_within_bounds() {
        let ranges = [
            NodeRange::default(),
            NodeRange {
                low: Some(b"k".to_vec()),
                high: Some(b"zzz".to_vec()),
            },
        ];
        for k in [1u64, 2, 4, 800] {
            for n in [0u32, 1, 2, 7, 8, 9, 17, 1600, 1601, 4000] {
                let e = entries(0..n);
                for range in &ranges {
                    let nodes = layout(e.clone(), range.clone(), k);
                    covers(&nodes, &e, range);
                    let m = nodes.len() as u64;
                    assert_eq!(m, (u64::from(n)).div_ceil(2 * k).max(1));
                    let sizes: Vec<u64> = nodes.iter().map(|x| x.entries.len() as u64).collect();
                    assert!(sizes.iter().all(|&s| s <= 2 * k), "{sizes:?}");
                    if m > 1 {
                        assert!(sizes.iter().all(|&s| s >= k), "k {k}: {sizes:?}");
                    }
                    let (lo, hi) = (sizes.iter().min(), sizes.iter().max());
                    assert!(hi.unwrap() - lo.unwrap() <= 1, "{sizes:?}");
                }
            }
        }
    }
}
