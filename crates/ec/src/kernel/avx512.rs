//! AVX-512BW dot product for CPUs with AVX-512 and without GFNI (Intel
//! Skylake-SP and Cascade Lake servers): the AVX2 kernel's split nibble
//! tables (a constant's products with the 16 low and the 16 high nibbles,
//! repeated in each 128-bit lane, since `vpshufb` looks up within a lane),
//! 64 bytes per instruction, with the two lookups and the accumulator
//! folded by one three-way XOR (`vpternlogd`).
//!
//! The work is cut into blocks of G outputs by B inputs with both known at
//! compile time (as in the GFNI kernel): the input loop unrolls, and the
//! tables that fit stay in registers while the rest are reloaded from L1
//! each step. Head and tail are masked steps, so the loop runs on the
//! first input's 64-byte alignment and no byte runs one at a time.
//!
//! Unsafe by nature (intrinsics, raw pointers). Callers must check the CPU
//! features and that every region has the same length; `kernel::tests`
//! compares this against the scalar reference on random shapes and tails.

use super::Mode;
use std::arch::x86_64::*;

/// Inputs per block: every output count takes up to ten, one pass over
/// its outputs (as the other SIMD kernels).
const INPUTS_PER_BLOCK: usize = 10;

/// `vpternlogd` immediate for `a ^ b ^ c`.
const XOR3: i32 = 0x96;

/// See [`super::dot_prod`].
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW, and all `inputs` and
/// `outputs` must have the same length.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn dot_prod(
    coefs: &[u8],
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    mode: Mode,
) {
    let per = |n, _g| super::even_blocks(n, INPUTS_PER_BLOCK);
    super::in_blocks(
        coefs,
        inputs,
        outputs,
        mode,
        (per, super::Crowding::Split),
        &mut |g, b, rows, ins, outs, len, m| {
            // SAFETY: forwarded preconditions; `ins` has b and `outs` g
            // regions of `len` bytes, b <= INPUTS_PER_BLOCK (`per`).
            unsafe { dispatch(g, b, rows, ins, outs, len, m) }
        },
    );
}

/// # Safety
/// As [`dot_prod`]; `g` in 1..=4 and `b` in 1..=[`INPUTS_PER_BLOCK`].
#[target_feature(enable = "avx512f,avx512bw")]
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
            1 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            2 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            3 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            4 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        )
    }
}

/// The (low-nibble, high-nibble) lookup tables of multiplication by `c`,
/// each repeated in all four 128-bit lanes.
#[target_feature(enable = "avx512f,avx512bw")]
fn tables(c: u8) -> [__m512i; 2] {
    super::nibble_tables(c).map(|(l, h)| _mm512_set_epi64(h, l, h, l, h, l, h, l))
}

/// B inputs into G outputs, 64 bytes per step (head and tail masked).
///
/// # Safety
/// As [`dot_prod`]; `rows` is G x B, `ins` has B and `outs` G pointers to
/// `len` bytes each.
#[target_feature(enable = "avx512f,avx512bw")]
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
        match o.bits {
            0 => ones_block::<B, G, 0>(&o, len, mode),
            1 => ones_block::<B, G, 1>(&o, len, mode),
            2 => ones_block::<B, G, 2>(&o, len, mode),
            _ => ones_block::<B, G, 3>(&o, len, mode),
        }
    }
}

/// [`block`] with the coefficients `ONES` marks (as
/// [`super::OnesFirst::bits`]) taken as 1: XORs of the input, no lookups.
///
/// # Safety
/// As [`block`]; `ONES` no more than `o.bits`.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn ones_block<const B: usize, const G: usize, const ONES: usize>(
    o: &super::OnesFirst<B, G>,
    len: usize,
    mode: Mode,
) {
    // Input-major: step i reads its G pairs one after another.
    let tabs: [[[__m512i; 2]; G]; B] =
        std::array::from_fn(|i| std::array::from_fn(|j| tables(o.rows[j][i])));
    let (ptrs, out_ptrs) = (o.ins, o.outs);
    // A masked head first so that the first input's loads are 64-byte
    // aligned (chunks of one object share their offset within a line, so
    // the others' are too; unaligned 64-byte loads split two lines).
    let head = ((64 - ptrs[0] as usize % 64) % 64).min(len);
    if head > 0 {
        // SAFETY: head <= len.
        unsafe { step::<B, G, ONES, true>(&tabs, &ptrs, &out_ptrs, 0, (1u64 << head) - 1, mode) };
    }
    let mut pos = head;
    while pos + 64 <= len {
        // SAFETY: pos + 64 <= len for every region.
        unsafe { step::<B, G, ONES, false>(&tabs, &ptrs, &out_ptrs, pos, !0, mode) };
        pos += 64;
    }
    if pos < len {
        // SAFETY: len - pos < 64 bytes remain in every region.
        let mask = (1u64 << (len - pos)) - 1;
        unsafe { step::<B, G, ONES, true>(&tabs, &ptrs, &out_ptrs, pos, mask, mode) };
    }
}

/// One step of [`block`] at `pos`: 64 bytes, or with `MASKED` the bytes
/// set in `mask`.
///
/// # Safety
/// `pos + 64` bytes (`MASKED`: `pos + popcount(mask)`, mask bits
/// contiguous from bit 0) exist in every region.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn step<const B: usize, const G: usize, const ONES: usize, const MASKED: bool>(
    tabs: &[[[__m512i; 2]; G]; B],
    ptrs: &[*const u8; B],
    out_ptrs: &[*mut u8; G],
    pos: usize,
    mask: __mmask64,
    mode: Mode,
) {
    let nib = _mm512_set1_epi8(0x0f);
    let mut acc = [_mm512_setzero_si512(); G];
    if mode == Mode::Xor {
        for j in 0..G {
            // SAFETY: per the contract.
            acc[j] = unsafe { load::<MASKED>(out_ptrs[j].add(pos), mask) };
        }
    }
    for i in 0..B {
        // SAFETY: per the contract.
        let x = unsafe { load::<MASKED>(ptrs[i].add(pos), mask) };
        if (0..G).all(|j| super::is_one(ONES, i, j)) {
            acc.iter_mut().for_each(|a| *a = _mm512_xor_si512(*a, x));
            continue;
        }
        let lo = _mm512_and_si512(x, nib);
        let hi = _mm512_and_si512(_mm512_srli_epi64::<4>(x), nib);
        for j in 0..G {
            if super::is_one(ONES, i, j) {
                acc[j] = _mm512_xor_si512(acc[j], x);
                continue;
            }
            let [tl, th] = tabs[i][j];
            acc[j] = _mm512_ternarylogic_epi32::<XOR3>(
                acc[j],
                _mm512_shuffle_epi8(tl, lo),
                _mm512_shuffle_epi8(th, hi),
            );
        }
    }
    for j in 0..G {
        // SAFETY: per the contract; outputs do not alias inputs (they
        // come from a `&mut` borrow).
        unsafe {
            let p = out_ptrs[j].add(pos);
            if MASKED {
                _mm512_mask_storeu_epi8(p as *mut i8, mask, acc[j]);
            } else {
                _mm512_storeu_si512(p as *mut __m512i, acc[j]);
            }
        }
    }
}

/// 64 bytes at `p`, or with `MASKED` the bytes set in `mask` (the rest
/// zero, never read).
///
/// # Safety
/// The bytes read exist.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn load<const MASKED: bool>(p: *const u8, mask: __mmask64) -> __m512i {
    // SAFETY: per the contract.
    unsafe {
        if MASKED {
            _mm512_maskz_loadu_epi8(mask, p as *const i8)
        } else {
            _mm512_loadu_si512(p as *const __m512i)
        }
    }
}
