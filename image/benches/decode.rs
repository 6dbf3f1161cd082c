//! Criterion bench of JPEG decoding (`sluice_image::decode`) on synthetic photos-like
//! JPEGs (a smooth gradient with ripples plus uniform noise of ±12, encoded by the `image`
//! crate at quality 90, 4:2:0), 256×256 and 1024×768:
//!
//! - `full`: [`decode_image`] (zune-jpeg), the whole image.
//! - `crop_center_224` / `crop_top_224`: [`decode_and_crop`] of a 224×224 window in the
//!   centre / at the top-left corner (zune-jpeg's window decoding: stops after the window's
//!   last MCU row, no IDCT or colour conversion outside it).
//! - `full_then_crop_224`: [`decode_image`] and then copying out the centre window: what
//!   `decode_and_crop` would cost without stopping early.
//! - `scaled_224`: [`decode_jpeg_scaled`] with at least 224×224 (scale 1 for 256×256 — the
//!   jpeg-decoder full decode —, 1/2 for 1024×768).
//! - `scaled_half`: [`decode_jpeg_scaled`] at 1/2, `scaled_quarter` at 1/4, and
//!   `scaled_full_jpeg_decoder` at scale 1: jpeg-decoder's full decode, the baseline the
//!   scaled decodes save against (jpeg-decoder's entropy decoding, which scaling does not
//!   reduce, is slower than zune-jpeg's).
//!
//! ```sh
//! cargo bench -p sluice-image --bench decode
//! ```
//!
//! Measured on the 2-core development machine while other builds ran (load 5-6), as CPU time
//! per decode (best of 5 rounds; wall times of criterion runs were up to 2× noisier and
//! agree in ranking). Noise ±12 makes 29.7 KB / 325 KB JPEGs (3.3 bits per pixel), noise ±2
//! 9.3 KB / 62 KB:
//!
//! | image, noise | full (zune) | crop centre 224 | crop top 224 | jpeg-decoder full | 1/2 | 1/4 |
//! |---|---|---|---|---|---|---|
//! | 256×256, ±12 | 360 µs | 390 µs | 370 µs | 780 µs | 440 µs | 380 µs |
//! | 1024×768, ±12 | 5.5 ms | 4.0 ms | 2.5 ms | 6.9 ms | 6.4 ms | 6.2 ms |
//! | 256×256, ±2 | 190 µs | 190 µs | 180 µs | 320 µs | 200 µs | 130 µs |
//! | 1024×768, ±2 | 2.0 ms | 1.4 ms | 0.8 ms | 2.0 ms | 1.7 ms | 1.5 ms |
//!
//! - With crops that only stopped below the window (the table above), a 224 crop of a
//!   256×256 image saved nothing (it needs all but the last MCU row or two); of 1024×768 it
//!   saved 27-30 % (centre) to 55-60 % (top).
//! - Window decoding (2026-11-25, zune-jpeg patched to skip the IDCT and colour conversion
//!   outside the window; criterion medians on the AMD EPYC (Zen 5) VM, the two builds
//!   alternated twice, ±12 noise):
//!
//!   | image | full | crop centre 224, before → after | crop top 224, before → after |
//!   |---|---|---|---|
//!   | 256×256 | 318–328 µs | 305 → 253–262 µs (80 % of full) | 274–276 → 228–232 µs (72 %) |
//!   | 1024×768 | 4.31–4.36 ms | 3.01–3.04 → 2.11 ms (48 %) | 1.67–1.71 → 0.96 ms (22 %) |
//! - Scaled decoding saves little: entropy decoding, which DCT scaling does not reduce,
//!   dominates, and jpeg-decoder's is slower than zune-jpeg's, so even its 1/4 decode is no
//!   faster than zune-jpeg's full decode on noisy images (on smooth ones 1/4 is 25-30 %
//!   faster).

mod support;

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_image::{decode_and_crop, decode_image, decode_jpeg_scaled};

fn bench(c: &mut Criterion) {
    for (w, h) in [(256usize, 256usize), (1024, 768)] {
        let jpeg = support::synthetic_jpeg(w as u32, h as u32);
        let centre = ((h - 224) / 2, (w - 224) / 2, 224, 224);
        let full = decode_image(&jpeg, None).unwrap();
        let crop = decode_and_crop(&jpeg, centre, None).unwrap();
        assert_eq!(crop.shape(), &[224, 224, 3]);
        println!("{w}x{h}: {} JPEG bytes", jpeg.len());
        let mut g = c.benchmark_group(format!("decode_jpeg_{w}x{h}"));
        g.bench_function("full", |b| b.iter(|| decode_image(&jpeg, None).unwrap()));
        g.bench_function("crop_center_224", |b| {
            b.iter(|| decode_and_crop(&jpeg, centre, None).unwrap())
        });
        g.bench_function("crop_top_224", |b| {
            b.iter(|| decode_and_crop(&jpeg, (0, 0, 224, 224), None).unwrap())
        });
        g.bench_function("full_then_crop_224", |b| {
            b.iter(|| {
                let t = decode_image(&jpeg, None).unwrap();
                let px = t.as_u8().unwrap();
                let mut out = Vec::with_capacity(224 * 224 * 3);
                for r in centre.0..centre.0 + 224 {
                    let s = (r * w + centre.1) * 3;
                    out.extend_from_slice(&px[s..s + 224 * 3]);
                }
                out
            })
        });
        g.bench_function("scaled_224", |b| {
            b.iter(|| decode_jpeg_scaled(&jpeg, 224, 224).unwrap())
        });
        g.bench_function("scaled_half", |b| {
            b.iter(|| decode_jpeg_scaled(&jpeg, h / 2, w / 2).unwrap())
        });
        g.bench_function("scaled_full_jpeg_decoder", |b| {
            b.iter(|| decode_jpeg_scaled(&jpeg, h, w).unwrap())
        });
        g.bench_function("scaled_quarter", |b| {
            b.iter(|| decode_jpeg_scaled(&jpeg, h / 4, w / 4).unwrap())
        });
        g.finish();
        drop(full);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
