//! `gaussian_noise`: an example Sluice plugin that adds Gaussian noise to the `image`
//! feature, written once against `sluice-sdk` and built as a native library or for wasm32.
//!
//! Configuration (all optional): `sigma` (standard deviation, default 0.05; for `u8`
//! images in units of 1/255, so the same value suits both layouts), `p` (probability of
//! applying the noise to an element, default 1.0). `f32` / `f64` values get the noise added
//! as is; `u8` values are rounded (half up) and saturated to 0..=255.
//!
//! Noise values come from a 4096-entry table of standard normal quantiles (computed once at
//! `init` with Acklam's inverse-CDF approximation), indexed by 12 random bits each: five
//! draws per 64-bit random number, the same bits on every platform and in wasm32.
//!
//! The kernel works in blocks of 320 values: first the block's noise values are looked up
//! (in a table of `sigma * quantile` made at `init`, the same products the per-value formula
//! gives), then they are added in a loop the compiler vectorizes (SSE2 natively, simd128 in
//! wasm32). The outputs are those of the plain per-value loop, bit for bit (a test keeps it
//! as the reference).
//!
//! Both paths of the SDK: `map_lent` (native hosts of ABI version 2) reads the image where
//! the host keeps it and writes the noisy values straight into the host's output buffer (no
//! copy; an element skipped by `p` is not written at all), and `map` (the wire path: WASM,
//! older hosts) adds the noise in place to the decoded image. Both give the same bits.
#![deny(unsafe_code)]

use sluice_sdk::{
    Config, Data, DataRef, Element, ElementRef, Error, Feature, Kind, Outputs, Plugin, PluginInfo,
    Result, Rng,
};

/// Entries in the quantile table (a power of two: indexed by 12 bits).
const TABLE: usize = 4096;

/// The standard normal quantiles of the table's entries: entry `i` at `(i + 0.5) / 4096`.
fn quantiles() -> Vec<f32> {
    (0..TABLE)
        .map(|i| inverse_normal_cdf((i as f64 + 0.5) / TABLE as f64) as f32)
        .collect()
}

/// Values per block of the kernel: 64 random numbers' worth (a multiple of 5).
const BLOCK: usize = 320;

/// The plugin.
#[derive(Debug, Clone)]
pub struct GaussianNoise {
    p: f32,
    /// `sigma * quantile` for each entry: the noise of `f32` and `f64` values.
    noise: Box<[f32; TABLE]>,
    /// `(sigma * 255) * quantile`: the noise of `u8` values (in 1/255).
    noise_u8: Box<[f32; TABLE]>,
}

/// Acklam's approximation of the standard normal inverse CDF (relative error < 1.2e-9).
fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.383_577_518_672_69e2,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-03,
        3.224671290700398e-01,
        2.445134137142996e+00,
        3.754408661907416e+00,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail(libm_sqrt(-2.0 * libm_ln(p)))
    } else if p > 1.0 - 0.02425 {
        -tail(libm_sqrt(-2.0 * libm_ln(1.0 - p)))
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

// `f64::sqrt` is IEEE-exact everywhere; `ln` goes through a software series so the table is
// the same bits natively and in wasm32 (no platform libm).
fn libm_sqrt(x: f64) -> f64 {
    x.sqrt()
}

fn libm_ln(x: f64) -> f64 {
    // ln(x) = 2 atanh((x - 1) / (x + 1)) after scaling x into [0.5, 1) by powers of two.
    let mut m = x;
    let mut e = 0i32;
    while m < 0.5 {
        m *= 2.0;
        e -= 1;
    }
    while m >= 1.0 {
        m /= 2.0;
        e += 1;
    }
    let y = (m - 1.0) / (m + 1.0);
    let y2 = y * y;
    let mut term = y;
    let mut sum = 0.0;
    let mut k = 1.0;
    for _ in 0..40 {
        sum += term / k;
        term *= y2;
        k += 2.0;
    }
    2.0 * sum + f64::from(e) * std::f64::consts::LN_2
}

impl GaussianNoise {
    /// The plugin with these parameters.
    pub fn with(sigma: f32, p: f32) -> GaussianNoise {
        let quantiles = quantiles();
        let scaled = |scale: f32| -> Box<[f32; TABLE]> {
            let sigma = sigma * scale;
            let mut table = Box::new([0.0; TABLE]);
            for (t, q) in table.iter_mut().zip(&quantiles) {
                *t = sigma * q;
            }
            table
        };
        GaussianNoise {
            p,
            noise: scaled(1.0),
            noise_u8: scaled(255.0),
        }
    }

    /// Adds noise to `values` in place from `table` (`sigma * scale * quantile`): five
    /// values per random number, 12 bits each, then one more random number for the last
    /// (fewer than five) values, as many or none. Block by block: the noise is looked up,
    /// then `f` runs over the block in a loop of its own, which vectorizes.
    fn add<T: Copy>(
        values: &mut [T],
        table: &[f32; TABLE],
        rng: &mut Rng,
        f: impl Fn(T, f32) -> T + Copy,
    ) {
        let mut noise = [0.0f32; BLOCK];
        let mut blocks = values.chunks_exact_mut(BLOCK);
        for block in &mut blocks {
            draw(&mut noise, table, rng);
            apply(block, &noise, f);
        }
        let tail = blocks.into_remainder();
        draw_tail(&mut noise[..tail.len()], table, rng);
        apply(tail, &noise[..tail.len()], f);
    }

    /// [`GaussianNoise::add`] from `src` into `dst` (of the same length), for the lent
    /// path: the same draws in the same order, so the same bits.
    fn add_into<T: Copy>(
        src: &[T],
        dst: &mut [T],
        table: &[f32; TABLE],
        rng: &mut Rng,
        f: impl Fn(T, f32) -> T + Copy,
    ) {
        let mut noise = [0.0f32; BLOCK];
        let mut out = dst.chunks_exact_mut(BLOCK);
        let mut values = src.chunks_exact(BLOCK);
        for (o, v) in (&mut out).zip(&mut values) {
            draw(&mut noise, table, rng);
            apply_into(v, o, &noise, f);
        }
        let (o, v) = (out.into_remainder(), values.remainder());
        draw_tail(&mut noise[..v.len()], table, rng);
        apply_into(v, o, &noise[..v.len()], f);
    }
}

/// Looks up the noise of `noise.len()` values (a multiple of 5): five per random number.
#[inline(always)]
fn draw(noise: &mut [f32], table: &[f32; TABLE], rng: &mut Rng) {
    for group in noise.chunks_exact_mut(5) {
        let bits = rng.next_u64();
        group[0] = table[(bits & 0xfff) as usize];
        group[1] = table[((bits >> 12) & 0xfff) as usize];
        group[2] = table[((bits >> 24) & 0xfff) as usize];
        group[3] = table[((bits >> 36) & 0xfff) as usize];
        group[4] = table[((bits >> 48) & 0xfff) as usize];
    }
}

/// The noise of a last block of any length: whole groups of five as [`draw`] does, then
/// one more random number for the rest (drawn even when there is no rest).
#[inline(always)]
fn draw_tail(noise: &mut [f32], table: &[f32; TABLE], rng: &mut Rng) {
    let whole = noise.len() / 5 * 5;
    draw(&mut noise[..whole], table, rng);
    let mut bits = rng.next_u64();
    for n in &mut noise[whole..] {
        *n = table[(bits & 0xfff) as usize];
        bits >>= 12;
    }
}

/// `values[i] = f(values[i], noise[i])`: a loop of its own, which the compiler vectorizes.
#[inline(always)]
fn apply<T: Copy>(values: &mut [T], noise: &[f32], f: impl Fn(T, f32) -> T) {
    for (v, &n) in values.iter_mut().zip(noise) {
        *v = f(*v, n);
    }
}

/// `out[i] = f(values[i], noise[i])`: [`apply`] into another buffer.
#[inline(always)]
fn apply_into<T: Copy>(values: &[T], out: &mut [T], noise: &[f32], f: impl Fn(T, f32) -> T) {
    for ((o, &v), &n) in out.iter_mut().zip(values).zip(noise) {
        *o = f(v, n);
    }
}

/// A `u8` value plus noise (in 1/255), rounded half up and saturated to 0..=255: `+ 0.5`,
/// a clamp to `[0, 255]`, then a truncating conversion (no libm `round` call; this form
/// vectorizes). The same bits as `((x + n + 0.5).max(0.0) as i32).min(255)`.
#[inline(always)]
fn noisy_u8(x: u8, n: f32) -> u8 {
    let y = f32::from(x) + n + 0.5;
    let y = if y > 0.0 { y } else { 0.0 };
    trunc_u8(if y < 255.0 { y } else { 255.0 })
}

/// `y` (in `[0, 255]`) truncated to a `u8`: the same value either way, in the form each
/// target's compiler vectorizes best. wasm32 has a saturating float-to-`i32` vector
/// instruction (`i32x4.trunc_sat_f32x4_s`, then a narrowing); x86-64's SSE2 has none, and
/// does the conversion to `u8` directly.
#[inline(always)]
fn trunc_u8(y: f32) -> u8 {
    if cfg!(target_arch = "wasm32") {
        y as i32 as u8
    } else {
        y as u8
    }
}

fn wrong_dtype(dtype: sluice_sdk::DType) -> Error {
    Error::invalid_input(format!("`image` must be u8, f32 or f64, got {dtype}"))
}

impl Plugin for GaussianNoise {
    fn info() -> PluginInfo {
        PluginInfo::new("gaussian_noise", env!("CARGO_PKG_VERSION"), Kind::Map)
            .description("adds Gaussian noise (sigma, in 1/255 for u8) to `image`")
            .input(Feature::new("image"))
            .output(Feature::new("image"))
    }

    fn new(config: &Config) -> Result<Self> {
        config.only(&["sigma", "p"])?;
        let sigma: f32 = config.get_or("sigma", 0.05)?;
        let p: f32 = config.get_or("p", 1.0)?;
        if !(sigma.is_finite() && sigma >= 0.0) {
            return Err(Error::config(format!(
                "sigma must be finite and >= 0, got {sigma}"
            )));
        }
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::config(format!("p must be in [0, 1], got {p}")));
        }
        Ok(GaussianNoise::with(sigma, p))
    }

    fn map(&mut self, mut element: Element, rng: &mut Rng) -> Result<Element> {
        if self.p < 1.0 && rng.f32() >= self.p {
            return Ok(element);
        }
        let image = element
            .get_mut("image")
            .ok_or_else(|| Error::invalid_input("no `image` feature"))?;
        match &mut image.data {
            Data::F32(v) => Self::add(v, &self.noise, rng, |x, n| x + n),
            Data::F64(v) => Self::add(v, &self.noise, rng, |x, n| x + f64::from(n)),
            Data::U8(v) => Self::add(v, &self.noise_u8, rng, noisy_u8),
            other => return Err(wrong_dtype(other.dtype())),
        }
        Ok(element)
    }

    fn map_lent(
        &mut self,
        element: &ElementRef<'_>,
        out: &mut Outputs<'_>,
        rng: &mut Rng,
    ) -> Result<()> {
        if self.p < 1.0 && rng.f32() >= self.p {
            // Unchanged: nothing written, so the host keeps the image as it is.
            return Ok(());
        }
        let image = element
            .get("image")
            .ok_or_else(|| Error::invalid_input("no `image` feature"))?;
        match image.data {
            DataRef::F32(src) => Self::add_into(
                src,
                out.f32("image", image.shape)?,
                &self.noise,
                rng,
                |x, n| x + n,
            ),
            DataRef::F64(src) => Self::add_into(
                src,
                out.f64("image", image.shape)?,
                &self.noise,
                rng,
                |x, n| x + f64::from(n),
            ),
            DataRef::U8(src) => Self::add_into(
                src,
                out.u8("image", image.shape)?,
                &self.noise_u8,
                rng,
                noisy_u8,
            ),
            other => return Err(wrong_dtype(other.dtype())),
        }
        Ok(())
    }
}

#[cfg(feature = "core-abi")]
sluice_sdk::export_plugin!(GaussianNoise);

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::Tensor;

    fn image(data: Data, shape: Vec<u64>) -> Element {
        Element {
            tensors: vec![Tensor::new("image", shape, data).unwrap()],
        }
    }

    /// The kernel as first written, one value at a time: the reference the blocked kernel
    /// must equal bit for bit.
    fn reference<T: Copy>(
        sigma: f32,
        values: &mut [T],
        scale: f32,
        rng: &mut Rng,
        f: impl Fn(T, f32) -> T,
    ) {
        let quantiles = quantiles();
        let sigma = sigma * scale;
        let mut chunks = values.chunks_exact_mut(5);
        for chunk in &mut chunks {
            let mut bits = rng.next_u64();
            for v in chunk {
                *v = f(*v, sigma * quantiles[(bits & 0xfff) as usize]);
                bits >>= 12;
            }
        }
        let mut bits = rng.next_u64();
        for v in chunks.into_remainder() {
            *v = f(*v, sigma * quantiles[(bits & 0xfff) as usize]);
            bits >>= 12;
        }
    }

    #[test]
    fn the_blocked_kernel_equals_the_per_value_reference_bit_for_bit() {
        let mut source = Rng::new(99);
        for sigma in [0.0f32, 0.01, 0.05, 0.3, 1.0, 7.5, 1e30] {
            let p = GaussianNoise::with(sigma, 1.0);
            for len in [
                0usize, 1, 4, 5, 6, 319, 320, 321, 324, 325, 640, 1001, 150_528,
            ] {
                let u8s: Vec<u8> = (0..len).map(|_| source.next_u64() as u8).collect();
                let f32s: Vec<f32> = (0..len).map(|_| source.f32() * 2.0 - 0.5).collect();
                let seed = source.next_u64();
                let (mut a, mut b) = (u8s.clone(), u8s);
                let (mut ra, mut rb) = (Rng::new(seed), Rng::new(seed));
                GaussianNoise::add(&mut a, &p.noise_u8, &mut ra, noisy_u8);
                reference(sigma, &mut b, 255.0, &mut rb, |x, n| {
                    ((f32::from(x) + n + 0.5).max(0.0) as i32).min(255) as u8
                });
                assert_eq!(a, b, "u8, sigma {sigma}, {len} values");
                assert_eq!(ra, rb, "the same random numbers drawn");
                let (mut a, mut b) = (f32s.clone(), f32s);
                GaussianNoise::add(&mut a, &p.noise, &mut Rng::new(seed), |x, n| x + n);
                reference(sigma, &mut b, 1.0, &mut Rng::new(seed), |x, n| x + n);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "f32, sigma {sigma}, {len} values");
            }
        }
    }

    #[test]
    fn both_forms_of_the_truncation_agree() {
        for i in 0..=255 * 1024 {
            let y = i as f32 / 1024.0;
            for y in [
                y,
                f32::from_bits(y.to_bits().saturating_sub(1)),
                y.next_up(),
            ] {
                let y = y.clamp(0.0, 255.0);
                assert_eq!(y as i32 as u8, y as u8, "{y}");
            }
        }
    }

    #[test]
    fn quantiles_are_a_standard_normal() {
        let q = quantiles();
        let mean: f64 = q.iter().map(|&q| f64::from(q)).sum::<f64>() / TABLE as f64;
        let var: f64 = q.iter().map(|&q| f64::from(q).powi(2)).sum::<f64>() / TABLE as f64;
        assert!(mean.abs() < 1e-6, "{mean}");
        assert!((var - 1.0).abs() < 0.01, "{var}");
        assert!((inverse_normal_cdf(0.975) - 1.959964).abs() < 1e-5);
        assert!((libm_ln(10.0) - 10f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn noise_has_the_configured_spread_and_is_reproducible() {
        let cfg = Config::from_bytes(br#"{"sigma": 0.1}"#).unwrap();
        let mut p = <GaussianNoise as Plugin>::new(&cfg).unwrap();
        let zeros = image(Data::F32(vec![0.0; 10_000]), vec![100, 100, 1]);
        let a = p.map(zeros.clone(), &mut Rng::new(3)).unwrap();
        let b = p.map(zeros.clone(), &mut Rng::new(3)).unwrap();
        let c = p.map(zeros, &mut Rng::new(4)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let Data::F32(v) = &a.get("image").unwrap().data else {
            unreachable!()
        };
        let sd = (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt();
        assert!((sd - 0.1).abs() < 0.005, "{sd}");
    }

    #[test]
    fn u8_images_saturate_and_bad_inputs_are_errors() {
        let cfg = Config::from_bytes(br#"{"sigma": 0.5}"#).unwrap();
        let mut p = <GaussianNoise as Plugin>::new(&cfg).unwrap();
        let out = p
            .map(
                image(Data::U8(vec![0, 255, 128, 128]), vec![2, 2]),
                &mut Rng::new(1),
            )
            .unwrap();
        let Data::U8(v) = &out.get("image").unwrap().data else {
            unreachable!()
        };
        assert_eq!(v.len(), 4);
        assert!(
            <GaussianNoise as Plugin>::new(&Config::from_bytes(br#"{"sigma": -1}"#).unwrap())
                .is_err()
        );
        assert!(
            <GaussianNoise as Plugin>::new(&Config::from_bytes(br#"{"sigmaa": 1}"#).unwrap())
                .is_err()
        );
        let err = p
            .map(image(Data::I64(vec![1]), vec![]), &mut Rng::new(1))
            .unwrap_err();
        assert!(err.to_string().contains("u8, f32 or f64"), "{err}");
        let err =
            sluice_sdk::run_map_lent(&mut p, image(Data::I64(vec![1]), vec![]), &mut Rng::new(1))
                .unwrap_err();
        assert!(err.to_string().contains("u8, f32 or f64"), "{err}");
    }

    /// Bits of the values, so NaN-free comparisons are exact.
    fn bits(e: &Element) -> Vec<u64> {
        match &e.get("image").unwrap().data {
            Data::U8(v) => v.iter().map(|&x| u64::from(x)).collect(),
            Data::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
            Data::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_lent_path_gives_the_bits_of_the_owned_path() {
        for config in [&br#"{"sigma": 0.1}"#[..], br#"{"sigma": 0.3, "p": 0.5}"#] {
            let mut p =
                <GaussianNoise as Plugin>::new(&Config::from_bytes(config).unwrap()).unwrap();
            // 7 values: a remainder after the chunks of five.
            for data in [
                Data::F32((0..21).map(|i| i as f32 / 21.0).collect()),
                Data::F64((0..21).map(|i| f64::from(i) / 21.0).collect()),
                Data::U8((0..21).map(|i| (i * 12) as u8).collect()),
            ] {
                let e = image(data, vec![7, 1, 3]);
                for seed in 0..20 {
                    let owned = p.map(e.clone(), &mut Rng::new(seed)).unwrap();
                    let lent =
                        sluice_sdk::run_map_lent(&mut p, e.clone(), &mut Rng::new(seed)).unwrap();
                    assert_eq!(bits(&owned), bits(&lent), "seed {seed}");
                }
            }
        }
    }
}
