//! AVX-512 + GFNI dot product: each constant becomes an 8x8 bit matrix and
//! `vgf2p8affineqb` multiplies 64 bytes by it in one instruction.
//!
//! Unsafe by nature (intrinsics, raw pointers). Callers must check the CPU
//! features and that every region has the same length; `kernel::tests`
//! compares this against the scalar reference on random shapes and tails.

use super::{affine_matrix, Mode};
use std::arch::x86_64::*;

/// See [`super::dot_prod`].
///
/// # Safety
/// The CPU must support AVX-512F, AVX-512BW and GFNI, and all `inputs` and
/// `outputs` must have the same length.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
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

/// G outputs at a time: G accumulators stay in registers while every
/// input is streamed once.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn group<const G: usize>(
    rows: &[u8],
    ins: &[*const u8],
    outs: &mut [&mut [u8]],
    len: usize,
    mode: Mode,
) {
    let n = ins.len();
    let mut mats: Vec<__m512i> = Vec::with_capacity(n * G);
    for i in 0..n {
        for j in 0..G {
            mats.push(_mm512_set1_epi64(affine_matrix(rows[j * n + i]) as i64));
        }
    }
    let out_ptrs: [*mut u8; G] = std::array::from_fn(|j| outs[j].as_mut_ptr());
    let mut pos = 0;
    while pos < len {
        let left = len - pos;
        // Full vectors, then one masked vector for the tail.
        let mask: __mmask64 = if left >= 64 { !0 } else { (1u64 << left) - 1 };
        let mut acc = [_mm512_setzero_si512(); G];
        if mode == Mode::Xor {
            for j in 0..G {
                // SAFETY: pos + popcount(mask) <= len for every region.
                acc[j] =
                    unsafe { _mm512_maskz_loadu_epi8(mask, out_ptrs[j].add(pos) as *const i8) };
            }
        }
        for i in 0..n {
            // SAFETY: as above.
            let x = unsafe { _mm512_maskz_loadu_epi8(mask, ins[i].add(pos) as *const i8) };
            for j in 0..G {
                let p = _mm512_gf2p8affine_epi64_epi8::<0>(x, mats[i * G + j]);
                acc[j] = _mm512_xor_si512(acc[j], p);
            }
        }
        for j in 0..G {
            // SAFETY: as above; outputs do not alias inputs (&mut borrow).
            unsafe { _mm512_mask_storeu_epi8(out_ptrs[j].add(pos) as *mut i8, mask, acc[j]) };
        }
        pos += 64;
    }
}
