//! A client's cache of index entries, bounded as in "A scalable,
//! consistent key-value store on RADOS": at most `max` entries, the
//! oldest read dropped first when more come, and each refresh reads a
//! window of a fifth of that (at most [`MAX_WINDOW`]) from the index.
//!
//! The paper's clients kept 1,000 entries ([`PAPER_MAX`]). A store with
//! more nodes than its clients cache makes a third or more of their
//! lookups miss and re-read the index, one object every client shares
//! (measured at 1,487 nodes of 1 KiB entries, in one sitting: 2,537
//! ops/s with 1,000 entries, 4,914 with all cached), so the default bound
//! is larger.
//!
//! Each entry also keeps how far below it the index was seen to hold no
//! other entry (from the read that brought it: a window read from a
//! lookup's start covers everything from that start). A lookup from a key
//! an entry covers is a hit; one that would land on an entry from below
//! its covered gap is a miss, read from the index at once, rather than a
//! guess that costs an op on the wrong node before that same read (with
//! the paper's 1,000 entries and more nodes than that, most lookups that
//! find no entry of their own would otherwise land on a later one).
//!
//! The cache is a hint and must never be trusted for placement: a read
//! checks the range its node reports in the same op, and the `kv.write`
//! method refuses keys outside its node's range, so a missing
//! or stale entry (one evicted between a node and its successor included:
//! a lookup then finds a later node) costs a re-read of the index, never
//! a misplaced or missed key.

use crate::index::IndexEntry;
use std::collections::BTreeMap;

/// Entries a client caches unless told otherwise: every node of a store
/// of tens of millions of keys, a few MiB of memory at most.
pub const DEFAULT_MAX: usize = 65_536;
/// The paper's cache size (entries), with its refresh of 20% (200).
pub const PAPER_MAX: usize = 1000;
/// Most entries one refresh reads (the paper's 20% of 1,000).
pub const MAX_WINDOW: usize = 200;

/// Index entries by index key, with the order they were read in.
#[derive(Debug)]
pub struct IndexCache {
    /// Index key -> what is cached for it.
    entries: BTreeMap<Vec<u8>, Cached>,
    /// When read -> index key: the oldest first.
    by_age: BTreeMap<u64, Vec<u8>>,
    next: u64,
    max: usize,
}

/// One cached index entry.
#[derive(Debug)]
struct Cached {
    /// When it was read (the key of its `by_age` entry).
    age: u64,
    entry: IndexEntry,
    /// The least index key from which a lookup finds this entry first:
    /// the index held no entry in `from..key` when it was read.
    from: Vec<u8>,
}

/// The least key above `k`.
fn after(k: &[u8]) -> Vec<u8> {
    let mut a = k.to_vec();
    a.push(0);
    a
}

impl IndexCache {
    /// An empty cache of at most `max` entries (at least one).
    pub fn new(max: usize) -> IndexCache {
        IndexCache {
            entries: BTreeMap::new(),
            by_age: BTreeMap::new(),
            next: 0,
            max: max.max(1),
        }
    }

    /// Entries a refresh reads from the index: a fifth of the cache (the
    /// paper's 20%), at least one and at most [`MAX_WINDOW`].
    pub fn window(&self) -> u32 {
        u32::try_from((self.max / 5).clamp(1, MAX_WINDOW)).unwrap_or(u32::MAX)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry a lookup from index key `start` finds: the first at or
    /// after `start`, if the read that cached it covered `start` (nothing
    /// in the index between them then). `None`: the cache does not know.
    pub fn at_or_after(&self, start: &[u8]) -> Option<(Vec<u8>, IndexEntry)> {
        self.entries
            .range(start.to_vec()..)
            .next()
            .filter(|(_, c)| c.from.as_slice() <= start)
            .map(|(k, c)| (k.clone(), c.entry.clone()))
    }

    /// The last index key in `lo..hi`.
    pub fn last_before(&self, lo: &[u8], hi: &[u8]) -> Option<Vec<u8>> {
        if lo >= hi {
            return None;
        }
        self.entries
            .range(lo.to_vec()..hi.to_vec())
            .next_back()
            .map(|(k, _)| k.clone())
    }

    /// Drop the entry at `key`, if cached.
    pub fn remove(&mut self, key: &[u8]) {
        if let Some(c) = self.entries.remove(key) {
            self.by_age.remove(&c.age);
        }
        self.check();
    }

    /// Cache `entry` at `key` as the newest, found first by lookups from
    /// `from` on, dropping the oldest entries beyond the bound.
    fn insert(&mut self, key: Vec<u8>, entry: IndexEntry, from: Vec<u8>) {
        debug_assert!(from <= key, "an entry covers lookups below it only");
        let age = self.next;
        self.next += 1;
        self.by_age.insert(age, key.clone());
        if let Some(old) = self.entries.insert(key, Cached { age, entry, from }) {
            self.by_age.remove(&old.age);
        }
        while self.entries.len() > self.max {
            let Some((_, k)) = self.by_age.pop_first() else {
                break;
            };
            self.entries.remove(&k);
        }
        self.check();
    }

    /// What the index has from `start` up to `end` (inclusive; `None`:
    /// to the end of the index), in key order, replaces what the cache had
    /// there: the first entry covers lookups from `start`, each other one
    /// those from just above the one before it.
    pub fn replace_range(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        got: impl IntoIterator<Item = (Vec<u8>, IndexEntry)>,
    ) {
        let stale: Vec<Vec<u8>> = match end {
            Some(end) if end < start => Vec::new(),
            Some(end) => (self.entries)
                .range(start.to_vec()..=end.to_vec())
                .map(|(k, _)| k.clone())
                .collect(),
            None => (self.entries.range(start.to_vec()..))
                .map(|(k, _)| k.clone())
                .collect(),
        };
        for k in stale {
            self.remove(&k);
        }
        let mut from = start.to_vec();
        for (k, e) in got {
            let next = after(&k);
            self.insert(k, e, from);
            from = next;
        }
    }

    /// A split or rebalance committed: the consecutive index entries
    /// `old` were replaced by `new`, which cover the same keys. The first
    /// new entry covers the lookups the first old one covered; each other
    /// one those from just above the one before it.
    pub fn replace_entries(&mut self, old: &[&[u8]], mut new: Vec<(Vec<u8>, IndexEntry)>) {
        new.sort_by(|a, b| a.0.cmp(&b.0));
        let lowest = old.iter().min();
        let mut from = lowest
            .and_then(|k| self.entries.get(*k))
            .map(|c| c.from.clone());
        for k in old {
            self.remove(k);
        }
        for (k, e) in new {
            let next = after(&k);
            let f = from.take().filter(|f| *f <= k).unwrap_or_else(|| k.clone());
            self.insert(k, e, f);
            from = Some(next);
        }
    }

    /// Forget everything and cache `all` (the whole index, in key order:
    /// past the bound, its last entries stay).
    pub fn reset(&mut self, all: impl IntoIterator<Item = (Vec<u8>, IndexEntry)>) {
        self.entries.clear();
        self.by_age.clear();
        self.replace_range(&[], None, all);
    }

    fn check(&self) {
        debug_assert_eq!(self.entries.len(), self.by_age.len());
        debug_assert!(self.entries.len() <= self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(n: &str) -> IndexEntry {
        IndexEntry {
            node: n.into(),
            intent: None,
        }
    }

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn holds_at_most_max_entries_dropping_the_oldest_read() {
        let mut c = IndexCache::new(3);
        let got = [(k("b"), e("n0")), (k("d"), e("n1")), (k("f"), e("n2"))];
        c.replace_range(b"a", Some(b"f"), got);
        // Read "b" again: it becomes the newest, so "d" is the oldest.
        c.replace_range(b"a", Some(b"b"), [(k("b"), e("n0"))]);
        c.replace_range(b"g", Some(b"h"), [(k("h"), e("n3"))]);
        assert_eq!(c.len(), 3);
        assert!(!c.entries.contains_key(&k("d")));
        // "f" still covers the lookups from just above "d".
        assert_eq!(c.at_or_after(b"e").map(|x| x.0), Some(k("f")));
        assert_eq!(c.at_or_after(b"a").map(|x| x.1.node), Some("n0".into()));
    }

    #[test]
    fn a_lookup_below_what_a_read_covered_is_a_miss_not_a_guess() {
        let mut c = IndexCache::new(10);
        // A window read from "c" found "d" and "f"; the index may hold
        // entries below "c" ("b", say), which nothing here shows.
        c.replace_range(b"c", Some(b"f"), [(k("d"), e("d")), (k("f"), e("f"))]);
        assert_eq!(c.at_or_after(b"c").map(|x| x.0), Some(k("d")));
        assert_eq!(c.at_or_after(b"d").map(|x| x.0), Some(k("d")));
        assert_eq!(c.at_or_after(b"e").map(|x| x.0), Some(k("f")));
        assert_eq!(c.at_or_after(b"a"), None, "would have guessed d");
        assert_eq!(c.at_or_after(b"g"), None);
        // A read from "a" that ends at "b" leaves the gap from "b" to "c"
        // unknown.
        c.replace_range(b"a", Some(b"b"), [(k("b"), e("b"))]);
        assert_eq!(c.at_or_after(b"a").map(|x| x.0), Some(k("b")));
        assert_eq!(c.at_or_after(b"bb"), None);
        assert_eq!(c.at_or_after(b"c").map(|x| x.0), Some(k("d")));
    }

    #[test]
    fn a_split_hands_its_nodes_coverage_to_the_new_ones() {
        let mut c = IndexCache::new(10);
        c.replace_range(b"c", Some(b"h"), [(k("d"), e("d")), (k("h"), e("h"))]);
        // "h" (covering lookups above "d") splits into "f" and "h".
        c.replace_entries(&[b"h"], vec![(k("h"), e("h2")), (k("f"), e("f"))]);
        assert_eq!(c.at_or_after(b"e").map(|x| x.1.node), Some("f".into()));
        assert_eq!(c.at_or_after(b"g").map(|x| x.1.node), Some("h2".into()));
        // A node nothing covered: its replacements cover only themselves.
        c.replace_entries(&[b"x"], vec![(k("w"), e("w")), (k("x"), e("x2"))]);
        assert_eq!(c.at_or_after(b"v"), None);
        assert_eq!(c.at_or_after(b"w").map(|x| x.1.node), Some("w".into()));
        assert_eq!(c.at_or_after(b"wa").map(|x| x.1.node), Some("x2".into()));
    }

    #[test]
    fn a_refresh_replaces_the_range_it_read_only() {
        let mut c = IndexCache::new(10);
        let all = ["b", "d", "f", "h"].map(|s| (k(s), e(s)));
        c.replace_range(b"a", None, all);
        // The index now has "e" where "d" and "f" were (a merge).
        c.replace_range(b"c", Some(b"f"), [(k("c"), e("c")), (k("f"), e("f2"))]);
        let keys: Vec<Vec<u8>> = ["b", "c", "f", "h"].iter().map(|s| k(s)).collect();
        assert_eq!(c.entries.keys().cloned().collect::<Vec<_>>(), keys);
        assert_eq!(c.at_or_after(b"e").map(|x| x.1.node), Some("f2".into()));
        // To the end: everything from "g" goes.
        c.replace_range(b"g", None, []);
        assert_eq!(c.at_or_after(b"g"), None);
        assert_eq!(c.last_before(b"a", b"g"), Some(k("f")));
        assert_eq!(c.last_before(b"g", b"a"), None);
    }

    #[test]
    fn the_window_is_a_fifth_of_the_bound() {
        assert_eq!(IndexCache::new(PAPER_MAX).window(), 200);
        assert_eq!(IndexCache::new(DEFAULT_MAX).window(), MAX_WINDOW as u32);
        assert_eq!(IndexCache::new(3).window(), 1);
        let mut c = IndexCache::new(2);
        c.reset([(k("a"), e("a")), (k("b"), e("b")), (k("c"), e("c"))]);
        assert_eq!(c.len(), 2);
        // "a" went: what a lookup from the start finds is unknown now.
        assert_eq!(c.at_or_after(b""), None);
        assert_eq!(c.at_or_after(b"a\0").map(|x| x.0), Some(k("b")));
    }
}
