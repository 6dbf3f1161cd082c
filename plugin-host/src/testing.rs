//! Helpers for testing plugins: where cargo put a plugin's native build, sample image
//! elements, running a plugin stage, a bit-exact digest of elements to compare two runs
//! (a native and a WASM build, two thread counts, two chunk sizes, the lent and the wire
//! path), and a [`Spy`] on a backend's calls (which memory crossed the boundary, for tests
//! that count copies).
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
use std::sync::{Arc, Mutex, PoisonError};

use sluice_core::prelude::MapChunksSpec;
use sluice_core::{Dataset, Element, ElementId, NumParallel, Options, Tensor, TensorData, Value};
use sluice_sdk::PluginInfo;

use crate::backend::{Backend, CallFailure, Instance, Lent};
use crate::error::{Error, Result};
use crate::lent::LentCall;
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

/// What a [`Spy`] saw of one call: the memory that crossed the boundary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// Lent path: per element, each lent tensor's name and the address of its values (the
    /// pipeline's own buffers, if nothing was copied on the way in).
    pub lent: Vec<Vec<(String, usize)>>,
    /// Lent path: the output buffers the host handed out (element, name, address of the
    /// values).
    pub allocated: Vec<(u32, String, usize)>,
    /// Lent path: how the call ended (`None` for a failure).
    pub lent_outcome: Option<Lent>,
    /// Wire path: the input batch buffer's address and bytes (copied for the test).
    pub wire_in: Option<(usize, Vec<u8>)>,
    /// Wire path: the output batch buffer's address and bytes (copied for the test).
    pub wire_out: Option<(usize, Vec<u8>)>,
}

/// A backend that records every call of its instances ([`Seen`]) and passes it on to the
/// backend it wraps: for tests that check which memory a call lends, allocates or copies.
pub struct Spy {
    inner: Arc<dyn Backend>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Spy {
    /// A spy on `inner`.
    pub fn new(inner: Arc<dyn Backend>) -> Arc<Spy> {
        Arc::new(Spy {
            inner,
            seen: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// The calls seen so far, in order, and forgets them.
    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Backend for Spy {
    fn info(&self) -> &PluginInfo {
        self.inner.info()
    }

    fn source(&self) -> String {
        format!("spy on {}", self.inner.source())
    }

    fn instantiate(&self, config: &[u8]) -> Result<Box<dyn Instance>> {
        Ok(Box::new(SpyInstance {
            inner: self.inner.instantiate(config)?,
            seen: Arc::clone(&self.seen),
        }))
    }

    fn lends(&self) -> bool {
        self.inner.lends()
    }
}

struct SpyInstance {
    inner: Box<dyn Instance>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl SpyInstance {
    fn record(&self, seen: Seen) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(seen);
    }
}

impl Instance for SpyInstance {
    fn call(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure> {
        let mut wire_out = None;
        let result = self.inner.call(input, seeds, &mut |out| {
            wire_out = Some((out.as_ptr() as usize, out.to_vec()));
            output(out);
        });
        self.record(Seen {
            wire_in: Some((input.as_ptr() as usize, input.to_vec())),
            wire_out,
            ..Seen::default()
        });
        result
    }

    fn call_lent(&mut self, call: &mut LentCall<'_>) -> std::result::Result<Lent, CallFailure> {
        let result = self.inner.call_lent(call);
        self.record(Seen {
            lent: call
                .lent()
                .iter()
                .map(|e| e.iter().map(|&(n, a)| (n.to_string(), a)).collect())
                .collect(),
            allocated: call.allocated(),
            lent_outcome: result.as_ref().ok().cloned(),
            ..Seen::default()
        });
        result
    }
}
