//! A bounded cache of large runs of blocks read from the device, kept as
//! BlueStore keeps the buffers it reads: an object read again soon (a hot
//! object, a client retrying, a scrub after a read) is served from memory
//! without a device read or a checksum pass.
//!
//! Entries are keyed by device offset and never overlap. Bytes change on
//! the device under a live blob only through deferred writes in place,
//! and space is reused only after it is freed: the committer drops every
//! range it defers a write to or frees, while it holds the store's view
//! lock exclusively, and readers insert while they hold it shared. The
//! cache must therefore never be filled outside a reader's view, and
//! never hand out bytes that were not checked against their checksums.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One cached run.
struct Entry {
    data: Bytes,
    /// When it was last inserted or read: the key of its `by_age` slot.
    tick: u64,
}

#[derive(Default)]
struct Inner {
    by_off: BTreeMap<u64, Entry>,
    /// Ticks to offsets, oldest first: what to evict.
    by_age: BTreeMap<u64, u64>,
    tick: u64,
    bytes: usize,
}

impl Inner {
    fn remove(&mut self, off: u64) {
        if let Some(e) = self.by_off.remove(&off) {
            self.by_age.remove(&e.tick);
            self.bytes -= e.data.len();
        }
    }

    /// Offsets of entries overlapping `[off, off + len)`.
    fn overlapping(&self, off: u64, len: u64) -> Vec<u64> {
        let end = off.saturating_add(len);
        // Entries do not overlap one another, so walking down from the
        // last one starting before `end`, the first that ends at or
        // before `off` ends the walk.
        self.by_off
            .range(..end)
            .rev()
            .take_while(|(&o, e)| o.saturating_add(e.data.len() as u64) > off)
            .map(|(&o, _)| o)
            .collect()
    }
}

/// The cache: at most `max` bytes of runs, the least recently used
/// evicted first.
pub(crate) struct ReadCache {
    inner: Mutex<Inner>,
    max: usize,
}

impl ReadCache {
    pub(crate) fn new(max: usize) -> ReadCache {
        ReadCache {
            inner: Mutex::default(),
            max,
        }
    }

    /// The first `len` bytes of the run cached at `off`, if one at least
    /// that long is.
    pub(crate) fn get(&self, off: u64, len: usize) -> Option<Bytes> {
        if self.max == 0 {
            return None;
        }
        let mut g = self.inner.lock().ok()?;
        let inner = &mut *g;
        let e = inner.by_off.get_mut(&off)?;
        if e.data.len() < len {
            return None;
        }
        inner.tick += 1;
        inner.by_age.remove(&e.tick);
        e.tick = inner.tick;
        inner.by_age.insert(e.tick, off);
        Some(e.data.slice(..len))
    }

    /// Keep `data`, the checked contents of the device from `off`, in
    /// place of anything cached over the same range. Runs larger than a
    /// quarter of the cache are not kept: one would flush the rest.
    pub(crate) fn insert(&self, off: u64, data: Bytes) {
        if data.is_empty() || data.len() > self.max / 4 {
            return;
        }
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        let inner = &mut *g;
        for o in inner.overlapping(off, data.len() as u64) {
            inner.remove(o);
        }
        while inner.bytes + data.len() > self.max {
            let Some((_, &old)) = inner.by_age.iter().next() else {
                break;
            };
            inner.remove(old);
        }
        inner.tick += 1;
        let tick = inner.tick;
        inner.bytes += data.len();
        inner.by_age.insert(tick, off);
        inner.by_off.insert(off, Entry { data, tick });
    }

    /// Forget everything cached over `[off, off + len)`.
    pub(crate) fn invalidate(&self, off: u64, len: u64) {
        if let Ok(mut g) = self.inner.lock() {
            if g.by_off.is_empty() {
                return;
            }
            for o in g.overlapping(off, len) {
                g.remove(o);
            }
        }
    }

    /// Bytes held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner.lock().map(|g| g.bytes).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(byte: u8, len: usize) -> Bytes {
        Bytes::from(vec![byte; len])
    }

    #[test]
    fn hits_prefixes_of_what_it_holds_and_nothing_else() {
        let c = ReadCache::new(1 << 20);
        c.insert(8192, run(1, 8192));
        assert_eq!(c.get(8192, 4096), Some(run(1, 4096)));
        assert_eq!(c.get(8192, 8192), Some(run(1, 8192)));
        assert_eq!(c.get(8192, 8193), None, "longer than the run");
        assert_eq!(c.get(4096, 4096), None, "not where a run starts");
        assert_eq!(c.get(12288, 4096), None, "inside a run, not at its start");
    }

    #[test]
    fn invalidation_drops_every_overlapping_run() {
        let c = ReadCache::new(1 << 20);
        for i in 0..4u64 {
            c.insert(i * 16384, run(i as u8, 16384));
        }
        // One byte into the second run's end and the third's start.
        c.invalidate(2 * 16384 - 1, 2);
        assert!(c.get(0, 16384).is_some());
        assert!(c.get(16384, 1).is_none());
        assert!(c.get(2 * 16384, 1).is_none());
        assert!(c.get(3 * 16384, 16384).is_some());
        // Ends are exclusive: a range that stops where a run starts keeps it.
        c.invalidate(16384 * 3 - 10, 10);
        assert!(c.get(3 * 16384, 1).is_some());
        assert_eq!(c.bytes(), 2 * 16384);
    }

    #[test]
    fn an_insert_replaces_what_it_overlaps_and_evicts_the_least_recent() {
        let c = ReadCache::new(64 << 10);
        c.insert(0, run(1, 16384));
        c.insert(8192, run(2, 16384)); // overlaps the first
        assert!(c.get(0, 1).is_none());
        assert_eq!(c.get(8192, 16384), Some(run(2, 16384)));
        c.insert(1 << 20, run(3, 16384));
        c.insert(2 << 20, run(4, 16384));
        c.insert(3 << 20, run(5, 16384)); // full now
        assert_eq!(c.bytes(), 64 << 10);
        c.get(8192, 1); // now the most recent
        c.insert(4 << 20, run(6, 16384)); // 1 << 20 goes
        assert!(c.get(1 << 20, 1).is_none());
        for off in [8192, 2 << 20, 3 << 20, 4 << 20] {
            assert!(c.get(off, 1).is_some(), "{off}");
        }
        assert_eq!(c.bytes(), 64 << 10);
        // Too large to keep: more than a quarter of the cache.
        c.insert(5 << 20, run(7, 17 << 10));
        assert!(c.get(5 << 20, 1).is_none());
    }

    #[test]
    fn a_zero_sized_cache_holds_nothing() {
        let c = ReadCache::new(0);
        c.insert(0, run(1, 4096));
        assert!(c.get(0, 1).is_none());
        assert_eq!(c.bytes(), 0);
    }
}
