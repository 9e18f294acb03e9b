//! GFNI on 256-bit registers, for CPUs that have GFNI and AVX2 but no
//! AVX-512 (Intel's E-core servers and client cores, for one): each
//! constant becomes an 8x8 bit matrix and the VEX-encoded
//! `vgf2p8affineqb` multiplies 32 bytes by it in one instruction, where
//! the PSHUFB kernel needs two lookups, two masks and a shift.
//!
//! Blocks of G outputs by B inputs, both compile-time shapes, as in
//! `gfni.rs`. The loop over 32-byte steps is assembly that `build.rs`
//! generates, one naked function per shape: ten matrices stay in
//! registers and the rest are broadcast from memory at each use (16
//! vector registers). The
//! loop is aligned on the first input; the head and the tail run byte by
//! byte (there are no masked loads without AVX-512).
//!
//! Unsafe by nature (generated assembly, raw pointers). Callers must check the CPU
//! features and that every region has the same length; `kernel::tests`
//! compares this against the scalar reference on random shapes and tails.

use super::{affine_matrix, Mode, StepsFn};

// The generated loops (`build.rs`) and their table, `KERNELS`.
include!(concat!(env!("OUT_DIR"), "/gfni_avx2_steps.rs"));

/// Inputs per block: one pass over up to four outputs for RS 10+4, as the
/// other SIMD kernels make.
const INPUTS_PER_BLOCK: usize = 10;

/// See [`super::dot_prod`].
///
/// # Safety
/// The CPU must support AVX2 and GFNI, and all `inputs` and `outputs` must
/// have the same length.
#[target_feature(enable = "avx2,gfni")]
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
#[target_feature(enable = "avx2,gfni")]
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

/// B inputs into G outputs: the generated loop, 32 bytes a step; bytes
/// before the first input's 32-byte boundary and after the last whole
/// step one at a time.
///
/// # Safety
/// As [`dot_prod`]; `rows` is G x B, `ins` has B and `outs` G pointers to
/// `len` bytes each.
#[target_feature(enable = "avx2,gfni")]
unsafe fn block<const B: usize, const G: usize>(
    rows: &[u8],
    ins: &[*const u8],
    outs: &[*mut u8],
    len: usize,
    mode: Mode,
) {
    let o = super::ones_first::<B, G>(rows, ins, outs);
    // Input-major, as the generated loop reads them.
    let mats: [[u64; G]; B] =
        std::array::from_fn(|i| std::array::from_fn(|j| affine_matrix(o.rows[j][i])));
    let steps = KERNELS[B - 1][G - 1][usize::from(mode == Mode::Xor)][o.bits];
    // SAFETY: the CPU has AVX2 and GFNI (forwarded); `mats` is B x G
    // 8-byte matrices, input-major, as the generated loop reads them; the
    // loop takes as 1 only the coefficients `o.bits` says are.
    unsafe {
        super::generated_block::<B, G>(
            (steps, 32),
            mats.as_ptr().cast(),
            o.rows.as_flattened(),
            &o.ins,
            &o.outs,
            len,
            mode,
        )
    };
}
