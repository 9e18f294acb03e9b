//! The block store's extent allocator: free space as (offset -> length)
//! extents, coalesced in memory. Every change is remembered so the caller
//! can persist exactly the changed keys in the same KV batch as the
//! metadata that uses them.

use super::codec::{u64_key, Enc, T_FREE};
use crate::kv::KvOp;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub struct Allocator {
    free: BTreeMap<u64, u64>,
    /// Offsets whose persisted key may differ from memory.
    touched: BTreeSet<u64>,
    free_bytes: u64,
}

impl Allocator {
    /// From persisted extents (possibly not coalesced): every loaded key is
    /// marked touched so the first persist rewrites them coalesced.
    pub fn load(extents: impl IntoIterator<Item = (u64, u64)>) -> Allocator {
        let mut a = Allocator::default();
        for (off, len) in extents {
            a.touched.insert(off);
            a.release(off, len);
        }
        a
    }

    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Allocate `len` bytes (a multiple of the block size): one extent if
    /// one is large enough (first fit), else several. `None` if there is
    /// not enough free space; nothing changes then.
    pub fn alloc(&mut self, len: u64) -> Option<Vec<(u64, u64)>> {
        if len == 0 {
            return Some(Vec::new());
        }
        if len > self.free_bytes {
            return None;
        }
        if let Some((&off, &l)) = self.free.iter().find(|(_, &l)| l >= len) {
            self.take(off, l, len);
            return Some(vec![(off, len)]);
        }
        let mut out = Vec::new();
        let mut need = len;
        while need > 0 {
            let (&off, &l) = self.free.iter().next_back()?;
            let n = l.min(need);
            self.take(off, l, n);
            out.push((off, n));
            need -= n;
        }
        Some(out)
    }

    fn take(&mut self, off: u64, l: u64, n: u64) {
        self.free.remove(&off);
        self.touched.insert(off);
        if l > n {
            self.free.insert(off + n, l - n);
            self.touched.insert(off + n);
        }
        self.free_bytes -= n;
    }

    /// Return an extent, merging it with free neighbours.
    pub fn release(&mut self, mut off: u64, mut len: u64) {
        if len == 0 {
            return;
        }
        self.free_bytes += len;
        if let Some((&p, &pl)) = self.free.range(..off).next_back() {
            if p + pl == off {
                self.free.remove(&p);
                self.touched.insert(off);
                off = p;
                len += pl;
            }
        }
        if let Some(&nl) = self.free.get(&(off + len)) {
            self.free.remove(&(off + len));
            self.touched.insert(off + len);
            len += nl;
        }
        self.free.insert(off, len);
        self.touched.insert(off);
    }

    /// KV ops that make the persisted free keys equal memory for every
    /// touched offset.
    pub fn persist(&mut self) -> Vec<KvOp> {
        let ops = self
            .touched
            .iter()
            .map(|&off| match self.free.get(&off) {
                Some(&len) => {
                    let mut e = Enc::default();
                    e.var(len);
                    KvOp::Put(u64_key(T_FREE, off), e.0)
                }
                None => KvOp::Delete(u64_key(T_FREE, off)),
            })
            .collect();
        self.touched.clear();
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_release_coalesce() {
        let mut a = Allocator::load([(0, 100), (100, 50), (200, 10)]);
        assert_eq!(a.free_bytes(), 160);
        assert_eq!(a.alloc(120), Some(vec![(0, 120)]));
        assert_eq!(a.alloc(40), Some(vec![(200, 10), (120, 30)]));
        assert_eq!(a.alloc(1), None);
        a.release(120, 30);
        a.release(0, 120);
        assert_eq!(a.free.get(&0), Some(&150));
        let ops = a.persist();
        assert!(ops.contains(&KvOp::Delete(u64_key(T_FREE, 100))));
    }
}
