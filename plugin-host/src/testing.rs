//! Helpers for testing plugins: where cargo put a plugin's native build, sample image
//! elements, running a plugin stage, and a bit-exact digest of elements to compare two runs
//! (a native and a WASM build, two thread counts, two chunk sizes).
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use sluice_plugin_host::testing::{digest, image_elements, run_stage};
//! use sluice_plugin_host::{Backend, PluginStage};
//!
//! /// In a test: `plugin` gives the same bits at any parallelism and chunk size. (A native
//! /// build is `NativePlugin::load(cdylib_beside_exe("sluice_example_noise")?)?` in a test of
//! /// a crate with the plugin crate as a dev-dependency.)
//! fn same_at_any_parallelism(plugin: Arc<dyn Backend>) -> anyhow::Result<()> {
//!     let stage = PluginStage::new(plugin, &serde_json::json!({"sigma": 0.1}))?;
//!     let input = image_elements(16, [4, 5, 3], true);
//!     let one = digest(&run_stage(&stage, &input, 0, 4, 7)?);
//!     let two = digest(&run_stage(&stage, &input, 3, 5, 7)?);
//!     assert_eq!(one, two, "the same at any parallelism and chunk size");
//!     Ok(())
//! }
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use sluice_core::prelude::MapChunksSpec;
use sluice_core::{Dataset, Element, ElementId, NumParallel, Options, Tensor, TensorData, Value};

use crate::error::{Error, Result};
use crate::stage::PluginStage;

/// The native build of plugin crate `crate_name` (underscores) that cargo writes beside the
/// current executable when the crate is a dev-dependency of the test or bench being run.
pub fn cdylib_beside_exe(crate_name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| Error::Load {
        path: PathBuf::from(crate_name),
        message: format!("cannot find the current executable: {e}"),
    })?;
    let path = exe
        .parent()
        .map(|dir| {
            dir.join(format!(
                "{}{crate_name}{}",
                std::env::consts::DLL_PREFIX,
                std::env::consts::DLL_SUFFIX
            ))
        })
        .unwrap_or_default();
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::Load {
            path,
            message: format!(
                "no such file: cargo builds it beside the test binary when `{crate_name}` is \
                 a dev-dependency"
            ),
        })
    }
}

/// `n` elements, each an `image` of `shape` (`u8`, or `f32` in `[0, 1]`) with varied pixels
/// and a `label` (`i64`), ids `(0, i)`.
pub fn image_elements(n: usize, shape: [usize; 3], u8_pixels: bool) -> Vec<Element> {
    let len = shape.iter().product::<usize>();
    (0..n)
        .map(|i| {
            let pixel = |j: usize| ((i * 37 + j * 11) % 256) as u8;
            let data = if u8_pixels {
                TensorData::U8((0..len).map(pixel).collect::<Vec<_>>().into())
            } else {
                TensorData::F32(
                    (0..len)
                        .map(|j| f32::from(pixel(j)) / 255.0)
                        .collect::<Vec<_>>()
                        .into(),
                )
            };
            Element::new(ElementId::new(0, i as u64))
                .with("image", Tensor::new(&shape, data).expect("shape matches"))
                .with(
                    "label",
                    Tensor::new(&[], TensorData::I64(vec![i as i64 % 3].into())).expect("a scalar"),
                )
        })
        .collect()
}

/// Runs `stage` over `input` (`threads` 0: sequential), `chunk` elements per call, with
/// pipeline seed `seed`.
pub fn run_stage(
    stage: &Arc<PluginStage>,
    input: &[Element],
    threads: usize,
    chunk: usize,
    seed: u64,
) -> sluice_core::Result<Vec<Element>> {
    let parallel = if threads == 0 {
        NumParallel::Sequential
    } else {
        NumParallel::Fixed(threads)
    };
    stage
        .apply(
            &Dataset::from_elements(input.to_vec()),
            MapChunksSpec::new(chunk).num_parallel(parallel),
        )
        .with_options(Options::default().with_seed(seed))
        .collect()
}

/// One line per element: its id, and each feature's name, shape and values, floats as bit
/// patterns (so equal digests mean bit-identical elements, NaNs included).
pub fn digest(elements: &[Element]) -> Vec<String> {
    elements
        .iter()
        .map(|e| {
            let mut names: Vec<&str> = e.iter().map(|(n, _)| n).collect();
            names.sort_unstable();
            let features: Vec<String> = names
                .into_iter()
                .map(|name| match e.get(name) {
                    Some(Value::Dense(t)) => {
                        let values = match t.data() {
                            TensorData::F32(v) => {
                                format!("{:?}", v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                            }
                            TensorData::F64(v) => {
                                format!("{:?}", v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                            }
                            other => format!("{other:?}"),
                        };
                        format!("{name} {:?} {values}", t.shape())
                    }
                    other => format!("{name} {other:?}"),
                })
                .collect();
            format!("{} | {}", e.id(), features.join(" | "))
        })
        .collect()
}
