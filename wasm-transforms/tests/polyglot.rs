//! A plugin written in C from `sdk/ABI.md` alone (`examples/plugins/c-brightness`),
//! compiled to wasm32 with clang here, run in a pipeline.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_plugins::PluginStage;
use sluice_plugins::testing::{digest, image_elements, run_stage};
use sluice_sdk::{DType, Kind};
use sluice_wasm::{WasmOptions, WasmPlugin, guests};

/// Compiles the C plugin into `dir` with clang (which `.ci/run` installs).
fn compile(dir: &std::path::Path) -> PathBuf {
    compile_with(dir, &[])
}

fn compile_with(dir: &std::path::Path, defines: &[&str]) -> PathBuf {
    let source = guests::workspace_dir().join("examples/plugins/c-brightness/brightness.c");
    let out = dir.join("c_brightness.wasm");
    let result = Command::new("clang")
        .args(["--target=wasm32-unknown-unknown", "-O2", "-nostdlib"])
        .args(["-Wl,--no-entry", "-Wl,--export-dynamic"])
        .args(defines)
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .output()
        .expect("clang, to build the C plugin: apt-get install clang lld");
    assert!(
        result.status.success(),
        "clang failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    out
}

fn load(dir: &std::path::Path) -> std::sync::Arc<WasmPlugin> {
    WasmPlugin::load_with(
        compile(dir),
        &WasmOptions {
            cache_dir: Some(None),
            ..WasmOptions::default()
        },
    )
    .unwrap()
}

fn pixels(e: &Element) -> Vec<u8> {
    e.tensor("image").unwrap().as_u8().unwrap().to_vec()
}

#[test]
fn the_c_plugin_declares_itself_and_brightens_every_image() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = load(dir.path());
    let info = plugin.info();
    assert_eq!(info.name, "c_brightness");
    assert_eq!(info.kind, Kind::Map);
    assert_eq!(info.inputs[0].name, "image");
    assert_eq!(info.inputs[0].dtype, Some(DType::U8));
    let stage = PluginStage::new(plugin, &json!({"delta": -40})).unwrap();
    let input = image_elements(13, [5, 4, 3], true);
    let out = run_stage(&stage, &input, 2, 4, 1).unwrap();
    assert_eq!(out.len(), input.len());
    for (got, want) in out.iter().zip(&input) {
        assert_eq!(got.id(), want.id(), "order and ids kept");
        assert_eq!(got.tensor("image").unwrap().shape(), &[5, 4, 3]);
        let expected: Vec<u8> = pixels(want).iter().map(|&x| x.saturating_sub(40)).collect();
        assert_eq!(pixels(got), expected);
        assert_eq!(
            got.tensor("label").unwrap().as_i64(),
            want.tensor("label").unwrap().as_i64(),
            "other features kept"
        );
    }
}

#[test]
fn its_randomness_comes_from_the_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let stage = PluginStage::new(load(dir.path()), &json!({"delta": 50, "p": 0.5})).unwrap();
    let input = image_elements(64, [3, 3, 3], true);
    let one = run_stage(&stage, &input, 0, 64, 9).unwrap();
    assert_eq!(
        digest(&one),
        digest(&run_stage(&stage, &input, 3, 5, 9).unwrap())
    );
    assert_ne!(
        digest(&one),
        digest(&run_stage(&stage, &input, 0, 64, 10).unwrap())
    );
    let brightened = one
        .iter()
        .zip(&input)
        .filter(|(a, b)| pixels(a) != pixels(b))
        .count();
    assert!(
        (16..48).contains(&brightened),
        "{brightened} of 64 with p = 0.5"
    );
}

#[test]
fn bad_configuration_and_input_are_refused_with_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = load(dir.path());
    for (config, message) in [
        (
            json!({"delta": 300}),
            "delta must be an integer in [-255, 255]",
        ),
        (json!({"p": 2}), "p must be in [0, 1]"),
        (json!({"q": 1}), "unknown key \"q\""),
    ] {
        let err = PluginStage::new(plugin.clone(), &config)
            .unwrap_err()
            .to_string();
        assert!(err.contains("plugin c_brightness: init failed"), "{err}");
        assert!(err.contains(message), "{config}: {err}");
    }
    let stage = PluginStage::new(plugin, &json!({})).unwrap();
    let err = run_stage(&stage, &image_elements(2, [2, 2, 3], false), 0, 2, 1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("feature \"image\" is f32, expected u8"),
        "{err}"
    );
}

#[test]
fn the_c_plugin_passes_sluice_plugin_check() {
    use sluice_wasm::plugin_check::{CheckOptions, check, render};
    let dir = tempfile::tempdir().unwrap();
    let report = check(
        &compile(dir.path()),
        &CheckOptions {
            config: json!({"delta": 17, "p": 0.5}),
            cases: 24,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert!(report.passed(), "{}", render(&report));
}

#[test]
fn a_build_whose_outputs_depend_on_neighbours_fails_the_independence_check() {
    use sluice_wasm::plugin_check::{CheckOptions, Outcome, check, render};
    let dir = tempfile::tempdir().unwrap();
    let report = check(
        &compile_with(dir.path(), &["-DBROKEN_NEIGHBOURS"]),
        &CheckOptions {
            cases: 24,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    let independent = report
        .checks
        .iter()
        .find(|c| c.check == "independent")
        .unwrap();
    match &independent.outcome {
        Outcome::Fail {
            message,
            minimal_case,
        } => {
            assert!(message.contains("depends on its neighbours"), "{message}");
            assert_eq!(
                minimal_case
                    .as_deref()
                    .unwrap()
                    .matches("Element::new")
                    .count(),
                2
            );
        }
        other => panic!("{other:?}\n{}", render(&report)),
    }
    assert!(!report.passed());
}
