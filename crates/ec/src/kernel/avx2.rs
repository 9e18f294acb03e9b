//! AVX2 dot product: a constant's products with the 16 low nibbles and the
//! 16 high nibbles are two PSHUFB tables; a byte's product is the XOR of
//! its two lookups.
//!
//! Unsafe by nature (intrinsics, raw pointers). Callers must check the CPU
//! feature and that every region has the same length; `kernel::tests`
//! compares this against the scalar reference.

use super::Mode;
use crate::gf;
use std::arch::x86_64::*;

/// See [`super::dot_prod`].
///
/// # Safety
/// The CPU must support AVX2, and all `inputs` and `outputs` must have the
/// same length.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn dot_prod(
    coefs: &[u8],
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    mode: Mode,
) {
    let n = inputs.len();
    let len = outputs[0].len();
    let ins: Vec<*const u8> = inputs.iter().map(|s| s.as_ptr()).collect();
    let mut o = 0;
    while o < outputs.len() {
        let g = (outputs.len() - o).min(4);
        let rows = &coefs[o * n..(o + g) * n];
        let outs = &mut outputs[o..o + g];
        // SAFETY: forwarded preconditions; `outs` has exactly `g` regions.
        unsafe {
            match g {
                1 => group::<1>(rows, &ins, outs, len, mode),
                2 => group::<2>(rows, &ins, outs, len, mode),
                3 => group::<3>(rows, &ins, outs, len, mode),
                _ => group::<4>(rows, &ins, outs, len, mode),
            }
        }
        o += g;
    }
}

#[target_feature(enable = "avx2")]
unsafe fn group<const G: usize>(
    rows: &[u8],
    ins: &[*const u8],
    outs: &mut [&mut [u8]],
    len: usize,
    mode: Mode,
) {
    let n = ins.len();
    // (low-nibble table, high-nibble table) per (input, output).
    let mut tabs: Vec<(__m256i, __m256i)> = Vec::with_capacity(n * G);
    for i in 0..n {
        for j in 0..G {
            let c = rows[j * n + i];
            let mut lo = [0u8; 32];
            let mut hi = [0u8; 32];
            for x in 0..16u8 {
                lo[x as usize] = gf::mul(c, x);
                lo[x as usize + 16] = lo[x as usize];
                hi[x as usize] = gf::mul(c, x << 4);
                hi[x as usize + 16] = hi[x as usize];
            }
            // SAFETY: 32-byte arrays, unaligned loads.
            unsafe {
                tabs.push((
                    _mm256_loadu_si256(lo.as_ptr() as *const __m256i),
                    _mm256_loadu_si256(hi.as_ptr() as *const __m256i),
                ));
            }
        }
    }
    let out_ptrs: [*mut u8; G] = std::array::from_fn(|j| outs[j].as_mut_ptr());
    let nib = _mm256_set1_epi8(0x0f);
    let mut pos = 0;
    while pos + 32 <= len {
        let mut acc = [_mm256_setzero_si256(); G];
        if mode == Mode::Xor {
            for j in 0..G {
                // SAFETY: pos + 32 <= len.
                acc[j] = unsafe { _mm256_loadu_si256(out_ptrs[j].add(pos) as *const __m256i) };
            }
        }
        for i in 0..n {
            // SAFETY: pos + 32 <= len.
            let x = unsafe { _mm256_loadu_si256(ins[i].add(pos) as *const __m256i) };
            let lo = _mm256_and_si256(x, nib);
            let hi = _mm256_and_si256(_mm256_srli_epi64::<4>(x), nib);
            for j in 0..G {
                let (tl, th) = tabs[i * G + j];
                let p = _mm256_xor_si256(_mm256_shuffle_epi8(tl, lo), _mm256_shuffle_epi8(th, hi));
                acc[j] = _mm256_xor_si256(acc[j], p);
            }
        }
        for j in 0..G {
            // SAFETY: pos + 32 <= len; outputs do not alias inputs.
            unsafe { _mm256_storeu_si256(out_ptrs[j].add(pos) as *mut __m256i, acc[j]) };
        }
        pos += 32;
    }
    // Tail, byte by byte.
    for p in pos..len {
        for j in 0..G {
            // SAFETY: p < len.
            let mut v = if mode == Mode::Xor {
                unsafe { *out_ptrs[j].add(p) }
            } else {
                0
            };
            for i in 0..n {
                // SAFETY: p < len.
                v ^= gf::mul(rows[j * n + i], unsafe { *ins[i].add(p) });
            }
            // SAFETY: p < len.
            unsafe { *out_ptrs[j].add(p) = v };
        }
    }
}
