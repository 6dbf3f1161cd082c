//! `gray_solarize`: an example Sluice plugin that, per element, turns the `image` feature
//! to grayscale with probability `p_gray` and solarizes it with probability `p_solarize`,
//! written once against `sluice-sdk` and built as a native library or for wasm32.
//!
//! - Grayscale keeps the channel count (each RGB pixel becomes its luma, repeated), with
//!   `tf.image.rgb_to_grayscale`'s weights 0.2989, 0.5870, 0.1140; `u8` luma is rounded.
//!   Images with 1 channel are left as they are; others need 3 channels (`[H, W, 3]`).
//! - Solarize inverts every value at or above `threshold`: `255 - x` for `u8`, `1 - x` for
//!   `f32` (images in `[0, 1]`). `threshold` defaults to 128 for `u8` and 0.5 for `f32`
//!   (give it in the image's own units).
//!
//! Configuration: `p_gray` (default 0.2), `p_solarize` (default 0.2), `threshold`.
//!
//! Both paths of the SDK: `map_lent` (native hosts of ABI version 2) reads the image where
//! the host keeps it and writes the result into the host's output buffer: grey values
//! straight from the input (then solarized in place there), or solarized values straight
//! from the input; an element left as it is is not written at all (no copy). `map` (the
//! wire path) changes the decoded image in place. Both give the same bits.
#![deny(unsafe_code)]

use sluice_sdk::{
    Config, DType, Data, DataRef, Element, ElementRef, Error, Feature, Kind, Outputs, Plugin,
    PluginInfo, Result, Rng,
};

/// The plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct GraySolarize {
    p_gray: f32,
    p_solarize: f32,
    threshold: Option<f32>,
}

const WEIGHTS: [f32; 3] = [0.2989, 0.5870, 0.1140];

impl GraySolarize {
    fn gray_u8(v: &mut [u8]) {
        for px in v.chunks_exact_mut(3) {
            let l = WEIGHTS[0] * f32::from(px[0])
                + WEIGHTS[1] * f32::from(px[1])
                + WEIGHTS[2] * f32::from(px[2]);
            px.fill(round_u8(l));
        }
    }

    fn gray_f32(v: &mut [f32]) {
        for px in v.chunks_exact_mut(3) {
            let l = WEIGHTS[0] * px[0] + WEIGHTS[1] * px[1] + WEIGHTS[2] * px[2];
            px.fill(l);
        }
    }

    /// [`GraySolarize::gray_u8`] from `src` into `dst` (values after the last whole pixel
    /// are kept, as in place).
    fn gray_u8_into(src: &[u8], dst: &mut [u8]) {
        let mut out = dst.chunks_exact_mut(3);
        let mut pixels = src.chunks_exact(3);
        for (o, px) in (&mut out).zip(&mut pixels) {
            let l = WEIGHTS[0] * f32::from(px[0])
                + WEIGHTS[1] * f32::from(px[1])
                + WEIGHTS[2] * f32::from(px[2]);
            o.fill(l.round().clamp(0.0, 255.0) as u8);
        }
        out.into_remainder().copy_from_slice(pixels.remainder());
    }

    /// [`GraySolarize::gray_f32`] from `src` into `dst`.
    fn gray_f32_into(src: &[f32], dst: &mut [f32]) {
        let mut out = dst.chunks_exact_mut(3);
        let mut pixels = src.chunks_exact(3);
        for (o, px) in (&mut out).zip(&mut pixels) {
            o.fill(WEIGHTS[0] * px[0] + WEIGHTS[1] * px[1] + WEIGHTS[2] * px[2]);
        }
        out.into_remainder().copy_from_slice(pixels.remainder());
    }

    fn solarize_u8(threshold: f32, x: u8) -> u8 {
        if f32::from(x) >= threshold {
            255 - x
        } else {
            x
        }
    }

    fn solarize_f32(threshold: f32, x: f32) -> f32 {
        if x >= threshold { 1.0 - x } else { x }
    }

    /// The draws and checks `map` and `map_lent` share: (grey it?, solarize it?), with the
    /// grey draw kept only for 3 channels.
    fn decide(&self, shape: &[u64], rng: &mut Rng) -> Result<(bool, bool)> {
        // Both draws always happen, so each element uses its RNG the same way.
        let gray = rng.f32() < self.p_gray;
        let solarize = rng.f32() < self.p_solarize;
        let channels = shape.last().copied().unwrap_or(0);
        if gray && channels != 1 && channels != 3 {
            return Err(Error::invalid_input(format!(
                "grayscale needs 1 or 3 channels, `image` has shape {shape:?}"
            )));
        }
        Ok((gray && channels == 3, solarize))
    }
}

fn wrong_dtype(dtype: DType) -> Error {
    Error::invalid_input(format!(
        "`image` must be {} or {}, got {dtype}",
        DType::U8,
        DType::F32,
    ))
}

/// `l.round().clamp(0.0, 255.0) as u8` for a luma `l` in `[0, 255]` (weights and values are
/// non-negative), without libm's `roundf` (a software call in wasm32 and on x86-64's
/// baseline): `l - trunc(l)` is exact in `f32`, so comparing it with 0.5 rounds half away
/// from zero as `round` does. A test compares the two on every RGB triple.
#[inline(always)]
fn round_u8(l: f32) -> u8 {
    let t = l as i32;
    let r = if l - t as f32 >= 0.5 { t + 1 } else { t };
    r.clamp(0, 255) as u8
}

impl Plugin for GraySolarize {
    fn info() -> PluginInfo {
        PluginInfo::new("gray_solarize", env!("CARGO_PKG_VERSION"), Kind::Map)
            .description("random grayscale and solarize of `image` ([H, W, C], u8 or f32)")
            .input(Feature::new("image").rank(3))
            .output(Feature::new("image").rank(3))
    }

    fn new(config: &Config) -> Result<Self> {
        config.only(&["p_gray", "p_solarize", "threshold"])?;
        let me = GraySolarize {
            p_gray: config.get_or("p_gray", 0.2)?,
            p_solarize: config.get_or("p_solarize", 0.2)?,
            threshold: config.get_or("threshold", None)?,
        };
        for (name, p) in [("p_gray", me.p_gray), ("p_solarize", me.p_solarize)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(Error::config(format!("{name} must be in [0, 1], got {p}")));
            }
        }
        Ok(me)
    }

    fn map(&mut self, mut element: Element, rng: &mut Rng) -> Result<Element> {
        let image = element
            .get_mut("image")
            .ok_or_else(|| Error::invalid_input("no `image` feature"))?;
        let (gray, solarize) = self.decide(&image.shape, rng)?;
        match &mut image.data {
            Data::U8(v) => {
                if gray {
                    Self::gray_u8(v);
                }
                if solarize {
                    let t = self.threshold.unwrap_or(128.0);
                    v.iter_mut().for_each(|x| *x = Self::solarize_u8(t, *x));
                }
            }
            Data::F32(v) => {
                if gray {
                    Self::gray_f32(v);
                }
                if solarize {
                    let t = self.threshold.unwrap_or(0.5);
                    v.iter_mut().for_each(|x| *x = Self::solarize_f32(t, *x));
                }
            }
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
        let image = element
            .get("image")
            .ok_or_else(|| Error::invalid_input("no `image` feature"))?;
        let (gray, solarize) = self.decide(image.shape, rng)?;
        match image.data {
            DataRef::U8(_) | DataRef::F32(_) if !gray && !solarize => {}
            DataRef::U8(src) => {
                let dst = out.u8("image", image.shape)?;
                let t = self.threshold.unwrap_or(128.0);
                if gray {
                    Self::gray_u8_into(src, dst);
                    if solarize {
                        dst.iter_mut().for_each(|x| *x = Self::solarize_u8(t, *x));
                    }
                } else {
                    for (o, &x) in dst.iter_mut().zip(src) {
                        *o = Self::solarize_u8(t, x);
                    }
                }
            }
            DataRef::F32(src) => {
                let dst = out.f32("image", image.shape)?;
                let t = self.threshold.unwrap_or(0.5);
                if gray {
                    Self::gray_f32_into(src, dst);
                    if solarize {
                        dst.iter_mut().for_each(|x| *x = Self::solarize_f32(t, *x));
                    }
                } else {
                    for (o, &x) in dst.iter_mut().zip(src) {
                        *o = Self::solarize_f32(t, x);
                    }
                }
            }
            other => return Err(wrong_dtype(other.dtype())),
        }
        Ok(())
    }
}

#[cfg(feature = "core-abi")]
sluice_sdk::export_plugin!(GraySolarize);

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::Tensor;

    fn image(data: Data, shape: Vec<u64>) -> Element {
        Element {
            tensors: vec![Tensor::new("image", shape, data).unwrap()],
        }
    }

    fn always(threshold: Option<f32>) -> GraySolarize {
        GraySolarize {
            p_gray: 1.0,
            p_solarize: 1.0,
            threshold,
        }
    }

    #[test]
    fn grayscale_then_solarize_by_hand() {
        let mut p = always(None);
        let out = p
            .map(
                image(Data::U8(vec![255, 0, 0, 10, 20, 30]), vec![1, 2, 3]),
                &mut Rng::new(0),
            )
            .unwrap();
        // Red: luma 0.2989 * 255 = 76.2 -> 76, below 128: kept. Second pixel: 10*0.2989 +
        // 20*0.587 + 30*0.114 = 18.1 -> 18.
        assert_eq!(
            out.get("image").unwrap().data,
            Data::U8(vec![76, 76, 76, 18, 18, 18])
        );
        let mut p = always(Some(0.5));
        let out = p
            .map(
                image(Data::F32(vec![1.0, 1.0, 1.0]), vec![1, 1, 3]),
                &mut Rng::new(0),
            )
            .unwrap();
        let Data::F32(v) = &out.get("image").unwrap().data else {
            unreachable!()
        };
        assert!(v.iter().all(|&x| (x - 0.0001).abs() < 1e-3), "{v:?}"); // luma 0.9999 -> 1 - 0.9999
    }

    #[test]
    fn the_luma_rounding_equals_round_on_every_rgb_triple() {
        for rgb in 0u32..1 << 24 {
            let [r, g, b, _] = rgb.to_le_bytes();
            let l =
                WEIGHTS[0] * f32::from(r) + WEIGHTS[1] * f32::from(g) + WEIGHTS[2] * f32::from(b);
            assert_eq!(
                round_u8(l),
                l.round().clamp(0.0, 255.0) as u8,
                "{r} {g} {b}: {l}"
            );
        }
    }

    #[test]
    fn probabilities_are_per_element_and_reproducible() {
        let cfg = Config::from_bytes(br#"{"p_gray": 0.5, "p_solarize": 0.0}"#).unwrap();
        let mut p = <GraySolarize as Plugin>::new(&cfg).unwrap();
        let img = image(Data::U8(vec![200, 10, 10]), vec![1, 1, 3]);
        let grays = (0..200)
            .filter(|&s| {
                let out = p.map(img.clone(), &mut Rng::new(s)).unwrap();
                out != img
            })
            .count();
        assert!((70..130).contains(&grays), "{grays} of 200");
        let a = p.map(img.clone(), &mut Rng::new(9)).unwrap();
        assert_eq!(a, p.map(img, &mut Rng::new(9)).unwrap());
    }

    #[test]
    fn bad_configs_and_inputs_are_errors() {
        assert!(
            <GraySolarize as Plugin>::new(&Config::from_bytes(br#"{"p_gray": 2}"#).unwrap())
                .is_err()
        );
        assert!(
            <GraySolarize as Plugin>::new(&Config::from_bytes(br#"{"q": 1}"#).unwrap()).is_err()
        );
        let mut p = always(None);
        let err = p
            .map(image(Data::U8(vec![1, 2]), vec![1, 1, 2]), &mut Rng::new(0))
            .unwrap_err();
        assert!(err.to_string().contains("1 or 3 channels"), "{err}");
        let err = sluice_sdk::run_map_lent(
            &mut p,
            image(Data::U8(vec![1, 2]), vec![1, 1, 2]),
            &mut Rng::new(0),
        )
        .unwrap_err();
        assert!(err.to_string().contains("1 or 3 channels"), "{err}");
    }

    #[test]
    fn the_lent_path_gives_the_bits_of_the_owned_path() {
        let cfg = Config::from_bytes(br#"{"p_gray": 0.5, "p_solarize": 0.5}"#).unwrap();
        let mut p = <GraySolarize as Plugin>::new(&cfg).unwrap();
        let mut changed = 0;
        for (data, channels) in [
            (Data::U8((0..24).map(|i| (i * 11) as u8).collect()), 3),
            (Data::U8((0..24).map(|i| (i * 11) as u8).collect()), 1),
            (Data::F32((0..24).map(|i| i as f32 / 24.0).collect()), 3),
            (Data::F32((0..24).map(|i| i as f32 / 24.0).collect()), 1),
        ] {
            let e = image(data, vec![2, 24 / 2 / channels, channels]);
            for seed in 0..40 {
                let owned = p.map(e.clone(), &mut Rng::new(seed)).unwrap();
                let lent =
                    sluice_sdk::run_map_lent(&mut p, e.clone(), &mut Rng::new(seed)).unwrap();
                let bits = |e: &Element| match &e.get("image").unwrap().data {
                    Data::F32(v) => v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    Data::U8(v) => v.iter().map(|&x| u32::from(x)).collect(),
                    other => panic!("{other:?}"),
                };
                assert_eq!(bits(&owned), bits(&lent), "seed {seed}");
                changed += usize::from(owned != e);
            }
        }
        assert!(changed > 40, "{changed} of 160 changed");
    }
}
