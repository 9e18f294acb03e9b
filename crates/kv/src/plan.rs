//! What a split or rebalance turns nodes into: pure planning over the
//! entries read from the nodes it replaces. Nothing here does I/O; the
//! protocols that carry a plan out (intent in the index, unwritable marks,
//! new nodes, the index swap, cleanup) use it.

/// Entries of a node, in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// One node of a plan: its entries and its upper bound (`None`: the last
/// node, no bound).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewNode {
    pub entries: Entries,
    pub high: Option<Vec<u8>>,
}

/// A full node (`entries`, bound `high`) as two nodes of half its entries
/// each (the first gets the extra one of an odd count). The first node's
/// bound is its last key, so every key up to it (including keys between
/// the halves that are not there yet) routes to it.
pub fn split(entries: Entries, high: Option<Vec<u8>>) -> Option<[NewNode; 2]> {
    if entries.len() < 2 {
        return None;
    }
    let mut low = entries;
    let up = low.split_off(low.len().div_ceil(2));
    let low_high = low.last().map(|(k, _)| k.clone());
    Some([
        NewNode {
            entries: low,
            high: low_high,
        },
        NewNode { entries: up, high },
    ])
}

/// Two neighbouring nodes (`a` before `b`, `b`'s bound `high`) after a
/// removal left one of them at `k` entries: one node if their entries
/// fit in `2k`, else two with the entries shared evenly (each then holds
/// more than `k`).
pub fn rebalance(a: Entries, b: Entries, high: Option<Vec<u8>>, k: usize) -> Vec<NewNode> {
    let mut all = a;
    all.extend(b);
    if all.len() <= 2 * k {
        return vec![NewNode { entries: all, high }];
    }
    match split(all, high) {
        Some(two) => two.into(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(keys: std::ops::Range<u32>) -> Entries {
        keys.map(|i| (format!("k{i:04}").into_bytes(), i.to_le_bytes().to_vec()))
            .collect()
    }

    /// Every key of `nodes` is `<=` its node's bound and `>` the previous
    /// node's, and together they hold `want` in order.
    fn covers(nodes: &[NewNode], want: &Entries, high: &Option<Vec<u8>>) {
        let all: Entries = nodes.iter().flat_map(|n| n.entries.clone()).collect();
        assert_eq!(&all, want);
        let mut prev: Option<Vec<u8>> = None;
        for n in nodes {
            for (k, _) in &n.entries {
                assert!(n.high.as_ref().is_none_or(|h| k <= h));
                assert!(prev.as_ref().is_none_or(|p| k > p));
            }
            prev = n.high.clone();
        }
        assert_eq!(&nodes.last().unwrap().high, high);
    }

    #[test]
    fn a_split_halves_a_node_and_keeps_its_bound() {
        for n in [2u32, 3, 8, 9, 1600, 1601] {
            let e = entries(0..n);
            for high in [None, Some(b"zzz".to_vec())] {
                let two = split(e.clone(), high.clone()).unwrap();
                covers(&two, &e, &high);
                let (a, b) = (two[0].entries.len(), two[1].entries.len());
                assert_eq!(a, b + (n as usize % 2));
            }
        }
        assert!(split(entries(0..1), None).is_none());
    }

    #[test]
    fn a_rebalance_merges_what_fits_and_else_shares_evenly() {
        let k = 4;
        // 4 + 3 fit in 2k = 8: one node, the second node's bound.
        let nodes = rebalance(entries(0..4), entries(4..7), None, k);
        assert_eq!(nodes.len(), 1);
        covers(&nodes, &entries(0..7), &None);
        // 4 + 8 do not: two nodes of 6, each above k.
        let high = Some(b"k9999".to_vec());
        let nodes = rebalance(entries(0..4), entries(4..12), high.clone(), k);
        assert_eq!(nodes.len(), 2);
        assert!(nodes.iter().all(|n| n.entries.len() > k));
        covers(&nodes, &entries(0..12), &high);
    }
}
