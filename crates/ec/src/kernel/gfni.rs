//! AVX-512 + GFNI dot product: each constant becomes an 8x8 bit matrix and
//! `vgf2p8affineqb` multiplies 64 bytes by it in one instruction.
//!
//! The work is cut into blocks of G outputs by B inputs with both known at
//! compile time, so the B x G matrices and the input pointers stay in
//! registers (B * G <= 24 of the 32 vector registers), or, for blocks of
//! up to [`INPUTS_MIN`] inputs, mostly in registers (the rest reloaded
//! from the stack each step); blocks after the first accumulate into the
//! outputs.
//!
//! Full speed needs the regions at one offset within a 64-byte line (the
//! kernel aligns its loop on the first input): regions at different
//! offsets make every vector load split two cache lines, about half speed
//! (measured). `layout::ChunkBuffers` gives page-aligned chunks, as
//! O_DIRECT I/O needs anyway.
//!
//! Unsafe by nature (intrinsics, raw pointers). Callers must check the CPU
//! features and that every region has the same length; `kernel::tests`
//! compares this against the scalar reference on random shapes and tails.

use super::{affine_matrix, Mode};
use std::arch::x86_64::*;

/// Matrices kept in registers per block.
const REGS_FOR_MATRICES: usize = 24;
/// Inputs a block may take whatever its output count: with 3 or 4
/// outputs, one pass over the outputs with some matrices reloaded each
/// step beats two passes with all of them in registers (RS 10+4: 34-35
/// against 37-39 GB/s, BENCHMARKS.md).
const INPUTS_MIN: usize = 10;

/// The longest regions for which a block of fewer than four outputs takes
/// its coefficients of 1 as plain XORs ([`super::OnesFirst`]; blocks of
/// four always do). An affine product is one instruction here, folded
/// with the XOR into `vpternlogq`, so skipping it pays only where the loop
/// is bound by those instructions: with its regions in L1 (RS 4+2 with 4
/// KiB chunks 83 -> 117 GB/s, 6+3 65 -> 82), or with four outputs' products
/// per input (RS 10+4, 1 MiB chunks, 37 -> 43; 4+4 and 8+4 2-9% faster).
/// Otherwise the loop waits on loads and stores, and without the products
/// it ran slower (Zen 4, RS 8+3, 1 MiB chunks: 54.8 -> 51.0 GB/s; 64 KiB:
/// 61.1 -> 59.5; 6+2 at 64 KiB 3% slower).
const ONES_MAX_LEN: usize = 8 << 10;

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
    let per = |_n, g: usize| (REGS_FOR_MATRICES / g).max(INPUTS_MIN);
    super::in_blocks(
        coefs,
        inputs,
        outputs,
        mode,
        (per, super::Crowding::SplitUpTo(1 << 20)),
        &mut |g, b, rows, ins, outs, len, m| {
            // SAFETY: forwarded preconditions; `ins` has b and `outs` g
            // regions of `len` bytes, b <= max(24 / g, INPUTS_MIN) (`per`).
            unsafe { dispatch(g, b, rows, ins, outs, len, m) }
        },
    );
}

/// # Safety
/// As [`dot_prod`]; `g` in 1..=4 and `b` in 1..=max(24 / g, [`INPUTS_MIN`]).
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn dispatch(
    g: usize,
    b: usize,
    rows: &[u8],
    ins: &[*const u8],
    outs: &[*mut u8],
    len: usize,
    mode: Mode,
) {
    // SAFETY: forwarded.
    unsafe {
        dispatch_table!(g, b, (rows, ins, outs, len, mode);
            1 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24],
            2 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
            3 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            4 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        )
    }
}

/// B inputs into G outputs, 64 bytes per step (the last step masked).
///
/// # Safety
/// As [`dot_prod`]; `rows` is G x B, `ins` has B and `outs` G pointers to
/// `len` bytes each.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn block<const B: usize, const G: usize>(
    rows: &[u8],
    ins: &[*const u8],
    outs: &[*mut u8],
    len: usize,
    mode: Mode,
) {
    let o = super::ones_first::<B, G>(rows, ins, outs);
    // SAFETY: forwarded; `o` holds the same regions, reordered.
    unsafe {
        match if len <= ONES_MAX_LEN || G == 4 {
            o.bits
        } else {
            0
        } {
            0 => ones_block::<B, G, 0>(&o, len, mode),
            1 => ones_block::<B, G, 1>(&o, len, mode),
            2 => ones_block::<B, G, 2>(&o, len, mode),
            _ => ones_block::<B, G, 3>(&o, len, mode),
        }
    }
}

/// [`block`] with the coefficients `ONES` marks (as
/// [`super::OnesFirst::bits`]) taken as 1: XORs of the input.
///
/// # Safety
/// As [`block`]; `ONES` no more than `o.bits`.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn ones_block<const B: usize, const G: usize, const ONES: usize>(
    o: &super::OnesFirst<B, G>,
    len: usize,
    mode: Mode,
) {
    let mats: [[__m512i; G]; B] = std::array::from_fn(|i| {
        std::array::from_fn(|j| _mm512_set1_epi64(affine_matrix(o.rows[j][i]) as i64))
    });
    let (ptrs, out_ptrs) = (o.ins, o.outs);
    // A masked head first so that the first input's loads are 64-byte
    // aligned: large Rust allocations start 16 bytes into a page, and
    // chunks of one object share that offset, so unaligned 64-byte loads
    // would each split two cache lines (measured: about 35 vs 50 GB/s).
    let head = ((64 - ptrs[0] as usize % 64) % 64).min(len);
    if head > 0 {
        // SAFETY: head <= len.
        unsafe { masked_step::<B, G, ONES>(&mats, &ptrs, &out_ptrs, 0, (1u64 << head) - 1, mode) };
    }
    let mut pos = head;
    // Full vectors with plain loads and stores.
    while pos + 64 <= len {
        let mut acc = [_mm512_setzero_si512(); G];
        if mode == Mode::Xor {
            for j in 0..G {
                // SAFETY: pos + 64 <= len for every region.
                acc[j] = unsafe { _mm512_loadu_si512(out_ptrs[j].add(pos) as *const __m512i) };
            }
        }
        for i in 0..B {
            // SAFETY: as above.
            let x = unsafe { _mm512_loadu_si512(ptrs[i].add(pos) as *const __m512i) };
            for j in 0..G {
                let p = match super::is_one(ONES, i, j) {
                    true => x,
                    false => _mm512_gf2p8affine_epi64_epi8::<0>(x, mats[i][j]),
                };
                acc[j] = _mm512_xor_si512(acc[j], p);
            }
        }
        for j in 0..G {
            // SAFETY: as above; outputs do not alias inputs (&mut borrow).
            unsafe { _mm512_storeu_si512(out_ptrs[j].add(pos) as *mut __m512i, acc[j]) };
        }
        pos += 64;
    }
    if pos < len {
        // SAFETY: len - pos < 64 bytes remain in every region.
        unsafe {
            masked_step::<B, G, ONES>(
                &mats,
                &ptrs,
                &out_ptrs,
                pos,
                (1u64 << (len - pos)) - 1,
                mode,
            )
        };
    }
}

/// One masked step of [`block`] at `pos` (the bytes set in `mask`).
///
/// # Safety
/// `pos + popcount(mask)` bytes exist in every region, mask bits contiguous
/// from bit 0.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn masked_step<const B: usize, const G: usize, const ONES: usize>(
    mats: &[[__m512i; G]; B],
    ptrs: &[*const u8; B],
    out_ptrs: &[*mut u8; G],
    pos: usize,
    mask: __mmask64,
    mode: Mode,
) {
    let mut acc = [_mm512_setzero_si512(); G];
    if mode == Mode::Xor {
        for j in 0..G {
            // SAFETY: per the contract.
            acc[j] = unsafe { _mm512_maskz_loadu_epi8(mask, out_ptrs[j].add(pos) as *const i8) };
        }
    }
    for i in 0..B {
        // SAFETY: per the contract.
        let x = unsafe { _mm512_maskz_loadu_epi8(mask, ptrs[i].add(pos) as *const i8) };
        for j in 0..G {
            let p = match super::is_one(ONES, i, j) {
                true => x,
                false => _mm512_gf2p8affine_epi64_epi8::<0>(x, mats[i][j]),
            };
            acc[j] = _mm512_xor_si512(acc[j], p);
        }
    }
    for j in 0..G {
        // SAFETY: per the contract.
        unsafe { _mm512_mask_storeu_epi8(out_ptrs[j].add(pos) as *mut i8, mask, acc[j]) };
    }
}
