//! What the image benches share (`mod support;` in each).

use rand::{Rng, SeedableRng};

/// A photo-like RGB JPEG of `w`×`h` (a gradient with ripples and ±12 noise, seed 3),
/// quality 90, written by the `image` crate's encoder.
pub(crate) fn synthetic_jpeg(w: u32, h: u32) -> Vec<u8> {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(3);
    let mut pixels = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
            let ripple = ((fx * 17.0).sin() * (fy * 11.0).cos()) * 40.0;
            for (c, base) in [(0, 200.0 * fx), (1, 180.0 * fy), (2, 120.0 * (1.0 - fx))] {
                let noise = rng.random_range(-12.0..12.0);
                let v = base + ripple * (c as f32 * 0.3 + 0.5) + noise + 30.0;
                pixels.push(v.clamp(0.0, 255.0) as u8);
            }
        }
    }
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode(&pixels, w, h, image::ExtendedColorType::Rgb8)
        .unwrap();
    out
}
