//! `sluice-sdk`: write Sluice plugins (transforms and augmentations) once, build them as a
//! native cdylib or for `wasm32-unknown-unknown`, and run them in any Sluice pipeline.
//!
//! A plugin is a type implementing [`Plugin`]; [`export_plugin!`] exports the stable C ABI
//! that the hosts load (`sluice-plugin-native` for native libraries, `sluice-plugin-wasm` for
//! WASM modules; `sluice-plugins` brings both). The ABI is written down byte by byte in `sdk/ABI.md`, so a plugin can also be
//! written in any language that produces a C-ABI library or a wasm32 module.
//!
//! ```
//! use sluice_sdk::{Config, Data, DType, Element, Feature, Kind, Plugin, PluginInfo, Result, Rng};
//!
//! /// Adds `delta` to every value of the `f32` feature `x`.
//! struct AddDelta {
//!     delta: f32,
//! }
//!
//! impl Plugin for AddDelta {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("add_delta", "0.1.0", Kind::Map)
//!             .input(Feature::new("x").dtype(DType::F32))
//!             .output(Feature::new("x").dtype(DType::F32))
//!     }
//!
//!     fn new(config: &Config) -> Result<Self> {
//!         config.only(&["delta"])?;
//!         Ok(AddDelta { delta: config.get_or("delta", 1.0)? })
//!     }
//!
//!     fn map(&mut self, mut element: Element, _rng: &mut Rng) -> Result<Element> {
//!         if let Some(t) = element.get_mut("x") {
//!             if let Data::F32(values) = &mut t.data {
//!                 values.iter_mut().for_each(|v| *v += self.delta);
//!             }
//!         }
//!         Ok(element)
//!     }
//! }
//!
//! // In a plugin crate (`crate-type = ["cdylib", "rlib"]`):
//! // sluice_sdk::export_plugin!(AddDelta);
//!
//! // The same code, called in-process as a host would call it:
//! let info = AddDelta::info();
//! let mut plugin = AddDelta::new(&Config::from_bytes(br#"{"delta": 0.5}"#)?)?;
//! let input = sluice_sdk::wire::encode_batch(&[Element {
//!     tensors: vec![sluice_sdk::Tensor::new("x", vec![2], Data::F32(vec![1.0, 2.0]))?],
//! }]);
//! let output = sluice_sdk::process(&mut plugin, &info, &input, &[42])?;
//! let out = sluice_sdk::wire::decode_batch(&output)?;
//! assert_eq!(out[0].element.as_ref().unwrap().get("x").unwrap().data, Data::F32(vec![1.5, 2.5]));
//! # Ok::<(), sluice_sdk::Error>(())
//! ```
//!
//! **Cost.** Through the wire format (WASM hosts, version-1 hosts, byte strings, `flat_map`
//! and `batch`), a call's elements are copied across the boundary and back: four copies per
//! tensor on top of the plugin's own work. A native host of ABI version 2 calls `map` and
//! `filter` plugins through the *lent path* instead ([`lent`]): implement
//! [`Plugin::map_lent`] to read the inputs where the host keeps them and write your outputs
//! straight into the host's buffers, and nothing is copied (the default `map_lent`, for a
//! plugin that implements only `map`, copies twice). Either way, declare only the features
//! you need as `inputs` (only those are sent), and leave the elements you do not change
//! unwritten.
//!
//! - [`abi`]: the version, symbol names and status codes, and the lent path's structures.
//! - [`wire`]: the element wire format (batches of named tensors).
//! - [`lent`]: the lent path's views ([`ElementRef`]) and output buffers ([`Outputs`]).
//! - [`Plugin`], [`PluginInfo`], [`Config`], [`Rng`]: the author's API.
//! - [`export_plugin!`]: the exported entry points (the crate's only `unsafe` code is in
//!   [`export`] and [`lent`], each block with its reasoning).
#![deny(unsafe_code)]

pub mod abi;
mod error;
#[allow(unsafe_code)]
pub mod export;
#[allow(unsafe_code)]
pub mod lent;
mod plugin;
pub mod wire;

pub use error::{Error, Result};
pub use lent::{DataMut, DataRef, ElementRef, Outputs, TensorRef};
pub use plugin::{
    Config, Feature, Kind, Plugin, PluginInfo, Rng, map_lent_via_map, process, process_into,
    run_map_lent,
};
pub use wire::{DType, Data, Element, Entry, Tensor};
