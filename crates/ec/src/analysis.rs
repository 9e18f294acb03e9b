//! Recovery cost of a code for one object size: a read plan for every
//! single lost chunk and the averages Liram's Zigzag thesis reports (what `loligo ec
//! plan` prints).
//!
//! It must never report a number it did not get from a read plan.

use crate::code::ErasureCode;
use crate::error::Result;
use crate::linear::LinearCode;
use crate::plan::{Coalesce, PlanOptions, ReadPlan};

/// The plan for one lost chunk.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FailureCost {
    pub lost: usize,
    /// `data` or `parity`.
    pub kind: &'static str,
    pub plan: ReadPlan,
    /// Bytes read / stored bytes of the surviving chunks.
    pub ratio: f64,
}

/// Averages over every single-chunk failure.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub profile: String,
    pub object_size: u64,
    pub rows: usize,
    pub element_size: usize,
    pub chunk_size: usize,
    pub coalesce: Coalesce,
    /// The code's theoretical data-chunk rebuilding ratio.
    pub rebuilding_ratio: f64,
    /// Mean over data-chunk failures of bytes read / surviving stored bytes.
    pub effective_rebuilding_ratio: f64,
    /// Same, over every chunk failure (parity re-encoding included).
    pub effective_rebuilding_ratio_all: f64,
    /// Mean read distance (elements) over data-chunk failures, in the data
    /// and row-parity chunks read (zigzag parities excluded, as in the thesis).
    pub avg_read_distance: f64,
    /// Mean I/O requests per failure, every chunk failure counted.
    pub avg_ios: f64,
    /// Mean bytes read per failure, every chunk failure counted.
    pub avg_bytes_read: f64,
    /// `avg_bytes_read` over Reed-Solomon's with the same k, m and object.
    pub bytes_read_vs_rs: f64,
    pub failures: Vec<FailureCost>,
}

/// Plan every single-chunk failure of an object of `object_size` bytes.
/// Read distances count data chunks and the first parity (for Zigzag, the
/// row parity).
pub fn summarize(code: &dyn ErasureCode, object_size: u64, coalesce: Coalesce) -> Result<Summary> {
    let layout = code.layout(object_size)?;
    let n = layout.chunks();
    let opts = PlanOptions {
        coalesce,
        ..PlanOptions::default()
    };
    let mut failures = Vec::new();
    for lost in 0..n {
        let others: Vec<usize> = (0..n).filter(|&c| c != lost).collect();
        let plan = code.read_plan(&layout, &[lost], &others, &opts)?;
        let surviving: u64 = others.iter().map(|&c| layout.stored_len(c) as u64).sum();
        let ratio = if surviving == 0 {
            0.0
        } else {
            plan.bytes() as f64 / surviving as f64
        };
        failures.push(FailureCost {
            lost,
            kind: if lost < layout.k { "data" } else { "parity" },
            plan,
            ratio,
        });
    }
    let data: Vec<&FailureCost> = failures
        .iter()
        .filter(|f| f.lost < layout.k && layout.stored_len(f.lost) > 0)
        .collect();
    let mean = |v: &mut dyn Iterator<Item = f64>| {
        let (s, c) = v.fold((0.0, 0usize), |(s, c), x| (s + x, c + 1));
        if c == 0 {
            0.0
        } else {
            s / c as f64
        }
    };
    let dist_chunk = |c: usize| c <= layout.k;
    let avg_read_distance = mean(&mut data.iter().flat_map(|f| {
        f.plan
            .reads
            .iter()
            .filter(|(c, _)| dist_chunk(**c))
            .map(|(_, r)| r.distance as f64)
            .collect::<Vec<_>>()
    }));
    let avg_bytes_read = mean(&mut failures.iter().map(|f| f.plan.bytes() as f64));
    let rs_bytes = rs_average_bytes(code.k(), code.m(), code.alignment(), object_size)?;
    Ok(Summary {
        profile: code.profile(),
        object_size,
        rows: layout.rows,
        element_size: layout.element_size,
        chunk_size: layout.chunk_size(),
        coalesce,
        rebuilding_ratio: code.rebuilding_ratio(),
        effective_rebuilding_ratio: mean(&mut data.iter().map(|f| f.ratio)),
        effective_rebuilding_ratio_all: mean(&mut failures.iter().map(|f| f.ratio)),
        avg_read_distance,
        avg_ios: mean(&mut failures.iter().map(|f| f.plan.ios() as f64)),
        avg_bytes_read,
        bytes_read_vs_rs: if rs_bytes > 0.0 {
            avg_bytes_read / rs_bytes
        } else {
            0.0
        },
        failures,
    })
}

/// Reed-Solomon's mean bytes read per single failure for the same object,
/// k and m (k whole chunks, padding excluded). Where m > k, which RS does
/// not offer, RS(k, k) stands in: its failures cost the same per chunk.
fn rs_average_bytes(k: usize, m: usize, alignment: usize, object_size: u64) -> Result<f64> {
    let rs = LinearCode::reed_solomon(k, m.min(k))?.with_alignment(alignment);
    summarize_plain(&rs, object_size)
}

fn summarize_plain(code: &LinearCode, object_size: u64) -> Result<f64> {
    let layout = code.layout(object_size)?;
    let n = layout.chunks();
    let mut total = 0.0;
    for lost in 0..n {
        let others: Vec<usize> = (0..n).filter(|&c| c != lost).collect();
        total += code
            .read_plan(&layout, &[lost], &others, &PlanOptions::default())?
            .bytes() as f64;
    }
    Ok(total / n as f64)
}
