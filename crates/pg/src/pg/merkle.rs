//! A PG's Merkle tree over its objects, for backfill that skips what
//! already matches (after "Merkle-tree backfill" for Ceph): leaf `i` of
//! `2^d` covers the objects whose 32-bit placement hash starts with the
//! `d` bits `i` (a store lists objects in hash order, so a leaf is one
//! contiguous key range), and holds the XOR of a 64-bit digest of each
//! object's name and version. A write changes one leaf in O(1)
//! (`leaf ^= old ^ new`, with 0 for "absent"); the `d` nodes above it
//! follow when next read. Inner nodes are a hash of their two children,
//! kept in one array in heap order (root at 1, leaves at `n..2n`): 16
//! bytes per leaf in all.
//!
//! Pure: no I/O. The digests are specified (xxh3, little-endian inputs),
//! because trees built by different OSDs, builds and versions are
//! compared with each other. It must never change a digest's definition
//! without a format version: persisted leaves would silently disagree.

use loligo_types::ops::Version;
use std::cell::RefCell;
use std::ops::Range;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Fewest leaves a tree may have.
pub const LEAVES_MIN: u32 = 1 << 10;
/// Most leaves a tree may have.
pub const LEAVES_MAX: u32 = 1 << 16;
/// Leaves per PG unless configured otherwise.
pub const LEAVES_DEFAULT: u32 = 1 << 14;

/// Seeds keep the object digest and the inner-node hash apart.
const SEED_OBJECT: u64 = 0x6c6f_6c69_676f_4f42; // "loligoOB"
const SEED_NODE: u64 = 0x6c6f_6c69_676f_4e44; // "loligoND"

/// What one object contributes to its leaf: never 0 (0 is "absent").
pub fn object_digest(name: &str, version: Version) -> u64 {
    // On the stack for the usual names (a write digests twice).
    let mut stack = [0u8; 256];
    let mut heap = Vec::new();
    let len = name.len() + 16;
    let b: &mut [u8] = if len <= stack.len() {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    b[..8].copy_from_slice(&version.epoch.to_le_bytes());
    b[8..16].copy_from_slice(&version.v.to_le_bytes());
    b[16..].copy_from_slice(name.as_bytes());
    match xxh3_64_with_seed(b, SEED_OBJECT) {
        0 => 1,
        h => h,
    }
}

/// An inner node from its children; two empty children make an empty
/// node, so an empty tree is all zeros.
fn node(l: u64, r: u64) -> u64 {
    if l == 0 && r == 0 {
        return 0;
    }
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&l.to_le_bytes());
    b[8..].copy_from_slice(&r.to_le_bytes());
    match xxh3_64_with_seed(&b, SEED_NODE) {
        0 => 1,
        h => h,
    }
}

/// Why a tree cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MerkleError {
    #[error("{0} leaves: a tree has a power of two between {LEAVES_MIN} and {LEAVES_MAX}")]
    Leaves(usize),
}

/// A PG's tree.
///
/// The leaves are always current; the inner nodes are computed when read
/// (a root, a level for an exchange), from the leaves changed since: a
/// write touches one leaf, not the `d` nodes above it (only scrubs and
/// backfill exchanges read inner nodes).
#[derive(Clone, Debug)]
pub struct Tree {
    /// log2 of the leaf count.
    depth: u32,
    leaves: Vec<u64>,
    inner: RefCell<Inner>,
}

/// The inner nodes and what is owed to them.
#[derive(Clone, Debug)]
struct Inner {
    /// Heap order: `nodes[1]` is the root, `nodes[j]`'s children are
    /// `2j` and `2j + 1`, where `n + i` names leaf `i`; `nodes[0]` is
    /// unused.
    nodes: Vec<u64>,
    /// Leaves changed since the nodes were computed (at most 1/32 of
    /// them: 2 KiB at 16,384 leaves, the one cost past 16 bytes a leaf).
    stale: Vec<u32>,
    /// Too many changed: every node is computed again.
    all_stale: bool,
}

impl PartialEq for Tree {
    /// Inner nodes follow from the leaves.
    fn eq(&self, other: &Tree) -> bool {
        self.depth == other.depth && self.leaves == other.leaves
    }
}

impl Eq for Tree {}

impl Tree {
    /// An empty tree of `leaves` leaves.
    pub fn new(leaves: u32) -> Result<Tree, MerkleError> {
        let n = leaves as usize;
        if !(LEAVES_MIN..=LEAVES_MAX).contains(&leaves) || !leaves.is_power_of_two() {
            return Err(MerkleError::Leaves(n));
        }
        Ok(Tree::zeroed(leaves.trailing_zeros()))
    }

    /// An all-zero tree of `2^depth` leaves.
    fn zeroed(depth: u32) -> Tree {
        let n = 1usize << depth;
        Tree {
            depth,
            leaves: vec![0; n],
            inner: RefCell::new(Inner {
                nodes: vec![0; n],
                stale: Vec::new(),
                all_stale: false,
            }),
        }
    }

    /// The tree whose leaves are `leaves` (as persisted).
    pub fn from_leaves(leaves: &[u64]) -> Result<Tree, MerkleError> {
        let n = u32::try_from(leaves.len()).map_err(|_| MerkleError::Leaves(leaves.len()))?;
        let mut t = Tree::new(n)?;
        t.leaves.copy_from_slice(leaves);
        t.inner.get_mut().all_stale = true;
        Ok(t)
    }

    /// An empty tree of the same shape.
    pub fn emptied(&self) -> Tree {
        Tree::zeroed(self.depth)
    }

    pub fn leaf_count(&self) -> u32 {
        1 << self.depth
    }

    /// Levels below the root (the leaves are level `depth`).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    pub fn root(&self) -> u64 {
        self.fresh(|nodes| nodes[1])
    }

    pub fn leaves(&self) -> &[u64] {
        &self.leaves
    }

    /// The leaf an object of placement hash `hash` falls in.
    pub fn leaf_of(&self, hash: u32) -> u32 {
        hash >> (32 - self.depth)
    }

    /// The leaf `hash` falls in, in a tree of `leaves` leaves (a power of
    /// two).
    pub fn leaf_of_hash(leaves: u32, hash: u32) -> u32 {
        hash.checked_shr(32 - leaves.max(1).trailing_zeros())
            .unwrap_or(0)
    }

    /// The placement hashes leaf `i` covers.
    pub fn hashes_of(&self, i: u32) -> std::ops::RangeInclusive<u32> {
        let shift = 32 - self.depth;
        (i << shift)..=((i << shift) | (u32::MAX >> self.depth))
    }

    /// An object of placement hash `hash` changed from digest `old` to
    /// `new` (0: absent): its leaf follows (the nodes above it when next
    /// read). Returns the leaf's index and new value.
    pub fn update(&mut self, hash: u32, old: u64, new: u64) -> (u32, u64) {
        let i = self.leaf_of(hash);
        let v = self.leaves[i as usize] ^ old ^ new;
        self.set_leaf(i, v);
        (i, v)
    }

    /// Set leaf `i` (e.g. from a persisted record); out of range is
    /// ignored.
    pub fn set_leaf(&mut self, i: u32, v: u64) {
        let Some(slot) = self.leaves.get_mut(i as usize) else {
            return;
        };
        if *slot == v {
            return;
        }
        *slot = v;
        let n = self.leaves.len();
        let inner = self.inner.get_mut();
        if !inner.all_stale {
            inner.stale.push(i);
            if inner.stale.len() > n / 32 {
                inner.all_stale = true;
                inner.stale = Vec::new();
            }
        }
    }

    /// `f` over the inner nodes, computed first where leaves changed.
    fn fresh<T>(&self, f: impl FnOnce(&[u64]) -> T) -> T {
        let mut inner = self.inner.borrow_mut();
        let n = self.leaves.len();
        let leaves = &self.leaves;
        let Inner {
            nodes,
            stale,
            all_stale,
        } = &mut *inner;
        let child = |nodes: &[u64], j: usize| if j >= n { leaves[j - n] } else { nodes[j] };
        if *all_stale {
            for j in (1..n).rev() {
                nodes[j] = node(child(nodes, 2 * j), child(nodes, 2 * j + 1));
            }
            *all_stale = false;
            stale.clear();
        } else if !stale.is_empty() {
            // Level by level up: each changed node's parent, once.
            let mut level: Vec<usize> = stale.iter().map(|&i| (n + i as usize) / 2).collect();
            stale.clear();
            while !level.is_empty() {
                level.sort_unstable();
                level.dedup();
                for &j in &level {
                    nodes[j] = node(child(nodes, 2 * j), child(nodes, 2 * j + 1));
                }
                level = level
                    .into_iter()
                    .filter(|&j| j > 1)
                    .map(|j| j / 2)
                    .collect();
            }
        }
        f(nodes)
    }

    /// Nodes `idx` of `level` (0: the root; `depth`: the leaves); an index
    /// past the level is 0.
    pub fn nodes_at(&self, level: u32, idx: &[u32]) -> Vec<u64> {
        let level = level.min(self.depth);
        let base = 1usize << level;
        let pick = |nodes: &[u64]| {
            idx.iter()
                .map(|&i| match (i as usize) < base {
                    true if level == self.depth => self.leaves[i as usize],
                    true => nodes[base + i as usize],
                    false => 0,
                })
                .collect()
        };
        if level == self.depth {
            return pick(&[]);
        }
        self.fresh(pick)
    }

    /// The leaf ranges where `self` and `other` (same shape) differ,
    /// merged where they touch. Trees of different shapes differ
    /// everywhere.
    pub fn diff(&self, other: &Tree) -> Vec<Range<u32>> {
        if self.depth != other.depth {
            return std::iter::once(0..self.leaf_count().max(other.leaf_count())).collect();
        }
        let mut d = Descent::new(self.depth, self.root(), other.root());
        while let Some((level, idx)) = d.wants() {
            let theirs = other.nodes_at(level, &idx);
            d.step(&self.nodes_at(level, &idx), &theirs);
        }
        d.ranges()
    }
}

/// Most nodes one step of a [`Descent`] asks for (8 bytes each: 64 KiB).
pub const NODES_PER_STEP: usize = 8192;

/// Finding where two trees differ when one of them is remote, in few
/// round trips: from the nodes known to differ, each step asks for all
/// their descendants as many levels down as [`NODES_PER_STEP`] allows (at
/// least one), then keeps those that differ. From the root of a 16,384-leaf
/// tree that is level 13 first (8,192 nodes), then the leaves under the
/// differing ones: three round trips with the root's, where one level at
/// a time takes fifteen, and a round trip on a local network costs about
/// as much as sending 64 KiB.
#[derive(Clone, Debug)]
pub struct Descent {
    depth: u32,
    /// The level of the nodes in `differ`.
    level: u32,
    /// Nodes of `level` known to differ, in order.
    differ: Vec<u32>,
}

impl Descent {
    /// Start from the two roots.
    pub fn new(depth: u32, mine: u64, theirs: u64) -> Descent {
        Descent {
            depth,
            level: 0,
            differ: if mine == theirs { vec![] } else { vec![0] },
        }
    }

    /// The nodes to fetch next, at a level: `None` once done.
    pub fn wants(&self) -> Option<(u32, Vec<u32>)> {
        if self.differ.is_empty() || self.level >= self.depth {
            return None;
        }
        let mut k = 1;
        while self.level + k < self.depth && self.differ.len() << (k + 1) <= NODES_PER_STEP {
            k += 1;
        }
        let idx = self
            .differ
            .iter()
            .flat_map(|&i| (i << k)..((i + 1) << k))
            .collect();
        Some((self.level + k, idx))
    }

    /// Both sides' values of the nodes `wants` named, in its order.
    pub fn step(&mut self, mine: &[u64], theirs: &[u64]) {
        let Some((level, idx)) = self.wants() else {
            return;
        };
        self.differ = idx
            .iter()
            .zip(mine.iter().zip(theirs))
            .filter(|(_, (a, b))| a != b)
            .map(|(&i, _)| i)
            .collect();
        self.level = level;
    }

    /// The differing leaves (once done), as ranges merged where they
    /// touch.
    pub fn ranges(&self) -> Vec<Range<u32>> {
        if self.level < self.depth {
            return Vec::new();
        }
        leaf_ranges(self.differ.iter().copied())
    }
}

/// Leaf indexes, ascending, as ranges merged where they touch.
pub fn leaf_ranges(leaves: impl IntoIterator<Item = u32>) -> Vec<Range<u32>> {
    let mut out: Vec<Range<u32>> = Vec::new();
    for i in leaves {
        match out.last_mut() {
            Some(r) if r.end == i => r.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_testkit::Rng;
    use std::collections::BTreeMap;

    fn v(e: u64, n: u64) -> Version {
        Version { epoch: e, v: n }
    }

    /// Objects: name -> (hash, version).
    type Objs = BTreeMap<String, (u32, Version)>;

    fn objects(rng: &mut Rng, n: usize) -> Objs {
        (0..n)
            .map(|i| {
                let h = rng.next_u64() as u32;
                (format!("o{i}"), (h, v(1, rng.below(1000) + 1)))
            })
            .collect()
    }

    fn build(leaves: u32, objs: &Objs) -> Tree {
        let mut t = Tree::new(leaves).unwrap();
        for (name, (h, ver)) in objs {
            t.update(*h, 0, object_digest(name, *ver));
        }
        t
    }

    /// The leaves whose object sets differ, computed directly.
    fn truth(t: &Tree, a: &Objs, b: &Objs) -> Vec<u32> {
        let mut out = std::collections::BTreeSet::new();
        for (name, x) in a {
            if b.get(name) != Some(x) {
                out.insert(t.leaf_of(x.0));
            }
        }
        for (name, x) in b {
            if a.get(name) != Some(x) {
                out.insert(t.leaf_of(x.0));
            }
        }
        out.into_iter().collect()
    }

    #[test]
    fn shapes_are_checked() {
        assert!(Tree::new(1000).is_err());
        assert!(Tree::new(512).is_err());
        assert!(Tree::new(1 << 17).is_err());
        assert!(Tree::from_leaves(&[0; 3000]).is_err());
        let t = Tree::new(LEAVES_DEFAULT).unwrap();
        assert_eq!((t.leaf_count(), t.depth(), t.root()), (16_384, 14, 0));
        // 16 bytes per leaf.
        assert_eq!(
            (t.leaves.len() + t.inner.borrow().nodes.len()) * 8,
            16 * 16_384
        );
        // Leaves tile the hash space in order.
        assert_eq!(t.hashes_of(0), 0..=(u32::MAX >> 14));
        assert_eq!(*t.hashes_of(16_383).end(), u32::MAX);
        assert_eq!(t.leaf_of(u32::MAX), 16_383);
        // Trees of different shapes differ everywhere.
        let small = Tree::new(1024).unwrap();
        let ranges: Vec<Range<u32>> = t.diff(&small);
        assert_eq!(ranges.len(), 1);
        assert_eq!(ranges[0], 0..16_384);
    }

    #[test]
    fn incremental_updates_equal_a_rebuild_in_any_order() {
        let mut rng = Rng::new(7);
        let objs = objects(&mut rng, 5000);
        let t = build(1024, &objs);
        // Reverse order, and through persisted leaves.
        let mut r = Tree::new(1024).unwrap();
        for (name, (h, ver)) in objs.iter().rev() {
            r.update(*h, 0, object_digest(name, *ver));
        }
        assert_eq!(t, r);
        assert_eq!(Tree::from_leaves(t.leaves()).unwrap(), t);
        // A new version, then a delete, then the write undone: the same
        // tree as a rebuild of each state.
        let (name, (h, old)) = objs.iter().next().map(|(n, x)| (n.clone(), *x)).unwrap();
        let mut m = t.clone();
        m.update(h, object_digest(&name, old), object_digest(&name, v(2, 5)));
        let mut o2 = objs.clone();
        o2.insert(name.clone(), (h, v(2, 5)));
        assert_eq!(m, build(1024, &o2));
        m.update(h, object_digest(&name, v(2, 5)), 0);
        o2.remove(&name);
        assert_eq!(m, build(1024, &o2));
        m.update(h, 0, object_digest(&name, old));
        assert_eq!(m, t);
        // Everything removed: empty again.
        for (name, (h, ver)) in &objs {
            m.update(*h, object_digest(name, *ver), 0);
        }
        assert_eq!(m, Tree::new(1024).unwrap());
    }

    /// Every inner node of `t`, level by level, as read.
    fn all_nodes(t: &Tree) -> Vec<Vec<u64>> {
        (0..=t.depth())
            .map(|l| t.nodes_at(l, &(0..1u32 << l).collect::<Vec<_>>()))
            .collect()
    }

    /// The same nodes computed eagerly from the leaves, by definition.
    fn nodes_by_definition(t: &Tree) -> Vec<Vec<u64>> {
        let mut levels = vec![t.leaves().to_vec()];
        while levels[0].len() > 1 {
            let up = levels[0].chunks(2).map(|c| node(c[0], c[1])).collect();
            levels.insert(0, up);
        }
        levels
    }

    #[test]
    fn inner_nodes_read_between_any_updates_are_the_defined_ones() {
        let mut rng = Rng::new(11);
        let mut t = Tree::new(1024).unwrap();
        let mut live: Vec<(u32, u64)> = Vec::new();
        for step in 0..3000 {
            // Mostly few changes between reads (the partial path), now
            // and then many (past the all-stale bound).
            let burst = if step % 500 == 0 {
                300
            } else {
                1 + rng.below(4) as usize
            };
            for _ in 0..burst {
                if !live.is_empty() && rng.below(3) == 0 {
                    let (h, d) = live.swap_remove(rng.below(live.len() as u64) as usize);
                    t.update(h, d, 0);
                } else {
                    let (h, d) = (rng.next_u64() as u32, rng.next_u64() | 1);
                    t.update(h, 0, d);
                    live.push((h, d));
                }
            }
            if rng.below(4) == 0 {
                assert_eq!(all_nodes(&t), nodes_by_definition(&t), "step {step}");
            }
        }
        assert_eq!(all_nodes(&t), nodes_by_definition(&t));
        // A tree from persisted leaves reads the same nodes.
        let p = Tree::from_leaves(t.leaves()).unwrap();
        assert_eq!(all_nodes(&p), all_nodes(&t));
        for (h, d) in live {
            t.update(h, d, 0);
        }
        assert_eq!(t.root(), 0, "an empty tree is all zeros");
    }

    #[test]
    fn diff_finds_exactly_the_leaves_that_differ() {
        let mut rng = Rng::new(11);
        for (n, stale_pct) in [(2000, 1), (5000, 5), (5000, 20), (300, 50)] {
            let a = objects(&mut rng, n);
            let mut b = a.clone();
            // Stale: older versions, missing objects, extra objects.
            for (i, (name, x)) in a.iter().enumerate() {
                if rng.below(100) < stale_pct {
                    match i % 3 {
                        0 => {
                            b.insert(name.clone(), (x.0, v(0, 1)));
                        }
                        1 => {
                            b.remove(name);
                        }
                        _ => {
                            b.insert(format!("{name}-new"), (rng.next_u64() as u32, v(3, 3)));
                        }
                    }
                }
            }
            for leaves in [1024, 4096] {
                let (ta, tb) = (build(leaves, &a), build(leaves, &b));
                let want = truth(&ta, &a, &b);
                let got: Vec<u32> = ta.diff(&tb).into_iter().flatten().collect();
                assert_eq!(got, want, "n={n} stale={stale_pct}% leaves={leaves}");
                // Symmetric, and nothing against itself.
                assert_eq!(tb.diff(&ta), ta.diff(&tb));
                assert!(ta.diff(&ta.clone()).is_empty());
            }
        }
    }

    #[test]
    fn descent_over_the_wire_asks_only_below_differences() {
        let mut rng = Rng::new(3);
        let a = objects(&mut rng, 4000);
        let mut b = a.clone();
        let changed: Vec<String> = a.keys().take(3).cloned().collect();
        for name in &changed {
            let h = a[name].0;
            b.insert(name.clone(), (h, v(9, 9)));
        }
        let (ta, tb) = (build(4096, &a), build(4096, &b));
        let mut d = Descent::new(ta.depth(), ta.root(), tb.root());
        let mut asked = 0;
        let mut trips = 0;
        while let Some((level, idx)) = d.wants() {
            asked += idx.len();
            trips += 1;
            d.step(&ta.nodes_at(level, &idx), &tb.nodes_at(level, &idx));
        }
        // 4,096 leaves fit one step: the whole leaf level at once.
        assert_eq!(trips, 1);
        assert_eq!(asked, 4096);
        let got: Vec<u32> = d.ranges().into_iter().flatten().collect();
        assert_eq!(got, truth(&ta, &a, &b));
        // Many differences: still within the budget each step.
        let mut c = a.clone();
        for (name, (h, _)) in a.iter().take(3000) {
            c.insert(name.clone(), (*h, v(9, 9)));
        }
        let tc = build(65536, &c);
        let ta64 = build(65536, &a);
        let mut d = Descent::new(ta64.depth(), ta64.root(), tc.root());
        let mut trips = 0;
        while let Some((level, idx)) = d.wants() {
            assert!(idx.len() <= NODES_PER_STEP, "{}", idx.len());
            trips += 1;
            d.step(&ta64.nodes_at(level, &idx), &tc.nodes_at(level, &idx));
        }
        assert!(trips <= 4, "{trips}");
        let got: Vec<u32> = d.ranges().into_iter().flatten().collect();
        assert_eq!(got, truth(&ta64, &a, &c));
        // Equal roots: nothing to ask.
        assert!(Descent::new(12, 5, 5).wants().is_none());
    }

    #[test]
    fn digests_are_pinned() {
        // Persisted leaves and other OSDs' trees rely on these values.
        assert_eq!(object_digest("a", v(1, 1)), object_digest("a", v(1, 1)));
        assert_ne!(object_digest("a", v(1, 1)), object_digest("a", v(1, 2)));
        assert_ne!(object_digest("a", v(1, 1)), object_digest("b", v(1, 1)));
        let pinned = object_digest("obj", v(3, 42));
        let t = Tree::from_leaves(&[pinned; 1024]).unwrap();
        assert_eq!(
            (pinned, t.root()),
            (PINNED_DIGEST, PINNED_ROOT),
            "the digest definition changed: persisted trees would disagree"
        );
    }

    const PINNED_DIGEST: u64 = 402_880_601_762_628_643;
    const PINNED_ROOT: u64 = 81_079_188_295_942_386;
}
