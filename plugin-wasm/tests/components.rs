//! The component host: the example plugins built as components of the Sluice worlds
//! (`sdk/wit/sluice.wit`) give the same bits as their core-module and native builds at any
//! parallelism and chunk size; the `batch-transform` world's kinds; errors, traps, time and
//! memory limits contained as for core modules; what a component may not import or export.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_guest_build as guests;
use sluice_plugin_host::testing::{cdylib_beside_exe, digest, image_elements, run_stage};
use sluice_plugin_host::{Backend, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_plugin_wasm::{WasmFormat, WasmLimits, WasmOptions, WasmPlugin};

/// The component of guest crate `package`, built once per test binary.
fn component(package: &'static str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<Vec<(&'static str, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap();
    if let Some((_, path)) = built.iter().find(|(p, _)| *p == package) {
        return path.clone();
    }
    let path = guests::build_component(&guests::workspace_dir(), package).unwrap();
    built.push((package, path.clone()));
    path
}

fn core_module(package: &'static str) -> PathBuf {
    guests::build(&guests::workspace_dir(), package).unwrap()
}

fn no_cache() -> WasmOptions {
    WasmOptions {
        cache_dir: Some(None),
        ..WasmOptions::default()
    }
}

fn load(path: PathBuf) -> Arc<WasmPlugin> {
    WasmPlugin::load_with(path, &no_cache()).unwrap()
}

fn run(stage: &Arc<PluginStage>, input: &[Element], threads: usize, chunk: usize) -> Vec<String> {
    digest(&run_stage(stage, input, threads, chunk, 5).unwrap())
}

#[test]
fn the_noise_component_equals_its_core_module_and_native_builds_bit_for_bit() {
    let component = load(component("sluice-example-noise-component"));
    assert_eq!(component.format(), WasmFormat::MapComponent);
    let core = load(core_module("sluice-example-noise"));
    assert_eq!(core.format(), WasmFormat::CoreModule);
    assert_eq!(component.info(), core.info(), "the same metadata");
    let native: Arc<dyn Backend> =
        NativePlugin::load(cdylib_beside_exe("sluice_example_noise").unwrap()).unwrap();
    for (config, u8_pixels) in [
        (json!({"sigma": 0.1}), false),
        (json!({"sigma": 0.3, "p": 0.5}), true),
        (json!({}), true),
    ] {
        let images = image_elements(23, [9, 7, 3], u8_pixels);
        let want = run(
            &PluginStage::new(native.clone(), &config).unwrap(),
            &images,
            0,
            8,
        );
        assert_ne!(want, digest(&images), "the plugin changes the images");
        assert_eq!(
            run(
                &PluginStage::new(core.clone(), &config).unwrap(),
                &images,
                2,
                5
            ),
            want
        );
        let stage = PluginStage::new(component.clone(), &config).unwrap();
        for (threads, chunk) in [(0, 1), (0, 8), (2, 64), (3, 5)] {
            assert_eq!(
                run(&stage, &images, threads, chunk),
                want,
                "{config} {threads} {chunk}"
            );
        }
    }
}

#[test]
fn the_solarize_component_equals_its_core_module_and_native_builds_bit_for_bit() {
    let config = json!({"p_gray": 0.5, "p_solarize": 0.5});
    let component = load(component("sluice-example-solarize-component"));
    let core = load(core_module("sluice-example-solarize"));
    assert_eq!(component.info(), core.info());
    let native: Arc<dyn Backend> =
        NativePlugin::load(cdylib_beside_exe("sluice_example_solarize").unwrap()).unwrap();
    for u8_pixels in [true, false] {
        let images = image_elements(40, [5, 6, 3], u8_pixels);
        let want = run(
            &PluginStage::new(native.clone(), &config).unwrap(),
            &images,
            0,
            16,
        );
        assert_ne!(want, digest(&images));
        assert_eq!(
            run(
                &PluginStage::new(core.clone(), &config).unwrap(),
                &images,
                2,
                7
            ),
            want
        );
        assert_eq!(
            run(
                &PluginStage::new(component.clone(), &config).unwrap(),
                &images,
                2,
                7
            ),
            want
        );
    }
}

#[test]
fn configuration_and_contract_errors_name_the_plugin_and_elements() {
    let component = load(component("sluice-example-noise-component"));
    let err = PluginStage::new(component.clone(), &json!({"sigma": -1}))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "plugin gaussian_noise: init failed: invalid configuration: sigma must be finite"
        ),
        "{err}"
    );
    let err = PluginStage::new(component.clone(), &json!({"sigmaa": 1}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown key \"sigmaa\""), "{err}");
    let stage = PluginStage::new(component, &json!({})).unwrap();
    let err = stage
        .apply(&Dataset::range(0, 2), MapChunksSpec::new(2))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(err.contains("plugin gaussian_noise: element 0:0"), "{err}");
    assert!(err.contains("missing feature \"image\""), "{err}");
}

fn faulty(limits: WasmLimits) -> Arc<WasmPlugin> {
    WasmPlugin::load_with(
        component("sluice-test-plugin-faulty-component"),
        &WasmOptions {
            limits,
            cache_dir: Some(None),
        },
    )
    .unwrap()
}

/// The values that come out of `stage` over `range(0, n)` with the error policy skipping
/// failed chunks, and how many elements were skipped.
fn values(stage: &Arc<PluginStage>, n: i64, chunk: usize) -> (Vec<i64>, u64) {
    let ds = stage
        .apply(&Dataset::range(0, n), MapChunksSpec::new(chunk))
        .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    let mut it = ds.iter().unwrap();
    let got = it
        .by_ref()
        .map(|e| e.unwrap().tensor("value").unwrap().as_i64().unwrap()[0])
        .collect();
    (got, it.stats().skipped)
}

#[test]
fn the_batch_world_drops_fails_and_traps_as_the_core_abi_does() {
    let plugin = faulty(WasmLimits::default());
    assert_eq!(plugin.format(), WasmFormat::BatchComponent);
    assert_eq!(plugin.info().name, "faulty");
    let drop5 = PluginStage::new(plugin.clone(), &json!({"drop_on": 5})).unwrap();
    let (got, skipped) = values(&drop5, 10, 4);
    assert_eq!(got, [0, 1, 2, 3, 4, 6, 7, 8, 9]);
    assert_eq!(skipped, 0);

    let error = PluginStage::new(plugin.clone(), &json!({"error_on": 5})).unwrap();
    let err = error
        .apply(&Dataset::range(0, 10), MapChunksSpec::new(4))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("plugin faulty: plugin error on elements [0:4, 0:5, 0:6, ... 4 in all]: faulty plugin refuses 5"),
        "{err}"
    );
    let (got, skipped) = values(&error, 10, 4);
    assert_eq!(got, [0, 1, 2, 3, 8, 9]);
    assert_eq!(skipped, 4);

    // A panic traps the instance: discarded, the pipeline goes on with a new one.
    let panic = PluginStage::new(plugin, &json!({"panic_on": 2})).unwrap();
    let err = panic
        .apply(&Dataset::range(0, 4), MapChunksSpec::new(2))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("plugin faulty: trap on elements [0:2, 0:3]"),
        "{err}"
    );
    assert!(err.contains("the plugin trapped"), "{err}");
    let (got, skipped) = values(&panic, 8, 2);
    assert_eq!(got, [0, 1, 4, 5, 6, 7]);
    assert_eq!(skipped, 2);
}

#[test]
fn time_and_memory_limits_hold_for_components() {
    let limits = WasmLimits::default()
        .memory_bytes(32 << 20)
        .time(Duration::from_millis(200));
    let plugin = faulty(limits);
    let looping = PluginStage::new(plugin.clone(), &json!({"loop_on": 3})).unwrap();
    let started = std::time::Instant::now();
    let err = looping
        .apply(&Dataset::range(0, 6), MapChunksSpec::new(2))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        err.contains("plugin faulty: timeout on elements [0:2, 0:3]: the call ran past its time limit of 200ms"),
        "{err}"
    );
    let (got, skipped) = values(&looping, 6, 2);
    assert_eq!((got, skipped), (vec![0, 1, 4, 5], 2));

    let growing = PluginStage::new(plugin, &json!({"grow_on": 1})).unwrap();
    let err = growing
        .apply(&Dataset::range(0, 4), MapChunksSpec::new(2))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("plugin faulty: memory limit on elements [0:0, 0:1]"),
        "{err}"
    );
    let (got, skipped) = values(&growing, 4, 2);
    assert_eq!((got, skipped), (vec![2, 3], 2));
}

fn write(dir: &std::path::Path, name: &str, wat: &str) -> PathBuf {
    let path = dir.join(format!("{name}.wat"));
    std::fs::write(&path, wat).unwrap();
    path
}

fn load_error(path: PathBuf) -> String {
    WasmPlugin::load_with(path, &no_cache())
        .unwrap_err()
        .to_string()
}

#[test]
fn imports_other_versions_and_foreign_components_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let wasi = write(
        dir.path(),
        "wasi",
        r#"(component
             (import "wasi:http/outgoing-handler@0.2.0" (instance))
             (import "example:net/fetch@1.0.0" (instance)))"#,
    );
    let err = load_error(wasi);
    assert!(err.contains("wasi.wat: cannot load the plugin"), "{err}");
    assert!(
        err.contains(
            "the component imports `wasi:http/outgoing-handler@0.2.0`, `example:net/fetch@1.0.0`; a plugin may import only the types of"
        ),
        "{err}"
    );
    assert!(
        err.contains("other WASI interfaces and versions are not provided"),
        "{err}"
    );

    let other_version = write(
        dir.path(),
        "v2",
        r#"(component
             (instance $i)
             (export "sluice:plugin/map-element@2.0.0" (instance $i)))"#,
    );
    let err = load_error(other_version);
    assert!(
        err.contains(
            "the component exports `sluice:plugin/map-element@2.0.0`, of another version of the Sluice worlds; this host supports sluice:plugin@1.0.0"
        ),
        "{err}"
    );

    let empty = write(dir.path(), "empty", "(component)");
    let err = load_error(empty);
    assert!(
        err.contains("not a Sluice component: it exports none of the interfaces"),
        "{err}"
    );

    // An interface of the right name with the wrong contents: the types are checked.
    let wrong = write(
        dir.path(),
        "wrong",
        r#"(component
             (instance $i)
             (export "sluice:plugin/batch-process@1.0.0" (instance $i)))"#,
    );
    let err = load_error(wrong);
    assert!(
        err.contains("the component lacks `info`, which the `batch-transform` world exports"),
        "{err}"
    );
}

#[test]
fn a_component_and_a_module_are_told_apart_by_their_header() {
    let component_bytes = std::fs::read(component("sluice-example-solarize-component")).unwrap();
    let module_bytes = std::fs::read(core_module("sluice-example-solarize")).unwrap();
    assert!(sluice_plugin_wasm::is_component(&component_bytes));
    assert!(!sluice_plugin_wasm::is_component(&module_bytes));
    assert!(!sluice_plugin_wasm::is_component(b"\0asm"));
}

#[test]
fn compiled_components_are_cached() {
    let dir = tempfile::tempdir().unwrap();
    let options = WasmOptions {
        cache_dir: Some(Some(dir.path().to_path_buf())),
        ..WasmOptions::default()
    };
    let path = component("sluice-example-noise-component");
    let first = WasmPlugin::load_with(&path, &options).unwrap();
    assert_eq!(
        first.cache_outcome(),
        sluice_plugin_wasm::CacheOutcome::Compiled
    );
    let second = WasmPlugin::load_with(&path, &options).unwrap();
    assert_eq!(
        second.cache_outcome(),
        sluice_plugin_wasm::CacheOutcome::Hit
    );
    assert_eq!(second.format(), WasmFormat::MapComponent);
    let images = image_elements(4, [4, 4, 3], true);
    let config = json!({"sigma": 0.2});
    assert_eq!(
        run(&PluginStage::new(second, &config).unwrap(), &images, 0, 2),
        run(&PluginStage::new(first, &config).unwrap(), &images, 0, 4)
    );
}

#[test]
fn a_batch_buffer_given_to_a_component_is_decoded_by_the_host() {
    // `Instance::call` (the batch-buffer path `sluice plugin check` uses for damaged
    // buffers) works for components too: a good buffer gives the same outputs, a damaged
    // one is `invalid input`, never a trap.
    let plugin = faulty(WasmLimits::default());
    let mut instance = plugin.instantiate(br#"{"drop_on": 1}"#).unwrap();
    let elements: Vec<sluice_sdk::Element> = (0..3)
        .map(|i| sluice_sdk::Element {
            tensors: vec![
                sluice_sdk::Tensor::new("value", vec![], sluice_sdk::Data::I64(vec![i])).unwrap(),
            ],
        })
        .collect();
    let input = sluice_sdk::wire::encode_batch(&elements);
    let mut out = None;
    instance
        .call(&input, &[7, 8, 9], &mut |bytes| {
            out = Some(sluice_sdk::wire::decode_batch(bytes).unwrap())
        })
        .unwrap();
    let parents: Vec<u32> = out.unwrap().iter().map(|e| e.parent).collect();
    assert_eq!(parents, [0, 2]);
    let failure = instance
        .call(&input[..input.len() - 3], &[7, 8, 9], &mut |_| {})
        .unwrap_err();
    assert_eq!(failure.status, "invalid input");
    assert!(!failure.discard);
    let failure = instance.call(&input, &[7], &mut |_| {}).unwrap_err();
    assert_eq!(
        (failure.status.as_str(), failure.message.as_str()),
        ("invalid input", "invalid input: 3 elements but 1 seeds")
    );
}

#[test]
fn a_later_minor_version_of_a_world_interface_is_taken_as_version_1() {
    // `sluice:plugin/batch-process@1.2.0` is the batch world's interface of a later 1.x
    // package (which may only add interfaces): recognised, then checked for its contents.
    let dir = tempfile::tempdir().unwrap();
    let later = write(
        dir.path(),
        "later",
        r#"(component
             (instance $i)
             (export "sluice:plugin/batch-process@1.2.0" (instance $i)))"#,
    );
    let err = load_error(later);
    assert!(
        err.contains("the component lacks `info`, which the `batch-transform` world exports"),
        "{err}"
    );
}
