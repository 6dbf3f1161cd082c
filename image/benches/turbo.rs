//! Criterion bench: zune-jpeg (what every op decodes with, with Sluice's window decoding)
//! against libjpeg-turbo (the system's libturbojpeg 2.x through the `turbojpeg` crate,
//! [`sluice_image::turbo`]), per image size:
//!
//! - `zune_full` / `turbo_full`: the whole image, RGB.
//! - `zune_crop_224`: [`decode_and_crop`] of the centre 224×224 window (zune-jpeg decodes
//!   only what the window needs); `turbo_crop_224`: the whole image decoded, the window
//!   copied out (the TurboJPEG 2.x API has no partial decode).
//! - `turbo_scaled_{2,4,8}`: DCT-scaled decoding at 1/2, 1/4, 1/8;
//!   `jpeg_decoder_scaled_{2,4}`: the same with jpeg-decoder ([`decode_jpeg_scaled`], the
//!   DCT scaling Sluice has without the feature).
//!
//! Images: `bench_256` — the first 32 JPEGs of `$SLUICE_BENCH_DATA/train.tfrecord-00000-of-00016`
//! (default `/work/bench-data`, the 256×256 TF-written images of `tfdata_baseline.py gen`;
//! skipped when absent), each iteration decoding all 32; `synthetic_256x256` and
//! `synthetic_1024x768`: photo-like JPEGs (a gradient with ripples and ±12 noise, quality 90,
//! 4:2:0, as `benches/decode.rs`). Before timing it prints how far turbo's pixels are from
//! zune-jpeg's (the two decoders round differently) and how far a 1/2 DCT-scaled decode is
//! from a full decode averaged over 2×2 blocks.
//!
//! ```sh
//! apt-get install libturbojpeg0-dev
//! cargo bench -p sluice-image --features turbojpeg --bench turbo
//! ```
//!
//! Measured 2026-11-26 on the 2-core development machine (AMD EPYC VM, libjpeg-turbo 2.1.5),
//! criterion medians, one run with the bench's scheduling group at the highest priority
//! while other builds ran (so ±10 %); per image:
//!
//! | images | zune full | turbo full | zune crop 224 (window) | turbo crop 224 (full + copy) | turbo 1/2 | 1/4 | 1/8 | jpeg-decoder 1/2 | 1/4 |
//! |---|---|---|---|---|---|---|---|---|---|
//! | bench 256×256 (TF, 19 KB) | 237 µs | 227 µs | 225 µs | 233 µs | 178 µs | 161 µs | 142 µs | 316 µs | 267 µs |
//! | synthetic 256×256 (30 KB) | 312 µs | 289 µs | 255 µs | 289 µs | 199 µs | 186 µs | 150 µs | 443 µs | 368 µs |
//! | synthetic 1024×768 (325 KB) | 4.37 ms | 3.88 ms | 2.09 ms | 3.85 ms | 3.30 ms | 3.09 ms | 2.85 ms | 4.91 ms | 4.28 ms |
//!
//! - Whole images: libjpeg-turbo is 4-11 % faster than zune-jpeg. Crops (what `augment` and
//!   `eval` decode): zune-jpeg's window decoding wins, by 3 % on the bench images, 12 % on the
//!   noisier 256×256 and 1.8× on 1024×768 (TurboJPEG 2.x cannot decode part of an image).
//! - Pixels differ: turbo vs zune mean |diff| 0.34 levels (max 4) on the bench images, 0.01
//!   (max 3) on the synthetic ones. A 1/2 DCT-scaled decode vs the full decode averaged over
//!   2×2 blocks: mean |diff| 0.46-0.89 (max 85 at sharp edges of the bench images).

mod support;

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_image::{decode_and_crop, decode_image, decode_jpeg_scaled, turbo};
use sluice_proto::example::feature::Kind;
use sluice_proto::tfrecord::{ReaderOptions, TfRecordReader};
use sluice_proto::{Example, TfMessage};

/// The first `n` JPEGs of the bench data's first shard, if it is there.
fn bench_jpegs(n: usize) -> Option<Vec<Vec<u8>>> {
    let dir = std::env::var("SLUICE_BENCH_DATA").unwrap_or_else(|_| "/work/bench-data".into());
    let file = format!("{dir}/train.tfrecord-00000-of-00016");
    let reader = TfRecordReader::open(&file, ReaderOptions::default()).ok()?;
    let jpegs = reader
        .take(n)
        .map(|record| {
            let example = Example::from_bytes(&record.unwrap().data).unwrap();
            match &example.features.unwrap().feature["image"].kind {
                Some(Kind::BytesList(b)) => b.value[0].to_vec(),
                other => panic!("image: {other:?}"),
            }
        })
        .collect();
    Some(jpegs)
}

/// Mean and largest absolute difference of two pixel buffers.
fn diff(a: &[u8], b: &[u8]) -> (f64, u8) {
    assert_eq!(a.len(), b.len());
    let (mut sum, mut max) = (0u64, 0u8);
    for (&x, &y) in a.iter().zip(b) {
        let d = x.abs_diff(y);
        sum += u64::from(d);
        max = max.max(d);
    }
    (sum as f64 / a.len() as f64, max)
}

/// The full-size RGB `px` (`h` × `w`) averaged over 2×2 blocks (rounded), `h/2` × `w/2`.
fn box_half(px: &[u8], h: usize, w: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(h / 2 * (w / 2) * 3);
    for y in 0..h / 2 {
        for x in 0..w / 2 {
            for c in 0..3 {
                let at = |yy: usize, xx: usize| u32::from(px[(yy * w + xx) * 3 + c]);
                let s = at(2 * y, 2 * x)
                    + at(2 * y, 2 * x + 1)
                    + at(2 * y + 1, 2 * x)
                    + at(2 * y + 1, 2 * x + 1);
                out.push(((s + 2) / 4) as u8);
            }
        }
    }
    out
}

/// Prints how turbo's decodes differ from zune-jpeg's for `jpegs`.
fn print_differences(name: &str, jpegs: &[Vec<u8>]) {
    let (mut full, mut half, mut full_max, mut half_max) = (0.0, 0.0, 0u8, 0u8);
    for jpeg in jpegs {
        let z = decode_image(jpeg, Some(3)).unwrap();
        let t = turbo::decode_rgb(jpeg).unwrap();
        assert_eq!(z.shape(), t.shape());
        let (mean, max) = diff(z.as_u8().unwrap(), t.as_u8().unwrap());
        full += mean;
        full_max = full_max.max(max);
        let (h, w) = (z.shape()[0], z.shape()[1]);
        let s = turbo::decode_rgb_scaled(jpeg, 2).unwrap();
        if h % 2 == 0 && w % 2 == 0 {
            let (mean, max) = diff(&box_half(z.as_u8().unwrap(), h, w), s.as_u8().unwrap());
            half += mean;
            half_max = half_max.max(max);
        }
    }
    let n = jpegs.len() as f64;
    println!(
        "{name}: {} JPEG(s), {} bytes each on average; turbo full vs zune full: mean |diff| {:.3}, \
         max {full_max}; turbo 1/2 vs zune full 2x2-averaged: mean |diff| {:.3}, max {half_max}",
        jpegs.len(),
        jpegs.iter().map(Vec::len).sum::<usize>() / jpegs.len(),
        full / n,
        half / n,
    );
}

fn bench_set(c: &mut Criterion, name: &str, jpegs: &[Vec<u8>]) {
    print_differences(name, jpegs);
    let z = decode_image(&jpegs[0], Some(3)).unwrap();
    let (h, w) = (z.shape()[0], z.shape()[1]);
    let centre = ((h - 224) / 2, (w - 224) / 2, 224, 224);
    let mut g = c.benchmark_group(format!("jpeg_{name}"));
    let each = |f: &dyn Fn(&[u8]) -> usize| jpegs.iter().map(|j| f(j)).sum::<usize>();
    g.bench_function("zune_full", |b| {
        b.iter(|| each(&|j| decode_image(j, Some(3)).unwrap().len()))
    });
    g.bench_function("turbo_full", |b| {
        b.iter(|| each(&|j| turbo::decode_rgb(j).unwrap().len()))
    });
    g.bench_function("zune_crop_224", |b| {
        b.iter(|| each(&|j| decode_and_crop(j, centre, Some(3)).unwrap().len()))
    });
    g.bench_function("turbo_crop_224", |b| {
        b.iter(|| each(&|j| turbo::decode_crop_rgb(j, centre).unwrap().len()))
    });
    for denom in [2, 4, 8] {
        g.bench_function(format!("turbo_scaled_{denom}"), |b| {
            b.iter(|| each(&|j| turbo::decode_rgb_scaled(j, denom).unwrap().len()))
        });
    }
    for denom in [2, 4] {
        g.bench_function(format!("jpeg_decoder_scaled_{denom}"), |b| {
            b.iter(|| each(&|j| decode_jpeg_scaled(j, h / denom, w / denom).unwrap().len()))
        });
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    if let Some(jpegs) = bench_jpegs(32) {
        bench_set(c, "bench_256_x32", &jpegs);
    } else {
        println!("no bench data: skipping bench_256_x32 (set SLUICE_BENCH_DATA)");
    }
    for (w, h) in [(256u32, 256u32), (1024, 768)] {
        bench_set(
            c,
            &format!("synthetic_{w}x{h}"),
            &[support::synthetic_jpeg(w, h)],
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
