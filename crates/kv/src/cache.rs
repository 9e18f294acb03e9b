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
    /// Index key -> (when read, the entry).
    entries: BTreeMap<Vec<u8>, (u64, IndexEntry)>,
    /// When read -> index key: the oldest first.
    by_age: BTreeMap<u64, Vec<u8>>,
    next: u64,
    max: usize,
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

    /// The first entry at or after index key `start` (the node that holds
    /// a key whose lookup starts there, if the cache is right).
    pub fn at_or_after(&self, start: &[u8]) -> Option<(Vec<u8>, IndexEntry)> {
        self.entries
            .range(start.to_vec()..)
            .next()
            .map(|(k, (_, e))| (k.clone(), e.clone()))
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
        if let Some((age, _)) = self.entries.remove(key) {
            self.by_age.remove(&age);
        }
        self.check();
    }

    /// Cache `entry` at `key` as the newest, dropping the oldest entries
    /// beyond the bound.
    pub fn insert(&mut self, key: Vec<u8>, entry: IndexEntry) {
        let age = self.next;
        self.next += 1;
        self.by_age.insert(age, key.clone());
        if let Some((old, _)) = self.entries.insert(key, (age, entry)) {
            self.by_age.remove(&old);
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
    /// to the end of the index) replaces what the cache had there.
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
        for (k, e) in got {
            self.insert(k, e);
        }
    }

    /// Forget everything and cache `all` (the whole index, in key order:
    /// past the bound, its last entries stay).
    pub fn reset(&mut self, all: impl IntoIterator<Item = (Vec<u8>, IndexEntry)>) {
        self.entries.clear();
        self.by_age.clear();
        for (k, e) in all {
            self.insert(k, e);
        }
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
        for (i, key) in ["b", "d", "f"].iter().enumerate() {
            c.insert(k(key), e(&format!("n{i}")));
        }
        // Read "b" again: it becomes the newest, so "d" is the oldest.
        c.insert(k("b"), e("n0"));
        c.insert(k("h"), e("n3"));
        assert_eq!(c.len(), 3);
        assert_eq!(c.at_or_after(b"c").map(|x| x.0), Some(k("f")));
        assert_eq!(c.at_or_after(b"a").map(|x| x.1.node), Some("n0".into()));
    }

    #[test]
    fn a_refresh_replaces_the_range_it_read_only() {
        let mut c = IndexCache::new(10);
        for key in ["b", "d", "f", "h"] {
            c.insert(k(key), e(key));
        }
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
        assert_eq!(c.at_or_after(b"").map(|x| x.0), Some(k("b")));
    }
}
