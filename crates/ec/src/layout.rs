//! How an object's bytes become chunks and elements, and how a decoder
//! sees the parts of chunks it was given.
//!
//! An object of `object_size` bytes is striped in block granularity: data
//! chunk i holds bytes `[i * chunk_size, (i + 1) * chunk_size)`. A chunk is
//! `rows` elements of `element_size` bytes, the element size rounded up to
//! the alignment (4 KiB by default, the disk sector). The bytes past the
//! object's end are padding: logical zeros that are never stored, never
//! read and never sent, so a data chunk's stored length may be shorter
//! than the chunk (even zero). Parity chunks are always stored whole.

use crate::error::{EcError, Result};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Default element alignment: one 4 KiB disk sector.
pub const DEFAULT_ALIGNMENT: usize = 4096;
/// Largest element alignment accepted (1 MiB).
pub const MAX_ALIGNMENT: usize = 1 << 20;
/// Largest object a layout accepts (64 GiB): keeps every size arithmetic
/// far from overflow.
pub const MAX_OBJECT_SIZE: u64 = 64 << 30;

/// Geometry of one encoded object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub object_size: u64,
    /// Data chunks that exist (virtual ones excluded).
    pub k: usize,
    /// Parity chunks.
    pub m: usize,
    /// Elements per chunk.
    pub rows: usize,
    /// Bytes per element, a multiple of the alignment.
    pub element_size: usize,
}

impl Layout {
    /// The layout for an object, given the code's shape and alignment.
    pub fn new(
        object_size: u64,
        k: usize,
        m: usize,
        rows: usize,
        alignment: usize,
    ) -> Result<Layout> {
        if alignment == 0 || alignment > MAX_ALIGNMENT {
            return Err(EcError::InvalidProfile(format!(
                "alignment {alignment} must be in 1..={MAX_ALIGNMENT}"
            )));
        }
        if object_size > MAX_OBJECT_SIZE {
            return Err(EcError::InvalidRequest(format!(
                "object of {object_size} bytes is larger than the {MAX_OBJECT_SIZE}-byte limit"
            )));
        }
        debug_assert!(k >= 1 && rows >= 1);
        let per = (k * rows) as u64;
        let raw = object_size.div_ceil(per).max(1);
        let element_size = (raw.div_ceil(alignment as u64) * alignment as u64) as usize;
        Ok(Layout {
            object_size,
            k,
            m,
            rows,
            element_size,
        })
    }

    /// Bytes per chunk (stored or not).
    pub fn chunk_size(&self) -> usize {
        self.rows * self.element_size
    }

    /// Chunks in a stripe (data + parity).
    pub fn chunks(&self) -> usize {
        self.k + self.m
    }

    /// Bytes of chunk `c` that are stored (data chunks lose their padding).
    pub fn stored_len(&self, c: usize) -> usize {
        if c >= self.k {
            return self.chunk_size();
        }
        let start = (c * self.chunk_size()) as u64;
        self.object_size
            .saturating_sub(start)
            .min(self.chunk_size() as u64) as usize
    }

    /// Stored bytes of element `row` of chunk `c` (0 for pure padding).
    pub fn stored_in_element(&self, c: usize, row: usize) -> usize {
        let start = row * self.element_size;
        self.stored_len(c)
            .saturating_sub(start)
            .min(self.element_size)
    }

    /// Cut an object into its data chunks (each trimmed to its stored
    /// length).
    pub fn split<'a>(&self, object: &'a [u8]) -> Vec<&'a [u8]> {
        let cs = self.chunk_size();
        (0..self.k)
            .map(|c| {
                let s = (c * cs).min(object.len());
                &object[s..s + self.stored_len(c).min(object.len() - s)]
            })
            .collect()
    }
}

/// Alignment of every chunk in [`ChunkBuffers`]: a page, so the buffers
/// suit O_DIRECT I/O and all chunks share one offset within a cache line
/// (which the SIMD kernels need for full speed).
pub const CHUNK_BUFFER_ALIGN: usize = 4096;

/// Chunks in one allocation, each starting on a page boundary.
pub struct ChunkBuffers {
    buf: Vec<u8>,
    starts: Vec<usize>,
    sizes: Vec<usize>,
}

impl ChunkBuffers {
    /// Zeroed chunks of the given sizes.
    pub fn new(sizes: &[usize]) -> ChunkBuffers {
        let a = CHUNK_BUFFER_ALIGN;
        let total: usize = sizes.iter().map(|s| s.div_ceil(a) * a).sum::<usize>() + a;
        let buf = vec![0u8; total];
        let first = (a - buf.as_ptr() as usize % a) % a;
        let mut starts = Vec::with_capacity(sizes.len());
        let mut at = first;
        for s in sizes {
            starts.push(at);
            at += s.div_ceil(a) * a;
        }
        ChunkBuffers {
            buf,
            starts,
            sizes: sizes.to_vec(),
        }
    }

    /// Chunk i.
    pub fn chunk(&self, i: usize) -> &[u8] {
        &self.buf[self.starts[i]..self.starts[i] + self.sizes[i]]
    }

    /// Every chunk, mutable (disjoint slices of the one allocation).
    pub fn chunks_mut(&mut self) -> Vec<&mut [u8]> {
        let mut out = Vec::with_capacity(self.sizes.len());
        let mut rest: &mut [u8] = &mut self.buf;
        let mut consumed = 0;
        for (&st, &sz) in self.starts.iter().zip(&self.sizes) {
            let tail = std::mem::take(&mut rest);
            let (_, from) = tail.split_at_mut(st - consumed);
            let (chunk, after) = from.split_at_mut(sz);
            out.push(chunk);
            rest = after;
            consumed = st + sz;
        }
        out
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Whether there are no chunks.
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }
}

/// The parts of one chunk a decoder was given: byte ranges (offset in the
/// chunk, bytes), as a read plan fetched them.
#[derive(Clone, Debug, Default)]
pub struct ChunkExtents<'a> {
    pub extents: Vec<(usize, &'a [u8])>,
}

impl<'a> ChunkExtents<'a> {
    /// A whole chunk (as stored: data chunks may be shorter than the chunk
    /// size; the rest is padding).
    pub fn full(bytes: &'a [u8]) -> ChunkExtents<'a> {
        ChunkExtents {
            extents: vec![(0, bytes)],
        }
    }

    /// The bytes `[start, end)` if one extent covers them.
    pub(crate) fn range(&self, start: usize, end: usize) -> Option<&'a [u8]> {
        self.extents.iter().find_map(|&(off, b)| {
            (off <= start && end <= off + b.len()).then(|| &b[start - off..end - off])
        })
    }
}

/// The chunks (or chunk parts) a decoder may use, by chunk index.
pub type Available<'a> = BTreeMap<usize, ChunkExtents<'a>>;

/// One element as the decoder sees it.
pub(crate) enum Elem<'a> {
    /// Entirely padding (or in a virtual chunk): zero, need not be read.
    Zero,
    /// Its bytes, padded with zeros to the element size when the stored
    /// part is shorter.
    Bytes(Cow<'a, [u8]>),
}

/// Element `row` of chunk `c`, or `None` if the needed bytes were not given.
pub(crate) fn element<'a>(
    layout: &Layout,
    avail: &Available<'a>,
    c: usize,
    row: usize,
) -> Option<Elem<'a>> {
    let stored = layout.stored_in_element(c, row);
    if stored == 0 {
        return Some(Elem::Zero);
    }
    let start = row * layout.element_size;
    let bytes = avail.get(&c)?.range(start, start + stored)?;
    if stored == layout.element_size {
        Some(Elem::Bytes(Cow::Borrowed(bytes)))
    } else {
        let mut v = bytes.to_vec();
        v.resize(layout.element_size, 0);
        Some(Elem::Bytes(Cow::Owned(v)))
    }
}

/// Check that the extents given for chunk `c` lie inside its stored bytes.
pub(crate) fn check_extents(layout: &Layout, c: usize, ex: &ChunkExtents) -> Result<()> {
    if c >= layout.chunks() {
        return Err(EcError::BadChunk {
            chunk: c,
            msg: format!("the stripe has {} chunks", layout.chunks()),
        });
    }
    let stored = layout.stored_len(c);
    for &(off, b) in &ex.extents {
        if off.checked_add(b.len()).is_none_or(|end| end > stored) {
            return Err(EcError::BadChunk {
                chunk: c,
                msg: format!(
                    "extent {off}+{} runs past the chunk's {stored} stored bytes",
                    b.len()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_is_not_stored() {
        // 10 000 bytes, k=3, 2 rows, 4 KiB alignment: elements of 4 KiB,
        // chunks of 8 KiB; chunk 0 full, chunk 1 holds 1808 bytes, chunk 2
        // nothing.
        let l = Layout::new(10_000, 3, 2, 2, 4096).unwrap();
        assert_eq!(l.element_size, 4096);
        assert_eq!(l.stored_len(0), 8192);
        assert_eq!(l.stored_len(1), 10_000 - 8192);
        assert_eq!(l.stored_len(2), 0);
        assert_eq!(l.stored_len(3), 8192);
        assert_eq!(l.stored_in_element(1, 0), 1808);
        assert_eq!(l.stored_in_element(1, 1), 0);
        let obj = vec![1u8; 10_000];
        let parts = l.split(&obj);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), 10_000);
        assert!(Layout::new(1, 3, 2, 2, 0).is_err());
        assert!(Layout::new(MAX_OBJECT_SIZE + 1, 3, 2, 2, 4096).is_err());
    }

    /// A range is found inside any one extent, in offset order or not,
    /// and never across two or in a gap.
    #[test]
    fn ranges_come_from_one_covering_extent() {
        let bytes: Vec<u8> = (0..100u8).collect();
        let ext = |v: &[(usize, std::ops::Range<usize>)]| ChunkExtents {
            extents: v.iter().map(|(o, r)| (*o, &bytes[r.clone()])).collect(),
        };
        let sorted = ext(&[(0, 0..10), (20, 20..30), (30, 30..40), (60, 60..100)]);
        let shuffled = ext(&[(60, 60..100), (20, 20..30), (0, 0..10), (30, 30..40)]);
        for x in [&sorted, &shuffled] {
            assert_eq!(x.range(0, 10), Some(&bytes[0..10]));
            assert_eq!(x.range(22, 25), Some(&bytes[22..25]));
            assert_eq!(x.range(30, 30), Some(&bytes[30..30]));
            assert_eq!(x.range(70, 100), Some(&bytes[70..100]));
            assert_eq!(x.range(25, 35), None, "across two extents");
            assert_eq!(x.range(10, 12), None, "in a gap");
            assert_eq!(x.range(95, 101), None, "past the end");
        }
    }

    #[test]
    fn chunk_buffers_are_page_aligned_and_disjoint() {
        let mut b = ChunkBuffers::new(&[5000, 0, 4096, 1]);
        for (i, c) in b.chunks_mut().into_iter().enumerate() {
            assert_eq!(c.as_ptr() as usize % CHUNK_BUFFER_ALIGN, 0);
            c.fill(i as u8 + 1);
        }
        assert!(b.chunk(0).iter().all(|&x| x == 1) && b.chunk(0).len() == 5000);
        assert!(b.chunk(1).is_empty());
        assert!(b.chunk(2).iter().all(|&x| x == 3));
        assert_eq!(b.chunk(3), &[4]);
    }
}
