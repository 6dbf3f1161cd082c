//! A seeded pseudo-random permutation of `[0, n)` in O(1) memory: a balanced Feistel
//! network over the smallest power of four ≥ `n` (at least 4), with cycle walking.
//!
//! A Feistel network is a bijection of its domain whatever its round function, so applying
//! it repeatedly until the value falls below `n` ("cycle walking") is a bijection of
//! `[0, n)`. The domain is at most `4n`, so a value takes fewer than 4 applications on
//! average. Each of the [`ROUNDS`] rounds mixes one half with a keyed
//! [`mix`] of the other; the round keys come from one `u64` key (in a
//! pipeline: the seed, the epoch and the stage).
//!
//! The permutations are not uniform over all `n!` (no small-state generator's are), but
//! every element's position depends on every round key, which is what a training shuffle
//! needs; unlike `shuffle(buffer)` it has no locality: the first output is equally likely
//! to come from any shard.
//!
//! ```
//! use sluice_core::Permutation;
//!
//! let p = Permutation::new(10, 42);
//! let mut seen: Vec<u64> = (0..10).map(|i| p.apply(i)).collect();
//! seen.sort();
//! assert_eq!(seen, (0..10).collect::<Vec<_>>());
//! assert_eq!(p.apply(3), Permutation::new(10, 42).apply(3)); // the key fixes it
//! ```

use crate::rng::{combine, mix};

/// Rounds of the Feistel network.
pub(crate) const ROUNDS: usize = 8;

/// A keyed permutation of `[0, len)`. Copyable, 80 bytes, whatever `len` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permutation {
    len: u64,
    /// Bits of each half of the Feistel domain.
    half_bits: u32,
    keys: [u64; ROUNDS],
}

impl Permutation {
    /// The permutation of `[0, len)` chosen by `key`.
    pub fn new(len: u64, key: u64) -> Self {
        // Smallest even number of bits covering `len - 1` (at least 2).
        let bits = (64 - len.saturating_sub(1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        let mut keys = [0; ROUNDS];
        for (i, k) in keys.iter_mut().enumerate() {
            *k = combine(&[key, i as u64, 0x05ee_df31_57e1_u64]);
        }
        Permutation {
            len,
            half_bits,
            keys,
        }
    }

    /// The number of values permuted.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether `len` is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One pass of the Feistel network over `[0, 4^half_bits)`.
    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for &k in &self.keys {
            let f = mix(right ^ k) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half_bits) | right
    }

    /// The image of `i` (`i < len`); a bijection of `[0, len)`.
    ///
    /// # Panics
    /// If `i >= len`.
    #[inline]
    pub fn apply(&self, i: u64) -> u64 {
        assert!(i < self.len, "permutation index {i} out of 0..{}", self.len);
        let mut x = self.feistel(i);
        while x >= self.len {
            x = self.feistel(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(p: &Permutation) -> Vec<u64> {
        (0..p.len()).map(|i| p.apply(i)).collect()
    }

    proptest! {
        #[test]
        fn a_bijection_for_any_length_and_key(len in 0u64..3000, key in any::<u64>()) {
            let p = Permutation::new(len, key);
            let mut v = all(&p);
            v.sort_unstable();
            prop_assert_eq!(v, (0..len).collect::<Vec<_>>());
        }

        #[test]
        fn values_stay_in_range_for_huge_lengths(len in 1u64..=u64::MAX, key in any::<u64>(), i in any::<u64>()) {
            let p = Permutation::new(len, key);
            let i = i % len;
            prop_assert!(p.apply(i) < len);
        }
    }

    #[test]
    fn the_domain_is_the_smallest_power_of_four_covering_len() {
        for (len, half) in [
            (0, 1),
            (1, 1),
            (4, 1),
            (5, 2),
            (16, 2),
            (17, 3),
            (1 << 20, 10),
        ] {
            assert_eq!(Permutation::new(len, 0).half_bits, half, "{len}");
        }
        assert_eq!(Permutation::new(u64::MAX, 0).half_bits, 32);
    }

    #[test]
    fn keys_give_different_orders_and_the_same_key_the_same() {
        let a = all(&Permutation::new(1000, 1));
        assert_eq!(a, all(&Permutation::new(1000, 1)));
        assert_ne!(a, all(&Permutation::new(1000, 2)));
        // Not the identity, and not close to it.
        let fixed = a
            .iter()
            .enumerate()
            .filter(|&(i, &v)| i as u64 == v)
            .count();
        assert!(fixed < 10, "{fixed} fixed points");
    }

    #[test]
    fn orders_are_pinned_across_versions() {
        // Changing these changes every seeded global shuffle's order: don't, without a
        // release note.
        let p = Permutation::new(1000, 42);
        let first: Vec<u64> = (0..5).map(|i| p.apply(i)).collect();
        assert_eq!(first, PINNED);
        assert_eq!(std::mem::size_of::<Permutation>(), 80);
        // 0 is not a fixed point of every key.
        let zeros = (0..100)
            .filter(|&k| Permutation::new(1000, k).apply(0) == 0)
            .count();
        assert!(zeros < 5, "{zeros}");
    }

    const PINNED: [u64; 5] = [0, 361, 366, 245, 555];

    #[test]
    fn positions_are_spread_out() {
        // Where the first 100 outputs come from: all over [0, n), not one corner.
        let n = 100_000u64;
        let p = Permutation::new(n, 7);
        let mut deciles = [0; 10];
        for i in 0..1000 {
            deciles[(p.apply(i) * 10 / n) as usize] += 1;
        }
        assert!(
            deciles.iter().all(|&c| (60..=140).contains(&c)),
            "{deciles:?}"
        );
    }
}
