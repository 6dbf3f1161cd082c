//! Criterion benches of the geometry ops on one 256×256×3 image (the usual ImageNet-style
//! augmentation sizes): random crop 224 + random flip, resizes 256 → 224, random resized
//! crop, rotation, reflect padding, cutout, HWC → CHW, and a batch of 32 through
//! `map_batch`.
//!
//! `fir_*` run fast_image_resize 6 (`ResizeAlg::Interpolation(Bilinear)`, its
//! non-antialiased bilinear, which matches TF's sampling positions) on the same image, for
//! comparison with Sluice's own bilinear resize: fir's `u8` path rounds its output to `u8`
//! while TF (and Sluice) return `f32`, so only `fir_f32x3` computes the same values.
//!
//! ```sh
//! cargo bench -p sluice-image --bench geometry
//! ```

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use fast_image_resize as fr;
use rand::SeedableRng;
use sluice_image::geometry::*;
use sluice_tensor::{Tensor, TensorData};

const S: usize = 256;

/// SplitMix64's finalizer (`sluice_core::rng::mix`): the same pixels as before.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fresh generator per image, as a pipeline's per-element RNG (PCG-64 MCG).
fn element_rng(i: u64) -> rand_pcg::Pcg64Mcg {
    rand_pcg::Pcg64Mcg::seed_from_u64(i)
}

fn image_u8() -> Tensor {
    let v: Vec<u8> = (0..S * S * 3)
        .map(|i| (mix(i as u64) % 256) as u8)
        .collect();
    Tensor::new(&[S, S, 3], TensorData::U8(Bytes::from(v))).unwrap()
}

fn bench(c: &mut Criterion) {
    let img = image_u8();
    let imgf = resize(&img, S, S, ResizeMethod::Bilinear).unwrap();
    let mut g = c.benchmark_group("geometry_256x256x3");
    g.sample_size(50);
    g.measurement_time(std::time::Duration::from_secs(3));

    let mut i = 0u64;
    g.bench_function("u8_random_crop224_flip", |b| {
        b.iter(|| {
            i += 1;
            let mut r = element_rng(i);
            let t = random_crop(&img, 224, 224, &mut r).unwrap();
            random_flip_left_right(&t, 0.5, &mut r).unwrap()
        })
    });
    g.bench_function("u8_crop224", |b| {
        b.iter(|| crop(&img, 16, 16, 224, 224).unwrap())
    });
    g.bench_function("u8_flip_left_right", |b| {
        b.iter(|| flip_left_right(&img).unwrap())
    });
    g.bench_function("u8_flip_up_down", |b| {
        b.iter(|| flip_up_down(&img).unwrap())
    });
    g.bench_function("f32_flip_left_right", |b| {
        b.iter(|| flip_left_right(&imgf).unwrap())
    });
    for (name, m) in [
        ("nearest", ResizeMethod::Nearest),
        ("bilinear", ResizeMethod::Bilinear),
        ("area", ResizeMethod::Area),
    ] {
        g.bench_function(format!("u8_resize_{name}_224"), |b| {
            b.iter(|| resize(&img, 224, 224, m).unwrap())
        });
    }
    g.bench_function("f32_resize_bilinear_224", |b| {
        b.iter(|| resize(&imgf, 224, 224, ResizeMethod::Bilinear).unwrap())
    });
    g.bench_function("u8_resize_bilinear_upscale_320", |b| {
        b.iter(|| resize(&img, 320, 320, ResizeMethod::Bilinear).unwrap())
    });

    // fast_image_resize for comparison.
    let opts =
        fr::ResizeOptions::new().resize_alg(fr::ResizeAlg::Interpolation(fr::FilterType::Bilinear));
    let src = fr::images::Image::from_vec_u8(
        S as u32,
        S as u32,
        img.as_u8().unwrap().to_vec(),
        fr::PixelType::U8x3,
    )
    .unwrap();
    let mut resizer = fr::Resizer::new();
    g.bench_function("fir_u8x3_bilinear_224", |b| {
        b.iter(|| {
            let mut dst = fr::images::Image::new(224, 224, fr::PixelType::U8x3);
            resizer.resize(&src, &mut dst, &opts).unwrap();
            dst
        })
    });
    let mut srcf = fr::images::Image::new(S as u32, S as u32, fr::PixelType::F32x3);
    for (d, v) in srcf
        .buffer_mut()
        .chunks_exact_mut(4)
        .zip(imgf.as_f32().unwrap())
    {
        d.copy_from_slice(&v.to_ne_bytes());
    }
    g.bench_function("fir_f32x3_bilinear_224", |b| {
        b.iter(|| {
            let mut dst = fr::images::Image::new(224, 224, fr::PixelType::F32x3);
            resizer.resize(&srcf, &mut dst, &opts).unwrap();
            dst
        })
    });

    let mut i = 0u64;
    g.bench_function("u8_random_resized_crop_224", |b| {
        b.iter(|| {
            i += 1;
            let mut r = element_rng(i);
            random_resized_crop(&img, 224, 224, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut r).unwrap()
        })
    });
    g.bench_function("u8_rotate_17deg", |b| {
        b.iter(|| rotate(&img, 17.0, 0.0).unwrap())
    });
    g.bench_function("u8_pad_reflect_16", |b| {
        b.iter(|| pad(&img, 16, PadMode::Reflect).unwrap())
    });
    g.bench_function("u8_cutout_64", |b| {
        b.iter(|| cutout(&img, 64, 0.0, &mut element_rng(0)).unwrap())
    });
    g.bench_function("u8_to_chw", |b| b.iter(|| to_chw(&img).unwrap()));
    g.bench_function("f32_to_chw", |b| b.iter(|| to_chw(&imgf).unwrap()));

    let rows: Vec<Tensor> = (0..32).map(|_| img.clone()).collect();
    let batch = Tensor::stack(&rows.iter().collect::<Vec<_>>()).unwrap();
    g.bench_function("batch32_u8_map_random_crop224_flip", |b| {
        b.iter(|| {
            map_batch(&batch, |t, i| {
                let mut r = element_rng(i as u64);
                let t = random_crop(t, 224, 224, &mut r)?;
                random_flip_left_right(&t, 0.5, &mut r)
            })
            .unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
