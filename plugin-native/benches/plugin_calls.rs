//! What a plugin call costs.
//!
//! - `abi_call/*`: one `sluice_process` call of a no-op plugin (the `faulty` test plugin
//!   unconfigured: it passes every element through), through the native instance, on a
//!   batch buffer encoded once: the per-call price of the ABI (FFI, the SDK's decoding and
//!   re-encoding, the output hand-back), for an empty batch and one scalar element.
//! - `stage_call/*`: `PluginStage::call` on 64 scalar elements, the host's encoding and
//!   decoding included.
//! - `noise_64x224/*`: the `gaussian_noise` example on 64 224×224×3 images (`f32` and
//!   `u8`): as a native plugin through the wire (`native_wire_*`: the version-1 path, four
//!   copies per image) and through the lent path (`native_lent_*`: ABI version 2, no copy),
//!   as the same crate in-process through the wire format, and (`f32`) the same code called
//!   directly on the SDK elements (no wire format, no host: the kernel alone).
//! - `solarize_64x224/*`: the `gray_solarize` example (p_gray 0.2, p_solarize 0.2, as in the
//!   augment pipeline) on the same images, native, wire against lent.
//!
//! ```sh
//! cargo bench -p sluice-plugin-native --bench plugin_calls
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use sluice_core::prelude::*;
use sluice_core::rng::{ElementRng, StreamKey};
use sluice_example_noise::GaussianNoise;
use sluice_plugin_host::{Backend, CallPath, InProcess, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_sdk::{Config, Plugin, Rng};

fn scalar_batch(n: usize) -> (Vec<u8>, Vec<u64>) {
    let elements: Vec<sluice_sdk::Element> = (0..n)
        .map(|i| sluice_sdk::Element {
            tensors: vec![
                sluice_sdk::Tensor::new("value", vec![], sluice_sdk::Data::I64(vec![i as i64]))
                    .unwrap(),
            ],
        })
        .collect();
    (
        sluice_sdk::wire::encode_batch(&elements),
        (0..n as u64).collect(),
    )
}

fn rngs(n: usize) -> Vec<ElementRng> {
    let key = StreamKey {
        seed: 1,
        epoch: 0,
        stage: 0,
    };
    (0..n as u64)
        .map(|i| key.element_rng(ElementId::new(0, i)))
        .collect()
}

fn images(n: usize, u8_pixels: bool) -> Vec<Element> {
    (0..n)
        .map(|i| {
            let data = if u8_pixels {
                TensorData::U8(
                    (0..224 * 224 * 3)
                        .map(|j| ((i + j) % 255) as u8)
                        .collect::<Vec<_>>()
                        .into(),
                )
            } else {
                TensorData::F32(
                    (0..224 * 224 * 3)
                        .map(|j| ((i + j) % 255) as f32 / 255.0)
                        .collect::<Vec<_>>()
                        .into(),
                )
            };
            Element::new(ElementId::new(0, i as u64))
                .with("image", Tensor::new(&[224, 224, 3], data).unwrap())
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let faulty = NativePlugin::load(library("sluice_test_plugin_faulty")).unwrap();
    let mut instance = faulty.instantiate(b"{}").unwrap();
    let mut g = c.benchmark_group("abi_call");
    for n in [0usize, 1] {
        let (input, seeds) = scalar_batch(n);
        g.bench_function(format!("noop_{n}_elements"), |b| {
            b.iter(|| {
                let mut len = 0;
                instance
                    .call(&input, &seeds, &mut |out| len = out.len())
                    .unwrap();
                len
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("stage_call");
    g.throughput(Throughput::Elements(64));
    let stage = PluginStage::new(faulty, &json!({})).unwrap();
    let elements: Vec<Element> = Dataset::range(0, 64).collect().unwrap();
    g.bench_function("noop_64_scalars", |b| {
        b.iter_batched(
            || (elements.clone(), rngs(64)),
            |(e, mut r)| stage.call(e, &mut r).unwrap().len(),
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("noise_64x224");
    g.throughput(Throughput::Elements(64));
    g.sample_size(20);
    let config = json!({"sigma": 0.05});
    let noise = NativePlugin::load(library("sluice_example_noise")).unwrap();
    let native_wire = PluginStage::with_path(noise.clone(), &config, CallPath::Wire).unwrap();
    let native_lent = PluginStage::with_path(noise, &config, CallPath::Lent).unwrap();
    let reference: Arc<dyn Backend> = InProcess::<GaussianNoise>::new();
    let in_process = PluginStage::with_path(reference, &config, CallPath::Wire).unwrap();
    for (pixels, u8_pixels) in [("f32", false), ("u8", true)] {
        let imgs = images(64, u8_pixels);
        for (name, stage) in [
            ("native_wire", &native_wire),
            ("native_lent", &native_lent),
            ("in_process_wire", &in_process),
        ] {
            g.bench_function(format!("{name}_{pixels}"), |b| {
                b.iter_batched(
                    || (imgs.clone(), rngs(64)),
                    |(e, mut r)| stage.call(e, &mut r).unwrap().len(),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    assert!(native_lent.calls().lent > 0 && native_lent.calls().wire == 0);
    let mut direct =
        GaussianNoise::new(&Config::from_bytes(br#"{"sigma": 0.05}"#).unwrap()).unwrap();
    let sdk_images: Vec<sluice_sdk::Element> = (0..64)
        .map(|i| sluice_sdk::Element {
            tensors: vec![
                sluice_sdk::Tensor::new(
                    "image",
                    vec![224, 224, 3],
                    sluice_sdk::Data::F32(
                        (0..224 * 224 * 3)
                            .map(|j| ((i + j) % 255) as f32 / 255.0)
                            .collect(),
                    ),
                )
                .unwrap(),
            ],
        })
        .collect();
    g.bench_function("direct_kernel_f32", |b| {
        b.iter_batched(
            || sdk_images.clone(),
            |e| {
                e.into_iter()
                    .enumerate()
                    .map(|(i, e)| {
                        direct
                            .map(e, &mut Rng::new(i as u64))
                            .unwrap()
                            .tensors
                            .len()
                    })
                    .sum::<usize>()
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("solarize_64x224");
    g.throughput(Throughput::Elements(64));
    g.sample_size(20);
    let config = json!({"p_gray": 0.2, "p_solarize": 0.2});
    let solarize = NativePlugin::load(library("sluice_example_solarize")).unwrap();
    let native_wire = PluginStage::with_path(solarize.clone(), &config, CallPath::Wire).unwrap();
    let native_lent = PluginStage::with_path(solarize, &config, CallPath::Lent).unwrap();
    for (pixels, u8_pixels) in [("f32", false), ("u8", true)] {
        let imgs = images(64, u8_pixels);
        for (name, stage) in [("native_wire", &native_wire), ("native_lent", &native_lent)] {
            g.bench_function(format!("{name}_{pixels}"), |b| {
                b.iter_batched(
                    || (imgs.clone(), rngs(64)),
                    |(e, mut r)| stage.call(e, &mut r).unwrap().len(),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

fn library(crate_name: &str) -> PathBuf {
    sluice_plugin_host::testing::cdylib_beside_exe(crate_name).unwrap()
}
