//! The combinatorial shape of a Zigzag code (Liram's Zigzag thesis ch. 2-3; Tamo, Wang
//! and Bruck's construction): rows, zigzag permutations, rebuilding sets,
//! duplication, virtual nodes and row orders. Pure arithmetic, no field.
//!
//! Rows of one code instance with k' columns are the vectors of
//! Z_r^(k'-1), numbered in base r (the first coordinate is the most
//! significant digit). Column position p >= 1 of an instance owns
//! coordinate p - 1 (its vector e_p); position 0 has the zero vector.
//! Zigzag parity l (1 <= l < r) at row t combines, from each data column
//! at position p, the element at row t + l e_p; parity 0 is the row parity.
//! A lost column at position p >= 1 is rebuilt from the rows whose digit p
//! equals some value (its rebuilding set, one of r cosets); position 0 uses
//! the rows whose digit sum equals some value.
//!
//! It must never depend on coefficients (that is `coeffs.rs`).

use crate::error::{EcError, Result};

/// Most rows a code may have (keeps element lists and solvers bounded).
pub const MAX_ROWS: usize = 1024;
/// Most data columns, virtual ones included.
pub const MAX_COLUMNS: usize = 32;

/// Row order of the data and row-parity chunks (Liram §3.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Construction {
    /// Rows stored in their natural order.
    Basic,
    /// Rows permuted to minimise the average read distance; known for 8,
    /// 9 and 16 rows (and equal to basic for 4 or fewer).
    Optimal,
}

/// Shape of a (k + r, k) Zigzag code built as an s-duplication of a
/// (k' + r, k') code with v virtual data columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Physical data columns.
    pub k: usize,
    /// Parity columns (row parity + r - 1 zigzag parities).
    pub r: usize,
    /// Duplication factor.
    pub s: usize,
    /// Columns per code instance.
    pub kp: usize,
    /// Virtual (all-zero, never stored) data columns: logical columns
    /// `k..k+v`.
    pub v: usize,
    /// Rows: r^(k'-1).
    pub rows: usize,
    pub construction: Construction,
    /// Physical position of each logical row in data and row-parity chunks.
    pub perm: Vec<usize>,
    /// Logical row stored at each physical position.
    pub inv_perm: Vec<usize>,
    /// `shift(t, p, l)` for every l, p, t (index `(l * kp + p) * rows + t`).
    shifts: Vec<u32>,
}

impl Shape {
    /// Validate a profile and derive its shape.
    pub fn new(k: usize, r: usize, s: usize, construction: Construction) -> Result<Shape> {
        let bad = |m: String| Err(EcError::InvalidProfile(m));
        if !(2..=4).contains(&r) {
            return bad(format!("zigzag needs 2 <= m <= 4 parities, got {r}"));
        }
        if k < 2 || s < 1 || s > k {
            return bad(format!(
                "zigzag needs k >= 2 and 1 <= s <= k, got k={k} s={s}"
            ));
        }
        let kp = k.div_ceil(s);
        let v = s * kp - k;
        if kp < 2 {
            return bad(format!(
                "s={s} leaves instances of one column; use s <= {}",
                k / 2
            ));
        }
        if v >= kp {
            return bad(format!(
                "s={s} does not divide k + v for any v < {kp} virtual columns (k={k}); pick s dividing k, k+1, ... "
            ));
        }
        if s * kp > MAX_COLUMNS {
            return bad(format!("k + v = {} is above {MAX_COLUMNS}", s * kp));
        }
        let rows = (0..kp - 1).try_fold(1usize, |a, _| a.checked_mul(r).filter(|&x| x <= MAX_ROWS));
        let Some(rows) = rows else {
            return bad(format!(
                "{r}^{} rows is above {MAX_ROWS}; raise s to duplicate a smaller code",
                kp - 1
            ));
        };
        let perm = match construction {
            Construction::Basic => (0..rows).collect(),
            Construction::Optimal => match optimal_order(r, kp) {
                Some(p) => p,
                None if rows <= 4 => (0..rows).collect(),
                None => {
                    return bad(format!(
                        "no optimal construction is known for {rows} rows (r={r}, k'={kp}); known: 8, 9, 16 rows"
                    ))
                }
            },
        };
        let mut inv_perm = vec![0; rows];
        for (y, &q) in perm.iter().enumerate() {
            inv_perm[q] = y;
        }
        let mut shape = Shape {
            k,
            r,
            s,
            kp,
            v,
            rows,
            construction,
            perm,
            inv_perm,
            shifts: Vec::new(),
        };
        let mut shifts = Vec::with_capacity(r * kp * rows);
        for l in 0..r {
            for p in 0..kp {
                for t in 0..rows {
                    shifts.push(shape.compute_shift(t, p, l) as u32);
                }
            }
        }
        shape.shifts = shifts;
        Ok(shape)
    }

    /// Logical data columns (physical + virtual).
    pub fn columns(&self) -> usize {
        self.k + self.v
    }

    /// Position of logical column c inside its instance.
    pub fn pos(&self, c: usize) -> usize {
        c % self.kp
    }

    /// Digit of row `t` owned by position `p >= 1`.
    pub fn digit(&self, t: usize, p: usize) -> usize {
        debug_assert!(p >= 1 && p < self.kp);
        t / self.r.pow((self.kp - 1 - p) as u32) % self.r
    }

    /// Sum of all digits of `t`, mod r.
    pub fn digit_sum(&self, t: usize) -> usize {
        (1..self.kp).map(|p| self.digit(t, p)).sum::<usize>() % self.r
    }

    /// `t + l * e_p` (p = 0: t itself), from the table.
    #[inline]
    pub fn shift(&self, t: usize, p: usize, l: usize) -> usize {
        self.shifts[(l % self.r * self.kp + p) * self.rows + t] as usize
    }

    fn compute_shift(&self, t: usize, p: usize, l: usize) -> usize {
        if p == 0 {
            return t;
        }
        let w = self.r.pow((self.kp - 1 - p) as u32);
        let d = t / w % self.r;
        t - d * w + (d + l) % self.r * w
    }

    /// The data row that parity `l`'s row `t` reads from column `c`.
    #[inline]
    pub fn read_row(&self, l: usize, c: usize, t: usize) -> usize {
        self.shift(t, self.pos(c), l)
    }

    /// The row of parity `l` that reads data row `y` of column `c` (the
    /// inverse of [`Shape::read_row`]).
    #[inline]
    pub fn parity_row(&self, l: usize, c: usize, y: usize) -> usize {
        let t = self.shift(y, self.pos(c), self.r - l % self.r);
        debug_assert_eq!(self.read_row(l, c, t), y);
        t
    }

    /// The element of its chunk that holds data row `y`.
    #[inline]
    pub fn data_elem(&self, y: usize) -> usize {
        self.perm[y]
    }

    /// The data row that element `q` of a data chunk holds (the inverse
    /// of [`Shape::data_elem`]).
    #[inline]
    pub fn elem_row(&self, q: usize) -> usize {
        self.inv_perm[q]
    }

    /// The element of parity chunk `l` that holds its row `t`: row
    /// parity keeps data's row order, zigzag parities store row t at
    /// element t.
    #[inline]
    pub fn parity_elem(&self, l: usize, t: usize) -> usize {
        if l == 0 {
            self.perm[t]
        } else {
            t
        }
    }

    /// The "class" of row t for position p: its digit p, or for p = 0 its
    /// digit sum. Rebuilding sets are the rows of one class.
    pub fn class(&self, t: usize, p: usize) -> usize {
        if p == 0 {
            self.digit_sum(t)
        } else {
            self.digit(t, p)
        }
    }

    /// To rebuild row `y` of a column at position p with rebuilding class
    /// `cv`: `None` means row parity at y; `Some((l, t))` means zigzag
    /// parity l at row t.
    pub fn equation_for(&self, y: usize, p: usize, cv: usize) -> Option<(usize, usize)> {
        let cls = self.class(y, p);
        if cls == cv {
            return None;
        }
        if p == 0 {
            // Other columns at y + l e_q must land in class cv: digit sum
            // grows by l.
            let l = (cv + self.r - cls) % self.r;
            Some((l, y))
        } else {
            let l = (cls + self.r - cv) % self.r;
            Some((l, self.shift(y, p, self.r - l)))
        }
    }

    /// Average over the k' positions of the best (over classes) span of a
    /// rebuilding set in physical positions: Liram's average read
    /// distance of one code instance (Table 3.1).
    pub fn average_distance(&self) -> f64 {
        let total: usize = (0..self.kp).map(|p| self.best_span(p).1).sum();
        total as f64 / self.kp as f64
    }

    /// The class with the shortest physical span for position p, and that
    /// span (inclusive, in elements).
    pub fn best_span(&self, p: usize) -> (usize, usize) {
        (0..self.r)
            .map(|cv| {
                let (lo, hi) = (0..self.rows)
                    .filter(|&t| self.class(t, p) == cv)
                    .map(|t| self.perm[t])
                    .fold((usize::MAX, 0), |(lo, hi), q| (lo.min(q), hi.max(q)));
                (cv, hi - lo + 1)
            })
            .min_by_key(|&(cv, span)| (span, cv))
            .unwrap_or((0, self.rows))
    }
}

/// Row orders with the shortest average read distance: `perm[row]` is the
/// physical position of logical row `row`. Found offline by exhaustive
/// search for 8 and 9 rows (5 and 3.67, Liram's Table 3.1) and by
/// simulated annealing for 16 rows, where it reaches 5.0, shorter than the
/// Liram's 5.67 (the thesis's search space is not described; two of the three
/// positions already reach the minimum possible span of 4).
fn optimal_order(r: usize, kp: usize) -> Option<Vec<usize>> {
    let order: &[usize] = match (r, kp) {
        (2, 4) => &OPT_8,
        (3, 3) => &OPT_9,
        (4, 3) => &OPT_16,
        _ => return None,
    };
    Some(order.to_vec())
}

const OPT_8: [usize; 8] = [0, 1, 2, 6, 3, 7, 4, 5];
const OPT_9: [usize; 9] = [0, 1, 2, 3, 6, 5, 7, 8, 4];
const OPT_16: [usize; 16] = [10, 11, 12, 13, 9, 0, 1, 3, 8, 5, 4, 14, 7, 2, 15, 6];
