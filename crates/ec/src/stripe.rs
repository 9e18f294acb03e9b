//! Objects of any size as a row of fixed-size stripes, and each chunk
//! position as one *shard*: what an erasure-coded pool stores on each
//! member of a PG.
//!
//! Stripe `j` holds object bytes `[j * width, (j + 1) * width)` where
//! `width = k * unit`; it is encoded on its own with the code's layout for
//! its length (a full stripe's chunks are `unit` bytes; the last stripe
//! may be shorter and gets its own, smaller layout). Shard `c` is chunk `c`
//! of every stripe, one after the other: stripe `j`'s chunk starts at
//! shard offset `j * unit`. Padding is never stored, so a data shard ends
//! where its last stripe's stored bytes end.
//!
//! Inside a stripe a chunk keeps the code's element order, so the elements
//! a recovery plan names are runs at fixed offsets of each stripe's chunk:
//! reads of a plan are contiguous runs on the shard, never padding.
//!
//! Partial writes re-encode only the stripes they touch: [`Striper::rmw`]
//! names them; the caller reads those stripes, changes them and encodes
//! them again with [`Striper::encode_range`].
//!
//! Like the rest of the crate this module never does I/O and never panics
//! on caller input: reads are planned as shard extents, decoded from the
//! bytes the caller fetched, and every inconsistency is an [`EcError`].

use crate::code::ErasureCode;
use crate::error::{EcError, Result};
use crate::layout::{Available, ChunkExtents, Layout, MAX_OBJECT_SIZE};
use crate::plan::{Coalesce, PlanOptions};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// Largest stripe unit accepted (64 MiB of chunk per stripe).
pub const MAX_UNIT: u64 = 64 << 20;
/// The stripe unit of codes with one element per chunk (Reed-Solomon,
/// LRC): 4 KiB, Ceph's default `stripe_unit`, so a small overwrite
/// re-encodes little.
pub const DEFAULT_SCALAR_UNIT: u64 = 4096;
/// The least stripe unit of codes with many elements per chunk (Zigzag):
/// chunks of about 1 MiB per stripe keep elements large enough that a
/// recovery's element reads are efficient disk I/Os, and objects up to
/// `k` MiB are encoded as one stripe.
pub const DEFAULT_VECTOR_UNIT: u64 = 1 << 20;

/// Per shard, byte ranges `(offset, len)` of the shard, sorted, disjoint
/// and merged where they touch.
pub type ShardReads = BTreeMap<usize, Vec<(u64, u64)>>;

/// Per shard, bytes fetched at shard offsets (what a [`ShardReads`] asked
/// for, or more).
pub type Fetched<B> = BTreeMap<usize, Vec<(u64, B)>>;

/// How an erasure code lays objects out as shards.
#[derive(Clone)]
pub struct Striper {
    code: Arc<dyn ErasureCode>,
    unit: u64,
    /// How the users of this striper group a chunk's needed elements
    /// into reads (the planners take it as an argument).
    coalesce: Coalesce,
}

impl std::fmt::Debug for Striper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Striper({}, unit {}, {:?} reads)",
            self.code.profile(),
            self.unit,
            self.coalesce
        )
    }
}

/// One stripe a read touches: which object bytes come from it, and which
/// of its data chunks must be decoded because their shard is not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripeRead {
    pub stripe: u64,
    /// The object bytes wanted from this stripe.
    pub bytes: Range<u64>,
    /// Data chunks of the stripe that are lost (decoded, not read).
    pub lost: Vec<usize>,
}

/// A planned read of object bytes: shard extents to fetch, and what to do
/// with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPlan {
    pub size: u64,
    pub range: Range<u64>,
    pub stripes: Vec<StripeRead>,
    pub reads: ShardReads,
}

impl ReadPlan {
    /// Bytes fetched in all.
    pub fn bytes(&self) -> u64 {
        extent_bytes(&self.reads)
    }
}

/// A planned rebuild of whole shards of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RebuildPlan {
    pub size: u64,
    /// The shards rebuilt.
    pub lost: Vec<usize>,
    /// The shards it may read.
    pub available: Vec<usize>,
    pub reads: ShardReads,
    /// The bytes the code's plans read, stripe by stripe (the theory the
    /// measured reads are held to).
    pub theory: u64,
}

impl RebuildPlan {
    /// Bytes fetched in all.
    pub fn bytes(&self) -> u64 {
        extent_bytes(&self.reads)
    }
}

/// Total bytes of a set of shard extents.
pub fn extent_bytes(r: &ShardReads) -> u64 {
    r.values().flatten().map(|e| e.1).sum()
}

impl Striper {
    /// A striper with chunks of `unit` bytes per full stripe. The unit must
    /// be a multiple of `rows * alignment` (so a full stripe's elements are
    /// aligned and every element of every full stripe is the same size).
    pub fn new(code: Arc<dyn ErasureCode>, unit: u64) -> Result<Striper> {
        let grain = (code.rows() * code.alignment()) as u64;
        if unit == 0 || unit > MAX_UNIT || !unit.is_multiple_of(grain) {
            return Err(EcError::InvalidProfile(format!(
                "stripe unit {unit} must be a positive multiple of {grain} (rows x alignment) up to {MAX_UNIT}"
            )));
        }
        let s = Striper {
            code,
            unit,
            coalesce: Coalesce::default(),
        };
        let l = s.code.layout(s.width())?;
        if l.chunk_size() as u64 != unit {
            return Err(EcError::InvalidProfile(format!(
                "stripe unit {unit} does not give whole chunks (layout chunk {})",
                l.chunk_size()
            )));
        }
        Ok(s)
    }

    /// The same striper with `coalesce` as its users' read grouping.
    pub fn with_coalesce(mut self, coalesce: Coalesce) -> Striper {
        self.coalesce = coalesce;
        self
    }

    /// How its users group a chunk's needed elements into reads.
    pub fn coalesce(&self) -> Coalesce {
        self.coalesce
    }

    /// The default unit for a code: 4 KiB for scalar codes, at least
    /// 1 MiB (a multiple of rows x alignment) for vector codes.
    pub fn default_unit(code: &dyn ErasureCode) -> u64 {
        let grain = (code.rows() * code.alignment()) as u64;
        if code.rows() == 1 {
            DEFAULT_SCALAR_UNIT.div_ceil(grain) * grain
        } else {
            DEFAULT_VECTOR_UNIT.div_ceil(grain) * grain
        }
    }

    /// The code.
    pub fn code(&self) -> &dyn ErasureCode {
        &*self.code
    }
    /// Chunk bytes per full stripe.
    pub fn unit(&self) -> u64 {
        self.unit
    }
    /// Data chunks.
    pub fn k(&self) -> usize {
        self.code.k()
    }
    /// Shards (data + parity chunks).
    pub fn shards(&self) -> usize {
        self.code.k() + self.code.m()
    }
    /// Object bytes per full stripe.
    pub fn width(&self) -> u64 {
        self.k() as u64 * self.unit
    }
    /// Stripes of an object of `size` bytes.
    pub fn stripes(&self, size: u64) -> u64 {
        size.div_ceil(self.width())
    }
    /// Object bytes in stripe `j`.
    pub fn stripe_len(&self, size: u64, j: u64) -> u64 {
        size.saturating_sub(j * self.width()).min(self.width())
    }
    /// The layout of stripe `j` of an object of `size` bytes.
    pub fn layout(&self, size: u64, j: u64) -> Result<Layout> {
        self.code.layout(self.stripe_len(size, j))
    }

    fn check_size(&self, size: u64) -> Result<()> {
        if size > MAX_OBJECT_SIZE {
            return Err(EcError::InvalidRequest(format!(
                "object of {size} bytes is larger than the {MAX_OBJECT_SIZE}-byte limit"
            )));
        }
        Ok(())
    }

    fn check_shard(&self, c: usize) -> Result<()> {
        if c >= self.shards() {
            return Err(EcError::InvalidRequest(format!(
                "shard {c} of a code with {} shards",
                self.shards()
            )));
        }
        Ok(())
    }

    /// Stored bytes of shard `c` for an object of `size` bytes.
    pub fn shard_len(&self, size: u64, c: usize) -> Result<u64> {
        self.check_size(size)?;
        self.check_shard(c)?;
        let n = self.stripes(size);
        if n == 0 {
            return Ok(0);
        }
        let last = self.layout(size, n - 1)?;
        Ok((n - 1) * self.unit + last.stored_len(c) as u64)
    }

    /// Encode stripes `first..` of an object of `size` bytes whose bytes
    /// from `first * width` on are `data` (through the end of the object
    /// or of some later stripe). Returns, per shard, the bytes that go at
    /// shard offset `first * unit`.
    pub fn encode_range(&self, size: u64, first: u64, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.check_size(size)?;
        let start = first.checked_mul(self.width()).filter(|&s| s <= size);
        let Some(start) = start else {
            return Err(EcError::InvalidRequest(format!(
                "stripe {first} starts past an object of {size} bytes"
            )));
        };
        let end = start + data.len() as u64;
        if end > size || (end < size && !(end - start).is_multiple_of(self.width())) {
            return Err(EcError::InvalidRequest(format!(
                "{} bytes from stripe {first} are not whole stripes of an object of {size} bytes",
                data.len()
            )));
        }
        let k = self.k();
        // Every shard gets at most one full stripe's chunk per stripe: sized
        // once, so a megabyte shard is not copied at each doubling.
        let stripes = (data.len() as u64).div_ceil(self.width()) as usize;
        let cap = match data.is_empty() {
            true => 0,
            false => self.layout(size, first)?.chunk_size() * stripes,
        };
        let mut out: Vec<Vec<u8>> = (0..self.shards())
            .map(|_| Vec::with_capacity(cap))
            .collect();
        let mut j = first;
        let mut at = 0usize;
        while (at as u64) < data.len() as u64 {
            let layout = self.layout(size, j)?;
            let len = layout.object_size as usize;
            let stripe = &data[at..at + len];
            let parts = layout.split(stripe);
            for (c, p) in parts.iter().enumerate() {
                out[c].extend_from_slice(p);
            }
            // Parity is encoded in place, at the end of its shard.
            let cs = layout.chunk_size();
            let mut refs: Vec<&mut [u8]> = out[k..]
                .iter_mut()
                .map(|o| {
                    let from = o.len();
                    o.resize(from + cs, 0);
                    &mut o[from..]
                })
                .collect();
            self.code.encode_parity(&layout, &parts, &mut refs)?;
            at += len;
            j += 1;
        }
        Ok(out)
    }

    /// Encode a whole object into its shards.
    pub fn encode(&self, object: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.encode_range(object.len() as u64, 0, object)
    }

    /// Plan a read of object bytes `range` of an object of `size` bytes
    /// from the shards in `available`: data shards that hold the bytes
    /// are read directly; a stripe whose data chunk is lost is decoded by
    /// the code's read plan (the whole lost chunk of that stripe).
    pub fn plan_read(
        &self,
        size: u64,
        range: Range<u64>,
        available: &[usize],
        coalesce: Coalesce,
    ) -> Result<ReadPlan> {
        self.check_size(size)?;
        if range.start > range.end || range.end > size {
            return Err(EcError::InvalidRequest(format!(
                "read of {}..{} from an object of {size} bytes",
                range.start, range.end
            )));
        }
        for &c in available {
            self.check_shard(c)?;
        }
        let mut reads = ShardReads::new();
        let mut stripes = Vec::new();
        let w = self.width();
        let mut j = range.start / w;
        while range.start < range.end && j * w < range.end {
            let layout = self.layout(size, j)?;
            let s0 = j * w;
            let bytes = range.start.max(s0)..range.end.min(s0 + layout.object_size);
            let cs = layout.chunk_size() as u64;
            let mut lost = Vec::new();
            for c in 0..self.k() {
                let c0 = s0 + c as u64 * cs;
                let part = bytes.start.max(c0)..bytes.end.min(c0 + layout.stored_len(c) as u64);
                if part.start >= part.end {
                    continue;
                }
                if available.contains(&c) {
                    add(
                        &mut reads,
                        c,
                        j * self.unit + (part.start - c0),
                        part.end - part.start,
                    );
                } else {
                    lost.push(c);
                }
            }
            if !lost.is_empty() {
                // The codes plan for every lost data chunk of the stripe,
                // touched by the read or not.
                lost = (0..self.k())
                    .filter(|c| !available.contains(c) && layout.stored_len(*c) > 0)
                    .collect();
                let avail: Vec<usize> = available.to_vec();
                let opts = PlanOptions {
                    coalesce,
                    rows: None,
                    object_read: false,
                };
                let plan = self.code.read_plan(&layout, &lost, &avail, &opts)?;
                for (c, r) in &plan.reads {
                    for &(off, len) in &r.ios {
                        add(&mut reads, *c, j * self.unit + off, len);
                    }
                }
            }
            stripes.push(StripeRead {
                stripe: j,
                bytes,
                lost,
            });
            j += 1;
        }
        Ok(ReadPlan {
            size,
            range,
            stripes,
            reads,
        })
    }

    /// The object bytes a [`ReadPlan`] names, from what was fetched.
    pub fn decode_read<B: AsRef<[u8]>>(
        &self,
        plan: &ReadPlan,
        fetched: &Fetched<B>,
    ) -> Result<Vec<u8>> {
        // The parts come in logical order and tile the range, so the
        // output is appended to, never zero-filled first.
        let want = (plan.range.end - plan.range.start) as usize;
        let mut out: Vec<u8> = Vec::with_capacity(want);
        for sr in &plan.stripes {
            let layout = self.layout(plan.size, sr.stripe)?;
            let s0 = sr.stripe * self.width();
            let cs = layout.chunk_size() as u64;
            let base = sr.stripe * self.unit;
            let decoded = if sr.lost.is_empty() {
                BTreeMap::new()
            } else {
                let avail = stripe_extents(&layout, base, fetched);
                self.code.decode(&layout, &avail, &sr.lost)?
            };
            for c in 0..self.k() {
                let c0 = s0 + c as u64 * cs;
                let part =
                    sr.bytes.start.max(c0)..sr.bytes.end.min(c0 + layout.stored_len(c) as u64);
                if part.start >= part.end {
                    continue;
                }
                let at = (part.start - plan.range.start) as usize;
                let len = (part.end - part.start) as usize;
                let in_chunk = (part.start - c0) as usize..(part.end - c0) as usize;
                let src = match decoded.get(&c) {
                    Some(chunk) => chunk
                        .get(in_chunk.clone())
                        .ok_or_else(|| short(c, in_chunk.end))?,
                    None => find(fetched, c, base + in_chunk.start as u64, len)
                        .ok_or_else(|| missing(c, base + in_chunk.start as u64, len))?,
                };
                if at == out.len() {
                    out.extend_from_slice(src);
                } else {
                    // (Not expected: the parts tile the range in order.)
                    if out.len() < at + len {
                        out.resize(at + len, 0);
                    }
                    out[at..at + len].copy_from_slice(src);
                }
            }
        }
        out.resize(want, 0);
        Ok(out)
    }

    /// Plan the rebuild of the `lost` shards of an object of `size` bytes
    /// from the `available` ones: the code's plan stripe by stripe (for
    /// Zigzag and one lost data shard, element-level reads), as shard
    /// extents merged across stripes.
    pub fn plan_rebuild(
        &self,
        size: u64,
        lost: &[usize],
        available: &[usize],
        coalesce: Coalesce,
    ) -> Result<RebuildPlan> {
        self.check_size(size)?;
        for &c in lost.iter().chain(available) {
            self.check_shard(c)?;
        }
        let mut lost = lost.to_vec();
        lost.sort_unstable();
        lost.dedup();
        let mut reads = ShardReads::new();
        let mut theory = 0;
        let opts = PlanOptions {
            coalesce,
            rows: None,
            object_read: false,
        };
        for j in 0..self.stripes(size) {
            let layout = self.layout(size, j)?;
            let want = self.stripe_lost(&layout, &lost, available);
            if want.is_empty() {
                continue;
            }
            let plan = self.code.read_plan(&layout, &want, available, &opts)?;
            theory += plan.bytes();
            for (c, r) in &plan.reads {
                for &(off, len) in &r.ios {
                    add(&mut reads, *c, j * self.unit + off, len);
                }
            }
        }
        let mut available = available.to_vec();
        available.sort_unstable();
        available.dedup();
        Ok(RebuildPlan {
            size,
            lost,
            available,
            reads,
            theory,
        })
    }

    /// What a stripe's plan must rebuild to give the `lost` chunks: those
    /// with stored bytes, and every other data chunk with stored bytes that
    /// is not available (the codes plan for all lost data at once).
    fn stripe_lost(&self, layout: &Layout, lost: &[usize], available: &[usize]) -> Vec<usize> {
        if !lost.iter().any(|&c| layout.stored_len(c) > 0) {
            return Vec::new();
        }
        let mut want: Vec<usize> = lost
            .iter()
            .copied()
            .filter(|&c| layout.stored_len(c) > 0)
            .collect();
        want.extend(
            (0..self.k()).filter(|c| {
                !available.contains(c) && !lost.contains(c) && layout.stored_len(*c) > 0
            }),
        );
        want.sort_unstable();
        want
    }

    /// The lost shards' whole bytes, from what a [`RebuildPlan`] fetched.
    pub fn decode_rebuild<B: AsRef<[u8]>>(
        &self,
        plan: &RebuildPlan,
        fetched: &Fetched<B>,
    ) -> Result<BTreeMap<usize, Vec<u8>>> {
        let mut out: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
        for &c in &plan.lost {
            out.insert(
                c,
                Vec::with_capacity(self.shard_len(plan.size, c)? as usize),
            );
        }
        for j in 0..self.stripes(plan.size) {
            let layout = self.layout(plan.size, j)?;
            let want = self.stripe_lost(&layout, &plan.lost, &plan.available);
            if want.is_empty() {
                continue;
            }
            let avail = stripe_extents(&layout, j * self.unit, fetched);
            let got = self.code.decode(&layout, &avail, &want)?;
            for c in plan
                .lost
                .iter()
                .copied()
                .filter(|&c| layout.stored_len(c) > 0)
            {
                let bytes = got.get(&c).ok_or_else(|| {
                    EcError::NotDecodable(format!("the code returned no chunk {c} for stripe {j}"))
                })?;
                let n = layout.stored_len(c);
                let b = bytes.get(..n).ok_or_else(|| short(c, n))?;
                if let Some(o) = out.get_mut(&c) {
                    o.extend_from_slice(b);
                }
            }
        }
        Ok(out)
    }

    /// What a write of object bytes `[off, off + len)` (or a size change
    /// to `new_size`) must re-encode, for an object of `old_size` bytes
    /// becoming `new_size`: the stripes, in object bytes of the *old*
    /// object to read first (clipped to `old_size`), and the stripes of
    /// the new object to encode again.
    pub fn rmw(&self, old_size: u64, new_size: u64, writes: &[Range<u64>]) -> Result<Rmw> {
        self.check_size(old_size)?;
        self.check_size(new_size)?;
        let w = self.width();
        let mut touched: Vec<u64> = Vec::new();
        for r in writes {
            if r.start >= r.end {
                continue;
            }
            touched.extend(r.start / w..r.end.div_ceil(w));
        }
        // Growing encodes every stripe from the one where the object ended
        // (its layout depended on the old size) to the new end; shrinking
        // re-lays out the stripe where the object now ends.
        let n_new = self.stripes(new_size);
        if new_size > old_size {
            touched.extend(old_size / w..n_new);
        } else if new_size < old_size && !new_size.is_multiple_of(w) {
            touched.push(new_size / w);
        }
        touched.retain(|&j| j < n_new);
        touched.sort_unstable();
        touched.dedup();
        // Runs of consecutive stripes.
        let mut runs: Vec<Range<u64>> = Vec::new();
        for j in touched {
            match runs.last_mut() {
                Some(r) if r.end == j => r.end = j + 1,
                _ => runs.push(j..j + 1),
            }
        }
        let runs = runs
            .into_iter()
            .map(|r| {
                let bytes = r.start * w..(r.end * w).min(new_size);
                let read = bytes.start.min(old_size)..bytes.end.min(old_size);
                StripeRun {
                    stripes: r,
                    bytes,
                    read,
                }
            })
            .collect();
        Ok(Rmw {
            old_size,
            new_size,
            runs,
        })
    }
}

/// Stripes a partial write re-encodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rmw {
    pub old_size: u64,
    pub new_size: u64,
    pub runs: Vec<StripeRun>,
}

/// Consecutive stripes a write re-encodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripeRun {
    pub stripes: Range<u64>,
    /// Their object bytes in the new object.
    pub bytes: Range<u64>,
    /// The part of those bytes the old object has (read before the write;
    /// the rest is new or zeros).
    pub read: Range<u64>,
}

/// Add `(off, len)` to shard `c`'s extents, merging with a touching or
/// overlapping neighbour.
fn add(reads: &mut ShardReads, c: usize, off: u64, len: u64) {
    if len == 0 {
        return;
    }
    let v = reads.entry(c).or_default();
    // Plans add extents mostly in order: extend the last one when it can.
    match v.last_mut() {
        None => {
            v.push((off, len));
            return;
        }
        Some(last) if off >= last.0 => {
            if off <= last.0 + last.1 {
                last.1 = (last.0 + last.1).max(off + len) - last.0;
            } else {
                v.push((off, len));
            }
            return;
        }
        Some(_) => v.push((off, len)),
    }
    v.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for &(o, l) in v.iter() {
        match merged.last_mut() {
            Some(last) if o <= last.0 + last.1 => {
                let end = (last.0 + last.1).max(o + l);
                last.1 = end - last.0;
            }
            _ => merged.push((o, l)),
        }
    }
    *v = merged;
}

/// The bytes of shard `c` at `[off, off + len)` if one fetched extent
/// holds them all.
fn find<B: AsRef<[u8]>>(f: &Fetched<B>, c: usize, off: u64, len: usize) -> Option<&[u8]> {
    f.get(&c)?.iter().find_map(|(o, b)| {
        let b = b.as_ref();
        let s = off.checked_sub(*o)? as usize;
        b.get(s..s.checked_add(len)?)
    })
}

/// The fetched extents that fall in one stripe's chunks, as chunk-relative
/// extents the decoders take.
fn stripe_extents<'a, B: AsRef<[u8]>>(
    layout: &Layout,
    base: u64,
    f: &'a Fetched<B>,
) -> Available<'a> {
    let mut av = Available::new();
    for (&c, exts) in f {
        if c >= layout.chunks() {
            continue;
        }
        let stored = layout.stored_len(c) as u64;
        let mut ce = ChunkExtents::default();
        for (o, b) in exts {
            let b = b.as_ref();
            let (s, e) = ((*o).max(base), (*o + b.len() as u64).min(base + stored));
            if s < e {
                let piece = &b[(s - o) as usize..(e - o) as usize];
                ce.extents.push(((s - base) as usize, piece));
            }
        }
        if !ce.extents.is_empty() || stored == 0 {
            av.insert(c, ce);
        }
    }
    av
}

fn short(c: usize, n: usize) -> EcError {
    EcError::NotDecodable(format!("chunk {c} came back shorter than {n} bytes"))
}

fn missing(c: usize, off: u64, len: usize) -> EcError {
    EcError::NotDecodable(format!("shard {c} bytes {off}+{len} were not fetched"))
}
