//! The xorshift64 generator (Marsaglia's 13/7/17 triple) the Zigzag
//! coefficient search draws from, and the filler bytes of the speed
//! measurements. Its sequence for a state must never change: the
//! coefficients of every Zigzag shape, and so the parity on disk, follow
//! from it. It is the sequence of the test kit's `Rng::from_state` (a
//! test holds the two equal), kept here so that the library does not
//! link the test kit.

/// A xorshift64 generator.
pub(crate) struct Xorshift(u64);

impl Xorshift {
    /// A generator whose state is `state` made odd (xorshift never leaves
    /// zero).
    pub(crate) fn from_state(state: u64) -> Xorshift {
        Xorshift(state | 1)
    }

    /// The next 64 bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// `len` bytes of the sequence, eight per draw (little-endian).
    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_the_test_kits() {
        for state in [0, 1, 2, 0x9e37_79b9_7f4a_7c15, u64::MAX] {
            let (mut a, mut b) = (
                Xorshift::from_state(state),
                loligo_testkit::Rng::from_state(state),
            );
            for _ in 0..1000 {
                assert_eq!(a.next_u64(), b.next_u64());
            }
            let (mut a, mut b) = (
                Xorshift::from_state(state),
                loligo_testkit::Rng::from_state(state),
            );
            assert_eq!(a.bytes(1001), b.bytes(1001));
        }
    }
}
