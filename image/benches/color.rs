//! Criterion bench of the colour ops on one 224×224×3 image (ImageNet training size).
//! Throughput is counted in images, so criterion's `thrpt` is images per second on one
//! core.
//!
//! - `f32/brightness_contrast_normalize`: the usual float augmentation chain
//!   (`adjust_brightness`, `adjust_contrast`, `normalize` with ImageNet's mean and std).
//! - `f32/brightness_contrast_fused_normalize`: the same with `adjust_brightness_contrast`
//!   (one pass for the first two ops, bit-identical results).
//! - `u8/to_unit_brightness_contrast_normalize`: the whole tail from decoded pixels as
//!   separate ops; `u8/point_chain_*`: the same as one `PointChain` pass (bit-identical),
//!   into a new tensor, into an existing buffer, or into the next slot of a 64-image batch
//!   buffer (as `image_ops` writes a batch: 38 MB, in no cache, its values starting at a
//!   cache line, or 16 bytes after one; `SLUICE_STREAM_STORES=0` or `1` turns streaming
//!   stores off or on);
//!   `u8/point_chain_without_contrast_into_a_buffer`: the same without the contrast, whose
//!   per-channel means (summed in TensorFlow's order) are most of the pass's cost.
//! - `f32/*`, `u8/*`: each op alone, on an `f32` image in `[0, 1]` or a `u8` image.
//!
//! ```sh
//! cargo bench -p sluice-image --bench color
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use sluice_image::color::{
    adjust_brightness, adjust_brightness_contrast, adjust_contrast, adjust_hue, adjust_saturation,
    normalize, to_unit_f32,
};
use sluice_image::{PointChain, PointOp};
use sluice_tensor::{Tensor, TensorData};

const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

fn bench(c: &mut Criterion) {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
    let pixels: Vec<u8> = (0..224 * 224 * 3).map(|_| rng.random()).collect();
    let u8_img = Tensor::new(&[224, 224, 3], TensorData::U8(pixels.into())).unwrap();
    let f32_img = to_unit_f32(&u8_img).unwrap();

    let mut g = c.benchmark_group("color");
    g.throughput(Throughput::Elements(1));
    g.bench_function("f32/brightness_contrast_normalize", |b| {
        b.iter(|| {
            let x = adjust_brightness(black_box(&f32_img), 0.1).unwrap();
            let x = adjust_contrast(&x, 1.2).unwrap();
            normalize(&x, &MEAN, &STD, 1.0).unwrap()
        })
    });
    g.bench_function("f32/brightness_contrast_fused_normalize", |b| {
        b.iter(|| {
            let x = adjust_brightness_contrast(black_box(&f32_img), 0.1, 1.2).unwrap();
            normalize(&x, &MEAN, &STD, 1.0).unwrap()
        })
    });
    for (name, img) in [("f32", &f32_img), ("u8", &u8_img)] {
        g.bench_function(format!("{name}/brightness"), |b| {
            b.iter(|| adjust_brightness(black_box(img), 0.1).unwrap())
        });
        g.bench_function(format!("{name}/contrast"), |b| {
            b.iter(|| adjust_contrast(black_box(img), 1.2).unwrap())
        });
        g.bench_function(format!("{name}/normalize"), |b| {
            b.iter(|| normalize(black_box(img), &MEAN, &STD, 1.0 / 255.0).unwrap())
        });
        g.bench_function(format!("{name}/saturation"), |b| {
            b.iter(|| adjust_saturation(black_box(img), 1.3).unwrap())
        });
        g.bench_function(format!("{name}/hue"), |b| {
            b.iter(|| adjust_hue(black_box(img), 0.1).unwrap())
        });
    }
    // The whole tail as separate ops, and as one `PointChain` pass (bit-identical), from u8.
    g.bench_function("u8/to_unit_brightness_contrast_normalize", |b| {
        b.iter(|| {
            let x = to_unit_f32(black_box(&u8_img)).unwrap();
            let x = adjust_brightness_contrast(&x, 0.1, 1.2).unwrap();
            normalize(&x, &MEAN, &STD, 1.0).unwrap()
        })
    });
    let chain = PointChain::to_unit(vec![
        PointOp::Brightness(0.1),
        PointOp::Contrast(1.2),
        PointOp::Normalize {
            mean: MEAN.to_vec(),
            std: STD.to_vec(),
            scale: 1.0,
        },
    ]);
    g.bench_function(
        "u8/point_chain_to_unit_brightness_contrast_normalize",
        |b| b.iter(|| chain.apply(black_box(&u8_img)).unwrap()),
    );
    let mut out = vec![0.0f32; u8_img.len()];
    g.bench_function("u8/point_chain_into_a_buffer", |b| {
        b.iter(|| chain.apply_into(black_box(&u8_img), &mut out).unwrap())
    });
    // As `image_ops` writes a batch of 64: each image into the next slot of a 38 MB buffer
    // that no cache holds (streaming stores where they pay: `SLUICE_STREAM_STORES`), whose
    // values start at a cache line as `image_ops`'s do (blocks streamed from the registers),
    // or 16 bytes after one (computed in L1, then streamed).
    let plane = u8_img.len();
    let mut batch = vec![0.0f32; 64 * plane + 32];
    let aligned = batch.as_ptr().align_offset(64);
    for (name, start) in [("", aligned), ("_16_bytes_off_a_line", aligned + 4)] {
        let mut slot = 0;
        g.bench_function(format!("u8/point_chain_into_a_batch_buffer{name}"), |b| {
            b.iter(|| {
                let at = start + slot * plane;
                slot = (slot + 1) % 64;
                chain
                    .apply_into_batch_row(black_box(&u8_img), &mut batch[at..at + plane])
                    .unwrap()
            })
        });
    }
    let no_contrast = PointChain::to_unit(vec![
        PointOp::Brightness(0.1),
        PointOp::Normalize {
            mean: MEAN.to_vec(),
            std: STD.to_vec(),
            scale: 1.0,
        },
    ]);
    g.bench_function("u8/point_chain_without_contrast_into_a_buffer", |b| {
        b.iter(|| {
            no_contrast
                .apply_into(black_box(&u8_img), &mut out)
                .unwrap()
        })
    });
    g.bench_function("u8/to_unit_f32", |b| {
        b.iter(|| to_unit_f32(black_box(&u8_img)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
