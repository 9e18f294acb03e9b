//! Recovery read plans: which elements of which chunks to read, how they
//! are grouped into I/O requests, and what that costs (bytes, I/Os, read
//! distance). Codes produce the element lists; this module turns them into
//! I/Os the same way for every code.
//!
//! It must never plan a read of padding (logical zeros).

use crate::layout::Layout;
use std::collections::BTreeMap;
use std::ops::Range;

/// How needed elements of one chunk are grouped into I/O requests
/// (Liram §3.2.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Coalesce {
    /// One request per element.
    Naive,
    /// One request per run of consecutive elements.
    #[default]
    Conservative,
    /// One request from the first to the last needed element (reads the
    /// gaps too).
    Aggressive,
}

impl Coalesce {
    /// Parse `naive`, `conservative` or `aggressive`.
    pub fn from_name(s: &str) -> Option<Coalesce> {
        match s {
            "naive" => Some(Coalesce::Naive),
            "conservative" => Some(Coalesce::Conservative),
            "aggressive" => Some(Coalesce::Aggressive),
            _ => None,
        }
    }
}

/// What a plan is for, beyond the lost chunks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    pub coalesce: Coalesce,
    /// Only these elements (rows) of the single lost chunk are wanted (a
    /// degraded read of part of a chunk); `None` = the whole chunk.
    pub rows: Option<Range<usize>>,
    /// The caller reads every surviving data chunk whole anyway (a
    /// degraded read of the whole object): those reads are free.
    pub object_read: bool,
}

/// The reads from one chunk.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChunkRead {
    /// Needed elements (chunk positions), sorted; padding excluded.
    pub elements: Vec<usize>,
    /// I/O requests as (byte offset, length) in the chunk.
    pub ios: Vec<(u64, u64)>,
    /// Bytes those requests read.
    pub bytes: u64,
    /// Inclusive distance in elements between the first and last needed
    /// element (0 when nothing is read).
    pub distance: usize,
}

/// Everything to read for one recovery.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReadPlan {
    /// Per chunk index, what to read from it (chunks read for nothing are
    /// absent).
    pub reads: BTreeMap<usize, ChunkRead>,
    /// Which recovery method the plan uses (e.g. `zigzag`, `row-parity`).
    pub method: String,
}

impl ReadPlan {
    /// Total bytes read.
    pub fn bytes(&self) -> u64 {
        self.reads.values().map(|r| r.bytes).sum()
    }
    /// Total I/O requests.
    pub fn ios(&self) -> usize {
        self.reads.values().map(|r| r.ios.len()).sum()
    }
    /// Total needed elements.
    pub fn elements(&self) -> usize {
        self.reads.values().map(|r| r.elements.len()).sum()
    }
    /// Cost order used to pick between plans: bytes, then I/Os.
    pub(crate) fn cost(&self) -> (u64, usize) {
        (self.bytes(), self.ios())
    }
}

/// Turn the needed elements of chunk `c` into a [`ChunkRead`]: padding
/// elements are dropped (they are logical zeros), partial elements read
/// only their stored bytes, and requests are coalesced as asked.
pub fn chunk_read(
    layout: &Layout,
    c: usize,
    needed: impl IntoIterator<Item = usize>,
    co: Coalesce,
) -> ChunkRead {
    let mut elements: Vec<usize> = needed
        .into_iter()
        .filter(|&e| layout.stored_in_element(c, e) > 0)
        .collect();
    elements.sort_unstable();
    elements.dedup();
    let (Some(&first), Some(&last)) = (elements.first(), elements.last()) else {
        return ChunkRead::default();
    };
    let es = layout.element_size as u64;
    let end_of = |e: usize| e as u64 * es + layout.stored_in_element(c, e) as u64;
    let mut ios: Vec<(u64, u64)> = Vec::new();
    match co {
        Coalesce::Aggressive => ios.push((first as u64 * es, end_of(last) - first as u64 * es)),
        Coalesce::Naive => {
            for &e in &elements {
                ios.push((e as u64 * es, end_of(e) - e as u64 * es));
            }
        }
        Coalesce::Conservative => {
            let mut run = (first, first);
            for &e in &elements[1..] {
                if e == run.1 + 1 {
                    run.1 = e;
                } else {
                    ios.push((run.0 as u64 * es, end_of(run.1) - run.0 as u64 * es));
                    run = (e, e);
                }
            }
            ios.push((run.0 as u64 * es, end_of(run.1) - run.0 as u64 * es));
        }
    }
    let bytes = ios.iter().map(|io| io.1).sum();
    ChunkRead {
        distance: last - first + 1,
        elements,
        ios,
        bytes,
    }
}

/// A plan from per-chunk element lists.
pub(crate) fn build(
    layout: &Layout,
    method: &str,
    needed: BTreeMap<usize, Vec<usize>>,
    co: Coalesce,
) -> ReadPlan {
    let reads = needed
        .into_iter()
        .map(|(c, els)| (c, chunk_read(layout, c, els, co)))
        .filter(|(_, r)| !r.elements.is_empty())
        .collect();
    ReadPlan {
        reads,
        method: method.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_modes() {
        let l = Layout::new(8 * 4096 * 3, 3, 1, 8, 4096).unwrap();
        let els = [0, 1, 3, 6];
        let n = chunk_read(&l, 0, els, Coalesce::Naive);
        assert_eq!((n.ios.len(), n.bytes, n.distance), (4, 4 * 4096, 7));
        let c = chunk_read(&l, 0, els, Coalesce::Conservative);
        assert_eq!(c.ios, vec![(0, 8192), (3 * 4096, 4096), (6 * 4096, 4096)]);
        let a = chunk_read(&l, 0, els, Coalesce::Aggressive);
        assert_eq!((a.ios.len(), a.bytes), (1, 7 * 4096));
    }

    #[test]
    fn padding_is_never_read() {
        // 5000 bytes in k=1, 2 rows: element 0 full, element 1 has 904 B.
        let l = Layout::new(5000, 1, 1, 2, 4096).unwrap();
        assert_eq!(l.element_size, 4096);
        let r = chunk_read(&l, 0, [0, 1], Coalesce::Conservative);
        assert_eq!((r.bytes, r.ios.len()), (5000, 1));
        let l2 = Layout::new(100, 1, 1, 2, 4096).unwrap();
        let r2 = chunk_read(&l2, 0, [1], Coalesce::Naive);
        assert!(r2.elements.is_empty() && r2.bytes == 0);
    }
}
