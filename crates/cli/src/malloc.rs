//! The process's memory allocator: jemalloc for blocks under `LARGE`, the
//! C library's for larger ones, and the C allocator's tuning for a process
//! that moves megabyte payloads.
//!
//! Why two. Small writes allocate many blocks of a few hundred bytes to a
//! few KiB per op (frames, KV keys and values, log entries), and glibc's
//! malloc spent about 15% of a cluster's CPU on them (`_int_malloc`,
//! `malloc_consolidate`, `_int_free`; more as the OSDs' memtables fill),
//! where jemalloc spends less. But 4 MiB payloads ran faster on glibc:
//! under jemalloc alone 4 MiB writes and reads lost up to a fifth (why
//! was not found). Each allocator gets the blocks it served best; with
//! the split, 4 MiB phases measured within their noise of glibc alone.
//!
//! glibc's tuning: it hands the top of a heap back to the kernel as soon
//! as a little is free there, so blocks freed and made again per op
//! fault the same pages in again and again, and the kernel zero-fills
//! each one (on a VM that reports free pages to its host, each fault
//! also goes to the host). A pad of `TOP_PAD` bytes at every heap's top
//! stops that: measured on the local cluster (`loligo up`, four OSDs,
//! size-3 pool, 16 in flight, TLS) before the split, when glibc served
//! every block: cold 4 MiB sequential reads 1,324 -> 1,722-1,801 MB/s,
//! random 1,431 -> 1,756-1,916 MB/s, writes 420 -> 463-468 MB/s. Setting
//! the pad also fixes glibc's mmap threshold at its 128 KiB default, so
//! the 1 MiB and larger blocks it serves now are mapped and unmapped each
//! time; whether a higher `M_MMAP_THRESHOLD` helps them is not measured
//! yet. The cost is at most the pad of memory per arena kept mapped after
//! a burst.
//!
//! This module must never free or resize a block through an allocator
//! other than the one that made it: a block's size decides, the same way
//! at every call (`GlobalAlloc` hands `dealloc` the layout the block was
//! made or last resized with).

use std::alloc::{GlobalAlloc, Layout, System};
use tikv_jemallocator::Jemalloc;

/// Blocks of at least this many bytes come from the C library's
/// allocator, smaller ones from jemalloc.
pub const LARGE: usize = 1 << 20;

/// The process's allocator (see the module comment).
pub struct Split;

fn large(size: usize) -> bool {
    size >= LARGE
}

// SAFETY: each call goes to one of two sound allocators, chosen by the
// block's size alone; `dealloc` and `realloc` get the layout the block
// was made (or last resized) with, so a block always returns to the
// allocator that made it. A resize across `LARGE` makes a new block in the
// other allocator, copies the smaller of the two sizes and frees the old
// block where it was made.
unsafe impl GlobalAlloc for Split {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on unchanged.
        unsafe {
            match large(l.size()) {
                true => System.alloc(l),
                false => Jemalloc.alloc(l),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            match large(l.size()) {
                true => System.alloc_zeroed(l),
                false => Jemalloc.alloc_zeroed(l),
            }
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was made with `l` by the allocator its size picks.
        unsafe {
            match large(l.size()) {
                true => System.dealloc(p, l),
                false => Jemalloc.dealloc(p, l),
            }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        match (large(l.size()), large(new_size)) {
            // SAFETY: the same allocator made `p` with `l`.
            (true, true) => unsafe { System.realloc(p, l, new_size) },
            // SAFETY: as above.
            (false, false) => unsafe { Jemalloc.realloc(p, l, new_size) },
            _ => {
                // SAFETY: the caller guarantees `new_size` with `l`'s
                // alignment is a valid layout; the new block is at least
                // `min(old, new)` long and cannot overlap the live old one.
                unsafe {
                    let nl = Layout::from_size_align_unchecked(new_size, l.align());
                    let q = self.alloc(nl);
                    if !q.is_null() {
                        std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                        self.dealloc(p, l);
                    }
                    q
                }
            }
        }
    }
}

/// Bytes kept at the top of each heap when it grows or shrinks.
const TOP_PAD: i32 = 64 << 20;

/// Apply the tuning; `false` if the C library refused it (or is not
/// glibc, where there is nothing to tune). Call first thing in `main`.
pub fn tune() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets a parameter of glibc's allocator; it
        // takes the allocator's own lock, so it is sound at any time.
        unsafe { libc::mallopt(libc::M_TOP_PAD, TOP_PAD) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks keep their bytes as they grow and shrink across `LARGE`
    /// (each resize then moves them to the other allocator), and every
    /// block goes back to the allocator that made it (a mix-up aborts the
    /// test process in jemalloc or glibc).
    #[test]
    fn blocks_keep_their_bytes_across_both_allocators() {
        let sizes = [1, 100, 4096, LARGE - 1, LARGE, LARGE + 1, 3 * LARGE, 17];
        let mut v: Vec<u8> = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let keep = v.len().min(n);
            let before: Vec<u8> = v[..keep].to_vec();
            v.resize(n, i as u8);
            v.shrink_to_fit();
            assert_eq!(&v[..keep], &before[..], "resize to {n}");
            assert!(v[keep..].iter().all(|&b| b == i as u8));
        }
        // Zeroed blocks on both sides.
        for n in [64, LARGE + 64] {
            assert!(vec![0u8; n].iter().all(|&b| b == 0));
        }
        // Over-aligned blocks on both sides.
        for n in [4096, 2 * LARGE] {
            let l = Layout::from_size_align(n, 4096).unwrap();
            // SAFETY: a valid layout; the block is freed with it.
            unsafe {
                let p = Split.alloc(l);
                assert!(!p.is_null() && (p as usize).is_multiple_of(4096));
                p.write_bytes(7, n);
                let q = Split.realloc(p, l, n + LARGE);
                assert!(!q.is_null() && (q as usize).is_multiple_of(4096) && *q.add(n - 1) == 7);
                Split.dealloc(q, Layout::from_size_align(n + LARGE, 4096).unwrap());
            }
        }
    }

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_tuning() {
        assert!(super::tune());
    }
}
