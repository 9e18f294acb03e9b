//! Scalar linear codes given by a generator matrix: Reed-Solomon and the
//! basic Pyramid LRC derived from it. One element per chunk; any chunk is a
//! linear combination of the data chunks, so decoding is solving for the
//! wanted rows in the span of the available ones.
//!
//! It must never pick a basis that does not span what is wanted (the
//! solver checks, and decoding fails with `NotDecodable` instead).

use crate::code::{check_decode, check_encode, check_plan, ErasureCode};
use crate::error::{EcError, Result};
use crate::gf::{self, Matrix};
use crate::kernel::{dot_prod, Mode};
use crate::layout::{element, Available, Elem, Layout, DEFAULT_ALIGNMENT};
use crate::plan::{build, PlanOptions, ReadPlan};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Largest k for the scalar codes.
pub const MAX_K: usize = 32;

/// Most parity chunks of a scalar code (an LRC's m - 1 global and up to k
/// local parities).
const MAX_PARITY: usize = 2 * MAX_K;

/// A systematic scalar code: `generator` is `(k + m) x k` with the
/// identity on top. `groups` are local repair sets: in each, every chunk is
/// a combination of the others (empty for MDS codes without locality).
#[derive(Clone, Debug)]
pub struct LinearCode {
    name: String,
    k: usize,
    m: usize,
    generator: Matrix,
    groups: Vec<Vec<usize>>,
    alignment: usize,
}

/// The systematic Cauchy matrix for RS(k, m), normalised so that the first
/// parity row and the first column are all ones (a single lost data chunk
/// then decodes with XOR alone). Cauchy: any square submatrix of
/// `[I; P]` is invertible; scaling rows and columns keeps that.
pub fn cauchy_parity(k: usize, m: usize) -> Matrix {
    debug_assert!(k + m <= 256);
    let mut p = Matrix::zero(m, k);
    for i in 0..m {
        for j in 0..k {
            let x = i as u8;
            let y = (m + j) as u8;
            p.set(i, j, gf::inv(x ^ y).unwrap_or(0));
        }
    }
    for j in 0..k {
        let s = gf::inv(p.get(0, j)).unwrap_or(0);
        for i in 0..m {
            p.set(i, j, gf::mul(p.get(i, j), s));
        }
    }
    for i in 1..m {
        let s = gf::inv(p.get(i, 0)).unwrap_or(0);
        for j in 0..k {
            p.set(i, j, gf::mul(p.get(i, j), s));
        }
    }
    p
}

fn stack(k: usize, parity: &Matrix) -> Matrix {
    let mut g = Matrix::zero(k + parity.rows, k);
    for i in 0..k {
        g.set(i, i, 1);
    }
    g.data[k * k..].copy_from_slice(&parity.data);
    g
}

impl LinearCode {
    /// Reed-Solomon with `k` data and `m` parity chunks, 1 <= m <= k <= 32.
    pub fn reed_solomon(k: usize, m: usize) -> Result<LinearCode> {
        if !(1..=MAX_K).contains(&k) || !(1..=k).contains(&m) {
            return Err(EcError::InvalidProfile(format!(
                "rs needs 1 <= m <= k <= {MAX_K}, got k={k} m={m}"
            )));
        }
        Ok(LinearCode {
            name: format!("rs k={k} m={m}"),
            k,
            m,
            generator: stack(k, &cauchy_parity(k, m)),
            groups: Vec::new(),
            alignment: DEFAULT_ALIGNMENT,
        })
    }

    /// Basic Pyramid code (Liram §2.4) from RS(k, m): the first parity
    /// (the XOR of all data) is split into `l` local parities, one per
    /// group of consecutive data chunks; the other `m - 1` stay global.
    /// Chunks: data `0..k`, local parities `k..k+l`, global ones after.
    /// Tolerates any `m` lost chunks, and rebuilds a data chunk from its
    /// group alone.
    pub fn pyramid(k: usize, m: usize, l: usize) -> Result<LinearCode> {
        if !(2..=MAX_K).contains(&k) || !(1..=k).contains(&m) || !(2..=k).contains(&l) {
            return Err(EcError::InvalidProfile(format!(
                "lrc needs 2 <= k <= {MAX_K}, 1 <= m <= k, 2 <= l <= k; got k={k} m={m} l={l}"
            )));
        }
        let rs = cauchy_parity(k, m);
        let mut parity = Matrix::zero(l + m - 1, k);
        let mut groups = Vec::new();
        for g in 0..l {
            let (lo, hi) = (g * k / l, (g + 1) * k / l);
            for j in lo..hi {
                parity.set(g, j, rs.get(0, j));
            }
            let mut members: Vec<usize> = (lo..hi).collect();
            members.push(k + g);
            groups.push(members);
        }
        for i in 1..m {
            parity.data[(l + i - 1) * k..(l + i) * k].copy_from_slice(rs.row(i));
        }
        Ok(LinearCode {
            name: format!("lrc k={k} m={m} l={l}"),
            k,
            m: l + m - 1,
            generator: stack(k, &parity),
            groups,
            alignment: DEFAULT_ALIGNMENT,
        })
    }

    /// The same code with another element alignment.
    pub fn with_alignment(mut self, alignment: usize) -> LinearCode {
        self.alignment = alignment;
        self
    }

    /// The generator matrix (`(k + m) x k`).
    pub fn generator(&self) -> &Matrix {
        &self.generator
    }

    /// Pick, in preference order, available chunks whose rows are
    /// independent, until they span everything they can.
    fn basis(&self, candidates: &[usize]) -> Vec<usize> {
        let mut chosen: Vec<usize> = Vec::new();
        // Rows reduced so far, each with its pivot column (leading 1).
        let mut echelon: Vec<(usize, Vec<u8>)> = Vec::new();
        for &c in candidates {
            let mut row = self.generator.row(c).to_vec();
            for (p, e) in &echelon {
                let f = row[*p];
                if f != 0 {
                    for (x, y) in row.iter_mut().zip(e) {
                        *x ^= gf::mul(f, *y);
                    }
                }
            }
            let Some(p) = row.iter().position(|&x| x != 0) else {
                continue;
            };
            let s = gf::inv(row[p]).unwrap_or(0);
            row.iter_mut().for_each(|x| *x = gf::mul(*x, s));
            echelon.push((p, row));
            chosen.push(c);
            if chosen.len() == self.k {
                break;
            }
        }
        chosen
    }

    /// For each wanted chunk, its coefficients over `basis` chunks.
    fn combos(&self, basis: &[usize], wanted: &[usize]) -> Result<Matrix> {
        let a = self.generator.select_rows(basis);
        let mut out = Matrix::zero(wanted.len(), basis.len());
        for (i, &w) in wanted.iter().enumerate() {
            let y = solve_in_span(&a, self.generator.row(w)).ok_or_else(|| {
                EcError::NotDecodable(format!(
                    "chunk {w} is not a combination of chunks {basis:?} of {}",
                    self.name
                ))
            })?;
            out.data[i * basis.len()..(i + 1) * basis.len()].copy_from_slice(&y);
        }
        Ok(out)
    }

    /// Candidate order: data chunks (they are cheapest to use and padding
    /// chunks are free), then parities by index.
    fn order(&self, layout: &Layout, usable: &[usize]) -> Vec<usize> {
        let mut v: Vec<usize> = usable.to_vec();
        v.sort_by_key(|&c| (c >= self.k, layout.stored_len(c) != 0 && c < self.k, c));
        v
    }
}

/// Coefficients y with `y^T * rows = target`, if `target` is in the row
/// span of `rows` (whose rows must be independent).
pub(crate) fn solve_in_span(rows: &Matrix, target: &[u8]) -> Option<Vec<u8>> {
    let (b, k) = (rows.rows, rows.cols);
    // Augmented system A^T y = t: k equations, b unknowns.
    let mut a = Matrix::zero(k, b + 1);
    for i in 0..k {
        for j in 0..b {
            a.set(i, j, rows.get(j, i));
        }
        a.set(i, b, target[i]);
    }
    let mut pivots = Vec::new();
    let mut r = 0;
    for col in 0..b {
        let p = (r..k).find(|&i| a.get(i, col) != 0)?;
        for j in 0..=b {
            a.data.swap(p * (b + 1) + j, r * (b + 1) + j);
        }
        let s = gf::inv(a.get(r, col))?;
        for j in 0..=b {
            a.set(r, j, gf::mul(a.get(r, j), s));
        }
        for i in 0..k {
            let f = a.get(i, col);
            if i != r && f != 0 {
                for j in 0..=b {
                    let v = a.get(i, j) ^ gf::mul(f, a.get(r, j));
                    a.set(i, j, v);
                }
            }
        }
        pivots.push(col);
        r += 1;
    }
    if (r..k).any(|i| a.get(i, b) != 0) {
        return None;
    }
    Some((0..b).map(|j| a.get(j, b)).collect())
}

impl ErasureCode for LinearCode {
    fn profile(&self) -> String {
        self.name.clone()
    }
    fn k(&self) -> usize {
        self.k
    }
    fn m(&self) -> usize {
        self.m
    }
    fn rows(&self) -> usize {
        1
    }
    fn alignment(&self) -> usize {
        self.alignment
    }
    fn rebuilding_ratio(&self) -> f64 {
        let survivors = (self.k + self.m - 1) as f64;
        let reads: usize = (0..self.k)
            .map(|c| match self.groups.iter().find(|g| g.contains(&c)) {
                Some(g) => g.len() - 1,
                None => self.k,
            })
            .sum();
        reads as f64 / self.k as f64 / survivors
    }

    fn encode_parity(
        &self,
        layout: &Layout,
        data: &[&[u8]],
        parity: &mut [&mut [u8]],
    ) -> Result<()> {
        check_encode(self, layout, data, parity)?;
        // A data chunk stores a prefix of its bytes (the rest is padding,
        // logical zeros), so the parity is cut into spans at every stored
        // length: each span is the product of the chunks that reach past it.
        // (Copying a short chunk into a padded buffer instead cost a tenth of
        // a 4 MiB RS 10+4 encode: BENCHMARKS.md.) Scratch lives on the stack:
        // with 4 KiB chunks, heap allocations took a sixth of the time.
        // The k stored lengths, 0 (at index k) and the chunk size.
        let mut cuts = [0usize; MAX_K + 2];
        for (c, d) in cuts.iter_mut().zip(data) {
            *c = d.len();
        }
        cuts[self.k + 1] = layout.chunk_size();
        let cuts = &mut cuts[..self.k + 2];
        cuts.sort_unstable();
        for span in cuts.windows(2).filter(|s| s[0] < s[1]) {
            let (from, to) = (span[0], span[1]);
            let mut live = [0usize; MAX_K];
            let mut n = 0;
            for j in (0..self.k).filter(|&j| data[j].len() >= to) {
                live[n] = j;
                n += 1;
            }
            let mut outs: [&mut [u8]; MAX_PARITY] = std::array::from_fn(|_| &mut [][..]);
            for (o, p) in outs.iter_mut().zip(parity.iter_mut()) {
                *o = &mut p[from..to];
            }
            let outs = &mut outs[..self.m];
            if n == 0 {
                outs.iter_mut().for_each(|o| o.fill(0));
                continue;
            }
            let ins: [&[u8]; MAX_K] = std::array::from_fn(|t| {
                if t < n {
                    &data[live[t]][from..to]
                } else {
                    &[][..]
                }
            });
            let mut coefs = [0u8; MAX_K * MAX_PARITY];
            for i in 0..self.m {
                for t in 0..n {
                    coefs[i * n + t] = self.generator.get(self.k + i, live[t]);
                }
            }
            dot_prod(&coefs[..self.m * n], &ins[..n], outs, Mode::Overwrite);
        }
        Ok(())
    }

    fn decode(
        &self,
        layout: &Layout,
        available: &Available,
        wanted: &[usize],
    ) -> Result<BTreeMap<usize, Vec<u8>>> {
        let wanted = check_decode(self, layout, available, wanted)?;
        let mut have: BTreeMap<usize, Option<Cow<[u8]>>> = BTreeMap::new();
        for c in 0..layout.chunks() {
            match element(layout, available, c, 0) {
                Some(Elem::Zero) => {
                    have.insert(c, None);
                }
                Some(Elem::Bytes(b)) => {
                    have.insert(c, Some(b));
                }
                None => {}
            }
        }
        let mut out = BTreeMap::new();
        let missing: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|c| !have.contains_key(c))
            .collect();
        for &w in &wanted {
            if let Some(v) = have.get(&w) {
                let mut b = v.as_deref().map(<[u8]>::to_vec).unwrap_or_default();
                b.truncate(layout.stored_len(w));
                b.resize(layout.stored_len(w), 0);
                out.insert(w, b);
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let usable: Vec<usize> = have.keys().copied().collect();
        let basis = self.basis(&self.order(layout, &usable));
        let combos = self.combos(&basis, &missing)?;
        // Inputs: basis chunks with bytes and a non-zero coefficient.
        let used: Vec<usize> = (0..basis.len())
            .filter(|&j| {
                have[&basis[j]].is_some() && (0..missing.len()).any(|i| combos.get(i, j) != 0)
            })
            .collect();
        let inputs: Vec<&[u8]> = used
            .iter()
            .filter_map(|&j| have[&basis[j]].as_deref())
            .collect();
        let mut coefs = Vec::with_capacity(missing.len() * used.len());
        for i in 0..missing.len() {
            coefs.extend(used.iter().map(|&j| combos.get(i, j)));
        }
        let mut bufs = vec![vec![0u8; layout.chunk_size()]; missing.len()];
        {
            let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
            dot_prod(&coefs, &inputs, &mut refs, Mode::Overwrite);
        }
        for (w, mut b) in missing.into_iter().zip(bufs) {
            b.truncate(layout.stored_len(w));
            out.insert(w, b);
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
        let free = |c: usize| c < self.k && (layout.stored_len(c) == 0 || opts.object_read);
        let mut plans: Vec<ReadPlan> = Vec::new();
        // Local repair: each lost chunk from its own group.
        let mut local: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let all_local = lost.iter().all(|&c| {
            self.groups.iter().any(|g| {
                let ok =
                    g.contains(&c) && g.iter().all(|x| *x == c || avail.contains(x) || free(*x));
                if ok {
                    for &x in g.iter().filter(|&&x| x != c && !free(x)) {
                        local.entry(x).or_default().push(0);
                    }
                }
                ok
            })
        });
        if all_local {
            plans.push(build(layout, "local", local, opts.coalesce));
        }
        // Global: a basis of what can be read.
        let mut usable: Vec<usize> = avail.clone();
        usable.extend((0..self.k).filter(|&c| free(c) && !lost.contains(&c)));
        usable.sort_unstable();
        usable.dedup();
        let basis = self.basis(&self.order(layout, &usable));
        let combos = self.combos(&basis, &lost)?;
        let needed: BTreeMap<usize, Vec<usize>> = (0..basis.len())
            .filter(|&j| (0..lost.len()).any(|i| combos.get(i, j) != 0) && !free(basis[j]))
            .map(|j| (basis[j], vec![0]))
            .collect();
        plans.push(build(layout, "global", needed, opts.coalesce));
        plans
            .into_iter()
            .min_by_key(|p| p.cost())
            .ok_or_else(|| EcError::NotDecodable("no plan".into()))
    }
}
