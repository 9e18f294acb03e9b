//! Arithmetic in GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1
//! (0x11D), the field Ceph's jerasure and ISA-L plugins use, and small
//! dense matrices over it.
//!
//! These are the scalar definitions every SIMD kernel is tested against.
//! This module must never depend on the CPU: it is the reference.

/// The field's reduction polynomial, with the x^8 term.
pub const POLY: u16 = 0x11D;

const fn build_exp() -> [u8; 512] {
    let mut t = [0u8; 512];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        t[i] = x as u8;
        t[i + 255] = x as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    // Entries 510 and 511 are never reached by `mul` (log a + log b <= 508).
    t
}

const fn build_log() -> [u8; 256] {
    let exp = build_exp();
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        t[exp[i] as usize] = i as u8;
        i += 1;
    }
    t
}

/// `EXP[i] = 2^i`, doubled so that `EXP[log a + log b]` needs no reduction.
pub static EXP: [u8; 512] = build_exp();
/// `LOG[a]` for a != 0 (`LOG[0]` is meaningless and never used).
pub static LOG: [u8; 256] = build_log();

/// a * b in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + LOG[b as usize] as usize]
    }
}

/// The multiplicative inverse; `None` for 0.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 {
        None
    } else {
        Some(EXP[255 - LOG[a as usize] as usize])
    }
}

/// a / b; `None` when b is 0.
#[inline]
pub fn div(a: u8, b: u8) -> Option<u8> {
    inv(b).map(|ib| mul(a, ib))
}

/// 2^e (the field's generator to a power).
#[inline]
pub fn exp(e: usize) -> u8 {
    EXP[e % 255]
}

/// The 256-entry table of `c * x` for every byte x (a row of a 64 KiB
/// table built at compile time).
#[inline]
pub fn mul_table(c: u8) -> &'static [u8; 256] {
    &MUL[c as usize]
}

const fn build_mul() -> [[u8; 256]; 256] {
    let exp = build_exp();
    let log = build_log();
    let mut t = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            t[a][b] = exp[log[a] as usize + log[b] as usize];
            b += 1;
        }
        a += 1;
    }
    t
}

/// `MUL[a][b] = a * b`.
static MUL: [[u8; 256]; 256] = build_mul();

/// A dense row-major matrix over GF(2^8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<u8>,
}

impl Matrix {
    /// The all-zero matrix.
    pub fn zero(rows: usize, cols: usize) -> Matrix {
        Matrix {
            rows,
            cols,
            data: vec![0; rows * cols],
        }
    }

    /// The identity matrix of size n.
    pub fn identity(n: usize) -> Matrix {
        let mut m = Matrix::zero(n, n);
        for i in 0..n {
            m.set(i, i, 1);
        }
        m
    }

    #[inline]
    pub fn get(&self, r: usize, c: usize) -> u8 {
        self.data[r * self.cols + c]
    }

    #[inline]
    pub fn set(&mut self, r: usize, c: usize, v: u8) {
        self.data[r * self.cols + c] = v;
    }

    /// One row as a slice.
    pub fn row(&self, r: usize) -> &[u8] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }

    /// The matrix made of the given rows, in that order.
    pub fn select_rows(&self, rows: &[usize]) -> Matrix {
        let mut m = Matrix::zero(rows.len(), self.cols);
        for (i, &r) in rows.iter().enumerate() {
            m.data[i * self.cols..(i + 1) * self.cols].copy_from_slice(self.row(r));
        }
        m
    }

    /// self * other.
    pub fn mul(&self, other: &Matrix) -> Matrix {
        assert_eq!(self.cols, other.rows, "matrix shapes do not chain");
        let mut out = Matrix::zero(self.rows, other.cols);
        for i in 0..self.rows {
            for k in 0..self.cols {
                let a = self.get(i, k);
                if a == 0 {
                    continue;
                }
                for j in 0..other.cols {
                    let v = out.get(i, j) ^ mul(a, other.get(k, j));
                    out.set(i, j, v);
                }
            }
        }
        out
    }

    /// The inverse of a square matrix by Gauss-Jordan elimination; `None`
    /// when it is singular.
    pub fn invert(&self) -> Option<Matrix> {
        assert_eq!(self.rows, self.cols, "only square matrices invert");
        let n = self.rows;
        let mut a = self.clone();
        let mut b = Matrix::identity(n);
        for col in 0..n {
            let pivot = (col..n).find(|&r| a.get(r, col) != 0)?;
            if pivot != col {
                for j in 0..n {
                    a.data.swap(pivot * n + j, col * n + j);
                    b.data.swap(pivot * n + j, col * n + j);
                }
            }
            let scale = inv(a.get(col, col))?;
            for j in 0..n {
                a.set(col, j, mul(a.get(col, j), scale));
                b.set(col, j, mul(b.get(col, j), scale));
            }
            for r in 0..n {
                let f = a.get(r, col);
                if r == col || f == 0 {
                    continue;
                }
                for j in 0..n {
                    let va = a.get(r, j) ^ mul(f, a.get(col, j));
                    a.set(r, j, va);
                    let vb = b.get(r, j) ^ mul(f, b.get(col, j));
                    b.set(r, j, vb);
                }
            }
        }
        Some(b)
    }
}

/// The rank of a (not necessarily square) matrix, by elimination on a copy.
pub fn rank(m: &Matrix) -> usize {
    let mut a = m.clone();
    let (rows, cols) = (a.rows, a.cols);
    let mut rank = 0;
    for col in 0..cols {
        let Some(p) = (rank..rows).find(|&r| a.get(r, col) != 0) else {
            continue;
        };
        for j in 0..cols {
            a.data.swap(p * cols + j, rank * cols + j);
        }
        let s = inv(a.get(rank, col)).unwrap_or(0);
        for r in rank + 1..rows {
            let f = mul(a.get(r, col), s);
            if f == 0 {
                continue;
            }
            for j in col..cols {
                let v = a.get(r, j) ^ mul(f, a.get(rank, j));
                a.set(r, j, v);
            }
        }
        rank += 1;
        if rank == rows {
            break;
        }
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carry-less multiply and reduce: the definition, bit by bit.
    fn slow_mul(a: u8, b: u8) -> u8 {
        let mut p: u16 = 0;
        for i in 0..8 {
            if b >> i & 1 == 1 {
                p ^= u16::from(a) << i;
            }
        }
        for i in (8..16).rev() {
            if p >> i & 1 == 1 {
                p ^= POLY << (i - 8);
            }
        }
        p as u8
    }

    #[test]
    fn tables_agree_with_the_definition() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a} * {b}");
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a).unwrap()), 1);
            }
        }
        assert_eq!(inv(0), None);
    }

    #[test]
    fn invert_round_trips_and_detects_singular() {
        let mut m = Matrix::zero(3, 3);
        let vals = [1, 2, 3, 4, 5, 6, 7, 8, 10];
        m.data.copy_from_slice(&vals);
        let i = m.invert().unwrap();
        assert_eq!(m.mul(&i), Matrix::identity(3));
        let mut s = m.clone();
        for j in 0..3 {
            let v = s.get(0, j);
            s.set(2, j, v);
        }
        assert!(s.invert().is_none());
        assert_eq!(rank(&s), 2);
        assert_eq!(rank(&m), 3);
    }
}
