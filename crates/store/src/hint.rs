//! Allocation hints: what a client said about how an object will be used
//! (its expected size, the size of its writes, how it is read and written,
//! whether its data compresses), kept with the object and read by the
//! stores as advice.
//!
//! A hint lives in the object's xattr [`ALLOC_HINT_ATTR`], so it travels
//! wherever xattrs do (replica transactions, clones, recovery pushes,
//! splits) and goes with the object when it is removed. It is the one
//! xattr a store reads for its own use. A hint must never change what an
//! object holds or whether an op succeeds: a value that does not decode
//! is treated as no hint.

/// The xattr holding an object's [`AllocHint`] (its name starts with `_`,
/// which clients may not use).
pub const ALLOC_HINT_ATTR: &str = "_ah";

/// The flag values the stores act on, as Ceph numbers them (librados's
/// `LIBRADOS_ALLOC_HINT_FLAG_*`; the wire vocabulary has all of them).
pub mod flags {
    pub const RANDOM_WRITE: u32 = 2;
    pub const SEQUENTIAL_READ: u32 = 4;
    pub const RANDOM_READ: u32 = 8;
    pub const APPEND_ONLY: u32 = 16;
    pub const IMMUTABLE: u32 = 32;
    pub const COMPRESSIBLE: u32 = 256;
    pub const INCOMPRESSIBLE: u32 = 512;
}

/// What a client hinted about an object (Ceph's `set-alloc-hint`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocHint {
    /// Bytes the object is expected to grow to (0: not said).
    pub expected_object_size: u64,
    /// Bytes each write is expected to carry (0: not said).
    pub expected_write_size: u64,
    /// Ceph's flag bits ([`flags`]).
    pub flags: u32,
}

/// The encoding's version byte.
const V1: u8 = 1;
/// Bytes of an encoded hint: version, two sizes, flags.
const ENCODED_LEN: usize = 1 + 8 + 8 + 4;

impl AllocHint {
    /// The xattr value: a version byte, then the sizes and flags little
    /// endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(ENCODED_LEN);
        v.push(V1);
        v.extend_from_slice(&self.expected_object_size.to_le_bytes());
        v.extend_from_slice(&self.expected_write_size.to_le_bytes());
        v.extend_from_slice(&self.flags.to_le_bytes());
        debug_assert_eq!(v.len(), ENCODED_LEN);
        v
    }

    /// From an xattr value; `None` for anything [`AllocHint::encode`]
    /// does not make (a later version is not guessed at).
    pub fn decode(v: &[u8]) -> Option<AllocHint> {
        if v.len() != ENCODED_LEN || v[0] != V1 {
            return None;
        }
        let u64_at = |at: usize| Some(u64::from_le_bytes(v.get(at..at + 8)?.try_into().ok()?));
        Some(AllocHint {
            expected_object_size: u64_at(1)?,
            expected_write_size: u64_at(9)?,
            flags: u32::from_le_bytes(v.get(17..21)?.try_into().ok()?),
        })
    }

    /// The hint among an object's xattrs (`None`: no hint, or one that
    /// does not decode).
    pub fn of_attrs(attrs: &std::collections::BTreeMap<String, Vec<u8>>) -> Option<AllocHint> {
        AllocHint::decode(attrs.get(ALLOC_HINT_ATTR)?)
    }

    /// Whether the client said the data compresses.
    pub fn compressible(&self) -> bool {
        self.flags & flags::COMPRESSIBLE != 0
    }

    /// Whether the client said the data does not compress.
    pub fn incompressible(&self) -> bool {
        self.flags & flags::INCOMPRESSIBLE != 0
    }

    /// Checksum units of `2^shift` blocks of `bs` bytes for new data of
    /// the object, at most `max` (BlueStore's rule): data hinted read in
    /// sequence and not at random, written once or appended and not at
    /// random, gets one checksum per expected write (its largest
    /// power-of-two divisor); anything else one per block. A larger unit makes
    /// fewer checksums to keep, and a read of part of one reads and checks
    /// all of it.
    pub fn csum_shift(&self, bs: u64, max: u8) -> u8 {
        let f = self.flags;
        let sequential = f & flags::SEQUENTIAL_READ != 0
            && f & flags::RANDOM_READ == 0
            && f & (flags::IMMUTABLE | flags::APPEND_ONLY) != 0
            && f & flags::RANDOM_WRITE == 0;
        if !sequential || self.expected_write_size == 0 || bs == 0 {
            return 0;
        }
        let unit = 1u64 << self.expected_write_size.trailing_zeros();
        let shift = unit.checked_div(bs).map_or(0, |n| n.max(1).ilog2());
        (shift.min(u32::from(max))) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_round_trip_and_garbage_is_no_hint() {
        let h = AllocHint {
            expected_object_size: 4 << 20,
            expected_write_size: 1 << 16,
            flags: flags::COMPRESSIBLE | flags::SEQUENTIAL_READ,
        };
        assert_eq!(AllocHint::decode(&h.encode()), Some(h));
        let mut bad = h.encode();
        bad[0] = 2;
        assert_eq!(AllocHint::decode(&bad), None, "an unknown version");
        assert_eq!(AllocHint::decode(&h.encode()[..20]), None, "short");
        assert_eq!(AllocHint::decode(b""), None);
        let mut attrs = std::collections::BTreeMap::new();
        assert_eq!(AllocHint::of_attrs(&attrs), None);
        attrs.insert(ALLOC_HINT_ATTR.to_string(), h.encode());
        assert!(AllocHint::of_attrs(&attrs).is_some_and(|h| h.compressible()));
    }

    #[test]
    fn checksum_units_follow_the_sequential_whole_write_hints_only() {
        let h = |flags: u32, write: u64| AllocHint {
            expected_object_size: 4 << 20,
            expected_write_size: write,
            flags,
        };
        let seq = flags::SEQUENTIAL_READ | flags::IMMUTABLE;
        assert_eq!(h(seq, 64 << 10).csum_shift(4096, 10), 4);
        assert_eq!(h(seq, 96 << 10).csum_shift(4096, 10), 3, "ctz: 32 KiB");
        assert_eq!(
            h(flags::SEQUENTIAL_READ | flags::APPEND_ONLY, 1 << 30).csum_shift(4096, 10),
            10
        );
        assert_eq!(h(seq, 1024).csum_shift(4096, 10), 0, "below a block");
        assert_eq!(h(seq, 0).csum_shift(4096, 10), 0, "no write size");
        for other in [flags::RANDOM_READ, flags::RANDOM_WRITE] {
            assert_eq!(h(seq | other, 64 << 10).csum_shift(4096, 10), 0);
        }
        assert_eq!(h(flags::SEQUENTIAL_READ, 64 << 10).csum_shift(4096, 10), 0);
        assert_eq!(h(flags::IMMUTABLE, 64 << 10).csum_shift(4096, 10), 0);
    }
}
