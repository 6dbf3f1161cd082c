//! The `gray_solarize` example as a loaded library against the same crate in-process (in
//! its own test binary: one plugin crate per binary, see `native.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_example_solarize::GraySolarize;
use sluice_plugin_host::testing::{digest as bits, image_elements, run_stage};
use sluice_plugin_host::{Backend, CallPath, InProcess, PluginStage};
use sluice_plugin_native::NativePlugin;
use sluice_sdk::Plugin as _;

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

#[test]
fn the_loaded_solarize_plugin_equals_the_crate_in_process() {
    let lib = "sluice_example_solarize";
    assert_eq!(
        NativePlugin::load(library(lib)).unwrap().info(),
        &GraySolarize::info()
    );
    let config = json!({"p_gray": 0.5, "p_solarize": 0.5});
    for u8_images in [true, false] {
        let loaded = NativePlugin::load(library(lib)).unwrap();
        let reference: Arc<dyn Backend> = InProcess::<GraySolarize>::new();
        let in_process = PluginStage::with_path(reference, &config, CallPath::Wire).unwrap();
        let input = images(37, u8_images);
        let want = bits(&run(&in_process, input.clone(), 0, 8));
        assert_ne!(want, bits(&input), "something changed");
        for path in [CallPath::Lent, CallPath::Wire] {
            let native = PluginStage::with_path(loaded.clone(), &config, path).unwrap();
            for (threads, chunk) in [(0, 3), (2, 64), (3, 5)] {
                assert_eq!(
                    bits(&run(&native, input.clone(), threads, chunk)),
                    want,
                    "{path:?}"
                );
            }
            assert_eq!(native.calls().lent > 0, path == CallPath::Lent);
        }
    }
}
