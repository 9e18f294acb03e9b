//! The one trait every erasure code implements, and helpers shared by the
//! implementations.
//!
//! Implementations must never return bytes for a chunk they could not
//! rebuild: every failure is an `EcError`.

use crate::error::{EcError, Result};
use crate::layout::{check_extents, Available, Layout};
use crate::plan::{PlanOptions, ReadPlan};
use std::collections::BTreeMap;

/// A systematic erasure code: `k` data chunks, `m` parity chunks, each
/// chunk `rows` elements (1 for scalar codes such as Reed-Solomon).
/// Chunk indices are `0..k` for data and `k..k+m` for parity.
pub trait ErasureCode: Send + Sync {
    /// A short description, e.g. `zigzag k=8 m=2 s=2 (basic)`.
    fn profile(&self) -> String;
    /// Data chunks.
    fn k(&self) -> usize;
    /// Parity chunks.
    fn m(&self) -> usize;
    /// Elements per chunk.
    fn rows(&self) -> usize;
    /// Element alignment in bytes.
    fn alignment(&self) -> usize;
    /// The theoretical fraction of the surviving chunks' bytes read to
    /// rebuild one lost data chunk, averaged over data chunks.
    fn rebuilding_ratio(&self) -> f64;

    /// Chunk and element sizes for an object.
    fn layout(&self, object_size: u64) -> Result<Layout> {
        Layout::new(
            object_size,
            self.k(),
            self.m(),
            self.rows(),
            self.alignment(),
        )
    }

    /// Compute the parity chunks from the data chunks (each `data[i]` is
    /// chunk i as stored, padding omitted); `parity` are `m` buffers of
    /// the chunk size.
    fn encode_parity(
        &self,
        layout: &Layout,
        data: &[&[u8]],
        parity: &mut [&mut [u8]],
    ) -> Result<()>;

    /// Encode an object: its layout and its `k + m` chunks (data chunks
    /// without their padding).
    fn encode(&self, object: &[u8]) -> Result<(Layout, Vec<Vec<u8>>)> {
        let layout = self.layout(object.len() as u64)?;
        let data = layout.split(object);
        let mut parity = vec![vec![0u8; layout.chunk_size()]; self.m()];
        {
            let mut refs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
            self.encode_parity(&layout, &data, &mut refs)?;
        }
        let mut chunks: Vec<Vec<u8>> = data.iter().map(|d| d.to_vec()).collect();
        chunks.extend(parity);
        Ok((layout, chunks))
    }

    /// Rebuild the `wanted` chunks (data chunks without padding) from what
    /// is `available` (whole chunks or the extents a read plan named).
    fn decode(
        &self,
        layout: &Layout,
        available: &Available,
        wanted: &[usize],
    ) -> Result<BTreeMap<usize, Vec<u8>>>;

    /// What to read to rebuild the `lost` chunks from the `available`
    /// ones, with its cost.
    fn read_plan(
        &self,
        layout: &Layout,
        lost: &[usize],
        available: &[usize],
        opts: &PlanOptions,
    ) -> Result<ReadPlan>;
}

/// Validate a decode call: the layout matches the code, chunk indices are
/// in range, extents fit; returns the wanted chunks sorted and unique.
pub(crate) fn check_decode(
    code: &dyn ErasureCode,
    layout: &Layout,
    available: &Available,
    wanted: &[usize],
) -> Result<Vec<usize>> {
    check_layout(code, layout)?;
    for (&c, ex) in available {
        check_extents(layout, c, ex)?;
    }
    let mut w = wanted.to_vec();
    w.sort_unstable();
    w.dedup();
    if let Some(&bad) = w.iter().find(|&&c| c >= layout.chunks()) {
        return Err(EcError::InvalidRequest(format!(
            "wanted chunk {bad} but the stripe has {} chunks",
            layout.chunks()
        )));
    }
    Ok(w)
}

/// The layout must be one this code produced.
pub(crate) fn check_layout(code: &dyn ErasureCode, layout: &Layout) -> Result<()> {
    let expect = code.layout(layout.object_size)?;
    if &expect != layout {
        return Err(EcError::InvalidRequest(format!(
            "layout {layout:?} does not belong to {}",
            code.profile()
        )));
    }
    Ok(())
}

/// Validate a plan request: lost and available chunks in range, disjoint,
/// something lost; returns them sorted and unique.
pub(crate) fn check_plan(
    layout: &Layout,
    lost: &[usize],
    available: &[usize],
) -> Result<(Vec<usize>, Vec<usize>)> {
    let n = layout.chunks();
    let mut l = lost.to_vec();
    l.sort_unstable();
    l.dedup();
    let mut a: Vec<usize> = available
        .iter()
        .copied()
        .filter(|c| !l.contains(c))
        .collect();
    a.sort_unstable();
    a.dedup();
    if l.is_empty() {
        return Err(EcError::InvalidRequest("no lost chunk given".into()));
    }
    if let Some(&bad) = l.iter().chain(&a).find(|&&c| c >= n) {
        return Err(EcError::InvalidRequest(format!(
            "chunk {bad} is not in a stripe of {n} chunks"
        )));
    }
    Ok((l, a))
}

/// Data chunk `c` padded to the chunk size (borrowed when already full).
pub(crate) fn padded<'a>(layout: &Layout, c: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
    if c.len() == layout.chunk_size() {
        std::borrow::Cow::Borrowed(c)
    } else {
        let mut v = c.to_vec();
        v.resize(layout.chunk_size(), 0);
        std::borrow::Cow::Owned(v)
    }
}

/// Check `encode_parity` arguments against the layout.
pub(crate) fn check_encode(
    code: &dyn ErasureCode,
    layout: &Layout,
    data: &[&[u8]],
    parity: &[&mut [u8]],
) -> Result<()> {
    check_layout(code, layout)?;
    if data.len() != layout.k || parity.len() != layout.m {
        return Err(EcError::InvalidRequest(format!(
            "encode needs {} data and {} parity buffers, got {} and {}",
            layout.k,
            layout.m,
            data.len(),
            parity.len()
        )));
    }
    for (i, d) in data.iter().enumerate() {
        if d.len() != layout.stored_len(i) {
            return Err(EcError::BadChunk {
                chunk: i,
                msg: format!("{} bytes, expected {}", d.len(), layout.stored_len(i)),
            });
        }
    }
    for (i, p) in parity.iter().enumerate() {
        if p.len() != layout.chunk_size() {
            return Err(EcError::BadChunk {
                chunk: layout.k + i,
                msg: format!(
                    "parity buffer of {} bytes, expected {}",
                    p.len(),
                    layout.chunk_size()
                ),
            });
        }
    }
    Ok(())
}
