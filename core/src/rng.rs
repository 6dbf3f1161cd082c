//! Deterministic randomness, keyed by (pipeline seed, epoch, stage index, element id).
//!
//! Every random decision in a pipeline draws from an RNG made from such a key, never from
//! a thread-local or shared generator. Which thread runs an element, and when, therefore
//! cannot change the result: a fixed seed gives bit-identical output at any parallelism.
//! Sequential stages (shuffle, sample_from) use one stream per (seed, epoch, stage).

use rand::{RngCore, SeedableRng};

use crate::element::ElementId;

/// The generator of a stream (sequential stages): PCG-64 (MCG variant), whose output is
/// fixed by its specification, so streams do not change between versions of Sluice.
pub type StreamRng = rand_pcg::Pcg64Mcg;

/// The generator handed to per-element random operations: a [`StreamRng`] keyed by (seed,
/// epoch, stage, element id), created on first use (so transforms that draw nothing pay
/// nothing). Implements [`RngCore`], so every `rand` method works on it.
#[derive(Debug, Clone)]
pub struct ElementRng {
    key: StreamKey,
    id: ElementId,
    inner: Option<StreamRng>,
}

impl ElementRng {
    fn get(&mut self) -> &mut StreamRng {
        let (key, id) = (self.key, self.id);
        self.inner
            .get_or_insert_with(|| key.rng_for(id.source, id.index))
    }
}

impl RngCore for ElementRng {
    fn next_u32(&mut self) -> u32 {
        self.get().next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.get().next_u64()
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.get().fill_bytes(dst)
    }
}

/// SplitMix64's finalizer: a fast, well-mixing bijection on `u64`.
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Combines words into one well-mixed key.
#[inline]
pub fn combine(words: &[u64]) -> u64 {
    words
        .iter()
        .fold(0x243f_6a88_85a3_08d3, |acc, &w| mix(acc ^ mix(w)))
}

/// The RNG stream of one stage in one epoch (for sequential stages such as shuffle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamKey {
    /// The pipeline's seed.
    pub seed: u64,
    /// The epoch (including repetitions inside `repeat`).
    pub epoch: u64,
    /// The stage's index in the pipeline.
    pub stage: u64,
}

impl StreamKey {
    /// The generator for the stream.
    pub fn rng(self) -> StreamRng {
        self.rng_for(u64::MAX, u64::MAX)
    }

    /// The generator for one element of the stream.
    pub fn element_rng(self, id: ElementId) -> ElementRng {
        ElementRng {
            key: self,
            id,
            inner: None,
        }
    }

    fn rng_for(self, a: u64, b: u64) -> StreamRng {
        let hi = combine(&[self.seed, self.epoch, self.stage, a, b]);
        let lo = combine(&[hi, b, a, self.stage, self.epoch, self.seed]);
        StreamRng::new((u128::from(hi) << 64) | u128::from(lo) | 1)
    }
}

/// An RNG from a plain `u64` seed (for users' own code and tests).
pub fn rng_from_seed(seed: u64) -> StreamRng {
    StreamRng::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn same_key_same_stream_different_key_different_stream() {
        let k = StreamKey {
            seed: 1,
            epoch: 0,
            stage: 3,
        };
        let id = ElementId::new(2, 7);
        let a: Vec<u64> = (0..4).map(|_| k.element_rng(id).random()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let other = StreamKey { seed: 2, ..k };
        assert_ne!(
            k.element_rng(id).random::<u64>(),
            other.element_rng(id).random::<u64>()
        );
        assert_ne!(
            k.element_rng(id).random::<u64>(),
            k.element_rng(ElementId::new(2, 8)).random::<u64>()
        );
        assert_ne!(
            k.element_rng(id).random::<u64>(),
            StreamKey { epoch: 1, ..k }.element_rng(id).random::<u64>()
        );
    }

    #[test]
    fn streams_are_pinned_across_versions() {
        // Changing these values changes every seeded pipeline's output: don't, without a
        // release note.
        let k = StreamKey {
            seed: 42,
            epoch: 0,
            stage: 0,
        };
        assert_eq!(k.rng().random::<u64>(), PINNED_STREAM);
        assert_eq!(
            k.element_rng(ElementId::new(1, 2)).random::<u64>(),
            PINNED_ELEMENT
        );
    }

    const PINNED_STREAM: u64 = 4305489989781262176;
    const PINNED_ELEMENT: u64 = 14845373670732498153;
}
