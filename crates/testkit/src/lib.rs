//! What Loligo's tests, benchmarks and workload generators share: one
//! seeded random generator (`Rng`) so that every run is replayable from
//! its seed, a temporary folder that removes itself (`TempDir`), and a
//! linearizability checker for recorded histories (`lincheck`).
//!
//! It must never depend on anything (the libraries' tests use it), and
//! `Rng`'s sequence for a given state must never change: recorded
//! simulator and fuzz seeds replay through it, and the erasure-code
//! library's own copy of the generator (which fixes the Zigzag
//! coefficients) is tested equal to it. Run-time code does not link it
//! (the layering test checks), only tests, benchmarks and the CLI's tools.

pub mod lincheck;

use std::path::{Path, PathBuf};

/// xorshift64 (Marsaglia's 13/7/17 triple): fast, deterministic and good
/// enough for test data and fault schedules. Not for anything secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`; any seed works (it is mixed, and the state
    /// is never zero).
    pub fn new(seed: u64) -> Rng {
        Rng::from_state(splitmix64(seed))
    }

    /// A generator whose state is exactly `state` (made odd: xorshift
    /// never leaves zero). For sequences that must stay what they were.
    pub fn from_state(state: u64) -> Rng {
        Rng { state: state | 1 }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64().checked_rem(n).unwrap_or(0)
    }

    /// An index in `0..n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Fill `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let b = self.next_u64().to_le_bytes();
            rest.copy_from_slice(&b[..rest.len()]);
        }
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.fill(&mut v);
        v
    }
}

/// SplitMix64's finaliser: spreads nearby seeds (0, 1, 2...) apart.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A fresh folder under the system's temporary folder, removed with
/// everything in it when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// `loligo-TAG-PID-N`, emptied if it existed (a crashed earlier run).
    pub fn new(tag: &str) -> std::io::Result<TempDir> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("loligo-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_xorshift64_and_never_changes() {
        let mut r = Rng::from_state(1);
        // Marsaglia's xorshift64 (13, 7, 17) from state 1.
        assert_eq!(r.next_u64(), 0x0000_0000_4082_2041);
        assert_eq!(r.next_u64(), 0x1000_4106_0C01_1441);
        let a: Vec<u64> = (0..5).map(|_| Rng::new(7).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]), "same seed, same values");
        assert_ne!(Rng::new(0).next_u64(), Rng::new(1).next_u64());
    }

    #[test]
    fn helpers_stay_in_range() {
        let mut r = Rng::new(3);
        assert_eq!(r.below(0), 0);
        assert!((0..1000).all(|_| r.below(10) < 10));
        let hits = (0..10_000).filter(|_| r.chance(250)).count();
        assert!((2000..3000).contains(&hits), "{hits}");
        for len in [0, 1, 7, 8, 9, 100] {
            assert_eq!(r.bytes(len).len(), len);
        }
        assert!(r.bytes(64).iter().any(|&b| b != 0));
    }

    #[test]
    fn temp_dirs_are_distinct_and_removed() {
        let a = TempDir::new("testkit").unwrap();
        let b = TempDir::new("testkit").unwrap();
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("f"), b"x").unwrap();
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
    }
}

/// Damage done to an encoded record by the fuzz tests: a byte flipped
/// (XOR with a non-zero value), the bytes cut at a point, a byte inserted,
/// or a short run repeated in place. Positions wrap around the record's
/// length, so any value fits any record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    Flip(usize, u8),
    Cut(usize),
    Insert(usize, u8),
    Repeat(usize, usize),
}

/// One to three damages of any kind, at positions anywhere in a record
/// of up to 64 KiB (they wrap around shorter ones).
pub fn random_damage(r: &mut Rng) -> Vec<Damage> {
    (0..1 + r.index(3))
        .map(|_| match r.below(4) {
            0 => Damage::Flip(r.index(1 << 16), 1 + r.below(255) as u8),
            1 => Damage::Cut(r.index(1 << 16)),
            2 => Damage::Insert(r.index(1 << 16), r.below(256) as u8),
            _ => Damage::Repeat(r.index(1 << 16), 1 + r.index(8)),
        })
        .collect()
}

/// The seeds of a fuzz run: `LOLIGO_FUZZ_CASES` of them (`default`
/// without it) from `LOLIGO_FUZZ_SEED` (0 without it), so a finding's
/// seed replays alone.
pub fn fuzz_seeds(default: u64) -> std::ops::Range<u64> {
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let first = var("LOLIGO_FUZZ_SEED").unwrap_or(0);
    first..first.saturating_add(var("LOLIGO_FUZZ_CASES").unwrap_or(default))
}

/// `b` with every damage of `ds` done to it, in order.
pub fn damage(mut b: Vec<u8>, ds: &[Damage]) -> Vec<u8> {
    for d in ds {
        let n = b.len().max(1);
        match *d {
            Damage::Flip(i, x) => {
                if !b.is_empty() {
                    b[i % n] ^= x;
                }
            }
            Damage::Cut(i) => b.truncate(i % n),
            Damage::Insert(i, x) => b.insert(i % (b.len() + 1), x),
            Damage::Repeat(i, len) => {
                let at = i % n;
                let end = (at + len).min(b.len());
                let piece = b.get(at..end).map(<[u8]>::to_vec).unwrap_or_default();
                b.splice(at..at, piece);
            }
        }
    }
    b
}
