//! `sluice-sdk-component`: a plugin written against `sluice-sdk` (`impl Plugin`) exported as
//! a WebAssembly component of the Sluice transform worlds (`sdk/wit/sluice.wit`,
//! `sdk/WIT.md`), with no imports. The same type can be exported through the core ABI
//! (`sluice_sdk::export_plugin!`) in another crate: the outputs are the same, bit for bit.
//!
//! ```no_run
//! // A crate with `crate-type = ["cdylib"]`, built for wasm32 and made a component by
//! // `sluice-guest-build` (wit-component):
//! use sluice_sdk::{Config, Element, Kind, Plugin, PluginInfo, Result, Rng};
//!
//! /// Passes every element on unchanged.
//! pub struct Identity;
//!
//! impl Plugin for Identity {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("identity", "0.1.0", Kind::Map)
//!     }
//!     fn new(_config: &Config) -> Result<Self> {
//!         Ok(Identity)
//!     }
//!     fn map(&mut self, element: Element, _rng: &mut Rng) -> Result<Element> {
//!         Ok(element)
//!     }
//! }
//!
//! sluice_sdk_component::export_map!(Identity); // the `map` world
//! // sluice_sdk_component::export_filter!(MyFilter); // the `filter` world
//! // sluice_sdk_component::export_batch!(MyBatch);   // the `batch` world (any kind)
//! # fn main() {}
//! ```
//!
//! | World | Adapter | What the host calls | The plugin's method |
//! |---|---|---|---|
//! | `map` | [`Map`] | `map(element, seed)` per element | [`Plugin::map`](sluice_sdk::Plugin::map) |
//! | `filter` | [`Filter`] | `keep(element, seed)` per element | [`Plugin::filter`](sluice_sdk::Plugin::filter) |
//! | `batch` | [`Batch`] | `process(elements, seeds)` per chunk | the method of its kind, as `sluice_sdk::process` runs it |
//!
//! Tensors cross the boundary as typed lists (`list<u8>`, `list<f32>`, ...): the canonical
//! ABI writes the host's values into the guest's memory once, and the adapter hands them to
//! the plugin as the `Vec`s they already are (no copy); the plugin's output `Vec`s are read
//! back by the host once.
#![deny(unsafe_code)]

use std::cell::RefCell;
use std::marker::PhantomData;

use sluice_sdk::{Config, Kind, Plugin, Rng};

/// The bindings of the `map` world.
#[allow(missing_docs, unreachable_pub, unsafe_code, clippy::all)]
pub mod map {
    wit_bindgen::generate!({
        path: "../sdk/wit",
        world: "map-transform",
        pub_export_macro: true,
        export_macro_name: "export_map_world",
        default_bindings_module: "sluice_sdk_component::map",
    });
}

/// The bindings of the `filter` world.
#[allow(missing_docs, unreachable_pub, unsafe_code, clippy::all)]
pub mod filter {
    wit_bindgen::generate!({
        path: "../sdk/wit",
        world: "filter-transform",
        pub_export_macro: true,
        export_macro_name: "export_filter_world",
        default_bindings_module: "sluice_sdk_component::filter",
    });
}

/// The bindings of the `batch` world.
#[allow(missing_docs, unreachable_pub, unsafe_code, clippy::all)]
pub mod batch {
    wit_bindgen::generate!({
        path: "../sdk/wit",
        world: "batch-transform",
        pub_export_macro: true,
        export_macro_name: "export_batch_world",
        default_bindings_module: "sluice_sdk_component::batch",
    });
}

/// The `map-transform` world for plugin `P` (of kind `map`): one call per element.
pub struct Map<P>(PhantomData<P>);

/// The `filter-transform` world for plugin `P` (of kind `filter`): one call per element.
pub struct Filter<P>(PhantomData<P>);

/// The `batch-transform` world for plugin `P`, of any kind: one call per chunk.
pub struct Batch<P>(PhantomData<P>);

/// One instance of a plugin behind a component resource. The host never calls one instance
/// from two threads at once (a component instance runs on one thread); the resource's
/// methods take `&self`, so the plugin sits in a `RefCell`.
pub struct Instance<P> {
    plugin: RefCell<P>,
    /// The plugin's metadata: the contracts checked on every call.
    info: sluice_sdk::PluginInfo,
}

/// The conversions between the SDK's types and one world's generated types (each world's
/// bindings have their own copy of the `types` interface).
macro_rules! conversions {
    ($world:ident) => {
        pub(crate) mod $world {
            use crate::$world::sluice::plugin::types as wit;
            use sluice_sdk as sdk;

            pub(crate) fn error(e: sdk::Error) -> wit::Error {
                match e {
                    sdk::Error::InvalidInput(m) => wit::Error::InvalidInput(m),
                    sdk::Error::Config(m) => wit::Error::InvalidConfig(m),
                    sdk::Error::Plugin(m) => wit::Error::PluginError(m),
                    wire @ sdk::Error::Wire { .. } => wit::Error::InvalidInput(wire.to_string()),
                    // Only the lent path (native hosts) may decline; a component's calls
                    // have no other path to take.
                    declined @ sdk::Error::Declined(_) => {
                        wit::Error::PluginError(declined.to_string())
                    }
                }
            }

            fn dtype(d: sdk::DType) -> wit::Dtype {
                match d {
                    sdk::DType::U8 => wit::Dtype::U8,
                    sdk::DType::I32 => wit::Dtype::I32,
                    sdk::DType::I64 => wit::Dtype::I64,
                    sdk::DType::F32 => wit::Dtype::F32,
                    sdk::DType::F64 => wit::Dtype::F64,
                    sdk::DType::Bytes => wit::Dtype::Bytes,
                }
            }

            fn feature(f: sdk::Feature) -> wit::Feature {
                wit::Feature {
                    name: f.name,
                    dtype: f.dtype.map(dtype),
                    rank: f.rank,
                }
            }

            pub(crate) fn info(i: sdk::PluginInfo) -> wit::PluginInfo {
                wit::PluginInfo {
                    name: i.name,
                    version: i.version,
                    kind: match i.kind {
                        sdk::Kind::Map => wit::Kind::Map,
                        sdk::Kind::Filter => wit::Kind::Filter,
                        sdk::Kind::FlatMap => wit::Kind::FlatMap,
                        sdk::Kind::Batch => wit::Kind::Batch,
                    },
                    description: i.description,
                    inputs: i.inputs.into_iter().map(feature).collect(),
                    outputs: i.outputs.into_iter().map(feature).collect(),
                }
            }

            /// The host's element as the SDK's (the values move: no copy), checking each
            /// tensor's count against its shape.
            pub(crate) fn element(e: wit::Element) -> sdk::Result<sdk::Element> {
                let tensors = e
                    .into_iter()
                    .map(|t| {
                        let data = match t.data {
                            wit::TensorData::U8(v) => sdk::Data::U8(v),
                            wit::TensorData::I32(v) => sdk::Data::I32(v),
                            wit::TensorData::I64(v) => sdk::Data::I64(v),
                            wit::TensorData::F32(v) => sdk::Data::F32(v),
                            wit::TensorData::F64(v) => sdk::Data::F64(v),
                            wit::TensorData::Bytes(v) => sdk::Data::Bytes(v),
                        };
                        sdk::Tensor::new(t.name, t.shape, data)
                            .map_err(|e| sdk::Error::invalid_input(e.to_string()))
                    })
                    .collect::<sdk::Result<Vec<_>>>()?;
                Ok(sdk::Element { tensors })
            }

            /// The SDK's element as the host's (the values move).
            #[allow(dead_code)] // a filter gives no elements back
            pub(crate) fn to_wit(e: sdk::Element) -> wit::Element {
                e.tensors
                    .into_iter()
                    .map(|t| wit::Tensor {
                        name: t.name,
                        shape: t.shape,
                        data: match t.data {
                            sdk::Data::U8(v) => wit::TensorData::U8(v),
                            sdk::Data::I32(v) => wit::TensorData::I32(v),
                            sdk::Data::I64(v) => wit::TensorData::I64(v),
                            sdk::Data::F32(v) => wit::TensorData::F32(v),
                            sdk::Data::F64(v) => wit::TensorData::F64(v),
                            sdk::Data::Bytes(v) => wit::TensorData::Bytes(v),
                        },
                    })
                    .collect()
            }
        }
    };
}

mod convert {
    conversions!(map);
    conversions!(filter);
    conversions!(batch);
}

/// Checks `element` (input `index`) against the plugin's declared inputs.
fn check_inputs(
    info: &sluice_sdk::PluginInfo,
    element: &sluice_sdk::Element,
    index: usize,
) -> sluice_sdk::Result<()> {
    info.inputs.iter().try_for_each(|f| f.check(element, index))
}

/// Checks an output of input `parent` against the plugin's declared outputs.
fn check_outputs(
    info: &sluice_sdk::PluginInfo,
    element: &sluice_sdk::Element,
    parent: usize,
) -> sluice_sdk::Result<()> {
    info.outputs.iter().try_for_each(|f| {
        f.check(element, parent).map_err(|err| {
            sluice_sdk::Error::plugin(format!("the plugin broke its output contract: {err}"))
        })
    })
}

fn new<P: Plugin>(config: &str) -> sluice_sdk::Result<Instance<P>> {
    let config = Config::from_bytes(config.as_bytes())?;
    Ok(Instance {
        plugin: RefCell::new(P::new(&config)?),
        info: P::info(),
    })
}

mod map_world {
    use super::*;
    use crate::map::exports::sluice::plugin::map_element::{self as wit, GuestInstance};
    use crate::map::sluice::plugin::types::{Element, Error, PluginInfo};

    impl<P: Plugin> crate::map::Guest for Map<P> {
        fn info() -> PluginInfo {
            convert::map::info(P::info())
        }
    }

    impl<P: Plugin> wit::Guest for Map<P> {
        type Instance = Instance<P>;
    }

    impl<P: Plugin> GuestInstance for Instance<P> {
        fn create(config: String) -> Result<wit::Instance, Error> {
            new::<P>(&config)
                .map(wit::Instance::new)
                .map_err(convert::map::error)
        }

        fn map(&self, element: Element, seed: u64) -> Result<Element, Error> {
            let info = &self.info;
            let run = || {
                let element = convert::map::element(element)?;
                check_inputs(info, &element, 0)?;
                let out = self.plugin.borrow_mut().map(element, &mut Rng::new(seed))?;
                check_outputs(info, &out, 0)?;
                Ok(convert::map::to_wit(out))
            };
            run().map_err(convert::map::error)
        }
    }
}

mod filter_world {
    use super::*;
    use crate::filter::exports::sluice::plugin::filter_element::{self as wit, GuestInstance};
    use crate::filter::sluice::plugin::types::{Element, Error, PluginInfo};

    impl<P: Plugin> crate::filter::Guest for Filter<P> {
        fn info() -> PluginInfo {
            convert::filter::info(P::info())
        }
    }

    impl<P: Plugin> wit::Guest for Filter<P> {
        type Instance = Instance<P>;
    }

    impl<P: Plugin> GuestInstance for Instance<P> {
        fn create(config: String) -> Result<wit::Instance, Error> {
            new::<P>(&config)
                .map(wit::Instance::new)
                .map_err(convert::filter::error)
        }

        fn keep(&self, element: Element, seed: u64) -> Result<bool, Error> {
            let info = &self.info;
            let run = || {
                let element = convert::filter::element(element)?;
                check_inputs(info, &element, 0)?;
                self.plugin
                    .borrow_mut()
                    .filter(&element, &mut Rng::new(seed))
            };
            run().map_err(convert::filter::error)
        }
    }
}

mod batch_world {
    use super::*;
    use crate::batch::exports::sluice::plugin::batch_process::{self as wit, GuestInstance};
    use crate::batch::sluice::plugin::types::{Element, Error, Output, PluginInfo};

    impl<P: Plugin> crate::batch::Guest for Batch<P> {
        fn info() -> PluginInfo {
            convert::batch::info(P::info())
        }
    }

    impl<P: Plugin> wit::Guest for Batch<P> {
        type Instance = Instance<P>;
    }

    impl<P: Plugin> GuestInstance for Instance<P> {
        fn create(config: String) -> Result<wit::Instance, Error> {
            new::<P>(&config)
                .map(wit::Instance::new)
                .map_err(convert::batch::error)
        }

        fn process(&self, elements: Vec<Element>, seeds: Vec<u64>) -> Result<Vec<Output>, Error> {
            let mut plugin = self.plugin.borrow_mut();
            process(&mut *plugin, &self.info, elements, &seeds).map_err(convert::batch::error)
        }
    }

    /// One call, as `sluice_sdk::process` runs it on a wire buffer.
    fn process<P: Plugin>(
        plugin: &mut P,
        info: &sluice_sdk::PluginInfo,
        elements: Vec<Element>,
        seeds: &[u64],
    ) -> sluice_sdk::Result<Vec<Output>> {
        if elements.len() != seeds.len() {
            return Err(sluice_sdk::Error::invalid_input(format!(
                "{} elements but {} seeds",
                elements.len(),
                seeds.len()
            )));
        }
        let n = elements.len();
        let mut inputs = Vec::with_capacity(n);
        for (i, e) in elements.into_iter().enumerate() {
            let e = convert::batch::element(e)?;
            check_inputs(info, &e, i)?;
            inputs.push(e);
        }
        let mut rngs: Vec<Rng> = seeds.iter().map(|&s| Rng::new(s)).collect();
        let whole = |parent: usize, e: sluice_sdk::Element| -> sluice_sdk::Result<Output> {
            check_outputs(info, &e, parent)?;
            Ok(Output {
                parent: parent as u32,
                element: Some(convert::batch::to_wit(e)),
            })
        };
        let mut out = Vec::new();
        match info.kind {
            Kind::Map => {
                for (i, (e, rng)) in inputs.into_iter().zip(&mut rngs).enumerate() {
                    out.push(whole(i, plugin.map(e, rng)?)?);
                }
            }
            Kind::Filter => {
                for (i, (e, rng)) in inputs.iter().zip(&mut rngs).enumerate() {
                    if plugin.filter(e, rng)? {
                        out.push(Output {
                            parent: i as u32,
                            element: None,
                        });
                    }
                }
            }
            Kind::FlatMap => {
                for (i, (e, rng)) in inputs.into_iter().zip(&mut rngs).enumerate() {
                    for o in plugin.flat_map(e, rng)? {
                        out.push(whole(i, o)?);
                    }
                }
            }
            Kind::Batch => {
                let mut last = 0;
                for (parent, e) in plugin.batch(inputs, &mut rngs)? {
                    if parent as usize >= n || parent < last {
                        return Err(sluice_sdk::Error::plugin(format!(
                            "batch output names parent {parent} (inputs: {n}, previous parent \
                             {last})"
                        )));
                    }
                    last = parent;
                    out.push(whole(parent as usize, e)?);
                }
            }
        }
        Ok(out)
    }
}

/// Exports plugin type `$plugin` (a `sluice_sdk::Plugin` of kind `map`) as the component
/// world `sluice:plugin/map-transform`. Invoke once, in a `cdylib` crate.
#[macro_export]
macro_rules! export_map {
    ($plugin:ty) => {
        // Exported in wasm32 builds only: a native build of the crate (its `cargo test`)
        // links without the component's export names, which native linkers refuse.
        #[cfg(target_arch = "wasm32")]
        type __SluiceMapComponent = $crate::Map<$plugin>;
        #[cfg(target_arch = "wasm32")]
        $crate::map::export_map_world!(__SluiceMapComponent with_types_in $crate::map);
    };
}

/// Exports plugin type `$plugin` (of kind `filter`) as the component world
/// `sluice:plugin/filter-transform`. Invoke once, in a `cdylib` crate.
#[macro_export]
macro_rules! export_filter {
    ($plugin:ty) => {
        // Exported in wasm32 builds only: a native build of the crate (its `cargo test`)
        // links without the component's export names, which native linkers refuse.
        #[cfg(target_arch = "wasm32")]
        type __SluiceFilterComponent = $crate::Filter<$plugin>;
        #[cfg(target_arch = "wasm32")]
        $crate::filter::export_filter_world!(__SluiceFilterComponent with_types_in $crate::filter);
    };
}

/// Exports plugin type `$plugin` (of any kind) as the component world
/// `sluice:plugin/batch-transform`: one call per chunk. Invoke once, in a `cdylib` crate.
#[macro_export]
macro_rules! export_batch {
    ($plugin:ty) => {
        // Exported in wasm32 builds only: a native build of the crate (its `cargo test`)
        // links without the component's export names, which native linkers refuse.
        #[cfg(target_arch = "wasm32")]
        type __SluiceBatchComponent = $crate::Batch<$plugin>;
        #[cfg(target_arch = "wasm32")]
        $crate::batch::export_batch_world!(__SluiceBatchComponent with_types_in $crate::batch);
    };
}
