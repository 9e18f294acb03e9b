//! `CachedKv`: point reads of a few key families (the block store's
//! collections, onodes, blobs and checksum chunks) kept in memory in front
//! of a [`Kv`], as BlueStore keeps its onode cache in front of RocksDB.
//!
//! Why: a 4 KiB overwrite reads its collection, onode, blob and checksum
//! chunk before it changes them, and each engine lookup walks an LSM
//! memtable of many versions of the same keys; in the committer's profile
//! of random overwrites those lookups were about a fifth of its CPU.
//!
//! Coherence: every commit goes through this wrapper, which updates the
//! cached keys it changes once the engine has them. A reader that missed
//! inserts what it read only if no commit ran meanwhile (a generation
//! counter), so a value read before a commit never lands after it.
//!
//! Must never: serve a value older than the last commit that returned;
//! grow past its budget (it drops entries to stay under it).

use crate::error::Result;
use crate::kv::{Kv, KvOp, Visitor};
use std::collections::HashMap;
use std::sync::Mutex;

/// A [`Kv`] with a bounded cache of point reads under chosen prefixes.
pub struct CachedKv<K: Kv> {
    inner: K,
    /// First key bytes whose values are cached.
    prefixes: Vec<u8>,
    budget: usize,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    map: HashMap<Vec<u8>, Option<Vec<u8>>>,
    bytes: usize,
    generation: u64,
    hits: u64,
    misses: u64,
}

/// Per-entry overhead counted against the budget besides key and value.
const ENTRY_COST: usize = 64;

fn cost(k: &[u8], v: &Option<Vec<u8>>) -> usize {
    ENTRY_COST + k.len() + v.as_ref().map_or(0, Vec::len)
}

impl Cache {
    fn put(&mut self, k: Vec<u8>, v: Option<Vec<u8>>, budget: usize) {
        let c = cost(&k, &v);
        if let Some(old) = self.map.insert(k.clone(), v) {
            self.bytes -= cost(&k, &old);
        }
        self.bytes += c;
        if self.bytes > budget {
            // Drop about a quarter, in the map's own (arbitrary) order.
            let target = budget / 4 * 3;
            let mut bytes = self.bytes;
            self.map.retain(|k, v| {
                if bytes <= target {
                    return true;
                }
                bytes -= cost(k, v);
                false
            });
            self.bytes = bytes;
        }
    }
}

impl<K: Kv> CachedKv<K> {
    /// Cache point reads of keys starting with one of `prefixes`, in at
    /// most about `budget` bytes.
    pub fn new(inner: K, prefixes: &[u8], budget: usize) -> CachedKv<K> {
        CachedKv {
            inner,
            prefixes: prefixes.to_vec(),
            budget,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The engine below.
    pub fn inner(&self) -> &K {
        &self.inner
    }

    fn cached(&self, k: &[u8]) -> bool {
        k.first().is_some_and(|b| self.prefixes.contains(b))
    }

    /// (hits, misses) since creation.
    pub fn hit_counts(&self) -> (u64, u64) {
        self.cache
            .lock()
            .map(|c| (c.hits, c.misses))
            .unwrap_or_default()
    }
}

impl<K: Kv> Kv for CachedKv<K> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if !self.cached(key) {
            return self.inner.get(key);
        }
        let generation = match self.cache.lock() {
            Ok(mut c) => {
                if let Some(v) = c.map.get(key).cloned() {
                    c.hits += 1;
                    return Ok(v);
                }
                c.misses += 1;
                c.generation
            }
            Err(_) => return self.inner.get(key),
        };
        let v = self.inner.get(key)?;
        if let Ok(mut c) = self.cache.lock() {
            if c.generation == generation {
                c.put(key.to_vec(), v.clone(), self.budget);
            }
        }
        Ok(v)
    }

    fn visit(&self, start: &[u8], end: Option<&[u8]>, visit: &mut Visitor<'_>) -> Result<()> {
        self.inner.visit(start, end, visit)
    }

    fn commit(&self, batch: Vec<KvOp>, sync: bool) -> Result<()> {
        let updates: Vec<(Vec<u8>, Option<Vec<u8>>)> = batch
            .iter()
            .filter_map(|op| match op {
                KvOp::Put(k, v) if self.cached(k) => Some((k.clone(), Some(v.clone()))),
                KvOp::Delete(k) if self.cached(k) => Some((k.clone(), None)),
                _ => None,
            })
            .collect();
        let res = self.inner.commit(batch, sync);
        // On failure too: what the engine holds is then unknown, so the
        // changed keys are dropped rather than kept.
        let mut c = match self.cache.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        c.generation += 1;
        for (k, v) in updates {
            if res.is_ok() {
                c.put(k, v, self.budget);
            } else if let Some(old) = c.map.remove(&k) {
                c.bytes -= cost(&k, &old);
            }
        }
        res
    }

    fn persist(&self) -> Result<()> {
        self.inner.persist()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim_media::SimKv as ModelKv;
    use std::sync::Arc;

    type Hook = Box<dyn FnOnce() + Send>;

    /// An engine that runs a hook inside a read, after it read the value:
    /// a commit landing between a reader's miss and its insert.
    #[derive(Default)]
    struct Racy {
        plain: ModelKv,
        hook: Mutex<Option<Hook>>,
    }

    impl Kv for Racy {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            let v = self.plain.get(key)?;
            let hook = self.hook.lock().unwrap().take();
            if let Some(h) = hook {
                h();
            }
            Ok(v)
        }
        fn visit(&self, start: &[u8], end: Option<&[u8]>, visit: &mut Visitor<'_>) -> Result<()> {
            self.plain.visit(start, end, visit)
        }
        fn commit(&self, batch: Vec<KvOp>, sync: bool) -> Result<()> {
            self.plain.commit(batch, sync)
        }
        fn persist(&self) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_value_read_before_a_commit_is_not_cached_after_it() {
        let kv = Arc::new(CachedKv::new(Racy::default(), b"O", 1 << 20));
        kv.commit(vec![KvOp::Put(b"Ok".to_vec(), b"old".to_vec())], true)
            .unwrap();
        // Not cached yet (commits cache what they write): drop it.
        kv.cache.lock().unwrap().map.clear();
        let kv2 = kv.clone();
        *kv.inner().hook.lock().unwrap() = Some(Box::new(move || {
            kv2.commit(vec![KvOp::Put(b"Ok".to_vec(), b"new".to_vec())], true)
                .unwrap();
        }));
        // This read saw "old", and the commit of "new" returned before it
        // ends; a later read must give "new".
        assert_eq!(kv.get(b"Ok").unwrap().unwrap(), b"old");
        assert_eq!(kv.get(b"Ok").unwrap().unwrap(), b"new");
    }

    /// Random puts, deletes and reads from several threads against the
    /// engine itself: a read after a commit returned always sees it, and
    /// the cache stays within its budget while it serves hits.
    #[test]
    fn reads_see_every_returned_commit_under_a_small_budget() {
        let engine = ModelKv::default();
        let kv = Arc::new(CachedKv::new(engine.clone(), b"O", 4096));
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let kv = kv.clone();
                std::thread::spawn(move || {
                    let mut r = loligo_testkit::Rng::new(w);
                    for i in 0..20_000u64 {
                        // Each writer owns its keys, so what it last wrote
                        // is what a read must give.
                        let k = vec![
                            if r.chance(900) { b'O' } else { b'X' },
                            w as u8,
                            r.below(64) as u8,
                        ];
                        let v = if r.chance(200) {
                            kv.commit(vec![KvOp::Delete(k.clone())], false).unwrap();
                            None
                        } else {
                            let v = i.to_le_bytes().to_vec();
                            kv.commit(vec![KvOp::Put(k.clone(), v.clone())], false)
                                .unwrap();
                            Some(v)
                        };
                        assert_eq!(kv.get(&k).unwrap(), v, "writer {w} op {i}");
                    }
                })
            })
            .collect();
        let reader = {
            let kv = kv.clone();
            std::thread::spawn(move || {
                let mut r = loligo_testkit::Rng::new(9);
                for _ in 0..50_000 {
                    let k = vec![b'O', r.below(2) as u8, r.below(64) as u8];
                    kv.get(&k).unwrap();
                }
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        reader.join().unwrap();
        // Every cached key agrees with the engine at the end.
        let c = kv.cache.lock().unwrap();
        assert!(c.bytes <= 4096, "{} bytes cached", c.bytes);
        for (k, v) in &c.map {
            assert_eq!(&engine.get(k).unwrap(), v, "key {k:?}");
        }
        assert!(
            c.hits > 0 && c.misses > 0,
            "{} hits, {} misses",
            c.hits,
            c.misses
        );
    }
}
