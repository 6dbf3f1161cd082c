//! The native host against real plugin libraries: the example plugins (built as cdylibs by
//! cargo next to this test, since they are its dev-dependencies), the deliberately faulty
//! plugin, and libraries with a wrong ABI version or a missing symbol (compiled from C
//! here with the system's `cc`).
//!
//! A test binary links at most one plugin crate as a Rust library (their exported C symbols
//! would clash): `native_solarize.rs` compares the second example plugin.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_example_noise::GaussianNoise;
use sluice_plugin_host::testing::{Spy, digest, image_elements, run_stage};
use sluice_plugin_host::{Backend, CallPath, Error, InProcess, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_sdk::Plugin as _;

#[test]
fn loaded_plugins_declare_what_the_crates_declare() {
    let noise = NativePlugin::load(library("sluice_example_noise")).unwrap();
    assert_eq!(noise.info(), &GaussianNoise::info());
    let solarize = NativePlugin::load(library("sluice_example_solarize")).unwrap();
    assert_eq!(solarize.info().name, "gray_solarize");
}

#[test]
fn a_loaded_plugin_gives_what_the_same_code_gives_in_process_at_any_parallelism() {
    for (config, u8_images) in [
        (json!({"sigma": 0.1}), false),
        (json!({"sigma": 0.1, "p": 0.5}), true),
    ] {
        let lib = "sluice_example_noise";
        let native = NativePlugin::load(library(lib)).unwrap();
        assert_eq!(native.abi_version(), 2);
        let reference: Arc<dyn Backend> = InProcess::<GaussianNoise>::new();
        let in_process =
            PluginStage::with_path(reference.clone(), &config, CallPath::Wire).unwrap();
        let input = images(37, u8_images);
        let want = bits(&run(&in_process, input.clone(), 0, 8));
        assert_eq!(want.len(), 37);
        // Both paths, loaded and in-process: the same bits.
        for (backend, path) in [
            (native.clone() as Arc<dyn Backend>, CallPath::Lent),
            (native.clone(), CallPath::Wire),
            (reference.clone(), CallPath::Lent),
        ] {
            let stage = PluginStage::with_path(backend, &config, path).unwrap();
            for (threads, chunk) in [(0, 1), (0, 8), (1, 64), (3, 5)] {
                let got = bits(&run(&stage, input.clone(), threads, chunk));
                assert_eq!(
                    got, want,
                    "{lib} {config} {path:?} with {threads} threads, chunks of {chunk}"
                );
            }
            let calls = stage.calls();
            match path {
                CallPath::Lent => assert!(calls.lent > 0 && calls.wire == 0, "{calls:?}"),
                CallPath::Wire => assert!(calls.lent == 0 && calls.wire > 0, "{calls:?}"),
            }
        }
        // The plugin changed something (and kept the other features).
        let before = bits(&input);
        assert_ne!(want, before, "{lib} {config} changed nothing");
    }
}

#[test]
fn the_lent_path_reads_the_pipelines_buffers_and_keeps_the_ones_the_plugin_wrote() {
    let spy = Spy::new(NativePlugin::load(library("sluice_example_noise")).unwrap());
    for u8_images in [false, true] {
        let stage = PluginStage::new(spy.clone(), &json!({"sigma": 0.1, "p": 0.5})).unwrap();
        let input = images(16, u8_images);
        let address = |e: &Element| match e.tensor("image").unwrap().data() {
            TensorData::U8(v) => v.as_ptr() as usize,
            TensorData::F32(v) => v.as_ptr() as usize,
            other => panic!("{other:?}"),
        };
        let out = run(&stage, input.clone(), 0, 16);
        let seen = spy.take();
        assert_eq!(seen.len(), 1);
        let lent: Vec<usize> = seen[0].lent.iter().map(|e| e[0].1).collect();
        assert_eq!(lent, input.iter().map(address).collect::<Vec<_>>());
        let mut written = 0;
        for (i, (o, x)) in out.iter().zip(&input).enumerate() {
            let allocated: Vec<usize> = seen[0]
                .allocated
                .iter()
                .filter(|(e, _, _)| *e as usize == i)
                .map(|(_, _, a)| *a)
                .collect();
            if allocated.is_empty() {
                // Skipped by `p`: the same tensor, not a copy.
                assert_eq!(address(o), address(x), "element {i}");
            } else {
                assert_eq!(allocated, vec![address(o)], "element {i}");
                written += 1;
            }
            // The other features are the input's own.
            assert_eq!(o.tensor("label").unwrap(), x.tensor("label").unwrap());
        }
        assert!((3..=13).contains(&written), "{written} of 16 written");
    }
}

#[test]
fn error_statuses_and_panics_fail_their_call_and_the_host_goes_on() {
    let faulty = NativePlugin::load(library("sluice_test_plugin_faulty")).unwrap();
    let values = |n: i64| Dataset::range(0, n);
    let stage = PluginStage::new(
        faulty.clone(),
        &json!({"error_on": 5, "panic_on": 17, "drop_on": 2}),
    )
    .unwrap();
    // Under the fail policy, the first failing call ends the run with the plugin's message.
    let err = stage
        .apply(&values(40), MapChunksSpec::new(4))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("plugin faulty: plugin error on elements ["),
        "{err}"
    );
    assert!(err.contains("faulty plugin refuses 5"), "{err}");
    // Under skip, both failing chunks (4..8 and 16..20) are skipped and counted, the
    // panicking instance is replaced, and every other element comes through.
    for threads in [NumParallel::Sequential, NumParallel::Fixed(2)] {
        let ds = stage
            .apply(&values(40), MapChunksSpec::new(4).num_parallel(threads))
            .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
        let mut it = ds.iter().unwrap();
        let got: Vec<i64> = it
            .by_ref()
            .map(|e| e.unwrap().tensor("value").unwrap().as_i64().unwrap()[0])
            .collect();
        let want: Vec<i64> = (0..40)
            .filter(|v| *v != 2 && !(4..8).contains(v) && !(16..20).contains(v))
            .collect();
        assert_eq!(got, want);
        // Each failed chunk's four elements are counted.
        assert_eq!(it.stats().skipped, 8);
    }
    // A panic alone, seen as an error naming the panic.
    let panicky = PluginStage::new(faulty, &json!({"panic_on": 1})).unwrap();
    let err = panicky
        .apply(&values(3), MapChunksSpec::new(8))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(err.contains("plugin faulty: panic on elements"), "{err}");
    assert!(err.contains("faulty plugin panics on 1"), "{err}");
    // The same stage still works on other data afterwards (a fresh instance).
    assert_eq!(
        panicky
            .apply(&Dataset::range(5, 9), MapChunksSpec::new(8))
            .collect()
            .unwrap()
            .len(),
        4
    );
}

#[test]
fn bad_configuration_and_contract_violations_are_named() {
    let noise = NativePlugin::load(library("sluice_example_noise")).unwrap();
    let err = PluginStage::new(noise.clone(), &json!({"sigma": -1}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("plugin gaussian_noise: init failed"), "{err}");
    assert!(err.contains("sigma must be finite and >= 0"), "{err}");
    let err = PluginStage::new(noise.clone(), &json!({"sigmaa": 1}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown key \"sigmaa\""), "{err}");
    let err = PluginStage::new(noise.clone(), &json!([1]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("expected a table"), "{err}");

    let stage = PluginStage::new(noise, &json!({})).unwrap();
    let err = stage
        .apply(&Dataset::range(0, 3), MapChunksSpec::new(2))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(err.contains("plugin gaussian_noise: element"), "{err}");
    assert!(err.contains("missing feature \"image\""), "{err}");
    let solarize = PluginStage::new(
        NativePlugin::load(library("sluice_example_solarize")).unwrap(),
        &json!({}),
    )
    .unwrap();
    let flat = Element::new(ElementId::new(0, 0)).with(
        "image",
        Tensor::new(&[2], TensorData::U8(vec![1, 2].into())).unwrap(),
    );
    let err = solarize
        .apply(&Dataset::from_elements(vec![flat]), MapChunksSpec::new(2))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("feature \"image\" has rank 1 (shape [2]), expected rank 3"),
        "{err}"
    );
}

#[test]
fn the_library_stays_loaded_while_a_stage_uses_it() {
    let stage = {
        let plugin = NativePlugin::load(library("sluice_example_noise")).unwrap();
        PluginStage::new(plugin, &json!({"sigma": 0.2})).unwrap()
        // The `NativePlugin` handle is dropped here; the stage keeps the library.
    };
    let out = run(&stage, images(5, false), 2, 2);
    assert_eq!(out.len(), 5);
}

/// Compiles C source into a shared library in `dir`.
fn c_library(dir: &Path, name: &str, source: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let out = dir.join(format!("lib{name}{}", std::env::consts::DLL_SUFFIX));
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&c)
        .status()
        .expect("a C compiler (`cc`) to build the test libraries");
    assert!(status.success());
    out
}

#[test]
fn wrong_versions_missing_symbols_and_non_libraries_are_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let v99 = c_library(
        dir.path(),
        "v99",
        "unsigned sluice_abi_version(void) { return 99; }\n",
    );
    let err = NativePlugin::load(&v99).unwrap_err();
    assert!(
        matches!(
            err,
            Error::AbiVersion {
                found: 99,
                supported: 2,
                ..
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains(&v99.display().to_string()), "{text}");
    assert!(
        text.contains("ABI version 99; this host supports versions 1 to 2"),
        "{text}"
    );

    let partial = c_library(
        dir.path(),
        "partial",
        "unsigned sluice_abi_version(void) { return 1; }\nconst char* sluice_info_ptr(void) { return \"{}\"; }\n",
    );
    let err = NativePlugin::load(&partial).unwrap_err().to_string();
    assert!(err.contains("missing symbol `sluice_info_len`"), "{err}");
    assert!(err.contains(&partial.display().to_string()), "{err}");

    let none = c_library(dir.path(), "none", "int unrelated(void) { return 0; }\n");
    let err = NativePlugin::load(&none).unwrap_err().to_string();
    assert!(err.contains("missing symbol `sluice_abi_version`"), "{err}");

    let text_file = dir.path().join("not_a_library.so");
    std::fs::write(&text_file, "hello").unwrap();
    let err = NativePlugin::load(&text_file).unwrap_err().to_string();
    assert!(err.contains("cannot load the plugin"), "{err}");
    let err = NativePlugin::load(dir.path().join("absent.so"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("absent.so"), "{err}");
}

fn library(crate_name: &str) -> PathBuf {
    sluice_plugin_host::testing::cdylib_beside_exe(crate_name).unwrap()
}

fn images(n: usize, u8_pixels: bool) -> Vec<Element> {
    image_elements(n, [4, 5, 3], u8_pixels)
}

fn run(
    stage: &Arc<PluginStage>,
    input: Vec<Element>,
    threads: usize,
    chunk: usize,
) -> Vec<Element> {
    run_stage(stage, &input, threads, chunk, 11).unwrap()
}

fn bits(elements: &[Element]) -> Vec<String> {
    digest(elements)
}
