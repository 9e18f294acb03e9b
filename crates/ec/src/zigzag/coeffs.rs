//! Coefficients of the zigzag parities, and the exhaustive check that they
//! make the code MDS.
//!
//! Parity l's coefficient for column c at row t is `lambda(c, class)^l`,
//! with `class` the digit of t that column c's position owns (position 0:
//! always class 0). Row parity (l = 0) is then all ones. The lambdas are
//! drawn column by column from a seeded generator; after each column every
//! erasure pattern that involves it and earlier columns (up to r data
//! columns, with every choice of as many surviving parities) is checked by
//! Gaussian elimination, and the column is re-drawn if any is singular.
//! The result is deterministic for a profile.
//!
//! A code whose check fails must never be used: the search errors out.

use super::shape::Shape;
use crate::error::{EcError, Result};
use crate::gf::{EXP, LOG};
use crate::xorshift::Xorshift;
use std::collections::HashSet;

/// Draws tried per column before giving up.
const MAX_DRAWS: usize = 400;

/// The lambdas of every logical column (virtual ones stay unused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coefficients {
    lambda: Vec<[u8; 4]>,
    /// `get(l, c, t)` for every l, c, t once the search is done (index
    /// `(l * columns + c) * rows + t`); empty during the search.
    table: Vec<u8>,
}

impl Coefficients {
    /// Coefficient of column c's element in parity l at row t.
    #[inline]
    pub fn get(&self, shape: &Shape, l: usize, c: usize, t: usize) -> u8 {
        if !self.table.is_empty() {
            return self.table[(l * shape.columns() + c) * shape.rows + t];
        }
        self.compute(shape, l, c, t)
    }

    fn compute(&self, shape: &Shape, l: usize, c: usize, t: usize) -> u8 {
        if l == 0 {
            return 1;
        }
        let p = shape.pos(c);
        let class = if p == 0 { 0 } else { shape.digit(t, p) };
        let lam = self.lambda[c][class];
        EXP[LOG[lam as usize] as usize * l % 255]
    }

    /// Search coefficients that make the shape MDS (see the module docs).
    pub fn search(shape: &Shape) -> Result<Coefficients> {
        let mut co = Coefficients {
            lambda: vec![[1; 4]; shape.columns()],
            table: Vec::new(),
        };
        for c in 0..shape.k {
            let mut ok = false;
            for draw in 0..MAX_DRAWS {
                let mut rng = Xorshift::from_state(seed(shape, c, draw));
                for d in 0..4 {
                    co.lambda[c][d] = loop {
                        let x = (rng.next_u64() >> 32) as u8;
                        if x != 0 {
                            break x;
                        }
                    };
                }
                if first_singular(shape, &co, Some(c)).is_none() {
                    ok = true;
                    break;
                }
            }
            if !ok {
                return Err(EcError::InvalidProfile(format!(
                    "no MDS coefficients over GF(2^8) found for zigzag k={} m={} s={} (column {c})",
                    shape.k, shape.r, shape.s
                )));
            }
        }
        let mut table = Vec::with_capacity(shape.r * shape.columns() * shape.rows);
        for l in 0..shape.r {
            for c in 0..shape.columns() {
                for t in 0..shape.rows {
                    table.push(co.compute(shape, l, c, t));
                }
            }
        }
        co.table = table;
        Ok(co)
    }
}

fn seed(shape: &Shape, c: usize, draw: usize) -> u64 {
    let mut x = 0x243F_6A88_85A3_08D3u64;
    for v in [shape.k, shape.r, shape.s, c, draw] {
        x = (x ^ v as u64).wrapping_mul(0x100_0000_01B3).rotate_left(29);
    }
    x | 1
}

/// The first erasure pattern (data columns, parities used) whose system is
/// singular; with `with`, only patterns whose highest column is `with`.
pub fn first_singular(
    shape: &Shape,
    co: &Coefficients,
    with: Option<usize>,
) -> Option<(Vec<usize>, Vec<usize>)> {
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    for e in 1..=shape.r.min(shape.k) {
        for cols in combinations(shape.k, e) {
            if with.is_some_and(|w| cols.last() != Some(&w)) {
                continue;
            }
            for pars in combinations(shape.r, e) {
                if !pattern_solvable(shape, co, &cols, &pars, &mut seen) {
                    return Some((cols, pars));
                }
            }
        }
    }
    None
}

/// Every increasing `e`-subset of `0..n`.
pub(crate) fn combinations(n: usize, e: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = Vec::with_capacity(e);
    fn go(n: usize, e: usize, from: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if cur.len() == e {
            out.push(cur.clone());
            return;
        }
        for i in from..n {
            cur.push(i);
            go(n, e, i + 1, cur, out);
            cur.pop();
        }
    }
    go(n, e, 0, &mut cur, &mut out);
    out
}

/// A connected block of the decoding system for one erasure pattern:
/// unknowns (index into the erased columns, row) and equations (parity,
/// row), with the dense matrix `eqs x vars`.
pub(crate) struct Block {
    pub vars: Vec<(usize, usize)>,
    pub eqs: Vec<(usize, usize)>,
    pub matrix: Vec<u8>,
}

/// Split the system for erased columns `cols` using parities `pars` into
/// connected blocks.
pub(crate) fn blocks(
    shape: &Shape,
    co: &Coefficients,
    cols: &[usize],
    pars: &[usize],
) -> Vec<Block> {
    let m = shape.rows;
    let nv = cols.len() * m;
    let mut parent: Vec<usize> = (0..nv).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    let var = |ei: usize, l: usize, t: usize| ei * m + shape.read_row(l, cols[ei], t);
    for &l in pars {
        for t in 0..m {
            let a = find(&mut parent, var(0, l, t));
            for ei in 1..cols.len() {
                let b = find(&mut parent, var(ei, l, t));
                parent[b] = a;
            }
        }
    }
    let mut index: Vec<usize> = vec![usize::MAX; nv];
    let mut out: Vec<Block> = Vec::new();
    let mut root_block: std::collections::HashMap<usize, usize> = Default::default();
    for v in 0..nv {
        let r = find(&mut parent, v);
        let b = *root_block.entry(r).or_insert_with(|| {
            out.push(Block {
                vars: Vec::new(),
                eqs: Vec::new(),
                matrix: Vec::new(),
            });
            out.len() - 1
        });
        index[v] = out[b].vars.len();
        out[b].vars.push((v / m, v % m));
    }
    for &l in pars {
        for t in 0..m {
            let r = find(&mut parent, var(0, l, t));
            let b = root_block[&r];
            out[b].eqs.push((l, t));
        }
    }
    for b in out.iter_mut() {
        let n = b.vars.len();
        b.matrix = vec![0; b.eqs.len() * n];
        for (i, &(l, t)) in b.eqs.iter().enumerate() {
            for (ei, &c) in cols.iter().enumerate() {
                let v = var(ei, l, t);
                b.matrix[i * n + index[v]] ^= co.get(shape, l, c, t);
            }
        }
    }
    out
}

fn pattern_solvable(
    shape: &Shape,
    co: &Coefficients,
    cols: &[usize],
    pars: &[usize],
    seen: &mut HashSet<Vec<u8>>,
) -> bool {
    for b in blocks(shape, co, cols, pars) {
        if b.eqs.len() != b.vars.len() {
            return false;
        }
        let mut key = b.matrix.clone();
        key.extend_from_slice(&(b.vars.len() as u32).to_le_bytes());
        if seen.contains(&key) {
            continue;
        }
        if !full_rank(b.vars.len(), b.matrix) {
            return false;
        }
        seen.insert(key);
    }
    true
}

/// Whether an n x n matrix is invertible (elimination with log tables).
fn full_rank(n: usize, mut a: Vec<u8>) -> bool {
    for col in 0..n {
        let Some(p) = (col..n).find(|&r| a[r * n + col] != 0) else {
            return false;
        };
        if p != col {
            for j in 0..n {
                a.swap(p * n + j, col * n + j);
            }
        }
        let inv_log = 255 - LOG[a[col * n + col] as usize] as usize;
        let pivot_logs: Vec<Option<usize>> = (col..n)
            .map(|j| {
                let x = a[col * n + j];
                (x != 0).then(|| LOG[x as usize] as usize)
            })
            .collect();
        for r in col + 1..n {
            let f = a[r * n + col];
            if f == 0 {
                continue;
            }
            // row_r -= (f / pivot) * row_col
            let lf = (LOG[f as usize] as usize + inv_log) % 255;
            for (j, pl) in (col..n).zip(&pivot_logs) {
                if let Some(pl) = pl {
                    a[r * n + j] ^= EXP[lf + pl];
                }
            }
        }
    }
    true
}
