//! The augment pipeline of `bench/tfdata_baseline.py` with one example
//! augmentation added as a plugin, native or WASM, end to end on the same files:
//!
//! interleave 4 -> parse -> image_ops(decode, random crop 224, random flip) -> PLUGIN on the
//! u8 crops -> image_ops(to [0, 1], brightness 0.1, contrast 0.75-1.5, normalize) -> batch 64
//! -> prefetch
//!
//! ```sh
//! python bench/tfdata_baseline.py gen DIR
//! cargo bench -p sluice-plugin-wasm --bench augment_plugin -- DIR none native_noise wasm_noise component_noise native_solarize wasm_solarize component_solarize
//! ```
//!
//! Each variant prints one JSON line (images/s). `none` runs the same two image_ops stages
//! without a plugin. Hosts: `native` (the `.so`), `wasm` (the core module, `sdk/ABI.md`),
//! `component` (the same plugin as a component of the `map-transform` world, `sdk/WIT.md`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_guest_build as guests;
use sluice_plugin_host::{Backend, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_plugin_wasm::{WasmOptions, WasmPlugin};

fn backend(variant: &str) -> Option<(Arc<dyn Backend>, serde_json::Value)> {
    let (host, plugin) = variant.split_once('_')?;
    let (package, crate_name, config) = match plugin {
        "noise" => (
            "sluice-example-noise",
            "sluice_example_noise",
            json!({"sigma": 0.05}),
        ),
        "solarize" => (
            "sluice-example-solarize",
            "sluice_example_solarize",
            json!({"p_gray": 0.2, "p_solarize": 0.2}),
        ),
        other => panic!("unknown plugin {other}"),
    };
    let backend: Arc<dyn Backend> = match host {
        "native" => NativePlugin::load(native(crate_name)).unwrap(),
        "wasm" => {
            let path = guests::build(&guests::workspace_dir(), package).unwrap();
            WasmPlugin::load_with(path, &WasmOptions::default()).unwrap()
        }
        "component" => {
            let path =
                guests::build_component(&guests::workspace_dir(), &format!("{package}-component"))
                    .unwrap();
            WasmPlugin::load_with(path, &WasmOptions::default()).unwrap()
        }
        other => panic!("unknown host {other}"),
    };
    Some((backend, config))
}

fn pipeline(dir: &str, variant: &str) -> Dataset {
    let head = Dataset::tfrecord([format!("{dir}/train.tfrecord-*")])
        .expect("bench data (run tfdata_baseline.py gen DIR first)")
        .interleave(InterleaveSpec::new(4).num_parallel(NumParallel::Auto))
        .parse_example(ParseExampleSpec::new([
            ("image", FeatureSpec::scalar(FeatureType::String)),
            ("label", FeatureSpec::scalar(FeatureType::Int64)),
        ]))
        .image_ops(
            ImageOpsSpec::new(vec![
                ImageOp::Decode { channels: Some(3) },
                ImageOp::RandomCrop {
                    height: 224,
                    width: 224,
                },
                ImageOp::RandomFlipLeftRight { p: 0.5 },
            ])
            .num_parallel(NumParallel::Auto),
        );
    let middle = match backend(variant) {
        Some((backend, config)) => PluginStage::new(backend, &config).unwrap().apply(
            &head,
            MapChunksSpec::new(32).num_parallel(NumParallel::Auto),
        ),
        None => head,
    };
    middle
        .image_ops(
            ImageOpsSpec::new(vec![
                ImageOp::ToUnitF32,
                ImageOp::RandomBrightness { max_delta: 0.1 },
                ImageOp::RandomContrast {
                    lower: 0.75,
                    upper: 1.5,
                },
                ImageOp::Normalize {
                    mean: vec![0.5; 3],
                    std: vec![0.25; 3],
                    scale: 1.0,
                },
            ])
            .num_parallel(NumParallel::Auto),
        )
        .batch(64)
        .prefetch(BufferSize::Auto)
        .with_options(Options::default().with_seed(1))
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some((dir, variants)) = args.split_first() else {
        eprintln!(
            "usage: augment_plugin DIR [none|{{native,wasm,component}}_{{noise,solarize}}]..."
        );
        return;
    };
    for variant in variants {
        let ds = pipeline(dir, variant);
        let cpu = cpu_seconds();
        let t = Instant::now();
        let mut images = 0;
        for batch in ds.iter().unwrap() {
            images += batch.unwrap().tensor("label").unwrap().len();
        }
        let secs = t.elapsed().as_secs_f64();
        // CPU time of the whole process (every thread) per image: steadier than the wall
        // clock when other work shares the machine.
        let cpu_ms = match (cpu, cpu_seconds()) {
            (Some(a), Some(b)) => format!("{:.4}", (b - a) * 1e3 / images as f64),
            _ => "null".to_string(),
        };
        println!(
            "{{\"system\": \"sluice\", \"pipeline\": \"augment+{variant}\", \"records\": {images}, \"seconds\": {secs:.4}, \"records_per_s\": {:.1}, \"cpu_ms_per_record\": {cpu_ms}}}",
            images as f64 / secs
        );
        if let Some(stats) = ds.stats() {
            eprintln!("{}", stats.report());
        }
    }
}

/// User + system CPU seconds of this process so far (Linux: `/proc/self/stat`, in clock
/// ticks of 1/100 s), `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn native(crate_name: &str) -> PathBuf {
    sluice_plugin_host::testing::cdylib_beside_exe(crate_name).unwrap()
}
