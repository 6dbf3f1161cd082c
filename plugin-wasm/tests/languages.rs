//! Plugins in other languages (issue 23): the `gray_solarize` example written in C,
//! Python, JavaScript and Zig (`examples/plugins/<lang>-solarize`), built with their own
//! toolchains (sluice-plugin-build), gives the same bits as the Rust example's native build
//! for the same seeds and configuration, at any parallelism. The Python and
//! JavaScript components import WASI: the sandbox's randomness and clocks leave their
//! outputs a function of the seeds (two runs, the same bits).
//!
//! The toolchains are installed by `.ci/run` (clang, lld, wasi-libc from Debian;
//! componentize-py and ziglang from PyPI; componentize-js from npm); a missing one fails
//! the test with the package to install.

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::json;
use sluice_core::prelude::*;
use sluice_plugin_build::{BuildOptions, Project};
use sluice_plugin_host::testing::{cdylib_beside_exe, digest, image_elements, run_stage};
use sluice_plugin_host::{Backend, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_plugin_wasm::{WasmFormat, WasmOptions, WasmPlugin};

/// The examples built so far, by directory.
type Built = Vec<(&'static str, Arc<WasmPlugin>)>;

/// The component of the example in `examples/plugins/<dir>`, built once per test binary
/// into `target/plugin-guests/<dir>` (and once per CI run: rebuilt only when a source is
/// newer). Its compiled code is cached on disk as for any plugin.
fn example(dir: &'static str) -> Arc<WasmPlugin> {
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap();
    if let Some((_, plugin)) = built.iter().find(|(d, _)| *d == dir) {
        return plugin.clone();
    }
    let workspace = sluice_guest_build::workspace_dir();
    let project = Project::open(&workspace.join("examples/plugins").join(dir)).unwrap();
    let options = BuildOptions {
        out_dir: Some(workspace.join("target/plugin-guests").join(dir)),
        force: false,
    };
    let path = sluice_plugin_build::build(&project, &options)
        .unwrap_or_else(|e| panic!("building examples/plugins/{dir}: {e}"))
        .path;
    let plugin = WasmPlugin::load_with(path, &WasmOptions::default()).unwrap();
    built.push((dir, plugin.clone()));
    plugin
}

fn native(name: &str) -> Arc<dyn Backend> {
    NativePlugin::load(cdylib_beside_exe(name).unwrap()).unwrap()
}

fn run(stage: &Arc<PluginStage>, input: &[Element], threads: usize, chunk: usize) -> Vec<String> {
    digest(&run_stage(stage, input, threads, chunk, 5).unwrap())
}

/// `plugin` gives the native Rust build's bits for `configs`, u8 and f32 images.
fn equals_native(plugin: Arc<WasmPlugin>, rust: &str, configs: &[serde_json::Value]) {
    assert_eq!(plugin.format(), WasmFormat::MapComponent);
    let native = native(rust);
    assert_eq!(plugin.info().name, native.info().name);
    for config in configs {
        for u8_pixels in [true, false] {
            let images = image_elements(24, [6, 5, 3], u8_pixels);
            let want = run(
                &PluginStage::new(native.clone(), config).unwrap(),
                &images,
                0,
                8,
            );
            assert_ne!(
                want,
                digest(&images),
                "{config}: the plugin changes the images"
            );
            let stage = PluginStage::new(plugin.clone(), config).unwrap();
            for (threads, chunk) in [(0, 7), (2, 5)] {
                assert_eq!(
                    run(&stage, &images, threads, chunk),
                    want,
                    "{} {config} u8={u8_pixels} threads={threads} chunk={chunk}",
                    plugin.path().display()
                );
            }
        }
    }
}

fn solarize_configs() -> Vec<serde_json::Value> {
    vec![
        json!({"p_gray": 0.5, "p_solarize": 0.5}),
        json!({"p_gray": 1.0, "p_solarize": 0.3, "threshold": 100}),
        json!({}),
    ]
}

#[test]
fn the_c_solarize_equals_the_rust_build_bit_for_bit() {
    equals_native(
        example("c-solarize"),
        "sluice_example_solarize",
        &solarize_configs(),
    );
}

#[test]
fn the_js_solarize_equals_the_rust_build_bit_for_bit() {
    equals_native(
        example("js-solarize"),
        "sluice_example_solarize",
        &solarize_configs(),
    );
    let err = PluginStage::new(example("js-solarize"), &json!({"p_gray": "x"})).unwrap_err();
    assert!(err.to_string().contains("p_gray must be a number"), "{err}");
}

#[test]
fn the_zig_solarize_equals_the_rust_build_bit_for_bit() {
    equals_native(
        example("zig-solarize"),
        "sluice_example_solarize",
        &solarize_configs(),
    );
}

#[test]
fn the_python_solarize_equals_the_rust_build_bit_for_bit() {
    equals_native(
        example("python-solarize"),
        "sluice_example_solarize",
        &solarize_configs(),
    );
}

/// A component that imports WASI gives the same bits run after run, and its errors are
/// the typed errors of any plugin.
#[test]
fn a_wasi_component_is_reproducible_and_its_errors_are_typed() {
    let plugin = example("python-solarize");
    let config = json!({"p_gray": 0.5, "p_solarize": 0.5});
    let images = image_elements(16, [4, 4, 3], true);
    let first = run(
        &PluginStage::new(plugin.clone(), &config).unwrap(),
        &images,
        2,
        3,
    );
    let second = run(
        &PluginStage::new(plugin.clone(), &config).unwrap(),
        &images,
        0,
        16,
    );
    assert_eq!(first, second);
    let err = PluginStage::new(plugin.clone(), &json!({"p_gray": 2})).unwrap_err();
    assert!(
        err.to_string().contains("p_gray must be in [0, 1]"),
        "{err}"
    );
    let err = PluginStage::new(plugin.clone(), &json!({"q": 1})).unwrap_err();
    assert!(err.to_string().contains("unknown key"), "{err}");
}
