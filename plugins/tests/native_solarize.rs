//! The `gray_solarize` example as a loaded library against the same crate in-process (in
//! its own test binary: one plugin crate per binary, see `native.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_example_solarize::GraySolarize;
use sluice_plugins::{Backend, InProcess, NativePlugin, PluginStage};
use sluice_sdk::Plugin as _;

/// The cdylib of a dev-dependency: cargo writes it into the directory of this test binary.
fn library(crate_name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap();
    let file = format!(
        "{}{crate_name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let path = dir.join(&file);
    assert!(
        path.exists(),
        "{} is missing: cargo builds it as a dev-dependency of sluice-plugins",
        path.display()
    );
    path
}

fn images(n: usize, dtype_u8: bool) -> Vec<Element> {
    (0..n)
        .map(|i| {
            let data = if dtype_u8 {
                TensorData::U8(
                    (0..4 * 5 * 3)
                        .map(|j| ((i * 31 + j * 7) % 256) as u8)
                        .collect::<Vec<_>>()
                        .into(),
                )
            } else {
                TensorData::F32(
                    (0..4 * 5 * 3)
                        .map(|j| ((i * 31 + j * 7) % 256) as f32 / 255.0)
                        .collect::<Vec<_>>()
                        .into(),
                )
            };
            Element::new(ElementId::new(0, i as u64))
                .with("image", Tensor::new(&[4, 5, 3], data).unwrap())
                .with(
                    "label",
                    Tensor::new(&[], TensorData::I64(vec![i as i64 % 3].into())).unwrap(),
                )
        })
        .collect()
}

fn run(
    stage: &Arc<PluginStage>,
    input: Vec<Element>,
    threads: usize,
    chunk: usize,
) -> Vec<Element> {
    let parallel = if threads == 0 {
        NumParallel::Sequential
    } else {
        NumParallel::Fixed(threads)
    };
    stage
        .apply(
            &Dataset::from_elements(input),
            MapChunksSpec::new(chunk).num_parallel(parallel),
        )
        .with_options(Options::default().with_seed(11))
        .collect()
        .unwrap()
}

fn bits(elements: &[Element]) -> Vec<String> {
    elements
        .iter()
        .map(|e| {
            let img = e.tensor("image").unwrap();
            let values = match img.data() {
                TensorData::F32(v) => {
                    format!("{:?}", v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                }
                other => format!("{other:?}"),
            };
            format!(
                "{} {:?} {values} {:?}",
                e.id(),
                img.shape(),
                e.tensor("label").map(|t| t.as_i64().unwrap().to_vec())
            )
        })
        .collect()
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
        let native = PluginStage::new(NativePlugin::load(library(lib)).unwrap(), &config).unwrap();
        let reference: Arc<dyn Backend> = InProcess::<GraySolarize>::new();
        let in_process = PluginStage::new(reference, &config).unwrap();
        let input = images(37, u8_images);
        let want = bits(&run(&in_process, input.clone(), 0, 8));
        assert_ne!(want, bits(&input), "something changed");
        for (threads, chunk) in [(0, 3), (2, 64), (3, 5)] {
            assert_eq!(bits(&run(&native, input.clone(), threads, chunk)), want);
        }
    }
}
