//! AVX2 dot product: a constant's products with the 16 low nibbles and the
//! 16 high nibbles are two PSHUFB tables; a byte's product is the XOR of
//! its two lookups.
//!
//! Outputs go in groups of G (up to 4) with their accumulators in
//! registers, over blocks of up to ten inputs; both counts are compile-time
//! shapes. Each step reads two vectors (64 bytes) of every input, so each
//! table, loaded from a small array that stays in L1, serves two lookups.
//! The loop is aligned on the first input (chunks of one object share
//! their offset within a cache line, so every load then stays within one
//! line); the unaligned head and the tail run byte by byte.
//!
//! The steps themselves are assembly that `build.rs` generates, one naked
//! function per shape. Written with intrinsics the same loop ran 5-15%
//! slower on every shape measured: the compiler spilled accumulators and
//! reloaded the nibble mask each step (BENCHMARKS.md, Erasure codes).
//!
//! Unsafe by nature (intrinsics, raw pointers). Callers must check the CPU
//! feature and that every region has the same length; `kernel::tests`
//! compares this against the scalar reference on random shapes and tails.

use super::{Mode, StepsFn};
use std::arch::x86_64::*;

// The generated loops (`build.rs`) and their table, `KERNELS`.
include!(concat!(env!("OUT_DIR"), "/avx2_steps.rs"));

/// Inputs per block, each a compile-time shape (so the input loop unrolls,
/// with no per-input loop counter): their pointers and tables are set up
/// once per block; blocks after the first accumulate into the outputs.
const INPUTS_PER_BLOCK: usize = 10;

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

/// The (low-nibble, high-nibble) lookup tables of multiplication by `c`,
/// each repeated in both 128-bit lanes (PSHUFB looks up within a lane).
#[target_feature(enable = "avx2")]
fn tables(c: u8) -> [__m256i; 2] {
    super::nibble_tables(c).map(|(l, h)| _mm256_set_epi64x(h, l, h, l))
}

macro_rules! dispatch_groups {
    ($g:expr, $b:expr, $args:tt; $( $G:literal => [$($B:literal),*] ),* ) => {
        match ($g, $b) {
            $( $( ($G, $B) => group::<$B, $G> $args, )* )*
            _ => unreachable!("block shape out of range"),
        }
    };
}

/// # Safety
/// As [`group`]; `g` in 1..=4 and `b` in 1..=[`INPUTS_PER_BLOCK`].
#[target_feature(enable = "avx2")]
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
        dispatch_groups!(g, b, (rows, ins, outs, len, mode);
            1 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            2 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            3 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            4 => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        )
    }
}

/// B inputs (`rows` is G x B) into G outputs: the generated loop, 64
/// bytes (two vectors) a step, so each table serves two lookups (one
/// vector a step loads each table for one; three or four spill
/// registers).
///
/// # Safety
/// As [`dot_prod`]; `ins` has B and `outs` G pointers to `len` bytes each,
/// B <= [`INPUTS_PER_BLOCK`].
#[target_feature(enable = "avx2")]
unsafe fn group<const B: usize, const G: usize>(
    rows: &[u8],
    ins: &[*const u8],
    outs: &[*mut u8],
    len: usize,
    mode: Mode,
) {
    let o = super::ones_first::<B, G>(rows, ins, outs);
    // Tables in input-major order: step i reads G pairs one after another.
    let tabs: [[[__m256i; 2]; G]; B] =
        std::array::from_fn(|i| std::array::from_fn(|j| tables(o.rows[j][i])));
    let steps = KERNELS[B - 1][G - 1][usize::from(mode == Mode::Xor)][o.bits];
    // SAFETY: the CPU has AVX2 (forwarded); `tabs` is B x G pairs of
    // 32-byte tables, input-major, as the generated loop reads them; the
    // loop takes as 1 only the coefficients `o.bits` says are.
    unsafe {
        super::generated_block::<B, G>(
            (steps, 64),
            tabs.as_ptr().cast(),
            o.rows.as_flattened(),
            &o.ins,
            &o.outs,
            len,
            mode,
        )
    };
}
