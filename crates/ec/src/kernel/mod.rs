//! Region kernels over GF(2^8): multiply a region by a constant, multiply
//! and XOR into a region, and the fused dot product that encoders use
//! (every output is a linear combination of every input, computed in one
//! pass so each input byte is loaded once per group of outputs).
//!
//! Three implementations: a scalar reference (table lookups), AVX2
//! (PSHUFB on split nibble tables) and AVX-512 + GFNI (`gf2p8affineqb`
//! with each constant as an 8x8 bit matrix). The fastest the CPU supports
//! is picked once at run time. SIMD code lives only in `avx2.rs` and
//! `gfni.rs`; it must never be reached on a CPU without the features, and
//! it is tested against the scalar reference on random inputs.

use crate::gf;
use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod gfni;

/// Which implementation runs the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Table lookups, one byte at a time: the reference.
    Scalar,
    /// 32 bytes at a time with PSHUFB nibble tables.
    Avx2,
    /// 64 bytes at a time with AVX-512 and GFNI affine transforms.
    Gfni,
}

impl Backend {
    /// The fastest backend this CPU supports (detected once). Setting
    /// `LOLIGO_EC_BACKEND=scalar|avx2|gfni` lowers it (never above what
    /// the CPU has), for comparisons.
    pub fn detect() -> Backend {
        static B: OnceLock<Backend> = OnceLock::new();
        *B.get_or_init(|| {
            let best = Backend::available()
                .last()
                .copied()
                .unwrap_or(Backend::Scalar);
            match std::env::var("LOLIGO_EC_BACKEND").ok().as_deref() {
                Some("scalar") => Backend::Scalar,
                Some("avx2") if Backend::available().contains(&Backend::Avx2) => Backend::Avx2,
                _ => best,
            }
        })
    }

    /// Every backend this CPU can run, slowest first.
    pub fn available() -> &'static [Backend] {
        static AVAIL: OnceLock<Vec<Backend>> = OnceLock::new();
        AVAIL.get_or_init(Backend::probe)
    }

    fn probe() -> Vec<Backend> {
        let mut v = vec![Backend::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Backend::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("gfni")
            {
                v.push(Backend::Gfni);
            }
        }
        v
    }

    /// Lower-case name, as printed by benchmarks.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Scalar => "scalar",
            Backend::Avx2 => "avx2",
            Backend::Gfni => "gfni",
        }
    }
}

/// Whether a dot product overwrites its outputs or XORs into them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Overwrite,
    Xor,
}

/// `outputs[o] (=|^=) sum_i coefs[o * inputs.len() + i] * inputs[i]`,
/// byte by byte, with the detected backend.
///
/// Panics if the slices differ in length or `coefs` has the wrong size:
/// callers derive both from one layout, so a mismatch is a bug.
pub fn dot_prod(coefs: &[u8], inputs: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
    dot_prod_with(Backend::detect(), coefs, inputs, outputs, mode);
}

/// [`dot_prod`] with an explicit backend (which the CPU must support;
/// an unsupported one falls back to scalar).
pub fn dot_prod_with(
    backend: Backend,
    coefs: &[u8],
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    mode: Mode,
) {
    assert_eq!(
        coefs.len(),
        inputs.len() * outputs.len(),
        "coefficient matrix shape"
    );
    let Some(len) = outputs.first().map(|o| o.len()) else {
        return;
    };
    assert!(
        inputs.iter().all(|i| i.len() == len) && outputs.iter().all(|o| o.len() == len),
        "all regions of a dot product must have one length"
    );
    if inputs.is_empty() {
        if mode == Mode::Overwrite {
            outputs.iter_mut().for_each(|o| o.fill(0));
        }
        return;
    }
    match backend {
        #[cfg(target_arch = "x86_64")]
        Backend::Gfni if Backend::available().contains(&Backend::Gfni) => {
            // SAFETY: the CPU has AVX-512F/BW and GFNI (checked just above);
            // lengths were checked equal.
            unsafe { gfni::dot_prod(coefs, inputs, outputs, mode) }
        }
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 | Backend::Gfni if Backend::available().contains(&Backend::Avx2) => {
            // SAFETY: the CPU has AVX2 (checked just above); lengths equal.
            unsafe { avx2::dot_prod(coefs, inputs, outputs, mode) }
        }
        _ => scalar_dot_prod(coefs, inputs, outputs, mode),
    }
}

/// `dst ^= c * src`.
pub fn mul_xor_region(c: u8, src: &[u8], dst: &mut [u8]) {
    match c {
        0 => {}
        1 => xor_region(src, dst),
        _ => dot_prod(&[c], &[src], &mut [dst], Mode::Xor),
    }
}

/// `dst = c * src`.
pub fn mul_region(c: u8, src: &[u8], dst: &mut [u8]) {
    match c {
        0 => dst.fill(0),
        1 => dst.copy_from_slice(src),
        _ => dot_prod(&[c], &[src], &mut [dst], Mode::Overwrite),
    }
}

/// `dst ^= src` (the compiler vectorises this loop on its own).
pub fn xor_region(src: &[u8], dst: &mut [u8]) {
    assert_eq!(src.len(), dst.len(), "xor of regions of different lengths");
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (a, b) in (&mut d).zip(&mut s) {
        let v = u64::from_ne_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]])
            ^ u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        a.copy_from_slice(&v.to_ne_bytes());
    }
    for (a, b) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *a ^= b;
    }
}

/// The reference: one table lookup per byte, per input, per output.
pub fn scalar_dot_prod(coefs: &[u8], inputs: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
    let n = inputs.len();
    for (o, out) in outputs.iter_mut().enumerate() {
        if mode == Mode::Overwrite {
            out.fill(0);
        }
        for (i, inp) in inputs.iter().enumerate() {
            let c = coefs[o * n + i];
            if c == 0 {
                continue;
            }
            let t = gf::mul_table(c);
            for (d, s) in out.iter_mut().zip(inp.iter()) {
                *d ^= t[*s as usize];
            }
        }
    }
}

/// The 8x8 bit matrix (GFNI `gf2p8affineqb` layout) of multiplication by
/// `c`: byte `7 - i` of the result holds, in bit `b`, bit `i` of `c * 2^b`.
#[inline]
pub fn affine_matrix(c: u8) -> u64 {
    AFFINE[c as usize]
}

const fn xtime_mul(a: u8, b: u8) -> u8 {
    // Shift-and-add multiplication, usable in const context.
    let (mut a, mut b, mut p) = (a as u16, b, 0u16);
    while b != 0 {
        if b & 1 == 1 {
            p ^= a;
        }
        a <<= 1;
        if a & 0x100 != 0 {
            a ^= gf::POLY;
        }
        b >>= 1;
    }
    p as u8
}

const fn build_affine() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        let mut m = 0u64;
        let mut b = 0;
        while b < 8 {
            let p = xtime_mul(c as u8, 1 << b);
            let mut i = 0;
            while i < 8 {
                if (p >> i) & 1 == 1 {
                    m |= 1u64 << ((7 - i) * 8 + b);
                }
                i += 1;
            }
            b += 1;
        }
        t[c] = m;
        c += 1;
    }
    t
}

/// `affine_matrix` for every constant, built at compile time.
static AFFINE: [u64; 256] = build_affine();

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(
        b: Backend,
        coefs: &[u8],
        ins: &[Vec<u8>],
        outs: &[Vec<u8>],
        mode: Mode,
    ) -> Vec<Vec<u8>> {
        let inputs: Vec<&[u8]> = ins.iter().map(|v| v.as_slice()).collect();
        let mut o = outs.to_vec();
        let mut refs: Vec<&mut [u8]> = o.iter_mut().map(|v| v.as_mut_slice()).collect();
        dot_prod_with(b, coefs, &inputs, &mut refs, mode);
        o
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// Every backend this CPU has equals the scalar reference, for
        /// any shape, length (tails included) and coefficients.
        #[test]
        fn simd_backends_equal_scalar(
            n_in in 1usize..30, n_out in 1usize..7, len in 0usize..700,
            seed in any::<u64>(), xor in any::<bool>(),
        ) {
            let mut rng = loligo_testkit::Rng::new(seed);
            let mut next = || rng.next_u64() as u8;
            let ins: Vec<Vec<u8>> = (0..n_in).map(|_| (0..len).map(|_| next()).collect()).collect();
            let outs: Vec<Vec<u8>> = (0..n_out).map(|_| (0..len).map(|_| next()).collect()).collect();
            let mut coefs: Vec<u8> = (0..n_in * n_out).map(|_| next()).collect();
            // Make 0 and 1 common: they take special paths.
            for c in coefs.iter_mut().step_by(3) { *c %= 2; }
            let mode = if xor { Mode::Xor } else { Mode::Overwrite };
            let want = run(Backend::Scalar, &coefs, &ins, &outs, mode);
            for &b in Backend::available() {
                prop_assert_eq!(&run(b, &coefs, &ins, &outs, mode), &want, "backend {:?}", b);
            }
        }
    }

    #[test]
    fn affine_matrix_multiplies() {
        // Apply the matrix the way the instruction does, bit by bit.
        for c in [0u8, 1, 2, 3, 0x1d, 0x80, 0xff] {
            let m = affine_matrix(c);
            for x in 0..=255u8 {
                let mut y = 0u8;
                for i in 0..8 {
                    let row = (m >> ((7 - i) * 8)) as u8;
                    if (row & x).count_ones() % 2 == 1 {
                        y |= 1 << i;
                    }
                }
                assert_eq!(y, gf::mul(c, x));
            }
        }
    }

    #[test]
    fn region_helpers() {
        let src: Vec<u8> = (0..100u8).collect();
        let mut d = vec![7u8; 100];
        mul_xor_region(3, &src, &mut d);
        for (i, v) in d.iter().enumerate() {
            assert_eq!(*v, 7 ^ gf::mul(3, i as u8));
        }
        mul_region(1, &src, &mut d);
        assert_eq!(d, src);
        mul_region(0, &src, &mut d);
        assert!(d.iter().all(|&v| v == 0));
    }
}
