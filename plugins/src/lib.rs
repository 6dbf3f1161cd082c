//! `sluice-plugins`: run plugins built with `sluice-sdk` in Sluice pipelines. The crate
//! users and `sluice run` depend on: [`Loader`], the loader of pipeline files' plugin
//! stages, which picks the host by the plugin file's extension, and the plugin hosts in
//! one place:
//!
//! | Crate | Re-exported as | What |
//! |---|---|---|
//! | `sluice-plugin-host` | [`host`], and its main items here | what every host shares: [`Backend`], [`Instance`], [`PluginStage`], the ABI and metadata checks, the wire format, the contracts, [`Error`], [`testing`] |
//! | `sluice-plugin-native` | [`native`], [`NativePlugin`] | C-ABI shared libraries (`.so`, `.dylib`, `.dll`), loaded with libloading |
//! | `sluice-plugin-wasm` | [`wasm`], [`WasmPlugin`] | `wasm32` modules (`.wasm`, `.wat`) sandboxed in wasmtime, with memory and time limits |
//!
//! ```no_run
//! use sluice_core::prelude::*;
//! use sluice_plugins::{NativePlugin, PluginStage};
//!
//! # fn main() -> anyhow::Result<()> {
//! let plugin = NativePlugin::load("target/release/libsluice_example_noise.so")?;
//! println!("{} {} ({:?})", plugin.info().name, plugin.info().version, plugin.info().kind);
//! let stage = PluginStage::new(plugin, &serde_json::json!({ "sigma": 0.05 }))?;
//! let images = Dataset::tfrecord(["data/train.tfrecord-*"])?
//!     .parse_example(ParseExampleSpec::new([("image", FeatureSpec::scalar(FeatureType::String))]))
//!     .image_ops(ImageOpsSpec::new(vec![
//!         ImageOp::Decode { channels: Some(3) },
//!         ImageOp::ToUnitF32,
//!     ]));
//! // One plugin call per 64 elements, on two threads; results stay in order.
//! let noisy = stage.apply(&images, MapChunksSpec::new(64).num_parallel(2));
//! for element in noisy.iter()? {
//!     let element = element?; // a failing call is an error naming the plugin and elements
//! }
//! # Ok(())
//! # }
//! ```
//!
//! - A wrong ABI version or a missing symbol is refused at load time, naming the file and
//!   both versions ([`Error::AbiVersion`], [`Error::MissingSymbol`]).
//! - A plugin's error status or panic (caught by the SDK at the boundary) fails the call's
//!   elements with [`Error::Call`] (plugin name, element ids, message); the pipeline's
//!   error policy decides whether that ends the run or skips them. The host goes on.
//! - Libraries are never unloaded while a stage or instance uses them; unloading is not
//!   supported.
//! - Elements must meet the plugin's declared input contract ([`Error::Contract`]).
//! - Pipeline files: [`Loader`] loads the plugin of a `kind = "plugin"` stage, chosen by
//!   the file's extension; pass it to `PipelineFile::build_with`.
#![deny(unsafe_code)]

mod loader;

pub use loader::{Loader, loaded};
pub use sluice_plugin_host::{
    Backend, CallFailure, Error, InProcess, Instance, PluginStage, Result, abi, contract, metadata,
    testing, wire,
};
pub use sluice_plugin_native::NativePlugin;
pub use sluice_plugin_wasm::{CacheOutcome, WasmLimits, WasmOptions, WasmPlugin};

/// The host core (`sluice-plugin-host`).
pub use sluice_plugin_host as host;
/// The native host (`sluice-plugin-native`).
pub use sluice_plugin_native as native;
/// The WASM host (`sluice-plugin-wasm`): also its engine, compile cache and default limits.
pub use sluice_plugin_wasm as wasm;
