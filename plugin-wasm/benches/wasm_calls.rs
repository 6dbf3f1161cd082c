//! What WASM plugins cost, next to the same plugins built natively.
//!
//! - `load/*`: compiling the `gaussian_noise` guest (no cache) and loading it from the cache.
//! - `instantiate/noise`: a new instance for a worker: store, instance, `sluice_init`.
//! - `abi_call/*`: one call of the no-op plugin (the `faulty` test plugin unconfigured) on an
//!   empty batch and on one scalar element, native library and WASM module.
//! - `noise_64x224/*`: `gaussian_noise` on 64 224×224×3 images (`u8` and `f32`), native
//!   library and WASM module: the kernel-level WASM / native ratio (plus the wire format's
//!   copies, which both pay).
//! - `plugin_64x224/*`: `PluginStage::call` of 64 224×224×3 images (kernel + boundary) for
//!   both benchmark transforms (`gaussian_noise` σ 0.05, `gray_solarize` 0.2/0.2, as in the
//!   augment bench) on `u8` images (and `f32` for noise): native library (`native`: the lent
//!   path of ABI version 2; `nativewire`: the same library forced through the wire format,
//!   the version-1 path), core module (`wasm`), component (`component`: `map-transform`
//!   world).
//! - `languages_64x224/*`: the same call of `gray_solarize` (0.2/0.2, `u8`) as the examples
//!   in other languages, components built with their own toolchains (sluice-plugin-build,
//!   into `target/plugin-guests/`): C, Zig, JavaScript, Python (`examples/plugins/LANG-solarize`;
//!   `gaussian_noise` exists in Rust only). Flat sampling: the slow ones take a second per
//!   iteration.
//! - `abi_call/*_component`: the no-op `faulty` plugin as a `batch-transform` component.
//!
//! ```sh
//! cargo bench -p sluice-plugin-wasm --bench wasm_calls
//! # the per-language cost table's rows only (bench/plugin_costs.sh):
//! cargo bench -p sluice-plugin-wasm --bench wasm_calls -- 'plugin_64x224|languages_64x224'
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, SamplingMode, criterion_group, criterion_main};
use serde_json::json;
use sluice_core::prelude::*;
use sluice_core::rng::{ElementRng, StreamKey};
use sluice_guest_build as guests;
use sluice_plugin_build::{BuildOptions, Project};
use sluice_plugin_host::{Backend, CallPath, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_plugin_wasm::{WasmOptions, WasmPlugin};

fn wasm(package: &str) -> PathBuf {
    guests::build(&guests::workspace_dir(), package).unwrap()
}

fn component(package: &str) -> PathBuf {
    guests::build_component(&guests::workspace_dir(), package).unwrap()
}

/// The component of the example in `examples/plugins/<dir>`, built with its language's
/// toolchain into `target/plugin-guests/<dir>` (as `tests/languages.rs` does: rebuilt only
/// when a source is newer).
fn example(dir: &str) -> PathBuf {
    let workspace = guests::workspace_dir();
    let project = Project::open(&workspace.join("examples/plugins").join(dir)).unwrap();
    let options = BuildOptions {
        out_dir: Some(workspace.join("target/plugin-guests").join(dir)),
        force: false,
    };
    sluice_plugin_build::build(&project, &options)
        .unwrap_or_else(|e| panic!("building examples/plugins/{dir}: {e}"))
        .path
}

fn no_cache() -> WasmOptions {
    WasmOptions {
        cache_dir: Some(None),
        ..WasmOptions::default()
    }
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

fn bench(c: &mut Criterion) {
    let noise_wasm = wasm("sluice-example-noise");
    let faulty_wasm = wasm("sluice-test-plugin-faulty");

    let mut g = c.benchmark_group("load");
    g.sample_size(10);
    g.bench_function("noise_compile_uncached", |b| {
        b.iter(|| WasmPlugin::load_with(&noise_wasm, &no_cache()).unwrap())
    });
    let cache = tempfile::tempdir().unwrap();
    let cached = WasmOptions {
        cache_dir: Some(Some(cache.path().to_path_buf())),
        ..WasmOptions::default()
    };
    WasmPlugin::load_with(&noise_wasm, &cached).unwrap();
    g.bench_function("noise_from_cache", |b| {
        b.iter(|| WasmPlugin::load_with(&noise_wasm, &cached).unwrap())
    });
    g.finish();

    let noise = WasmPlugin::load_with(&noise_wasm, &no_cache()).unwrap();
    let mut g = c.benchmark_group("instantiate");
    g.bench_function("noise_wasm", |b| {
        b.iter(|| noise.instantiate(b"{}").unwrap())
    });
    let noise_native = NativePlugin::load(native("sluice_example_noise")).unwrap();
    g.bench_function("noise_native", |b| {
        b.iter(|| noise_native.instantiate(b"{}").unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("abi_call");
    let backends: [(&str, Arc<dyn Backend>); 2] = [
        (
            "native",
            NativePlugin::load(native("sluice_test_plugin_faulty")).unwrap(),
        ),
        (
            "wasm",
            WasmPlugin::load_with(&faulty_wasm, &no_cache()).unwrap(),
        ),
    ];
    let faulty_component = WasmPlugin::load_with(
        component("sluice-test-plugin-faulty-component"),
        &no_cache(),
    )
    .unwrap();
    let mut instance = faulty_component.instantiate(b"{}").unwrap();
    for n in [0usize, 1] {
        let elements: Vec<Element> = (0..n as i64)
            .map(|i| {
                Element::new(ElementId::new(0, i as u64)).with(
                    "value",
                    Tensor::new(&[], TensorData::I64(vec![i].into())).unwrap(),
                )
            })
            .collect();
        let inputs: Vec<Vec<(&str, &Tensor)>> = elements
            .iter()
            .map(|e| vec![("value", e.tensor("value").unwrap())])
            .collect();
        let seeds: Vec<u64> = (0..n as u64).collect();
        g.bench_function(format!("noop_{n}_elements_component"), |b| {
            b.iter(|| {
                instance
                    .call_features(&inputs, &seeds)
                    .unwrap()
                    .unwrap()
                    .len()
            })
        });
    }
    for (host, backend) in &backends {
        let mut instance = backend.instantiate(b"{}").unwrap();
        for n in [0usize, 1] {
            let (input, seeds) = scalar_batch(n);
            g.bench_function(format!("noop_{n}_elements_{host}"), |b| {
                b.iter(|| {
                    let mut len = 0;
                    instance
                        .call(&input, &seeds, &mut |out| len = out.len())
                        .unwrap();
                    len
                })
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("noise_64x224");
    g.sample_size(20);
    let config = json!({"sigma": 0.05});
    let stages = [
        ("native", PluginStage::new(noise_native, &config).unwrap()),
        ("wasm", PluginStage::new(noise, &config).unwrap()),
    ];
    for (pixels, u8_pixels) in [("u8", true), ("f32", false)] {
        let imgs = images(64, u8_pixels);
        for (host, stage) in &stages {
            g.bench_function(format!("{pixels}_{host}"), |b| {
                b.iter_batched(
                    || (imgs.clone(), rngs(64)),
                    |(e, mut r)| stage.call(e, &mut r).unwrap().len(),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("plugin_64x224");
    g.sample_size(20);
    for (plugin, package, config) in [
        ("noise", "sluice-example-noise", json!({"sigma": 0.05})),
        (
            "solarize",
            "sluice-example-solarize",
            json!({"p_gray": 0.2, "p_solarize": 0.2}),
        ),
    ] {
        let library: Arc<dyn Backend> =
            NativePlugin::load(native(&package.replace('-', "_"))).unwrap();
        let backends: [(&str, Arc<dyn Backend>, CallPath); 4] = [
            ("native", library.clone(), CallPath::Lent),
            ("nativewire", library, CallPath::Wire),
            (
                "wasm",
                WasmPlugin::load_with(wasm(package), &no_cache()).unwrap(),
                CallPath::Lent,
            ),
            (
                "component",
                WasmPlugin::load_with(component(&format!("{package}-component")), &no_cache())
                    .unwrap(),
                CallPath::Lent,
            ),
        ];
        let pixel_kinds: &[(&str, bool)] = if plugin == "noise" {
            &[("u8", true), ("f32", false)]
        } else {
            &[("u8", true)]
        };
        for &(pixels, u8_pixels) in pixel_kinds {
            let imgs = images(64, u8_pixels);
            for (host, backend, path) in &backends {
                let stage = PluginStage::with_path(backend.clone(), &config, *path).unwrap();
                g.bench_function(format!("{plugin}_{pixels}_{host}"), |b| {
                    b.iter_batched(
                        || (imgs.clone(), rngs(64)),
                        |(e, mut r)| stage.call(e, &mut r).unwrap().len(),
                        BatchSize::SmallInput,
                    )
                });
            }
        }
    }
    g.finish();

    let mut g = c.benchmark_group("languages_64x224");
    g.sample_size(10);
    g.sampling_mode(SamplingMode::Flat);
    let config = json!({"p_gray": 0.2, "p_solarize": 0.2});
    let imgs = images(64, true);
    for language in ["c", "zig", "js", "python"] {
        // Cached compiled code: the Python and JavaScript components (their languages'
        // runtimes) take a while to compile.
        let plugin = WasmPlugin::load_with(
            example(&format!("{language}-solarize")),
            &WasmOptions::default(),
        )
        .unwrap();
        let stage = PluginStage::new(plugin, &config).unwrap();
        g.bench_function(format!("solarize_u8_{language}"), |b| {
            b.iter_batched(
                || (imgs.clone(), rngs(64)),
                |(e, mut r)| stage.call(e, &mut r).unwrap().len(),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

fn native(crate_name: &str) -> PathBuf {
    sluice_plugin_host::testing::cdylib_beside_exe(crate_name).unwrap()
}
