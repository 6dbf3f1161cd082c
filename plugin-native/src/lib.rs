//! `sluice-plugin-native`: the native plugin host of Sluice. [`NativePlugin`] loads a
//! C-ABI shared library built with `sluice-sdk` (`.so`, `.dylib`, `.dll`) with libloading
//! and is a [`Backend`](sluice_plugin_host::Backend) of the host core
//! (`sluice-plugin-host`): its stage, wire format, contracts and errors are the core's.
//! Users reach it through the `sluice-plugins` facade.
//!
//! ```no_run
//! use sluice_core::prelude::*;
//! use sluice_plugin_host::PluginStage;
//! use sluice_plugin_native::NativePlugin;
//!
//! # fn main() -> anyhow::Result<()> {
//! let plugin = NativePlugin::load("target/release/libsluice_example_noise.so")?;
//! println!("{} {} ({:?})", plugin.info().name, plugin.info().version, plugin.info().kind);
//! let stage = PluginStage::new(plugin, &serde_json::json!({ "sigma": 0.05 }))?;
//! let noisy = stage.apply(&Dataset::range(0, 10), MapChunksSpec::new(64).num_parallel(2));
//! # Ok(())
//! # }
//! ```
//!
//! - The ABI version is read before anything else; a wrong version or a missing symbol is
//!   refused at load time, naming the file and both versions
//!   ([`Error::AbiVersion`](sluice_plugin_host::Error::AbiVersion),
//!   [`Error::MissingSymbol`](sluice_plugin_host::Error::MissingSymbol)).
//! - A library is never unloaded while a stage or instance uses it; unloading is not
//!   supported.
//! - A native plugin runs inside the host process: it cannot be sandboxed or limited (the
//!   WASM host, `sluice-plugin-wasm`, can).
#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod plugin;

pub use plugin::NativePlugin;
