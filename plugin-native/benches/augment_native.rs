//! The augment pipeline of `bench/tfdata_baseline.py` with one example augmentation as a
//! native plugin, through the wire (the version-1 path) or the lent path (ABI version 2),
//! end to end on the same files, in alternating rounds:
//!
//! interleave 4 -> parse -> image_ops(decode, random crop 224, random flip) -> PLUGIN on the
//! u8 crops (32 per call) -> image_ops(to [0, 1], brightness 0.1, contrast 0.75-1.5,
//! normalize) -> batch 64 -> prefetch
//!
//! ```sh
//! python bench/tfdata_baseline.py gen DIR
//! ROUNDS=7 cargo bench -p sluice-plugin-native --bench augment_native -- DIR none noise_wire noise_lent solarize_wire solarize_lent
//! ```
//!
//! Each run prints one JSON line (images/s); after the last round, the median and best of
//! each variant. `none` runs the same two image_ops stages without a plugin.
//! (`plugin-wasm/benches/augment_plugin.rs` has the WASM variants.)

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_plugin_host::{Backend, CallPath, PluginStage};
use sluice_plugin_native::NativePlugin;

fn stage(variant: &str) -> Option<Arc<PluginStage>> {
    let (plugin, path) = variant.split_once('_')?;
    let (crate_name, config) = match plugin {
        "noise" => ("sluice_example_noise", json!({"sigma": 0.05})),
        "solarize" => (
            "sluice_example_solarize",
            json!({"p_gray": 0.2, "p_solarize": 0.2}),
        ),
        other => panic!("unknown plugin {other}"),
    };
    let path = match path {
        "wire" => CallPath::Wire,
        "lent" => CallPath::Lent,
        other => panic!("unknown path {other} (wire or lent)"),
    };
    let backend: Arc<dyn Backend> = NativePlugin::load(native(crate_name)).unwrap();
    Some(PluginStage::with_path(backend, &config, path).unwrap())
}

fn pipeline(dir: &str, stage: Option<&Arc<PluginStage>>) -> Dataset {
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
    let middle = match stage {
        Some(stage) => stage.apply(
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
            "usage: augment_native DIR [none|noise_wire|noise_lent|solarize_wire|solarize_lent]..."
        );
        return;
    };
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for (v, variant) in variants.iter().enumerate() {
            let stage = stage(variant);
            let ds = pipeline(dir, stage.as_ref());
            let t = Instant::now();
            let mut images = 0;
            for batch in ds.iter().unwrap() {
                images += batch.unwrap().tensor("label").unwrap().len();
            }
            let secs = t.elapsed().as_secs_f64();
            let rate = images as f64 / secs;
            rates[v].push(rate);
            let calls = stage.map(|s| s.calls()).unwrap_or_default();
            println!(
                "{{\"system\": \"sluice\", \"pipeline\": \"augment+native_{variant}\", \"round\": {round}, \"records\": {images}, \"seconds\": {secs:.4}, \"records_per_s\": {rate:.1}, \"lent_calls\": {}, \"wire_calls\": {}}}",
                calls.lent, calls.wire
            );
        }
    }
    for (variant, r) in variants.iter().zip(&mut rates) {
        r.sort_by(f64::total_cmp);
        println!(
            "{variant}: median {:.0} images/s, best {:.0}, runs {:?}",
            r[r.len() / 2],
            r[r.len() - 1],
            r.iter().map(|x| x.round() as u64).collect::<Vec<_>>()
        );
    }
}

fn native(crate_name: &str) -> PathBuf {
    sluice_plugin_host::testing::cdylib_beside_exe(crate_name).unwrap()
}
