//! The C allocator's tuning for a process that moves megabyte payloads.
//!
//! glibc's malloc hands the top of a heap back to the kernel as soon as a
//! little is free there, so a daemon that allocates and frees a 4 MiB
//! buffer per op (a message, a TLS record batch, a read) faults the same
//! pages in again and again, and the kernel zero-fills each one. On a VM
//! that reports free pages to its host, each of those faults also goes to
//! the host. Keeping a pad of `TOP_PAD` bytes at every heap's top stops
//! the churn: measured on the local cluster (`loligo up`, four OSDs,
//! size-3 pool, 16 in flight, TLS), cold 4 MiB sequential reads 1,324 ->
//! 1,722-1,801 MB/s, random 1,431 -> 1,756-1,916 MB/s, writes 420 ->
//! 463-468 MB/s (BENCHMARKS.md, "Cluster"). The cost is at most that pad
//! of memory per arena kept mapped after a burst.
//!
//! This module must only change allocator parameters, never allocate or
//! free through a different allocator.

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
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_tuning() {
        assert!(super::tune());
    }
}
