//! Ceph's placement hashes: the rjenkins1 `crush_hash32` family, the
//! rjenkins (lookup2) string hash used for object names, and `ceph_stable_mod`.
//!
//! These functions define where every object lives; they must stay
//! bit-identical to Ceph's. Never change their output.

/// Seed that Ceph mixes into every `crush_hash32_*` call.
const CRUSH_HASH_SEED: u32 = 1_315_423_911;

/// The only hash type Ceph defines for CRUSH buckets (`hash 0` in text maps).
pub const CRUSH_HASH_RJENKINS1: u8 = 0;

/// Robert Jenkins' 96-bit mix, as used by both the CRUSH and the string hash.
#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*b).wrapping_sub(*c) ^ (*c >> 13);
    *b = b.wrapping_sub(*c).wrapping_sub(*a) ^ (*a << 8);
    *c = c.wrapping_sub(*a).wrapping_sub(*b) ^ (*b >> 13);
    *a = a.wrapping_sub(*b).wrapping_sub(*c) ^ (*c >> 12);
    *b = b.wrapping_sub(*c).wrapping_sub(*a) ^ (*a << 16);
    *c = c.wrapping_sub(*a).wrapping_sub(*b) ^ (*b >> 5);
    *a = a.wrapping_sub(*b).wrapping_sub(*c) ^ (*c >> 3);
    *b = b.wrapping_sub(*c).wrapping_sub(*a) ^ (*a << 10);
    *c = c.wrapping_sub(*a).wrapping_sub(*b) ^ (*b >> 15);
}

// The fixed "random" words Ceph's hash feeds between inputs.
const X0: u32 = 231_232;
const Y0: u32 = 1232;

/// `crush_hash32_rjenkins1` of one word.
#[inline]
pub fn hash32_1(a: u32) -> u32 {
    let (mut a, mut b, mut h) = (a, a, CRUSH_HASH_SEED ^ a);
    let (mut x, mut y) = (X0, Y0);
    mix(&mut b, &mut x, &mut h);
    mix(&mut y, &mut a, &mut h);
    h
}

/// `crush_hash32_rjenkins1_2`: used for reweight (`is_out`) draws and
/// for the HASHPSPOOL placement seed.
#[inline]
pub fn hash32_2(a: u32, b: u32) -> u32 {
    let (mut a, mut b, mut h) = (a, b, CRUSH_HASH_SEED ^ a ^ b);
    let (mut x, mut y) = (X0, Y0);
    mix(&mut a, &mut b, &mut h);
    mix(&mut x, &mut a, &mut h);
    mix(&mut b, &mut y, &mut h);
    h
}

/// `crush_hash32_rjenkins1_3`: straw, straw2 and permutation draws.
#[inline(always)]
pub fn hash32_3(a: u32, b: u32, c: u32) -> u32 {
    let (mut a, mut b, mut c, mut h) = (a, b, c, CRUSH_HASH_SEED ^ a ^ b ^ c);
    let (mut x, mut y) = (X0, Y0);
    mix(&mut a, &mut b, &mut h);
    mix(&mut c, &mut x, &mut h);
    mix(&mut y, &mut a, &mut h);
    mix(&mut b, &mut x, &mut h);
    mix(&mut y, &mut c, &mut h);
    h
}

/// `crush_hash32_rjenkins1_4`: list and tree bucket draws.
#[inline]
pub fn hash32_4(a: u32, b: u32, c: u32, d: u32) -> u32 {
    let (mut a, mut b, mut c, mut d) = (a, b, c, d);
    let mut h = CRUSH_HASH_SEED ^ a ^ b ^ c ^ d;
    let (mut x, mut y) = (X0, Y0);
    mix(&mut a, &mut b, &mut h);
    mix(&mut c, &mut d, &mut h);
    mix(&mut a, &mut x, &mut h);
    mix(&mut y, &mut b, &mut h);
    mix(&mut c, &mut x, &mut h);
    mix(&mut y, &mut d, &mut h);
    h
}

/// `crush_hash32_rjenkins1_5` (not used by the mapper; kept for completeness
/// of the family, which tools and tests may call).
#[inline]
pub fn hash32_5(a: u32, b: u32, c: u32, d: u32, e: u32) -> u32 {
    let (mut a, mut b, mut c, mut d, mut e) = (a, b, c, d, e);
    let mut h = CRUSH_HASH_SEED ^ a ^ b ^ c ^ d ^ e;
    let (mut x, mut y) = (X0, Y0);
    mix(&mut a, &mut b, &mut h);
    mix(&mut c, &mut d, &mut h);
    mix(&mut e, &mut x, &mut h);
    mix(&mut y, &mut a, &mut h);
    mix(&mut b, &mut x, &mut h);
    mix(&mut y, &mut c, &mut h);
    mix(&mut d, &mut x, &mut h);
    mix(&mut y, &mut e, &mut h);
    h
}

/// Little-endian word from up to four bytes (missing bytes are zero).
#[inline]
fn le_word(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .enumerate()
        .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (8 * i)))
}

/// Ceph's `ceph_str_hash_rjenkins` (Bob Jenkins' lookup2 with initval 0):
/// object name -> 32-bit raw placement seed.
pub fn str_hash_rjenkins(key: &[u8]) -> u32 {
    let mut a: u32 = 0x9e37_79b9;
    let mut b: u32 = a;
    let mut c: u32 = 0;
    let mut rest = key;
    while rest.len() >= 12 {
        a = a.wrapping_add(le_word(&rest[0..4]));
        b = b.wrapping_add(le_word(&rest[4..8]));
        c = c.wrapping_add(le_word(&rest[8..12]));
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    // The length is mixed into c; the tail's bytes 8..11 go into c's upper
    // three bytes (its lowest byte is reserved for the length).
    c = c.wrapping_add(key.len() as u32);
    let n = rest.len();
    a = a.wrapping_add(le_word(&rest[..n.min(4)]));
    if n > 4 {
        b = b.wrapping_add(le_word(&rest[4..n.min(8)]));
    }
    if n > 8 {
        c = c.wrapping_add(le_word(&rest[8..n]) << 8);
    }
    mix(&mut a, &mut b, &mut c);
    c
}

/// Ceph's `ceph_stable_mod`: maps `x` into `[0, b)` so that growing `b`
/// moves as few inputs as possible. `bmask` must be `2^k - 1 >= b - 1`.
#[inline]
pub fn stable_mod(x: u32, b: u32, bmask: u32) -> u32 {
    if (x & bmask) < b {
        x & bmask
    } else {
        x & (bmask >> 1)
    }
}

/// The mask Ceph pairs with `n` in `stable_mod`: `(1 << cbits(n - 1)) - 1`.
#[inline]
pub fn stable_mod_mask(n: u32) -> u32 {
    let bits = 32 - n.saturating_sub(1).leading_zeros();
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_mod_matches_definition() {
        // pg_num 12 -> mask 15: values 12..15 fold onto 4..7.
        let m = stable_mod_mask(12);
        assert_eq!(m, 15);
        assert_eq!(stable_mod(13, 12, m), 5);
        assert_eq!(stable_mod(11, 12, m), 11);
        assert_eq!(stable_mod_mask(1), 0);
        assert_eq!(stable_mod_mask(8), 7);
        assert_eq!(stable_mod_mask(9), 15);
        for x in 0..10_000u32 {
            assert!(stable_mod(x, 12, m) < 12);
        }
    }

    #[test]
    fn str_hash_tail_lengths_are_all_distinct() {
        // Every tail length (0..=11) takes a different branch; hashing
        // prefixes of one string must give distinct values.
        let s = b"abcdefghijklmnopqrstuvwxyz";
        let hashes: std::collections::BTreeSet<u32> =
            (0..=s.len()).map(|n| str_hash_rjenkins(&s[..n])).collect();
        assert_eq!(hashes.len(), s.len() + 1);
    }
}
