//! The example plugins compiled to wasm32 (built here by `sluice_guest_build`), run in
//! pipelines: bit for bit what the same code gives in-process and as a native library, at
//! any parallelism; the compiled-module cache; configuration errors from inside the sandbox.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::json;
use sluice_core::prelude::*;
use sluice_example_noise::GaussianNoise;
use sluice_guest_build as guests;
use sluice_plugin_host::testing::{cdylib_beside_exe, digest, image_elements, run_stage};
use sluice_plugin_host::{Backend, InProcess, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_plugin_wasm::{CacheOutcome, WasmOptions, WasmPlugin};

fn guest(package: &'static str) -> PathBuf {
    static NOISE: OnceLock<PathBuf> = OnceLock::new();
    static SOLARIZE: OnceLock<PathBuf> = OnceLock::new();
    let cell = if package.contains("noise") {
        &NOISE
    } else {
        &SOLARIZE
    };
    cell.get_or_init(|| guests::build(&guests::workspace_dir(), package).unwrap())
        .clone()
}

fn no_cache() -> WasmOptions {
    WasmOptions {
        cache_dir: Some(None),
        ..WasmOptions::default()
    }
}

#[test]
fn the_wasm_noise_plugin_equals_the_crate_in_process_bit_for_bit() {
    let wasm = WasmPlugin::load_with(guest("sluice-example-noise"), &no_cache()).unwrap();
    assert_eq!(wasm.info(), &<GaussianNoise as sluice_sdk::Plugin>::info());
    for (config, u8_pixels) in [
        (json!({"sigma": 0.1}), false),
        (json!({"sigma": 0.3, "p": 0.5}), true),
    ] {
        let reference: Arc<dyn Backend> = InProcess::<GaussianNoise>::new();
        let want = run(
            &PluginStage::new(reference, &config).unwrap(),
            &images(29, u8_pixels),
            0,
            8,
        );
        assert_ne!(
            want,
            digest(&images(29, u8_pixels)),
            "the plugin changes the images"
        );
        let stage = PluginStage::new(wasm.clone(), &config).unwrap();
        for (threads, chunk) in [(0, 1), (0, 8), (2, 64), (3, 5)] {
            assert_eq!(
                run(&stage, &images(29, u8_pixels), threads, chunk),
                want,
                "{config} {threads} {chunk}"
            );
        }
    }
}

#[test]
fn the_wasm_and_native_builds_of_solarize_agree_bit_for_bit() {
    let config = json!({"p_gray": 0.5, "p_solarize": 0.5});
    let wasm = PluginStage::new(
        WasmPlugin::load_with(guest("sluice-example-solarize"), &no_cache()).unwrap(),
        &config,
    )
    .unwrap();
    let native = PluginStage::new(
        NativePlugin::load(cdylib_beside_exe("sluice_example_solarize").unwrap()).unwrap(),
        &config,
    )
    .unwrap();
    for u8_pixels in [true, false] {
        let want = run(&native, &images(40, u8_pixels), 0, 16);
        assert_eq!(run(&wasm, &images(40, u8_pixels), 2, 7), want);
    }
}

#[test]
fn compiled_modules_are_cached_and_bad_entries_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let options = WasmOptions {
        cache_dir: Some(Some(dir.path().to_path_buf())),
        ..WasmOptions::default()
    };
    let path = guest("sluice-example-noise");
    let first = WasmPlugin::load_with(&path, &options).unwrap();
    assert_eq!(first.cache_outcome(), CacheOutcome::Compiled);
    let second = WasmPlugin::load_with(&path, &options).unwrap();
    assert_eq!(second.cache_outcome(), CacheOutcome::Hit);
    assert!(
        second.compile_seconds() < first.compile_seconds(),
        "a hit is faster than compiling"
    );
    let entry = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .unwrap();
    // Damaged code: its checksum no longer matches.
    let mut code = std::fs::read(&entry).unwrap();
    let mid = code.len() / 2;
    code[mid] ^= 0xff;
    std::fs::write(&entry, &code).unwrap();
    assert_eq!(
        WasmPlugin::load_with(&path, &options)
            .unwrap()
            .cache_outcome(),
        CacheOutcome::Replaced
    );
    // A foreign entry with a matching checksum: wasmtime refuses its header.
    let junk = b"not compiled code".to_vec();
    std::fs::write(&entry, &junk).unwrap();
    let sum: String = sha2_hex(&junk);
    std::fs::write(entry.with_extension("sha256"), sum).unwrap();
    let reloaded = WasmPlugin::load_with(&path, &options).unwrap();
    assert_eq!(reloaded.cache_outcome(), CacheOutcome::Replaced);
    // And the replaced entry works.
    assert_eq!(
        WasmPlugin::load_with(&path, &options)
            .unwrap()
            .cache_outcome(),
        CacheOutcome::Hit
    );
    let stage = PluginStage::new(reloaded, &json!({})).unwrap();
    assert_eq!(run(&stage, &images(3, false), 0, 2).len(), 3);
}

fn sha2_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn configuration_errors_come_from_inside_the_sandbox() {
    let wasm = WasmPlugin::load_with(guest("sluice-example-noise"), &no_cache()).unwrap();
    let err = PluginStage::new(wasm.clone(), &json!({"sigma": -1}))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "plugin gaussian_noise: init failed: invalid configuration: sigma must be finite"
        ),
        "{err}"
    );
    let stage = PluginStage::new(wasm, &json!({})).unwrap();
    let err = stage
        .apply(&Dataset::range(0, 2), MapChunksSpec::new(2))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing feature \"image\""), "{err}");
}

fn images(n: usize, u8_pixels: bool) -> Vec<Element> {
    image_elements(n, [6, 7, 3], u8_pixels)
}

fn run(stage: &Arc<PluginStage>, input: &[Element], threads: usize, chunk: usize) -> Vec<String> {
    digest(&run_stage(stage, input, threads, chunk, 5).unwrap())
}
