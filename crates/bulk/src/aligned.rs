//! Page-aligned payload buffers, and a pool that keeps them for reuse.
//!
//! A large payload lives in memory whose start is aligned for O_DIRECT,
//! so a store can hand it to its device as it is. Such buffers are
//! megabytes each; a fresh one costs page faults, the kernel zero-filling
//! the pages, and (for a read into it) zeroing it first. The pool keeps a
//! few and hands them out again, their old content still in them: a
//! caller that takes one with [`BufPool::take_any`] must fill every byte
//! before anyone reads it. A [`Bytes`] made by [`BufPool::bytes`] returns
//! its buffer to the pool when its last clone is dropped.
//!
//! This module must never hand out a buffer whose aligned start is not a
//! multiple of [`ALIGN`], nor keep more than its bound of memory
//! (`BufPool::KEPT_BYTES_MAX`).

use bytes::Bytes;
use std::sync::{Arc, Mutex};

/// Buffer and offset alignment O_DIRECT needs on the devices Loligo targets.
pub const ALIGN: usize = 4096;

/// A buffer whose start is aligned to [`ALIGN`].
pub struct AlignedBuf {
    raw: Vec<u8>,
    off: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + ALIGN];
        let off = (ALIGN - raw.as_ptr() as usize % ALIGN) % ALIGN;
        AlignedBuf { raw, off, len }
    }

    /// `head` zeros, then `data`, then zeros up to `len`, written once
    /// (no zero-fill of the part `data` covers).
    pub fn with_content(head: usize, data: &[u8], len: usize) -> AlignedBuf {
        let mut raw: Vec<u8> = Vec::with_capacity(len + ALIGN);
        let off = (ALIGN - raw.as_ptr() as usize % ALIGN) % ALIGN;
        raw.resize(off + head, 0);
        raw.extend_from_slice(data);
        raw.resize(off + len, 0);
        AlignedBuf { raw, off, len }
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.off..self.off + self.len]
    }

    /// The buffer's bytes, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..self.off + self.len]
    }

    /// Bytes this buffer can hold from its aligned start.
    pub fn capacity(&self) -> usize {
        self.raw.len() - self.off
    }

    /// Refill: `data`, then zeros up to `len` (at most [`capacity`]).
    ///
    /// [`capacity`]: AlignedBuf::capacity
    fn fill(&mut self, data: &[u8], len: usize) {
        debug_assert!(data.len() <= len && len <= self.capacity());
        let o = self.off;
        self.raw[o..o + data.len()].copy_from_slice(data);
        self.raw[o + data.len()..o + len].fill(0);
        self.len = len;
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Aligned buffers kept for reuse.
#[derive(Default)]
pub struct BufPool(Mutex<Vec<AlignedBuf>>);

impl BufPool {
    /// Buffers kept at most, the largest size kept, and the bytes all
    /// kept buffers may hold together (the bound on a pool's memory).
    /// Enough for 32 reads of 4 MiB in flight at once: with 8, 4 MiB
    /// reads at 64 in flight on four OSDs ran out, and each fresh buffer
    /// cost its page faults and zero-fills (a quarter of both cores,
    /// profiled; sequential reads 0.7x of random ones).
    const KEEP_MAX: usize = 32;
    const BYTES_MAX: usize = 8 << 20;
    /// (A 4 MiB buffer's allocation is 4 MiB and up to two pages more:
    /// its alignment slack.)
    const KEPT_BYTES_MAX: usize = Self::KEEP_MAX * ((4 << 20) + 2 * ALIGN);

    /// An aligned buffer of `len` bytes holding `data` then zeros.
    pub fn take(&self, data: &[u8], len: usize) -> AlignedBuf {
        debug_assert!(data.len() <= len);
        match self.reuse(len) {
            Some(mut b) => {
                b.fill(data, len);
                b
            }
            None => AlignedBuf::with_content(0, data, len),
        }
    }

    /// An aligned buffer of `len` bytes whose content is whatever it held
    /// before: for a reader about to fill all of it.
    pub fn take_any(&self, len: usize) -> AlignedBuf {
        match self.reuse(len) {
            Some(mut b) => {
                b.len = len;
                b
            }
            None => AlignedBuf::zeroed(len),
        }
    }

    /// A kept buffer that can hold `len` bytes, if there is one.
    fn reuse(&self, len: usize) -> Option<AlignedBuf> {
        let mut v = self.0.lock().ok()?;
        let i = v.iter().position(|b| b.capacity() >= len)?;
        Some(v.swap_remove(i))
    }

    /// Keep `b` for reuse, if it is not too large and the pool not full.
    pub fn put(&self, b: AlignedBuf) {
        if b.capacity() > Self::BYTES_MAX {
            return;
        }
        if let Ok(mut v) = self.0.lock() {
            // (Counted as allocated, alignment slack included.)
            let kept: usize = v.iter().map(|k| k.raw.capacity()).sum();
            if v.len() < Self::KEEP_MAX && kept + b.raw.capacity() <= Self::KEPT_BYTES_MAX {
                v.push(b);
            }
            debug_assert!(v.len() <= Self::KEEP_MAX);
        }
    }

    /// `b` as shared bytes; the buffer comes back to this pool when the
    /// last clone of them is dropped.
    pub fn bytes(self: &Arc<Self>, b: AlignedBuf) -> Bytes {
        Bytes::from_owner(Pooled {
            buf: Some(b),
            pool: self.clone(),
        })
    }

    /// Buffers kept now.
    pub fn kept(&self) -> usize {
        self.0.lock().map_or(0, |v| v.len())
    }
}

/// A pooled buffer behind a [`Bytes`].
struct Pooled {
    buf: Option<AlignedBuf>,
    pool: Arc<BufPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], AlignedBuf::as_slice)
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.put(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_hold_what_they_were_given() {
        for len in [0usize, 1, 4095, 4096, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let b = AlignedBuf::with_content(3, &data[..len.saturating_sub(3)], len);
            assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
            assert_eq!(b.as_slice().len(), len);
            assert!(b.as_slice()[..len.min(3)].iter().all(|&x| x == 0));
            assert_eq!(&b.as_slice()[len.min(3)..], &data[..len.saturating_sub(3)]);
            let z = AlignedBuf::zeroed(len);
            assert_eq!(z.as_slice().as_ptr() as usize % ALIGN, 0);
            assert!(z.as_slice().iter().all(|&x| x == 0));
        }
    }

    /// A buffer comes back when the last clone of its bytes goes, is
    /// handed out again aligned, and `take` overwrites its old content;
    /// the pool keeps no more than its bound.
    #[test]
    fn the_pool_reuses_buffers_and_keeps_a_bounded_number() {
        let pool = Arc::new(BufPool::default());
        let mut b = pool.take_any(10_000);
        b.as_mut_slice().fill(0xab);
        let bytes = pool.bytes(b);
        let view = bytes.slice(100..200);
        drop(bytes);
        assert_eq!(pool.kept(), 0, "a clone still holds it");
        assert!(view.iter().all(|&x| x == 0xab));
        drop(view);
        assert_eq!(pool.kept(), 1);
        let again = pool.take(&[1, 2, 3], 5000);
        assert_eq!(pool.kept(), 0);
        assert_eq!(again.as_slice(), &[&[1, 2, 3][..], &[0; 4997]].concat()[..]);
        assert_eq!(again.as_slice().as_ptr() as usize % ALIGN, 0);
        for _ in 0..BufPool::KEEP_MAX + 5 {
            pool.put(AlignedBuf::zeroed(4096));
        }
        assert_eq!(pool.kept(), BufPool::KEEP_MAX);
        pool.put(AlignedBuf::zeroed(BufPool::BYTES_MAX + 1));
        assert_eq!(pool.kept(), BufPool::KEEP_MAX);
    }

    /// Large buffers are kept only while their allocations together stay
    /// within the pool's byte bound, which holds a full pool of 4 MiB
    /// buffers.
    #[test]
    fn the_pool_keeps_no_more_bytes_than_its_bound() {
        let pool = BufPool::default();
        for _ in 0..BufPool::KEEP_MAX {
            pool.put(AlignedBuf::zeroed(BufPool::BYTES_MAX - ALIGN));
        }
        let n = pool.kept();
        assert!(n < BufPool::KEEP_MAX, "{n} buffers of 8 MiB kept");
        assert_eq!(n, BufPool::KEPT_BYTES_MAX / BufPool::BYTES_MAX);
        let pool = BufPool::default();
        let taken: Vec<AlignedBuf> = (0..BufPool::KEEP_MAX)
            .map(|_| pool.take_any(4 << 20))
            .collect();
        for b in taken {
            pool.put(b);
        }
        assert_eq!(
            pool.kept(),
            BufPool::KEEP_MAX,
            "a full pool of 4 MiB buffers"
        );
    }
}
