//! Per-channel sums for contrast's means, in one fixed order that any chunking of the image
//! reproduces to the bit.
//!
//! `adjust_contrast` needs each channel's mean over the image before it can write a value.
//! TensorFlow sums pairwise by folding the image in half repeatedly, which needs the whole
//! image of values in memory (half an image of scratch, and sixteen passes over it for a
//! 224² image). Here the values are summed as they stream past, from a small buffer:
//!
//! - The values (`pixels × channels`, in HWC order) are spread over `L` lanes: value `j`
//!   goes to lane `j mod L`, with `L = 48` when the channel count divides 48 (1, 2, 3, 4,
//!   6, 8, …) and `L = channels` otherwise, so every lane holds one channel.
//! - Each run of `16 L` values (a *segment*; the last one completed with zeros) is summed
//!   lane by lane in `f32`, pairwise: of a lane's 16 values, value `g` plus value `g + 8`,
//!   then those 8 halved the same way, down to one. Each lane's segment sum is then added to
//!   that lane's `f64` total.
//! - A channel's sum is its lanes' totals added in lane order in `f64`; its mean is that sum
//!   divided by the pixel count in `f64`, rounded once to `f32`.
//!
//! Every value's path through the additions depends only on its index, so the fused chain
//! ([`PointChain`](super::PointChain)), which computes values a cache-sized chunk at a time,
//! and the op on a whole image get the same bits; so do scalar and vector builds (lanes are
//! independent: vectorizing needs no reassociation). The error is that of a 16-value
//! pairwise sum (at most 4 units in the last place, relative to the sum of magnitudes) plus
//! `f64` rounding; TensorFlow's pairwise sum of a 224² image has 16 levels, so its bound is
//! 16 units. Streaming the sum instead of folding a stored image took the `augment`
//! benchmark's batched pipeline from ~4,900 to ~5,300 images/s (BENCHMARKS.md).
//!
//! [`ByteSums`] are the exact integer sums of `u8` pixels, from which the fused chain takes
//! a contrast's means when its values are loaded pixels plus at most one brightness delta.

/// Lanes when the channel count divides it: a multiple of every vector width in use.
const WIDE_LANES: usize = 48;
/// Groups of `L` values summed in `f32` before going into the `f64` totals.
const SEGMENT_GROUPS: usize = 16;
const _: () = assert!(
    SEGMENT_GROUPS == 16,
    "sum_segment's folds are written out for 16"
);

/// Lanes for an image of `c` channels (`c >= 1`; 0 is taken as 1): `WIDE_LANES` when `c`
/// divides it, otherwise `c`, so every lane holds one channel.
fn lanes_for(c: usize) -> usize {
    let c = c.max(1);
    if WIDE_LANES.is_multiple_of(c) {
        WIDE_LANES
    } else {
        c
    }
}

/// Running per-lane sums of an image's values (see the [module docs](self)).
pub(super) struct ChannelSums {
    lanes: usize,
    /// The values of the unfinished segment (fewer than `SEGMENT_GROUPS * lanes`).
    pending: Vec<f32>,
    /// Totals of the finished segments, one per lane.
    total: Vec<f64>,
}

impl ChannelSums {
    /// Empty sums for an image of `c` channels (`c >= 1`).
    pub(super) fn new(c: usize) -> Self {
        let lanes = lanes_for(c);
        ChannelSums {
            lanes,
            pending: Vec::with_capacity(lanes * SEGMENT_GROUPS),
            total: vec![0.0; lanes],
        }
    }

    /// Adds the next `values` (in image order). Inlined, so it is vectorized for the CPU of
    /// the function it is called from.
    #[inline(always)]
    pub(super) fn push(&mut self, values: &[f32]) {
        self.push_mapped(values, |v| v);
    }

    /// Adds `f(x)` for the next source values `x` (in image order), computing each value
    /// where it is summed (no buffer of `f32` values in between). Any split of the values
    /// between calls, and `push` of the same `f32` values, give the same bits.
    #[inline(always)]
    pub(super) fn push_mapped<T: Copy>(&mut self, mut values: &[T], f: impl Fn(T) -> f32 + Copy) {
        let segment = self.lanes * SEGMENT_GROUPS;
        if !self.pending.is_empty() {
            let n = (segment - self.pending.len()).min(values.len());
            self.pending.extend(values[..n].iter().map(|&x| f(x)));
            values = &values[n..];
            if self.pending.len() < segment {
                return;
            }
            sum_segment(&self.pending, self.lanes, |v| v, &mut self.total);
            self.pending.clear();
        }
        let mut segments = values.chunks_exact(segment);
        if self.lanes == WIDE_LANES {
            // The common case, with the lane count a constant (so the folds vectorize). The
            // values are mapped into an L1 buffer first: mapping contiguous values and summing
            // contiguous `f32`s both vectorize, mapping inside the strided folds does not.
            let mut buf = [0.0f32; WIDE_LANES * SEGMENT_GROUPS];
            for s in &mut segments {
                for (b, &x) in buf.iter_mut().zip(s) {
                    *b = f(x);
                }
                sum_segment(&buf, WIDE_LANES, |v| v, &mut self.total);
            }
        } else {
            for s in &mut segments {
                sum_segment(s, self.lanes, f, &mut self.total);
            }
        }
        self.pending
            .extend(segments.remainder().iter().map(|&x| f(x)));
    }

    /// The `c` per-channel means of an image of `pixels` pixels (`c` as given to
    /// [`new`](Self::new); zeros for an empty image).
    pub(super) fn means(mut self, pixels: usize, c: usize) -> Vec<f32> {
        if pixels == 0 || c == 0 {
            return vec![0.0; c];
        }
        if !self.pending.is_empty() {
            // The last segment, completed with zeros.
            self.pending.resize(self.lanes * SEGMENT_GROUPS, 0.0);
            sum_segment(&self.pending, self.lanes, |v| v, &mut self.total);
        }
        (0..c)
            .map(|ch| {
                let sum: f64 = self.total.iter().skip(ch).step_by(c).sum();
                (sum / pixels as f64) as f32
            })
            .collect()
    }
}

/// Adds one segment (`SEGMENT_GROUPS` = 16 groups of `lanes` values, each value `f` of a
/// source value) to the lanes' totals: per lane, the segment's 16 values are summed pairwise
/// in `f32` (value `g` plus value `g + 8`, then `g + 4`, `g + 2`, `g + 1`), then added to
/// the lane's `f64` total.
#[inline(always)]
fn sum_segment<T: Copy>(segment: &[T], lanes: usize, f: impl Fn(T) -> f32, total: &mut [f64]) {
    let segment = &segment[..lanes * SEGMENT_GROUPS];
    // The f32 sums first (8 lanes to a vector), then the f64 additions (4 to a vector).
    let mut sums = [0.0f32; WIDE_LANES];
    for (l, sum) in sums[..lanes].iter_mut().enumerate() {
        let v = |g: usize| f(segment[g * lanes + l]);
        let a: [f32; 8] = std::array::from_fn(|g| v(g) + v(g + 8));
        let b = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
        let c = [b[0] + b[2], b[1] + b[3]];
        *sum = c[0] + c[1];
    }
    for (t, &s) in total[..lanes].iter_mut().zip(&sums) {
        *t += f64::from(s);
    }
}

/// Exact per-channel sums of `u8` values, streamed: what a contrast's means are computed
/// from when its values are `u8` pixels loaded to `f32` plus at most one brightness delta
/// (the usual augmentation), so the means need no `f32` value at all.
///
/// Value `j` goes to lane `j mod L` (`L` as for [`ChannelSums`]); each lane adds its values
/// in `u16` over up to 256 groups of `L` values (no overflow: 256 × 255 < 2^16), then into a
/// `u64` total. Integer addition is exact, so any split of the values between calls, any
/// order of a row's pixels and any vector width give the same sums; the lanes are only there
/// so the additions vectorize (16 or 32 bytes at a time instead of one).
pub(super) struct ByteSums {
    lanes: usize,
    /// How many values have been added (their count mod `lanes` is the next value's lane).
    seen: usize,
    /// One total per lane.
    total: Vec<u64>,
}

/// Groups of `WIDE_LANES` values a lane adds in `u16` before its `u64` total.
const U16_GROUPS: usize = 256;
const _: () = assert!(U16_GROUPS * 255 <= u16::MAX as usize);

impl ByteSums {
    /// Empty sums for an image of `c` channels (`c >= 1`).
    pub(super) fn new(c: usize) -> Self {
        let lanes = lanes_for(c);
        ByteSums {
            lanes,
            seen: 0,
            total: vec![0; lanes],
        }
    }

    /// Adds the next `values` (in image order, or any order of whole pixels). Inlined, so it
    /// is vectorized for the CPU of the function it is called from.
    #[inline(always)]
    pub(super) fn push(&mut self, mut values: &[u8]) {
        let lanes = self.lanes;
        // Up to the next group boundary one value at a time.
        while !self.seen.is_multiple_of(lanes) && !values.is_empty() {
            self.total[self.seen % lanes] += u64::from(values[0]);
            self.seen += 1;
            values = &values[1..];
        }
        let whole = values.len() - values.len() % lanes;
        if lanes == WIDE_LANES {
            let total: &mut [u64; WIDE_LANES] =
                (&mut self.total[..]).try_into().expect("WIDE_LANES lanes");
            wide_byte_sums(&values[..whole], total);
        } else {
            for group in values[..whole].chunks_exact(lanes) {
                for (t, &x) in self.total.iter_mut().zip(group) {
                    *t += u64::from(x);
                }
            }
        }
        self.seen += whole;
        for &x in &values[whole..] {
            self.total[self.seen % lanes] += u64::from(x);
            self.seen += 1;
        }
    }

    /// The `c` per-channel sums (`c` as given to [`new`](Self::new)).
    pub(super) fn sums(&self, c: usize) -> Vec<u64> {
        (0..c)
            .map(|ch| self.total.iter().skip(ch).step_by(c.max(1)).sum())
            .collect()
    }
}

/// Adds `values` (whole groups of `WIDE_LANES`) to the lanes' totals: value `j` to lane
/// `j mod WIDE_LANES`.
#[inline(always)]
fn wide_byte_sums(values: &[u8], total: &mut [u64; WIDE_LANES]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[allow(unsafe_code)]
        // SAFETY: `wide_byte_sums_avx2` only requires AVX2, which the line above checked
        // this CPU has.
        unsafe {
            wide_byte_sums_avx2(values, total)
        };
        return;
    }
    wide_byte_sums_portable(values, total);
}

/// [`wide_byte_sums`] on any CPU.
fn wide_byte_sums_portable(values: &[u8], total: &mut [u64; WIDE_LANES]) {
    for block in values.chunks(WIDE_LANES * U16_GROUPS) {
        let mut acc = [0u16; WIDE_LANES];
        for group in block.chunks_exact(WIDE_LANES) {
            for (a, &b) in acc.iter_mut().zip(group) {
                *a += u16::from(b);
            }
        }
        for (t, &a) in total.iter_mut().zip(&acc) {
            *t += u64::from(a);
        }
    }
}

/// [`wide_byte_sums`] with AVX2: a group's 48 bytes as three vectors of 16 `u16` lanes
/// (the compiler's own vectorization of the portable loop widened 4 bytes at a time).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn wide_byte_sums_avx2(values: &[u8], total: &mut [u64; WIDE_LANES]) {
    use std::arch::x86_64::{__m128i, __m256i, _mm256_add_epi16, _mm256_cvtepu8_epi16};
    const VECTORS: usize = WIDE_LANES / 16;
    for block in values.chunks(WIDE_LANES * U16_GROUPS) {
        let mut acc = [bytemuck::cast::<[u16; 16], __m256i>([0; 16]); VECTORS];
        for group in block.chunks_exact(WIDE_LANES) {
            for (a, bytes) in acc.iter_mut().zip(group.chunks_exact(16)) {
                let bytes: __m128i = bytemuck::pod_read_unaligned(bytes);
                *a = _mm256_add_epi16(*a, _mm256_cvtepu8_epi16(bytes));
            }
        }
        for (t, a) in total.chunks_exact_mut(16).zip(acc) {
            for (t, a) in t.iter_mut().zip(bytemuck::cast::<__m256i, [u16; 16]>(a)) {
                *t += u64::from(a);
            }
        }
    }
}

/// The per-channel means of `plane` (`pixels × c` values), each value mapped by `load`.
pub(super) fn channel_means<T: Copy>(
    plane: &[T],
    pixels: usize,
    c: usize,
    load: impl Fn(T) -> f32 + Copy,
) -> Vec<f32> {
    let mut sums = ChannelSums::new(c);
    sums.push_mapped(plane, load);
    sums.means(pixels, c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `n` pseudo-random words (xorshift from `seed`).
    fn noise(seed: u64, n: usize) -> impl Iterator<Item = u64> {
        let mut x = seed | 1;
        (0..n).map(move |_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
    }

    /// The definition, one value at a time.
    fn reference(values: &[f32], pixels: usize, c: usize) -> Vec<f32> {
        if pixels == 0 {
            return vec![0.0; c];
        }
        let lanes = if 48 % c == 0 { 48 } else { c };
        let mut total = vec![0.0f64; lanes];
        for segment in values.chunks(lanes * SEGMENT_GROUPS) {
            // Each lane's values, zero-padded to SEGMENT_GROUPS, summed pairwise.
            for (l, t) in total.iter_mut().enumerate() {
                let mut v: Vec<f32> = (0..SEGMENT_GROUPS)
                    .map(|g| segment.get(g * lanes + l).copied().unwrap_or(0.0))
                    .collect();
                while v.len() > 1 {
                    let h = v.len() / 2;
                    v = (0..h).map(|i| v[i] + v[i + h]).collect();
                }
                *t += f64::from(v[0]);
            }
        }
        (0..c)
            .map(|ch| {
                let s: f64 = (ch..lanes).step_by(c).map(|l| total[l]).sum();
                (s / pixels as f64) as f32
            })
            .collect()
    }

    #[test]
    fn means_by_hand() {
        // 2 pixels, 3 channels: (1, 2, 3) and (3, 4, 5).
        let mut s = ChannelSums::new(3);
        s.push(&[1.0, 2.0, 3.0, 3.0, 4.0, 5.0]);
        assert_eq!(s.means(2, 3), vec![2.0, 3.0, 4.0]);
        // An empty image has zero means.
        assert_eq!(ChannelSums::new(3).means(0, 3), vec![0.0; 3]);
        // Five channels (not a divisor of 48): one lane per channel.
        let v: Vec<f32> = (0..10).map(|x| x as f32).collect();
        assert_eq!(
            channel_means(&v, 2, 5, |x| x),
            vec![2.5, 3.5, 4.5, 5.5, 6.5]
        );
    }

    #[test]
    fn a_large_image_mean_is_accurate() {
        // 224 x 224 x 3: within one unit in the last place of the exact mean (the f64 sum of
        // the f32 values, exact here to far below that), where a running f32 sum drifts.
        let n = 224 * 224;
        let v: Vec<f32> = noise(0x9e37_79b9_7f4a_7c15, n * 3)
            .map(|x| (x % 256) as f32 * (1.0 / 255.0) + 0.0123)
            .collect();
        let ours = channel_means(&v, n, 3, |x| x);
        let mut running = [0.0f32; 3];
        for ch in 0..3 {
            let exact: f64 = v
                .iter()
                .skip(ch)
                .step_by(3)
                .map(|&x| f64::from(x))
                .sum::<f64>()
                / n as f64;
            let ulp = f64::from(f32::EPSILON) * exact;
            assert!(
                (f64::from(ours[ch]) - exact).abs() <= ulp,
                "{} vs {exact}",
                ours[ch]
            );
            running[ch] = v.iter().skip(ch).step_by(3).sum::<f32>() / n as f32;
        }
        // The naive running sum is measurably worse (the reason for the lanes and segments).
        let exact0: f64 = v.iter().step_by(3).map(|&x| f64::from(x)).sum::<f64>() / n as f64;
        assert!((f64::from(running[0]) - exact0).abs() > f64::from(f32::EPSILON) * exact0);
    }

    /// Per-channel sums one value at a time.
    fn byte_reference(bytes: &[u8], c: usize) -> Vec<u64> {
        (0..c)
            .map(|ch| {
                bytes
                    .iter()
                    .skip(ch)
                    .step_by(c)
                    .map(|&x| u64::from(x))
                    .sum()
            })
            .collect()
    }

    #[test]
    fn byte_sums_of_a_large_bright_image_do_not_overflow() {
        // Every value 255 in an image far larger than the u16 accumulators' 256 groups.
        let bytes = vec![255u8; 1000 * 1000 * 3];
        let mut sums = ByteSums::new(3);
        sums.push(&bytes);
        assert_eq!(sums.sums(3), vec![255 * 1_000_000; 3]);
    }

    #[test]
    fn the_portable_byte_sums_equal_the_vector_ones() {
        let bytes: Vec<u8> = noise(7, WIDE_LANES * 700)
            .map(|x| (x >> 20) as u8)
            .collect();
        let (mut portable, mut detected) = ([0u64; WIDE_LANES], [0u64; WIDE_LANES]);
        wide_byte_sums_portable(&bytes, &mut portable);
        wide_byte_sums(&bytes, &mut detected);
        assert_eq!(portable, detected);
        let lane0: u64 = bytes
            .iter()
            .step_by(WIDE_LANES)
            .map(|&x| u64::from(x))
            .sum();
        assert_eq!(portable[0], lane0);
    }

    proptest! {
        /// Byte sums equal the plain per-channel sums for any channel count, however the
        /// values are split between calls, and whatever the order of the pixels within a
        /// call (a mirrored row).
        #[test]
        fn byte_sums_are_exact_in_any_split_and_pixel_order(
            c in 1usize..7,
            pixels in 0usize..40_000,
            cuts in proptest::collection::vec(0usize..200_000, 0..6),
            reverse in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let n = pixels * c;
            let bytes: Vec<u8> = noise(seed, n).map(|x| (x >> 24) as u8).collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|k| k.min(pixels) * c).collect();
            cuts.push(0);
            cuts.push(n);
            cuts.sort_unstable();
            let mut sums = ByteSums::new(c);
            for w in cuts.windows(2) {
                let mut part = bytes[w[0]..w[1]].to_vec();
                if reverse {
                    let reversed: Vec<u8> = part.chunks(c).rev().flatten().copied().collect();
                    part = reversed;
                }
                sums.push(&part);
            }
            prop_assert_eq!(sums.sums(c), byte_reference(&bytes, c));
        }
    }

    proptest! {
        /// Values computed where they are summed (`push_mapped` of `u8`s) give the bits of
        /// the same values computed first (`push` of `f32`s), however either is split.
        #[test]
        fn mapped_values_sum_like_the_values(
            c in 1usize..7,
            pixels in 0usize..1200,
            cut in 0usize..8000,
            delta in -0.2f32..0.2,
            seed in any::<u64>(),
        ) {
            let n = pixels * c;
            let bytes: Vec<u8> = noise(seed, n).map(|x| x as u8)
                .collect();
            let f = move |b: u8| f32::from(b) * (1.0 / 255.0) + delta;
            let values: Vec<f32> = bytes.iter().map(|&b| f(b)).collect();
            let cut = cut.min(n);
            let mut mapped = ChannelSums::new(c);
            mapped.push_mapped(&bytes[..cut], f);
            mapped.push_mapped(&bytes[cut..], f);
            let mut plain = ChannelSums::new(c);
            plain.push(&values);
            let bits = |m: Vec<f32>| m.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(mapped.means(pixels, c)), bits(plain.means(pixels, c)));
        }

        /// Any chunking gives the definition's bits, for any channel count.
        #[test]
        fn chunking_does_not_change_the_bits(
            c in 1usize..7,
            pixels in 0usize..1200,
            cuts in proptest::collection::vec(0usize..5000, 0..6),
            seed in any::<u64>(),
        ) {
            let n = pixels * c;
            let values: Vec<f32> = noise(seed, n)
                .map(|x| (x % 100_000) as f32 / 1000.0 - 20.0)
                .collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|k| k.min(n)).collect();
            cuts.push(0);
            cuts.push(n);
            cuts.sort_unstable();
            let mut sums = ChannelSums::new(c);
            for w in cuts.windows(2) {
                sums.push(&values[w[0]..w[1]]);
            }
            let got: Vec<u32> = sums.means(pixels, c).iter().map(|m| m.to_bits()).collect();
            let want: Vec<u32> = reference(&values, pixels, c).iter().map(|m| m.to_bits()).collect();
            prop_assert_eq!(&got, &want);
            let whole: Vec<u32> = channel_means(&values, pixels, c, |v| v)
                .iter()
                .map(|m| m.to_bits())
                .collect();
            prop_assert_eq!(whole, want);
        }
    }
}
