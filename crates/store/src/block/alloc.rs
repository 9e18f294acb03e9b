//! The block store's extent allocator. Two coalesced maps of free space:
//!
//! - `avail`: what may be handed out now;
//! - `persisted`: what the KV's free keys say. It is a superset of
//!   `avail`: it also holds space reserved by writers whose transaction
//!   has not committed yet (so a crash leaves it free, not leaked) and
//!   space freed by a batch that is not yet safe to reuse.
//!
//! Every offset whose persisted key may have changed is remembered, so the
//! caller can write exactly those keys in the same KV batch as the
//! metadata that uses the space.
//!
//! It must never hand out space that the persisted map does not list as
//! free, nor let `avail` hold space missing from `persisted`.

use super::codec::{u64_key, Enc, T_FREE};
use crate::kv::KvOp;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub struct Allocator {
    avail: BTreeMap<u64, u64>,
    persisted: BTreeMap<u64, u64>,
    /// Offsets whose persisted key may differ from `persisted`.
    touched: BTreeSet<u64>,
    avail_bytes: u64,
}

/// Whether `[off, off + len)` overlaps no entry of `m`.
fn disjoint(m: &BTreeMap<u64, u64>, off: u64, len: u64) -> bool {
    let before = m
        .range(..=off)
        .next_back()
        .is_none_or(|(&p, &pl)| p + pl <= off);
    let after = m.range(off..).next().is_none_or(|(&n, _)| off + len <= n);
    before && after
}

/// Whether `[off, off + len)` lies inside one entry of `m`.
fn within(m: &BTreeMap<u64, u64>, off: u64, len: u64) -> bool {
    m.range(..=off)
        .next_back()
        .is_some_and(|(&s, &l)| off + len <= s + l)
}

/// Insert `[off, off + len)` into a coalesced map; reports the start
/// offsets whose entries changed. The range must overlap no entry.
fn insert(m: &mut BTreeMap<u64, u64>, mut off: u64, mut len: u64, touched: &mut dyn FnMut(u64)) {
    debug_assert!(
        disjoint(m, off, len),
        "inserting [{off}, +{len}) over free space"
    );
    touched(off);
    if let Some((&p, &pl)) = m.range(..off).next_back() {
        if p + pl == off {
            m.remove(&p);
            off = p;
            len += pl;
        }
    }
    if let Some(&nl) = m.get(&(off + len)) {
        m.remove(&(off + len));
        touched(off + len);
        len += nl;
    }
    m.insert(off, len);
    touched(off);
}

/// Remove `[off, off + len)`, which must lie inside one entry.
fn remove(m: &mut BTreeMap<u64, u64>, off: u64, len: u64, touched: &mut dyn FnMut(u64)) -> bool {
    let Some((&s, &l)) = m.range(..=off).next_back() else {
        return false;
    };
    if off + len > s + l {
        return false;
    }
    m.remove(&s);
    touched(s);
    if off > s {
        m.insert(s, off - s);
    }
    if off + len < s + l {
        m.insert(off + len, s + l - off - len);
        touched(off + len);
    }
    true
}

impl Allocator {
    /// From persisted extents (maybe not coalesced): every loaded key is
    /// marked touched so the first persist rewrites them coalesced.
    pub fn load(extents: impl IntoIterator<Item = (u64, u64)>) -> Allocator {
        let mut a = Allocator::default();
        for (off, len) in extents {
            // Keys that overlap (a damaged table) are left out, and
            // deleted at the first persist: that space is leaked, never
            // handed out twice.
            a.touched.insert(off);
            if len == 0 || off.checked_add(len).is_none() || !disjoint(&a.persisted, off, len) {
                continue;
            }
            a.free(off, len);
            a.make_available(off, len);
        }
        a
    }

    /// Bytes that can be allocated now.
    pub fn free_bytes(&self) -> u64 {
        self.avail_bytes
    }

    /// Take `len` bytes from the available space without changing what is
    /// persisted (first fit; several pieces if no single extent is large
    /// enough). `None` if there is not enough; nothing changes then.
    pub fn reserve(&mut self, len: u64) -> Option<Vec<(u64, u64)>> {
        if len == 0 {
            return Some(Vec::new());
        }
        if len > self.avail_bytes {
            return None;
        }
        let mut out = Vec::new();
        if let Some((&off, _)) = self.avail.iter().find(|(_, &l)| l >= len) {
            out.push((off, len));
        } else {
            let mut need = len;
            for (&off, &l) in self.avail.iter().rev() {
                let n = l.min(need);
                out.push((off, n));
                need -= n;
                if need == 0 {
                    break;
                }
            }
        }
        for &(off, n) in &out {
            // Handed out only what a crash would leave free.
            debug_assert!(
                within(&self.persisted, off, n),
                "reserving unpersisted space"
            );
            remove(&mut self.avail, off, n, &mut |_| {});
            self.avail_bytes -= n;
        }
        Some(out)
    }

    /// Reserved space is now used by committed metadata: drop it from the
    /// persisted free map.
    pub fn commit_reserved(&mut self, pieces: &[(u64, u64)]) {
        for &(off, n) in pieces {
            let t = &mut self.touched;
            let ok = remove(&mut self.persisted, off, n, &mut |o| {
                t.insert(o);
            });
            debug_assert!(ok, "committing space that was not free");
        }
    }

    /// Give back reserved space that was never committed.
    pub fn unreserve(&mut self, pieces: &[(u64, u64)]) {
        for &(off, n) in pieces {
            self.make_available(off, n);
        }
    }

    /// Reserve and commit at once.
    pub fn alloc(&mut self, len: u64) -> Option<Vec<(u64, u64)>> {
        let p = self.reserve(len)?;
        self.commit_reserved(&p);
        Some(p)
    }

    /// Space no longer referenced: free in the persisted map now, not yet
    /// available (see [`Allocator::make_available`]). Space already free
    /// (a damaged record naming blocks twice) is left as it is, never
    /// listed twice: `false` then.
    pub fn free(&mut self, off: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        if off.checked_add(len).is_none() || !disjoint(&self.persisted, off, len) {
            return false;
        }
        let t = &mut self.touched;
        insert(&mut self.persisted, off, len, &mut |o| {
            t.insert(o);
        });
        true
    }

    /// Freed space that is now safe to hand out: only what the persisted
    /// map lists as free and is not available already (space whose free
    /// was refused stays out).
    pub fn make_available(&mut self, off: u64, len: u64) {
        if len == 0 || !within(&self.persisted, off, len) || !disjoint(&self.avail, off, len) {
            return;
        }
        insert(&mut self.avail, off, len, &mut |_| {});
        self.avail_bytes += len;
    }

    /// KV ops that make the persisted free keys equal `persisted` for every
    /// touched offset.
    pub fn persist(&mut self) -> Vec<KvOp> {
        let ops = self
            .touched
            .iter()
            .map(|&off| match self.persisted.get(&off) {
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

    fn persisted_after(a: &mut Allocator, keys: &mut BTreeMap<u64, u64>) {
        for op in a.persist() {
            match op {
                KvOp::Put(k, v) => {
                    keys.insert(super::super::codec::decode_u64_key(&k).unwrap(), {
                        super::super::codec::Dec::new(&v).var().unwrap()
                    });
                }
                KvOp::Delete(k) => {
                    keys.remove(&super::super::codec::decode_u64_key(&k).unwrap());
                }
            }
        }
    }

    #[test]
    fn reservations_stay_persisted_free_until_committed() {
        let mut keys = BTreeMap::from([(0u64, 100u64), (100, 50), (200, 10)]);
        let mut a = Allocator::load(keys.clone());
        persisted_after(&mut a, &mut keys);
        assert_eq!(keys, BTreeMap::from([(0, 150), (200, 10)]));
        let r = a.reserve(120).unwrap();
        assert_eq!(r, vec![(0, 120)]);
        assert_eq!(a.free_bytes(), 40);
        // The committer allocates and persists meanwhile: the reservation
        // must still read as free on disk.
        let c = a.alloc(30).unwrap();
        assert_eq!(c, vec![(120, 30)]);
        persisted_after(&mut a, &mut keys);
        assert_eq!(keys, BTreeMap::from([(0, 120), (200, 10)]));
        a.commit_reserved(&r);
        persisted_after(&mut a, &mut keys);
        assert_eq!(keys, BTreeMap::from([(200, 10)]));
        a.free(0, 120);
        persisted_after(&mut a, &mut keys);
        assert_eq!(keys, BTreeMap::from([(0, 120), (200, 10)]));
        assert_eq!(a.free_bytes(), 10, "freed space is not available yet");
        a.make_available(0, 120);
        assert_eq!(a.free_bytes(), 130);
        assert_eq!(a.reserve(200), None);
        let both = a.reserve(125).unwrap();
        assert_eq!(both, vec![(200, 10), (0, 115)]);
    }

    #[test]
    fn overlapping_free_keys_are_leaked_not_handed_out_twice() {
        // A damaged table: [50, 150) overlaps [0, 100); an empty and a
        // wrapping key.
        let keys = [
            (0u64, 100u64),
            (50, 100),
            (300, 0),
            (u64::MAX - 1, 10),
            (200, 20),
        ];
        let mut a = Allocator::load(keys);
        assert_eq!(a.free_bytes(), 120);
        // The first persist deletes the keys left out, so a later load
        // cannot take them for free once [0, 100) is used.
        let mut stored: BTreeMap<u64, u64> = keys.into_iter().collect();
        persisted_after(&mut a, &mut stored);
        assert_eq!(stored, BTreeMap::from([(0, 100), (200, 20)]));
        let mut got = a.reserve(120).unwrap();
        got.sort();
        assert_eq!(got, vec![(0, 100), (200, 20)]);
        assert_eq!(a.reserve(1), None);
    }

    #[test]
    fn space_is_never_listed_free_twice() {
        let mut keys = BTreeMap::from([(0u64, 100u64)]);
        let mut a = Allocator::load(keys.clone());
        persisted_after(&mut a, &mut keys);
        // Freeing free space (a damaged record) changes nothing.
        assert!(!a.free(40, 10));
        a.make_available(40, 10);
        assert_eq!(a.free_bytes(), 100);
        let got = a.alloc(100).unwrap();
        assert_eq!(got, vec![(0, 100)]);
        assert_eq!(a.reserve(1), None);
        // Space freed once goes back once.
        assert!(a.free(20, 10));
        assert!(!a.free(25, 10));
        a.make_available(20, 10);
        a.make_available(20, 10);
        assert_eq!(a.free_bytes(), 10);
    }
}
