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
    loligo_testkit::Rng::new(0).bytes(len)
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

/// Encode and decode an object of `size` bytes, spending about `budget`
/// on each side.
pub fn measure(code: &dyn ErasureCode, size: usize, budget: Duration) -> Result<Throughput> {
    let obj = filler(size);
    let (layout, chunks) = code.encode(&obj)?;
    // Page-aligned copies, as an OSD's O_DIRECT buffers would be.
    let sizes: Vec<usize> = (0..layout.chunks()).map(|c| layout.stored_len(c)).collect();
    let mut bufs = ChunkBuffers::new(&sizes);
    for (dst, src) in bufs.chunks_mut().into_iter().zip(&chunks) {
        dst.copy_from_slice(src);
    }
    let chunks: Vec<&[u8]> = (0..layout.chunks()).map(|c| bufs.chunk(c)).collect();
    let mut pbufs = ChunkBuffers::new(&vec![layout.chunk_size(); layout.m]);
    let enc = time_per_call(budget, || {
        let mut refs = pbufs.chunks_mut();
        code.encode_parity(&layout, &chunks[..layout.k], &mut refs)
    })?;
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
