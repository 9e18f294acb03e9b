//! The order in which a Zigzag encode computes its parity elements, and
//! what each reads: worked out once per code, so an encode is one loop of
//! dot products over a fixed list.
//!
//! A Zigzag encode reads every data element r times, once for each
//! parity, where Reed-Solomon reads it once; so it runs near half RS's
//! speed when the object comes from L3 or memory each time. The order of
//! the parity elements decides how often the second read still finds the
//! element in L2. Label the job computing parity l at row t with
//! `((l + digit_sum(t)) mod r, t)`: the r jobs that read one data element
//! then differ in exactly one base-r coordinate (the row's digit of the
//! element's column, or the first for column position 0), so the jobs and
//! the elements they share form the Hamming graph H(kp, r). Initial
//! segments of its lexicographic order have the fewest edges leaving them
//! of any sets of their size (Lindsey, "Assignment of numbers to vertices",
//! 1964; Harper's theorem for the hypercube, r = 2), so taking the jobs in
//! label order keeps the fewest elements waiting for their next reader.
//!
//! This module must never decide bytes: it only orders the same dot
//! products the definition gives (`parity_bytes_never_change` pins them).

use super::coeffs::Coefficients;
use super::shape::Shape;

/// One input of a job: `coef` times element `elem` of data chunk `col`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Term {
    pub col: u32,
    pub elem: u32,
    pub coef: u8,
}

/// One parity element: chunk `k + parity`, element `elem`, the sum of
/// `terms[from..to]` of the schedule.
#[derive(Clone, Copy, Debug)]
pub(super) struct Job {
    pub parity: u32,
    pub elem: u32,
    from: u32,
    to: u32,
}

/// Every parity element of a code, in the order an encode computes them.
#[derive(Debug)]
pub(super) struct Schedule {
    jobs: Vec<Job>,
    terms: Vec<Term>,
}

impl Schedule {
    /// The schedule of `shape` with its coefficients. Virtual columns
    /// (zero, never stored) are left out of every job.
    pub fn new(shape: &Shape, co: &Coefficients) -> Schedule {
        let mut order: Vec<(usize, usize)> = (0..shape.r)
            .flat_map(|l| (0..shape.rows).map(move |t| (l, t)))
            .collect();
        order.sort_by_key(|&(l, t)| (label(shape, l, t), l));
        let mut jobs = Vec::with_capacity(order.len());
        let mut terms = Vec::with_capacity(order.len() * shape.k);
        for (l, t) in order {
            let from = terms.len() as u32;
            for c in 0..shape.k {
                terms.push(Term {
                    col: c as u32,
                    elem: shape.data_elem(shape.read_row(l, c, t)) as u32,
                    coef: co.get(shape, l, c, t),
                });
            }
            jobs.push(Job {
                parity: l as u32,
                elem: shape.parity_elem(l, t) as u32,
                from,
                to: terms.len() as u32,
            });
        }
        debug_assert_eq!(jobs.len(), shape.r * shape.rows);
        Schedule { jobs, terms }
    }

    /// The jobs, in order.
    pub fn jobs(&self) -> &[Job] {
        &self.jobs
    }

    /// What `job` sums.
    pub fn terms(&self, job: &Job) -> &[Term] {
        &self.terms[job.from as usize..job.to as usize]
    }
}

/// The job's place in the Hamming graph, as one number whose order is the
/// lexicographic order (see the module comment).
fn label(shape: &Shape, l: usize, t: usize) -> usize {
    (l + shape.digit_sum(t)) % shape.r * shape.rows + t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zigzag::{Construction, Zigzag};
    use std::collections::BTreeMap;

    /// The most data elements read by some job but not yet by all of
    /// their readers, over every prefix of `jobs`: what must stay cached
    /// for every second read to hit.
    fn most_waiting(s: &Schedule, jobs: &[Job], readers: usize) -> usize {
        let mut reads: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        let (mut waiting, mut most) = (0usize, 0usize);
        for j in jobs {
            for t in s.terms(j) {
                let n = reads.entry((t.col, t.elem)).or_insert(0);
                *n += 1;
                match *n {
                    1 => waiting += 1,
                    n if n == readers => waiting -= 1,
                    _ => {}
                }
                most = most.max(waiting);
            }
        }
        most
    }

    #[test]
    fn every_parity_element_once_and_every_data_element_r_times() {
        for (k, r, s, c) in [
            (8, 2, 1, Construction::Basic),
            (6, 2, 1, Construction::Basic),
            (8, 3, 2, Construction::Basic),
            (7, 3, 2, Construction::Basic),
            (10, 4, 5, Construction::Optimal),
        ] {
            let z = Zigzag::new(k, r, s, c).unwrap();
            let sh = z.shape();
            let s = Schedule::new(sh, z.coefficients().unwrap());
            let mut outs: Vec<(u32, u32)> = s.jobs().iter().map(|j| (j.parity, j.elem)).collect();
            outs.sort_unstable();
            outs.dedup();
            assert_eq!(outs.len(), r * sh.rows, "k={k} r={r}");
            let mut reads: BTreeMap<(u32, u32), usize> = BTreeMap::new();
            for j in s.jobs() {
                for t in s.terms(j) {
                    *reads.entry((t.col, t.elem)).or_insert(0) += 1;
                }
            }
            assert_eq!(reads.len(), k * sh.rows, "k={k} r={r}");
            assert!(reads.values().all(|&n| n == r), "k={k} r={r}");
        }
    }

    /// The point of the order: fewer elements wait for their next reader
    /// than when row parity runs first and each zigzag parity after it.
    #[test]
    fn the_order_keeps_fewer_elements_waiting_than_parity_by_parity() {
        for (k, r, s) in [(8, 2, 1), (6, 2, 1), (6, 3, 1), (8, 2, 2)] {
            let z = Zigzag::new(k, r, s, Construction::Basic).unwrap();
            let s = Schedule::new(z.shape(), z.coefficients().unwrap());
            let mut by_parity = s.jobs().to_vec();
            by_parity.sort_by_key(|j| (j.parity, j.elem));
            let (ours, plain) = (
                most_waiting(&s, s.jobs(), r),
                most_waiting(&s, &by_parity, r),
            );
            assert!(ours * 3 <= plain * 2, "k={k} r={r}: {ours} vs {plain}");
        }
    }
}
