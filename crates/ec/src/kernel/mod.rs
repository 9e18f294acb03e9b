//! Region kernels over GF(2^8): multiply a region by a constant, multiply
//! and XOR into a region, and the fused dot product that encoders use
//! (every output is a linear combination of every input, computed in one
//! pass so each input byte is loaded once per group of outputs).
//!
//! Five implementations: a scalar reference (table lookups), AVX2 (PSHUFB
//! on split nibble tables), AVX-512BW (the same tables, 64 bytes at a
//! time, for CPUs with AVX-512 and without GFNI), GFNI on AVX2 registers
//! (for CPUs with GFNI and without AVX-512) and AVX-512 + GFNI
//! (`gf2p8affineqb` with each constant as an 8x8 bit matrix). The fastest
//! the CPU supports is picked once at run time. A block's output whose
//! coefficients are all 1, or input whose coefficients are, is added as a
//! plain XOR with no lookups (`OnesFirst`): Reed-Solomon's parity matrix
//! here has both in its first row and column. SIMD code lives only in
//! `avx2.rs`, `avx512.rs`, `gfni_avx2.rs` and `gfni.rs`; it must never be
//! reached on a CPU without the features, and it is tested against the
//! scalar reference on random inputs.

use crate::gf;
use std::sync::OnceLock;

/// A match over block shapes (outputs G, inputs B) that calls the
/// kernel's `block::<B, G>` with `$args`, for the AVX-512 kernels (each
/// shape is its own compiled loop; a shape outside the table is a bug).
#[cfg(target_arch = "x86_64")]
macro_rules! dispatch_table {
    ($g:expr, $b:expr, $args:tt; $( $G:literal => [$($B:literal),*] ),* ) => {
        match ($g, $b) {
            $( $( ($G, $B) => block::<$B, $G> $args, )* )*
            _ => unreachable!("block shape out of range"),
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod gfni;
#[cfg(target_arch = "x86_64")]
mod gfni_avx2;

/// Which implementation runs the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Table lookups, one byte at a time: the reference.
    Scalar,
    /// 32 bytes at a time with PSHUFB nibble tables.
    Avx2,
    /// 64 bytes at a time with AVX-512BW PSHUFB nibble tables.
    Avx512,
    /// 32 bytes at a time with GFNI affine transforms on AVX2 registers
    /// (CPUs with GFNI and without AVX-512).
    GfniAvx2,
    /// 64 bytes at a time with AVX-512 and GFNI affine transforms.
    Gfni,
}

impl Backend {
    /// The fastest backend this CPU supports (detected once). Setting
    /// `LOLIGO_EC_BACKEND=scalar|avx2|avx512|gfni-avx2|gfni` lowers it (never above what
    /// the CPU has), for comparisons.
    pub fn detect() -> Backend {
        static B: OnceLock<Backend> = OnceLock::new();
        *B.get_or_init(|| {
            let best = Backend::available()
                .last()
                .copied()
                .unwrap_or(Backend::Scalar);
            match std::env::var("LOLIGO_EC_BACKEND")
                .ok()
                .as_deref()
                .and_then(Backend::from_name)
            {
                Some(b) if Backend::available().contains(&b) => b,
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
            let avx512 = std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw");
            if avx512 {
                v.push(Backend::Avx512);
            }
            let gfni = std::arch::is_x86_feature_detected!("gfni");
            if gfni && std::arch::is_x86_feature_detected!("avx2") {
                v.push(Backend::GfniAvx2);
            }
            if avx512 && gfni {
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
            Backend::Avx512 => "avx512",
            Backend::GfniAvx2 => "gfni-avx2",
            Backend::Gfni => "gfni",
        }
    }

    /// The backend called `name` (as [`Backend::name`] prints it), whether
    /// or not this CPU has it.
    pub fn from_name(name: &str) -> Option<Backend> {
        [
            Backend::Scalar,
            Backend::Avx2,
            Backend::Avx512,
            Backend::GfniAvx2,
            Backend::Gfni,
        ]
        .into_iter()
        .find(|b| b.name() == name)
    }

    /// The backend the kernels use on this thread now: the one
    /// [`with_backend`] set, else [`Backend::detect`].
    pub fn current() -> Backend {
        FORCED.with(|f| f.get()).unwrap_or_else(Backend::detect)
    }
}

thread_local! {
    /// The backend [`with_backend`] set on this thread, if any.
    static FORCED: std::cell::Cell<Option<Backend>> = const { std::cell::Cell::new(None) };
}

/// Run `f` with every kernel call on this thread using `backend` (for
/// benchmarks that compare backends in one process). A backend this CPU
/// lacks is refused (`None`), never run.
pub fn with_backend<R>(backend: Backend, f: impl FnOnce() -> R) -> Option<R> {
    if !Backend::available().contains(&backend) {
        return None;
    }
    struct Restore(Option<Backend>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FORCED.with(|f| f.set(self.0));
        }
    }
    let _restore = Restore(FORCED.with(|f| f.replace(Some(backend))));
    Some(f())
}

/// Whether a dot product overwrites its outputs or XORs into them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Overwrite,
    Xor,
}

/// `outputs[o] (=|^=) sum_i coefs[o * inputs.len() + i] * inputs[i]`,
/// byte by byte, with this thread's backend ([`Backend::current`]).
///
/// Panics if the slices differ in length or `coefs` has the wrong size:
/// callers derive both from one layout, so a mismatch is a bug.
pub fn dot_prod(coefs: &[u8], inputs: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
    dot_prod_with(Backend::current(), coefs, inputs, outputs, mode);
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
        Backend::GfniAvx2 | Backend::Gfni if Backend::available().contains(&Backend::GfniAvx2) => {
            // SAFETY: the CPU has AVX2 and GFNI (checked just above);
            // lengths were checked equal.
            unsafe { gfni_avx2::dot_prod(coefs, inputs, outputs, mode) }
        }
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 | Backend::Gfni if Backend::available().contains(&Backend::Avx512) => {
            // SAFETY: the CPU has AVX-512F/BW (checked just above); lengths
            // were checked equal.
            unsafe { avx512::dot_prod(coefs, inputs, outputs, mode) }
        }
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 | Backend::Avx512 | Backend::GfniAvx2 | Backend::Gfni
            if Backend::available().contains(&Backend::Avx2) =>
        {
            // SAFETY: the CPU has AVX2 (checked just above); lengths equal.
            unsafe { avx2::dot_prod(coefs, inputs, outputs, mode) }
        }
        _ => scalar_dot_prod(coefs, inputs, outputs, mode),
    }
}

/// The products of `c` with the 16 low nibbles and the 16 high nibbles,
/// as the two halves of each 64-bit lane pair the PSHUFB kernels load
/// (little-endian: low half, high half): a byte's product is the XOR of
/// its two lookups.
#[cfg(target_arch = "x86_64")]
#[inline]
fn nibble_tables(c: u8) -> [(i64, i64); 2] {
    NIBBLES[c as usize]
}

/// [`nibble_tables`] of every constant, built at compile time: built per
/// call, the 32 products of each of an 8+3 encode's 24 constants cost a
/// tenth of encoding 4 KiB chunks (BENCHMARKS.md).
#[cfg(target_arch = "x86_64")]
static NIBBLES: [[(i64, i64); 2]; 256] = build_nibbles();

#[cfg(target_arch = "x86_64")]
const fn build_nibbles() -> [[(i64, i64); 2]; 256] {
    let mut t = [[(0i64, 0i64); 2]; 256];
    let mut c = 0;
    while c < 256 {
        let (mut lo, mut hi) = (0u128, 0u128);
        let mut x = 0;
        while x < 16 {
            lo |= (xtime_mul(c as u8, x as u8) as u128) << (8 * x);
            hi |= (xtime_mul(c as u8, (x << 4) as u8) as u128) << (8 * x);
            x += 1;
        }
        t[c] = [
            (lo as i64, (lo >> 64) as i64),
            (hi as i64, (hi >> 64) as i64),
        ];
        c += 1;
    }
    t
}

/// Inputs per block for `n` inputs in blocks of at most `most`, evenly
/// split (12 inputs by 10: 6 + 6, not 10 + 2), as the PSHUFB kernels cut
/// them.
#[cfg(target_arch = "x86_64")]
fn even_blocks(n: usize, most: usize) -> usize {
    n.div_ceil(n.div_ceil(most))
}

/// Ways of this CPU's L1 data cache, from CPUID's deterministic cache
/// parameters (leaf 4 on Intel, 0x8000_001D on AMD); 8, the fewest common
/// on x86-64 servers, where the CPU does not say. `LOLIGO_EC_L1_WAYS=N`
/// sets it instead (read once), so a bench can show what cutting
/// crowded regions does on another CPU: `LOLIGO_EC_L1_WAYS=64` never
/// cuts for the shapes encoders use, `8` cuts as on an 8-way cache.
#[cfg(target_arch = "x86_64")]
fn l1d_ways() -> usize {
    static WAYS: OnceLock<usize> = OnceLock::new();
    *WAYS.get_or_init(|| {
        use std::arch::x86_64::{__cpuid, __cpuid_count};
        let forced = std::env::var("LOLIGO_EC_L1_WAYS").ok();
        if let Some(n) = forced
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n >= 2)
        {
            return n;
        }
        let max_basic = __cpuid(0).eax;
        let max_ext = __cpuid(0x8000_0000).eax;
        let leaves = [(4, max_basic >= 4), (0x8000_001D, max_ext >= 0x8000_001D)];
        for (leaf, _) in leaves.into_iter().filter(|l| l.1) {
            for sub in 0..8 {
                let r = __cpuid_count(leaf, sub);
                let (kind, level) = (r.eax & 0x1f, (r.eax >> 5) & 7);
                if kind == 0 {
                    break;
                }
                if kind == 1 && level == 1 {
                    // EAX bit 9: fully associative (no sets to crowd).
                    return match r.eax & (1 << 9) {
                        0 => ((r.ebx >> 22) & 0x3ff) as usize + 1,
                        _ => usize::MAX,
                    };
                }
            }
        }
        8
    })
}

/// Whether more than `ways` of the regions starting at `addrs` crowd
/// one part of the L1 cache: a loop that steps through all of them
/// together touches, at each step, lines in the same cache set for
/// regions whose addresses agree modulo 4 KiB (64 sets of 64-byte lines
/// on x86-64's L1 data caches), and those within a few lines of one
/// another share sets as the prefetcher runs ahead. With more such
/// regions than the set has ways, they evict each other's lines before
/// use. Regions laid end to end in 4 KiB multiples (one allocation cut
/// into chunks, as `ChunkBuffers` and klauspost/reedsolomon's
/// `AllocAligned` give) all crowd one set.
///
/// Looks at the first 64 regions (scratch on the stack).
#[cfg(target_arch = "x86_64")]
fn crowded(addrs: impl Iterator<Item = usize>, ways: usize) -> bool {
    /// Offsets within 4 KiB this close count as one crowd (four lines).
    const NEAR: usize = 256;
    let mut offs = [0usize; 64];
    let mut n = 0;
    for (slot, a) in offs.iter_mut().zip(addrs) {
        *slot = a % 4096;
        n += 1;
    }
    if n <= ways {
        return false;
    }
    let offs = &offs[..n];
    // The most offsets in a window of NEAR bytes, wrapping at 4 KiB.
    (0..n).any(|i| {
        let within = (0..n)
            .filter(|&j| (offs[j] + 4096 - offs[i]) % 4096 < NEAR)
            .count();
        within > ways
    })
}

/// The fewest bytes per region for which a kernel cuts crowded regions
/// into smaller blocks: below, the regions' lines stay in L1 or L2 between
/// calls and the extra pass over the outputs costs more than it saves
/// (AVX-512 GFNI, RS 8+3 with 4 KiB chunks: 64 against 68 GB/s).
#[cfg(target_arch = "x86_64")]
const CROWD_MIN_LEN: usize = 8 << 10;

/// How a kernel treats regions that crowd the L1 cache's sets
/// ([`crowded`]) in [`in_blocks`].
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Crowding {
    /// Cut a group's inputs into blocks of at most `ways - outputs`, so a
    /// pass steps through no more regions than a set has ways. Measured
    /// on a Zen 4 core (8-way L1), RS 8+3 with 64 KiB chunks laid end to
    /// end, best of 20 rounds: AVX2 23.3 to 27.5 GB/s, AVX-512 31.0 to
    /// 34.7, GFNI on AVX2 34.6 to 59.2; RS 10+4: 18.5 to 20.7, 21.5 to
    /// 27.0, 22.1 to 41.9; and likewise with 1 MiB chunks (BENCHMARKS.md).
    Split,
    /// As `Split` while all the group's regions together take at most
    /// this many bytes; past it they come from L3 or memory, and a
    /// kernel that is bound by that traffic (AVX-512 GFNI: RS 8+3 with 256
    /// KiB chunks, 57 against 51 GB/s one pass) loses more to the second
    /// pass over the outputs than it gains.
    SplitUpTo(usize),
}

/// The most inputs a SIMD kernel's block takes (the GFNI kernel's, with
/// one output; the others take fewer).
#[cfg(target_arch = "x86_64")]
const BLOCK_INPUTS_MAX: usize = 24;

/// A SIMD kernel's block: `g` outputs (`outs`) by `b` inputs (`ins`),
/// `rows` their coefficients row-major g x b, `len` bytes each.
#[cfg(target_arch = "x86_64")]
type BlockFn<'a> = dyn FnMut(usize, usize, &[u8], &[*const u8], &[*mut u8], usize, Mode) + 'a;

/// The blocking the SIMD kernels share: outputs in groups of up to four,
/// each group over the inputs in blocks of up to `per(n, g)` inputs (of
/// `n`, at most [`BLOCK_INPUTS_MAX`]); blocks after a group's first
/// accumulate into its outputs. Pointers go to `block` as raw pointers:
/// a kernel keeps them in registers, and the regions' lengths were
/// checked equal by the caller.
#[cfg(target_arch = "x86_64")]
fn in_blocks(
    coefs: &[u8],
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    mode: Mode,
    (per, crowding): (impl Fn(usize, usize) -> usize, Crowding),
    block: &mut BlockFn<'_>,
) {
    let n = inputs.len();
    let len = outputs[0].len();
    // Fixed-size scratch on the stack: this runs once per element for
    // array codes, so heap allocations would show.
    let mut rows = [0u8; 4 * BLOCK_INPUTS_MAX];
    let mut ins = [std::ptr::null::<u8>(); BLOCK_INPUTS_MAX];
    let mut out_ptrs = [std::ptr::null_mut::<u8>(); 4];
    let mut o = 0;
    while o < outputs.len() {
        let g = (outputs.len() - o).min(4);
        for j in 0..g {
            out_ptrs[j] = outputs[o + j].as_mut_ptr();
        }
        let mut per = per(n, g).clamp(1, BLOCK_INPUTS_MAX);
        // Short regions (array codes' elements among them) skip the
        // crowding check altogether.
        if len >= CROWD_MIN_LEN {
            let ways = l1d_ways();
            let split = match crowding {
                Crowding::Split => true,
                Crowding::SplitUpTo(most) => len.saturating_mul(n + g) <= most,
            };
            let addrs = inputs
                .iter()
                .map(|r| r.as_ptr() as usize)
                .chain(out_ptrs[..g].iter().map(|&p| p as usize));
            if split && per + g > ways && crowded(addrs, ways) {
                per = even_blocks(n, per.min(ways.saturating_sub(g).max(1)));
            }
        }
        let mut i = 0;
        while i < n {
            let b = (n - i).min(per);
            for j in 0..g {
                rows[j * b..(j + 1) * b]
                    .copy_from_slice(&coefs[(o + j) * n + i..(o + j) * n + i + b]);
            }
            for (slot, s) in ins.iter_mut().zip(&inputs[i..i + b]) {
                *slot = s.as_ptr();
            }
            let m = if i == 0 { mode } else { Mode::Xor };
            block(g, b, &rows[..g * b], &ins[..b], &out_ptrs[..g], len, m);
            i += b;
        }
        o += g;
    }
}

/// A block (G outputs by B inputs) arranged for the generated loops: an
/// output whose coefficients are all 1 moved to the front, likewise an
/// input, and `bits` saying which of the two a loop may take as plain
/// XORs (bit 0 the first output, bit 1 the first input; `build.rs`'s
/// `Ones`). Reed-Solomon's parity matrix here has its first row and first
/// column all ones (`linear::cauchy_parity`), so an RS 4+2 encode (one
/// block) takes 5 of its 8 coefficients as XORs, the first row's four and
/// the second row's first: see BENCHMARKS.md for what that buys.
#[cfg(target_arch = "x86_64")]
struct OnesFirst<const B: usize, const G: usize> {
    rows: [[u8; B]; G],
    ins: [*const u8; B],
    outs: [*mut u8; G],
    bits: usize,
}

/// Whether a block with [`OnesFirst::bits`] `bits` has 1 as input `i`'s
/// coefficient for output `j` (the intrinsics kernels' form of
/// `build.rs`'s `Ones`; with constant arguments it folds away).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
const fn is_one(bits: usize, i: usize, j: usize) -> bool {
    (bits & 1 != 0 && j == 0) || (bits & 2 != 0 && i == 0)
}

/// [`OnesFirst`] of a block: `rows` is G x B, row-major; `ins` has B and
/// `outs` G pointers. Only the order changes: every output is still the
/// same sum of products.
#[cfg(target_arch = "x86_64")]
fn ones_first<const B: usize, const G: usize>(
    rows: &[u8],
    ins: &[*const u8],
    outs: &[*mut u8],
) -> OnesFirst<B, G> {
    let mut r: [[u8; B]; G] = std::array::from_fn(|j| std::array::from_fn(|i| rows[j * B + i]));
    let mut ins: [*const u8; B] = std::array::from_fn(|i| ins[i]);
    let mut outs: [*mut u8; G] = std::array::from_fn(|j| outs[j]);
    let mut bits = 0;
    if let Some(j) = (0..G).find(|&j| r[j].iter().all(|&c| c == 1)) {
        r.swap(0, j);
        outs.swap(0, j);
        bits |= 1;
    }
    if let Some(i) = (0..B).find(|&i| r.iter().all(|row| row[i] == 1)) {
        r.iter_mut().for_each(|row| row.swap(0, i));
        ins.swap(0, i);
        bits |= 2;
    }
    OnesFirst {
        rows: r,
        ins,
        outs,
        bits,
    }
}

/// A loop `build.rs` generates: `(tables, inputs, outputs, steps)`, each
/// step a fixed number of bytes of every region.
#[cfg(target_arch = "x86_64")]
type StepsFn = unsafe extern "sysv64" fn(*const u8, *const *const u8, *const *mut u8, usize);

/// A block of B inputs into G outputs through a generated loop of
/// `step`-byte steps (`rows` is G x B, for the bytes around them): the
/// bytes before the first input's 32-byte boundary, then whole steps,
/// then the tail, one byte at a time.
///
/// # Safety
/// The CPU must have what `steps` uses; `tables` must be what it reads;
/// `ins` has B and `outs` G pointers to `len` bytes each.
#[cfg(target_arch = "x86_64")]
unsafe fn generated_block<const B: usize, const G: usize>(
    (steps, step): (StepsFn, usize),
    tables: *const u8,
    rows: &[u8],
    ins: &[*const u8],
    outs: &[*mut u8],
    len: usize,
    mode: Mode,
) {
    let out_ptrs: [*mut u8; G] = std::array::from_fn(|j| outs[j]);
    let head = ((32 - ins[0] as usize % 32) % 32).min(len);
    // SAFETY: head <= len.
    unsafe { bytes(rows, ins, &out_ptrs, 0, head, mode) };
    let n = (len - head) / step;
    // SAFETY: head <= len, so each region has `head + step * n` bytes.
    let ins_at: [*const u8; B] = std::array::from_fn(|i| unsafe { ins[i].add(head) });
    // SAFETY: as above.
    let outs_at: [*mut u8; G] = std::array::from_fn(|j| unsafe { out_ptrs[j].add(head) });
    // SAFETY: the CPU and the tables are as `steps` needs (the contract);
    // every region has step * n bytes from `head`.
    unsafe { steps(tables, ins_at.as_ptr(), outs_at.as_ptr(), n) };
    // SAFETY: head + step * n <= len.
    unsafe { bytes(rows, ins, &out_ptrs, head + step * n, len, mode) };
}

#[cfg(target_arch = "x86_64")]
/// Bytes `from..to` of a SIMD kernel's block, one at a time (the heads
/// and tails of kernels without masked loads).
///
/// # Safety
/// `from <= to <= len` of every region.
unsafe fn bytes<const G: usize>(
    rows: &[u8],
    ins: &[*const u8],
    out_ptrs: &[*mut u8; G],
    from: usize,
    to: usize,
    mode: Mode,
) {
    let b = ins.len();
    for p in from..to {
        for (j, &out) in out_ptrs.iter().enumerate() {
            // SAFETY: p < len (the contract).
            let mut v = if mode == Mode::Xor {
                unsafe { *out.add(p) }
            } else {
                0
            };
            for (i, &inp) in ins.iter().enumerate() {
                // SAFETY: p < len.
                v ^= gf::mul(rows[j * b + i], unsafe { *inp.add(p) });
            }
            // SAFETY: p < len.
            unsafe { *out.add(p) = v };
        }
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

/// Bytes of each region the scalar kernel works on at a time, so that an
/// output's piece stays in L1 while every input is applied to it.
const SCALAR_PIECE_BYTES: usize = 8 << 10;

/// The reference and the fallback on CPUs without SIMD kernels: table
/// lookups (a 256-byte row of the field's multiplication table per
/// coefficient), eight bytes per step, over pieces of the regions small
/// enough that each output piece stays in L1 while every input is
/// applied to it. Coefficients 0 and 1 take no lookups.
pub fn scalar_dot_prod(coefs: &[u8], inputs: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
    let n = inputs.len();
    let len = outputs.first().map_or(0, |o| o.len());
    let mut start = 0;
    while start < len {
        let end = (start + SCALAR_PIECE_BYTES).min(len);
        for (o, out) in outputs.iter_mut().enumerate() {
            let out = &mut out[start..end];
            // Whether `out` still holds what was there before (to be
            // overwritten by the first term).
            let mut fresh = mode == Mode::Overwrite;
            for (i, inp) in inputs.iter().enumerate() {
                let src = &inp[start..end];
                match (coefs[o * n + i], fresh) {
                    (0, _) => continue,
                    (1, true) => out.copy_from_slice(src),
                    (1, false) => xor_region(src, out),
                    (c, true) => scalar_mul(gf::mul_table(c), src, out, false),
                    (c, false) => scalar_mul(gf::mul_table(c), src, out, true),
                }
                fresh = false;
            }
            if fresh {
                out.fill(0);
            }
        }
        start = end;
    }
}

/// `dst (=|^=) t[src]` byte by byte, eight bytes per step.
#[inline]
fn scalar_mul(t: &[u8; 256], src: &[u8], dst: &mut [u8], xor: bool) {
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (a, b) in (&mut d).zip(&mut s) {
        let p = u64::from_le_bytes([
            t[b[0] as usize],
            t[b[1] as usize],
            t[b[2] as usize],
            t[b[3] as usize],
            t[b[4] as usize],
            t[b[5] as usize],
            t[b[6] as usize],
            t[b[7] as usize],
        ]);
        let v = if xor {
            p ^ u64::from_le_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]])
        } else {
            p
        };
        a.copy_from_slice(&v.to_le_bytes());
    }
    for (a, b) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *a = if xor {
            *a ^ t[*b as usize]
        } else {
            t[*b as usize]
        };
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

    fn run(b: Backend, coefs: &[u8], ins: &[&[u8]], outs: &[Vec<u8>], mode: Mode) -> Vec<Vec<u8>> {
        let mut o = outs.to_vec();
        let mut refs: Vec<&mut [u8]> = o.iter_mut().map(|v| v.as_mut_slice()).collect();
        dot_prod_with(b, coefs, ins, &mut refs, mode);
        o
    }

    /// The definition, one `gf::mul` per byte, per input, per output.
    fn reference(coefs: &[u8], ins: &[&[u8]], outs: &[Vec<u8>], mode: Mode) -> Vec<Vec<u8>> {
        let n = ins.len();
        let mut o = outs.to_vec();
        for (j, out) in o.iter_mut().enumerate() {
            for (p, v) in out.iter_mut().enumerate() {
                let mut acc = if mode == Mode::Xor { *v } else { 0 };
                for (i, inp) in ins.iter().enumerate() {
                    acc ^= gf::mul(coefs[j * n + i], inp[p]);
                }
                *v = acc;
            }
        }
        o
    }

    /// Every backend this CPU has (the scalar one included) against
    /// [`reference`], on random regions (inputs at `skew` bytes into
    /// their allocation, so loops that align on the first input start
    /// mid-vector).
    fn check_backends(n_in: usize, n_out: usize, len: usize, skew: usize, seed: u64, xor: bool) {
        check_backends_with(n_in, n_out, len, skew, (seed, xor), Ones::default());
    }

    /// Where [`check_backends_with`] sets a whole output's or a whole
    /// input's coefficients to 1 (the kernels' XOR-only paths), by
    /// index modulo the count.
    #[derive(Clone, Copy, Debug, Default)]
    struct Ones {
        row: Option<usize>,
        col: Option<usize>,
    }

    /// [`check_backends`] with the coefficients `ones` names set to 1.
    fn check_backends_with(
        n_in: usize,
        n_out: usize,
        len: usize,
        skew: usize,
        (seed, xor): (u64, bool),
        ones: Ones,
    ) {
        let mut rng = loligo_testkit::Rng::new(seed);
        let mut next = || rng.next_u64() as u8;
        // Kept whole: a copy of `v[skew..]` would be a new, aligned allocation.
        let whole: Vec<Vec<u8>> = (0..n_in)
            .map(|_| (0..len + skew).map(|_| next()).collect())
            .collect();
        let ins: Vec<&[u8]> = whole.iter().map(|v| &v[skew..]).collect();
        let outs: Vec<Vec<u8>> = (0..n_out)
            .map(|_| (0..len).map(|_| next()).collect())
            .collect();
        let mut coefs: Vec<u8> = (0..n_in * n_out).map(|_| next()).collect();
        // Make 0 and 1 common: they take special paths.
        for c in coefs.iter_mut().step_by(3) {
            *c %= 2;
        }
        if let Some(j) = ones.row {
            let j = j % n_out;
            coefs[j * n_in..(j + 1) * n_in].fill(1);
        }
        if let Some(i) = ones.col {
            (0..n_out).for_each(|j| coefs[j * n_in + i % n_in] = 1);
        }
        let mode = if xor { Mode::Xor } else { Mode::Overwrite };
        let want = reference(&coefs, &ins, &outs, mode);
        for &b in Backend::available() {
            assert_eq!(run(b, &coefs, &ins, &outs, mode), want, "backend {b:?}");
        }
    }

    /// Every block shape (1..=10 inputs by 1..=4 outputs, so every
    /// generated AVX2 loop), both modes, over several vector steps with a
    /// head and a tail: random shapes reach the largest blocks rarely.
    #[test]
    fn backends_equal_the_definition_for_every_block_shape() {
        for n_in in 1..=10 {
            for n_out in 1..=4 {
                for xor in [false, true] {
                    let seed = (n_in * 8 + n_out * 2 + usize::from(xor)) as u64;
                    check_backends(n_in, n_out, 64 * 5 + 37, 9, seed, xor);
                }
            }
        }
    }

    /// Every block shape with an output's coefficients all 1, an
    /// input's, both, at each position: the generated loops take those
    /// as XORs, after moving them to the front of the block.
    #[test]
    fn backends_equal_the_definition_with_rows_and_columns_of_ones() {
        for n_in in 1..=10 {
            for n_out in 1..=4 {
                for xor in [false, true] {
                    let seed = (n_in * 8 + n_out * 2 + usize::from(xor)) as u64;
                    let mut patterns = vec![];
                    for p in 0..n_in.max(n_out) {
                        patterns.push(Ones {
                            row: Some(p),
                            col: None,
                        });
                        patterns.push(Ones {
                            row: None,
                            col: Some(p),
                        });
                        patterns.push(Ones {
                            row: Some(p),
                            col: Some(n_in - 1 - p % n_in),
                        });
                    }
                    for ones in patterns {
                        check_backends_with(n_in, n_out, 64 * 3 + 37, 9, (seed, xor), ones);
                    }
                }
            }
        }
        // Reed-Solomon's own matrices, several blocks of inputs each.
        for (k, m) in [(4, 2), (8, 3), (10, 4), (12, 4), (20, 4), (3, 3)] {
            let parity = crate::linear::cauchy_parity(k, m);
            let coefs: Vec<u8> = (0..m).flat_map(|i| parity.row(i).to_vec()).collect();
            assert!(coefs[..k].iter().all(|&c| c == 1), "the first row is ones");
            let ins_owned: Vec<Vec<u8>> = (0..k)
                .map(|i| (0..1000).map(|p| (p * 7 + i * 13) as u8).collect())
                .collect();
            let ins: Vec<&[u8]> = ins_owned.iter().map(|v| v.as_slice()).collect();
            let outs = vec![vec![5u8; 1000]; m];
            for mode in [Mode::Overwrite, Mode::Xor] {
                let want = reference(&coefs, &ins, &outs, mode);
                for &b in Backend::available() {
                    assert_eq!(run(b, &coefs, &ins, &outs, mode), want, "{b:?} rs {k}+{m}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// Random shapes with a row or a column of ones (or both).
        #[test]
        fn backends_equal_the_definition_with_ones(
            n_in in 1usize..30, n_out in 1usize..7, len in 0usize..700, skew in 0usize..64,
            seed in any::<u64>(), xor in any::<bool>(),
            row in proptest::option::of(0usize..30), col in proptest::option::of(0usize..30),
        ) {
            check_backends_with(n_in, n_out, len, skew, (seed, xor), Ones { row, col });
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// Every backend equals the definition, for any shape, length
        /// (tails included) and coefficients.
        #[test]
        fn backends_equal_the_definition(
            n_in in 1usize..30, n_out in 1usize..7, len in 0usize..700, skew in 0usize..64,
            seed in any::<u64>(), xor in any::<bool>(),
        ) {
            check_backends(n_in, n_out, len, skew, seed, xor);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
        /// The same over regions longer than the scalar kernel's pieces.
        #[test]
        fn backends_equal_the_definition_on_long_regions(
            n_in in 1usize..12, n_out in 1usize..6, len in 8000usize..20000, skew in 0usize..64,
            seed in any::<u64>(), xor in any::<bool>(),
        ) {
            check_backends(n_in, n_out, len, skew, seed, xor);
        }
    }

    /// Regions laid end to end in one buffer at a 4 KiB-multiple stride,
    /// as encoders lay out chunks: more of them than the L1 cache has ways
    /// take the crowded path of [`in_blocks`] (smaller input blocks), which
    /// must give the same bytes.
    #[test]
    fn backends_equal_the_definition_on_crowded_regions() {
        for (n_in, n_out, len) in [
            (8usize, 3usize, 16384usize),
            (10, 4, 12345 + 4096),
            (20, 4, 9000),
            (4, 2, 8192),
        ] {
            for xor in [false, true] {
                let stride = len.div_ceil(4096) * 4096;
                let mut rng = loligo_testkit::Rng::new((n_in * 31 + len) as u64);
                let mut next = || rng.next_u64() as u8;
                let mut buf: Vec<u8> = (0..stride * (n_in + n_out) + 4096)
                    .map(|_| next())
                    .collect();
                let first = (4096 - buf.as_ptr() as usize % 4096) % 4096;
                let coefs: Vec<u8> = (0..n_in * n_out).map(|_| next()).collect();
                let mode = if xor { Mode::Xor } else { Mode::Overwrite };
                let region = |buf: &[u8], r: usize| {
                    buf[first + r * stride..first + r * stride + len].to_vec()
                };
                let ins_owned: Vec<Vec<u8>> = (0..n_in).map(|r| region(&buf, r)).collect();
                let ins_ref: Vec<&[u8]> = ins_owned.iter().map(|v| v.as_slice()).collect();
                let outs0: Vec<Vec<u8>> = (n_in..n_in + n_out).map(|r| region(&buf, r)).collect();
                let want = reference(&coefs, &ins_ref, &outs0, mode);
                let addrs = (0..n_in + n_out).map(|r| buf.as_ptr() as usize + first + r * stride);
                assert_eq!(crowded(addrs, 8), n_in + n_out > 8, "an 8-way cache");
                for &b in Backend::available() {
                    let (ins_part, outs_part) = buf[first..].split_at_mut(n_in * stride);
                    for (j, o) in outs0.iter().enumerate() {
                        outs_part[j * stride..j * stride + len].copy_from_slice(o);
                    }
                    let ins: Vec<&[u8]> = ins_part.chunks(stride).map(|c| &c[..len]).collect();
                    let mut outs: Vec<&mut [u8]> = outs_part
                        .chunks_mut(stride)
                        .take(n_out)
                        .map(|c| &mut c[..len])
                        .collect();
                    dot_prod_with(b, &coefs, &ins, &mut outs, mode);
                    let got: Vec<Vec<u8>> = outs.iter().map(|o| o.to_vec()).collect();
                    assert_eq!(got, want, "backend {b:?}, {n_in} x {n_out}, xor {xor}");
                }
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn crowding_counts_regions_near_one_offset_within_4_kib() {
        let at = |offs: &[usize]| offs.iter().map(|o| 0x10_0000 + o).collect::<Vec<_>>();
        // Eleven chunks end to end at 64 KiB: one set, past eight ways.
        let end_to_end: Vec<usize> = (0..11).map(|i| i * 65536).collect();
        assert!(crowded(at(&end_to_end).into_iter(), 8));
        assert!(!crowded(at(&end_to_end).into_iter(), 12));
        // The same, each 1 KiB further on: four sets apart, no crowd.
        let skewed: Vec<usize> = (0..11).map(|i| i * (65536 + 1024)).collect();
        assert!(!crowded(at(&skewed).into_iter(), 8));
        // Within four lines of each other counts as one crowd, across
        // the 4 KiB boundary too; five lines apart does not.
        let near: Vec<usize> = (0..9).map(|i| i * 4096 + 4064 + (i % 3) * 64).collect();
        assert!(crowded(at(&near).into_iter(), 8));
        let apart: Vec<usize> = (0..9).map(|i| i * 4096 + (i % 2) * 320).collect();
        assert!(!crowded(at(&apart).into_iter(), 8));
        // No more regions than ways: never crowded.
        assert!(!crowded(at(&end_to_end[..8]).into_iter(), 8));
        assert!(l1d_ways() >= 2, "an L1 data cache has ways");
    }

    #[test]
    fn with_backend_scopes_the_choice_to_its_call() {
        let before = Backend::current();
        for &b in Backend::available() {
            assert_eq!(with_backend(b, Backend::current), Some(b));
            // Nested calls restore the outer choice.
            let inner = with_backend(b, || {
                with_backend(Backend::Scalar, Backend::current);
                Backend::current()
            });
            assert_eq!(inner, Some(b));
        }
        assert_eq!(Backend::current(), before);
        for name in ["scalar", "avx2", "avx512", "gfni-avx2", "gfni"] {
            let b = Backend::from_name(name).expect("a backend's own name");
            assert_eq!(b.name(), name);
            if !Backend::available().contains(&b) {
                assert_eq!(with_backend(b, || ()), None, "{name} is not on this CPU");
            }
        }
        assert_eq!(Backend::from_name("neon"), None);
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

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn nibble_tables_hold_the_products_of_every_nibble() {
        for c in 0..=255u8 {
            let [(l0, l1), (h0, h1)] = nibble_tables(c);
            let bytes = |a: i64, b: i64| (((b as u128) << 64) | a as u64 as u128).to_le_bytes();
            let (lo, hi) = (bytes(l0, l1), bytes(h0, h1));
            for x in 0..16u8 {
                assert_eq!(lo[x as usize], gf::mul(c, x), "c={c} x={x}");
                assert_eq!(hi[x as usize], gf::mul(c, x << 4), "c={c} x={x}");
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
