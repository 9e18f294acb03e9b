//! Encode and single-failure decode throughput of a code on one thread
//! (what `loligo ec bench` and `cargo bench -p loligo-ec` report). The
//! decode side rebuilds each data chunk in turn from exactly the bytes its
//! recovery plan reads, and checks the result. Chunks live in page-aligned
//! buffers, as an OSD's O_DIRECT buffers do.
//!
//! It must never time a decode whose result it has not checked.

use crate::code::ErasureCode;
use crate::error::{EcError, Result};
use crate::layout::{Available, ChunkBuffers, ChunkExtents};
use crate::plan::PlanOptions;
use std::time::{Duration, Instant};

/// Measured speeds, in GB/s of object data (10^9 bytes per second).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Throughput {
    pub encode_gbps: f64,
    pub decode_gbps: f64,
}

/// Deterministic pseudo-random bytes, so runs are repeatable.
pub fn filler(len: usize) -> Vec<u8> {
    crate::xorshift::Xorshift::from_state(0x9e37_79b9_7f4a_7c15).bytes(len)
}

/// Run `f` once to warm up, then until `budget` has passed (at least
/// twice); returns seconds per call.
pub fn time_per_call(budget: Duration, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let start = Instant::now();
    let mut n = 0u32;
    while n < 2 || start.elapsed() < budget {
        f()?;
        n += 1;
    }
    Ok(start.elapsed().as_secs_f64() / f64::from(n))
}

/// An object of `size` bytes encoded by `code`, its chunks copied into
/// page-aligned buffers, as an OSD's O_DIRECT buffers would be.
fn encoded(code: &dyn ErasureCode, size: usize) -> Result<(crate::layout::Layout, ChunkBuffers)> {
    let layout = code.layout(size as u64)?;
    let sizes: Vec<usize> = (0..layout.chunks()).map(|c| layout.stored_len(c)).collect();
    let mut bufs = ChunkBuffers::new(&sizes);
    let obj = filler(size);
    for (dst, src) in bufs.chunks_mut().into_iter().zip(layout.split(&obj)) {
        dst.copy_from_slice(src);
    }
    encode_in_place(code, &layout, &mut bufs)?;
    Ok((layout, bufs))
}

/// `layout`'s parity chunks in `bufs` computed from its data chunks there.
fn encode_in_place(
    code: &dyn ErasureCode,
    layout: &crate::layout::Layout,
    bufs: &mut ChunkBuffers,
) -> Result<()> {
    let mut data = bufs.chunks_mut();
    let mut parity = data.split_off(layout.k.min(data.len()));
    let data: Vec<&[u8]> = data.into_iter().map(|c| &*c).collect();
    code.encode_parity(layout, &data, &mut parity)
}

/// Seconds per parity encode of `layout`'s data chunks in `bufs` into its
/// parity chunks (rewritten with the same bytes), over `budget`. Data and
/// parity sit in one allocation, one after the other, as the peer's
/// shards do (separate allocations measured up to a fifth slower).
fn time_encode(
    code: &dyn ErasureCode,
    layout: &crate::layout::Layout,
    bufs: &mut ChunkBuffers,
    budget: Duration,
) -> Result<f64> {
    // The chunk slices are cut once, as the peer's shards are.
    let mut data = bufs.chunks_mut();
    let mut parity = data.split_off(layout.k.min(data.len()));
    let data: Vec<&[u8]> = data.into_iter().map(|c| &*c).collect();
    time_per_call(budget, || code.encode_parity(layout, &data, &mut parity))
}

/// Encode throughput alone (GB/s of object data) for an object of `size`
/// bytes, over about `budget`.
pub fn measure_encode(code: &dyn ErasureCode, size: usize, budget: Duration) -> Result<f64> {
    let (layout, mut bufs) = encoded(code, size)?;
    let enc = time_encode(code, &layout, &mut bufs, budget)?;
    Ok(size as f64 / enc / 1e9)
}

/// Reed-Solomon encode of `k` data chunks of `chunk` bytes by Loligo
/// (`ours`, one measurement in GB/s per call) and by klauspost/reedsolomon
/// ([`klauspost_encode_gbps`], limited to `backend`'s instruction sets),
/// in `rounds` alternating rounds; returns the best of each side (GB/s),
/// so a noisy neighbour hurts neither side more.
///
/// Each of the peer's rounds is a new process with its buffers in memory
/// it has just mapped, and where buffers fall in the caches moves the
/// speed of a 1 MiB-chunk encode by up to a fifth on this project's VM (a
/// process that has allocated and freed before places them worse). So
/// `ours` should measure in a new process too, as `cargo bench` and `loligo
/// ec bench --peer` do.
pub fn versus_klauspost(
    peer: &std::path::Path,
    (k, m, chunk): (usize, usize, usize),
    seconds: f64,
    backend: crate::kernel::Backend,
    rounds: usize,
    mut ours: impl FnMut() -> std::result::Result<f64, String>,
) -> std::result::Result<(f64, f64), String> {
    let (mut best_ours, mut best_theirs) = (0.0f64, 0.0f64);
    for _ in 0..rounds.max(1) {
        best_ours = best_ours.max(ours()?);
        let p = klauspost_encode_gbps(peer, k, m, chunk, seconds.max(0.5), backend)?;
        best_theirs = best_theirs.max(p);
    }
    Ok((best_ours, best_theirs))
}

/// Encode and decode an object of `size` bytes, spending about `budget`
/// on each side.
pub fn measure(code: &dyn ErasureCode, size: usize, budget: Duration) -> Result<Throughput> {
    let (layout, mut bufs) = encoded(code, size)?;
    let enc = time_encode(code, &layout, &mut bufs, budget)?;
    let chunks: Vec<&[u8]> = (0..layout.chunks()).map(|c| bufs.chunk(c)).collect();
    let n = layout.chunks();
    let lost_set: Vec<usize> = (0..layout.k)
        .filter(|&c| layout.stored_len(c) > 0)
        .collect();
    let per = budget.div_f64(lost_set.len().max(1) as f64);
    let mut dec_total = 0.0;
    for &lost in &lost_set {
        let others: Vec<usize> = (0..n).filter(|&c| c != lost).collect();
        let plan = code.read_plan(&layout, &[lost], &others, &PlanOptions::default())?;
        let avail: Available = plan
            .reads
            .iter()
            .map(|(&c, r)| {
                let ex = r
                    .ios
                    .iter()
                    .map(|&(off, len)| {
                        (off as usize, &chunks[c][off as usize..(off + len) as usize])
                    })
                    .collect();
                (c, ChunkExtents { extents: ex })
            })
            .collect();
        let got = code.decode(&layout, &avail, &[lost])?;
        if got.get(&lost).map(Vec::as_slice) != Some(chunks[lost]) {
            return Err(EcError::NotDecodable(format!(
                "{}: chunk {lost} decoded to wrong bytes",
                code.profile()
            )));
        }
        dec_total += time_per_call(per, || code.decode(&layout, &avail, &[lost]).map(|_| ()))?;
    }
    let dec = dec_total / lost_set.len().max(1) as f64;
    Ok(Throughput {
        encode_gbps: size as f64 / enc / 1e9,
        decode_gbps: size as f64 / dec / 1e9,
    })
}

/// Reed-Solomon encode throughput of klauspost/reedsolomon (GB/s of data)
/// from the peer program in `crates/ec/benches/peer` (built with `go
/// build`), on one goroutine with a Cauchy matrix, `k` + `m` shards of
/// `shard` bytes, about `seconds` long, limited to the instruction sets
/// that match `backend`.
pub fn klauspost_encode_gbps(
    peer: &std::path::Path,
    k: usize,
    m: usize,
    shard: usize,
    seconds: f64,
    backend: crate::kernel::Backend,
) -> std::result::Result<f64, String> {
    let out = std::process::Command::new(peer)
        .args([
            k.to_string(),
            m.to_string(),
            shard.to_string(),
            format!("{seconds}"),
            backend.name().to_string(),
        ])
        .output()
        .map_err(|e| format!("{}: {e}", peer.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            peer.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // The peer prints one line, `{"encode_gbps": NUMBER}`.
    text.trim()
        .strip_prefix("{\"encode_gbps\":")
        .and_then(|r| r.strip_suffix('}'))
        .and_then(|n| n.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("{}: unreadable answer {text:?}", peer.display()))
}
