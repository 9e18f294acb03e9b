//! Zigzag codes (Tamo, Wang, Bruck; as evaluated in Liram, "Evaluating Zigzag Code in a Distributed Storage System" (MSc thesis, Technion, 2017)): MDS array codes whose single lost data chunk
//! is rebuilt from 1/r of every surviving chunk, with the thesis's practical
//! optimizations: code duplication (factor s), virtual columns (so any k
//! works), optimal row orders, the shortest rebuilding set per failure,
//! 4 KiB-aligned elements whose padding is never stored or read, recovery
//! by row parity when that reads less, and coalesced reads.
//!
//! Chunks: data `0..k` (logical columns; virtual columns `k..k+v` are
//! zero and do not exist), then parity `k` (row parity) and `k + l` (zigzag
//! parity l). Data and row-parity chunks store logical row y at element
//! `perm[y]`; zigzag parities store row t at element t.

pub mod coeffs;
mod schedule;
pub mod shape;

use crate::code::{check_decode, check_encode, check_plan, padded, ErasureCode};
use crate::error::{EcError, Result};
use crate::gf::{self, Matrix};
use crate::kernel::{dot_prod, Mode};
use crate::layout::{element, Available, Elem, Layout, DEFAULT_ALIGNMENT};
use crate::plan::{build, PlanOptions, ReadPlan};
use coeffs::{blocks, Coefficients};
use schedule::Schedule;
pub use shape::{Construction, Shape};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// A Zigzag code.
#[derive(Debug)]
pub struct Zigzag {
    shape: Shape,
    coefs: OnceLock<Result<Coefficients>>,
    schedule: OnceLock<Schedule>,
    alignment: usize,
}

/// Where an element lives: data column (logical row) or parity (row).
#[derive(Clone, Copy, Debug)]
enum Ref {
    Data(usize, usize),
    Parity(usize, usize),
}

impl Zigzag {
    /// A (k + r, k) Zigzag code as an s-duplication (virtual columns added
    /// when s does not divide k).
    pub fn new(k: usize, r: usize, s: usize, construction: Construction) -> Result<Zigzag> {
        Ok(Zigzag {
            shape: Shape::new(k, r, s, construction)?,
            coefs: OnceLock::new(),
            schedule: OnceLock::new(),
            alignment: DEFAULT_ALIGNMENT,
        })
    }

    /// The same code with another element alignment.
    pub fn with_alignment(mut self, alignment: usize) -> Zigzag {
        self.alignment = alignment;
        self
    }

    /// The code's shape (rows, instances, row order).
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The coefficients, searched (and checked MDS) on first use.
    pub fn coefficients(&self) -> Result<&Coefficients> {
        self.coefs
            .get_or_init(|| Coefficients::search(&self.shape))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Check every erasure pattern of up to r data chunks against every
    /// choice of surviving parities (what the search already did column by
    /// column, repeated over the whole code).
    pub fn verify_mds(&self) -> Result<()> {
        let co = self.coefficients()?;
        match coeffs::first_singular(&self.shape, co, None) {
            None => Ok(()),
            Some((cols, pars)) => Err(EcError::InvalidProfile(format!(
                "not MDS: data {cols:?} with parities {pars:?} cannot be decoded"
            ))),
        }
    }

    /// The parities `parity` holds a buffer for (of the chunk size; the
    /// others are not computed), from the data chunks as stored: a lost
    /// parity is rebuilt with one pass over the data, not r.
    fn encode_into(
        &self,
        layout: &Layout,
        data: &[&[u8]],
        parity: &mut [Option<&mut [u8]>],
    ) -> Result<()> {
        let co = self.coefficients()?;
        let sh = &self.shape;
        let es = layout.element_size;
        debug_assert_eq!(parity.len(), sh.r);
        debug_assert!(parity
            .iter()
            .flatten()
            .all(|p| p.len() == layout.chunk_size()));
        debug_assert!(
            data.len() == sh.k && (0..sh.k).all(|c| data[c].len() == layout.stored_len(c)),
            "data chunks as stored"
        );
        // Each data chunk padded to the chunk size once (only the chunk
        // holding the object's end is copied); all-padding chunks drop out.
        let full: Vec<Option<Cow<[u8]>>> = data
            .iter()
            .map(|d| (!d.is_empty()).then(|| padded(layout, d)))
            .collect();
        // One dot product per parity element, in the schedule's order
        // (which keeps a data element in L2 between its r reads more often
        // than parity by parity would); elements that are all padding
        // add nothing and are left out.
        let schedule = self.schedule.get_or_init(|| Schedule::new(sh, co));
        let mut inputs: Vec<&[u8]> = Vec::with_capacity(sh.k);
        let mut cs: Vec<u8> = Vec::with_capacity(sh.k);
        for job in schedule.jobs() {
            let Some(out) = parity[job.parity as usize].as_deref_mut() else {
                continue;
            };
            inputs.clear();
            cs.clear();
            for term in schedule.terms(job) {
                let (c, q) = (term.col as usize, term.elem as usize);
                let Some(chunk) = &full[c] else { continue };
                if layout.stored_in_element(c, q) == 0 {
                    continue;
                }
                inputs.push(&chunk[q * es..(q + 1) * es]);
                cs.push(term.coef);
            }
            let at = job.elem as usize * es;
            dot_prod(&cs, &inputs, &mut [&mut out[at..at + es]], Mode::Overwrite);
        }
        Ok(())
    }

    fn chunk_elem(&self, e: Ref) -> (usize, usize) {
        match e {
            Ref::Data(c, y) => (c, self.shape.data_elem(y)),
            Ref::Parity(l, t) => (self.shape.k + l, self.shape.parity_elem(l, t)),
        }
    }

    /// The terms of parity l at row t other than column `skip`:
    /// (coefficient, element). Virtual columns are left out.
    fn terms(&self, co: &Coefficients, l: usize, t: usize, skip: Option<usize>) -> Vec<(u8, Ref)> {
        let sh = &self.shape;
        (0..sh.k)
            .filter(|&c| Some(c) != skip)
            .map(|c| (co.get(sh, l, c, t), Ref::Data(c, sh.read_row(l, c, t))))
            .collect()
    }

    fn get<'a>(&self, layout: &Layout, av: &Available<'a>, e: Ref) -> Option<Elem<'a>> {
        let (c, q) = self.chunk_elem(e);
        element(layout, av, c, q)
    }

    /// The elements an equation needs besides the unknown, by chunk.
    fn equation_reads(
        &self,
        j: usize,
        y: usize,
        eq: Option<(usize, usize)>,
    ) -> Vec<(usize, usize)> {
        let sh = &self.shape;
        let (l, t) = eq.unwrap_or((0, y));
        let mut v: Vec<(usize, usize)> = (0..sh.k)
            .filter(|&c| c != j)
            .map(|c| self.chunk_elem(Ref::Data(c, sh.read_row(l, c, t))))
            .collect();
        v.push(self.chunk_elem(Ref::Parity(l, t)));
        v
    }

    /// Rebuild data column j from whatever equations the available
    /// elements allow (row parity first). `None` if some row has none.
    fn decode_single(
        &self,
        layout: &Layout,
        av: &Available,
        co: &Coefficients,
        j: usize,
    ) -> Result<Option<Vec<u8>>> {
        let sh = &self.shape;
        let es = layout.element_size;
        let mut out = vec![0u8; layout.chunk_size()];
        let mut inputs: Vec<Cow<[u8]>> = Vec::with_capacity(sh.k + 1);
        let mut cs: Vec<u8> = Vec::with_capacity(sh.k + 1);
        for y in 0..sh.rows {
            let q = sh.data_elem(y);
            if layout.stored_in_element(j, q) == 0 {
                continue;
            }
            let mut solved = false;
            for l in 0..sh.r {
                let t = sh.parity_row(l, j, y);
                let Some(pe) = self.get(layout, av, Ref::Parity(l, t)) else {
                    continue;
                };
                inputs.clear();
                cs.clear();
                let own = gf::inv(co.get(sh, l, j, t)).unwrap_or(0);
                if let Elem::Bytes(b) = pe {
                    inputs.push(b);
                    cs.push(own);
                }
                let mut ok = true;
                for c in (0..sh.k).filter(|&c| c != j) {
                    match self.get(layout, av, Ref::Data(c, sh.read_row(l, c, t))) {
                        Some(Elem::Bytes(b)) => {
                            inputs.push(b);
                            cs.push(gf::mul(co.get(sh, l, c, t), own));
                        }
                        Some(Elem::Zero) => {}
                        None => {
                            ok = false;
                            break;
                        }
                    }
                }
                if !ok {
                    continue;
                }
                let refs: Vec<&[u8]> = inputs.iter().map(|c| c.as_ref()).collect();
                dot_prod(
                    &cs,
                    &refs,
                    &mut [&mut out[q * es..(q + 1) * es]],
                    Mode::Overwrite,
                );
                solved = true;
                break;
            }
            if !solved {
                return Ok(None);
            }
        }
        out.truncate(layout.stored_len(j));
        Ok(Some(out))
    }

    /// Rebuild the data columns `lost` from every other data column and
    /// whole parity chunks, solving each connected block of the system.
    fn decode_general(
        &self,
        layout: &Layout,
        av: &Available,
        co: &Coefficients,
        lost: &[usize],
    ) -> Result<BTreeMap<usize, Vec<u8>>> {
        let sh = &self.shape;
        let es = layout.element_size;
        let whole = |c: usize| (0..sh.rows).all(|q| element(layout, av, c, q).is_some());
        let pars: Vec<usize> = (0..sh.r)
            .filter(|&l| whole(sh.k + l))
            .take(lost.len())
            .collect();
        if pars.len() < lost.len() {
            return Err(EcError::NotDecodable(format!(
                "{} data chunks lost but only {} whole parity chunks given",
                lost.len(),
                pars.len()
            )));
        }
        if let Some(c) = (0..sh.k).find(|c| !lost.contains(c) && !whole(*c)) {
            return Err(EcError::NotDecodable(format!(
                "data chunk {c} is needed whole"
            )));
        }
        let mut out: BTreeMap<usize, Vec<u8>> = lost
            .iter()
            .map(|&c| (c, vec![0u8; layout.chunk_size()]))
            .collect();
        for b in blocks(sh, co, lost, &pars) {
            let n = b.vars.len();
            if b.eqs.len() != n {
                return Err(EcError::NotDecodable(format!(
                    "a block of the system has {} equations for {n} unknowns",
                    b.eqs.len()
                )));
            }
            let inv = Matrix {
                rows: n,
                cols: n,
                data: b.matrix.clone(),
            }
            .invert()
            .ok_or_else(|| EcError::NotDecodable("singular block (not MDS?)".into()))?;
            // Syndromes: parity element minus the known terms.
            let mut syn = vec![vec![0u8; es]; n];
            for (i, &(l, t)) in b.eqs.iter().enumerate() {
                let mut inputs: Vec<Cow<[u8]>> = Vec::new();
                let mut cs = Vec::new();
                for (a, r) in
                    std::iter::once((1u8, Ref::Parity(l, t))).chain(self.terms(co, l, t, None))
                {
                    if let Ref::Data(c, _) = r {
                        if lost.contains(&c) {
                            continue;
                        }
                    }
                    if let Some(Elem::Bytes(x)) = self.get(layout, av, r) {
                        inputs.push(x);
                        cs.push(a);
                    }
                }
                let refs: Vec<&[u8]> = inputs.iter().map(|c| c.as_ref()).collect();
                dot_prod(&cs, &refs, &mut [syn[i].as_mut_slice()], Mode::Overwrite);
            }
            let srefs: Vec<&[u8]> = syn.iter().map(|v| v.as_slice()).collect();
            let mut vals = vec![vec![0u8; es]; n];
            {
                let mut vrefs: Vec<&mut [u8]> = vals.iter_mut().map(|v| v.as_mut_slice()).collect();
                dot_prod(&inv.data, &srefs, &mut vrefs, Mode::Overwrite);
            }
            for (&(ei, y), v) in b.vars.iter().zip(vals) {
                let q = sh.data_elem(y);
                if let Some(buf) = out.get_mut(&lost[ei]) {
                    buf[q * es..(q + 1) * es].copy_from_slice(&v);
                }
            }
        }
        for (c, buf) in out.iter_mut() {
            buf.truncate(layout.stored_len(*c));
        }
        Ok(out)
    }

    /// Candidate plans for one lost data column: row parity only, and one
    /// per rebuilding class.
    fn single_plans(
        &self,
        layout: &Layout,
        j: usize,
        usable: &dyn Fn(usize) -> bool,
        free: &dyn Fn(usize) -> bool,
        opts: &PlanOptions,
    ) -> Vec<ReadPlan> {
        let sh = &self.shape;
        let rows: Vec<usize> = match &opts.rows {
            Some(r) => r
                .clone()
                .filter(|&q| q < sh.rows)
                .map(|q| sh.elem_row(q))
                .collect(),
            None => (0..sh.rows).collect(),
        };
        let rows: Vec<usize> = rows
            .into_iter()
            .filter(|&y| layout.stored_in_element(j, sh.data_elem(y)) > 0)
            .collect();
        let mut out = Vec::new();
        for cand in std::iter::once(None).chain((0..sh.r).map(Some)) {
            let mut needed: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for &y in &rows {
                let eq = cand.and_then(|cv| sh.equation_for(y, sh.pos(j), cv));
                for (c, q) in self.equation_reads(j, y, eq) {
                    needed.entry(c).or_default().push(q);
                }
            }
            if needed
                .keys()
                .any(|&c| !usable(c) && layout.stored_len(c) > 0)
            {
                continue;
            }
            needed.retain(|&c, _| !free(c));
            let name = match cand {
                None => "row-parity".to_string(),
                Some(cv) => format!("zigzag class {cv}"),
            };
            out.push(build(layout, &name, needed, opts.coalesce));
        }
        out
    }
}

impl ErasureCode for Zigzag {
    fn profile(&self) -> String {
        let sh = &self.shape;
        format!(
            "zigzag k={} m={} s={} v={} rows={} ({})",
            sh.k,
            sh.r,
            sh.s,
            sh.v,
            sh.rows,
            match sh.construction {
                Construction::Basic => "basic",
                Construction::Optimal => "optimal",
            }
        )
    }
    fn k(&self) -> usize {
        self.shape.k
    }
    fn m(&self) -> usize {
        self.shape.r
    }
    fn rows(&self) -> usize {
        self.shape.rows
    }
    fn alignment(&self) -> usize {
        self.alignment
    }
    /// Liram §3.1.1: 1/r + ((r-1)/r) * (s-1) / (s k' + r - 1), virtual
    /// columns counted as nodes (as Liram's Table 5.1 does).
    fn rebuilding_ratio(&self) -> f64 {
        let sh = &self.shape;
        let r = sh.r as f64;
        1.0 / r + (r - 1.0) / r * (sh.s as f64 - 1.0) / ((sh.s * sh.kp) as f64 + r - 1.0)
    }

    fn encode_parity(
        &self,
        layout: &Layout,
        data: &[&[u8]],
        parity: &mut [&mut [u8]],
    ) -> Result<()> {
        check_encode(self, layout, data, parity)?;
        let mut outs: Vec<Option<&mut [u8]>> = parity.iter_mut().map(|p| Some(&mut **p)).collect();
        self.encode_into(layout, data, &mut outs)
    }

    fn decode(
        &self,
        layout: &Layout,
        available: &Available,
        wanted: &[usize],
    ) -> Result<BTreeMap<usize, Vec<u8>>> {
        let wanted = check_decode(self, layout, available, wanted)?;
        let sh = &self.shape;
        let co = self.coefficients()?;
        let whole = |c: usize| (0..sh.rows).all(|q| element(layout, available, c, q).is_some());
        let mut out: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
        let mut missing_data: Vec<usize> = Vec::new();
        let mut missing_parity: Vec<usize> = Vec::new();
        for &w in &wanted {
            if whole(w) {
                let mut buf = vec![0u8; layout.stored_len(w)];
                for q in 0..sh.rows {
                    if let Some(Elem::Bytes(b)) = element(layout, available, w, q) {
                        let s = q * layout.element_size;
                        let n = layout.stored_in_element(w, q);
                        buf[s..s + n].copy_from_slice(&b[..n]);
                    }
                }
                out.insert(w, buf);
            } else if w < sh.k {
                missing_data.push(w);
            } else {
                missing_parity.push(w);
            }
        }
        if missing_data.len() == 1 && missing_parity.is_empty() {
            if let Some(buf) = self.decode_single(layout, available, co, missing_data[0])? {
                out.insert(missing_data[0], buf);
                return Ok(out);
            }
        }
        if missing_data.is_empty() && missing_parity.is_empty() {
            return Ok(out);
        }
        // Every data chunk not given whole must be solved for (parities
        // are re-encoded from all data).
        let lost: Vec<usize> = (0..sh.k).filter(|&c| !whole(c)).collect();
        let solved = if lost.is_empty() {
            BTreeMap::new()
        } else {
            self.decode_general(layout, available, co, &lost)?
        };
        for &c in &missing_data {
            if let Some(b) = solved.get(&c) {
                out.insert(c, b.clone());
            }
        }
        if !missing_parity.is_empty() {
            // The data as stored: borrowed where one extent holds a whole
            // chunk (as a rebuild reads it), else assembled or solved.
            let data: Vec<Cow<[u8]>> = (0..sh.k)
                .map(|c| {
                    if let Some(b) = solved.get(&c) {
                        return Ok(Cow::Borrowed(b.as_slice()));
                    }
                    let n = layout.stored_len(c);
                    if let Some(b) = available.get(&c).and_then(|x| x.range(0, n)) {
                        return Ok(Cow::Borrowed(b));
                    }
                    self.decode(layout, available, &[c])
                        .map(|mut m| Cow::Owned(m.remove(&c).unwrap_or_default()))
                })
                .collect::<Result<_>>()?;
            let drefs: Vec<&[u8]> = data.iter().map(|d| d.as_ref()).collect();
            let mut par: Vec<Option<Vec<u8>>> = (sh.k..sh.k + sh.r)
                .map(|w| {
                    missing_parity
                        .contains(&w)
                        .then(|| vec![0u8; layout.chunk_size()])
                })
                .collect();
            let mut outs: Vec<Option<&mut [u8]>> =
                par.iter_mut().map(|p| p.as_deref_mut()).collect();
            self.encode_into(layout, &drefs, &mut outs)?;
            for (l, p) in par.into_iter().enumerate() {
                if let Some(p) = p {
                    out.insert(sh.k + l, p);
                }
            }
        }
        Ok(out)
    }

    fn read_plan(
        &self,
        layout: &Layout,
        lost: &[usize],
        available: &[usize],
        opts: &PlanOptions,
    ) -> Result<ReadPlan> {
        let (lost, avail) = check_plan(layout, lost, available)?;
        let sh = &self.shape;
        let free = |c: usize| c < sh.k && (layout.stored_len(c) == 0 || opts.object_read);
        let usable = |c: usize| avail.contains(&c) || (c < sh.k && layout.stored_len(c) == 0);
        let lost_data: Vec<usize> = lost
            .iter()
            .copied()
            .filter(|&c| c < sh.k && layout.stored_len(c) > 0)
            .collect();
        if lost_data.len() == 1 && lost.len() == 1 {
            let best = self
                .single_plans(layout, lost_data[0], &usable, &free, opts)
                .into_iter()
                .min_by_key(|p| {
                    (
                        p.bytes(),
                        p.reads.values().map(|r| r.distance).sum::<usize>(),
                        p.ios(),
                    )
                });
            if let Some(p) = best {
                return Ok(p);
            }
        }
        // General: all surviving data whole, plus one whole parity per
        // lost data chunk; lost parities are re-encoded from the data.
        let pars: Vec<usize> = (sh.k..sh.k + sh.r)
            .filter(|&c| usable(c))
            .take(lost_data.len())
            .collect();
        if pars.len() < lost_data.len() {
            return Err(EcError::NotDecodable(format!(
                "{} data chunks lost, {} parity chunks available",
                lost_data.len(),
                pars.len()
            )));
        }
        let all: Vec<usize> = (0..sh.rows).collect();
        let mut needed: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for c in (0..sh.k).filter(|c| !lost.contains(c) && !free(*c)) {
            if !usable(c) {
                return Err(EcError::NotDecodable(format!(
                    "data chunk {c} is neither lost nor available"
                )));
            }
            needed.insert(c, all.clone());
        }
        for c in pars {
            needed.insert(c, all.clone());
        }
        let method = if lost_data.is_empty() {
            "re-encode"
        } else {
            "full decode"
        };
        Ok(build(layout, method, needed, opts.coalesce))
    }
}
