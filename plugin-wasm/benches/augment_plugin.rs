//! The augment pipeline of `bench/tfdata_baseline.py` with one example
//! augmentation added as a plugin, native or WASM, end to end on the same files:
//!
//! interleave 4 -> parse -> image_ops(decode, random crop 224, random flip) -> PLUGIN on the
//! u8 crops (32 per call) -> image_ops(to [0, 1], brightness 0.1, contrast 0.75-1.5,
//! normalize) -> batch 64 -> prefetch
//!
//! ```sh
//! python bench/tfdata_baseline.py gen DIR
//! ROUNDS=3 cargo bench -p sluice-plugin-wasm --bench augment_plugin -- DIR none \
//!     native_noise nativewire_noise wasm_noise component_noise \
//!     native_solarize nativewire_solarize wasm_solarize component_solarize \
//!     c_solarize zig_solarize js_solarize python_solarize
//! ```
//!
//! Variants are `none` or `HOST_PLUGIN`. `none` runs the same two image_ops stages without a
//! plugin. Hosts of the Rust examples (`noise`: `gaussian_noise` σ 0.05, `solarize`:
//! `gray_solarize` 0.2/0.2): `native` (the `.so`, the lent path of ABI version 2 where it
//! applies), `nativewire` (the same `.so` forced through the wire format: the version-1 path),
//! `wasm` (the core module, `sdk/ABI.md`), `component` (the same plugin as a component of the
//! `map-transform` world, `sdk/WIT.md`). Hosts of the examples in other languages, components
//! built with their own toolchains (sluice-plugin-build, into `target/plugin-guests/`):
//! `c`, `zig`, `js`, `python`; they have `gray_solarize` only (`examples/plugins/LANG-solarize`).
//!
//! `ROUNDS` (default 1) runs every variant that many times, in alternating rounds (round 1:
//! every variant, then round 2, ...). Each run prints one JSON line on stdout (images/s, CPU
//! ms per image of the whole process, the stage's lent and wire calls); after the last
//! round, the median and best of each variant go to stderr, with the pipelines' stats.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_guest_build as guests;
use sluice_plugin_build::{BuildOptions, Project};
use sluice_plugin_host::{Backend, CallPath, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_plugin_wasm::{WasmOptions, WasmPlugin};

/// The languages of `examples/plugins/LANG-solarize`, as variant hosts.
const LANGUAGES: [&str; 4] = ["c", "zig", "js", "python"];

/// A variant's plugin: its backend, configuration and call path.
struct Variant {
    backend: Arc<dyn Backend>,
    config: serde_json::Value,
    path: CallPath,
}

fn variant(variant: &str) -> Option<Variant> {
    if variant == "none" {
        return None;
    }
    let Some((host, plugin)) = variant.split_once('_') else {
        panic!("unknown variant {variant} (none or HOST_PLUGIN)")
    };
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
        other => panic!("unknown plugin {other} (noise or solarize)"),
    };
    let mut path = CallPath::Lent;
    let backend: Arc<dyn Backend> = match host {
        "native" => NativePlugin::load(native(crate_name)).unwrap(),
        "nativewire" => {
            path = CallPath::Wire;
            NativePlugin::load(native(crate_name)).unwrap()
        }
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
        language if LANGUAGES.contains(&language) => {
            assert_eq!(
                plugin, "solarize",
                "{variant}: the examples in other languages are gray_solarize only"
            );
            WasmPlugin::load_with(
                example(&format!("{language}-solarize")),
                &WasmOptions::default(),
            )
            .unwrap()
        }
        other => panic!(
            "unknown host {other} (native, nativewire, wasm, component, {})",
            LANGUAGES.join(", ")
        ),
    };
    Some(Variant {
        backend,
        config,
        path,
    })
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
    let Some((dir, names)) = args.split_first() else {
        eprintln!(
            "usage: [ROUNDS=N] augment_plugin DIR [none|{{native,nativewire,wasm,component}}_{{noise,solarize}}|{{{}}}_solarize]...",
            LANGUAGES.join(",")
        );
        return;
    };
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
        .max(1);
    // Every plugin is loaded (and built, compiled) before the first run; each run makes a
    // new stage (a new pool of instances) of it.
    let variants: Vec<Option<Variant>> = names.iter().map(|name| variant(name)).collect();
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        for ((name, plugin), rates) in names.iter().zip(&variants).zip(&mut rates) {
            let stage = plugin
                .as_ref()
                .map(|v| PluginStage::with_path(v.backend.clone(), &v.config, v.path).unwrap());
            let ds = pipeline(dir, stage.as_ref());
            let cpu = cpu_seconds();
            let t = Instant::now();
            let mut images = 0;
            for batch in ds.iter().unwrap() {
                images += batch.unwrap().tensor("label").unwrap().len();
            }
            let secs = t.elapsed().as_secs_f64();
            let rate = images as f64 / secs;
            rates.push(rate);
            // CPU time of the whole process (every thread) per image: steadier than the wall
            // clock when other work shares the machine.
            let cpu_ms = match (cpu, cpu_seconds()) {
                (Some(a), Some(b)) => format!("{:.4}", (b - a) * 1e3 / images as f64),
                _ => "null".to_string(),
            };
            let calls = stage.as_ref().map(|s| s.calls()).unwrap_or_default();
            println!(
                "{{\"system\": \"sluice\", \"pipeline\": \"augment+{name}\", \"round\": {round}, \"records\": {images}, \"seconds\": {secs:.4}, \"records_per_s\": {rate:.1}, \"cpu_ms_per_record\": {cpu_ms}, \"lent_calls\": {}, \"wire_calls\": {}}}",
                calls.lent, calls.wire
            );
            if let Some(stats) = ds.stats() {
                eprintln!("{}", stats.report());
            }
        }
    }
    for (name, r) in names.iter().zip(&mut rates) {
        r.sort_by(f64::total_cmp);
        eprintln!(
            "{name}: median {:.0} images/s, best {:.0}, runs {:?}",
            r[r.len() / 2],
            r[r.len() - 1],
            r.iter().map(|x| x.round() as u64).collect::<Vec<_>>()
        );
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
